//! One input engine for every source: `server.json` environment variables, arguments, headers
//! and URL variables and MCPB `user_config` all become [`Input`]s, and values come from
//! `--set KEY=VALUE`, then a prompt (on a terminal), then the input's default. Types and
//! choices are checked; missing required inputs are one error listing the flags to pass.

use std::collections::BTreeMap;

use serde::Serialize;

/// What kind of value an input takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum InputKind {
    /// Any text.
    String,
    /// A number (checked, and against `min`/`max` when given).
    Number,
    /// `true` or `false`.
    Boolean,
    /// A path to a file.
    File,
    /// A path to a folder.
    Directory,
}

/// One value the source needs from whoever installs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// The key given to `--set KEY=VALUE`.
    pub key: String,
    /// A short label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its type.
    pub kind: InputKind,
    /// Whether a value is needed.
    pub required: bool,
    /// Whether the value is secret: kept in the secret store, masked when asked for.
    pub secret: bool,
    /// The value used when none is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The only values allowed, when not empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// Whether several values may be given (each becomes its own argument).
    pub repeated: bool,
    /// Smallest number allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Largest number allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// An example shown in an empty field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

impl Input {
    /// A plain optional string input named `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            title: None,
            description: None,
            kind: InputKind::String,
            required: false,
            secret: false,
            default: None,
            choices: Vec::new(),
            repeated: false,
            min: None,
            max: None,
            placeholder: None,
        }
    }

    /// Checks one value against the input's type, bounds and choices; booleans are
    /// normalised to `true`/`false`.
    ///
    /// # Errors
    /// [`InputError::Invalid`] naming the input (never the value of a secret one).
    pub fn check(&self, value: &str) -> Result<String, InputError> {
        let invalid = |reason: String| InputError::Invalid {
            key: self.key.clone(),
            reason,
        };
        if !self.choices.is_empty() && !self.choices.iter().any(|c| c == value) {
            return Err(invalid(format!(
                "must be one of {}",
                self.choices.join(", ")
            )));
        }
        match self.kind {
            InputKind::Boolean => match value.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" => Ok("true".to_owned()),
                "false" | "no" | "0" | "off" => Ok("false".to_owned()),
                _ => Err(invalid("must be true or false".to_owned())),
            },
            InputKind::Number => {
                let number: f64 = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n: &f64| n.is_finite())
                    .ok_or_else(|| invalid("must be a number".to_owned()))?;
                if let Some(min) = self.min
                    && number < min
                {
                    return Err(invalid(format!("must be at least {min}")));
                }
                if let Some(max) = self.max
                    && number > max
                {
                    return Err(invalid(format!("must be at most {max}")));
                }
                Ok(value.trim().to_owned())
            }
            InputKind::String | InputKind::File | InputKind::Directory => {
                if value.contains('\0') {
                    return Err(invalid("must not contain a NUL character".to_owned()));
                }
                Ok(value.to_owned())
            }
        }
    }
}

/// Why values for the inputs cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Required inputs have no value.
    #[error(
        "missing required input{s}: {keys}; pass {flags}",
        s = if .0.len() == 1 { "" } else { "s" },
        keys = .0.join(", "),
        flags = .0.iter().map(|k| format!("--set {k}=…")).collect::<Vec<_>>().join(" ")
    )]
    Missing(Vec<String>),
    /// A value is not allowed.
    #[error("input {key} {reason}")]
    Invalid {
        /// The input.
        key: String,
        /// Why.
        reason: String,
    },
    /// `--set` names no input of this source.
    #[error("this source has no input '{key}'; its inputs are: {known}")]
    Unknown {
        /// The key given.
        key: String,
        /// The keys it has (or "none").
        known: String,
    },
    /// Several values for an input that takes one.
    #[error("input {0} takes one value, but was given several")]
    NotRepeated(String),
}

/// Asks a person for a value (a terminal, a form).
pub trait Prompter {
    /// Asks for `input`; `None` leaves it to the default (or unset).
    fn ask(&mut self, input: &Input) -> Option<String>;
}

/// Resolved values, by input key (several for a repeated input).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Values(BTreeMap<String, Vec<String>>);

impl std::fmt::Debug for Values {
    // Values may be secret: only the keys are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl Values {
    /// The values of `key`.
    pub fn get(&self, key: &str) -> Option<&[String]> {
        self.0.get(key).map(Vec::as_slice)
    }

    /// The first value of `key`.
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.first()).map(String::as_str)
    }

    /// Sets `key`.
    pub fn insert(&mut self, key: impl Into<String>, values: Vec<String>) {
        self.0.insert(key.into(), values);
    }

    /// Every key with its values.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Vec<String>)> {
        self.0.iter()
    }
}

/// Gives every input a value: `given` (`--set` pairs, in order; repeated keys give several
/// values), then `prompter` when there is one, then the default. Checks every value.
///
/// # Errors
/// [`InputError`]: an unknown key, a bad value, or every required input still without one.
pub fn resolve(
    inputs: &[Input],
    given: &[(String, String)],
    mut prompter: Option<&mut dyn Prompter>,
) -> Result<Values, InputError> {
    for (key, _) in given {
        if !inputs.iter().any(|i| &i.key == key) {
            let known = inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>();
            return Err(InputError::Unknown {
                key: key.clone(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                },
            });
        }
    }
    let mut values = Values::default();
    let mut missing = Vec::new();
    for input in inputs {
        let mut chosen: Vec<String> = given
            .iter()
            .filter(|(k, _)| k == &input.key)
            .map(|(_, v)| v.clone())
            .collect();
        if chosen.len() > 1 && !input.repeated {
            return Err(InputError::NotRepeated(input.key.clone()));
        }
        if chosen.is_empty()
            && let Some(prompter) = prompter.as_deref_mut()
            && let Some(answer) = prompter.ask(input)
            && !answer.is_empty()
        {
            chosen = if input.repeated {
                answer
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            } else {
                vec![answer]
            };
        }
        if chosen.is_empty()
            && let Some(default) = &input.default
        {
            chosen.push(default.clone());
        }
        if chosen.is_empty() {
            if input.required {
                missing.push(input.key.clone());
            }
            continue;
        }
        let checked = chosen
            .iter()
            .map(|v| input.check(v))
            .collect::<Result<Vec<_>, _>>()?;
        values.insert(input.key.clone(), checked);
    }
    if missing.is_empty() {
        Ok(values)
    } else {
        Err(InputError::Missing(missing))
    }
}

/// One piece of a value: text, or an input's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    Text(String),
    Input(String),
}

/// A value made of text and inputs (`Bearer {token}`, `${user_config.dir}/x`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Template(pub(crate) Vec<Part>);

impl Template {
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Self(vec![Part::Text(text.into())])
    }

    pub(crate) fn input(key: impl Into<String>) -> Self {
        Self(vec![Part::Input(key.into())])
    }

    /// The inputs it uses.
    pub(crate) fn inputs(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|p| match p {
            Part::Input(k) => Some(k.as_str()),
            Part::Text(_) => None,
        })
    }

    /// The single input it is made of, when it is exactly one.
    pub(crate) fn only_input(&self) -> Option<&str> {
        match self.0.as_slice() {
            [Part::Input(k)] => Some(k),
            _ => None,
        }
    }

    /// Splits `text` at `{name}` placeholders whose name `known` accepts; others stay text.
    pub(crate) fn braces(text: &str, known: impl Fn(&str) -> bool) -> Self {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut literal = String::new();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close) if known(&after[..close]) => {
                    literal.push_str(&rest[..open]);
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Input(after[..close].to_owned()));
                    rest = &after[close + 1..];
                }
                _ => {
                    literal.push_str(&rest[..=open]);
                    rest = after;
                }
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() || parts.is_empty() {
            parts.push(Part::Text(literal));
        }
        Self(parts)
    }

    /// The value with `values` filled in; `None` when an input it uses has no value.
    pub(crate) fn render(&self, values: &Values) -> Option<String> {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Input(key) => out.push_str(&values.get(key)?.join(",")),
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn values_come_from_flags_then_prompts_then_defaults() {
        struct Ask;
        impl Prompter for Ask {
            fn ask(&mut self, input: &Input) -> Option<String> {
                (input.key == "b").then(|| "asked".to_owned())
            }
        }
        let mut c = Input::new("c");
        c.default = Some("default".into());
        let inputs = [Input::new("a"), Input::new("b"), c];
        let values = resolve(&inputs, &given(&[("a", "flag")]), Some(&mut Ask)).unwrap();
        assert_eq!(values.first("a"), Some("flag"));
        assert_eq!(values.first("b"), Some("asked"));
        assert_eq!(values.first("c"), Some("default"));
    }

    #[test]
    fn missing_required_inputs_list_every_flag() {
        let mut a = Input::new("api_key");
        a.required = true;
        let mut b = Input::new("region");
        b.required = true;
        let err = resolve(&[a, b], &[], None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "missing required inputs: api_key, region; pass --set api_key=… --set region=…"
        );
    }

    #[test]
    fn types_bounds_and_choices_are_checked() {
        let mut n = Input::new("n");
        n.kind = InputKind::Number;
        n.min = Some(1.0);
        n.max = Some(10.0);
        assert!(n.check("5").is_ok());
        assert_eq!(
            n.check("11").unwrap_err().to_string(),
            "input n must be at most 10"
        );
        assert!(n.check("ten").is_err());
        let mut b = Input::new("b");
        b.kind = InputKind::Boolean;
        assert_eq!(b.check("YES").unwrap(), "true");
        assert!(b.check("maybe").is_err());
        let mut c = Input::new("c");
        c.choices = vec!["us".into(), "eu".into()];
        assert_eq!(
            c.check("mars").unwrap_err().to_string(),
            "input c must be one of us, eu"
        );
        let err = resolve(&[Input::new("x")], &given(&[("y", "1")]), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "this source has no input 'y'; its inputs are: x"
        );
        let err = resolve(&[Input::new("x")], &given(&[("x", "1"), ("x", "2")]), None);
        assert!(matches!(err, Err(InputError::NotRepeated(_))));
    }

    #[test]
    fn templates_fill_known_placeholders_only() {
        let t = Template::braces("http://{host}:{PORT}/mcp?q={other}", |n| {
            n == "host" || n == "PORT"
        });
        let mut values = Values::default();
        values.insert("host", vec!["h".into()]);
        assert_eq!(t.render(&values), None);
        values.insert("PORT", vec!["1".into()]);
        assert_eq!(
            t.render(&values).unwrap(),
            "http://h:1/mcp?q={other}".to_owned()
        );
        assert_eq!(
            Template::braces("{only}", |_| true).only_input(),
            Some("only")
        );
        assert_eq!(Template::braces("", |_| true).render(&values).unwrap(), "");
    }
}
