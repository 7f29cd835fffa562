//! An incremental decoder for Server-Sent Events: bytes in, the `data` payload of each
//! complete event out. Only what a Chat Completions stream needs: `data` fields joined with
//! newlines, comments and other fields ignored.

/// Longest line accepted, so that a server that never sends a newline cannot exhaust memory.
pub(crate) const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// A line was longer than [`MAX_LINE_BYTES`].
#[derive(Debug)]
pub(crate) struct LineTooLong;

#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no newline, so long lines are scanned once.
    scanned: usize,
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data of every event they complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, LineTooLong> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(offset) = self.buffer[from..].iter().position(|&b| b == b'\n') {
            let end = from + offset;
            let mut line = &self.buffer[start..end];
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            // Lines are split on '\n', so a complete line is complete UTF-8 from a
            // well-behaved server; anything else is replaced rather than rejected.
            let line = String::from_utf8_lossy(line).into_owned();
            if let Some(data) = self.line(&line) {
                events.push(data);
            }
            start = end + 1;
            from = start;
        }
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(LineTooLong);
        }
        Ok(events)
    }

    /// Ends the input: returns the data of an event that was not followed by an empty line.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buffer);
        self.scanned = 0;
        if !rest.is_empty() {
            let line = String::from_utf8_lossy(&rest).into_owned();
            if let Some(data) = self.line(line.trim_end_matches('\r')) {
                return Some(data);
            }
        }
        self.data.take()
    }

    /// Handles one line; returns the event data when the line ends an event.
    fn line(&mut self, line: &str) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: {\"a\"").unwrap().is_empty());
        assert!(d.push(b":1}\r\n").unwrap().is_empty());
        assert_eq!(d.push(b"\r\n: comment\n").unwrap(), ["{\"a\":1}"]);
        assert_eq!(
            d.push(b"event: x\ndata: one\ndata:two\n\ndata: [DONE]\n\n")
                .unwrap(),
            ["one\ntwo", "[DONE]"]
        );
        assert!(d.push(b"data: tail").unwrap().is_empty());
        assert_eq!(d.finish().as_deref(), Some("tail"));
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn endless_lines_are_refused() {
        let mut d = SseDecoder::default();
        let chunk = vec![b'x'; MAX_LINE_BYTES + 1];
        assert!(d.push(&chunk).is_err());
    }
}
