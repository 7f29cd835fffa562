//! Reading files with a size bound that does not trust their metadata.
//!
//! A file's reported length can be stale (it grew after `stat`) or meaningless (`/proc` files
//! report 0), so the bound is enforced on the bytes actually read: at most one byte more than
//! the limit is ever read, which is enough to tell that the file is too large.

use std::io::Read;

/// What reading at most `limit` bytes found.
#[derive(Debug)]
pub(crate) enum Bounded {
    /// The whole content, at most `limit` bytes.
    Read(Vec<u8>),
    /// There is more than `limit` bytes; nothing is kept.
    TooLarge,
}

/// Reads `reader` to its end, or stops as soon as it has more than `limit` bytes.
pub(crate) fn read_bounded(reader: impl Read, limit: u64) -> std::io::Result<Bounded> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).map_or(true, |len| len > limit) {
        Ok(Bounded::TooLarge)
    } else {
        Ok(Bounded::Read(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_limit_and_refuses_one_byte_more() {
        assert!(matches!(read_bounded(&b"abcd"[..], 4), Ok(Bounded::Read(b)) if b == b"abcd"));
        assert!(matches!(
            read_bounded(&b"abcde"[..], 4),
            Ok(Bounded::TooLarge)
        ));
        // An endless source is cut off after limit + 1 bytes.
        assert!(matches!(
            read_bounded(std::io::repeat(b'x'), 1024),
            Ok(Bounded::TooLarge)
        ));
        assert!(matches!(read_bounded(&b""[..], 0), Ok(Bounded::Read(b)) if b.is_empty()));
    }
}
