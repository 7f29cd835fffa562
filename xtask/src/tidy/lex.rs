//! Just enough of a Rust lexer for the size rules: identifiers and the brackets, `#` and `;`
//! with their line numbers, skipping comments, strings and character literals, so a `{` in a
//! string or a doc comment never counts as a block. Lifetimes are told apart from character
//! literals by what follows the quote.

/// One token the size rules look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    Punct(char),
}

/// A token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) line: usize,
}

/// The tokens of `text` that matter for measuring items.
pub(crate) fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => i = block_comment(&chars, i, &mut line),
            '"' => i = string(&chars, i + 1, 0, &mut line),
            'r' | 'b' | 'c' if starts_literal(&chars, i) => {
                i = prefixed_literal(&chars, i, &mut line);
            }
            '\'' => i = quote(&chars, i),
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Ident(chars[start..i].iter().collect()),
                    line,
                });
            }
            '{' | '}' | '(' | ')' | '[' | ']' | ';' | '#' => {
                out.push(Token {
                    tok: Tok::Punct(c),
                    line,
                });
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Skips a (nested) block comment starting at `i`; returns the index after it.
fn block_comment(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            ('\n', _) => {
                *line += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    i
}

/// Whether a literal with a prefix (`r"`, `r#"`, `b"`, `br"`, `c"`, `b'`) starts at `i`
/// (and not an identifier such as `r` or `bar`).
fn starts_literal(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i + 1;
    if chars[i] == 'b' && chars.get(j) == Some(&'r') {
        j += 1;
    }
    if chars[i] == 'b' && chars.get(j) == Some(&'\'') {
        return true;
    }
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

/// Skips a prefixed string or byte literal at `i`; returns the index after it.
fn prefixed_literal(chars: &[char], mut i: usize, line: &mut usize) -> usize {
    let raw = chars[i] == 'r' || (chars[i] == 'b' && chars.get(i + 1) == Some(&'r'));
    while chars[i] != '"' && chars[i] != '#' && chars[i] != '\'' {
        i += 1;
    }
    if chars[i] == '\'' {
        return quote(chars, i);
    }
    let mut hashes = 0;
    while chars[i] == '#' {
        hashes += 1;
        i += 1;
    }
    if raw {
        raw_string(chars, i + 1, hashes, line)
    } else {
        string(chars, i + 1, 0, line)
    }
}

/// Skips the rest of an escaped string whose opening quote is before `i`.
fn string(chars: &[char], mut i: usize, _hashes: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            '\n' => {
                *line += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    i
}

/// Skips the rest of a raw string closed by `"` and `hashes` `#`s.
fn raw_string(chars: &[char], mut i: usize, hashes: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if chars[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

/// Skips a character literal at `i`, or only the quote of a lifetime or label.
fn quote(chars: &[char], i: usize) -> usize {
    match chars.get(i + 1) {
        Some('\\') => {
            let mut j = i + 2;
            while j < chars.len() && chars[j] != '\'' {
                j += 1;
            }
            j + 1
        }
        Some(_) if chars.get(i + 2) == Some(&'\'') => i + 3,
        _ => i + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::{Tok, tokens};

    fn punct(text: &str) -> String {
        tokens(text)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Punct(c) => Some(c),
                Tok::Ident(_) => None,
            })
            .collect()
    }

    #[test]
    fn brackets_in_strings_comments_and_chars_do_not_count() {
        let text = r####"fn a<'x>(s: &'x str) { let _ = "{"; let _ = '{'; let _ = r#"}"#; /* { /* } */ */ // {
        let _ = b'}'; let _ = br##"{"##; let _ = '\''; }"####;
        assert_eq!(punct(text), "(){;;;;;;}");
    }

    #[test]
    fn lines_are_counted_through_multi_line_literals() {
        let text = "fn a() {\n let s = \"x\n y\";\n}\n";
        let last = tokens(text).pop().map(|t| t.line);
        assert_eq!(last, Some(4));
    }
}
