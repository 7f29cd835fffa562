//! Start-up and memory: N stdio apps (fixture-app) brought to Running by a real
//! `mcpapp-gateway serve`, timed by polling `GET /apps` and by the gateway's own transition
//! times (`stateChangedAt` of each app's Running state); against it, `loadgen spawn` doing a
//! bare concurrent spawn, `initialize` and `tools/list` of the same N. The gateway's resident
//! memory (`VmRSS` in `/proc/PID/status`) is read with the N apps Running and with one.
//!
//! Part of `bench proxy`; `cargo xtask bench startup [--apps N] [--repeat R] [--bin DIR]
//! [--isolation on|off|both]` runs only this, R times (start-up is a wall-clock figure on a
//! noisy machine: it needs many runs, and the call paths take minutes). `--bin` takes the
//! gateway, fixture-app and loadgen from DIR instead of building them, so two builds can be
//! compared side by side. `--isolation` picks the apps' sandbox (`McpApps.Isolation.Mode`
//! `enforce`, the default, or `off`); `both` starts the gateway both ways in every run (in
//! alternating order) and reports the ratio, the cost of the sandbox. `--state` says whether
//! the sandboxed apps' state folders (`<StateDirectory>/apps/<id>`, their `HOME`) exist when
//! the gateway starts, as `install` leaves them (its probe start makes them) and as every
//! start after an app's first finds them (`installed`, the default), or are made by this
//! start (`fresh`: one `mkdir` per app, on ext4 slowed by the inodes this bench deleted the
//! run before).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use crate::bench::Loadgen;
use crate::http;
use crate::stack::{self, Program};

const USAGE: &str = "usage: cargo xtask bench startup [--apps N] [--repeat R] [--bin DIR] [--isolation on|off|both] [--state installed|fresh]";

/// Which sandbox the measured apps run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// `enforce` (the gateway's default).
    On,
    /// `off`.
    Off,
    /// Both, side by side in each run.
    Both,
}

/// `cargo xtask bench startup` options.
#[derive(Debug, PartialEq)]
struct Options {
    apps: usize,
    repeat: usize,
    bin: Option<PathBuf>,
    isolation: Isolation,
    /// Whether the sandboxed apps' state folders are made by the measured start.
    fresh_state: bool,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = Self {
            apps: 50,
            repeat: 5,
            bin: None,
            isolation: Isolation::On,
            fresh_state: false,
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let value = rest
                .next()
                .with_context(|| format!("{arg} needs a value\n{USAGE}"));
            let number = |text: &String| -> anyhow::Result<usize> {
                let n: usize = text
                    .parse()
                    .with_context(|| format!("{arg} takes a positive number, not `{text}`"))?;
                ensure!(n > 0, "{arg} takes a positive number, not 0");
                Ok(n)
            };
            match arg.as_str() {
                "--apps" => options.apps = number(value?)?,
                "--repeat" => options.repeat = number(value?)?,
                "--bin" => options.bin = Some(PathBuf::from(value?)),
                "--isolation" => {
                    options.isolation = match value?.as_str() {
                        "on" => Isolation::On,
                        "off" => Isolation::Off,
                        "both" => Isolation::Both,
                        other => bail!("--isolation takes on, off or both, not `{other}`"),
                    }
                }
                "--state" => {
                    options.fresh_state = match value?.as_str() {
                        "installed" => false,
                        "fresh" => true,
                        other => bail!("--state takes installed or fresh, not `{other}`"),
                    }
                }
                other => bail!("unknown option `{other}`\n{USAGE}"),
            }
        }
        Ok(options)
    }
}

/// `cargo xtask bench startup`: the start-up and memory measurements alone, repeated.
pub(crate) fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let options = Options::parse(args)?;
    stack::stop_all_on_signal()?;
    let target = stack::target_dir(root);
    let out = target.join("bench");
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let bin = match &options.bin {
        // Absolute: the apps' manifests name the fixture by this path.
        Some(bin) => {
            std::path::absolute(bin).with_context(|| format!("resolving {}", bin.display()))?
        }
        None => {
            crate::util::cargo(
                root,
                &[
                    "build",
                    "--release",
                    "-p",
                    "mcpapp-gateway",
                    "-p",
                    "fixture-app",
                    "-p",
                    "loadgen",
                ],
            )?;
            target.join("release")
        }
    };
    let loadgen = Loadgen::new(bin.join("loadgen"), &logs);
    let mut startups = Vec::new();
    for run in 1..=options.repeat {
        println!("\n==> run {run} of {}", options.repeat);
        startups.push(measure(
            &bin,
            &out,
            &logs,
            &loadgen,
            Apps {
                count: options.apps,
                isolation: options.isolation,
                fresh_state: options.fresh_state,
            },
            run,
        )?);
    }
    crate::bench::print_startup(&startups);
    let json_path = out.join("startup.json");
    stack::write_json(
        &json_path,
        &json!({
            "bin": bin,
            "repeat": options.repeat,
            "stateFolders": if options.fresh_state { "fresh" } else { "installed" },
            "startup": startups,
        }),
    )?;
    println!("\nresults: {}", json_path.display());
    Ok(())
}

/// How long N apps may take to reach Running.
const SETTLE: Duration = Duration::from_secs(120);
/// How often `GET /apps` is polled.
const POLL: Duration = Duration::from_millis(10);

/// Parses the gateway's timestamps, `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub(crate) fn parse_timestamp(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (hms, millis) = time.split_once('.').unwrap_or((time, "0"));
    let mut hms = hms.splitn(3, ':').map(str::parse::<u64>);
    let (h, m, s) = (hms.next()?.ok()?, hms.next()?.ok()?, hms.next()?.ok()?);
    let millis: u64 = millis.parse().ok()?;
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    let secs = days * 86_400 + h * 3600 + m * 60 + s;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of the gateway's
/// `civil_from_days`; the same well-known algorithm by Howard Hinnant).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `VmRSS` of a process, in KiB.
pub(crate) fn vm_rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, "VmRSS")
}

/// A `kB` line of `/proc/PID/status` (`VmRSS`, `RssAnon`, ...).
fn status_kib(pid: u32, key: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    kib_from_status(&status, key).with_context(|| format!("no {key} in /proc/{pid}/status"))
}

fn kib_from_status(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|n| n.trim().parse().ok())
}

/// What one gateway start measured.
struct GatewayStart {
    /// From just before the gateway was started until a poll saw every app Running.
    polled: Duration,
    /// From just before the start until the last app's Running transition, by the
    /// gateway's own clock (`stateChangedAt`, millisecond resolution).
    own: Option<Duration>,
    /// From the first app's discovery to the last app's Running transition.
    supervisor: Option<Duration>,
    /// The gateway's VmRSS with every app Running and its tools registered.
    rss_kib: u64,
    /// The anonymous part of it (heap, stacks): what the gateway itself allocated, without
    /// the resident pages of its executable (`RssFile`), which the kernel shares with every
    /// process mapping the file and can drop and read again.
    anon_kib: u64,
    /// CPU time of the gateway and every process under it (apps, keeper) when the poll saw
    /// every app Running: what the start cost, less disturbed by other load than the clock.
    cpu: Duration,
}

/// CPU time so far of `pid` and every process below it: the sum of each thread's time on a
/// CPU (`/proc/PID/task/TID/schedstat`, nanoseconds, unlike the 10 ms ticks of `stat`).
/// Processes that have exited are not counted.
fn tree_cpu(pid: u32) -> Duration {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `PID (name) STATE PPID ...`; the name may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((child, ppid));
        }
    }
    let mut tree = vec![pid];
    let mut next = 0;
    while let Some(&parent) = tree.get(next) {
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        next += 1;
    }
    let nanos: u64 = tree
        .iter()
        .flat_map(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// Lays out `count` fixture-app stdio apps and a configuration in `folder`, the apps
/// sandboxed (`enforce`) or not (`off`); sandboxed ones with their state folders unless
/// `fresh_state`.
fn lay_out(
    folder: &Path,
    fixture: &Path,
    count: usize,
    sandboxed: bool,
    fresh_state: bool,
) -> anyhow::Result<std::path::PathBuf> {
    if folder.exists() {
        std::fs::remove_dir_all(folder)
            .with_context(|| format!("clearing {}", folder.display()))?;
    }
    for i in 1..=count {
        let id = format!("app-{i:03}");
        stack::write_json(
            &folder.join(format!("apps/{id}/openclaw.mcpapp.json")),
            &json!({
                "id": id,
                "name": format!("fixture {i}"),
                "version": "1.0.0",
                "transport": "stdio",
                "command": fixture,
                "arguments": ["stdio"],
                "toolNamePrefix": format!("a{i:03}."),
                "environment": {"RUST_LOG": "warn"},
            }),
        )?;
        if sandboxed && !fresh_state {
            // As `install` leaves an app: its probe start made the folder.
            let home = folder.join("state/apps").join(&id);
            std::fs::create_dir_all(&home)
                .with_context(|| format!("creating {}", home.display()))?;
            for dir in [folder.join("state"), folder.join("state/apps"), home] {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                    .with_context(|| format!("restricting {}", dir.display()))?;
            }
        }
    }
    let config = folder.join("appsettings.json");
    let mode = if sandboxed { "enforce" } else { "off" };
    stack::write_json(
        &config,
        &json!({ "McpApps": {
            "Enabled": true,
            "DiscoveryPaths": ["./apps"],
            "StateDirectory": "./state",
            "Isolation": {"Mode": mode},
        } }),
    )?;
    Ok(config)
}

fn start_gateway(
    bin: &Path,
    folder: &Path,
    logs: &Path,
    count: usize,
    sandboxed: bool,
    fresh_state: bool,
) -> anyhow::Result<GatewayStart> {
    let config = lay_out(
        folder,
        &bin.join("fixture-app"),
        count,
        sandboxed,
        fresh_state,
    )?;
    let config_arg = config.display().to_string();
    let log = logs.join(format!("gateway-startup-{count}.log"));
    let before = SystemTime::now();
    let started = Instant::now();
    let (mut gateway, base) = stack::start_listening(&Program {
        name: "mcpapp-gateway",
        path: &bin.join("mcpapp-gateway"),
        args: &["serve", "--config", &config_arg, "--bind", "127.0.0.1:0"],
        envs: &[("RUST_LOG", crate::bench::GATEWAY_LOG)],
        log: &log,
    })?;
    let apps = loop {
        let apps = http::request("GET", &format!("{base}/apps"), &[], None)?.json()?;
        let list = apps["apps"].as_array().cloned().unwrap_or_default();
        if let Some(failed) = list.iter().find(|a| a["lifecycle"] == "Failed") {
            bail!(
                "{} failed to start: {}; see {}",
                failed["id"],
                failed["lastError"],
                log.display()
            );
        }
        if list.len() == count && list.iter().all(|a| a["lifecycle"] == "Running") {
            break list;
        }
        ensure!(
            started.elapsed() < SETTLE,
            "{count} apps did not reach Running within {} s; see {}",
            SETTLE.as_secs(),
            log.display()
        );
        std::thread::sleep(POLL);
    };
    let polled = started.elapsed();
    let cpu = tree_cpu(gateway.id());
    let times = |name: &str| -> Vec<SystemTime> {
        apps.iter()
            .filter_map(|a| a[name].as_str().and_then(parse_timestamp))
            .collect()
    };
    let last_running = times("stateChangedAt").into_iter().max();
    let first_discovered = times("discoveredAt").into_iter().min();
    // The clocks are the same machine's; a transition stamped before `before` can only be a
    // rounding of the milliseconds.
    let own = last_running.map(|t| t.duration_since(before).unwrap_or_default());
    let supervisor = last_running
        .zip(first_discovered)
        .map(|(l, f)| l.duration_since(f).unwrap_or_default());
    // Memory once the apps' tools are registered too (the state the gateway then stays in).
    stack::wait_for_apps_quietly(&base, &[])?;
    let rss_kib = vm_rss_kib(gateway.id())?;
    let anon_kib = status_kib(gateway.id(), "RssAnon")?;
    gateway.stop();
    Ok(GatewayStart {
        polled,
        own,
        supervisor,
        rss_kib,
        anon_kib,
        cpu,
    })
}

fn seconds(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| {
        json!((d.as_secs_f64() * 10_000.0).round() / 10_000.0)
    })
}

fn gateway_json(start: &GatewayStart) -> Value {
    json!({
        "polledSeconds": seconds(Some(start.polled)),
        "ownSeconds": seconds(start.own),
        "supervisorSeconds": seconds(start.supervisor),
        "rssKiB": start.rss_kib,
        "anonKiB": start.anon_kib,
        "cpuMs": (start.cpu.as_secs_f64() * 10_000.0).round() / 10.0,
    })
}

/// `count` apps through the gateway, sandboxed or not, with what it measured printed.
fn start_many(
    bin: &Path,
    out: &Path,
    logs: &Path,
    count: usize,
    sandboxed: bool,
    fresh_state: bool,
) -> anyhow::Result<GatewayStart> {
    let how = match (sandboxed, fresh_state) {
        (false, _) => "isolation off",
        (true, false) => "isolation on (state folders as install leaves them)",
        (true, true) => "isolation on (state folders made by this start)",
    };
    println!("\n==> start-up: {count} stdio apps through the gateway, {how}");
    let many = start_gateway(
        bin,
        &out.join("startup"),
        logs,
        count,
        sandboxed,
        fresh_state,
    )?;
    println!(
        "  Running after {:.3} s (polled), {} s (the gateway's own times), {:.1} ms of CPU; RSS {} KiB ({} KiB anonymous)",
        many.polled.as_secs_f64(),
        seconds(many.own),
        many.cpu.as_secs_f64() * 1000.0,
        many.rss_kib,
        many.anon_kib
    );
    Ok(many)
}

/// One run of the start-up and memory measurements; `run` (1-based) alternates the order of
/// the two gateways with `Isolation::Both`, so neither always goes first.
/// What one start-up measurement starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Apps {
    /// How many apps.
    pub(crate) count: usize,
    /// In which sandbox.
    pub(crate) isolation: Isolation,
    /// Whether the measured start makes the sandboxed apps' state folders.
    pub(crate) fresh_state: bool,
}

pub(crate) fn measure(
    bin: &Path,
    out: &Path,
    logs: &Path,
    loadgen: &Loadgen<'_>,
    apps: Apps,
    run: usize,
) -> anyhow::Result<Value> {
    let Apps {
        count,
        isolation,
        fresh_state,
    } = apps;
    let start = |sandboxed| start_many(bin, out, logs, count, sandboxed, fresh_state);
    let (many, off) = match isolation {
        Isolation::On => (start(true)?, None),
        Isolation::Off => (start(false)?, None),
        Isolation::Both if run % 2 == 1 => {
            let off = start(false)?;
            (start(true)?, Some(off))
        }
        Isolation::Both => {
            let on = start(true)?;
            (on, Some(start(false)?))
        }
    };
    let sandboxed = isolation != Isolation::Off;
    let one = start_gateway(
        bin,
        &out.join("startup-one"),
        logs,
        1,
        sandboxed,
        fresh_state,
    )?;
    println!(
        "  with one app: RSS {} KiB ({} KiB anonymous)",
        one.rss_kib, one.anon_kib
    );
    println!("\n==> start-up: {count} stdio apps spawned and handshaken by loadgen");
    let fixture = bin.join("fixture-app").display().to_string();
    let direct = loadgen.run(
        "spawn",
        &[
            "spawn",
            "--count",
            &count.to_string(),
            "stdio",
            &fixture,
            "stdio",
        ],
    )?;
    let direct = direct.into_iter().next().unwrap_or(Value::Null);
    println!("  all done after {} s", direct["allSeconds"]);
    let mut result = json!({
        "apps": count,
        "isolation": sandboxed,
        "gateway": gateway_json(&many),
        "gatewayOneApp": {
            "polledSeconds": seconds(Some(one.polled)),
            "ownSeconds": seconds(one.own),
            "rssKiB": one.rss_kib,
            "anonKiB": one.anon_kib,
        },
        "direct": direct,
    });
    if let Some(off) = off {
        let ratio = |on: Duration, off: Duration| {
            json!((on.as_secs_f64() / off.as_secs_f64() * 1000.0).round() / 1000.0)
        };
        result["gatewayIsolationOff"] = gateway_json(&off);
        result["isolationRatio"] = json!({
            "polled": ratio(many.polled, off.polled),
            "own": many.own.zip(off.own).map_or(Value::Null, |(a, b)| ratio(a, b)),
            "cpu": ratio(many.cpu, off.cpu),
        });
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_options() {
        let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let defaults = Options::parse(&[]).unwrap();
        assert_eq!(
            (defaults.apps, defaults.repeat, defaults.bin),
            (50, 5, None)
        );
        assert_eq!(defaults.isolation, Isolation::On);
        assert!(!defaults.fresh_state);
        assert!(
            Options::parse(&args(&["--state", "fresh"]))
                .unwrap()
                .fresh_state
        );
        let set = Options::parse(&args(&[
            "--repeat",
            "2",
            "--bin",
            "b",
            "--apps",
            "7",
            "--isolation",
            "both",
        ]))
        .unwrap();
        assert_eq!((set.apps, set.repeat), (7, 2));
        assert_eq!(set.isolation, Isolation::Both);
        assert_eq!(set.bin, Some(PathBuf::from("b")));
        for (bad, named) in [
            (&["--apps", "0"][..], "--apps"),
            (&["--repeat"][..], "--repeat needs a value"),
            (&["--fast"][..], "unknown option `--fast`"),
            (&["--isolation", "maybe"][..], "on, off or both"),
            (&["--state", "warm"][..], "installed or fresh"),
        ] {
            let err = Options::parse(&args(bad)).unwrap_err().to_string();
            assert!(err.contains(named), "{bad:?}: {err}");
        }
    }

    #[test]
    fn reads_the_gateways_timestamps() {
        let t = parse_timestamp("2023-11-14T22:13:20.123Z").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::from_millis(1_700_000_000_123)
        );
        let leap = parse_timestamp("2000-02-29T00:00:00.000Z").unwrap();
        assert_eq!(
            leap.duration_since(UNIX_EPOCH).unwrap(),
            Duration::from_secs(951_782_400)
        );
        assert_eq!(
            parse_timestamp("1970-01-01T00:00:00.000Z"),
            Some(UNIX_EPOCH)
        );
        assert_eq!(parse_timestamp("2023-11-14 22:13:20"), None);
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn reads_vm_rss_from_a_status_file() {
        let status = "Name:\tmcpapp-gateway\nVmPeak:\t  90000 kB\nVmRSS:\t   13312 kB\nRssAnon:\t    4096 kB\n";
        assert_eq!(kib_from_status(status, "VmRSS"), Some(13_312));
        assert_eq!(kib_from_status(status, "RssAnon"), Some(4_096));
        assert_eq!(kib_from_status(status, "Vm"), None);
        assert_eq!(kib_from_status("Name:\tx\n", "VmRSS"), None);
    }

    #[test]
    fn reads_this_process_rss() {
        assert!(vm_rss_kib(std::process::id()).unwrap() > 0);
    }
}
