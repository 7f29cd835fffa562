//! 403 `insufficient_scope`: the union of held and challenged scopes, asked for while the app
//! keeps running, and no more than three authorizations without a success.

use mcpapp_oauth::{AppSettings, AuthState, AuthorizeError, Next};
use serde_json::json;

use crate::support::{Harness, Refused, call_tool, text};

/// Authorizations in a row without a success after which the gateway stops asking: the
/// specification's "a few attempts at most", three as the conformance suite allows.
const MAX_AUTHORIZATIONS_WITHOUT_SUCCESS: usize = 3;

#[tokio::test]
async fn more_scope_is_asked_for_as_the_union_and_the_call_then_works() {
    let harness = Harness::start(&[]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "whoami", json!({})).await;
    harness.connect(&app).await;
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();

    match call_tool(&app, &harness.url(), "write_note", json!({"text": "hi"})).await {
        Err(Refused::Next(Next::NeedsMoreScope { scopes, .. })) => {
            assert_eq!(scopes, ["mcp:read", "mcp:write"]);
        }
        other => panic!("expected NeedsMoreScope, got {other:?}"),
    }
    // The app keeps its grant and says what to ask for.
    match app.state() {
        AuthState::Authorized {
            scopes, more_scope, ..
        } => {
            assert_eq!(scopes, ["mcp:read"]);
            assert_eq!(more_scope.unwrap(), ["mcp:read", "mcp:write"]);
        }
        other => panic!("expected Authorized, got {other:?}"),
    }
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();

    let done = harness.connect(&app).await;
    assert_eq!(done.scopes, ["mcp:read", "mcp:write"]);
    let seen = harness.seen().await["seen"].clone();
    assert_eq!(seen["authorize"][1]["scope"], "mcp:read mcp:write");
    let result = call_tool(&app, &harness.url(), "write_note", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "noted: hi");
    assert!(matches!(
        app.state(),
        AuthState::Authorized {
            more_scope: None,
            ..
        }
    ));
    // The same registration served both authorizations.
    assert_eq!(seen["register"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn step_up_stops_after_three_authorizations_without_a_success() {
    let harness = Harness::start(&["--withhold-scope", "mcp:admin"]);
    let app = harness.app(AppSettings::new());
    let _ = call_tool(&app, &harness.url(), "admin_reset", json!({})).await;
    harness.connect(&app).await;
    let mut step_ups = 0;
    let err = loop {
        match call_tool(&app, &harness.url(), "admin_reset", json!({})).await {
            Err(Refused::Next(Next::NeedsMoreScope { scopes, .. })) => {
                assert_eq!(scopes, ["mcp:read", "mcp:admin"]);
                step_ups += 1;
                assert!(step_ups < 10, "no bound");
                harness.connect(&app).await;
            }
            Err(Refused::Next(Next::Fail(err))) => break err,
            other => panic!("expected a step-up or a failure, got {other:?}"),
        }
    };
    assert!(
        matches!(err, AuthorizeError::StepUpExhausted { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("mcp:admin"), "{err}");
    assert_eq!(
        harness.count("authorize").await,
        MAX_AUTHORIZATIONS_WITHOUT_SUCCESS
    );
    // The grant still works for what it covers, and a success lets step-up start over.
    call_tool(&app, &harness.url(), "whoami", json!({}))
        .await
        .unwrap();
    assert!(matches!(
        call_tool(&app, &harness.url(), "admin_reset", json!({})).await,
        Err(Refused::Next(Next::NeedsMoreScope { .. }))
    ));
}
