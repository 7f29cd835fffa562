//! Elicitations caused by the gateway's own calls reach the embedder's elicitor, with the chat
//! session the call belongs to, for apps of either era over either transport.

use std::sync::{Arc, Mutex};

use mcpapp_manifest::Lifecycle;
use mcpapp_session::{ElicitFuture, ElicitationRequest, Elicitor};
use mcpapp_supervisor::Supervisor;
use mcpapp_testkit::{AppsDir, HttpApp, Over, bin, wait_state};
use rmcp::model::{ElicitResult, ElicitationAction};
use serde_json::json;

use crate::{fast_policy, logging};

/// Accepts every elicitation and remembers who asked, for which session.
#[derive(Default)]
struct Recorder {
    asked: Mutex<Vec<(String, Option<String>)>>,
}

impl Elicitor for Recorder {
    fn elicit(&self, request: ElicitationRequest) -> ElicitFuture {
        self.asked
            .lock()
            .unwrap()
            .push((request.app_id, request.session_id));
        Box::pin(async move {
            let mut answer = ElicitResult::new(ElicitationAction::Accept);
            answer.content = Some(json!({"name": "Lin", "agree": true}));
            Some(answer)
        })
    }
}

#[tokio::test]
async fn an_agent_calls_elicitation_reaches_the_elicitor_with_its_session() {
    logging();
    for era in ["legacy", "modern"] {
        for over in Over::BOTH {
            let apps = AppsDir::new();
            let _server = match over {
                Over::Stdio => {
                    apps.stdio_app("asker", &bin("fixture-app"), &["stdio", "--era", era], "{}");
                    None
                }
                Over::Http => {
                    let server = HttpApp::start("fixture-app", &["--era", era]);
                    apps.http_app("asker", &server.url, "{}");
                    Some(server)
                }
            };
            let recorder = Arc::new(Recorder::default());
            let supervisor = Supervisor::builder()
                .policy(fast_policy())
                .elicitor(recorder.clone())
                .build();
            supervisor.load(&apps.discover());
            let app = supervisor.get("asker").unwrap();
            wait_state(app.watch(), Lifecycle::Running).await;
            let result = app
                .call_tool(
                    "elicit",
                    Some(json!({"message": "name?"}).as_object().unwrap().clone()),
                    Some(json!({"sessionId": "chat-7"}).as_object().unwrap().clone()),
                )
                .await
                .unwrap();
            let text = result.content[0].as_text().unwrap().text.clone();
            assert!(
                text.starts_with("accepted:") && text.contains("Lin"),
                "{era} {over:?}: {text}"
            );
            assert_eq!(
                recorder.asked.lock().unwrap().as_slice(),
                [("asker".to_owned(), Some("chat-7".to_owned()))],
                "{era} {over:?}"
            );
            supervisor.shutdown().await;
        }
    }
}
