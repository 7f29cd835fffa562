//! The grocery app driven by an rmcp client over stdio and over HTTP: names, metadata, every
//! tool with valid and invalid input, notifications, resources, prompts and completions.

use std::collections::BTreeSet;

use rmcp::ServiceExt as _;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
    Reference, ResourceContents,
};
use serde_json::{Value, json};

use mcpapp_testkit::{
    Elicit, Over, assert_tool_error, over_both_transports, structured, text, within,
};

use crate::support::{Connection, connect};

const TOOLS: [&str; 14] = [
    "adjust_stock",
    "adjust_stock_with_confirmation",
    "get_categories",
    "get_inventory",
    "get_low_stock",
    "get_products",
    "get_stores",
    "get_suppliers",
    "new_product_wizard",
    "refresh_dashboard",
    "reset_inventory",
    "restock_wizard",
    "set_inventory",
    "show_store_inventory_dashboard",
];
const DASHBOARD: &str = "ui://grocery/store-dashboard.html";
const MCP_APP_MIME: &str = "text/html;profile=mcp-app";

over_both_transports!(
    lists_exact_names_and_metadata,
    query_tools_validate_their_input,
    stock_changes_emit_resources_updated,
    dashboard_tools_return_the_structured_payload,
    resources_read_back,
    prompts_are_built_from_live_data,
    completions_return_matching_values,
    protocol_is_capped_at_2025_11_25,
);

async fn protocol_is_capped_at_2025_11_25(kind: Over) {
    // rmcp's default client configuration asks for the newest protocol, 2026-07-28.
    let default_client = rmcp::model::ClientConfig::default();
    assert_eq!(
        default_client.protocol_version,
        rmcp::model::ProtocolVersion::V_2026_07_28
    );
    // The http app must outlive the client, so it is kept here.
    let mut app = None;
    let client = match kind {
        Over::Stdio => {
            let command = crate::support::app_command(&["stdio"]);
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            within("initialize", default_client.serve(transport))
                .await
                .unwrap()
        }
        Over::Http => {
            let started = app.insert(crate::support::start_http(&[]).await);
            let url = started.mcp_url.clone();
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
            within("initialize", default_client.serve(transport))
                .await
                .unwrap()
        }
    };
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        rmcp::model::ProtocolVersion::V_2025_11_25
    );
    let tools = within("tools/list", client.list_all_tools()).await.unwrap();
    assert_eq!(tools.len(), TOOLS.len());
}

async fn lists_exact_names_and_metadata(kind: Over) {
    let c = connect(kind, Elicit::Unsupported, &[]).await;
    let info = c.client.peer_info().expect("server info");
    assert_eq!(info.protocol_version.to_string(), "2025-11-25");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("grocery-inventory")
    );

    let tools = within("tools/list", c.client.list_all_tools())
        .await
        .unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS.into_iter().collect::<BTreeSet<_>>());
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}", tool.name);
        assert!(
            tool.description.is_some(),
            "{} has no description",
            tool.name
        );
        if let Some(props) = schema["properties"].as_object() {
            for (prop, def) in props {
                assert!(
                    def.get("description").is_some(),
                    "{}.{prop} has no description: {def}",
                    tool.name
                );
            }
        }
    }
    let meta = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(tool.meta.as_ref()).unwrap()
    };
    assert_eq!(
        meta("show_store_inventory_dashboard"),
        json!({"ui": {"resourceUri": DASHBOARD}, "ui/resourceUri": DASHBOARD})
    );
    assert_eq!(
        meta("refresh_dashboard"),
        json!({"ui": {"resourceUri": DASHBOARD, "visibility": ["app"]}})
    );
    assert_eq!(
        meta("reset_inventory"),
        json!({"ui": {"visibility": ["model"]}})
    );
    assert_eq!(meta("get_products"), Value::Null);

    let prompts = within("prompts/list", c.client.list_all_prompts())
        .await
        .unwrap();
    let prompt_args: Vec<(String, Vec<(String, bool)>)> = prompts
        .iter()
        .map(|p| {
            let args = p
                .arguments
                .iter()
                .flatten()
                .map(|a| (a.name.clone(), a.required.unwrap_or(false)))
                .collect();
            (p.name.clone(), args)
        })
        .collect();
    assert_eq!(
        prompt_args,
        vec![
            (
                "analyze_store_performance".into(),
                vec![("storeId".into(), true)]
            ),
            (
                "draft_supplier_order".into(),
                vec![("supplierId".into(), true), ("urgency".into(), false)]
            ),
            ("explain_inventory_term".into(), vec![("term".into(), true)]),
        ]
    );

    let templates = within(
        "resources/templates/list",
        c.client.list_all_resource_templates(),
    )
    .await
    .unwrap();
    let template_uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(
        template_uris,
        [
            "inventory://stores/{storeId}/summary",
            "inventory://products/{productId}/details"
        ]
    );

    let resources = within("resources/list", c.client.list_all_resources())
        .await
        .unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            DASHBOARD,
            "inventory://stores/1/summary",
            "inventory://stores/2/summary",
            "inventory://stores/3/summary"
        ]
    );
    let dashboard = &resources[0];
    assert_eq!(dashboard.mime_type.as_deref(), Some(MCP_APP_MIME));
    assert_eq!(
        serde_json::to_value(dashboard.meta.as_ref()).unwrap(),
        json!({"ui": {"prefersBorder": true, "csp": {"connectDomains": [], "resourceDomains": []}}})
    );
}

async fn query_tools_validate_their_input(kind: Over) {
    let c = connect(kind, Elicit::Unsupported, &[]).await;

    let all = c.call("get_categories", json!({})).await;
    assert_eq!(structured(&all)["categories"].as_array().unwrap().len(), 5);
    let dairy = c.call("get_categories", json!({"id": 1})).await;
    assert_eq!(structured(&dairy)["categories"][0]["name"], "Dairy");
    assert_tool_error(
        &c.call("get_categories", json!({"id": 99})).await,
        &["category 99 does not exist", "1, 2, 3, 4, 5"],
    );
    assert_tool_error(
        &c.call("get_categories", json!({"id": "one"})).await,
        &["failed to deserialize parameters"],
    );

    let products = c.call("get_products", json!({})).await;
    let products = structured(&products)["products"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(products.len(), 24);
    assert_eq!(
        products[0],
        json!({
            "id": 1, "sku": "MILK-001", "name": "Organic Milk", "unitPrice": 4.99,
            "unitOfMeasure": "gallon", "categoryId": 1, "supplierId": 1,
            "categoryName": "Dairy", "supplierName": "Green Valley Dairy Co-op"
        })
    );
    assert_eq!(products[1]["sku"], "BREAD-002");
    assert_eq!(products[1]["unitPrice"], 3.49);
    let bakery = c.call("get_products", json!({"categoryId": 2})).await;
    let bakery = structured(&bakery)["products"].as_array().unwrap().clone();
    assert!(!bakery.is_empty() && bakery.iter().all(|p| p["categoryId"] == 2));
    let one = c
        .call("get_products", json!({"id": 2, "supplierId": 2}))
        .await;
    assert_eq!(structured(&one)["products"][0]["name"], "Whole Wheat Bread");
    assert_tool_error(
        &c.call("get_products", json!({"supplierId": 42})).await,
        &["supplier 42 does not exist"],
    );
    assert_tool_error(
        &c.call("get_products", json!({"id": 25})).await,
        &["product 25 does not exist"],
    );
    assert_tool_error(
        &c.call("get_products", json!({"category": 2})).await,
        &["unknown field `category`"],
    );

    let suppliers = c.call("get_suppliers", json!({})).await;
    assert_eq!(
        structured(&suppliers)["suppliers"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    let supplier = c.call("get_suppliers", json!({"id": 3})).await;
    assert!(
        structured(&supplier)["suppliers"][0]["contactEmail"]
            .as_str()
            .unwrap()
            .contains('@')
    );
    assert_tool_error(
        &c.call("get_suppliers", json!({"id": 0})).await,
        &["supplier 0 does not exist"],
    );

    let stores = c.call("get_stores", json!({})).await;
    let stores = structured(&stores)["stores"].clone();
    assert_eq!(stores.as_array().unwrap().len(), 3);
    assert_eq!(
        stores[0],
        json!({"id": 1, "name": "Downtown Market", "city": "Portland", "state": "OR"})
    );
    assert_eq!(
        stores[1],
        json!({"id": 2, "name": "Uptown Grocery", "city": "Seattle", "state": "WA"})
    );
    assert_tool_error(
        &c.call("get_stores", json!({"id": -1})).await,
        &["failed to deserialize parameters"],
    );

    let inventory = c.call("get_inventory", json!({"storeId": 1})).await;
    let inventory = structured(&inventory).clone();
    assert_eq!(inventory["count"], 24);
    let milk = &inventory["items"][0];
    assert_eq!(
        (
            &milk["productId"],
            &milk["quantityOnHand"],
            &milk["reorderThreshold"]
        ),
        (&json!(1), &json!(8), &json!(20))
    );
    assert!(milk["lastRestocked"].as_str().unwrap().ends_with('Z'));
    let per_product = c.call("get_inventory", json!({"productId": 2})).await;
    assert_eq!(structured(&per_product)["count"], 3);
    assert_tool_error(
        &c.call("get_inventory", json!({"storeId": 7})).await,
        &["store 7 does not exist"],
    );

    let low = c.call("get_low_stock", json!({})).await;
    let low = structured(&low).clone();
    assert!(low["count"].as_u64().unwrap() >= 6, "{low}");
    assert!(
        low["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["quantityOnHand"].as_u64() <= i["reorderThreshold"].as_u64())
    );
    let low1 = c.call("get_low_stock", json!({"storeId": 1})).await;
    let low1 = structured(&low1).clone();
    assert!(
        low1["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["storeId"] == 1)
    );
    assert!(
        low1["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["sku"] == "MILK-001" && i["suggestedOrder"] == 32)
    );
    assert_tool_error(
        &c.call("get_low_stock", json!({"storeId": 4})).await,
        &["store 4 does not exist"],
    );

    // An unknown tool is a protocol error, not a tool result.
    assert!(c.try_call("get_everything", json!({})).await.is_err());
}

async fn stock_changes_emit_resources_updated(kind: Over) {
    let mut c = connect(kind, Elicit::Unsupported, &[]).await;

    let adjusted = c
        .call(
            "adjust_stock",
            json!({"storeId": 2, "productId": 5, "delta": -4}),
        )
        .await;
    let adjusted = structured(&adjusted).clone();
    assert_eq!(adjusted["storeId"], 2);
    assert_eq!(adjusted["productId"], 5);
    assert_eq!(adjusted["delta"], -4);
    assert_eq!(
        adjusted["quantityOnHand"].as_u64().unwrap() + 4,
        adjusted["previousQuantity"].as_u64().unwrap()
    );
    c.expect_updates(&[
        "inventory://stores/2/summary",
        "inventory://products/5/details",
    ])
    .await;
    let row = c
        .call("get_inventory", json!({"storeId": 2, "productId": 5}))
        .await;
    assert_eq!(
        structured(&row)["items"][0]["quantityOnHand"],
        adjusted["quantityOnHand"]
    );

    let before = c
        .call("get_inventory", json!({"storeId": 1, "productId": 1}))
        .await;
    let restocked_before = structured(&before)["items"][0]["lastRestocked"].clone();
    let delivered = c
        .call(
            "adjust_stock",
            json!({"storeId": 1, "productId": 1, "delta": 30}),
        )
        .await;
    let delivered = structured(&delivered).clone();
    assert_eq!(delivered["quantityOnHand"], 38);
    assert_eq!(delivered["lowStock"], false);
    assert_ne!(
        delivered["lastRestocked"], restocked_before,
        "a delivery is a restock"
    );
    c.expect_updates(&[
        "inventory://stores/1/summary",
        "inventory://products/1/details",
    ])
    .await;

    assert_tool_error(
        &c.call(
            "adjust_stock",
            json!({"storeId": 1, "productId": 1, "delta": -1000}),
        )
        .await,
        &["out of range", "38 on hand"],
    );
    assert_tool_error(
        &c.call(
            "adjust_stock",
            json!({"storeId": 1, "productId": 1, "delta": 0}),
        )
        .await,
        &["non-zero"],
    );
    assert_tool_error(
        &c.call(
            "adjust_stock",
            json!({"storeId": 9, "productId": 1, "delta": 1}),
        )
        .await,
        &["store 9 does not exist"],
    );
    assert_tool_error(
        &c.call("adjust_stock", json!({"storeId": 1, "productId": 1}))
            .await,
        &["missing field `delta`"],
    );

    let set = c
        .call(
            "set_inventory",
            json!({"storeId": 3, "productId": 24, "quantityOnHand": 40, "reorderThreshold": 5}),
        )
        .await;
    let set = structured(&set).clone();
    assert_eq!(set["created"], false);
    assert_eq!(set["item"]["quantityOnHand"], 40);
    assert_eq!(set["item"]["reorderThreshold"], 5);
    c.expect_updates(&[
        "inventory://stores/3/summary",
        "inventory://products/24/details",
    ])
    .await;
    assert_tool_error(
        &c.call(
            "set_inventory",
            json!({"storeId": 3, "productId": 24, "quantityOnHand": 2_000_000, "reorderThreshold": 5}),
        )
        .await,
        &["invalid quantityOnHand"],
    );
    assert_tool_error(
        &c.call(
            "set_inventory",
            json!({"storeId": 3, "productId": 99, "quantityOnHand": 1, "reorderThreshold": 1}),
        )
        .await,
        &["product 99 does not exist"],
    );

    // reset_inventory puts the seed back (and announces every store).
    let reset = c.call("reset_inventory", json!({})).await;
    assert_eq!(structured(&reset)["rowsReset"], 72);
    c.expect_updates(&[
        "inventory://stores/1/summary",
        "inventory://stores/3/summary",
    ])
    .await;
    let milk = c
        .call("get_inventory", json!({"storeId": 1, "productId": 1}))
        .await;
    assert_eq!(structured(&milk)["items"][0]["quantityOnHand"], 8);
    assert_tool_error(
        &c.call("reset_inventory", json!({"force": true})).await,
        &["unknown field `force`"],
    );
}

async fn dashboard_tools_return_the_structured_payload(kind: Over) {
    let c = connect(kind, Elicit::Unsupported, &[]).await;
    let result = c.call("show_store_inventory_dashboard", json!({})).await;
    let summary = text(&result);
    assert!(summary.contains("3 store(s)"), "{summary}");
    assert!(
        summary.contains("Downtown Market (Portland, OR)"),
        "{summary}"
    );
    let payload = structured(&result).clone();
    assert!(payload["generatedAt"].as_str().unwrap().ends_with('Z'));
    let stores = payload["stores"].as_array().unwrap();
    assert_eq!(stores.len(), 3);
    let downtown = &stores[0];
    for key in [
        "id",
        "name",
        "city",
        "state",
        "totalSkus",
        "lowStockCount",
        "inventoryValue",
        "valueAtRisk",
        "items",
    ] {
        assert!(
            downtown.get(key).is_some(),
            "store entry lacks {key}: {downtown}"
        );
    }
    assert_eq!(downtown["totalSkus"], 24);
    assert_eq!(downtown["lowStockCount"], 3);
    let items = downtown["items"].as_array().unwrap();
    assert_eq!(items.len(), 24);
    let milk = &items[0];
    assert_eq!(milk["sku"], "MILK-001");
    assert_eq!(milk["lowStock"], true);
    assert_eq!(milk["value"], 39.92);
    let computed: f64 = items
        .iter()
        .map(|i| i["quantityOnHand"].as_f64().unwrap() * i["unitPrice"].as_f64().unwrap())
        .sum();
    assert!((downtown["inventoryValue"].as_f64().unwrap() - computed).abs() < 0.01);

    let one = c
        .call("show_store_inventory_dashboard", json!({"storeId": 2}))
        .await;
    let one = structured(&one).clone();
    assert_eq!(one["stores"].as_array().unwrap().len(), 1);
    assert_eq!(one["stores"][0]["name"], "Uptown Grocery");
    assert_tool_error(
        &c.call("show_store_inventory_dashboard", json!({"storeId": 8}))
            .await,
        &["store 8 does not exist"],
    );

    let refreshed = c.call("refresh_dashboard", json!({})).await;
    let refreshed = structured(&refreshed).clone();
    assert_eq!(refreshed["stores"].as_array().unwrap().len(), 3);
    assert_eq!(
        refreshed["stores"][0]["items"],
        payload["stores"][0]["items"]
    );
    assert_tool_error(
        &c.call("refresh_dashboard", json!({"storeId": "x"})).await,
        &["failed to deserialize parameters"],
    );
}

fn only_text(contents: &[ResourceContents]) -> (String, Option<String>, Value) {
    assert_eq!(contents.len(), 1, "{contents:?}");
    match &contents[0] {
        ResourceContents::TextResourceContents {
            text,
            mime_type,
            meta,
            ..
        } => (
            text.clone(),
            mime_type.clone(),
            serde_json::to_value(meta).unwrap(),
        ),
        other => panic!("expected text contents, got {other:?}"),
    }
}

async fn read(c: &Connection, uri: &str) -> Result<(String, Option<String>, Value), String> {
    within(
        &format!("resources/read {uri}"),
        c.client
            .read_resource(ReadResourceRequestParams::new(uri.to_owned())),
    )
    .await
    .map(|r| only_text(&r.contents))
    .map_err(|e| e.to_string())
}

async fn resources_read_back(kind: Over) {
    let c = connect(
        kind,
        Elicit::Unsupported,
        &["--csp-connect-domain", "http://127.0.0.1:9"],
    )
    .await;
    let (html, mime, meta) = read(&c, DASHBOARD).await.unwrap();
    assert_eq!(mime.as_deref(), Some(MCP_APP_MIME));
    let expected_meta = json!({"ui": {"prefersBorder": true, "csp": {
        "connectDomains": ["http://127.0.0.1:9"], "resourceDomains": []}}});
    assert_eq!(meta, expected_meta);
    let resources = within("resources/list", c.client.list_all_resources())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(resources[0].meta.as_ref()).unwrap(),
        expected_meta
    );
    assert!(html.starts_with("<!doctype html>"), "{}", &html[..40]);
    assert!(html.contains("\"ui/initialize\""));
    assert!(html.contains("ui/notifications/initialized"));
    assert!(html.contains("ui/notifications/size-changed"));
    assert!(html.contains("ui/resource-teardown"));
    assert!(
        !html.contains("http://") && !html.contains("https://") && !html.contains("src="),
        "the dashboard must not reference external URLs"
    );
    for id in [
        "id=\"status\"",
        "id=\"refresh\"",
        "id=\"reset\"",
        "id=\"message\"",
        "id=\"ask-agent\"",
    ] {
        assert!(html.contains(id), "{id} missing from the dashboard");
    }

    let (summary, mime, _) = read(&c, "inventory://stores/1/summary").await.unwrap();
    assert_eq!(mime.as_deref(), Some("application/json"));
    let summary: Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["store"]["name"], "Downtown Market");
    assert_eq!(summary["lowStockCount"], 3);
    assert_eq!(summary["lowStockItems"][0]["sku"], "SALM-017");

    let (details, _, _) = read(&c, "inventory://products/2/details").await.unwrap();
    let details: Value = serde_json::from_str(&details).unwrap();
    assert_eq!(details["product"]["sku"], "BREAD-002");
    assert_eq!(details["category"]["name"], "Bakery");
    assert_eq!(details["stock"].as_array().unwrap().len(), 3);
    assert_eq!(details["stock"][1]["storeName"], "Uptown Grocery");
    assert_eq!(details["stock"][1]["lowStock"], true);

    for (uri, needle) in [
        ("inventory://stores/9/summary", "store 9 does not exist"),
        ("inventory://products/abc/details", "not a positive integer"),
        ("ui://grocery/other.html", "no resource"),
    ] {
        let error = read(&c, uri).await.unwrap_err();
        assert!(error.contains(needle), "{uri}: {error}");
    }
}

async fn prompt_text(c: &Connection, name: &str, args: Value) -> Result<String, String> {
    let Value::Object(args) = args else {
        unreachable!()
    };
    let result = within(
        &format!("prompts/get {name}"),
        c.client
            .get_prompt(GetPromptRequestParams::new(name).with_arguments(args)),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(result
        .messages
        .iter()
        .filter_map(|m| m.content.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n"))
}

async fn prompts_are_built_from_live_data(kind: Over) {
    let c = connect(kind, Elicit::Unsupported, &[]).await;
    let analysis = prompt_text(&c, "analyze_store_performance", json!({"storeId": "1"}))
        .await
        .unwrap();
    assert!(
        analysis.contains("Downtown Market (Portland, OR)"),
        "{analysis}"
    );
    assert!(
        analysis.contains("Organic Milk (MILK-001): 8 on hand"),
        "{analysis}"
    );

    // Live data: after a delivery the milk is no longer listed as low.
    c.call(
        "adjust_stock",
        json!({"storeId": 1, "productId": 1, "delta": 100}),
    )
    .await;
    let analysis = prompt_text(&c, "analyze_store_performance", json!({"storeId": "1"}))
        .await
        .unwrap();
    assert!(!analysis.contains("Organic Milk (MILK-001)"), "{analysis}");

    let order = prompt_text(
        &c,
        "draft_supplier_order",
        json!({"supplierId": "4", "urgency": "emergency"}),
    )
    .await
    .unwrap();
    assert!(order.contains("Cascade Meats & Seafood"), "{order}");
    assert!(order.contains("SHRMP-018"), "{order}");
    assert!(order.contains("expedited"), "{order}");
    let routine = prompt_text(&c, "draft_supplier_order", json!({"supplierId": "4"}))
        .await
        .unwrap();
    assert!(routine.contains("routine purchase order"), "{routine}");

    let term = prompt_text(
        &c,
        "explain_inventory_term",
        json!({"term": "value at risk"}),
    )
    .await
    .unwrap();
    assert!(term.contains("\"value at risk\""), "{term}");
    assert!(term.contains("reorder threshold of"), "{term}");

    for (name, args, needle) in [
        (
            "analyze_store_performance",
            json!({"storeId": "9"}),
            "store 9 does not exist",
        ),
        (
            "analyze_store_performance",
            json!({"storeId": "downtown"}),
            "must be a positive integer",
        ),
        (
            "analyze_store_performance",
            json!({}),
            "needs the argument storeId",
        ),
        (
            "draft_supplier_order",
            json!({"supplierId": "1", "urgency": "whenever"}),
            "urgency must be one of routine, urgent, emergency",
        ),
        (
            "no_such_prompt",
            json!({}),
            "no prompt named no_such_prompt",
        ),
    ] {
        let error = prompt_text(&c, name, args).await.unwrap_err();
        assert!(error.contains(needle), "{name}: {error}");
    }
}

async fn complete(c: &Connection, reference: Reference, name: &str, value: &str) -> Vec<String> {
    within(
        "completion/complete",
        c.client.complete(CompleteRequestParams::new(
            reference,
            ArgumentInfo::new(name, value),
        )),
    )
    .await
    .unwrap()
    .completion
    .values
}

async fn completions_return_matching_values(kind: Over) {
    let c = connect(kind, Elicit::Unsupported, &[]).await;
    let analyze = || Reference::for_prompt("analyze_store_performance");
    assert_eq!(
        complete(&c, analyze(), "storeId", "").await,
        ["1", "2", "3"]
    );
    assert_eq!(complete(&c, analyze(), "storeId", "up").await, ["2"]);
    assert_eq!(complete(&c, analyze(), "storeId", "3").await, ["3"]);
    assert!(complete(&c, analyze(), "storeId", "zzz").await.is_empty());
    let order = || Reference::for_prompt("draft_supplier_order");
    assert_eq!(
        complete(&c, order(), "urgency", "").await,
        ["routine", "urgent", "emergency"]
    );
    assert_eq!(complete(&c, order(), "urgency", "ur").await, ["urgent"]);
    assert_eq!(complete(&c, order(), "supplierId", "bakery").await, ["2"]);
    assert_eq!(
        complete(
            &c,
            Reference::for_prompt("explain_inventory_term"),
            "term",
            "s"
        )
        .await,
        [
            "stockout",
            "sku",
            "suggested order",
            "safety stock",
            "shrinkage"
        ]
    );
    let summary = || Reference::for_resource("inventory://stores/{storeId}/summary");
    assert_eq!(complete(&c, summary(), "storeId", "harbor").await, ["3"]);
    let details = || Reference::for_resource("inventory://products/{productId}/details");
    assert_eq!(complete(&c, details(), "productId", "milk").await, ["1"]);
    assert_eq!(
        complete(&c, details(), "productId", "2").await,
        ["2", "20", "21", "22", "23", "24"]
    );
    let error = within(
        "completion/complete",
        c.client.complete(CompleteRequestParams::new(
            Reference::for_prompt("nope"),
            ArgumentInfo::new("x", ""),
        )),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("no prompt named nope"),
        "{error}"
    );
}

/// Subscriptions reach other connections; only HTTP can have two connections to one app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_on_other_connections_hear_about_changes() {
    let actor = connect(Over::Http, Elicit::Unsupported, &[]).await;
    let url = actor.app.as_ref().unwrap().mcp_url.clone();
    let mut watcher = crate::support::connect_url(&url, Elicit::Unsupported).await;
    #[allow(deprecated)]
    within(
        "resources/subscribe",
        watcher
            .client
            .subscribe(rmcp::model::SubscribeRequestParams::new(
                "inventory://stores/3/summary",
            )),
    )
    .await
    .unwrap();
    #[allow(deprecated)]
    let bad = within(
        "resources/subscribe",
        watcher
            .client
            .subscribe(rmcp::model::SubscribeRequestParams::new(
                "inventory://stores/77/summary",
            )),
    )
    .await;
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("store 77 does not exist")
    );

    actor
        .call(
            "adjust_stock",
            json!({"storeId": 3, "productId": 11, "delta": 5}),
        )
        .await;
    watcher
        .expect_updates(&["inventory://stores/3/summary"])
        .await;

    // REST changes reach subscribers too.
    let base = &actor.app.as_ref().unwrap().base_url;
    let response = reqwest::Client::new()
        .post(format!("{base}/api/inventory/3/12/adjust"))
        .json(&json!({"delta": -1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    watcher
        .expect_updates(&["inventory://stores/3/summary"])
        .await;
}
