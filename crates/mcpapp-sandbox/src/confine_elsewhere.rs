//! Elsewhere than Linux there is nothing to confine with: [`Confinement`] and
//! [`ConfinedChild`] have no values, so a launch never carries one (`enforce` refuses the
//! app, `best-effort` runs it unconfined).

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::ExitStatus;

/// Never constructed here: only Linux has a sandbox.
#[derive(Debug)]
pub enum Confinement {}

impl Confinement {
    /// Always an error: there is nothing to confine with.
    pub(crate) fn prepare(_policy: &crate::policy::SandboxPolicy) -> Result<Self, String> {
        Err("this platform has no sandbox (Linux only)".to_owned())
    }

    /// Cannot be called: there is no value to call it on.
    ///
    /// # Errors
    /// None.
    pub fn spawn(&self, _request: &SpawnRequest<'_>) -> io::Result<ConfinedChild> {
        match *self {}
    }
}

/// One program to start confined.
#[derive(Debug, Clone, Copy)]
pub struct SpawnRequest<'a> {
    /// The program (absolute, or relative to `cwd`).
    pub program: &'a Path,
    /// Its arguments, after the program's name.
    pub args: &'a [OsString],
    /// Its whole environment.
    pub env: &'a [(OsString, OsString)],
    /// Its working folder.
    pub cwd: &'a Path,
}

/// Never constructed here.
#[derive(Debug)]
pub struct ConfinedChild {
    never: Confinement,
    /// Its standard input.
    pub stdin: Option<tokio::io::Empty>,
    /// Its standard output.
    pub stdout: Option<tokio::io::Empty>,
    /// Its standard error.
    pub stderr: Option<tokio::io::Empty>,
}

impl ConfinedChild {
    /// Its process id.
    pub fn id(&self) -> u32 {
        match self.never {}
    }

    /// Cannot be called.
    ///
    /// # Errors
    /// None.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self.never {}
    }
}
