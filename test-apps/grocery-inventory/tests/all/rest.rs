//! The REST API over real HTTP: listings, lookups, changes, and the JSON error bodies.

use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

use mcpapp_testkit::{Elicit, structured, within};

use crate::support::{connect_url, start_http};

async fn send(
    client: &Client,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = within(url, request.send()).await.expect("HTTP request");
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{url}: content type {content_type:?}"
    );
    let body = within(url, response.json::<Value>())
        .await
        .expect("JSON body");
    (status, body)
}

fn assert_error(status: StatusCode, body: &Value, expected: StatusCode, needle: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["status"], expected.as_u16(), "{body}");
    assert_eq!(
        body["error"],
        expected.canonical_reason().unwrap(),
        "{body}"
    );
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_and_lookups() {
    let app = start_http(&[]).await;
    let http = Client::new();
    let base = &app.base_url;
    let get = |path: &str| {
        let url = format!("{base}{path}");
        let http = http.clone();
        async move { send(&http, Method::GET, &url, None).await }
    };

    let (status, categories) = get("/api/categories").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(categories.as_array().unwrap().len(), 5);
    let (_, category) = get("/api/categories/4").await;
    assert_eq!(category["name"], "Meat & Seafood");

    let (_, products) = get("/api/products").await;
    assert_eq!(products.as_array().unwrap().len(), 24);
    assert_eq!(
        products[0],
        json!({"id": 1, "sku": "MILK-001", "name": "Organic Milk", "unitPrice": 4.99,
               "unitOfMeasure": "gallon", "categoryId": 1, "supplierId": 1})
    );
    let (_, produce) = get("/api/products?categoryId=3&supplierId=3").await;
    assert!(
        produce
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["categoryId"] == 3)
    );
    let (_, bread) = get("/api/products/2").await;
    assert_eq!(
        (&bread["sku"], &bread["unitPrice"]),
        (&json!("BREAD-002"), &json!(3.49))
    );

    let (_, suppliers) = get("/api/suppliers").await;
    assert_eq!(suppliers.as_array().unwrap().len(), 5);
    let (_, supplier) = get("/api/suppliers/5").await;
    assert_eq!(supplier["name"], "Northwest Pantry Wholesale");

    let (_, stores) = get("/api/stores").await;
    assert_eq!(stores.as_array().unwrap().len(), 3);
    let (_, store) = get("/api/stores/2").await;
    assert_eq!(
        store,
        json!({"id": 2, "name": "Uptown Grocery", "city": "Seattle", "state": "WA"})
    );
    let (_, summary) = get("/api/stores/1/summary").await;
    assert_eq!(summary["lowStockCount"], 3);

    let (_, inventory) = get("/api/inventory").await;
    assert_eq!(inventory.as_array().unwrap().len(), 72);
    let (_, store_rows) = get("/api/inventory?storeId=3").await;
    assert_eq!(store_rows.as_array().unwrap().len(), 24);
    let (_, row) = get("/api/inventory/2/2").await;
    assert_eq!(
        (&row["quantityOnHand"], &row["reorderThreshold"]),
        (&json!(6), &json!(15))
    );
    let (_, low) = get("/api/inventory/low-stock?storeId=2").await;
    assert!(
        low.as_array()
            .unwrap()
            .iter()
            .any(|r| r["sku"] == "SHRMP-018")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_json_with_the_reason() {
    let app = start_http(&[]).await;
    let http = Client::new();
    let base = &app.base_url;
    let url = |path: &str| format!("{base}{path}");

    for (path, needle) in [
        (
            "/api/stores/99",
            "store 99 does not exist (known store ids: 1, 2, 3)",
        ),
        ("/api/products/25", "product 25 does not exist"),
        ("/api/categories/6", "category 6 does not exist"),
        ("/api/suppliers/0", "supplier 0 does not exist"),
        ("/api/inventory/1/99", "product 99 does not exist"),
        ("/api/inventory?storeId=12", "store 12 does not exist"),
        ("/api/warehouses", "no API route /api/warehouses"),
    ] {
        let (status, body) = send(&http, Method::GET, &url(path), None).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, needle);
    }
    for (path, needle) in [
        ("/api/stores/abc", "Cannot parse `abc`"),
        (
            "/api/inventory/1/-2",
            "ids in the path must be positive integers",
        ),
        ("/api/products?categoryId=dairy", "categoryId"),
        ("/api/inventory?store=1", "unknown field `store`"),
    ] {
        let (status, body) = send(&http, Method::GET, &url(path), None).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, needle);
    }
    for (path, body, needle) in [
        (
            "/api/inventory/1/1/adjust",
            json!({"delta": -1000}),
            "out of range",
        ),
        ("/api/inventory/1/1/adjust", json!({"delta": 0}), "non-zero"),
        (
            "/api/inventory/1/1/adjust",
            json!({}),
            "missing field `delta`",
        ),
        (
            "/api/inventory/1/1/adjust",
            json!({"delta": "lots"}),
            "invalid type",
        ),
        (
            "/api/inventory",
            json!({"storeId": 1, "productId": 1, "quantityOnHand": 5}),
            "missing field `reorderThreshold`",
        ),
    ] {
        let (status, response) = send(&http, Method::POST, &url(path), Some(body)).await;
        assert_error(status, &response, StatusCode::BAD_REQUEST, needle);
    }
    let (status, body) = send(
        &http,
        Method::POST,
        &url("/api/inventory/8/1/adjust"),
        Some(json!({"delta": 1})),
    )
    .await;
    assert_error(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "store 8 does not exist",
    );

    // A body that is not JSON at all.
    let response = within(
        "malformed body",
        http.post(url("/api/inventory/1/1/adjust"))
            .header("content-type", "application/json")
            .body("{delta: ")
            .send(),
    )
    .await
    .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_error(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        "Failed to parse the request body",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_shared_with_the_mcp_tools() {
    let app = start_http(&[]).await;
    let http = Client::new();
    let base = &app.base_url;

    let (status, row) = send(
        &http,
        Method::POST,
        &format!("{base}/api/inventory/1/2/adjust"),
        Some(json!({"delta": 7})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{row}");
    let bread_before = row["quantityOnHand"].as_u64().unwrap() - 7;

    let (status, replaced) = send(
        &http,
        Method::PUT,
        &format!("{base}/api/inventory/2/3"),
        Some(json!({"quantityOnHand": 11, "reorderThreshold": 12})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["quantityOnHand"], 11);

    let (status, created) = send(
        &http,
        Method::POST,
        &format!("{base}/api/inventory"),
        Some(json!({"storeId": 3, "productId": 7, "quantityOnHand": 9, "reorderThreshold": 2})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the seed already stocks it: {created}"
    );

    // The MCP side sees the same data.
    let c = connect_url(&app.mcp_url, Elicit::Unsupported).await;
    let rows = c.call("get_inventory", json!({"productId": 2})).await;
    let rows = structured(&rows)["items"].clone();
    assert_eq!(
        rows[0]["quantityOnHand"].as_u64().unwrap(),
        bread_before + 7
    );
    let egg = c
        .call("get_inventory", json!({"storeId": 2, "productId": 3}))
        .await;
    assert_eq!(structured(&egg)["items"][0]["reorderThreshold"], 12);
    let low = c.call("get_low_stock", json!({"storeId": 2})).await;
    assert!(
        structured(&low)["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["sku"] == "EGGS-003"),
        "11 on hand against 12 is low"
    );

    // A product created through MCP can then be stocked through REST (201 Created).
    let created = c
        .call(
            "new_product_wizard",
            json!({"sku": "jam-025", "name": "Strawberry Jam", "unitPrice": 3.25,
                   "unitOfMeasure": "jar", "categoryId": 5, "supplierId": 5}),
        )
        .await;
    let product_id = structured(&created)["product"]["id"].as_u64().unwrap();
    assert_eq!(product_id, 25);
    let (status, row) = send(
        &http,
        Method::PUT,
        &format!("{base}/api/inventory/1/{product_id}"),
        Some(json!({"quantityOnHand": 4, "reorderThreshold": 6})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{row}");
    let (_, product) = send(&http, Method::GET, &format!("{base}/api/products/25"), None).await;
    assert_eq!(product["sku"], "JAM-025");
}
