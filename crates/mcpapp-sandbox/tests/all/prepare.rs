//! Launches prepared by `Sandbox::prepare`, with the gateway's real executable as the
//! launcher (and so its real kernel probe).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mcpapp_manifest::{AppIsolation, HostPort, IsolationMode, NetworkAccess};
use mcpapp_sandbox::{LAUNCHER_ARG, LaunchRequest, Sandbox, SandboxError, SandboxStatus};

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

#[test]
fn an_app_starts_through_the_launcher_with_folders_of_its_own_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut isolation = AppIsolation::new(IsolationMode::Enforce);
    isolation.state_directory = Some(dir.path().join("state"));
    let app_dir = dir.path().join("apps/notes");
    std::fs::create_dir_all(&app_dir).unwrap();
    let sandbox = sandbox();
    let prepared = sandbox.prepare(&request(&isolation, &app_dir)).unwrap();
    assert_eq!(prepared.program, sandbox.launcher());
    assert_eq!(prepared.args[0], LAUNCHER_ARG);
    assert_eq!(prepared.args[2], "--");
    assert!(
        Path::new(&prepared.args[3]).is_absolute(),
        "{:?}",
        prepared.args
    );
    assert!(Path::new(&prepared.args[3]).ends_with("sh"));
    // One folder of its own is its HOME and its TMPDIR, private to the gateway's user.
    let home = dir.path().join("state/apps/notes");
    assert_eq!(
        prepared.env,
        [
            ("HOME".into(), home.clone().into_os_string()),
            ("TMPDIR".into(), home.clone().into_os_string()),
        ]
    );
    for folder in [dir.path().join("state"), home] {
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
    // The policy the launcher gets is the one reported.
    let policy: serde_json::Value =
        serde_json::from_str(prepared.args[1].to_str().unwrap()).unwrap();
    assert_eq!(policy["enforce"], true);
    assert_eq!(
        policy["paths"].as_array().unwrap().len(),
        report.paths.len()
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
fn without_a_launcher_enforce_refuses_and_best_effort_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    // A launcher that is not there: the probe finds nothing (no Landlock, no seccomp).
    let sandbox = Sandbox::new(dir.path().join("no-such-launcher"));
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
