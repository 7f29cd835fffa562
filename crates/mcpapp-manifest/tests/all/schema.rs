//! The committed JSON Schemas under `docs/schema/` must match what the types generate.

use mcpapp_manifest::SchemaKind;

fn committed(kind: SchemaKind) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schema")
        .join(kind.file_name());
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn committed_schemas_are_current() {
    for kind in SchemaKind::ALL {
        assert!(
            committed(kind) == kind.to_json(),
            "docs/schema/{} is stale: run `cargo xtask codegen` and commit the result",
            kind.file_name()
        );
    }
}

#[test]
fn the_manifest_schema_documents_the_rules() {
    let schema: serde_json::Value = serde_json::from_str(&SchemaKind::Manifest.to_json()).unwrap();
    assert_eq!(schema["required"], serde_json::json!(["id"]));
    let props = &schema["properties"];
    assert_eq!(props["id"]["pattern"], "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
    assert_eq!(props["startupTimeoutSeconds"]["minimum"], 1);
    assert_eq!(props["startupTimeoutSeconds"]["maximum"], 3600);
    assert_eq!(props["version"]["default"], "0.1.0");
    assert!(props["$schema"].is_object());
    assert!(
        props["command"]["description"]
            .as_str()
            .unwrap()
            .contains("PATH")
    );
}

#[test]
fn seed_manifest_satisfies_the_schema_shape() {
    // Every key the seed uses is a documented property.
    let schema: serde_json::Value = serde_json::from_str(&SchemaKind::Manifest.to_json()).unwrap();
    let seed: serde_json::Value = serde_json::from_str(crate::SEED_MANIFEST).unwrap();
    for key in seed.as_object().unwrap().keys() {
        assert!(
            schema["properties"].get(key).is_some(),
            "{key} missing from the schema"
        );
    }
}
