//! MCPB bundles built here: node and python servers with `user_config` (a sensitive value, a
//! repeated directory) and `${__dirname}`, installed, probed and started for real; and the
//! bundles that must be refused before anything is written.

use std::path::Path;

use mcpapp_install::{BundleLimits, InstallError, Installer, Request, Source, resolve};
use mcpapp_manifest::{Lifecycle, McpAppManifest};
use mcpapp_testkit::{TinyBundle, ZipEntry, zip_of};
use serde_json::json;

use crate::{Place, call, fixture, settle};

/// The tiny node server at `version`, asking for a sensitive `api_key` and a repeated
/// directory with a default.
fn node(version: &str) -> TinyBundle {
    TinyBundle::new("tiny-node")
        .display_name("Tiny Node")
        .version(version)
        .description("A tiny node server")
        .args(&["--dirs", "${user_config.dirs}"])
        .env("API_KEY", "${user_config.api_key}")
        .env("TINY_VERSION", version)
        .user_config(json!({
            "api_key": {"type": "string", "title": "API key", "description": "The service's key", "sensitive": true, "required": true},
            "dirs": {"type": "directory", "title": "Folders", "multiple": true, "default": ["${HOME}"]}
        }))
}

async fn install_file(
    installer: &Installer,
    path: &Path,
    sha256: Option<&str>,
    set: &[(&str, &str)],
) -> Result<mcpapp_install::Installed, InstallError> {
    let source = Source::parse(&path.display().to_string(), Path::new("/"))?;
    let plan = installer
        .plan(
            &source,
            &Request {
                sha256: sha256.map(str::to_owned),
                ..Request::default()
            },
        )
        .await?;
    let given: Vec<(String, String)> = set
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let values = installer.resolve_values(&plan, given, None)?;
    installer.install(&plan, &values, &|_| {}).await
}

#[tokio::test]
async fn a_node_bundle_installs_with_its_secret_kept_apart_and_its_dirname_resolved() {
    let place = Place::new();
    let file = place.dir.path().join("tiny-node.mcpb");
    node("1.0.0").write(&file);
    let installer = place.installer(true);

    // Without the required sensitive value nothing happens, and the error names the flag.
    let source = Source::parse(&file.display().to_string(), Path::new("/")).unwrap();
    let plan = installer.plan(&source, &Request::default()).await.unwrap();
    let missing = resolve(&plan.inputs, &[], None).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "missing required input: api_key; pass --set api_key=…"
    );
    assert!(plan.inputs.iter().any(|i| i.key == "api_key" && i.secret));

    let secret = "tiny-k3y-1f0a9";
    let installed = install_file(
        &installer,
        &file,
        None,
        &[("api_key", secret), ("dirs", "/srv/a"), ("dirs", "/srv/b")],
    )
    .await
    .unwrap();
    assert_eq!(installed.id, "tiny-node");
    assert_eq!(installed.probe.as_ref().unwrap().tools, 3);
    assert!(!installed.probe.as_ref().unwrap().has_ui);

    let manifest =
        McpAppManifest::parse(&std::fs::read_to_string(&installed.manifest_path).unwrap())
            .unwrap()
            .manifest;
    let bundle_dir = installed.folder.join(".mcpapp-runtime/1.0.0/bundle");
    assert_eq!(manifest.command.as_deref(), Some("node"));
    assert_eq!(
        manifest.arguments,
        [
            format!("{}/server/index.js", bundle_dir.display()),
            "--dirs".to_owned(),
            "/srv/a".to_owned(),
            "/srv/b".to_owned()
        ]
    );
    assert_eq!(manifest.environment["API_KEY"], "secret:API_KEY");
    // The folders given to its `directory` input are what it requests.
    assert_eq!(manifest.permissions.filesystem.write, ["/srv/a", "/srv/b"]);
    assert_eq!(
        installed
            .requested
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["write=/srv/a", "write=/srv/b"]
    );
    let record = manifest.install.unwrap();
    assert_eq!(record.source, "mcpb");
    assert_eq!(record.secret_inputs, ["api_key"]);
    assert!(record.integrity.unwrap().starts_with("sha256-"));
    assert!(installed.folder.join("mcpb-manifest.json").is_file());
    assert!(place.files_containing(secret).is_empty());

    // Installing the same source again with --set changes a value and keeps the others.
    let first = secret;
    let secret = "tiny-k3y-2b7e4";
    let again = install_file(&installer, &file, None, &[("api_key", secret)])
        .await
        .unwrap();
    assert_eq!(again.previous_version.as_deref(), Some("1.0.0"));
    assert!(place.files_containing(first).is_empty() && place.files_containing(secret).is_empty());

    // Started as the gateway starts it, the app gets the value; its folder is ${__dirname}.
    let supervisor = place.start().await;
    let app = supervisor.get("tiny-node").unwrap();
    assert_eq!(settle(&app).await, Lifecycle::Running);
    let env = call(&app, "get_env", json!({"name": "API_KEY"})).await;
    assert_eq!(env["value"], secret);
    let about = call(&app, "about", json!({})).await;
    assert_eq!(
        about["dirname"],
        bundle_dir.join("server").display().to_string()
    );
    assert_eq!(about["argv"], json!(["--dirs", "/srv/a", "/srv/b"]));
    supervisor.shutdown().await;
}

#[tokio::test]
async fn a_python_bundle_installs_and_starts() {
    let place = Place::new();
    let manifest = json!({
        "manifest_version": "0.4",
        "name": "tiny-python",
        "version": "0.2.0",
        "description": "A tiny python server",
        "author": {"name": "mcpapp tests"},
        "server": {
            "type": "python",
            "entry_point": "server/main.py",
            "mcp_config": {
                "command": "python3",
                "args": ["${__dirname}/server/main.py"],
                "env": {"PYTHONDONTWRITEBYTECODE": "1", "REGION": "${user_config.region}"}
            }
        },
        "user_config": {"region": {"type": "string", "title": "Region", "default": "eu"}},
        "compatibility": {"platforms": ["linux", "darwin"]}
    });
    let file = place.dir.path().join("tiny-python.mcpb");
    std::fs::write(
        &file,
        zip_of(&[
            ZipEntry::File("manifest.json", manifest.to_string().as_bytes()),
            ZipEntry::Executable("server/main.py", fixture("tiny_server.py").as_bytes()),
        ]),
    )
    .unwrap();
    let installed = install_file(&place.installer(true), &file, None, &[])
        .await
        .unwrap();
    assert_eq!(installed.version, "0.2.0");
    let manifest =
        McpAppManifest::parse(&std::fs::read_to_string(&installed.manifest_path).unwrap())
            .unwrap()
            .manifest;
    // A default is a plain value, kept in the manifest (and in the record, for updates).
    assert_eq!(manifest.environment["REGION"], "eu");
    assert_eq!(manifest.install.unwrap().inputs["region"], "eu");
    let executable = installed
        .folder
        .join(".mcpapp-runtime/0.2.0/bundle/server/main.py");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&executable).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }
    let supervisor = place.start().await;
    let app = supervisor.get("tiny-python").unwrap();
    assert_eq!(settle(&app).await, Lifecycle::Running);
    let env = call(&app, "get_env", json!({"name": "REGION"})).await;
    assert_eq!(env["value"], "eu");
    supervisor.shutdown().await;
}

/// Tries to install `bytes` as a bundle; asserts it is refused and nothing was written.
async fn refused(bytes: Vec<u8>, sha256: Option<&str>, limits: BundleLimits) -> String {
    let place = Place::new();
    let file = place.dir.path().join("bad.mcpb");
    std::fs::write(&file, bytes).unwrap();
    let installer = Installer::builder(place.apps(), place.store())
        .bundle_limits(limits)
        .build()
        .unwrap();
    let err = install_file(&installer, &file, sha256, &[("api_key", "x")])
        .await
        .unwrap_err();
    assert!(!place.apps().exists(), "the apps folder was created");
    assert!(
        !place.store().path().exists(),
        "the secret store was written"
    );
    // Nothing escaped the folder either.
    assert!(!place.dir.path().join("evil").exists());
    err.to_string()
}

#[tokio::test]
async fn bad_bundles_are_refused_before_anything_is_written() {
    let good = node("1.0.0").zip();
    let limits = BundleLimits::default();
    let wrong = "0".repeat(64);
    let err = refused(good.clone(), Some(&wrong), limits).await;
    assert!(
        err.contains("its SHA-256 is") && err.contains(&wrong),
        "{err}"
    );

    let manifest = node("1.0.0").manifest().to_string();
    let with = |entry: ZipEntry<'_>| {
        zip_of(&[ZipEntry::File("manifest.json", manifest.as_bytes()), entry])
    };
    let err = refused(with(ZipEntry::File("../evil", b"x")), None, limits).await;
    assert!(
        err.contains("entry '../evil' leaves the bundle's folder"),
        "{err}"
    );
    let err = refused(
        with(ZipEntry::File("server/../../evil", b"x")),
        None,
        limits,
    )
    .await;
    assert!(err.contains("leaves the bundle's folder"), "{err}");
    let err = refused(with(ZipEntry::File("/tmp/evil", b"x")), None, limits).await;
    assert!(err.contains("is an absolute path"), "{err}");
    let err = refused(
        with(ZipEntry::Symlink("server/link", "/etc/passwd")),
        None,
        limits,
    )
    .await;
    assert!(
        err.contains("entry 'server/link' is a symbolic link"),
        "{err}"
    );
    let err = refused(
        with(ZipEntry::Special("server/fifo", 0o010_644)),
        None,
        limits,
    )
    .await;
    assert!(err.contains("is a named pipe"), "{err}");
    let err = refused(
        with(ZipEntry::Special("server/tty", 0o020_620)),
        None,
        limits,
    )
    .await;
    assert!(err.contains("is a device file"), "{err}");

    // Too large packed, and too large unpacked (a small bundle that expands).
    let small = BundleLimits {
        max_bundle_bytes: 512,
        ..limits
    };
    let err = refused(good.clone(), None, small).await;
    assert!(err.contains("more than the limit of 512 bytes"), "{err}");
    let zeros = vec![0u8; 4 * 1024 * 1024];
    let expanding = BundleLimits {
        max_unpacked_bytes: 1024 * 1024,
        ..limits
    };
    let err = refused(
        with(ZipEntry::File("server/zeros", &zeros)),
        None,
        expanding,
    )
    .await;
    assert!(err.contains("unpacks to more than the limit"), "{err}");

    // Not a bundle at all, and a bundle without a manifest.
    let err = refused(b"not a zip".to_vec(), None, limits).await;
    assert!(err.contains("not a ZIP file"), "{err}");
    let err = refused(zip_of(&[ZipEntry::File("README", b"hi")]), None, limits).await;
    assert!(err.contains("no manifest.json"), "{err}");
}

#[tokio::test]
async fn a_bad_bundle_manifest_names_its_field_line_and_column() {
    let place = Place::new();
    let text = "{\n  \"manifest_version\": \"0.3\",\n  \"name\": \"x\",\n  \"version\": 3,\n  \"description\": \"d\"\n}";
    let file = place.dir.path().join("x.mcpb");
    std::fs::write(
        &file,
        zip_of(&[ZipEntry::File("manifest.json", text.as_bytes())]),
    )
    .unwrap();
    let err = install_file(&place.installer(false), &file, None, &[])
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("x.mcpb!/manifest.json:4:"), "{shown}");
    assert!(
        shown.contains("version: invalid type: integer `3`, expected a string"),
        "{shown}"
    );
}
