//! Property tests of `RawMessage`: any JSON-RPC message, written any way JSON allows (odd
//! whitespace, escapes in strings and keys, unicode, deep nesting, numbers in every form),
//! survives parsing byte for byte and reads back each member as written; and each edit the
//! API offers (the id, a value at a path, a member removed) changes only what it targets:
//! the bytes outside it stay, and the result equals, as JSON, the same edit made on a
//! `serde_json::Value`.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use mcpapp_session::{MessageKind, RawMessage, raw_string};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use serde_json::Value;
use serde_json::value::RawValue;

/// The path segment of an array item: items are not addressed by paths.
const ARRAY: &str = "\u{0}array";

/// A JSON value as it will be written: numbers and strings keep their spelling choices.
#[derive(Debug, Clone)]
enum Json {
    Null,
    Bool(bool),
    /// A number as written (`-0`, `1.50`, `1E+2`, twenty digits...).
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    /// Keys are distinct (a key written twice is another property's business).
    Obj(Vec<(String, Json)>),
}

/// Text matching `pattern` (the regex parsed once, here: parsing it as each value is made
/// takes more stack than a test thread has, deep in a recursive strategy).
fn matching(pattern: &str) -> impl Strategy<Value = String> + use<> {
    proptest::string::string_regex(pattern).expect("a valid pattern")
}

fn number() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop_oneof![Just("0".to_owned()), matching("[1-9][0-9]{0,19}")],
        proptest::option::of(matching("[0-9]{1,20}")),
        proptest::option::of((
            prop_oneof![Just("e"), Just("E")],
            prop_oneof![Just(""), Just("+"), Just("-")],
            matching("[0-9]{1,2}"),
        )),
    )
        .prop_map(|(negative, int, frac, exp)| {
            let mut n = String::new();
            if negative {
                n.push('-');
            }
            n.push_str(&int);
            if let Some(frac) = frac {
                n.push('.');
                n.push_str(&frac);
            }
            if let Some((e, sign, digits)) = exp {
                n.push_str(e);
                n.push_str(sign);
                n.push_str(&digits);
            }
            n
        })
}

/// Text with what JSON must escape, what it may, and what it need not (non-ASCII, astral).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => matching("[a-z_/]{0,8}"),
        2 => any::<String>().prop_map(|s| s.chars().take(12).collect()),
        1 => Just("\"\\/\u{0}\u{1f}\u{7f}\u{e9}\u{2028}\u{1f600}".to_owned()),
    ]
}

/// A key: one the envelope or the router uses, or any text.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(vec!["_meta", "progressToken", "uri", "name", "x"]).prop_map(str::to_owned),
        3 => text(),
    ]
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number().prop_map(Json::Num),
        text().prop_map(Json::Str),
    ];
    leaf.prop_recursive(8, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Arr),
            prop::collection::vec((key(), inner), 0..6).prop_map(|members| {
                let mut seen = BTreeSet::new();
                Json::Obj(
                    members
                        .into_iter()
                        .filter(|(k, _)| seen.insert(k.clone()))
                        .collect(),
                )
            }),
        ]
    })
}

/// Writes [`Json`] with whitespace and escapes chosen by a seed, keeping where each member of
/// each object (by its path of keys) was written.
struct Writer {
    out: String,
    seed: u64,
    /// Path of keys → (where the key starts, where the value is).
    spans: HashMap<Vec<String>, (usize, Range<usize>)>,
}

impl Writer {
    fn new(seed: u64) -> Self {
        Self {
            out: String::new(),
            seed,
            spans: HashMap::new(),
        }
    }

    fn roll(&mut self, sides: u64) -> u64 {
        // xorshift: cheap, and shrinking the seed shrinks nothing that matters.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed % sides
    }

    fn ws(&mut self) {
        for _ in 0..self.roll(4).saturating_sub(1) {
            let c = [' ', '\t', '\n', '\r'][usize::try_from(self.roll(4)).unwrap_or(0)];
            self.out.push(c);
        }
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                c if (c as u32) < 0x20 || self.roll(5) == 0 => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let hex = format!("\\u{unit:04x}");
                        let upper = self.roll(2) == 0;
                        self.out.push_str(&if upper {
                            hex.to_uppercase().replace("\\U", "\\u")
                        } else {
                            hex
                        });
                    }
                }
                '/' if self.roll(2) == 0 => self.out.push_str("\\/"),
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn value(&mut self, json: &Json, path: &[String]) -> Range<usize> {
        let start = self.out.len();
        match json {
            Json::Null => self.out.push_str("null"),
            Json::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => self.out.push_str(n),
            Json::Str(s) => self.string(s),
            Json::Arr(items) => {
                self.out.push('[');
                self.ws();
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                        self.ws();
                    }
                    // Array items are not addressed by paths.
                    self.value(item, &[String::from(ARRAY)]);
                    self.ws();
                }
                self.out.push(']');
            }
            Json::Obj(members) => self.object(members, path),
        }
        start..self.out.len()
    }

    fn object(&mut self, members: &[(String, Json)], path: &[String]) {
        self.out.push('{');
        self.ws();
        for (i, (key, value)) in members.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
                self.ws();
            }
            let key_start = self.out.len();
            self.string(key);
            self.ws();
            self.out.push(':');
            self.ws();
            let mut inner = path.to_vec();
            inner.push(key.clone());
            let span = self.value(value, &inner);
            self.spans.insert(inner, (key_start, span));
            self.ws();
        }
        self.out.push('}');
    }
}

/// A JSON-RPC message: its envelope members in some order, with members of any name besides.
#[derive(Debug, Clone)]
struct Message {
    members: Vec<(String, Json)>,
    seed: u64,
}

impl Message {
    fn write(&self) -> Writer {
        let mut writer = Writer::new(self.seed | 1);
        writer.ws();
        writer.object(&self.members, &[]);
        writer.ws();
        writer
    }
}

fn id() -> impl Strategy<Value = Json> {
    prop_oneof![number().prop_map(Json::Num), text().prop_map(Json::Str)]
}

/// `params` as the router reads it: an object, maybe with a `_meta` and a progress token.
fn params() -> impl Strategy<Value = Json> {
    (
        prop::collection::vec((key(), json()), 0..4),
        proptest::option::weighted(
            0.8,
            (
                proptest::option::weighted(0.8, id()),
                prop::collection::vec((key(), json()), 0..3),
            ),
        ),
    )
        .prop_map(|(members, meta)| {
            let mut members: Vec<(String, Json)> =
                members.into_iter().filter(|(k, _)| k != "_meta").collect();
            if let Some((token, others)) = meta {
                let mut seen = BTreeSet::new();
                let mut meta: Vec<(String, Json)> = others
                    .into_iter()
                    .filter(|(k, _)| k != "progressToken" && seen.insert(k.clone()))
                    .collect();
                if let Some(token) = token {
                    meta.push(("progressToken".to_owned(), token));
                }
                members.push(("_meta".to_owned(), Json::Obj(meta)));
            }
            let mut seen = BTreeSet::new();
            Json::Obj(
                members
                    .into_iter()
                    .filter(|(k, _)| seen.insert(k.clone()))
                    .collect(),
            )
        })
}

fn message() -> impl Strategy<Value = Message> {
    let envelope = prop_oneof![
        (id(), text(), proptest::option::of(params())).prop_map(|(id, method, params)| {
            let mut m = vec![
                ("id".to_owned(), id),
                ("method".to_owned(), Json::Str(method)),
            ];
            m.extend(params.map(|p| ("params".to_owned(), p)));
            m
        }),
        (text(), proptest::option::of(prop_oneof![params(), json()])).prop_map(
            |(method, params)| {
                let mut m = vec![("method".to_owned(), Json::Str(method))];
                m.extend(params.map(|p| ("params".to_owned(), p)));
                m
            }
        ),
        (id(), json())
            .prop_map(|(id, result)| vec![("id".to_owned(), id), ("result".to_owned(), result)]),
        (prop_oneof![id(), Just(Json::Null)], number(), text()).prop_map(
            |(id, code, message)| vec![
                ("id".to_owned(), id),
                (
                    "error".to_owned(),
                    Json::Obj(vec![
                        ("code".to_owned(), Json::Num(code)),
                        ("message".to_owned(), Json::Str(message))
                    ])
                ),
            ]
        ),
    ];
    let extra = prop::collection::vec((matching("x-[a-z]{1,4}"), json()), 0..3);
    (envelope, extra, any::<u64>(), any::<u64>()).prop_map(|(envelope, extra, order, seed)| {
        let mut members = vec![("jsonrpc".to_owned(), Json::Str("2.0".to_owned()))];
        members.extend(envelope);
        let mut seen: BTreeSet<String> = members.iter().map(|(k, _)| k.clone()).collect();
        members.extend(extra.into_iter().filter(|(k, _)| seen.insert(k.clone())));
        // Any order: rotate and swap by the order seed.
        let n = members.len();
        let rotation = usize::try_from(order % n as u64).unwrap_or(0);
        members.rotate_left(rotation);
        if order & 1 == 1 && n > 1 {
            members.swap(0, n - 1);
        }
        Message { members, seed }
    })
}

fn path_of(path: &[&str]) -> Vec<String> {
    path.iter().map(|s| (*s).to_owned()).collect()
}

/// The edit the API offers, made on a `serde_json::Value`: `Some(value)` sets, `None` removes.
/// `Err` where the raw edit refuses too (something on the path is not an object).
fn edit_value(root: &mut Value, path: &[&str], new: Option<&Value>) -> Result<bool, ()> {
    let Some((last, parents)) = path.split_last() else {
        return Ok(false);
    };
    let mut node = root;
    for key in parents {
        let Value::Object(object) = node else {
            // Nothing to remove under what is not an object; nothing to set there either.
            return if new.is_some() { Err(()) } else { Ok(false) };
        };
        if new.is_none() && !object.contains_key(*key) {
            return Ok(false);
        }
        node = object
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
    let Value::Object(object) = node else {
        return if new.is_some() { Err(()) } else { Ok(false) };
    };
    Ok(match new {
        Some(value) => {
            object.insert((*last).to_owned(), value.clone());
            true
        }
        None => object.shift_remove(*last).is_some(),
    })
}

/// What to edit: an id, a token, a `_meta` member, a member of the message.
#[derive(Debug, Clone)]
enum Edit {
    SetId(Json),
    Set(Target, Json),
    Remove(Target),
}

/// Where an edit goes: a path the router edits (there or not), or one of the message's own.
#[derive(Debug, Clone)]
enum Target {
    Named(Vec<&'static str>),
    /// The path of one of the members of the message's objects (outside arrays).
    Existing(proptest::sample::Index),
}

impl Target {
    fn path(&self, written: &Writer) -> Vec<String> {
        match self {
            Self::Named(path) => path_of(path),
            Self::Existing(index) => {
                let mut paths: Vec<&Vec<String>> = written
                    .spans
                    .keys()
                    .filter(|p| !p.iter().any(|k| k == ARRAY))
                    .collect();
                paths.sort();
                paths[index.index(paths.len())].clone()
            }
        }
    }
}

fn edit() -> impl Strategy<Value = Edit> {
    let named = prop::sample::select(vec![
        vec!["params", "_meta", "progressToken"],
        vec!["params", "_meta", "io.mcpapp/cause"],
        vec!["params", "_meta"],
        vec!["params", "uri"],
        vec!["params"],
        vec!["result", "resultType"],
        vec!["x-new"],
        vec!["id"],
        vec!["method"],
    ])
    .prop_map(Target::Named);
    let target = prop_oneof![
        named,
        any::<proptest::sample::Index>().prop_map(Target::Existing)
    ];
    prop_oneof![
        id().prop_map(Edit::SetId),
        (target.clone(), json()).prop_map(|(t, v)| Edit::Set(t, v)),
        target.prop_map(Edit::Remove),
    ]
}

fn written(json: &Json) -> String {
    // The value an edit puts in, compactly written (as the router writes its own values).
    let mut writer = Writer::new(0);
    writer.value(json, &[]);
    writer.out
}

/// The text an edit gives when it sets a value that is there: only that value's bytes change.
fn spliced(original: &Writer, path: &[&str], new: Option<&str>) -> Option<String> {
    let (_, at) = original.spans.get(&path_of(path))?;
    let new = new?;
    let text = &original.out;
    Some(format!("{}{new}{}", &text[..at.start], &text[at.end..]))
}

/// Runs `test` on the cases of the strategy `make` builds, in a thread with room for deep
/// strategies: making a value of a recursive strategy goes as deep as the value, in frames
/// that a debug build makes large, and a test thread's stack is 2 MiB.
fn check<S>(name: &'static str, make: fn() -> S, test: fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy + 'static,
    S::Value: 'static,
{
    let run = move || {
        let mut config = proptest::test_runner::contextualize_config(ProptestConfig {
            cases: 256,
            failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
                "proptest-regressions/raw.txt",
            ))),
            ..ProptestConfig::default()
        });
        config.test_name = Some(name);
        TestRunner::new(config)
            .run(&make(), test)
            .map_err(|e| e.to_string())
    };
    let outcome = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(run)
        .expect("a thread")
        .join()
        .expect("the runner reports failures, it does not panic");
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// Parsed and written again, a message is the same bytes, and each member reads as it was
/// written.
#[test]
fn any_message_survives_parsing_byte_for_byte() {
    check(
        "any_message_survives_parsing_byte_for_byte",
        message,
        survives,
    );
}

/// An edit changes what it targets and nothing else.
#[test]
fn an_edit_changes_only_what_it_targets() {
    check(
        "an_edit_changes_only_what_it_targets",
        || (message(), edit()),
        edits,
    );
}

fn survives(message: Message) -> Result<(), TestCaseError> {
    let written = message.write();
    let parsed = RawMessage::parse(written.out.as_str())
        .map_err(|e| TestCaseError::fail(format!("{e}: {}", written.out)))?;
    prop_assert_eq!(parsed.as_str(), written.out.as_str());
    for (key, _) in &message.members {
        let (_, at) = &written.spans[&path_of(&[key])];
        prop_assert_eq!(
            parsed.member(key).map(RawValue::get),
            Some(&written.out[at.clone()])
        );
    }
    for (path, (_, at)) in &written.spans {
        if path.iter().any(|k| k == ARRAY) {
            continue;
        }
        let keys: Vec<&str> = path.iter().map(String::as_str).collect();
        prop_assert_eq!(
            parsed.path(&keys).map(RawValue::get),
            Some(&written.out[at.clone()]),
            "at {:?}",
            keys
        );
    }
    let kind = match (
        parsed.member("method"),
        parsed.member("id"),
        parsed.member("result"),
    ) {
        (Some(_), Some(_), _) => MessageKind::Request,
        (Some(_), None, _) => MessageKind::Notification,
        (None, _, Some(_)) => MessageKind::Response,
        _ => MessageKind::Error,
    };
    prop_assert_eq!(parsed.kind(), kind);
    prop_assert_eq!(parsed.into_string(), written.out);
    Ok(())
}

fn edits((message, edit): (Message, Edit)) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let original = message.write();
    let mut raw = RawMessage::parse(original.out.as_str()).map_err(|e| fail(&e))?;
    let mut value: Value = serde_json::from_str(&original.out).map_err(|e| fail(&e))?;
    let owned = match &edit {
        Edit::SetId(_) => path_of(&["id"]),
        Edit::Set(target, _) | Edit::Remove(target) => target.path(&original),
    };
    let path: Vec<&str> = owned.iter().map(String::as_str).collect();
    let new = match &edit {
        Edit::SetId(id) => {
            let id = written(id);
            raw.set_id(&RawValue::from_string(id.clone()).map_err(|e| fail(&e))?);
            Some(id)
        }
        Edit::Set(_, v) => {
            let v = written(v);
            let result = raw.set_path(
                &path,
                &RawValue::from_string(v.clone()).map_err(|e| fail(&e))?,
            );
            let parsed: Value = serde_json::from_str(&v).map_err(|e| fail(&e))?;
            let expected = edit_value(&mut value.clone(), &path, Some(&parsed));
            prop_assert_eq!(result.is_ok(), expected.is_ok(), "set {:?}", path);
            if result.is_err() {
                prop_assert_eq!(
                    raw.as_str(),
                    original.out.as_str(),
                    "a refused edit changes nothing"
                );
                return Ok(());
            }
            Some(v)
        }
        Edit::Remove(_) => {
            let removed = raw.remove_path(&path);
            let expected = edit_value(&mut value.clone(), &path, None);
            prop_assert_eq!(Ok(removed), expected, "remove {:?}", path);
            None
        }
    };
    let new_value = match &new {
        Some(v) => Some(serde_json::from_str::<Value>(v).map_err(|e| fail(&e))?),
        None => None,
    };
    let _ = edit_value(&mut value, &path, new_value.as_ref());
    // Equal, as JSON, to the same edit on a Value.
    let edited: Value =
        serde_json::from_str(raw.as_str()).map_err(|e| fail(&format!("{e}: {}", raw.as_str())))?;
    prop_assert_eq!(&edited, &value, "{}", raw.as_str());
    check_bytes(&original, &raw, &path, new.as_deref())
}

/// The bytes outside what an edit at `path` targets are the original's.
fn check_bytes(
    original: &Writer,
    raw: &RawMessage,
    path: &[&str],
    new: Option<&str>,
) -> Result<(), TestCaseError> {
    let text = original.out.as_str();
    let edited = raw.as_str();
    // A value that is there is replaced in place: only its bytes change.
    if let Some(expected) = spliced(original, path, new) {
        prop_assert_eq!(edited, expected.as_str(), "set {:?} in place", path);
        return Ok(());
    }
    let top = path_of(&path[..1]);
    match original.spans.get(&top) {
        // The top-level member on the path is written again (or goes); what is before it and
        // after it keeps its bytes, and so do its other members' values.
        Some((key_start, at)) => {
            let before = &text[..*key_start];
            let before = before.trim_end_matches([' ', '\t', '\n', '\r', ',']);
            prop_assert!(
                edited.starts_with(before),
                "before {:?}: {} / {}",
                path,
                text,
                edited
            );
            let after = text[at.end..].trim_start_matches([' ', '\t', '\n', '\r', ',']);
            prop_assert!(
                edited.ends_with(after),
                "after {:?}: {} / {}",
                path,
                text,
                edited
            );
            for (inner, (_, span)) in &original.spans {
                let outside =
                    !inner.starts_with(&path_of(path)) && !path_of(path).starts_with(inner);
                if inner.len() > 1
                    && inner[0] == top[0]
                    && outside
                    && !inner.iter().any(|k| k == ARRAY)
                {
                    prop_assert!(
                        edited.contains(&text[span.clone()]),
                        "{:?} keeps its bytes: {}",
                        inner,
                        edited
                    );
                }
            }
        }
        // A new top-level member goes after the last one.
        None => {
            let last_end = original
                .spans
                .iter()
                .filter(|(p, _)| p.len() == 1)
                .map(|(_, (_, at))| at.end)
                .max()
                .unwrap_or(1);
            prop_assert!(
                edited.starts_with(&text[..last_end]),
                "{} / {}",
                text,
                edited
            );
            prop_assert!(edited.ends_with(&text[last_end..]), "{} / {}", text, edited);
        }
    }
    Ok(())
}

#[test]
fn deep_nesting_survives_too() {
    let depth = 120;
    let params = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let text = format!("{{ \"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{{\"a\":{params}}}}}");
    let mut m = RawMessage::parse(text.as_str()).unwrap();
    assert_eq!(m.as_str(), text);
    m.set_path(&["params", "_meta", "progressToken"], &raw_string("t"))
        .unwrap();
    assert!(m.as_str().contains(&params));
}
