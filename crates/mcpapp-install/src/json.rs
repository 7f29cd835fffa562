//! Reading the JSON documents of other projects (`server.json`, MCPB `manifest.json`, registry
//! answers) into typed values, with errors that name the file, the field, the line and the
//! column, also for problems found after the value was read.

use jsonc_parser::ast;
use jsonc_parser::common::Ranged;
use serde::de::DeserializeOwned;

use crate::error::FormatError;

/// Reads `text` (from `file`) as a `T`.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, FormatError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        let message = inner.to_string();
        // serde_json ends its messages with the position, which the error carries anyway.
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(head, _)| head)
            .to_owned();
        FormatError {
            file: file.to_owned(),
            field: if field == "." { String::new() } else { field },
            line: inner.line(),
            column: inner.column(),
            message,
        }
    })?;
    deserializer.end().map_err(|err| FormatError {
        file: file.to_owned(),
        field: String::new(),
        line: err.line(),
        column: err.column(),
        message: "text after the JSON value".to_owned(),
    })?;
    Ok(value)
}

/// A document kept with its syntax tree, to say where a value is when a check after reading
/// it fails.
pub(crate) struct Located<'a> {
    text: &'a str,
    file: &'a str,
    root: Option<ast::Value<'a>>,
}

impl<'a> Located<'a> {
    pub(crate) fn new(text: &'a str, file: &'a str) -> Self {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let root = jsonc_parser::parse_to_ast(
            text,
            &jsonc_parser::CollectOptions::default(),
            &jsonc_parser::ParseOptions::default(),
        )
        .ok()
        .and_then(|parsed| parsed.value);
        Self { text, file, root }
    }

    /// An error about the value at `path` (`packages[0].registryType`, names and indexes);
    /// the position is the value's, else the nearest enclosing one's.
    pub(crate) fn error(&self, path: &str, message: impl Into<String>) -> FormatError {
        let offset = self.offset(path).unwrap_or(0);
        let (line, column) = line_column(self.text, offset);
        FormatError {
            file: self.file.to_owned(),
            field: path.to_owned(),
            line,
            column,
            message: message.into(),
        }
    }

    fn offset(&self, path: &str) -> Option<usize> {
        let mut node = self.root.as_ref()?;
        let mut offset = node.range().start;
        for step in steps(path) {
            let next = match (node, step) {
                (ast::Value::Object(object), Step::Name(name)) => object
                    .properties
                    .iter()
                    .rev()
                    .find(|p| p.name.as_str() == name)
                    .map(|p| &p.value),
                (ast::Value::Array(array), Step::Index(i)) => array.elements.get(i),
                _ => None,
            };
            match next {
                Some(value) => {
                    node = value;
                    offset = node.range().start;
                }
                None => break,
            }
        }
        Some(offset)
    }
}

enum Step<'p> {
    Name(&'p str),
    Index(usize),
}

/// `a.b[2].c` as steps.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Step::Name(name));
        }
        for index in rest.split('[') {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(Step::Index(i));
            }
        }
    }
    out
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, last)| last)
        .chars()
        .count()
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        items: Vec<Item>,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Item {
        n: u32,
    }

    #[test]
    fn type_errors_name_the_field_line_and_column() {
        let err = parse::<Doc>(
            "{\n  \"items\": [{\"n\": 1}, {\"n\": \"two\"}]\n}",
            "x.json",
        )
        .unwrap_err();
        assert_eq!(err.field, "items[1].n");
        assert_eq!(err.line, 2);
        assert!(err.message.starts_with("invalid type: string"), "{err}");
        assert!(err.to_string().starts_with("x.json:2:"), "{err}");
    }

    #[test]
    fn later_checks_find_the_value() {
        let text = "{\n  \"items\": [\n    {\"n\": 1},\n    {\"n\": 7}\n  ]\n}";
        let located = Located::new(text, "x.json");
        let err = located.error("items[1].n", "seven is too many");
        assert_eq!((err.line, err.column), (4, 11));
        assert_eq!(
            err.to_string(),
            "x.json:4:11: items[1].n: seven is too many"
        );
        // A missing member points at its nearest parent.
        let err = located.error("items[1].missing", "required");
        assert_eq!((err.line, err.column), (4, 5));
    }
}
