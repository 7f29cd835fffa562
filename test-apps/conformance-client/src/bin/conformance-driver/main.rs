//! `conformance-driver`: the gateway as the client under test of the conformance suite's
//! client scenarios, driven the way a user drives it (`cargo xtask conformance --sets` runs
//! it through the suite).
//!
//! ```text
//! conformance-driver --via direct|proxy|mcp [--era legacy|modern] [--gateway PATH]
//!                    [--scenario NAME] URL
//! conformance-driver --list          # every scenario it drives, as `FAMILY SCENARIO` lines
//! ```
//!
//! The suite starts a test server for a scenario and runs this program with the server's URL
//! as the last argument, the scenario in `MCP_CONFORMANCE_SCENARIO`, the requirement set's
//! revision in `MCP_CONFORMANCE_PROTOCOL_VERSION` and, for some scenarios, what to do in
//! `MCP_CONFORMANCE_CONTEXT` (JSON). With `--via proxy` or `--via mcp` the program
//! starts a real `mcpapp-gateway serve` (`--gateway`, else the `mcpapp-gateway` beside this
//! program) whose only app is an HTTP app `conformance` at `URL` without a tool prefix, waits
//! for it to settle (the app's manifest names the set's revision as its `protocolVersion`,
//! which is how a user tells the gateway the era to speak), and connects an end client,
//! rmcp's, to the gateway's
//! `/apps/mcp/conformance` or `/mcp`; with `--via direct` the same end client talks to `URL`
//! itself, the baseline the gateway is held to. The end client then does what the scenario
//! needs a user to do (list, call, read, answer an elicitation form with its defaults): the
//! suite's server judges what reached it, which through the gateway is the gateway's doing.
//!
//! The end client speaks the era of `--era`, by default the one of the set's revision
//! (2026-07-28: `server/discover` and per-request `_meta`; otherwise the `initialize`
//! handshake at that version), so a set can also be driven by a client of the other era
//! (the translations between eras).
//!
//! Scenarios come in families (`scenarios.rs`): `core` holds every scored client scenario
//! of the 2025-11-25 and 2026-07-28 sets but the `auth/*` ones; a family names its scenarios,
//! may add to the app's manifest, and runs a scenario's steps on a [`client::Session`].
//!
//! It prints one JSON line on stdout, `{"scenario", "via", "era", "app", "steps", "ok",
//! "error"}` (`app`: the app's lifecycle and last error as the gateway reports them;
//! `steps`: what the end client did and got), and exits 0 when every step succeeded, 1
//! otherwise, 2 on bad usage. The suite judges by its server's checks, not by this status.
//! The gateway's logs and this program's go to stderr (`RUST_LOG`, default `info`).

// It starts the gateway binary it drives; that is what it is for.
#![allow(clippy::disallowed_methods)]

mod client;
mod gateway;
mod scenarios;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use client::{Era, Session};
use gateway::Gateway;

/// Where the end client connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The scenario's server itself: the baseline.
    Direct,
    /// The gateway's `/apps/mcp/conformance`.
    Proxy,
    /// The gateway's `/mcp`.
    Mcp,
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Proxy => "proxy",
            Self::Mcp => "mcp",
        }
    }
}

/// The command line.
#[derive(Debug)]
struct Options {
    via: Via,
    era: Option<Era>,
    gateway: Option<PathBuf>,
    scenario: Option<String>,
    url: String,
}

const USAGE: &str = "usage: conformance-driver --via direct|proxy|mcp [--era legacy|modern] \
                     [--gateway PATH] [--scenario NAME] URL";

fn parse_args(args: &[String]) -> anyhow::Result<Options> {
    let mut via = None;
    let mut era = None;
    let mut gateway = None;
    let mut scenario = None;
    let mut url = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value; {USAGE}"))
        };
        match arg.as_str() {
            "--via" => {
                via = Some(match value()?.as_str() {
                    "direct" => Via::Direct,
                    "proxy" => Via::Proxy,
                    "mcp" => Via::Mcp,
                    other => bail!("--via takes direct, proxy or mcp, got `{other}`"),
                });
            }
            "--era" => {
                era = Some(match value()?.as_str() {
                    "legacy" => Era::Legacy,
                    "modern" => Era::Modern,
                    other => bail!("--era takes legacy or modern, got `{other}`"),
                });
            }
            "--gateway" => gateway = Some(PathBuf::from(value()?)),
            "--scenario" => scenario = Some(value()?.clone()),
            other if other.starts_with("--") => bail!("unknown option `{other}`; {USAGE}"),
            other if url.is_none() => url = Some(other.to_owned()),
            other => bail!("one URL only, got a second: `{other}`; {USAGE}"),
        }
    }
    Ok(Options {
        via: via.with_context(|| format!("--via is required; {USAGE}"))?,
        era,
        gateway,
        scenario,
        url: url.with_context(|| format!("no URL; {USAGE}"))?,
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // The suite saves stderr to a file; colour codes would only clutter it.
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args == ["--list"] {
        for (family, scenario) in scenarios::all_with_family() {
            println!("{family} {scenario}");
        }
        return ExitCode::SUCCESS;
    }
    let options = match parse_args(&args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("conformance-driver: {err:#}");
            return ExitCode::from(2);
        }
    };
    let Some(scenario) = options
        .scenario
        .clone()
        .or_else(|| std::env::var("MCP_CONFORMANCE_SCENARIO").ok())
    else {
        eprintln!(
            "conformance-driver: no scenario: pass --scenario NAME or set MCP_CONFORMANCE_SCENARIO"
        );
        return ExitCode::from(2);
    };
    let Some(family) = scenarios::family_of(&scenario) else {
        eprintln!(
            "conformance-driver: no family drives scenario `{scenario}`; it drives {}",
            scenarios::all().join(", ")
        );
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("conformance-driver: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(&options, family, &scenario));
    println!("{outcome}");
    if outcome["ok"] == true {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Starts the gateway (unless direct), connects the end client, runs the scenario's steps,
/// and stops everything; every failure ends up in the outcome line.
async fn run(options: &Options, family: scenarios::Family, scenario: &str) -> Value {
    let revision = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").ok();
    let era = options
        .era
        .unwrap_or_else(|| Era::of_revision(revision.as_deref()));
    let context = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    let mut outcome = json!({
        "scenario": scenario,
        "family": family.name(),
        "via": options.via.name(),
        "era": era.name(revision.as_deref()),
        "app": null,
        "steps": [],
        "ok": false,
        "error": null,
    });

    let gateway = match options.via {
        Via::Direct => None,
        Via::Proxy | Via::Mcp => {
            let bin = match options.gateway.clone().map_or_else(gateway::beside_me, Ok) {
                Ok(bin) => bin,
                Err(err) => return failed(outcome, &err),
            };
            let mut manifest = family.manifest_extras(scenario, &context);
            // The gateway is the client under test, and the set's revision is what it must
            // speak: a user says so in the app's manifest.
            if let (Some(revision), Some(fields)) = (&revision, manifest.as_object_mut()) {
                fields
                    .entry("protocolVersion")
                    .or_insert_with(|| json!(revision));
            }
            let settings = family.settings_extras(scenario, &context);
            let env = family.gateway_env(&context);
            match Gateway::start(&bin, &options.url, &manifest, &settings, &env).await {
                Ok(gateway) => Some(gateway),
                Err(err) => return failed(outcome, &err),
            }
        }
    };
    let mut prepared = Ok(Vec::new());
    if let Some(gateway) = &gateway {
        outcome["app"] = gateway.app().clone();
        // The user's part before any client connects (the auth family connects the app).
        prepared = family.prepare(gateway).await;
    }
    let mut prepared = match prepared {
        Ok(steps) => steps,
        Err(err) => {
            if let Some(gateway) = gateway {
                gateway.stop().await;
            }
            return failed(outcome, &err);
        }
    };
    let endpoint = match (&gateway, options.via) {
        (Some(gateway), Via::Proxy) => format!("{}/apps/mcp/{}", gateway.base(), gateway::APP_ID),
        (Some(gateway), _) => format!("{}/mcp", gateway.base()),
        (None, _) => options.url.clone(),
    };

    let result = drive(
        &endpoint,
        era,
        revision.as_deref(),
        family,
        scenario,
        context,
        gateway.as_ref(),
    )
    .await;
    let (mut steps, error) = match result {
        Ok(steps) => (steps, None),
        Err((steps, err)) => (steps, Some(format!("{err:#}"))),
    };
    prepared.append(&mut steps);
    let steps = prepared;
    // A failed step the driver answered by connecting the app again does not count.
    outcome["ok"] = json!(
        error.is_none()
            && steps
                .iter()
                .all(|s| s["ok"] == true || s["superseded"] == true)
    );
    outcome["steps"] = Value::Array(steps);
    outcome["error"] = json!(error);
    if let Some(gateway) = gateway {
        gateway.stop().await;
    }
    outcome
}

type Steps = Vec<Value>;

/// Connects the end client and runs the scenario on it.
async fn drive(
    endpoint: &str,
    era: Era,
    revision: Option<&str>,
    family: scenarios::Family,
    scenario: &str,
    context: Value,
    gateway: Option<&Gateway>,
) -> Result<Steps, (Steps, anyhow::Error)> {
    let mut session = match Session::connect(endpoint, era, revision, context, gateway).await {
        Ok(session) => session,
        Err(err) => return Err((Vec::new(), err.context(format!("connecting to {endpoint}")))),
    };
    let result = family.run(scenario, &mut session).await;
    let steps = session.close().await;
    match result {
        Ok(()) => Ok(steps),
        Err(err) => Err((steps, err)),
    }
}

fn failed(mut outcome: Value, err: &anyhow::Error) -> Value {
    outcome["error"] = json!(format!("{err:#}"));
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn reads_the_options_and_the_url_last() {
        let options = parse_args(&args(&[
            "--via",
            "proxy",
            "--era",
            "legacy",
            "--gateway",
            "/bin/gw",
            "http://localhost:1/mcp",
        ]))
        .unwrap();
        assert_eq!(options.via, Via::Proxy);
        assert_eq!(options.era, Some(Era::Legacy));
        assert_eq!(options.gateway, Some(PathBuf::from("/bin/gw")));
        assert_eq!(options.url, "http://localhost:1/mcp");
    }

    #[test]
    fn bad_command_lines_are_named() {
        for (list, expected) in [
            (&["http://x"][..], "--via is required"),
            (
                &["--via", "sideways", "http://x"][..],
                "direct, proxy or mcp",
            ),
            (&["--via", "mcp"][..], "no URL"),
            (&["--via", "mcp", "a", "b"][..], "a second: `b`"),
            (&["--via"][..], "--via needs a value"),
            (&["--bogus", "http://x"][..], "unknown option `--bogus`"),
        ] {
            let err = parse_args(&args(list)).unwrap_err().to_string();
            assert!(err.contains(expected), "{list:?}: {err}");
        }
    }
}
