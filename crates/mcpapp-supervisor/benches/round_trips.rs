//! Benchmarks of round trips to a real stdio app through its shared session: through a port,
//! and through the gateway's own rmcp client. (The raw splice of one message is measured in
//! `mcpapp-session`'s `raw` bench.)
//!
//! Run with `cargo bench -p mcpapp-supervisor --bench round_trips`. It needs the `fixture-app`
//! binary, built first when missing.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use mcpapp_manifest::Lifecycle;
use mcpapp_session::{PortReply, RawMessage};
use mcpapp_supervisor::Supervisor;
use mcpapp_testkit::{AppsDir, bin};

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

criterion_group!(benches, round_trips);
criterion_main!(benches);
