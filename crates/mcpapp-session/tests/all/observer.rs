//! The session observer: how each `tools/call` ends, through which path, and the requests
//! cancelled upstream or timed out, as the hub reports them.

use std::time::Duration;

use mcpapp_session::{CallOutcome, CallPath, EraChoice, PortReply};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::{Finished, PATIENCE, call, exchange, initialize, json_of, msg, open};

fn finished(tool: &str, path: CallPath, outcome: CallOutcome) -> Finished {
    Finished {
        tool: Some(tool.to_owned()),
        path,
        outcome,
    }
}

#[tokio::test]
async fn the_observer_hears_how_each_call_ends_and_which_path_it_came_through() {
    let session = open(true, EraChoice::Legacy, PATIENCE).await;
    let (port, _) = session
        .connection
        .open_port(&initialize("2025-11-25"))
        .await
        .unwrap();
    assert_eq!(port.call_path(), CallPath::Proxy);

    exchange(&port, call(json!(1), "echo", "hi")).await;
    exchange(&port, call(json!(2), "fail", "")).await;
    port.set_call_path(CallPath::Mcp);
    let unknown = exchange(&port, call(json!(3), "nope", "")).await;
    assert!(json_of(&unknown[0])["error"].is_object(), "{unknown:?}");
    let own = CallToolRequestParams::new("echo")
        .with_arguments(json!({"text": "own"}).as_object().unwrap().clone());
    session
        .connection
        .client
        .peer()
        .call_tool(own)
        .await
        .unwrap();

    let heard = session.recorder.until(|h| h.calls.len() == 4).await;
    assert_eq!(
        heard.calls,
        [
            finished("echo", CallPath::Proxy, CallOutcome::Ok),
            finished("fail", CallPath::Proxy, CallOutcome::Error),
            finished("nope", CallPath::Mcp, CallOutcome::Failed),
            finished("echo", CallPath::Agent, CallOutcome::Ok),
        ]
    );
    assert_eq!((heard.timeouts, heard.cancellations), (0, 0));
    session.connection.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_dropped_stream_is_cancelled_upstream_and_heard_as_cancelled() {
    let session = open(true, EraChoice::Legacy, PATIENCE).await;
    let (port, _) = session
        .connection
        .open_port(&initialize("2025-11-25"))
        .await
        .unwrap();
    let PortReply::Stream(stream) = port.send(msg(call(json!(1), "wait", ""))).await.unwrap()
    else {
        panic!("the request went upstream")
    };
    drop(stream);

    let mut stopped = session.server.cancelled.subscribe();
    tokio::time::timeout(PATIENCE, stopped.wait_for(|n| *n == 1))
        .await
        .unwrap()
        .unwrap();
    let heard = session
        .recorder
        .until(|h| !h.calls.is_empty() && h.cancellations == 1)
        .await;
    assert_eq!(
        heard.calls,
        [finished("wait", CallPath::Proxy, CallOutcome::Cancelled)]
    );
    assert_eq!(heard.timeouts, 0);
    session.connection.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_request_past_its_timeout_gets_an_error_is_cancelled_upstream_and_heard() {
    // A short request timeout: the `wait` tool never answers by itself.
    let session = open(true, EraChoice::Legacy, Duration::from_millis(200)).await;
    let (port, _) = session
        .connection
        .open_port(&initialize("2025-11-25"))
        .await
        .unwrap();
    let answers = exchange(&port, call(json!("slow"), "wait", "")).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    let answer = json_of(&answers[0]);
    assert_eq!(answer["id"], "slow");
    assert_eq!(answer["error"]["code"], -32001);

    let mut stopped = session.server.cancelled.subscribe();
    tokio::time::timeout(PATIENCE, stopped.wait_for(|n| *n == 1))
        .await
        .unwrap()
        .unwrap();
    let heard = session
        .recorder
        .until(|h| !h.calls.is_empty() && h.timeouts == 1)
        .await;
    assert_eq!(
        heard.calls,
        [finished("wait", CallPath::Proxy, CallOutcome::Timeout)]
    );
    assert_eq!(heard.cancellations, 0);
    session.connection.shutdown(Duration::from_secs(1)).await;
}
