//! JSON-with-comments documents: parsing, positions, and schema-guided key checking.
//!
//! Manifests and configuration files are JSON that may contain `//` and `/* */` comments and
//! trailing commas, like the files the original .NET module accepts. This module turns such text
//! into a [`serde_json::Value`] while remembering where every value came from, so that a type
//! error found later by serde can still be reported with a line and column. While converting it
//! walks the JSON Schema of the target type: keys the schema does not know are reported (with a
//! near-miss suggestion), known keys may be matched case-insensitively (configuration binding
//! works like .NET's), and `null` members of known fields are treated as absent.

use std::collections::HashMap;
use std::fmt;

use jsonc_parser::ast;
use jsonc_parser::common::Ranged;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

use crate::error::ParseError;
use crate::quote::clipped;

/// A 1-based line and column in a document; columns count characters, not bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Position {
    /// Line number, starting at 1.
    pub line: u32,
    /// Column number in characters, starting at 1.
    pub column: u32,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Maps byte offsets of a text to line and column positions.
#[derive(Debug, Clone)]
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { text, line_starts }
    }

    pub(crate) fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let line_idx = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let line_start = self.line_starts[line_idx];
        // The offset may fall inside a multi-byte character when a parser reports odd ranges;
        // counting characters of the lossy prefix keeps this total.
        let prefix = self.text.get(line_start..offset).map_or_else(
            || {
                String::from_utf8_lossy(&self.text.as_bytes()[line_start..offset])
                    .chars()
                    .count()
            },
            |s| s.chars().count(),
        );
        Position {
            line: saturating_u32(line_idx + 1),
            column: saturating_u32(prefix + 1),
        }
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// How the keys of a document are matched against the field names of its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyCase {
    /// Names must match exactly (manifests: `"Id"` is not `id`).
    Exact,
    /// Names match ignoring ASCII case and are rewritten to the schema's spelling
    /// (configuration files, like .NET configuration binding).
    Insensitive,
}

/// A key the schema does not know, found while converting a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownKey {
    /// Dotted path of the object holding the key (empty at the root).
    pub(crate) parent: String,
    /// The key as written.
    pub(crate) key: String,
    /// Where the key is written.
    pub(crate) position: Position,
    /// The closest known name, when one is close enough to be a likely typo.
    pub(crate) suggestion: Option<String>,
}

/// A parsed JSONC text: its top-level value and the positions of everything in it.
#[derive(Debug)]
pub(crate) struct Document<'a> {
    lines: LineIndex<'a>,
    root: ast::Value<'a>,
}

/// The result of converting (part of) a document into JSON for a given schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Converted {
    pub(crate) value: Value,
    /// Position of every value, keyed by its dotted path with canonical key names.
    pub(crate) positions: HashMap<String, Position>,
    /// Keys outside the schema, in document order.
    pub(crate) unknown: Vec<UnknownKey>,
}

impl Converted {
    /// Deserializes the converted value, mapping a type error back to its place in the text.
    pub(crate) fn deserialize<T: DeserializeOwned>(&self) -> Result<T, ParseError> {
        serde_path_to_error::deserialize(&self.value).map_err(|err| {
            let path = render_serde_path(err.path());
            let position = self.positions.get(&path).copied();
            ParseError::Type {
                field: path,
                position,
                // serde quotes the refused value in full (`invalid type: string "…"`).
                message: clipped(&err.into_inner().to_string()).to_string(),
            }
        })
    }
}

/// Options restricting `jsonc-parser` to JSON plus comments and trailing commas: the dialect
/// the original module reads, in manifests and in the gateway's configuration file alike (so
/// that a tool editing that file reads what the gateway reads). Everything JSON5 adds beyond
/// that is refused.
pub fn jsonc_parse_options() -> jsonc_parser::ParseOptions {
    jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

impl<'a> Document<'a> {
    /// Parses `text`, which must hold exactly one JSON value. A leading byte-order mark is
    /// ignored.
    pub(crate) fn parse(text: &'a str) -> Result<Self, ParseError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let collect = jsonc_parser::CollectOptions {
            comments: jsonc_parser::CommentCollectionStrategy::Off,
            tokens: false,
        };
        let lines = LineIndex::new(text);
        let parsed =
            jsonc_parser::parse_to_ast(text, &collect, &jsonc_parse_options()).map_err(|err| {
                ParseError::Syntax {
                    position: lines.position(err.range().start),
                    message: lowercase_first(&err.kind().to_string()),
                }
            })?;
        let root = parsed.value.ok_or(ParseError::Empty)?;
        Ok(Self { lines, root })
    }

    /// Where the top-level value starts.
    pub(crate) fn root_position(&self) -> Position {
        self.lines.position(self.root.range().start)
    }

    /// Converts the whole document for the given schema.
    pub(crate) fn convert(&self, schema: &schemars::Schema, case: KeyCase) -> Converted {
        self.convert_value(&self.root, "", schema, case)
    }

    /// Finds an object member by a case-insensitive path of names from the top (e.g.
    /// `["OpenClaw", "McpApps"]`) and converts it for the given schema.
    pub(crate) fn convert_member(
        &self,
        names: &[&str],
        schema: &schemars::Schema,
        case: KeyCase,
    ) -> Option<(Position, Converted)> {
        let mut node = &self.root;
        for name in names {
            let ast::Value::Object(object) = node else {
                return None;
            };
            // The last matching member wins, like a duplicate key in JSON.
            let prop = object
                .properties
                .iter()
                .rev()
                .find(|p| p.name.as_str().eq_ignore_ascii_case(name))?;
            node = &prop.value;
        }
        let position = self.lines.position(node.range().start);
        // Paths inside the member are relative to it; callers prefix them with its name.
        Some((position, self.convert_value(node, "", schema, case)))
    }

    /// Where the value at `path` is written: object members by case-insensitive name (the last
    /// of duplicates, as a reader takes it), array elements by their index written as a
    /// number.
    pub(crate) fn value_position(&self, path: &[&str]) -> Option<Position> {
        let mut node = &self.root;
        for step in path {
            node = match node {
                ast::Value::Object(object) => {
                    &object
                        .properties
                        .iter()
                        .rev()
                        .find(|p| p.name.as_str().eq_ignore_ascii_case(step))?
                        .value
                }
                ast::Value::Array(array) => array.elements.get(step.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(self.lines.position(node.range().start))
    }

    /// Whether the top-level value is an object.
    pub(crate) fn root_is_object(&self) -> bool {
        matches!(self.root, ast::Value::Object(_))
    }

    fn convert_value(
        &self,
        node: &ast::Value<'_>,
        path: &str,
        schema: &schemars::Schema,
        case: KeyCase,
    ) -> Converted {
        let mut out = Converted::default();
        let walker = Walker {
            lines: &self.lines,
            root_schema: schema.as_value(),
            case,
        };
        out.value = walker.walk(node, Some(schema.as_value()), path, &mut out);
        out
    }
}

struct Walker<'s, 'l> {
    lines: &'l LineIndex<'l>,
    root_schema: &'s Value,
    case: KeyCase,
}

impl<'s> Walker<'s, '_> {
    fn walk(
        &self,
        node: &ast::Value<'_>,
        schema: Option<&'s Value>,
        path: &str,
        out: &mut Converted,
    ) -> Value {
        out.positions
            .insert(path.to_owned(), self.lines.position(node.range().start));
        match node {
            ast::Value::Object(object) => self.walk_object(object, schema, path, out),
            ast::Value::Array(array) => {
                let items = schema.map(|s| self.resolve(s)).and_then(|s| s.get("items"));
                Value::Array(
                    array
                        .elements
                        .iter()
                        .enumerate()
                        .map(|(i, element)| self.walk(element, items, &format!("{path}[{i}]"), out))
                        .collect(),
                )
            }
            ast::Value::StringLit(s) => Value::String(s.value.to_string()),
            ast::Value::NumberLit(n) => number_value(n.value),
            ast::Value::BooleanLit(b) => Value::Bool(b.value),
            ast::Value::NullKeyword(_) => Value::Null,
        }
    }

    fn walk_object(
        &self,
        object: &ast::Object<'_>,
        schema: Option<&'s Value>,
        path: &str,
        out: &mut Converted,
    ) -> Value {
        let shape = schema.map(|s| self.resolve(s));
        let properties = shape
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        // `additionalProperties` absent on a struct means "unknown keys are mistakes"; a schema
        // (or `true`) there means the object is a map whose keys are data.
        let additional = shape.and_then(|s| s.get("additionalProperties"));
        let checks_keys = shape.is_some() && (properties.is_some() || additional.is_some());

        let mut map = Map::new();
        for prop in &object.properties {
            let written = prop.name.as_str();
            let key_position = self.lines.position(prop.name.range().start);
            let known = properties.and_then(|props| {
                if let Some((name, sub)) = props.get_key_value(written) {
                    return Some((name.as_str(), sub));
                }
                match self.case {
                    KeyCase::Insensitive => props
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case(written))
                        .map(|(name, sub)| (name.as_str(), sub)),
                    KeyCase::Exact => None,
                }
            });
            let (key, sub) = match known {
                Some((name, sub)) => {
                    // A known field written as `null` means "not set", as in the original.
                    if matches!(prop.value, ast::Value::NullKeyword(_)) {
                        continue;
                    }
                    (name.to_owned(), Some(sub))
                }
                None => match additional {
                    Some(Value::Bool(false)) | None => {
                        if checks_keys && !(path.is_empty() && written == "$schema") {
                            out.unknown.push(UnknownKey {
                                parent: path.to_owned(),
                                key: written.to_owned(),
                                position: key_position,
                                suggestion: properties.and_then(|props| {
                                    closest_match(written, props.keys().map(String::as_str))
                                }),
                            });
                        }
                        (written.to_owned(), None)
                    }
                    Some(Value::Bool(true)) => (written.to_owned(), None),
                    Some(sub) => (written.to_owned(), Some(sub)),
                },
            };
            let child_path = join_key(path, &key);
            let value = self.walk(&prop.value, sub, &child_path, out);
            // Duplicate keys: the last one wins, as in .NET's reader.
            map.insert(key, value);
        }
        Value::Object(map)
    }

    /// Follows `$ref`s and picks the object-shaped branch of `anyOf`/`oneOf` (how schemars
    /// writes `Option<Struct>`), so the walker sees the schema that describes the value.
    fn resolve(&self, mut schema: &'s Value) -> &'s Value {
        for _ in 0..16 {
            if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
                let Some(name) = reference.strip_prefix("#/$defs/") else {
                    return schema;
                };
                match self.root_schema.get("$defs").and_then(|d| d.get(name)) {
                    Some(target) => schema = target,
                    None => return schema,
                }
                continue;
            }
            let branches = schema
                .get("anyOf")
                .or_else(|| schema.get("oneOf"))
                .and_then(Value::as_array);
            if let Some(branches) = branches {
                let object_like = branches.iter().find(|b| {
                    b.get("$ref").is_some()
                        || b.get("properties").is_some()
                        || b.get("type").and_then(Value::as_str) == Some("object")
                });
                match object_like {
                    Some(branch) => {
                        schema = branch;
                        continue;
                    }
                    None => return schema,
                }
            }
            return schema;
        }
        schema
    }
}

fn number_value(text: &str) -> Value {
    // The parser only accepts JSON number syntax here, so a failure means the number does not
    // fit a double (e.g. `1e400`); keep the text so serde reports a type error at this place.
    serde_json::from_str::<Number>(text)
        .map(Value::Number)
        .unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

fn render_serde_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } => out = join_key(&out, key),
            serde_path_to_error::Segment::Enum { variant } => out = join_key(&out, variant),
            serde_path_to_error::Segment::Unknown => out = join_key(&out, "?"),
        }
    }
    out
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Picks the known name closest to `written`, if it is close enough to be a typo: the same
/// name in another case, or within a small edit distance (a third of its length, 1 to 3).
pub fn closest_match<'n>(
    written: &str,
    known: impl IntoIterator<Item = &'n str>,
) -> Option<String> {
    let written_chars = written.chars().count();
    let budget = (written_chars / 3).clamp(1, 3);
    let written_lower = written.to_ascii_lowercase();
    known
        .into_iter()
        // Lengths further apart than the budget cannot be within it; checking first keeps a
        // huge name from costing the product of the lengths.
        .filter(|name| written_chars.abs_diff(name.chars().count()) <= budget)
        .map(|name| {
            (
                edit_distance(&written_lower, &name.to_ascii_lowercase()),
                name,
            )
        })
        .filter(|(distance, _)| *distance <= budget)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.to_owned())
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_counts_characters() {
        let text = "{\n  \"é\": 1,\n  \"x\": 2\n}";
        let lines = LineIndex::new(text);
        let offset = text.find("\"x\"").unwrap();
        assert_eq!(lines.position(offset), Position { line: 3, column: 3 });
        let offset = text.find('1').unwrap();
        assert_eq!(lines.position(offset), Position { line: 2, column: 8 });
    }

    #[test]
    fn edit_distance_and_suggestions() {
        assert_eq!(edit_distance("comand", "command"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        let known = ["command", "arguments", "id"];
        assert_eq!(closest_match("comand", known).as_deref(), Some("command"));
        assert_eq!(closest_match("Id", known).as_deref(), Some("id"));
        assert_eq!(closest_match("zzzzzz", known), None);
    }

    #[test]
    fn syntax_errors_carry_positions() {
        let err = Document::parse("{\n  \"id\": \"a\"\n  \"x\": 1\n}").unwrap_err();
        match err {
            // The comma is missing right after the value on line 2.
            ParseError::Syntax { position, message } => {
                assert_eq!((position.line, message.as_str()), (2, "expected comma"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn comments_and_trailing_commas_are_accepted_but_json5_is_not() {
        assert!(Document::parse("{ // c\n \"a\": [1, 2,], /* b */ }").is_ok());
        assert!(Document::parse("{ a: 1 }").is_err());
        assert!(Document::parse("{ \"a\": 'x' }").is_err());
        assert!(Document::parse("{ \"a\": 0x10 }").is_err());
        assert!(matches!(
            Document::parse("  // nothing\n"),
            Err(ParseError::Empty)
        ));
    }
}
