//! Text for people shared by the commands that talk to a running gateway: aligned tables,
//! JSON values shown as plain text, diagnostics in the `path:line:col: severity: message`
//! form of `validate`, and stdout as a writer.

use std::io::Write;

use serde_json::Value;

/// stdout, for command output (logs and hints go to stderr).
#[derive(Debug)]
pub(crate) struct Out {
    inner: std::io::Stdout,
}

impl Out {
    pub(crate) fn stdout() -> Self {
        Self {
            inner: std::io::stdout(),
        }
    }

    /// `value` as pretty JSON on one or more lines.
    pub(crate) fn json(&mut self, value: &Value) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        writeln!(self.inner, "{text}")
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A JSON value as plain text: strings as they are, `null` as `-`, anything else as JSON.
pub(crate) fn str_of(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `rows` under `headers`, each column as wide as its widest cell, two spaces apart; lines
/// carry no trailing blanks.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            text.push_str(cell);
            let pad = width.saturating_sub(cell.chars().count());
            text.push_str(&" ".repeat(pad + 2));
        }
        let mut text = text.trim_end().to_owned();
        text.push('\n');
        text
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A discovery diagnostic (`{"path", "line", "column", "severity", "message"}`) as
/// `path:line:col: severity: message`, leaving out what it has not got.
pub(crate) fn diagnostic(value: &Value) -> String {
    let mut place = String::new();
    if let Some(path) = value["path"].as_str() {
        place.push_str(path);
        for key in ["line", "column"] {
            if let Some(n) = value[key].as_u64() {
                place.push_str(&format!(":{n}"));
            }
        }
        place.push_str(": ");
    }
    format!(
        "{place}{}: {}",
        str_of(&value["severity"]).to_lowercase(),
        str_of(&value["message"])
    )
}
