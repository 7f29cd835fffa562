//! Benchmarks of the shared session: the raw splice (parse and rewrite a message), and round
//! trips to a real stdio app through a port and through the gateway's own rmcp client.
//!
//! Run with `cargo xtask bench` (or `cargo bench -p mcpapp-supervisor`). The round trips need
//! the `fixture-app` binary, built first when missing.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use mcpapp_manifest::Lifecycle;
use mcpapp_supervisor::{PortReply, RawMessage, Supervisor, raw_string};
use mcpapp_testkit::{AppsDir, bin};

fn splice(c: &mut Criterion) {
    let tools: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"name":"tool_{i}","description":"Tool number {i} with a longer description","inputSchema":{{"type":"object","properties":{{"a":{{"type":"integer"}}}}}},"x-vendor":{{"n":1.50}}}}"#))
        .collect();
    let response = format!(
        r#"{{"jsonrpc":"2.0","id":"gw:1:17","result":{{"tools":[{}]}}}}"#,
        tools.join(",")
    );
    let request = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":"p1"}}}"#;
    let mut group = c.benchmark_group("splice");
    group.bench_function(
        format!("restore the id of a {} B tools/list", response.len()),
        |b| {
            b.iter(|| {
                let mut message = RawMessage::parse(response.as_str()).expect("parses");
                message.set_id(&raw_string("original"));
                message
            });
        },
    );
    group.bench_function("rewrite id and progress token of a tools/call", |b| {
        b.iter(|| {
            let mut message = RawMessage::parse(request).expect("parses");
            message.set_id(&raw_string("gw:1:1"));
            message
                .set_path(&["params", "_meta", "progressToken"], &raw_string("gwpt:1"))
                .expect("rewritable");
            message
        });
    });
    group.finish();
}

fn round_trips(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let apps = AppsDir::new();
    apps.stdio_app("echo", &bin("fixture-app"), &["stdio"], "{}");
    let report = apps.discover();
    let (supervisor, app, port) = runtime.block_on(async {
        let supervisor = Supervisor::builder().build();
        supervisor.load(&report);
        supervisor.wait_settled(Duration::from_secs(60)).await;
        let app = supervisor.get("echo").expect("the app");
        assert_eq!(app.snapshot().state.lifecycle, Lifecycle::Running);
        let initialize = RawMessage::parse(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#,
        )
        .expect("parses");
        let (port, _) = app.open_port(&initialize).await.expect("a port");
        (supervisor, app, port)
    });
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}"#;
    let mut group = c.benchmark_group("stdio round trip");
    group.bench_function("port -> hub -> child -> port (echo)", |b| {
        b.to_async(&runtime).iter(|| async {
            let reply = port
                .send(RawMessage::parse(call).expect("parses"))
                .await
                .expect("sent");
            let PortReply::Stream(mut stream) = reply else {
                panic!("expected a stream")
            };
            stream.next().await.expect("an answer")
        });
    });
    let arguments = serde_json::json!({"message": "hi"}).as_object().cloned();
    group.bench_function("rmcp client -> duplex -> hub -> child (echo)", |b| {
        b.to_async(&runtime).iter(|| async {
            app.call_tool("echo", arguments.clone(), None)
                .await
                .expect("answered")
        });
    });
    group.finish();
    drop(port);
    runtime.block_on(supervisor.shutdown());
}

criterion_group!(benches, splice, round_trips);
criterion_main!(benches);
