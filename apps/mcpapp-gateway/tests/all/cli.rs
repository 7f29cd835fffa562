//! The commands for a running gateway (`apps`, `call`, `reload`) against a real `serve` with
//! fixture apps over stdio: their output for people and for scripts, and their exit codes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use expect_test::expect;
use mcpapp_testkit::{bin, children_of};
use serde_json::{Value, json};

use crate::{GATEWAY, Tree, stderr, stdout};

/// The token every gateway of these tests requires.
const TOKEN: &str = "cli-test-token-5f0c";

/// A running `serve` with three apps: `alpha` (runs, with stderr lines), `broken` (exits at
/// start; no automatic restarts, so it stays failed) and `off` (denied by configuration).
struct Served {
    child: Child,
    url: String,
    _tree: Tree,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The folder of [`Served`]: its apps and configuration.
fn apps_tree() -> Tree {
    let tree = Tree::new();
    let fixture = bin("fixture-app");
    let apps = [
        ("alpha", json!(["stdio", "--stderr-noise", "2"])),
        ("broken", json!(["stdio", "--exit-at-start", "3"])),
        ("off", json!(["stdio"])),
    ];
    for (id, arguments) in apps {
        tree.write(
            &format!("apps/{id}/openclaw.mcpapp.json"),
            &json!({"id": id, "command": fixture, "arguments": arguments, "toolNamePrefix": format!("{id}.")})
                .to_string(),
        );
    }
    tree.write(
        "appsettings.json",
        r#"{"McpApps": {"Enabled": true, "DiscoveryPaths": ["apps"], "Deny": ["off"],
            "Supervision": {"HealthCheckIntervalMs": 0, "AutoRestart": false}}}"#,
    );
    tree
}

/// Starts `serve` in `tree` with its stderr on `stderr`; returns it with its URL, read from
/// the first line of its stdout.
fn spawn_serve(tree: &Tree, stderr: Stdio) -> (Child, String) {
    spawn_serve_with(tree, stderr, &[])
}

/// Like [`spawn_serve`], with `env` added to the clean environment.
fn spawn_serve_with(tree: &Tree, stderr: Stdio, env: &[(&str, &str)]) -> (Child, String) {
    let mut env = env.to_vec();
    env.push(("MCPAPP_TOKEN", TOKEN));
    let crate::Started {
        child,
        url,
        mut lines,
    } = crate::start_serve(crate::gateway_command(), tree.root(), &env, stderr);
    let sandbox = lines.next().unwrap().unwrap();
    assert!(
        sandbox.starts_with("sandbox on http://127.0.0.1:"),
        "{sandbox}"
    );
    (child, url)
}

fn serve() -> Served {
    let tree = apps_tree();
    let (mut child, url) = spawn_serve(&tree, Stdio::piped());
    // serve, not on a terminal, logs one line once every app has settled: wait for it.
    let (settled, wait) = mpsc::channel();
    let logs = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(logs).lines().map_while(Result::ok) {
            if line.contains("3 apps settled: ") {
                let _ = settled.send(line);
            }
        }
    });
    let line = wait
        .recv_timeout(Duration::from_secs(60))
        .expect("serve reports that its apps settled");
    assert!(
        line.contains("3 apps settled: 1 Running, 1 Failed, 1 Disabled"),
        "{line}"
    );
    Served {
        child,
        url,
        _tree: tree,
    }
}

#[test]
fn serve_on_a_terminal_shows_each_app_settling() {
    let tree = apps_tree();
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(&size, None).unwrap();
    // stdout stays a pipe, and its two lines come whole (spawn_serve reads them).
    // A terminal that can draw (a missing or `dumb` TERM gets the plain lines).
    let (child, url) =
        spawn_serve_with(&tree, Stdio::from(pty.slave), &[("TERM", "xterm-256color")]);
    let served = Served {
        child,
        url,
        _tree: tree,
    };
    let (send, chunks) = mpsc::channel();
    let mut terminal = std::fs::File::from(pty.master);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with an error (EIO) once the gateway has closed the terminal.
        while let Ok(n @ 1..) = std::io::Read::read(&mut terminal, &mut buf) {
            if send.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let finals = [
        "  alpha   ✓ Running (28 tools)",
        "  broken  ✗ Failed: the process exited with status 3",
        "  off     - Disabled",
    ];
    let mut seen = Vec::new();
    let text = loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if finals.iter().all(|line| text.contains(line)) && text.contains("3 apps settled") {
            break text;
        }
        match chunks.recv_timeout(Duration::from_secs(60)) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => panic!("the terminal shows every app's final state:\n{text}"),
        }
    };
    // While apps were starting there were spinner lines with their states.
    assert!(
        text.contains("alpha   Loaded") || text.contains("alpha   Validated"),
        "{text}"
    );
    drop(served);
}

/// Runs `mcpapp-gateway ARGS` with `MCPAPP_TOKEN` = `token` (unset for `None`), `stdin` on its
/// standard input.
fn cli_with(token: Option<&str>, args: &[&str], stdin: &str) -> Output {
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let mut command = Command::new(GATEWAY);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(token) = token {
        command.env("MCPAPP_TOKEN", token);
    }
    let mut child = command.spawn().unwrap();
    // A command that does not read its input may have exited already.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

/// Runs `mcpapp-gateway ARGS --url URL` with the right token.
fn cli(served: &Served, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--url", &served.url]);
    cli_with(Some(TOKEN), &all, "")
}

fn code(output: &Output) -> Option<i32> {
    output.status.code()
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(output), stderr(output)))
}

#[test]
fn apps_lists_shows_and_reloads_for_people_and_for_scripts() {
    let served = serve();

    let table = cli(&served, &["apps"]);
    assert_eq!(code(&table), Some(0), "{}", stderr(&table));
    expect![[r#"
        ID      STATE     TRANSPORT  TOOLS  RESTARTS  LAST ERROR
        alpha   Running   stdio      28     0         -
        broken  Failed    stdio      0      0         the process exited with status 3; stderr: fixture-app: exit…
        off     Disabled  stdio      0      0         app 'off' is denied by pattern 'off'
    "#]]
    .assert_eq(&stdout(&table));
    assert_eq!(stdout(&cli(&served, &["apps", "list"])), stdout(&table));

    // --json is GET /apps as it is.
    let list = cli(&served, &["apps", "list", "--json"]);
    assert_eq!(code(&list), Some(0));
    let list = json_of(&list);
    let states: Vec<(String, String)> = list["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_owned(),
                a["lifecycle"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("alpha".to_owned(), "Running".to_owned()),
            ("broken".to_owned(), "Failed".to_owned()),
            ("off".to_owned(), "Disabled".to_owned()),
        ]
    );
    assert!(list["diagnostics"].is_array(), "{list}");

    let show = cli(&served, &["apps", "show", "alpha"]);
    assert_eq!(code(&show), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    for line in [
        "state:            Running",
        "server:           fixture-app 0.1.0",
        &format!("mcp:              {}/apps/mcp/alpha", served.url),
        "  echo  ",
        "as alpha.echo",
        "  ui://fixture/view.html  text/html;profile=mcp-app",
        "sandbox:          enforced (mode enforce, Landlock ABI ",
        "network:          none (TCP connect: none; sockets: none)",
        "limits:           open files ",
        "  write    ",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    let detail = json_of(&cli(&served, &["apps", "show", "alpha", "--json"]));
    assert_eq!(detail["id"], "alpha");
    assert!(detail["tools"].as_array().unwrap().len() > 1, "{detail}");

    // The stderr the gateway kept, current run and the one before.
    let logs = cli(&served, &["apps", "logs", "alpha"]);
    assert_eq!(code(&logs), Some(0));
    assert!(
        stdout(&logs).starts_with(
            "fixture-app noise: start line 1 of 2\nfixture-app noise: start line 2 of 2\n"
        ),
        "{}",
        stdout(&logs)
    );
    let logs = json_of(&cli(&served, &["apps", "logs", "broken", "--json"]));
    assert_eq!(logs["run"], "current");
    assert!(
        logs["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("--exit-at-start")),
        "{logs}"
    );

    // Nothing changed on disk: a reload leaves every app alone.
    let reload = cli(&served, &["reload"]);
    assert_eq!(code(&reload), Some(0), "{}", stderr(&reload));
    assert_eq!(
        stdout(&reload),
        "reloaded: 0 added, 0 removed, 0 changed, 3 unchanged\n"
    );
    let reload = json_of(&cli(&served, &["reload", "--json"]));
    assert_eq!(reload["unchanged"].as_array().unwrap().len(), 3, "{reload}");
}

/// The process of the running app `alpha` (the gateway's children are its apps and its keeper).
fn app_processes(served: &Served) -> Vec<u32> {
    children_of(served.child.id())
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .split(|b| *b == 0)
                    .nth(1)
                    .is_some_and(|arg| arg == b"stdio")
            })
        })
        .collect()
}

/// `apps logs ID --follow` running, its stdout lines arriving on a channel.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Follower {
    fn start(served: &Served, id: &str) -> Self {
        // Tests start the binary under test; that is their job.
        #[allow(clippy::disallowed_methods)]
        let mut child = Command::new(GATEWAY)
            .args(["apps", "logs", id, "--follow", "--url", &served.url])
            .env_clear()
            .env("MCPAPP_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line, within a generous limit.
    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("logs --follow prints the next line")
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn apps_restart_stop_and_start_wait_for_the_app() {
    let served = serve();
    let before = app_processes(&served);
    assert_eq!(before.len(), 1, "alpha's process: {before:?}");

    // A follower of alpha's stderr sees the lines of this run, a tool call's, and the restart.
    let follower = Follower::start(&served, "alpha");
    assert_eq!(follower.next(), "fixture-app noise: start line 1 of 2");
    assert_eq!(follower.next(), "fixture-app noise: start line 2 of 2");
    let call = cli(&served, &["call", "alpha", "echo", r#"{"message": "x"}"#]);
    assert_eq!(code(&call), Some(0), "{}", stderr(&call));
    assert_eq!(follower.next(), "fixture-app noise: tool call 1: echo");

    let restart = cli(&served, &["apps", "restart", "alpha"]);
    assert_eq!(code(&restart), Some(0), "{}", stderr(&restart));
    assert_eq!(
        stdout(&restart),
        "alpha: restarted; it is Running (restarts: 1)\n"
    );
    // A new process runs the app; the old one is gone or going.
    let after = app_processes(&served);
    assert!(
        after.iter().any(|pid| !before.contains(pid)),
        "before {before:?}, after {after:?}"
    );
    let detail = json_of(&cli(&served, &["apps", "show", "alpha", "--json"]));
    assert_eq!(detail["lifecycle"], "Running");
    assert_eq!(detail["restartCount"], 1);
    assert_eq!(follower.next(), "--- alpha: a new run ---");
    assert_eq!(follower.next(), "fixture-app noise: start line 1 of 2");
    drop(follower);

    let stop = cli(&served, &["apps", "stop", "alpha", "--json"]);
    assert_eq!(code(&stop), Some(0), "{}", stderr(&stop));
    assert_eq!(json_of(&stop)["lifecycle"], "Stopped");
    let again = cli(&served, &["apps", "stop", "alpha"]);
    assert_eq!(stdout(&again), "alpha is already Stopped\n");

    // A stopped app's tools cannot be called, and the message says what to do.
    let call = cli(&served, &["call", "alpha", "echo"]);
    assert_eq!(code(&call), Some(1));
    assert!(
        stderr(&call).contains("alpha is Stopped, not Running")
            && stderr(&call).contains("mcpapp-gateway apps start alpha"),
        "{}",
        stderr(&call)
    );

    let start = cli(&served, &["apps", "start", "alpha"]);
    assert_eq!(code(&start), Some(0), "{}", stderr(&start));
    assert_eq!(
        stdout(&start),
        "alpha: started; it is Running (restarts: 1)\n"
    );

    // Starting an app that fails at start reports the failure with exit 1.
    let start = cli(&served, &["apps", "start", "broken"]);
    assert_eq!(code(&start), Some(1), "{}", stderr(&start));
    assert!(
        stdout(&start)
            .starts_with("broken: started but it failed: the process exited with status 3"),
        "{}",
        stdout(&start)
    );
    // A disabled app cannot be started at all.
    let start = cli(&served, &["apps", "start", "off"]);
    assert_eq!(code(&start), Some(1));
    assert!(
        stderr(&start).contains("cannot be started"),
        "{}",
        stderr(&start)
    );
}

#[test]
fn call_prints_a_result_and_exits_1_on_a_tool_error() {
    let served = serve();

    let call = cli(&served, &["call", "alpha", "echo", r#"{"message": "hi"}"#]);
    assert_eq!(code(&call), Some(0), "{}", stderr(&call));
    expect![[r#"
        hi
        {
          "message": "hi"
        }
    "#]]
    .assert_eq(&stdout(&call));

    // The whole CallToolResult for scripts, with the arguments from stdin, and the tool
    // named by its registered name.
    let mut args = vec!["call", "alpha", "alpha.echo", "-", "--json"];
    args.extend(["--url", &served.url]);
    let call = cli_with(Some(TOKEN), &args, r#"{"message": "from stdin"}"#);
    assert_eq!(code(&call), Some(0), "{}", stderr(&call));
    let result = json_of(&call);
    assert_eq!(result["content"][0]["text"], "from stdin");
    assert_eq!(
        result["structuredContent"],
        json!({"message": "from stdin"})
    );
    assert_eq!(result["isError"], false);

    // A model-only tool goes through /mcp, an app-only one through /apps/mcp/alpha.
    for tool in ["model_only_tool", "app_only_tool"] {
        let call = cli(&served, &["call", "alpha", tool]);
        assert_eq!(code(&call), Some(0), "{tool}: {}", stderr(&call));
        assert!(stdout(&call).starts_with(&format!("called:{tool}\n")));
    }

    // A tool's error result: its text on stderr, exit 1; with --json the result on stdout.
    let failing = ["call", "alpha", "read_file", r#"{"path": "/no/such/file"}"#];
    let call = cli(&served, &failing);
    assert_eq!(code(&call), Some(1), "{}", stdout(&call));
    assert!(
        stderr(&call)
            .starts_with("error: alpha read_file returned an error:\ncannot read /no/such/file"),
        "{}",
        stderr(&call)
    );
    let mut args = failing.to_vec();
    args.push("--json");
    let call = cli(&served, &args);
    assert_eq!(code(&call), Some(1));
    assert_eq!(json_of(&call)["isError"], true);

    // Unknown apps and tools: exit 5, named.
    let call = cli(&served, &["call", "nope", "echo"]);
    assert_eq!(code(&call), Some(5));
    assert_eq!(
        stderr(&call),
        format!(
            "error: the gateway at {} has no app 'nope' (see `mcpapp-gateway apps list`)\n",
            served.url
        )
    );
    let call = cli(&served, &["call", "alpha", "nope"]);
    assert_eq!(code(&call), Some(5));
    assert!(
        stderr(&call).starts_with("error: alpha has no tool 'nope' (its tools: app_only_tool, "),
        "{}",
        stderr(&call)
    );
    let show = cli(&served, &["apps", "show", "nope"]);
    assert_eq!(code(&show), Some(5));
    let restart = cli(&served, &["apps", "restart", "nope"]);
    assert_eq!(code(&restart), Some(5));
}

#[test]
fn a_missing_or_wrong_token_exits_4_without_showing_it() {
    let served = serve();
    let wrong = "not-the-token-93a1";
    for token in [None, Some(wrong)] {
        for args in [vec!["apps"], vec!["call", "alpha", "echo"], vec!["reload"]] {
            let mut all = args.clone();
            all.extend(["--url", &served.url]);
            let output = cli_with(token, &all, "");
            assert_eq!(code(&output), Some(4), "{args:?} {}", stderr(&output));
            let err = stderr(&output);
            let hint = if token.is_some() {
                "MCPAPP_TOKEN is not its token"
            } else {
                "it needs a token: set MCPAPP_TOKEN"
            };
            assert_eq!(
                err,
                format!(
                    "error: the gateway at {} refused the request: {hint}\n",
                    served.url
                )
            );
            assert!(!err.contains(wrong) && !err.contains(TOKEN));
            assert!(stdout(&output).is_empty());
        }
    }
}

#[test]
fn no_gateway_exits_3_and_bad_arguments_exit_2() {
    // A port nothing listens on: taken, then given back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [
        vec!["apps"],
        vec!["apps", "restart", "alpha"],
        vec!["call", "alpha", "echo"],
        vec!["reload"],
    ] {
        let mut all = args.clone();
        all.extend(["--url", &url]);
        let output = cli_with(Some(TOKEN), &all, "");
        assert_eq!(code(&output), Some(3), "{args:?}");
        let err = stderr(&output);
        assert!(
            err.starts_with(&format!(
                "error: no gateway at {url}: is `mcpapp-gateway serve` running? ("
            )),
            "{err}"
        );
        assert!(!err.contains(TOKEN), "{err}");
    }
    // MCPAPP_URL is the default.
    // Tests start the binary under test; that is their job.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new(GATEWAY)
        .args(["apps"])
        .env_clear()
        .env("MCPAPP_URL", &url)
        .output()
        .unwrap();
    assert_eq!(code(&output), Some(3));
    assert!(stderr(&output).contains(&url), "{}", stderr(&output));

    // Arguments that are not a JSON object, a URL that is not one, and clap's own errors.
    for (args, message) in [
        (
            vec!["call", "alpha", "echo", "[1"],
            "error: the arguments are not JSON: EOF while parsing a list at line 1 column 2\n",
        ),
        (
            vec!["call", "alpha", "echo", "[1]"],
            "error: the arguments must be a JSON object such as {\"message\": \"hi\"}, not an array\n",
        ),
        (
            vec!["apps", "--url", "localhost"],
            "error: --url 'localhost' is not a URL such as http://127.0.0.1:8787: relative URL without a base\n",
        ),
    ] {
        let output = cli_with(None, &args, "");
        assert_eq!(code(&output), Some(2), "{args:?}");
        assert_eq!(stderr(&output), message);
    }
    let output = cli_with(None, &["apps", "restart"], "");
    assert_eq!(code(&output), Some(2));
    let output = cli_with(None, &["call", "alpha", "echo", "-"], "{\"a\": ");
    assert_eq!(code(&output), Some(2));
    assert!(
        stderr(&output).starts_with("error: the arguments on stdin are not JSON: "),
        "{}",
        stderr(&output)
    );
}
