//! Adding grants to the text of the operator's configuration file, under
//! `McpApps.Entries.<id>.Isolation` (`Read`, `Write`, `Network`), through a lossless syntax
//! tree (`jsonc-parser`'s CST): every byte outside what is added stays as written (comments,
//! formatting, key order), and what is there already is not added twice.
//!
//! Keys are found as the gateway reads them: `McpApps` under `OpenClaw` when it is there, else
//! at the top level, and names inside it case-insensitively (the last of two spellings wins,
//! as when the file is read); an entry's id is matched exactly. Missing objects are created.
//!
//! An entry's `Network` replaces `McpApps.Isolation.Network` for that app, so when an entry
//! gains its first network grant, the global ports and hosts are copied into it: a grant never
//! takes away what the app had.

use jsonc_parser::cst::{CstArray, CstInputValue, CstNode, CstObject, CstObjectProp, CstRootNode};
use mcpapp_manifest::{HostPort, NetworkAccess, jsonc_parse_options};

use crate::permissions::Permission;

/// The configuration text with grants added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edited {
    /// The new text (the same text when nothing was added).
    pub(crate) text: String,
    /// The grants that were not there before.
    pub(crate) added: Vec<Permission>,
    /// What the operator should know (global network grants copied into the entry).
    pub(crate) notes: Vec<String>,
}

/// Adds `grants` for app `id` to configuration `text`; `global_network` is
/// `McpApps.Isolation.Network` as the gateway reads it.
///
/// # Errors
/// A sentence when the text is not a JSON object or a value on the way is not an object
/// (or, for `Read`, `Write`, `TcpPorts` and `Hosts`, an array).
pub(crate) fn add_grants(
    text: &str,
    id: &str,
    grants: &[Permission],
    global_network: &NetworkAccess,
) -> Result<Edited, String> {
    const BOM: char = '\u{feff}';
    let (bom, body) = match text.strip_prefix(BOM) {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let root = CstRootNode::parse(body, &jsonc_parse_options())
        .map_err(|e| format!("it is not JSON with comments: {e}"))?;
    let top = root
        .object_value()
        .ok_or("its top level is not a JSON object")?;
    let mut edited = Edited {
        text: text.to_owned(),
        added: Vec::new(),
        notes: Vec::new(),
    };
    let (holder, section_name) = match child_object(&top, "OpenClaw")? {
        Some(open_claw) if find(&open_claw, "McpApps", false).is_some() => {
            (open_claw, "OpenClaw.McpApps")
        }
        _ => (top, "McpApps"),
    };
    let section = object_or_append(&holder, "McpApps", false, section_name)?;
    let entries = object_or_append(&section, "Entries", false, "McpApps.Entries")?;
    let entry = object_or_append(&entries, id, true, &format!("McpApps.Entries.{id}"))?;
    let at = format!("McpApps.Entries.{id}.Isolation");
    let isolation = object_or_append(&entry, "Isolation", false, &at)?;
    for key in ["Read", "Write"] {
        // Each grant of this setting, and its path.
        let wanted: Vec<(&Permission, &str)> = grants
            .iter()
            .filter_map(|g| match g {
                Permission::Read(p) | Permission::Write(p) if g.setting() == key => {
                    Some((g, p.as_str()))
                }
                _ => None,
            })
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let array = array_or_append(&isolation, key, &format!("{at}.{key}"))?;
        let mut have: Vec<String> = strings(&array);
        for (grant, path) in wanted {
            if have.iter().any(|h| same_path(h, path)) {
                continue;
            }
            array.append(CstInputValue::String(path.to_owned()));
            have.push(path.to_owned());
            edited.added.push(grant.clone());
        }
    }
    add_network(&isolation, &at, grants, global_network, &mut edited)?;
    if !edited.added.is_empty() {
        let mut out = root.to_string();
        if bom {
            out.insert(0, BOM);
        }
        edited.text = out;
    }
    Ok(edited)
}

fn add_network(
    isolation: &CstObject,
    at: &str,
    grants: &[Permission],
    global: &NetworkAccess,
    edited: &mut Edited,
) -> Result<(), String> {
    let ports: Vec<u16> = grants
        .iter()
        .filter_map(|g| match g {
            Permission::Tcp(p) => Some(*p),
            _ => None,
        })
        .collect();
    let hosts: Vec<&HostPort> = grants
        .iter()
        .filter_map(|g| match g {
            Permission::Host(h) => Some(h),
            _ => None,
        })
        .collect();
    let all = grants.contains(&Permission::AllNetwork);
    if !all && ports.is_empty() && hosts.is_empty() {
        return Ok(());
    }
    let at = format!("{at}.Network");
    let existing = find(isolation, "Network", false);
    let word = existing
        .as_ref()
        .and_then(CstObjectProp::value)
        .and_then(|v| v.as_string_lit())
        .and_then(|s| s.decoded_value().ok())
        .map(|w| w.trim().to_ascii_lowercase());
    if word.as_deref() == Some("all") {
        return Ok(());
    }
    if all {
        let value = CstInputValue::String("all".to_owned());
        match existing {
            Some(prop) => prop.set_value(value),
            None => {
                isolation.append("Network", value);
            }
        }
        edited.added.push(Permission::AllNetwork);
        return Ok(());
    }
    let object = match (&existing, word.as_deref()) {
        (Some(prop), _) if prop.value().is_some_and(|v| v.as_object().is_some()) => prop
            .object_value()
            .ok_or_else(|| format!("{at} is not an object"))?,
        (Some(prop), Some("none")) => {
            prop.set_value(CstInputValue::Object(Vec::new()));
            prop.object_value()
                .ok_or_else(|| format!("{at} is not an object"))?
        }
        (Some(_), _) => {
            return Err(format!(
                "{at} is neither \"none\", \"all\" nor an object with TcpPorts and Hosts"
            ));
        }
        (None, _) => {
            let object = isolation
                .append("Network", CstInputValue::Object(Vec::new()))
                .object_value()
                .ok_or_else(|| format!("{at} is not an object"))?;
            copy_global(&object, global, edited);
            object
        }
    };
    if !ports.is_empty() {
        let array = array_or_append(&object, "TcpPorts", &format!("{at}.TcpPorts"))?;
        let mut have: Vec<u16> = array
            .elements()
            .iter()
            .filter_map(|e| e.to_string().trim().parse().ok())
            .collect();
        for port in ports {
            if !have.contains(&port) {
                array.append(CstInputValue::Number(port.to_string()));
                have.push(port);
                edited.added.push(Permission::Tcp(port));
            }
        }
    }
    if !hosts.is_empty() {
        let array = array_or_append(&object, "Hosts", &format!("{at}.Hosts"))?;
        let mut have: Vec<String> = strings(&array)
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        for host in hosts {
            let text = host.to_string();
            if !have.contains(&text) {
                array.append(CstInputValue::String(text.clone()));
                have.push(text);
                edited.added.push(Permission::Host(host.clone()));
            }
        }
    }
    Ok(())
}

/// Copies `McpApps.Isolation.Network`'s ports and hosts into an entry's new `Network`, which
/// replaces it for the app.
fn copy_global(object: &CstObject, global: &NetworkAccess, edited: &mut Edited) {
    let ports: Vec<CstInputValue> = global
        .tcp_ports()
        .map(|p| CstInputValue::Number(p.to_string()))
        .collect();
    let hosts: Vec<CstInputValue> = global
        .hosts()
        .map(|h| CstInputValue::String(h.to_string()))
        .collect();
    if ports.is_empty() && hosts.is_empty() {
        return;
    }
    edited.notes.push(format!(
        "an entry's Network replaces McpApps.Isolation.Network, so the global grant ({global}) was copied into it"
    ));
    if !ports.is_empty() {
        object.append("TcpPorts", CstInputValue::Array(ports));
    }
    if !hosts.is_empty() {
        object.append("Hosts", CstInputValue::Array(hosts));
    }
}

/// The last property of `object` named `name` (exactly, or ignoring ASCII case).
fn find(object: &CstObject, name: &str, exact: bool) -> Option<CstObjectProp> {
    object.properties().into_iter().rfind(|p| {
        p.decoded_name().is_some_and(|n| {
            if exact {
                n == name
            } else {
                n.eq_ignore_ascii_case(name)
            }
        })
    })
}

/// The object under `name`, if `object` has one; an error when the value is something else.
fn child_object(object: &CstObject, name: &str) -> Result<Option<CstObject>, String> {
    match find(object, name, false) {
        None => Ok(None),
        Some(prop) => match prop.value() {
            Some(value) if value.as_object().is_some() => Ok(value.as_object()),
            _ => Ok(None),
        },
    }
}

/// What a grant is added into, a JSON object or array of the syntax tree: how it is named,
/// made and found.
struct Kind<T> {
    /// "an object", "an array".
    what: &'static str,
    /// An empty one, to append or to put in place of `null`.
    empty: fn() -> CstInputValue,
    of_node: fn(&CstNode) -> Option<T>,
    of_prop: fn(&CstObjectProp) -> Option<T>,
}

const OBJECT: Kind<CstObject> = Kind {
    what: "an object",
    empty: || CstInputValue::Object(Vec::new()),
    of_node: CstNode::as_object,
    of_prop: CstObjectProp::object_value,
};

const ARRAY: Kind<CstArray> = Kind {
    what: "an array",
    empty: || CstInputValue::Array(Vec::new()),
    of_node: CstNode::as_array,
    of_prop: CstObjectProp::array_value,
};

/// The object or array under `name` (found exactly or ignoring ASCII case), appended (empty)
/// when missing; `at` names it in errors.
fn child_or_append<T>(
    object: &CstObject,
    name: &str,
    exact: bool,
    at: &str,
    kind: &Kind<T>,
) -> Result<T, String> {
    let missing = || format!("{at} is not {}", kind.what);
    let Some(prop) = find(object, name, exact) else {
        return (kind.of_prop)(&object.append(name, (kind.empty)())).ok_or_else(missing);
    };
    let value = prop.value();
    if let Some(found) = value.as_ref().and_then(kind.of_node) {
        Ok(found)
    } else if value.is_some_and(|v| v.as_null_keyword().is_some()) {
        // `null` is "not set", as when the file is read.
        prop.set_value((kind.empty)());
        (kind.of_prop)(&prop).ok_or_else(missing)
    } else {
        Err(format!(
            "{at} is not {}, so a grant cannot be added to it",
            kind.what
        ))
    }
}

/// The object under `name`, appended (empty) when missing.
fn object_or_append(
    object: &CstObject,
    name: &str,
    exact: bool,
    at: &str,
) -> Result<CstObject, String> {
    child_or_append(object, name, exact, at, &OBJECT)
}

/// The array under `name`, appended (empty) when missing.
fn array_or_append(object: &CstObject, name: &str, at: &str) -> Result<CstArray, String> {
    child_or_append(object, name, false, at, &ARRAY)
}

fn strings(array: &CstArray) -> Vec<String> {
    array
        .elements()
        .iter()
        .filter_map(|e| e.as_string_lit())
        .filter_map(|s| s.decoded_value().ok())
        .collect()
}

/// Paths that name the same thing as written (a trailing `/` aside).
fn same_path(a: &str, b: &str) -> bool {
    let trim = |p: &str| {
        let p = p.trim();
        if p.len() > 1 {
            p.trim_end_matches('/').to_owned()
        } else {
            p.to_owned()
        }
    };
    trim(a) == trim(b)
}

#[cfg(test)]
mod tests {
    use expect_test::{Expect, expect};

    use super::*;

    fn grants(list: &[&str]) -> Vec<Permission> {
        list.iter().map(|g| g.parse().unwrap()).collect()
    }

    fn check(before: &str, id: &str, list: &[&str], after: &Expect) -> Edited {
        let edited = add_grants(before, id, &grants(list), &NetworkAccess::None).unwrap();
        after.assert_eq(&edited.text);
        // The gateway still reads it, and a second run adds nothing.
        mcpapp_manifest::ConfigDocument::parse(&edited.text).unwrap();
        let again = add_grants(&edited.text, id, &grants(list), &NetworkAccess::None).unwrap();
        assert_eq!(again.text, edited.text);
        assert!(again.added.is_empty(), "{:?}", again.added);
        edited
    }

    #[test]
    fn grants_go_into_an_existing_entry_keeping_comments_and_order() {
        let edited = check(
            r#"{
  // The gateway's settings.
  "McpApps": {
    "Enabled": true, // on
    "DiscoveryPaths": ["apps"],
    "Entries": {
      "notes": {
        "StartupTimeoutMs": 20000,
        "isolation": { "read": ["/srv/shared"] }
      }
    }
  },
  "Gateway": { "Bind": "127.0.0.1:8787" }
}
"#,
            "notes",
            &[
                "read=/srv/shared/",
                "read=/srv/notes",
                "write=/srv/out",
                "net=5432",
            ],
            &expect![[r#"
                {
                  // The gateway's settings.
                  "McpApps": {
                    "Enabled": true, // on
                    "DiscoveryPaths": ["apps"],
                    "Entries": {
                      "notes": {
                        "StartupTimeoutMs": 20000,
                        "isolation": {
                          "read": ["/srv/shared", "/srv/notes"],
                          "Write": ["/srv/out"],
                          "Network": {
                            "TcpPorts": [5432]
                          }
                        }
                      }
                    }
                  },
                  "Gateway": { "Bind": "127.0.0.1:8787" }
                }
            "#]],
        );
        assert_eq!(
            edited.added,
            grants(&["read=/srv/notes", "write=/srv/out", "net=5432"])
        );
    }

    #[test]
    fn missing_entries_and_sections_are_created() {
        check(
            "{\n  \"McpApps\": {\n    \"Enabled\": true\n  }\n}\n",
            "notes",
            &["write=/srv/notes"],
            &expect![[r#"
                {
                  "McpApps": {
                    "Enabled": true,
                    "Entries": {
                      "notes": {
                        "Isolation": {
                          "Write": ["/srv/notes"]
                        }
                      }
                    }
                  }
                }
            "#]],
        );
        check(
            "{\n\t\"Gateway\": {}\n}",
            "notes",
            &["net=api.example.com:443"],
            &expect![[r#"
                {
                	"Gateway": {},
                	"McpApps": {
                		"Entries": {
                			"notes": {
                				"Isolation": {
                					"Network": {
                						"Hosts": ["api.example.com:443"]
                					}
                				}
                			}
                		}
                	}
                }"#]],
        );
    }

    #[test]
    fn the_section_under_openclaw_is_the_one_edited() {
        check(
            r#"{"OpenClaw": {"McpApps": {"Entries": {"Notes": {}}}}}"#,
            "notes",
            &["net=all"],
            &expect![[r#"
                {"OpenClaw": {"McpApps": {"Entries": {
                        "Notes": {},
                        "notes": {
                          "Isolation": {
                            "Network": "all"
                          }
                        }
                      }}}}"#]],
        );
    }

    #[test]
    fn network_grants_merge_and_keep_the_global_ones() {
        let global = NetworkAccess::Limited {
            tcp_ports: [5432].into(),
            hosts: Default::default(),
        };
        let text = "{\"McpApps\": {\"Entries\": {\"a\": {\"Isolation\": {}}}}}";
        let edited = add_grants(text, "a", &grants(&["net=x.example:443"]), &global).unwrap();
        expect![[r#"
            {"McpApps": {"Entries": {"a": {"Isolation": {
                      "Network": {
                        "TcpPorts": [5432],
                        "Hosts": ["x.example:443"]
                      }
                    }}}}}"#]]
        .assert_eq(&edited.text);
        assert_eq!(edited.notes.len(), 1);
        let none =
            "{\"McpApps\": {\"Entries\": {\"a\": {\"Isolation\": {\"Network\": \"none\"}}}}}";
        let edited = add_grants(none, "a", &grants(&["net=8080"]), &global).unwrap();
        assert!(
            edited.text.contains("\"TcpPorts\": [8080]"),
            "{}",
            edited.text
        );
        let all = "{\"McpApps\": {\"Entries\": {\"a\": {\"Isolation\": {\"Network\": \"ALL\"}}}}}";
        let edited = add_grants(all, "a", &grants(&["net=8080"]), &global).unwrap();
        assert_eq!(edited.text, all);
        assert!(edited.added.is_empty());
    }

    #[test]
    fn values_that_are_not_objects_are_refused_and_nothing_changes() {
        let err = add_grants(
            r#"{"McpApps": {"Entries": {"a": {"Isolation": {"Read": "/x"}}}}}"#,
            "a",
            &grants(&["read=/y"]),
            &NetworkAccess::None,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "McpApps.Entries.a.Isolation.Read is not an array, so a grant cannot be added to it"
        );
        let err = add_grants("[1]", "a", &grants(&["read=/y"]), &NetworkAccess::None).unwrap_err();
        assert_eq!(err, "its top level is not a JSON object");
    }
}
