//! Elsewhere than Linux there is nothing to confine with: [`Confinement`] has no values, so
//! a launch never carries one (`enforce` refuses the app, `best-effort` runs it unconfined).

use std::io;
use std::sync::Arc;

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
    pub fn install(self: &Arc<Self>, _command: &mut std::process::Command) -> io::Result<Hook> {
        match **self {}
    }
}

/// Explains nothing: nothing can fail in a hook that does not exist.
#[derive(Debug)]
pub struct Hook;

impl Hook {
    /// `error` as it is.
    pub fn explain(self, error: io::Error) -> io::Error {
        error
    }
}
