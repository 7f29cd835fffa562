//! `cargo xtask`: automation for this workspace, written in Rust so it runs wherever cargo
//! does (the cargo-xtask convention; the alias lives in `.cargo/config.toml`).
//!
//! Tasks:
//! - `codegen [--check]`: regenerates the committed JSON Schemas under `docs/schema/`; with
//!   `--check`, fails when they are stale instead.
//! - `ci`: the steps of `.ci/run` (format check, clippy, tests, the demo's smoke run, the
//!   conformance run with the requirement sets, the ecosystem servers under the sandbox, HAProxy installed when missing and the cluster run, the Kubernetes
//!   manifests validated, Chromium installed when missing and running as root, the browser
//!   tests), in the same order.
//! - `demo [--smoke]`: builds and starts the test apps and the gateway and tours it; with
//!   `--smoke`, checks the tour and exits (CI runs this).
//! - `e2e [--update-docs-screenshot]`: the host page in headless Chromium through WebDriver
//!   (`chromium` and `chromium-driver` must be installed; `.ci/run` installs them). Kept out
//!   of `cargo test` so that the tests pass on machines without a browser.
//! - `conformance [--report-only] [--repeat N] [--sets | --sets-only]`: the official MCP
//!   conformance suite against the reference server directly, through `/apps/mcp/{appId}` and
//!   `/mcp`, and with the gateway as the client under test; fails on a regression through the
//!   gateway unless `--report-only`; `--repeat N` runs everything N times to expose races;
//!   `--sets` adds (and `--sets-only` runs alone) the 0.2 suite's requirement sets 2025-11-25
//!   and 2026-07-28, check by check, on both sides.
//!   Installs Node and the suite from the npm registry into `target/conformance` (needs npm).
//! - `ecosystem`: real servers from npm and PyPI (server-everything, an ext-apps example, a
//!   Python server) under the gateway's app sandbox with no grant: each must reach Running
//!   sandboxed and answer a call (`ecosystem.rs`; needs npm and the system's python3).
//! - `cluster`: two `serve` replicas behind Debian's HAProxy with the committed
//!   `deploy/haproxy/haproxy.cfg`, checking that one chat session's requests stay on one
//!   replica and that killing it leaves clean errors (`cluster.rs`; `.ci/run` installs
//!   HAProxy).
//! - `bench [ARGS]`: runs the criterion benchmarks (release build); extra arguments go to
//!   the benchmark binaries (e.g. a name filter).
//! - `bench proxy [--clients N,M,..] [--calls K] [--warmup W] [--apps N] [--repeat R]
//!   [--short] [--release | --debug] [--json FILE]`: the load benchmark of the gateway's call paths beside the
//!   direct ones, start-up of N stdio apps and the gateway's memory (`bench.rs`); writes
//!   `target/bench/proxy.json`. `--short` is the CI mode: it shows every path works.
//! - `bench startup [--apps N] [--repeat R] [--bin DIR] [--isolation on|off|both]`: only the
//!   start-up and memory part of `bench proxy`, R times (`bench/startup.rs`), with the apps'
//!   sandbox on (the default), off, or both side by side; writes `target/bench/startup.json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

mod bench;
mod cluster;
mod codegen;
mod conformance;
mod demo;
mod e2e;
mod ecosystem;
mod http;
mod module_graph;
mod stack;
mod tidy;
mod util;

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  codegen [--check]   regenerate docs/schema/*.json (or check they are current)
  ci                  run the steps of .ci/run: fmt check, clippy, tests, demo smoke,
                      conformance, ecosystem, cluster, kubernetes-validate, e2e
  bench [ARGS]        run the criterion benchmarks (ARGS go to the bench binaries)
  bench proxy [--clients N,M,..] [--calls K] [--warmup W] [--apps N] [--repeat R]
              [--short] [--json FILE]
                      load-test the gateway's paths beside the direct ones (release builds)
  bench startup [--apps N] [--repeat R] [--bin DIR] [--isolation on|off|both]
                      only N stdio apps to Running against a bare spawn, and the memory;
                      --bin uses the binaries in DIR instead of building them; --isolation
                      both measures the apps with and without their sandbox side by side
  demo [--smoke]      build and start the test apps and the gateway, then tour it
  e2e [--update-docs-screenshot]
                      test the host page in headless Chromium (needs chromium, chromium-driver)
  conformance [--report-only] [--repeat N] [--sets | --sets-only]
                      the MCP conformance suite directly vs through the gateway (needs npm);
                      --sets adds the 2025-11-25 and 2026-07-28 requirement sets
  cluster             two replicas behind HAProxy: affinity, a replica killed (needs haproxy)
  ecosystem           npm and PyPI MCP servers under the app sandbox (needs npm, python3)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let root = workspace_root()?;
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => {
            print!("{USAGE}");
            return Ok(());
        }
    };
    match task {
        "codegen" => codegen::run(&root, rest),
        "ci" => ci(&root, rest),
        "bench" => bench(&root, rest),
        "demo" => demo::run(&root, rest),
        "e2e" => e2e::run(&root, rest),
        "conformance" => conformance::run(&root, rest),
        "cluster" => cluster::run(&root, rest),
        "ecosystem" => ecosystem::run(&root, rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n\n{USAGE}"),
    }
}

/// The cargo steps CI runs, in order (`.ci/run` lists the same ones).
fn ci(root: &Path, args: &[String]) -> anyhow::Result<()> {
    if let Some(extra) = args.first() {
        bail!("`ci` takes no arguments, got `{extra}`");
    }
    let steps: &[&[&str]] = &[
        &["fmt", "--all", "--", "--check"],
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &["test", "--workspace"],
        // The gateway's OTLP exporter is behind its `otel` feature, which no workspace build
        // turns on: lint it, and run the test that exports to a loopback collector.
        &[
            "clippy",
            "-p",
            "mcpapp-gateway",
            "--features",
            "otel",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[
            "test",
            "-p",
            "mcpapp-gateway",
            "--features",
            "otel",
            "--test",
            "all",
            "--",
            "serve_exports_traces_over_otlp",
        ],
        &["xtask", "demo", "--smoke"],
        // The 0.1.16 suite and the 0.2 suite's requirement sets (2025-11-25, 2026-07-28):
        // the 0.1.16 run's reference server and TypeScript client are in no set.
        &["xtask", "conformance", "--sets"],
        &["xtask", "ecosystem"],
        &["xtask", "bench", "proxy", "--short"],
    ];
    for step in steps {
        util::cargo(root, step)?;
    }
    ensure_package("haproxy", "/usr/sbin/haproxy", "the cluster test")?;
    util::cargo(root, &["xtask", "cluster"])?;
    validate_kubernetes(root)?;
    ensure_browser()?;
    util::cargo(root, &["xtask", "e2e"])
}

/// A Debian package that a step needs, as `.ci/run` gets it: installed when missing and
/// running as root, otherwise a clear error saying how.
fn ensure_package(package: &str, binary: &str, what: &str) -> anyhow::Result<()> {
    if Path::new(binary).is_file() {
        return Ok(());
    }
    if !nix::unistd::Uid::effective().is_root() {
        bail!(
            "{what} needs {package}: as root, run apt-get install -y --no-install-recommends {package}"
        );
    }
    println!("\n==> installing {package}");
    util::run("apt-get", &["update"], &[])?;
    util::run(
        "apt-get",
        &["install", "-y", "--no-install-recommends", package],
        &[("DEBIAN_FRONTEND", "noninteractive")],
    )
}

/// `deploy/kubernetes/*.yaml` against the Kubernetes schemas, strictly, with
/// `kubernetes-validate` from PyPI in a venv under `target/` (as `.ci/run` does).
fn validate_kubernetes(root: &Path) -> anyhow::Result<()> {
    let venv = root.join("target/k8s-validate");
    let validate = venv.join("bin/kubernetes-validate");
    if !validate.is_file() {
        util::run("python3", &["-m", "venv", &venv.display().to_string()], &[])?;
        util::run(
            &venv.join("bin/pip").display().to_string(),
            &["install", "--quiet", "kubernetes-validate==1.37.0"],
            &[],
        )?;
    }
    let mut files: Vec<String> = std::fs::read_dir(root.join("deploy/kubernetes"))
        .context("reading deploy/kubernetes")?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .map(|path| path.display().to_string())
        .collect();
    files.sort();
    let mut args = vec!["--strict"];
    args.extend(files.iter().map(String::as_str));
    util::run(&validate.display().to_string(), &args, &[])
}

/// Chromium and its WebDriver for `e2e`, as `.ci/run` gets them: installed from Debian when
/// missing and running as root, otherwise a clear error saying how.
fn ensure_browser() -> anyhow::Result<()> {
    const PACKAGES: &str = "chromium chromium-driver";
    if Path::new("/usr/bin/chromium").is_file() && Path::new("/usr/bin/chromedriver").is_file() {
        return Ok(());
    }
    if !nix::unistd::Uid::effective().is_root() {
        bail!(
            "the browser tests need Chromium: as root, run \
             apt-get install -y --no-install-recommends {PACKAGES}"
        );
    }
    println!("\n==> installing {PACKAGES}");
    util::run("apt-get", &["update"], &[])?;
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(PACKAGES.split(' '));
    util::run(
        "apt-get",
        &install,
        &[("DEBIAN_FRONTEND", "noninteractive")],
    )
}

/// Runs every benchmark of the workspace in release mode, or with `proxy` the load
/// benchmark, or with `startup` only its start-up part.
fn bench(root: &Path, args: &[String]) -> anyhow::Result<()> {
    if let Some((first, rest)) = args.split_first()
        && first == "proxy"
    {
        return bench::run(root, rest);
    }
    if let Some((first, rest)) = args.split_first()
        && first == "startup"
    {
        return bench::run_startup(root, rest);
    }
    let mut cargo_args = vec!["bench", "--workspace", "--benches"];
    if !args.is_empty() {
        cargo_args.push("--");
        cargo_args.extend(args.iter().map(String::as_str));
    }
    util::cargo(root, &cargo_args)
}

/// The workspace root: the parent of this crate's folder.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    dir.parent()
        .map(Path::to_path_buf)
        .context("xtask is not inside a workspace")
}
