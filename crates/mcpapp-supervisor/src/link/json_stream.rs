//! An `application/json` response body read as it arrives: a sequence of JSON values with
//! whitespace (usually a newline) between them, each handed over as soon as it is whole.
//!
//! The 2026-07-28 transport answers a request with "a single JSON object", but servers stream
//! newline-delimited messages under that media type too (the conformance suite's reference
//! server does, for `subscriptions/listen` and for calls that report progress first); a
//! listen stream's body never ends. So the link must not wait for the end of a JSON body
//! before it reads what is in it. A body that is one object reads exactly as before.
//!
//! Pure (no I/O): the link feeds it chunks. It finds the values' edges with a small scanner
//! that counts brackets outside strings (JSON-RPC messages are objects, or arrays for
//! batches) and carries its state across chunks, so every byte is looked at once; it does
//! not check the values' syntax, which `RawMessage::parse` does.

/// Why a body cannot be read further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StreamError {
    /// Something other than an object or array at the top level (a number, a word, a stray
    /// bracket): the rest of the body cannot be split reliably.
    #[error("the response body is not a sequence of JSON messages: {0}")]
    NotJson(String),
    /// One message grew beyond the limit.
    #[error("a message in the response is larger than {0} bytes")]
    TooLarge(usize),
}

/// Splits a body into its JSON values, chunk by chunk.
#[derive(Debug)]
pub(crate) struct JsonValues {
    /// Bytes of the value being read (and whatever followed it in the last chunk).
    buffer: Vec<u8>,
    /// How far `buffer` has been scanned.
    scanned: usize,
    /// Where the current value starts in `buffer`, once one has started.
    start: Option<usize>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Largest value accepted.
    limit: usize,
}

impl JsonValues {
    /// A splitter that refuses any value larger than `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            buffer: Vec::new(),
            scanned: 0,
            start: None,
            depth: 0,
            in_string: false,
            escaped: false,
            limit,
        }
    }

    /// Takes the next chunk of the body and returns the values it completed, in order.
    ///
    /// # Errors
    /// [`StreamError`] when the body is not a sequence of objects and arrays, or a value is
    /// larger than the limit; the splitter should not be fed again.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, StreamError> {
        self.buffer.extend_from_slice(chunk);
        let mut values = Vec::new();
        let mut consumed = 0;
        while self.scanned < self.buffer.len() {
            let byte = self.buffer[self.scanned];
            self.scanned += 1;
            let Some(start) = self.start else {
                match byte {
                    b' ' | b'\t' | b'\r' | b'\n' => consumed = self.scanned,
                    b'{' | b'[' => {
                        self.start = Some(self.scanned - 1);
                        self.depth = 1;
                    }
                    _ => return Err(self.not_json(self.scanned - 1)),
                }
                continue;
            };
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        values.push(self.buffer[start..self.scanned].to_vec());
                        self.start = None;
                        consumed = self.scanned;
                    }
                }
                _ => {}
            }
        }
        // Keep only what is not handed over yet.
        let keep_from = self.start.unwrap_or(consumed);
        self.buffer.drain(..keep_from);
        self.scanned -= keep_from;
        if let Some(start) = self.start.as_mut() {
            *start -= keep_from;
        }
        if self.buffer.len() > self.limit {
            return Err(StreamError::TooLarge(self.limit));
        }
        Ok(values)
    }

    /// The body has ended: what is left unfinished, if anything but whitespace.
    pub(crate) fn rest(&self) -> Option<String> {
        let rest = String::from_utf8_lossy(&self.buffer);
        let rest = rest.trim();
        (!rest.is_empty()).then(|| rest.chars().take(200).collect())
    }

    fn not_json(&self, at: usize) -> StreamError {
        let end = (at + 40).min(self.buffer.len());
        StreamError::NotJson(String::from_utf8_lossy(&self.buffer[at..end]).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(values: Vec<Vec<u8>>) -> Vec<String> {
        values
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect()
    }

    #[test]
    fn one_object_reads_as_one_value() {
        let mut values = JsonValues::new(1024);
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"a":[1,{"b":"}"}]}}"#;
        assert_eq!(texts(values.push(body.as_bytes()).unwrap()), [body]);
        assert_eq!(values.rest(), None);
    }

    #[test]
    fn newline_delimited_messages_come_out_as_each_is_complete_whatever_the_chunks() {
        let body = "{\"method\":\"notifications/progress\",\"params\":{\"t\":\"a\\\"}\"}}\n{\"id\":1,\"result\":{\"text\":\"é{[\"}}\n";
        // Every split point, byte by byte, gives the same two values.
        for split in 0..body.len() {
            let mut values = JsonValues::new(1024);
            let mut got = texts(values.push(&body.as_bytes()[..split]).unwrap());
            got.extend(texts(values.push(&body.as_bytes()[split..]).unwrap()));
            assert_eq!(
                got,
                [
                    "{\"method\":\"notifications/progress\",\"params\":{\"t\":\"a\\\"}\"}}",
                    "{\"id\":1,\"result\":{\"text\":\"é{[\"}}"
                ],
                "split at {split}"
            );
            assert_eq!(values.rest(), None);
        }
    }

    #[test]
    fn a_value_arrives_only_once_it_is_whole_and_an_unfinished_one_is_left_over() {
        let mut values = JsonValues::new(1024);
        assert!(values.push(b"  {\"ack\":").unwrap().is_empty());
        assert_eq!(
            texts(values.push(b"true}{\"n\"").unwrap()),
            ["{\"ack\":true}"]
        );
        assert_eq!(values.rest().as_deref(), Some("{\"n\""));
    }

    #[test]
    fn anything_but_objects_and_arrays_at_the_top_is_refused() {
        let mut values = JsonValues::new(1024);
        assert!(matches!(
            values.push(b"{\"a\":1}\nnot json"),
            Err(StreamError::NotJson(text)) if text == "not json"
        ));
        assert!(matches!(
            JsonValues::new(1024).push(b"}"),
            Err(StreamError::NotJson(_))
        ));
    }

    #[test]
    fn the_limit_holds_per_value_not_per_body() {
        let mut values = JsonValues::new(16);
        // Many small values: fine, however long the body.
        for _ in 0..100 {
            assert_eq!(values.push(b"{\"n\":1}\n").unwrap().len(), 1);
        }
        assert_eq!(
            values.push(b"{\"long\":\"0123456789\""),
            Err(StreamError::TooLarge(16))
        );
    }
}
