//! The app sandbox through a real `serve`: a hostile app (a Python script that tries what an
//! app running as the gateway's user could do) and the fixture's probes, as root and as an
//! unprivileged user. These tests fail, never skip, on a kernel without what the default
//! policy needs: an unenforced sandbox must not pass.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use mcpapp_testkit::{bin, children_of, eventually_blocking};
use serde_json::{Value, json};

use crate::serve::{
    call_reply, call_tool, get_with_token, is_keeper, serve_as, wait_running, write_settings,
};
use crate::{GATEWAY, Served, Tree};

const TOKEN: &str = "gateway-token-value";
const MODEL_KEY: &str = "model-key-value";

/// The port of a served gateway's main listener.
fn port_of(served: &Served) -> u16 {
    served.url.rsplit(':').next().unwrap().parse().unwrap()
}

/// `GET /apps/{id}` as JSON.
fn detail(served: &Served, id: &str) -> Value {
    let (_, body) = get_with_token(&format!("{}/apps/{id}", served.url), Some(TOKEN));
    serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"))
}

/// A gateway serving fixture apps `ids` (each `toolNamePrefix`-less, health pings off) with
/// `mcp_apps` merged into its `McpApps` section, started as root or as `nobody`.
fn serve_fixtures(tree: &Tree, ids: &[&str], mcp_apps: &Value, unprivileged: bool) -> Served {
    let fixture = bin("fixture-app");
    for id in ids {
        tree.write(
            &format!("apps/{id}/openclaw.mcpapp.json"),
            &json!({"id": id, "command": fixture, "arguments": ["stdio", "--probes"]}).to_string(),
        );
    }
    write_config(tree, mcp_apps);
    serve_as(tree, &[("MCPAPP_TOKEN", TOKEN)], unprivileged)
}

fn write_config(tree: &Tree, mcp_apps: &Value) {
    let section = json!({"Enabled": true, "DiscoveryPaths": ["apps"],
        "Supervision": {"HealthCheckIntervalMs": 0}});
    write_settings(tree, section, mcp_apps, TOKEN);
}

fn probe(served: &Served, app: &str, tool: &str, args: &Value) -> Value {
    call_tool(served, TOKEN, app, tool, args)
}

fn assert_refused(outcome: &Value, errno: i64, what: &str) {
    assert_eq!(outcome["ok"], false, "{what} should be refused: {outcome}");
    assert_eq!(outcome["errno"], errno, "{what}: {outcome}");
}

fn assert_allowed(outcome: &Value, what: &str) {
    assert_eq!(outcome["ok"], true, "{what} should work: {outcome}");
}

const EPERM: i64 = 1;
const EACCES: i64 = 13;

#[test]
fn the_kernel_supports_the_default_policy() {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .arg(mcpapp_sandbox::PROBE_ARG)
        .output()
        .unwrap();
    let support: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        support["landlockAbi"].as_u64().unwrap() >= 6,
        "Landlock ABI 6 (Linux 6.12) or later is needed for the default policy: {support}"
    );
    assert_eq!(support["seccomp"], true, "{support}");
}

/// The hostile script's attempts, as root (`unprivileged` false) or as `nobody`.
fn a_hostile_app_is_contained(unprivileged: bool) {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    tree.write("apps/hostile/hostile.py", include_str!("hostile.py"));
    tree.write(
        "apps/hostile/openclaw.mcpapp.json",
        &json!({"id": "hostile", "command": "/usr/bin/python3", "arguments": ["hostile.py"],
            "protocolVersion": "2025-06-18"})
        .to_string(),
    );
    tree.write(
        "apps/neighbour/openclaw.mcpapp.json",
        &json!({"id": "neighbour", "command": fixture, "arguments": ["stdio"]}).to_string(),
    );
    let neighbour_file = tree.write("apps/neighbour/private.txt", "neighbour-private-value");
    let beside = tree.write("operator-notes.txt", "operator-secret-value");
    write_config(&tree, &json!({}));
    if unprivileged && crate::serve::is_root() {
        // Everything belongs to the gateway's user, as it would: only the sandbox stands
        // between the app and these files.
        #[allow(clippy::disallowed_methods)]
        let status = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(tree.root())
            .status()
            .unwrap();
        assert!(status.success());
    }
    // An abstract socket of someone else's, to connect to.
    let abstract_name = format!("mcpapp-test-{}-{unprivileged}", std::process::id());
    let addr = {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()
    };
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();

    let served = serve_as(
        &tree,
        &[("MCPAPP_TOKEN", TOKEN), ("OPENAI_API_KEY", MODEL_KEY)],
        unprivileged,
    );
    wait_running(&served, Some(TOKEN), 2);
    let gateway = served.child.id();
    let children = children_of(gateway);
    let cmdline = |pid: &u32| std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let keeper = *children.iter().find(|p| is_keeper(**p)).unwrap();
    let neighbour = *children
        .iter()
        .find(|p| String::from_utf8_lossy(&cmdline(p)).contains("fixture-app"))
        .unwrap();
    let result = call_tool(
        &served,
        TOKEN,
        "hostile",
        "attack",
        &json!({
            "gatewayPid": gateway,
            "keeperPid": keeper,
            "neighbourPid": neighbour,
            "gatewayPort": port_of(&served),
            "gatewayDir": tree.root(),
            "configFile": tree.path("appsettings.json"),
            "besideFile": beside,
            "neighbourDir": tree.path("apps/neighbour"),
            "neighbourFile": neighbour_file,
            "abstractName": abstract_name,
            "token": TOKEN,
        }),
    );
    let text = result.to_string();
    for secret in [
        TOKEN,
        MODEL_KEY,
        "operator-secret-value",
        "neighbour-private-value",
    ] {
        assert!(!text.contains(secret), "the app got {secret}: {text}");
    }
    for attempt in [
        "gateway_environ",
        "gateway_mem",
        "neighbour_environ",
        "config_file",
        "beside_config",
        "neighbour_folder",
        "neighbour_private",
        "etc_shadow",
        "write_gateway_folder",
        "write_neighbour_folder",
        "write_own_folder",
        "write_tmp",
        "gateway_port",
        "udp",
        "unix_socket",
        "abstract_socket",
        "netlink",
        "io_uring",
        "signal_gateway",
        "signal_keeper",
        "signal_neighbour",
    ] {
        let outcome = result[attempt].as_str().unwrap_or_default();
        assert!(
            outcome.starts_with("blocked: "),
            "{attempt}: {outcome}\n{text}"
        );
    }
    // A new namespace by `clone` is refused; `clone3`, whose flags a filter cannot read, is
    // answered "not implemented", so that the C library falls back to `clone`.
    assert_eq!(result["clone_user_namespace"], "blocked: EPERM", "{text}");
    assert_eq!(result["clone3_user_namespace"], "blocked: ENOSYS", "{text}");
    assert_eq!(result["status"]["CapEff"], "0000000000000000", "{text}");
    assert_eq!(result["status"]["CapPrm"], "0000000000000000", "{text}");
    assert_eq!(result["status"]["NoNewPrivs"], "1", "{text}");
    assert_eq!(result["status"]["Seccomp"], "2", "{text}");
    // What an app keeps (the attempts above could not have passed by breaking everything).
    assert!(
        result["read_own_folder"]
            .as_str()
            .unwrap()
            .contains("hostile.py"),
        "{text}"
    );
    assert!(
        result["write_home"].as_str().unwrap().starts_with("DONE"),
        "{text}"
    );
    assert!(
        result["gateway_cmdline"]
            .as_str()
            .unwrap()
            .contains("serve"),
        "{text}"
    );
    // Nothing was planted, and everyone is still up.
    assert!(!tree.path("planted").exists());
    assert!(!tree.path("apps/neighbour/planted").exists());
    assert_eq!(detail(&served, "neighbour")["lifecycle"], "Running");
    assert_eq!(detail(&served, "hostile")["sandbox"]["status"], "enforced");
}

#[test]
fn a_hostile_app_is_contained_when_the_gateway_runs_as_root() {
    a_hostile_app_is_contained(false);
}

#[test]
fn a_hostile_app_is_contained_when_the_gateway_runs_as_an_unprivileged_user() {
    a_hostile_app_is_contained(true);
}

/// The fixture's standing and file access, as root or `nobody`.
fn an_app_reads_its_folder_and_writes_only_its_home_and_tmpdir(unprivileged: bool) {
    let tree = Tree::new();
    tree.write("apps/fx/data.txt", "app data");
    tree.write("elsewhere/file.txt", "not the app's");
    let served = serve_fixtures(&tree, &["fx"], &json!({}), unprivileged);
    wait_running(&served, Some(TOKEN), 1);
    let p = |tool: &str, args: Value| probe(&served, "fx", tool, &args);
    let env = |name: &str| {
        p("get_env", json!({"name": name}))["value"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (home, tmpdir) = (env("HOME"), env("TMPDIR"));
    assert!(home.ends_with("/apps/fx"), "{home}");
    assert_eq!(tmpdir, home);
    let own = tree.path("apps/fx/data.txt").display().to_string();
    let read = p("probe_open", json!({"path": own}));
    assert_eq!(read["text"], "app data", "{read}");
    assert_refused(
        &p("probe_open", json!({"path": own, "write": true})),
        EACCES,
        "writing its folder",
    );
    assert_allowed(
        &p(
            "probe_open",
            json!({"path": format!("{home}/x"), "write": true}),
        ),
        "HOME",
    );
    assert_allowed(
        &p(
            "probe_open",
            json!({"path": format!("{tmpdir}/x"), "write": true}),
        ),
        "TMPDIR",
    );
    let elsewhere = tree.path("elsewhere/file.txt").display().to_string();
    assert_refused(
        &p("probe_open", json!({"path": elsewhere})),
        EACCES,
        "reading elsewhere",
    );
    assert_refused(
        &p(
            "probe_open",
            json!({"path": "/tmp/mcpapp-probe", "write": true}),
        ),
        EACCES,
        "/tmp",
    );
    assert_refused(
        &p("probe_open", json!({"path": "/etc/shadow"})),
        EACCES,
        "/etc/shadow",
    );
    assert_refused(&p("probe_list", json!({"path": "/root"})), EACCES, "/root");
    assert_allowed(
        &p("probe_open", json!({"path": "/etc/hosts"})),
        "/etc/hosts",
    );
    let status = p("probe_status", json!({}));
    assert_eq!(status["capEff"], "0000000000000000", "{status}");
    if !unprivileged && crate::serve::is_root() {
        // Root's bounding set is emptied, so that executing a program gives nothing back.
        assert_eq!(status["capBnd"], "0000000000000000", "{status}");
    }
    assert_eq!(status["noNewPrivs"], "1", "{status}");
    assert_eq!(status["seccomp"], "2", "{status}");
    let report = &detail(&served, "fx")["sandbox"];
    assert_eq!(report["status"], "enforced", "{report}");
    assert_eq!(report["home"], home.as_str(), "{report}");
}

#[test]
fn an_app_reads_its_folder_and_writes_only_its_home_and_tmpdir_as_root() {
    an_app_reads_its_folder_and_writes_only_its_home_and_tmpdir(false);
}

#[test]
fn an_app_reads_its_folder_and_writes_only_its_home_and_tmpdir_as_an_unprivileged_user() {
    an_app_reads_its_folder_and_writes_only_its_home_and_tmpdir(true);
}

/// A loopback TCP listener that answers every connection with `body` (an HTTP/1.0 200).
fn http_server(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}"
            );
        }
    });
    port
}

#[test]
fn without_a_network_grant_no_socket_opens_and_the_gateway_is_out_of_reach() {
    let tree = Tree::new();
    let open = http_server("anyone");
    let served = serve_fixtures(&tree, &["fx"], &json!({}), false);
    wait_running(&served, Some(TOKEN), 1);
    let connect = |kind: &str, address: String| {
        probe(
            &served,
            "fx",
            "probe_connect",
            &json!({"kind": kind, "address": address}),
        )
    };
    let gateway = format!("127.0.0.1:{}", port_of(&served));
    assert_refused(&connect("tcp", gateway), EPERM, "the gateway's port");
    assert_refused(&connect("tcp", format!("127.0.0.1:{open}")), EPERM, "TCP");
    assert_refused(&connect("udp", "127.0.0.1:9".into()), EPERM, "UDP");
    let path = tree.path("sock");
    let _unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
    assert_refused(&connect("unix", path.display().to_string()), EPERM, "UNIX");
    assert_refused(
        &connect("abstract", "mcpapp-none".into()),
        EPERM,
        "abstract",
    );
    assert_refused(
        &probe(&served, "fx", "probe_bind", &json!({"port": 0})),
        EPERM,
        "listening",
    );
    let report = &detail(&served, "fx")["sandbox"];
    assert_eq!(report["network"], "none", "{report}");
    assert_eq!(report["inetSockets"], "none", "{report}");
}

#[test]
fn a_port_grant_opens_only_that_port_and_all_keeps_the_gateway_closed() {
    let tree = Tree::new();
    let granted = http_server("granted");
    let other = http_server("other");
    let served = serve_fixtures(
        &tree,
        &["ports", "all"],
        &json!({"Entries": {
            "ports": {"Isolation": {"Network": {"TcpPorts": [granted]}}},
            "all": {"Isolation": {"Network": "all"}},
        }}),
        false,
    );
    wait_running(&served, Some(TOKEN), 2);
    let connect = |app: &str, kind: &str, address: String| {
        probe(
            &served,
            app,
            "probe_connect",
            &json!({"kind": kind, "address": address}),
        )
    };
    let gateway = format!("127.0.0.1:{}", port_of(&served));
    assert_allowed(
        &connect("ports", "tcp", format!("127.0.0.1:{granted}")),
        "the granted port",
    );
    assert_refused(
        &connect("ports", "tcp", format!("127.0.0.1:{other}")),
        EACCES,
        "another port",
    );
    assert_refused(
        &connect("ports", "tcp", gateway.clone()),
        EACCES,
        "the gateway's port",
    );
    assert_refused(
        &connect("ports", "udp", "127.0.0.1:9".into()),
        EPERM,
        "UDP with a port grant",
    );
    assert_refused(
        &probe(&served, "ports", "probe_bind", &json!({"port": 0})),
        EACCES,
        "listening",
    );

    assert_allowed(
        &connect("all", "tcp", format!("127.0.0.1:{granted}")),
        "TCP under all",
    );
    assert_allowed(
        &connect("all", "tcp", format!("127.0.0.1:{other}")),
        "TCP under all",
    );
    assert_allowed(
        &connect("all", "udp", "127.0.0.1:9".into()),
        "UDP under all",
    );
    assert_refused(
        &connect("all", "tcp", gateway),
        EACCES,
        "the gateway's port under all",
    );
    assert_refused(
        &connect("all", "unix", "/nonexistent".into()),
        EPERM,
        "UNIX under all",
    );
    let report = &detail(&served, "all")["sandbox"];
    assert!(
        report["tcpConnect"]
            .as_str()
            .unwrap()
            .starts_with("all but "),
        "{report}"
    );
}

#[test]
fn a_host_grant_reaches_only_that_host_through_the_proxy() {
    let tree = Tree::new();
    let granted = http_server("server-A");
    let other = http_server("server-B");
    let served = serve_fixtures(
        &tree,
        &["fx"],
        &json!({"Entries": {"fx": {"Isolation": {"Network": {"Hosts": [format!("localhost:{granted}")]}}}}}),
        false,
    );
    wait_running(&served, Some(TOKEN), 1);
    let through = |host: &str, port: u16| {
        probe(
            &served,
            "fx",
            "probe_proxy",
            &json!({"host": host, "port": port}),
        )
    };
    let reached = through("localhost", granted);
    assert!(
        reached["proxyStatus"].as_str().unwrap().contains(" 200 "),
        "{reached}"
    );
    assert!(
        reached["body"].as_str().unwrap().ends_with("server-A"),
        "{reached}"
    );
    for (host, port) in [
        ("localhost", other),
        ("127.0.0.1", granted),
        ("127.0.0.1", other),
        ("localhost", port_of(&served)),
    ] {
        let refused = through(host, port);
        assert!(
            refused["proxyStatus"].as_str().unwrap().contains(" 403 "),
            "{host}:{port}: {refused}"
        );
        assert!(
            !refused["body"].as_str().unwrap().contains("server-"),
            "{refused}"
        );
    }
    // A program that ignores the proxy settings gets nowhere.
    let direct = probe(
        &served,
        "fx",
        "probe_connect",
        &json!({"kind": "tcp", "address": format!("127.0.0.1:{granted}")}),
    );
    assert_refused(&direct, EACCES, "a direct connection");
    let https_proxy = probe(&served, "fx", "get_env", &json!({"name": "HTTPS_PROXY"}));
    let report = &detail(&served, "fx")["sandbox"];
    assert_eq!(
        https_proxy["value"].as_str().unwrap(),
        format!("http://{}", report["proxy"].as_str().unwrap()),
        "{report}"
    );
}

#[test]
fn the_limits_hold_in_a_grandchild_after_exec() {
    let tree = Tree::new();
    let served = serve_fixtures(
        &tree,
        &["fx"],
        &json!({"Isolation": {"Limits": {"OpenFiles": 64, "FileSizeMb": 1, "CpuSeconds": 300}}}),
        false,
    );
    wait_running(&served, Some(TOKEN), 1);
    let grandchild = probe(
        &served,
        "fx",
        "probe_exec",
        &json!({"program": "/bin/cat", "args": ["/proc/self/limits"]}),
    );
    let limits = grandchild["stdout"].as_str().unwrap();
    let row = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name}: {limits}"))
            .split_whitespace()
            .rev()
            .skip(1)
            .take(2)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("Max open files"), ["64", "64"], "{limits}");
    assert_eq!(row("Max core file size"), ["0", "0"], "{limits}");
    assert_eq!(row("Max file size"), ["1048576", "1048576"], "{limits}");
    assert_eq!(row("Max cpu time"), ["300", "300"], "{limits}");
    let own = probe(&served, "fx", "probe_status", &json!({}));
    assert!(
        own["limits"]
            .as_str()
            .unwrap()
            .contains("Max open files            64"),
        "{own}"
    );
    let report = &detail(&served, "fx")["sandbox"];
    assert_eq!(report["limits"]["openFiles"], 64, "{report}");
}

/// App `app`'s HOME, as its sandbox report has it.
fn app_home(served: &Served, app: &str) -> String {
    detail(served, app)["sandbox"]["home"]
        .as_str()
        .unwrap_or_else(|| panic!("no sandbox home for {app}"))
        .to_owned()
}

/// The process of app `app` among the gateway's children (found by its HOME), if it runs.
fn find_app_pid(served: &Served, app: &str) -> Option<u32> {
    let home = format!("HOME={}\0", app_home(served, app));
    children_of(served.child.id()).into_iter().find(|p| {
        std::fs::read_to_string(format!("/proc/{p}/environ")).is_ok_and(|e| e.contains(&home))
    })
}

/// The process of app `app`.
fn app_pid(served: &Served, app: &str) -> u32 {
    find_app_pid(served, app).unwrap_or_else(|| panic!("no process of app {app}"))
}

#[test]
fn an_app_cannot_signal_the_gateway_the_keeper_or_another_app() {
    let tree = Tree::new();
    let served = serve_fixtures(&tree, &["a", "b"], &json!({}), false);
    wait_running(&served, Some(TOKEN), 2);
    let gateway = served.child.id();
    let keeper = *children_of(gateway)
        .iter()
        .find(|p| is_keeper(**p))
        .unwrap();
    let kill = |pid: u32| probe(&served, "a", "probe_kill", &json!({"pid": pid}));
    for (who, pid) in [
        ("the gateway", gateway),
        ("the keeper", keeper),
        ("another app", app_pid(&served, "b")),
    ] {
        assert_refused(&kill(pid), EPERM, who);
    }
    // Its own processes it may signal.
    assert_allowed(&kill(app_pid(&served, "a")), "itself");
}

#[test]
fn namespace_and_mount_tricks_do_not_widen_access() {
    let tree = Tree::new();
    let served = serve_fixtures(&tree, &["fx"], &json!({}), false);
    wait_running(&served, Some(TOKEN), 1);
    for args in [
        json!(["-Urm", "/bin/cat", "/etc/shadow"]),
        json!(["-r", "/bin/cat", "/etc/shadow"]),
        json!(["-m", "/bin/true"]),
    ] {
        let run = probe(
            &served,
            "fx",
            "probe_exec",
            &json!({"program": "/usr/bin/unshare", "args": args}),
        );
        assert_allowed(&run, "starting unshare");
        assert_ne!(run["status"], 0, "{args}: {run}");
        assert!(!run["stdout"].as_str().unwrap().contains("root:"), "{run}");
    }
}

#[test]
fn enforce_refuses_to_start_on_a_kernel_without_a_feature_and_best_effort_says_what_is_missing() {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    for id in ["strict", "lenient"] {
        tree.write(
            &format!("apps/{id}/openclaw.mcpapp.json"),
            &json!({"id": id, "command": fixture, "arguments": ["stdio"]}).to_string(),
        );
    }
    write_config(
        &tree,
        &json!({"Entries": {"lenient": {"Isolation": {"Mode": "best-effort"}}}}),
    );
    // The test hook lowers the Landlock ABI the gateway believes the kernel has.
    let served = serve_as(
        &tree,
        &[
            ("MCPAPP_TOKEN", TOKEN),
            (mcpapp_sandbox::ASSUME_ABI_ENV, "5"),
        ],
        false,
    );
    let mut strict = Value::Null;
    assert!(
        eventually_blocking(Duration::from_secs(30), || {
            strict = detail(&served, "strict");
            strict["lifecycle"] == "Failed"
        }),
        "{strict}"
    );
    let error = strict["lastError"].as_str().unwrap();
    assert!(
        error.contains("Landlock ABI 6 (Linux 6.12): signal and abstract UNIX socket scoping")
            && error.contains("McpApps.Entries.strict.Isolation.Mode")
            && error.contains("best-effort"),
        "{error}"
    );
    let mut lenient = Value::Null;
    assert!(
        eventually_blocking(Duration::from_secs(30), || {
            lenient = detail(&served, "lenient");
            lenient["lifecycle"] == "Running"
        }),
        "{lenient}"
    );
    let report = &lenient["sandbox"];
    assert_eq!(report["status"], "partial", "{report}");
    assert_eq!(report["rulesAbi"], 5, "{report}");
    assert!(report["scopes"].as_array().unwrap().is_empty(), "{report}");
    assert!(
        report["missing"][0]
            .as_str()
            .unwrap()
            .starts_with("Landlock ABI 6"),
        "{report}"
    );
}

#[test]
fn a_reload_applies_a_changed_grant_to_that_app_only() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.path("out")).unwrap();
    let served = serve_fixtures(&tree, &["a", "b"], &json!({}), false);
    wait_running(&served, Some(TOKEN), 2);
    let out = tree.path("out/x").display().to_string();
    let write = |app: &str| {
        probe(
            &served,
            app,
            "probe_open",
            &json!({"path": out, "write": true}),
        )
    };
    assert_refused(&write("a"), EACCES, "writing before the grant");
    let pid = |app: &str| app_pid(&served, app);
    let (a_before, b_before) = (pid("a"), pid("b"));
    write_config(
        &tree,
        &json!({"Entries": {"a": {"Isolation": {"Write": ["out"]}}}}),
    );
    let (head, body) = crate::serve::post(
        &format!("{}/apps/reload", served.url),
        Some(TOKEN),
        None,
        "{}",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    let summary: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(summary["changed"], json!(["a"]), "{summary}");
    // The reload restarts `a` in the background: wait for its new process, then for Running.
    assert!(eventually_blocking(Duration::from_secs(30), || {
        find_app_pid(&served, "a").is_some_and(|p| p != a_before)
    }));
    wait_running(&served, Some(TOKEN), 2);
    assert_allowed(&write("a"), "writing after the grant");
    assert_refused(&write("b"), EACCES, "another app writing");
    assert_ne!(pid("a"), a_before);
    assert_eq!(pid("b"), b_before);
}

#[test]
fn our_test_apps_run_and_answer_under_the_default_policy() {
    let tree = Tree::new();
    tree.write(
        "apps/grocery/openclaw.mcpapp.json",
        &json!({"id": "grocery", "command": bin("grocery-inventory"), "arguments": ["stdio"]})
            .to_string(),
    );
    let served = serve_fixtures(&tree, &["fixture"], &json!({}), false);
    wait_running(&served, Some(TOKEN), 2);
    for app in ["grocery", "fixture"] {
        assert_eq!(
            detail(&served, app)["sandbox"]["status"],
            "enforced",
            "{app}"
        );
    }
    let stores = call_reply(&served, TOKEN, "grocery", "get_stores", &json!({}));
    assert_eq!(stores["result"]["isError"], false, "{stores}");
    assert_eq!(
        stores["result"]["structuredContent"]["stores"][0]["name"], "Downtown Market",
        "{stores}"
    );
    let echo = probe(&served, "fixture", "echo", &json!({"message": "sandboxed"}));
    assert_eq!(echo["message"], "sandboxed");
}
