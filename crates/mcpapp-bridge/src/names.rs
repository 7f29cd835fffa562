//! Safe model-facing tool names: a deterministic, reversible map from registered names (which
//! may contain dots or be long) to names model providers accept, `^[A-Za-z0-9_-]{1,64}$`.

use std::borrow::Cow;
use std::collections::HashMap;

/// The longest name model providers accept.
pub(crate) const MAX_MODEL_NAME_LEN: usize = 64;

/// Length of the hash suffix, `_` plus 8 hex digits.
const SUFFIX_LEN: usize = 9;

/// The two-way map between registered tool names and safe model names.
///
/// The rule, applied to the whole set of names at once so that the result does not depend on
/// the order in which names were added:
///
/// 1. A name that already matches `^[A-Za-z0-9_-]{1,64}$` is its own model name.
/// 2. Otherwise every character outside `[A-Za-z0-9_-]` becomes `_` (`grocery.get_stores` →
///    `grocery_get_stores`).
/// 3. If that result is longer than 64 characters, empty, or equal to the model name or
///    sanitised form of another name in the set, it is cut to 55 characters and gets the
///    suffix `_` + 8 hex digits of the FNV-1a hash of the full original name.
/// 4. In the astronomically rare case that a suffixed name still clashes, names are processed
///    in sorted order and later ones are re-hashed with a counter until they are unique.
///
/// A name's model name may change when another name that sanitises to the same text is added
/// or removed; for a given set of names it is always the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelNames {
    to_model: HashMap<String, String>,
    from_model: HashMap<String, String>,
}

impl ModelNames {
    /// Builds the map for a set of registered names. Duplicates are ignored.
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        // The registry rebuilds this map for every tool on every change, so it works on
        // borrowed text and allocates only the two maps' own strings.
        let owned: Vec<S> = names.into_iter().collect();
        let mut names: Vec<&str> = owned.iter().map(AsRef::as_ref).collect();
        names.sort_unstable();
        names.dedup();
        let cleaned: Vec<Cow<'_, str>> = names.iter().map(|name| sanitize(name)).collect();

        // How many names claim each sanitised text. Safe names claim themselves, so an unsafe
        // name that sanitises onto a safe one is the one that moves.
        let mut claims: HashMap<&str, usize> = HashMap::with_capacity(names.len());
        for clean in &cleaned {
            *claims.entry(clean.as_ref()).or_default() += 1;
        }

        let mut to_model = HashMap::with_capacity(names.len());
        // Model name → registered name; every model name taken so far.
        let mut from_model: HashMap<String, String> = HashMap::with_capacity(names.len());
        let mut suffixed = Vec::new();
        for (&name, clean) in names.iter().zip(&cleaned) {
            if is_safe_model_name(name) {
                from_model.insert(name.to_owned(), name.to_owned());
                to_model.insert(name.to_owned(), name.to_owned());
                continue;
            }
            let clashes = claims.get(clean.as_ref()).copied().unwrap_or(0) > 1;
            if clean.is_empty() || clean.len() > MAX_MODEL_NAME_LEN || clashes {
                suffixed.push((name, clean));
            } else {
                from_model.insert(clean.to_string(), name.to_owned());
                to_model.insert(name.to_owned(), clean.to_string());
            }
        }
        // Suffixed names go last so that they, not plain names, give way on a clash.
        for (name, clean) in suffixed {
            let mut salt = 0u32;
            let model = loop {
                let candidate = with_suffix(clean, name_hash(name, salt));
                if !from_model.contains_key(&candidate) {
                    break candidate;
                }
                salt += 1;
            };
            from_model.insert(model.clone(), name.to_owned());
            to_model.insert(name.to_owned(), model);
        }

        Self {
            to_model,
            from_model,
        }
    }

    /// The safe model name of a registered name.
    pub fn to_model(&self, registered: &str) -> Option<&str> {
        self.to_model.get(registered).map(String::as_str)
    }

    /// The registered name behind a model name.
    pub fn from_model(&self, model: &str) -> Option<&str> {
        self.from_model.get(model).map(String::as_str)
    }

    /// The number of names.
    pub fn len(&self) -> usize {
        self.to_model.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.to_model.is_empty()
    }

    /// Every `(registered, model)` pair, sorted by registered name.
    pub fn pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs: Vec<(&str, &str)> = self
            .to_model
            .iter()
            .map(|(r, m)| (r.as_str(), m.as_str()))
            .collect();
        pairs.sort_unstable();
        pairs
    }
}

/// Whether `name` matches `^[A-Za-z0-9_-]{1,64}$`.
pub(crate) fn is_safe_model_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MODEL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_` (a name that has none is
/// borrowed as it is).
fn sanitize(name: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.chars().all(allowed) {
        return Cow::Borrowed(name);
    }
    if name.is_ascii() {
        // Byte for byte (every registered name so far): no decoding of characters.
        let bytes = name
            .bytes()
            .map(|b| if allowed(char::from(b)) { b } else { b'_' })
            .collect();
        return Cow::Owned(String::from_utf8(bytes).unwrap_or_default());
    }
    Cow::Owned(
        name.chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .collect(),
    )
}

/// `clean` cut so that it and the suffix fit in 64 characters, plus `_` and 8 hex digits.
/// An empty `clean` (the name was empty) becomes `tool`.
fn with_suffix(clean: &str, hash: u32) -> String {
    let stem = if clean.is_empty() { "tool" } else { clean };
    // `clean` is ASCII, so byte indices are character indices.
    let keep = stem.len().min(MAX_MODEL_NAME_LEN - SUFFIX_LEN);
    format!("{}_{hash:08x}", &stem[..keep])
}

/// A stable 32-bit hash of a name: FNV-1a 64 over its UTF-8 bytes (and, when re-hashing after
/// a clash, a counter), folded to 32 bits. Stable across Rust versions and platforms, unlike
/// std's `DefaultHasher`.
fn name_hash(name: &str, salt: u32) -> u32 {
    let mut hash = fnv1a64(name.as_bytes());
    if salt > 0 {
        hash = fnv1a64_continue(hash, &salt.to_le_bytes());
    }
    // Folding keeps entropy from both halves; the truncation to 32 bits is intended.
    (hash ^ (hash >> 32)) as u32
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64-bit.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_continue(FNV_OFFSET, bytes)
}

fn fnv1a64_continue(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_published_vectors() {
        // Test vectors from the FNV reference (empty string, "a", "foobar").
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn suffix_keeps_the_total_within_64() {
        let long = "x".repeat(100);
        let out = with_suffix(&long, 0xdead_beef);
        assert_eq!(out.len(), 64);
        assert!(out.ends_with("_deadbeef"));
        assert_eq!(with_suffix("", 1), "tool_00000001");
    }

    #[test]
    fn safe_name_check_matches_the_provider_pattern() {
        assert!(is_safe_model_name("a"));
        assert!(is_safe_model_name("A-b_9"));
        assert!(is_safe_model_name(&"z".repeat(64)));
        assert!(!is_safe_model_name(""));
        assert!(!is_safe_model_name(&"z".repeat(65)));
        assert!(!is_safe_model_name("a.b"));
        assert!(!is_safe_model_name("é"));
    }
}
