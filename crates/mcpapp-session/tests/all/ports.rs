//! Ports: client sessions sharing one upstream session with the gateway's own client, each
//! seeing only its own answers under its own ids, whichever era each side speaks; and what
//! happens to them when the link closes.

use std::time::Duration;

use mcpapp_manifest::Era;
use mcpapp_session::{CallOutcome, EraChoice, PortError, PortReply, closed_reason};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::{PATIENCE, call, exchange, initialize, json_of, msg, open};

#[tokio::test]
async fn ports_of_either_era_share_an_upstream_of_either_era_and_see_only_their_own_answers() {
    // A server of the initialize era found by the probe, a dual-era server found by the
    // probe, and a dual-era server spoken to with initialize at once.
    for (legacy_only, choice, era) in [
        (true, EraChoice::Auto, Era::Legacy),
        (false, EraChoice::Auto, Era::Modern),
        (false, EraChoice::Legacy, Era::Legacy),
    ] {
        let case = format!("legacy_only={legacy_only}, {choice:?}");
        let session = open(legacy_only, choice, PATIENCE).await;
        let connection = &session.connection;
        assert_eq!(connection.era, era, "{case}");

        let (first, answer) = connection
            .open_port(&initialize("2025-06-18"))
            .await
            .unwrap();
        let answer = json_of(&answer);
        assert_eq!(answer["id"], 0, "{case}");
        assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{case}");
        assert_eq!(
            answer["result"]["serverInfo"]["name"], "session-test-server",
            "{case}"
        );
        assert_eq!(first.protocol_version(), "2025-06-18");
        let (second, _) = connection
            .open_port(&initialize("2025-11-25"))
            .await
            .unwrap();

        // Both ports use id 7 at once, while the gateway's own client calls too.
        let mut own = CallToolRequestParams::new("echo");
        own = own.with_arguments(json!({"text": "gateway"}).as_object().unwrap().clone());
        let (a, b, gateway) = tokio::join!(
            exchange(&first, call(json!(7), "echo", "first")),
            exchange(&second, call(json!(7), "echo", "second")),
            connection.client.peer().call_tool(own),
        );
        for (answers, text) in [(a, "first"), (b, "second")] {
            assert_eq!(answers.len(), 1, "{case}: {answers:?}");
            let answer = json_of(&answers[0]);
            assert_eq!(answer["id"], 7, "{case}");
            assert_eq!(answer["result"]["content"][0]["text"], text, "{case}");
        }
        let gateway = gateway.unwrap();
        assert_eq!(
            gateway.content[0].as_text().unwrap().text,
            "gateway",
            "{case}"
        );

        // A modern client's request travels through a port of its own.
        let request = msg(
            json!({"jsonrpc": "2.0", "id": "m1", "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": "modern"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "m", "version": "1"},
                },
            }}),
        );
        let modern = connection.open_modern_port(&request).unwrap();
        let PortReply::Stream(mut stream) = modern.send(request).await.unwrap() else {
            panic!("{case}: the request went upstream")
        };
        let answer = json_of(
            &tokio::time::timeout(PATIENCE, stream.next())
                .await
                .unwrap()
                .unwrap(),
        );
        assert_eq!(answer["id"], "m1", "{case}");
        assert_eq!(answer["result"]["resultType"], "complete", "{case}");
        assert_eq!(answer["result"]["content"][0]["text"], "modern", "{case}");

        connection.shutdown(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn the_gateway_answers_ping_discovery_and_a_second_initialize_itself() {
    let session = open(true, EraChoice::Legacy, PATIENCE).await;
    let (port, _) = session
        .connection
        .open_port(&initialize("2025-11-25"))
        .await
        .unwrap();

    let ping = exchange(
        &port,
        json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    )
    .await;
    assert_eq!(ping.len(), 1);
    assert_eq!(
        json_of(&ping[0]),
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );

    let again = exchange(&port, json_of(&initialize("2025-11-25"))).await;
    assert_eq!(json_of(&again[0])["error"]["code"], -32600);

    let discover = exchange(
        &port,
        json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover"}),
    )
    .await;
    let discover = json_of(&discover[0]);
    assert_eq!(discover["id"], 2);
    let versions = discover["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{discover}");
    assert!(versions.contains(&json!("2025-11-25")), "{discover}");
    session.connection.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn closing_the_link_answers_what_waits_and_ends_every_port() {
    let session = open(true, EraChoice::Legacy, PATIENCE).await;
    let connection = &session.connection;
    let (port, _) = connection
        .open_port(&initialize("2025-11-25"))
        .await
        .unwrap();
    let PortReply::Stream(mut waiting) = port.send(msg(call(json!(1), "wait", ""))).await.unwrap()
    else {
        panic!("the request went upstream")
    };
    // Whether or not the server has it yet, the request waits in the hub until the link goes.
    connection.shutdown(Duration::ZERO).await;

    let answer = tokio::time::timeout(PATIENCE, waiting.next())
        .await
        .unwrap()
        .unwrap();
    let answer = json_of(&answer);
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("the test server ended"), "{message}");
    assert!(waiting.next().await.is_none());

    let reason = closed_reason(&mut connection.closed()).await;
    assert!(reason.contains("the test server ended"), "{reason}");
    let after = port.send(msg(call(json!(2), "echo", "late"))).await;
    assert!(matches!(after, Err(PortError::SessionGone)), "{after:?}");
}

#[tokio::test]
async fn a_request_whose_client_leaves_while_it_is_being_taken_is_cancelled_at_once() {
    let session = open(true, EraChoice::Legacy, PATIENCE).await;
    let connection = &session.connection;
    let (port, _) = connection
        .open_port(&initialize("2025-11-25"))
        .await
        .unwrap();

    // The client leaves after the hub took the request and sent it upstream, before the
    // port read the hub's answer (the window of issue 22's race): it is cancelled upstream at
    // once, not when its timeout (here a minute) runs out.
    let mut sending = Box::pin(port.send(msg(call(json!("late"), "wait", ""))));
    assert!(futures::poll!(sending.as_mut()).is_pending());
    // The hub serves commands in order: once it answers this, it has taken the request.
    let taken = connection.session_stats().await.unwrap();
    assert_eq!(taken.port_requests, 1, "{taken:?}");
    drop(sending);
    let mut cancelled = session.server.cancelled.subscribe();
    tokio::time::timeout(PATIENCE, cancelled.wait_for(|n| *n == 1))
        .await
        .expect("the server was told to stop")
        .unwrap();

    // The client leaves before the hub took it: it never goes upstream.
    let mut sending = Box::pin(port.send(msg(call(json!("early"), "wait", ""))));
    assert!(futures::poll!(sending.as_mut()).is_pending());
    drop(sending);
    let heard = session
        .recorder
        .until(|h| {
            h.calls
                .iter()
                .filter(|c| c.outcome == CallOutcome::Cancelled)
                .count()
                == 2
        })
        .await;
    assert_eq!(heard.timeouts, 0, "{heard:?}");
    let stats = connection.session_stats().await.unwrap();
    assert_eq!(
        (
            stats.port_requests,
            stats.streams,
            stats.deadlines,
            stats.calls
        ),
        (0, 0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(*session.server.cancelled.borrow(), 1);

    // Once the port closes, the session holds nothing of it.
    drop(port);
    let stats = connection.session_stats().await.unwrap();
    assert!(stats.is_idle(), "{stats:?}");
    assert_eq!(stats.ports, 0);
}

/// Opens links to new test servers of every version, or fails to.
#[derive(Debug)]
struct Opener {
    works: bool,
    opened: std::sync::atomic::AtomicUsize,
}

impl mcpapp_session::LinkOpener for Opener {
    fn open(
        &self,
    ) -> Result<
        (
            std::sync::Arc<dyn mcpapp_session::Link>,
            tokio::sync::mpsc::UnboundedReceiver<mcpapp_session::LinkEvent>,
        ),
        String,
    > {
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if !self.works {
            return Err("the endpoint refused".to_owned());
        }
        let (link, events) = crate::PipeLink::connect(crate::TestServer::new(false));
        Ok((link, events))
    }
}

#[tokio::test]
async fn a_modern_app_that_also_speaks_legacy_serves_legacy_ports_on_a_session_of_their_own() {
    for works in [true, false] {
        let session = open(false, EraChoice::Auto, PATIENCE).await;
        let opener = std::sync::Arc::new(Opener {
            works,
            opened: std::sync::atomic::AtomicUsize::new(0),
        });
        let connection = std::sync::Arc::into_inner(session.connection)
            .unwrap()
            .with_legacy_session(opener.clone());
        let connection = std::sync::Arc::new(connection);
        assert_eq!(connection.era, Era::Modern);
        let (first, _) = connection
            .open_port(&initialize("2025-11-25"))
            .await
            .unwrap();
        let (second, _) = connection
            .open_port(&initialize("2025-11-25"))
            .await
            .unwrap();
        let answers = exchange(&second, call(json!(1), "echo", "legacy")).await;
        assert_eq!(
            json_of(&answers[0])["result"]["content"][0]["text"],
            "legacy"
        );
        // Asked once, whatever the answer; the ports are on the legacy session if it opened.
        assert_eq!(opener.opened.load(std::sync::atomic::Ordering::SeqCst), 1);
        let stats = connection.session_stats().await.unwrap();
        assert_eq!(stats.ports, if works { 0 } else { 2 }, "works={works}");
        drop((first, second));
        connection.shutdown(Duration::ZERO).await;
    }
}
