//! Elsewhere than Linux there is nothing to confine with: [`Confinement`] and
//! [`ConfinedChild`] have no values, so a launch never carries one (`enforce` refuses the
//! app, `best-effort` runs it unconfined).

use std::io;
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
    pub fn spawn(&self, _request: &crate::SpawnRequest<'_>) -> io::Result<ConfinedChild> {
        match *self {}
    }
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
