//! Measures a Rust file for the size rules: its lines outside test items (`#[cfg(test)]`
//! modules, functions and impls), the test modules it declares in other files, and the length
//! of every function with a body outside test items, counted from its `fn` line to its
//! closing brace.

use super::lex::{Tok, Token, tokens};

/// What the size rules need to know about one file.
#[derive(Debug, Default)]
pub(crate) struct Measure {
    /// Lines outside `#[cfg(test)]` items.
    pub(crate) non_test_lines: usize,
    /// Modules declared `#[cfg(test)] mod name;`, which live in files of their own.
    pub(crate) test_modules: Vec<String>,
    /// Every function with a body outside test items: name, first line, length in lines.
    pub(crate) functions: Vec<(String, usize, usize)>,
}

/// Measures `text`.
pub(crate) fn measure(text: &str) -> Measure {
    let toks = tokens(text);
    let mut measure = Measure::default();
    let mut excluded = 0;
    let mut i = 0;
    while i < toks.len() {
        if let Some(after_attr) = cfg_test_attribute(&toks, i) {
            let (end, end_line, module) = item_end(&toks, after_attr);
            excluded += end_line + 1 - toks[i].line;
            measure.test_modules.extend(module);
            i = end + 1;
            continue;
        }
        if ident(&toks, i) == Some("fn")
            && let Some(name) = ident(&toks, i + 1)
            && let Some(open) = body_start(&toks, i + 2)
        {
            let close = matching(&toks, open);
            let length = toks[close].line + 1 - toks[i].line;
            measure
                .functions
                .push((name.to_owned(), toks[i].line, length));
            // Go on inside the body, so functions nested in it are measured too.
            i = open + 1;
            continue;
        }
        i += 1;
    }
    measure.non_test_lines = text.lines().count().saturating_sub(excluded);
    measure
}

fn ident(toks: &[Token], i: usize) -> Option<&str> {
    match toks.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(name)) => Some(name),
        _ => None,
    }
}

fn punct(toks: &[Token], i: usize) -> Option<char> {
    match toks.get(i).map(|t| &t.tok) {
        Some(Tok::Punct(c)) => Some(*c),
        _ => None,
    }
}

/// When `#[cfg(test)]` starts at `i`, the index after it.
fn cfg_test_attribute(toks: &[Token], i: usize) -> Option<usize> {
    let shape = [
        punct(toks, i) == Some('#'),
        punct(toks, i + 1) == Some('['),
        ident(toks, i + 2) == Some("cfg"),
        punct(toks, i + 3) == Some('('),
        ident(toks, i + 4) == Some("test"),
        punct(toks, i + 5) == Some(')'),
        punct(toks, i + 6) == Some(']'),
    ];
    shape.iter().all(|ok| *ok).then_some(i + 7)
}

/// The end of the item starting at `i` (after its attributes): the index and line of its
/// closing `;` or `}`, and its name when it is `mod name;`.
fn item_end(toks: &[Token], mut i: usize) -> (usize, usize, Option<String>) {
    let start = i;
    let mut depth = 0usize;
    while i < toks.len() {
        match punct(toks, i) {
            Some('(' | '[') => depth += 1,
            Some(')' | ']') => depth = depth.saturating_sub(1),
            Some(';') if depth == 0 => {
                let module = (ident(toks, i.saturating_sub(2)) == Some("mod") && i >= start + 2)
                    .then(|| ident(toks, i - 1).map(str::to_owned))
                    .flatten();
                return (i, toks[i].line, module);
            }
            Some('{') if depth == 0 => {
                let close = matching(toks, i);
                return (close, toks[close].line, None);
            }
            _ => {}
        }
        i += 1;
    }
    let last = toks.len().saturating_sub(1);
    (last, toks.get(last).map_or(0, |t| t.line), None)
}

/// The `{` that opens the body of the function whose signature starts at `i`, or `None` for
/// a declaration without a body.
fn body_start(toks: &[Token], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    while i < toks.len() {
        match punct(toks, i) {
            Some('(' | '[') => depth += 1,
            Some(')' | ']') => depth = depth.saturating_sub(1),
            Some(';') if depth == 0 => return None,
            Some('{') if depth == 0 => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The `}` matching the `{` at `open` (or the last token of an unbalanced file).
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, tok) in toks.iter().enumerate().skip(open) {
        match tok.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::measure;

    #[test]
    fn test_items_are_left_out_and_functions_measured() {
        let text = "\
//! Doc.
fn short() {
    let _ = \"}\";
}

struct S;
impl S {
    pub fn method(&self) -> u32 {
        fn nested() {}
        nested();
        1
    }
    fn declared(&self);
}

#[cfg(test)]
mod other;

#[cfg(test)]
#[allow(dead_code)]
mod tests {
    fn in_test() {
    }
}
";
        let m = measure(text);
        assert_eq!(m.non_test_lines, 16);
        assert_eq!(m.test_modules, ["other"]);
        let functions: Vec<(&str, usize, usize)> = m
            .functions
            .iter()
            .map(|(name, line, len)| (name.as_str(), *line, *len))
            .collect();
        assert_eq!(
            functions,
            [("short", 2, 3), ("method", 8, 5), ("nested", 9, 1)]
        );
    }
}
