//! The registry: winners by source and order, replacement, unregistering, the change counter
//! and deterministic listings.

use std::time::Duration;

use mcpapp_bridge::{CollisionReason, RegistryError, SourcePreference, ToolRegistry, ToolSource};

use crate::{LogCapture, call, described, tool};

/// `(name, registration id)` of every listed tool.
fn listing(registry: &ToolRegistry) -> Vec<(String, String)> {
    registry
        .list()
        .into_iter()
        .map(|e| (e.name, e.registration_id))
        .collect()
}

#[test]
fn preferred_source_wins_whatever_the_order() {
    let registry = ToolRegistry::new();
    registry
        .register(
            "plugin:shop",
            ToolSource::Plugin,
            vec![tool("get_stores", "plugin")],
        )
        .unwrap();
    registry
        .register(
            "mcpapp:grocery",
            ToolSource::Native,
            vec![tool("get_stores", "native")],
        )
        .unwrap();
    let entry = registry.resolve("get_stores").unwrap();
    assert_eq!(entry.registration_id, "mcpapp:grocery");
    assert_eq!(entry.source, ToolSource::Native);
    assert_eq!(call(&entry.tool, "{}").text, "native::{}");

    registry
        .register(
            "builtin",
            ToolSource::BuiltIn,
            vec![tool("get_stores", "builtin")],
        )
        .unwrap();
    let entry = registry.resolve("get_stores").unwrap();
    assert_eq!(entry.registration_id, "builtin");
    assert_eq!(call(&entry.tool, "{}").text, "builtin::{}");

    let collisions = registry.collisions();
    assert_eq!(collisions.len(), 2, "{collisions:?}");
    for c in &collisions {
        assert_eq!(c.name, "get_stores");
        assert_eq!(c.winner, "builtin");
        assert_eq!(c.winner_source, ToolSource::BuiltIn);
        assert_eq!(c.reason, CollisionReason::SourcePreference);
    }
    let losers: Vec<&str> = collisions.iter().map(|c| c.loser.as_str()).collect();
    assert_eq!(losers, ["mcpapp:grocery", "plugin:shop"]);
    assert!(
        collisions[0].to_string().contains("'builtin' keeps it"),
        "{}",
        collisions[0]
    );
    // Only winners are listed.
    assert_eq!(
        listing(&registry),
        [("get_stores".into(), "builtin".into())]
    );
}

#[test]
fn the_preference_order_is_configurable() {
    let preference =
        SourcePreference::new([ToolSource::Plugin, ToolSource::BuiltIn, ToolSource::Native])
            .unwrap();
    let registry = ToolRegistry::builder().preference(preference).build();
    assert_eq!(registry.preference(), preference);
    registry
        .register("builtin", ToolSource::BuiltIn, vec![tool("x", "builtin")])
        .unwrap();
    registry
        .register("plugin:p", ToolSource::Plugin, vec![tool("x", "plugin")])
        .unwrap();
    assert_eq!(registry.resolve("x").unwrap().registration_id, "plugin:p");

    let err = SourcePreference::new([ToolSource::Plugin, ToolSource::Plugin, ToolSource::Native])
        .unwrap_err();
    assert!(matches!(err, RegistryError::InvalidPreference { .. }));
    assert_eq!(
        SourcePreference::default().order(),
        [ToolSource::BuiltIn, ToolSource::Native, ToolSource::Plugin]
    );
}

#[test]
fn equal_sources_go_to_the_first_registration_even_after_it_is_replaced() {
    let registry = ToolRegistry::new();
    registry
        .register("mcpapp:a", ToolSource::Native, vec![tool("dup", "a1")])
        .unwrap();
    registry
        .register("mcpapp:b", ToolSource::Native, vec![tool("dup", "b")])
        .unwrap();
    assert_eq!(registry.resolve("dup").unwrap().registration_id, "mcpapp:a");

    // Re-registering `a` keeps its first sequence number, so it still wins.
    registry
        .register("mcpapp:a", ToolSource::Native, vec![tool("dup", "a2")])
        .unwrap();
    let entry = registry.resolve("dup").unwrap();
    assert_eq!(entry.registration_id, "mcpapp:a");
    assert_eq!(call(&entry.tool, "{}").text, "a2::{}");

    let collisions = registry.collisions();
    assert_eq!(collisions.len(), 1);
    assert_eq!(collisions[0].winner, "mcpapp:a");
    assert_eq!(collisions[0].loser, "mcpapp:b");
    assert_eq!(collisions[0].reason, CollisionReason::RegistrationOrder);

    // After unregistering, `a` is new again and comes after `b`.
    assert!(registry.unregister("mcpapp:a"));
    registry
        .register("mcpapp:a", ToolSource::Native, vec![tool("dup", "a3")])
        .unwrap();
    assert_eq!(registry.resolve("dup").unwrap().registration_id, "mcpapp:b");
}

#[test]
fn duplicate_names_in_one_registration_keep_the_first() {
    let registry = ToolRegistry::new();
    registry
        .register(
            "mcpapp:twice",
            ToolSource::Native,
            vec![tool("same", "first"), tool("same", "second")],
        )
        .unwrap();
    assert_eq!(
        call(&registry.resolve("same").unwrap().tool, "{}").text,
        "first::{}"
    );
    let collisions = registry.collisions();
    assert_eq!(collisions.len(), 1);
    assert_eq!(collisions[0].reason, CollisionReason::SameRegistration);
    assert_eq!(collisions[0].winner, "mcpapp:twice");
    assert_eq!(collisions[0].loser, "mcpapp:twice");
}

#[test]
fn registering_an_id_again_replaces_its_whole_set() {
    let registry = ToolRegistry::new();
    registry
        .register(
            "mcpapp:grocery",
            ToolSource::Native,
            vec![tool("grocery.a", "v1"), tool("grocery.b", "v1")],
        )
        .unwrap();
    registry
        .register(
            "mcpapp:grocery",
            ToolSource::Native,
            vec![tool("grocery.b", "v2"), tool("grocery.c", "v2")],
        )
        .unwrap();
    assert_eq!(
        listing(&registry),
        [
            ("grocery.b".into(), "mcpapp:grocery".into()),
            ("grocery.c".into(), "mcpapp:grocery".into()),
        ]
    );
    assert!(registry.resolve("grocery.a").is_none());
    assert_eq!(
        call(&registry.resolve("grocery.b").unwrap().tool, "{}").text,
        "v2::{}"
    );
    assert_eq!(registry.registration_ids(), ["mcpapp:grocery"]);

    // An empty set is a valid registration that exposes nothing.
    registry
        .register("mcpapp:grocery", ToolSource::Native, Vec::new())
        .unwrap();
    assert!(registry.list().is_empty());
    assert_eq!(registry.registration_ids(), ["mcpapp:grocery"]);
}

#[test]
fn unregistering_a_winner_promotes_the_best_remaining_candidate() {
    let registry = ToolRegistry::new();
    registry
        .register("plugin:late", ToolSource::Plugin, vec![tool("t", "plugin")])
        .unwrap();
    registry
        .register("mcpapp:one", ToolSource::Native, vec![tool("t", "one")])
        .unwrap();
    registry
        .register("mcpapp:two", ToolSource::Native, vec![tool("t", "two")])
        .unwrap();
    assert_eq!(registry.collisions().len(), 2);

    assert!(registry.unregister("mcpapp:one"));
    let entry = registry.resolve("t").unwrap();
    assert_eq!(entry.registration_id, "mcpapp:two");
    assert_eq!(call(&entry.tool, "{}").text, "two::{}");
    let collisions = registry.collisions();
    assert_eq!(collisions.len(), 1);
    assert_eq!(collisions[0].winner, "mcpapp:two");
    assert_eq!(collisions[0].loser, "plugin:late");

    assert!(registry.unregister("mcpapp:two"));
    assert_eq!(
        registry.resolve("t").unwrap().registration_id,
        "plugin:late"
    );
    assert!(registry.collisions().is_empty());

    assert!(registry.unregister("plugin:late"));
    assert!(registry.resolve("t").is_none());
    assert!(!registry.unregister("plugin:late"), "already gone");
}

#[test]
fn the_change_counter_moves_on_visible_changes_only() {
    let registry = ToolRegistry::new();
    assert_eq!(registry.version(), 0);
    let rx = registry.subscribe();

    registry
        .register(
            "mcpapp:a",
            ToolSource::Native,
            vec![described("a", "v1", "same")],
        )
        .unwrap();
    assert_eq!(registry.version(), 1);
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow(), 1);

    // The same names, descriptions and schemas from new tool objects: nothing visible changed,
    // but calls reach the new implementation.
    registry
        .register(
            "mcpapp:a",
            ToolSource::Native,
            vec![described("a", "v2", "same")],
        )
        .unwrap();
    assert_eq!(registry.version(), 1);
    assert_eq!(
        call(&registry.resolve("a").unwrap().tool, "{}").text,
        "v2::{}"
    );

    // A new description is visible.
    registry
        .register(
            "mcpapp:a",
            ToolSource::Native,
            vec![described("a", "v3", "new text")],
        )
        .unwrap();
    assert_eq!(registry.version(), 2);

    // A loser appearing changes the collision list, so it is visible too.
    registry
        .register("plugin:p", ToolSource::Plugin, vec![tool("a", "p")])
        .unwrap();
    assert_eq!(registry.version(), 3);

    assert!(!registry.unregister("unknown"));
    assert_eq!(registry.version(), 3);
    assert!(registry.unregister("plugin:p"));
    assert_eq!(registry.version(), 4);

    // Refused requests change nothing.
    assert_eq!(
        registry.register("  ", ToolSource::Native, vec![tool("b", "x")]),
        Err(RegistryError::BlankRegistrationId)
    );
    assert_eq!(
        registry.register(
            "mcpapp:b",
            ToolSource::Native,
            vec![tool("b", "x"), tool(" ", "x")]
        ),
        Err(RegistryError::BlankToolName {
            registration_id: "mcpapp:b".into(),
            index: 1
        })
    );
    assert_eq!(registry.version(), 4);
    assert!(registry.resolve("b").is_none());
    assert_eq!(registry.snapshot().version(), 4);
}

#[tokio::test]
async fn subscribers_are_woken_by_changes_from_other_tasks() {
    let registry = ToolRegistry::new();
    let mut rx = registry.subscribe();
    let writer = registry.clone();
    let task = tokio::spawn(async move {
        writer
            .register("mcpapp:x", ToolSource::Native, vec![tool("x.one", "x")])
            .unwrap();
    });
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("a change notification")
        .unwrap();
    assert_eq!(*rx.borrow_and_update(), 1);
    task.await.unwrap();
    assert_eq!(registry.list().len(), 1);
}

#[test]
fn listings_are_sorted_and_independent_of_registration_order() {
    let sets: Vec<(&str, ToolSource, Vec<&str>)> = vec![
        (
            "mcpapp:weather",
            ToolSource::Native,
            vec!["wx.forecast", "wx.alerts"],
        ),
        ("builtin", ToolSource::BuiltIn, vec!["time_now", "Zeta"]),
        (
            "plugin:files",
            ToolSource::Plugin,
            vec!["files.read", "alpha"],
        ),
    ];
    let build = |order: &[usize]| {
        let registry = ToolRegistry::new();
        for &i in order {
            let (id, source, names) = &sets[i];
            let tools = names.iter().map(|n| tool(n, id)).collect();
            registry.register(*id, *source, tools).unwrap();
        }
        registry
    };
    let a = build(&[0, 1, 2]);
    let b = build(&[2, 0, 1]);
    let names: Vec<String> = a.list().into_iter().map(|e| e.name).collect();
    assert_eq!(
        names,
        [
            "Zeta",
            "alpha",
            "files.read",
            "time_now",
            "wx.alerts",
            "wx.forecast"
        ]
    );
    assert_eq!(listing(&a), listing(&b));
    assert_eq!(a.model_names(), b.model_names());
}

#[test]
fn snapshots_resolve_model_names_back_to_tools() {
    let registry = ToolRegistry::new();
    registry
        .register(
            "mcpapp:grocery",
            ToolSource::Native,
            vec![
                tool("grocery.get_stores", "g"),
                tool("grocery_get_stores", "plain"),
            ],
        )
        .unwrap();
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.entries().len(), 2);
    // The already-safe name keeps itself; the dotted one moves aside with a hash suffix.
    let dotted = snapshot
        .model_names()
        .to_model("grocery.get_stores")
        .unwrap();
    assert!(dotted.starts_with("grocery_get_stores_"), "{dotted}");
    assert_eq!(
        snapshot.resolve_model_name(dotted).unwrap().name,
        "grocery.get_stores"
    );
    assert_eq!(
        snapshot
            .resolve_model_name("grocery_get_stores")
            .unwrap()
            .name,
        "grocery_get_stores"
    );
    assert!(snapshot.resolve_model_name("nope").is_none());

    // A snapshot is a value: later changes do not alter it.
    registry.unregister("mcpapp:grocery");
    assert_eq!(snapshot.entries().len(), 2);
    assert!(registry.snapshot().entries().is_empty());
}

#[test]
fn concurrent_registrations_all_land() {
    let registry = ToolRegistry::new();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let registry = registry.clone();
            std::thread::spawn(move || {
                for j in 0..25 {
                    let id = format!("mcpapp:{i}");
                    let name = format!("app{i}.tool{j}");
                    let mut tools: Vec<_> = (0..=j)
                        .map(|k| tool(&format!("app{i}.tool{k}"), &id))
                        .collect();
                    tools.push(tool("shared", &id));
                    registry.register(id, ToolSource::Native, tools).unwrap();
                    assert!(registry.resolve(&name).is_some());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let list = registry.list();
    assert_eq!(list.len(), 8 * 25 + 1);
    // Seven registrations lost the shared name, each reported once.
    let collisions = registry.collisions();
    assert_eq!(collisions.len(), 7);
    let winner = registry.resolve("shared").unwrap().registration_id;
    assert!(
        collisions
            .iter()
            .all(|c| c.name == "shared" && c.winner == winner && c.loser != winner),
        "{collisions:?}"
    );
}

/// A log sink shared with a `tracing` subscriber.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[test]
fn collisions_are_logged_as_warnings_once() {
    let sink = Captured::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let registry = ToolRegistry::new();
        registry
            .register("mcpapp:a", ToolSource::Native, vec![tool("dup", "a")])
            .unwrap();
        assert!(sink.text().is_empty());
        registry
            .register("plugin:b", ToolSource::Plugin, vec![tool("dup", "b")])
            .unwrap();
        // An unrelated change does not log the same collision again.
        registry
            .register("mcpapp:c", ToolSource::Native, vec![tool("other", "c")])
            .unwrap();
    });
    let text = sink.text();
    assert_eq!(text.matches("WARN").count(), 1, "{text}");
    assert!(text.contains("tool name collision"), "{text}");
    assert!(text.contains("'mcpapp:a' keeps it"), "{text}");
    assert!(text.contains("plugin:b"), "{text}");
}

/// The crash-loop case: the same registrations withdrawn and registered again and again. Each
/// distinct collision is a warning once; its later appearances are debug events. Unregistering
/// a registration for good forgets its collisions, so they warn again if it comes back.
#[test]
fn each_distinct_collision_warns_once_however_often_it_reappears() {
    const TARGET: &str = "mcpapp_bridge::registry";
    let capture = LogCapture::default();
    let _guard = capture.install();
    let registry = ToolRegistry::new();
    let sets = [
        ("mcpapp:a", ToolSource::Native, vec!["x", "y"]),
        ("mcpapp:b", ToolSource::Native, vec!["x", "y", "z"]),
        ("plugin:c", ToolSource::Plugin, vec!["x", "z"]),
    ];
    let register = |id: &str, source: ToolSource, names: &[&str]| {
        let tools = names.iter().map(|name| tool(name, id)).collect();
        registry.register(id, source, tools).unwrap();
    };
    let mut distinct = std::collections::BTreeSet::new();
    let record = |registry: &ToolRegistry, distinct: &mut std::collections::BTreeSet<_>| {
        for c in registry.collisions() {
            distinct.insert((c.name, c.winner, c.loser));
        }
    };
    for (id, source, names) in &sets {
        register(id, *source, names);
    }
    record(&registry, &mut distinct);
    let first = distinct.len();
    assert_eq!(first, 4, "{distinct:?}");
    for round in 0..20 {
        // Withdraw one registration (as a stop does), then bring it back.
        let (id, source, names) = &sets[round % sets.len()];
        register(id, *source, &[]);
        record(&registry, &mut distinct);
        register(id, *source, names);
        record(&registry, &mut distinct);
    }
    // Withdrawing `a` lets `b` win `x` and `y` over `c`: collisions of their own.
    assert!(distinct.len() > first, "{distinct:?}");
    let warnings = capture.matching(tracing::Level::WARN, TARGET, "tool name collision");
    assert_eq!(warnings.len(), distinct.len(), "{warnings:#?}");
    for (name, winner, loser) in &distinct {
        let about = format!("tool name '{name}' is registered by '{winner}'");
        let count = warnings
            .iter()
            .filter(|w| w.message.contains(&about) && w.message.contains(&format!("'{loser}'")))
            .count();
        assert_eq!(count, 1, "{name} {winner} {loser}: {warnings:#?}");
    }
    let again = capture.matching(tracing::Level::DEBUG, TARGET, "tool name collision again");
    assert!(again.len() >= 20, "{}", again.len());

    // Gone for good, then back: its collisions are new again.
    assert!(registry.unregister("mcpapp:b"));
    register("mcpapp:b", ToolSource::Native, &["x", "y", "z"]);
    let warnings = capture.matching(tracing::Level::WARN, TARGET, "tool name collision");
    let b_again = warnings.len() - distinct.len();
    let b_now = registry
        .collisions()
        .iter()
        .filter(|c| c.winner == "mcpapp:b" || c.loser == "mcpapp:b")
        .count();
    assert_eq!(b_again, b_now, "{warnings:#?}");
    assert!(b_now >= 2);
}

#[test]
fn registering_sets_together_is_registering_them_in_turn_with_one_change() {
    let sets = || {
        vec![
            (
                "mcpapp:a".to_owned(),
                ToolSource::Native,
                vec![tool("shared", "a"), tool("a.only", "a")],
            ),
            (
                "plugin:p".to_owned(),
                ToolSource::Plugin,
                vec![tool("shared", "p")],
            ),
            (
                "mcpapp:b".to_owned(),
                ToolSource::Native,
                vec![tool("shared", "b")],
            ),
        ]
    };
    let in_turn = ToolRegistry::new();
    for (id, source, tools) in sets() {
        in_turn.register(id, source, tools).unwrap();
    }
    let together = ToolRegistry::new();
    together.register_all(sets()).unwrap();
    assert_eq!(listing(&together), listing(&in_turn));
    assert_eq!(together.collisions(), in_turn.collisions());
    assert_eq!(together.model_names(), in_turn.model_names());
    assert_eq!((in_turn.version(), together.version()), (3, 1));

    // A refused set leaves everything as it was.
    let err = together
        .register_all(vec![
            (
                "mcpapp:c".to_owned(),
                ToolSource::Native,
                vec![tool("c", "c")],
            ),
            ("  ".to_owned(), ToolSource::Native, Vec::new()),
        ])
        .unwrap_err();
    assert!(matches!(err, RegistryError::BlankRegistrationId), "{err:?}");
    assert!(together.resolve("c").is_none());
    assert_eq!(together.version(), 1);
}
