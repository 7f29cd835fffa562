//! stderr for log lines that shares the terminal with `serve`'s progress display: while the
//! display is active, each log line is written with the display suspended (cleared, then
//! drawn again below the line), so neither garbles the other.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use indicatif::MultiProgress;

/// The display being drawn, if any.
static ACTIVE: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// Makes log lines go around `display` until [`deactivate`].
pub(crate) fn activate(display: &MultiProgress) {
    *ACTIVE.lock().unwrap_or_else(PoisonError::into_inner) = Some(display.clone());
}

/// Log lines go straight to stderr again.
pub(crate) fn deactivate() {
    *ACTIVE.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

/// The tracing writer: stderr, around the progress display while there is one.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The formatter hands over one whole event per call.
        let active = ACTIVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match active {
            Some(display) => display
                .suspend(|| std::io::stderr().write_all(buf))
                .map(|()| buf.len()),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
