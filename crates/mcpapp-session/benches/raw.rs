//! Benchmarks of the raw splice: parsing a message and rewriting what the router rewrites
//! (a response's id, a request's id and progress token), as the hub does for every message
//! of a port.
//!
//! Run with `cargo bench -p mcpapp-session --bench raw`.

use criterion::{Criterion, criterion_group, criterion_main};
use mcpapp_session::{RawMessage, raw_string};

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

criterion_group!(benches, splice);
criterion_main!(benches);
