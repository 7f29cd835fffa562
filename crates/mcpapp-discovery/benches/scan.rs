//! Benchmarks of discovery: a full scan of a large tree, and the per-manifest parse.
//!
//! Run with `cargo xtask bench` (or `cargo bench -p mcpapp-discovery`). The tree holds
//! `MCPAPP_BENCH_APPS` manifests (default 10,000) spread over nested folders, with a few
//! unrelated files per folder the way real app folders have them.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use mcpapp_discovery::Discovery;
use mcpapp_manifest::{McpAppManifest, McpAppsConfig};

const MANIFEST: &str = r#"{
  // A typical manifest: a dozen fields, a comment, a trailing comma.
  "id": "app-ID",
  "name": "Benchmark app ID",
  "description": "An app used to measure discovery.",
  "version": "1.2.3",
  "transport": "stdio",
  "command": "./server",
  "arguments": ["--stdio", "--verbose"],
  "environment": { "LOG_LEVEL": "info" },
  "toolNamePrefix": "bench.",
  "tags": ["bench", "discovery"],
  "capabilities": ["tools", "resources"],
}"#;

/// Builds `count` apps as `root/gN/sM/app-ID/` with two sibling files each.
fn build_tree(root: &Path, count: usize) {
    for i in 0..count {
        let dir = root
            .join(format!("g{}", i % 50))
            .join(format!("s{}", (i / 50) % 20))
            .join(format!("app-{i}"));
        std::fs::create_dir_all(dir.join("bin")).expect("create folders");
        std::fs::write(
            dir.join("openclaw.mcpapp.json"),
            MANIFEST.replace("ID", &i.to_string()),
        )
        .expect("write manifest");
        std::fs::write(dir.join("README.md"), "# app\n").expect("write readme");
        std::fs::write(dir.join("bin/server"), "#!/bin/sh\n").expect("write server");
    }
}

fn scan_tree(c: &mut Criterion) {
    let count: usize = std::env::var("MCPAPP_BENCH_APPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().expect("temp dir");
    build_tree(dir.path(), count);
    let config = McpAppsConfig {
        enabled: true,
        ..McpAppsConfig::default()
    };
    let discovery = Discovery::builder(config)
        .discovery_paths(vec![dir.path().display().to_string()], dir.path())
        .build()
        .expect("valid configuration");

    let mut group = c.benchmark_group("discovery");
    group.sample_size(10);
    group.bench_function(format!("scan {count} manifests"), |b| {
        b.iter(|| {
            let report = discovery.scan();
            assert_eq!(report.apps.len(), count);
            report
        });
    });
    group.finish();
}

fn parse_manifest(c: &mut Criterion) {
    c.bench_function("parse one manifest", |b| {
        b.iter(|| McpAppManifest::parse(std::hint::black_box(MANIFEST)).expect("parses"));
    });
}

criterion_group!(benches, parse_manifest, scan_tree);
criterion_main!(benches);
