//! Launches prepared by `Sandbox::prepare`, with the gateway's real executable as the
//! kernel probe, and started for real through their confinement.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mcpapp_manifest::{AppIsolation, HostPort, IsolationMode, NetworkAccess};
use mcpapp_sandbox::{LaunchRequest, Sandbox, SandboxError, SandboxStatus, SpawnRequest};
use tokio::io::AsyncReadExt;

fn sandbox() -> Sandbox {
    Sandbox::new(mcpapp_testkit::bin("mcpapp-gateway")).protect_ports([8787, 8788])
}

fn request<'a>(isolation: &'a AppIsolation, app_dir: &'a Path) -> LaunchRequest<'a> {
    LaunchRequest {
        app_id: "notes",
        isolation,
        app_dir,
        program: Path::new("sh"),
        args: &[],
        path: Some(std::ffi::OsStr::new("/usr/bin:/bin")),
    }
}

#[tokio::test]
async fn an_app_starts_confined_with_folders_of_its_own_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut isolation = AppIsolation::new(IsolationMode::Enforce);
    isolation.state_directory = Some(dir.path().join("state"));
    let app_dir = dir.path().join("apps/notes");
    std::fs::create_dir_all(&app_dir).unwrap();
    let secret = dir.path().join("beside-the-config.txt");
    std::fs::write(&secret, "not for apps").unwrap();
    let sandbox = sandbox();
    let script = format!(
        "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; ulimit -c; \
         cat {} 2>/dev/null || echo refused; echo ok > \"$HOME/written\" && echo wrote",
        secret.display()
    );
    let args = ["-c".to_owned(), script];
    let prepared = sandbox
        .prepare(&LaunchRequest {
            args: &args,
            ..request(&isolation, &app_dir)
        })
        .unwrap();
    // The program itself, found on the app's PATH; no second program in between.
    assert!(prepared.program.is_absolute(), "{:?}", prepared.program);
    assert!(prepared.program.ends_with("sh"));
    assert_eq!(prepared.args, args.map(std::ffi::OsString::from));
    // One folder of its own is its HOME and its TMPDIR, private to the gateway's user.
    let home = dir.path().join("state/apps/notes");
    assert_eq!(
        prepared.env,
        [
            ("HOME".into(), home.clone().into_os_string()),
            ("TMPDIR".into(), home.clone().into_os_string()),
        ]
    );
    for folder in [dir.path().join("state"), home.clone()] {
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", folder.display());
    }
    let report = &prepared.report;
    assert_eq!(report.status, SandboxStatus::Enforced, "{report:?}");
    assert!(report.landlock_abi.unwrap() >= 6);
    assert_eq!(report.tcp_connect, "none");
    assert!(report.paths.iter().any(|p| p.path == app_dir));
    assert!(report.paths.iter().all(|p| p.path.exists()), "{report:?}");
    assert!(prepared.proxy.is_none());

    // Started for real, as the supervisor does: the child confines itself before the shell
    // runs.
    let confinement = prepared.confinement.as_ref().expect("a confinement");
    let mut child = confinement
        .spawn(&SpawnRequest {
            program: &prepared.program,
            args: &prepared.args,
            env: &prepared.env,
            cwd: &app_dir,
        })
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .await
        .unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{stdout} {status:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:\t0\t"));
    let bounding = if root { "0000000000000000" } else { "" };
    assert_eq!(lines[0], "CapEff:\t0000000000000000", "{stdout}");
    assert!(
        lines[1].starts_with("CapBnd:\t") && lines[1].ends_with(bounding),
        "{stdout}"
    );
    assert_eq!(
        lines[2..],
        ["NoNewPrivs:\t1", "Seccomp:\t2", "0", "refused", "wrote"]
    );
    assert_eq!(
        std::fs::read_to_string(home.join("written")).unwrap(),
        "ok\n"
    );
}

#[tokio::test]
async fn host_grants_get_a_proxy_and_the_proxy_variables() {
    let dir = tempfile::tempdir().unwrap();
    let mut isolation = AppIsolation::new(IsolationMode::Enforce);
    isolation.state_directory = Some(dir.path().to_path_buf());
    isolation.network = NetworkAccess::Limited {
        tcp_ports: [5432].into(),
        hosts: [HostPort::parse("api.example.com:443").unwrap()].into(),
    };
    let prepared = sandbox().prepare(&request(&isolation, dir.path())).unwrap();
    let proxy = prepared.proxy.as_ref().expect("a proxy");
    let url = proxy.url();
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "ALL_PROXY"] {
        assert!(
            prepared.env.iter().any(|(k, v)| k == name && *v == *url),
            "{name} in {:?}",
            prepared.env
        );
    }
    let port = proxy.addr().port();
    assert_eq!(prepared.report.tcp_connect, format!("5432,{port}"));
    assert_eq!(prepared.report.inet_sockets, "tcp");
    assert_eq!(prepared.report.proxy, Some(proxy.addr().to_string()));
}

#[test]
fn isolation_off_starts_the_program_itself() {
    let dir = tempfile::tempdir().unwrap();
    let isolation = AppIsolation::new(IsolationMode::Off);
    let prepared = sandbox().prepare(&request(&isolation, dir.path())).unwrap();
    assert_eq!(prepared.program, Path::new("sh"));
    assert!(prepared.env.is_empty());
    assert_eq!(prepared.report.status, SandboxStatus::None);
    assert!(prepared.report.note.as_deref().unwrap().contains("off"));
}

#[test]
fn without_a_probe_enforce_refuses_and_best_effort_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    // A probe that is not there finds nothing (no Landlock, no seccomp).
    let sandbox = Sandbox::new(dir.path().join("no-such-probe"));
    let mut isolation = AppIsolation::new(IsolationMode::Enforce);
    isolation.state_directory = Some(dir.path().to_path_buf());
    let err = sandbox
        .prepare(&request(&isolation, dir.path()))
        .unwrap_err();
    assert!(matches!(&err, SandboxError::Unsupported { missing, .. } if missing.len() >= 2));
    let text = err.to_string();
    assert!(
        text.contains("Landlock (Linux 5.13")
            && text.contains("McpApps.Entries.notes.Isolation.Mode")
            && text.contains("best-effort"),
        "{text}"
    );
    isolation.mode = IsolationMode::BestEffort;
    let prepared = sandbox.prepare(&request(&isolation, dir.path())).unwrap();
    assert_eq!(prepared.report.status, SandboxStatus::Partial);
    assert!(prepared.report.paths.is_empty());
    assert!(!prepared.report.seccomp);
    assert_eq!(
        prepared.report.missing.len(),
        3,
        "{:?}",
        prepared.report.missing
    );
}
