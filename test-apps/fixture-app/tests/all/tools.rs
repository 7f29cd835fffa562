//! Every fixture tool over stdio and HTTP, showing it does what the crate doc says.

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequest, CancelledNotificationParam, ClientRequest, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use mcpapp_testkit::{
    Elicit, Event, Over, call_params, over_both_transports, structured, text, within,
};

use crate::support::{Options, client, connect, connect_with};

const VIEW: &str = "ui://fixture/view.html";

over_both_transports!(
    lists_tools_with_their_metadata_and_the_view,
    probes_are_served_only_with_the_flag,
    echo_slow_and_huge_output,
    hang_is_cancelled_and_counted,
    freeze_answers_then_goes_silent,
    image_returns_a_png,
    show_media_returns_text_image_audio_and_meta,
    progress_uses_the_request_token,
    elicit_reports_accept_decline_and_cancel,
    notifications_and_logging,
    echoes_meta_session_env_cwd_and_client_info,
    visibility_and_ui_tools_answer,
    protocol_is_capped_at_2025_11_25,
);

async fn lists_tools_with_their_metadata_and_the_view(kind: Over) {
    let s = connect(kind, &[]).await;
    let tools = within("tools/list", s.client.list_all_tools())
        .await
        .unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected: BTreeSet<&str> = [
        "echo",
        "slow",
        "hang",
        "hangs",
        "cancellations",
        "freeze",
        "huge_output",
        "image",
        "progress",
        "elicit",
        "notify_tools_changed",
        "notify_resources_changed",
        "touch_resource",
        "log",
        "echo_session",
        "echo_meta",
        "get_env",
        "list_env",
        "read_file",
        "get_cwd",
        "client_info",
        "http_counters",
        "app_only_tool",
        "model_only_tool",
        "malformed_visibility_tool",
        "show_fixture_ui",
        "show_media",
        "legacy_ui_tool",
    ]
    .into_iter()
    .collect();
    assert_eq!(names, expected);
    let meta = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(tool.meta.as_ref()).unwrap()
    };
    assert_eq!(
        meta("app_only_tool"),
        json!({"ui": {"visibility": ["app"]}})
    );
    assert_eq!(
        meta("model_only_tool"),
        json!({"ui": {"visibility": ["model"]}})
    );
    assert_eq!(
        meta("malformed_visibility_tool"),
        json!({"ui": {"visibility": "app"}})
    );
    assert_eq!(
        meta("show_fixture_ui"),
        json!({"ui": {"resourceUri": VIEW, "visibility": ["model", "app"]}})
    );
    assert_eq!(meta("legacy_ui_tool"), json!({"ui/resourceUri": VIEW}));
    assert_eq!(meta("show_media"), json!({"ui": {"resourceUri": VIEW}}));
    assert_eq!(meta("echo"), Value::Null);

    let resources = within("resources/list", s.client.list_all_resources())
        .await
        .unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, VIEW);
    assert_eq!(
        resources[0].mime_type.as_deref(),
        Some("text/html;profile=mcp-app")
    );
    let read = within(
        "resources/read",
        s.client.read_resource(ReadResourceRequestParams::new(VIEW)),
    )
    .await
    .unwrap();
    let ResourceContents::TextResourceContents {
        text: html,
        mime_type,
        ..
    } = &read.contents[0]
    else {
        panic!("expected text contents");
    };
    assert_eq!(mime_type.as_deref(), Some("text/html;profile=mcp-app"));
    assert!(html.contains("\"ui/initialize\"") && html.contains("id=\"status\""));
    let missing = within(
        "resources/read",
        s.client
            .read_resource(ReadResourceRequestParams::new("ui://fixture/other.html")),
    )
    .await;
    assert!(missing.unwrap_err().to_string().contains("no resource"));
}

async fn echo_slow_and_huge_output(kind: Over) {
    let s = connect(kind, &[]).await;
    let echoed = s.call("echo", json!({"message": "héllo"})).await;
    assert_eq!(text(&echoed), "héllo");
    assert_eq!(structured(&echoed), &json!({"message": "héllo"}));
    let bad = s.call("echo", json!({})).await;
    assert_eq!(bad.is_error, Some(true), "missing message is a tool error");

    let slow = s.call("slow", json!({"ms": 30})).await;
    assert_eq!(structured(&slow)["sleptMs"], 30);

    let size = 2 * 1024 * 1024 + 7;
    let huge = s.call("huge_output", json!({"bytes": size})).await;
    assert_eq!(huge.content.len(), 1);
    assert_eq!(text(&huge).len(), size);
    let refused = s
        .call("huge_output", json!({"bytes": 65 * 1024 * 1024}))
        .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("at most 67108864"));
}

async fn hang_is_cancelled_and_counted(kind: Over) {
    // The noise line for the hang call tells us the server is inside the tool before we cancel.
    let mut s = connect(kind, &["--stderr-noise", "0"]).await;
    let none = s.call("cancellations", json!({})).await;
    assert_eq!(structured(&none), &json!({"count": 0}));

    let handle = within(
        "send hang",
        s.client.peer().send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(call_params("hang", json!({})))),
            PeerRequestOptions::no_options(),
        ),
    )
    .await
    .unwrap();
    s.app.stderr_line("tool call 2: hang").await;
    let waiting = s
        .call("hangs", json!({"atLeast": 1, "waitMs": 20000}))
        .await;
    assert_eq!(
        structured(&waiting),
        &json!({"hanging": 1, "started": 1, "cancellations": 0})
    );
    within(
        "notifications/cancelled",
        s.client
            .peer()
            .notify_cancelled(CancelledNotificationParam::new(
                Some(handle.id.clone()),
                Some("test cancels".into()),
            )),
    )
    .await
    .unwrap();
    let counted = s
        .call("cancellations", json!({"waitMs": 20000, "atLeast": 1}))
        .await;
    assert_eq!(structured(&counted), &json!({"count": 1}));
    let after = s.call("hangs", json!({})).await;
    assert_eq!(
        structured(&after),
        &json!({"hanging": 0, "started": 1, "cancellations": 1})
    );
}

async fn freeze_answers_then_goes_silent(kind: Over) {
    let mut s = connect(kind, &[]).await;
    let frozen = s.call("freeze", json!({})).await;
    assert_eq!(text(&frozen), "frozen");
    // Proving silence takes a bounded wait; the fixture never answers again.
    let ping = tokio::time::timeout(
        Duration::from_millis(800),
        s.client
            .peer()
            .send_request(ClientRequest::PingRequest(Default::default())),
    )
    .await;
    assert!(ping.is_err(), "ping was answered: {ping:?}");
    let echo = tokio::time::timeout(
        Duration::from_millis(300),
        s.client
            .call_tool(call_params("echo", json!({"message": "hello?"}))),
    )
    .await;
    assert!(echo.is_err(), "echo was answered: {echo:?}");
    assert!(s.app.is_alive());
}

async fn image_returns_a_png(kind: Over) {
    let s = connect(kind, &[]).await;
    let result = s.call("image", json!({})).await;
    assert_eq!(result.content.len(), 2);
    assert_eq!(text(&result), "a 2x2 PNG image");
    let image = result.content[1].as_image().expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 2);
    assert_eq!(&bytes[bytes.len() - 8..bytes.len() - 4], b"IEND");
}

async fn show_media_returns_text_image_audio_and_meta(kind: Over) {
    let s = connect(kind, &[]).await;
    let result = s.call("show_media", json!({})).await;
    let wire = serde_json::to_value(&result).unwrap();
    let types: Vec<&str> = wire["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["text", "image", "audio"], "{wire}");
    assert_eq!(
        wire["content"][0]["text"],
        "media: a 2x2 PNG and a 2 ms WAV tone"
    );
    assert_eq!(wire["content"][1]["mimeType"], "image/png");
    assert_eq!(
        wire["content"][1]["_meta"],
        json!({"fixture/alt": "a 2x2 checkerboard"})
    );
    assert_eq!(wire["content"][2]["mimeType"], "audio/wav");
    let wav = base64::engine::general_purpose::STANDARD
        .decode(wire["content"][2]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(wav.len(), 60);
    assert_eq!((&wav[..4], &wav[8..16]), (&b"RIFF"[..], &b"WAVEfmt "[..]));
    assert_eq!(u32::from_le_bytes(wav[4..8].try_into().unwrap()), 52);
    assert_eq!(&wav[36..40], b"data");
    assert_eq!(u32::from_le_bytes(wav[40..44].try_into().unwrap()), 16);
    assert_eq!(
        wire["structuredContent"],
        json!({"blocks": ["text", "image", "audio"]})
    );
    assert_eq!(
        wire["_meta"],
        json!({"fixture/media": {"kind": "demo", "parts": 3}, "fixture/rendered": false})
    );
}

async fn progress_uses_the_request_token(kind: Over) {
    let mut s = connect(kind, &[]).await;
    let result = s.call("progress", json!({"steps": 3, "delayMs": 5})).await;
    let token = structured(&result)["progressToken"].clone();
    assert_ne!(token, Value::Null, "rmcp always sends a progressToken");
    for step in 1..=3 {
        let Event::Progress(p) = s.next_event().await else {
            panic!("expected progress");
        };
        assert_eq!(serde_json::to_value(&p.progress_token).unwrap(), token);
        assert_eq!(p.progress, f64::from(step));
        assert_eq!(p.total, Some(3.0));
    }
}

async fn elicit_reports_accept_decline_and_cancel(kind: Over) {
    let with = |elicit| Options {
        client: client(elicit),
        ..Options::default()
    };
    let mut accepting = connect_with(
        kind,
        with(Elicit::Accept(json!({"name": "Ada", "agree": true}))),
    )
    .await;
    let accepted = accepting
        .call("elicit", json!({"message": "Who are you?"}))
        .await;
    assert_eq!(text(&accepted), r#"accepted: {"name":"Ada","agree":true}"#);
    let Event::ElicitationAsked { message, schema } = accepting.next_event().await else {
        panic!("expected the elicitation");
    };
    assert_eq!(message, "Who are you?");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["agree"]["type"], "boolean");

    let declining = connect_with(kind, with(Elicit::Decline)).await;
    let declined = declining.call("elicit", json!({"message": "?"})).await;
    assert_eq!(text(&declined), "declined");

    let cancelling = connect_with(kind, with(Elicit::Cancel)).await;
    let cancelled = cancelling.call("elicit", json!({"message": "?"})).await;
    assert_eq!(text(&cancelled), "cancelled");

    let unable = connect(kind, &[]).await;
    let refused = unable.call("elicit", json!({"message": "?"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("did not declare form elicitation"));
}

async fn notifications_and_logging(kind: Over) {
    let mut s = connect(kind, &[]).await;
    let added = s.call("notify_tools_changed", json!({})).await;
    assert_eq!(structured(&added)["added"], "added_tool_1");
    assert!(matches!(s.next_event().await, Event::ToolListChanged));
    let tools = within("tools/list", s.client.list_all_tools())
        .await
        .unwrap();
    assert!(tools.iter().any(|t| t.name == "added_tool_1"));
    let echoed = s.call("added_tool_1", json!({"message": "new"})).await;
    assert_eq!(text(&echoed), "new");

    s.call("notify_resources_changed", json!({})).await;
    assert!(matches!(s.next_event().await, Event::ResourceListChanged));

    s.call(
        "log",
        json!({"level": "warning", "message": "disk almost full"}),
    )
    .await;
    let Event::Log { level, data } = s.next_event().await else {
        panic!("expected a log message");
    };
    assert_eq!(
        (level.as_str(), data),
        ("warning", json!("disk almost full"))
    );
    let bad = s
        .call("log", json!({"level": "loud", "message": "x"}))
        .await;
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("level must be one of"));
}

async fn echoes_meta_session_env_cwd_and_client_info(kind: Over) {
    let dir = std::env::temp_dir().canonicalize().unwrap();
    let s = connect_with(
        kind,
        Options {
            client: client(Elicit::Decline),
            env: vec![("FIXTURE_TEST_VALUE".into(), "forty-two".into())],
            cwd: Some(dir.clone()),
            ..Options::default()
        },
    )
    .await;
    let session = s
        .call_with_meta("echo_session", json!({}), json!({"sessionId": "abc-123"}))
        .await;
    assert_eq!(structured(&session), &json!({"sessionId": "abc-123"}));
    let no_session = s.call("echo_session", json!({})).await;
    assert_eq!(structured(&no_session), &json!({"sessionId": null}));

    let meta = s
        .call_with_meta(
            "echo_meta",
            json!({}),
            json!({"sessionId": "s1", "vendor/key": {"deep": [1, 2]}}),
        )
        .await;
    let meta = &structured(&meta)["meta"];
    assert_eq!(meta["sessionId"], "s1");
    assert_eq!(meta["vendor/key"], json!({"deep": [1, 2]}));

    let env = s
        .call("get_env", json!({"name": "FIXTURE_TEST_VALUE"}))
        .await;
    assert_eq!(
        structured(&env),
        &json!({"name": "FIXTURE_TEST_VALUE", "value": "forty-two"})
    );
    let unset = s
        .call("get_env", json!({"name": "FIXTURE_SURELY_UNSET_VARIABLE"}))
        .await;
    assert_eq!(structured(&unset)["value"], Value::Null);
    let cwd = s.call("get_cwd", json!({})).await;
    assert_eq!(structured(&cwd)["cwd"], dir.display().to_string());

    let info = s.call("client_info", json!({})).await;
    let info = structured(&info);
    assert_eq!(info["clientInfo"]["name"], "fixture-tests");
    assert_eq!(info["clientInfo"]["version"], "2.5.0");
    assert_eq!(info["protocolVersion"], "2025-11-25");
    assert!(info["capabilities"]["elicitation"].is_object(), "{info}");
}

async fn visibility_and_ui_tools_answer(kind: Over) {
    let s = connect(kind, &[]).await;
    for name in [
        "app_only_tool",
        "model_only_tool",
        "malformed_visibility_tool",
        "show_fixture_ui",
        "legacy_ui_tool",
    ] {
        let result = s.call(name, json!({})).await;
        assert_eq!(text(&result), format!("called:{name}"));
        assert_eq!(structured(&result), &json!({"ok": true, "name": name}));
    }
}

async fn protocol_is_capped_at_2025_11_25(kind: Over) {
    // A client asking for the newest protocol is answered with 2025-11-25...
    let newest = connect_with(
        kind,
        Options {
            client: client(Elicit::Unsupported).protocol(ProtocolVersion::V_2026_07_28),
            ..Options::default()
        },
    )
    .await;
    let info = newest.client.peer_info().unwrap();
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    let seen = newest.call("client_info", json!({})).await;
    assert_eq!(structured(&seen)["protocolVersion"], "2026-07-28");
    assert_eq!(structured(&seen)["negotiatedProtocolVersion"], "2025-11-25");
    // ...and an older one is kept.
    let older = connect_with(
        kind,
        Options {
            client: client(Elicit::Unsupported).protocol(ProtocolVersion::V_2025_06_18),
            ..Options::default()
        },
    )
    .await;
    assert_eq!(
        older.client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2025_06_18
    );
}

async fn probes_are_served_only_with_the_flag(kind: Over) {
    let plain = connect(kind, &[]).await;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools
            .into_iter()
            .map(|t| t.name.to_string())
            .filter(|n| n.starts_with("probe_"))
            .collect()
    };
    let listed = within("tools/list", plain.client.list_all_tools())
        .await
        .unwrap();
    assert!(names(listed).is_empty());
    let probing = connect(kind, &["--probes"]).await;
    let listed = within("tools/list", probing.client.list_all_tools())
        .await
        .unwrap();
    assert_eq!(
        names(listed),
        [
            "probe_bind",
            "probe_connect",
            "probe_exec",
            "probe_kill",
            "probe_list",
            "probe_open",
            "probe_proc",
            "probe_proxy",
            "probe_status",
        ]
    );
    let result = probing.call("probe_status", json!({})).await;
    let status = structured(&result);
    assert_eq!(status["ok"], true, "{status}");
    assert!(
        status["limits"]
            .as_str()
            .unwrap()
            .contains("Max open files")
    );
    let result = probing
        .call("probe_open", json!({"path": "/nonexistent/x"}))
        .await;
    let refused = structured(&result);
    assert_eq!(
        (refused["ok"].clone(), refused["errno"].clone()),
        (json!(false), json!(2))
    );
}
