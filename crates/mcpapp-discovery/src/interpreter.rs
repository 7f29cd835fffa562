//! Where an app's program really runs from: a stdio app's command may be a link or a script
//! whose interpreter (its `#!` line, through links) lives outside the system's folders and
//! the app's own: a virtual environment's `python` linking to a pyenv or uv installation,
//! a Node from nvm. The sandbox executes only what it is granted, so such an interpreter's
//! installation folder is granted with the app (read and execute), unless it would expose what
//! the sandbox protects (`isolation.rs` checks).

use std::io::Read;
use std::path::{Path, PathBuf};

/// Folders the default sandbox executes from already.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// A program file as the kernel will execute it: where it really is, and the interpreter its
/// `#!` line names (with `/usr/bin/env NAME` looked up on `path`), both with links followed.
fn real_programs(program: &Path, path: Option<&str>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(real) = std::fs::canonicalize(program) else {
        return found;
    };
    // Only regular files are opened: reading a named pipe could block discovery.
    if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        return found;
    }
    if let Some(interpreter) = shebang(&real, path) {
        found.extend(std::fs::canonicalize(interpreter));
    }
    found.push(real);
    found
}

/// The interpreter of a script's `#!` line, if it has one.
fn shebang(file: &Path, path: Option<&str>) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    if interpreter.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return find_on_path(name, path);
    }
    Some(interpreter)
}

/// A bare program name on `path` (the first executable file of that name).
fn find_on_path(name: &str, path: Option<&str>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The command of a stdio app as a path: relative to the app folder with a separator, else
/// found on `path`.
fn command_file(command: &str, root: &Path, path: Option<&str>) -> Option<PathBuf> {
    let given = Path::new(command);
    if given.is_absolute() {
        Some(given.to_path_buf())
    } else if command.contains('/') {
        Some(root.join(given))
    } else {
        find_on_path(command, path)
    }
}

/// What to grant so that the command of an app in `root` can run: for each real program file
/// (the command, its interpreter) outside the system's folders and `root`, its installation
/// folder (`PREFIX` of `PREFIX/bin/NAME`) when it has that shape, then the file itself (the
/// caller takes the first that the sandbox allows).
pub(crate) fn grants(command: &str, root: &Path, path: Option<&str>) -> Vec<Vec<PathBuf>> {
    let Some(file) = command_file(command, root, path) else {
        return Vec::new();
    };
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    real_programs(&file, path)
        .into_iter()
        .filter(|real| {
            !SYSTEM.iter().any(|dir| real.starts_with(dir))
                && !real.starts_with(root)
                && !real.starts_with(&real_root)
        })
        .map(|real| {
            let prefix = real
                .parent()
                .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
                .and_then(Path::parent)
                .filter(|prefix| prefix.parent().is_some())
                .map(Path::to_path_buf);
            prefix.into_iter().chain(std::iter::once(real)).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venv_script_grants_the_interpreters_installation() {
        let dir = tempfile::tempdir().unwrap();
        let install = dir.path().join("pythons/3.12");
        std::fs::create_dir_all(install.join("bin")).unwrap();
        std::fs::write(install.join("bin/python3.12"), "binary").unwrap();
        let app = dir.path().join("app");
        std::fs::create_dir_all(app.join("venv/bin")).unwrap();
        std::os::unix::fs::symlink(install.join("bin/python3.12"), app.join("venv/bin/python"))
            .unwrap();
        let python = std::fs::canonicalize(app.join("venv/bin/python")).unwrap();
        std::fs::write(
            app.join("venv/bin/server"),
            format!(
                "#!{}\nimport server\n",
                app.join("venv/bin/python").display()
            ),
        )
        .unwrap();
        let real_install = std::fs::canonicalize(&install).unwrap();
        assert_eq!(
            grants("venv/bin/server", &app, None),
            [vec![real_install.clone(), python.clone()]]
        );
        // `#!/usr/bin/env python3.12` finds it on PATH.
        std::fs::write(app.join("run"), "#!/usr/bin/env -S python3.12\n").unwrap();
        let path = install.join("bin").display().to_string();
        assert_eq!(
            grants("./run", &app, Some(&path)),
            [vec![real_install, python]]
        );
        // Nothing to grant for what the sandbox executes already.
        std::fs::write(app.join("plain"), "#!/bin/sh\n").unwrap();
        assert!(grants("./plain", &app, None).is_empty());
        assert!(grants("sh", &app, Some("/bin:/usr/bin")).is_empty());
        assert!(grants("no-such-program", &app, Some("/bin")).is_empty());
    }
}
