//! The REST API under `/api/`, served next to `/mcp` on the same data.
//!
//! Errors are JSON objects `{"status": <code>, "error": <reason phrase>, "message": <why>}`:
//! unknown ids and missing inventory rows are 404, malformed ids, query strings and bodies and
//! out-of-range values are 400 (a body without a JSON content type is 415).

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::notify::{product_details_uri, store_summary_uri};
use crate::server::AppState;
use crate::service::{InventoryError, ProductFilter};
use crate::views;

/// An error response.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    status: u16,
    error: &'a str,
    message: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            status: self.status.as_u16(),
            error: self.status.canonical_reason().unwrap_or("Error"),
            message: &self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<InventoryError> for ApiError {
    fn from(e: InventoryError) -> Self {
        let status = match e {
            InventoryError::UnknownStore { .. }
            | InventoryError::UnknownProduct { .. }
            | InventoryError::UnknownCategory { .. }
            | InventoryError::UnknownSupplier { .. }
            | InventoryError::NoInventoryRow { .. } => StatusCode::NOT_FOUND,
            InventoryError::QuantityOutOfRange { .. } | InventoryError::InvalidField { .. } => {
                StatusCode::BAD_REQUEST
            }
        };
        Self::new(status, e.to_string())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            format!(
                "ids in the path must be positive integers: {}",
                r.body_text()
            ),
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, r.body_text())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        // axum answers well-formed JSON of the wrong shape with 422; this API reports every
        // malformed body as 400 and keeps 415 for a missing JSON content type.
        let status = if r.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        } else {
            StatusCode::BAD_REQUEST
        };
        Self::new(status, r.body_text())
    }
}

type Shared = State<Arc<AppState>>;
type ApiResult<T> = Result<T, ApiError>;

/// The `/api` router.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/api/categories", get(categories))
        .route("/api/categories/{id}", get(category))
        .route("/api/products", get(products))
        .route("/api/products/{id}", get(product))
        .route("/api/suppliers", get(suppliers))
        .route("/api/suppliers/{id}", get(supplier))
        .route("/api/stores", get(stores))
        .route("/api/stores/{id}", get(store))
        .route("/api/stores/{id}/summary", get(store_summary))
        .route("/api/inventory", get(inventory).post(create_inventory))
        .route("/api/inventory/low-stock", get(low_stock))
        .route(
            "/api/inventory/{store_id}/{product_id}",
            get(inventory_item).put(replace_inventory),
        )
        .route(
            "/api/inventory/{store_id}/{product_id}/adjust",
            post(adjust_inventory),
        )
        .route("/api", get(api_not_found))
        .route("/api/{*rest}", get(api_not_found).post(api_not_found))
        .with_state(state)
}

async fn api_not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no API route {}; see /api/categories, /api/products, /api/suppliers, /api/stores, /api/inventory",
            uri.path()
        ),
    )
}

async fn categories(State(s): Shared) -> impl IntoResponse {
    Json(s.service.categories())
}

async fn category(
    State(s): Shared,
    id: Result<Path<u32>, PathRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path(id) = id?;
    Ok(Json(s.service.category(id)?))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProductQuery {
    category_id: Option<u32>,
    supplier_id: Option<u32>,
}

async fn products(
    State(s): Shared,
    query: Result<Query<ProductQuery>, QueryRejection>,
) -> ApiResult<impl IntoResponse> {
    let Query(q) = query?;
    Ok(Json(s.service.products(ProductFilter {
        category_id: q.category_id,
        supplier_id: q.supplier_id,
    })?))
}

async fn product(
    State(s): Shared,
    id: Result<Path<u32>, PathRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path(id) = id?;
    Ok(Json(s.service.product(id)?))
}

async fn suppliers(State(s): Shared) -> impl IntoResponse {
    Json(s.service.suppliers())
}

async fn supplier(
    State(s): Shared,
    id: Result<Path<u32>, PathRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path(id) = id?;
    Ok(Json(s.service.supplier(id)?))
}

async fn stores(State(s): Shared) -> impl IntoResponse {
    Json(s.service.stores())
}

async fn store(
    State(s): Shared,
    id: Result<Path<u32>, PathRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path(id) = id?;
    Ok(Json(s.service.store(id)?))
}

async fn store_summary(
    State(s): Shared,
    id: Result<Path<u32>, PathRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path(id) = id?;
    Ok(Json(views::store_summary(s.service.as_ref(), id)?))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InventoryQuery {
    store_id: Option<u32>,
    product_id: Option<u32>,
}

async fn inventory(
    State(s): Shared,
    query: Result<Query<InventoryQuery>, QueryRejection>,
) -> ApiResult<impl IntoResponse> {
    let Query(q) = query?;
    Ok(Json(s.service.inventory(q.store_id, q.product_id)?))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LowStockQuery {
    store_id: Option<u32>,
}

async fn low_stock(
    State(s): Shared,
    query: Result<Query<LowStockQuery>, QueryRejection>,
) -> ApiResult<impl IntoResponse> {
    let Query(q) = query?;
    Ok(Json(views::low_stock(s.service.as_ref(), q.store_id)?))
}

async fn inventory_item(
    State(s): Shared,
    ids: Result<Path<(u32, u32)>, PathRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path((store_id, product_id)) = ids?;
    Ok(Json(s.service.inventory_item(store_id, product_id)?))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewInventoryBody {
    store_id: u32,
    product_id: u32,
    quantity_on_hand: u32,
    reorder_threshold: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplaceInventoryBody {
    quantity_on_hand: u32,
    reorder_threshold: u32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AdjustBody {
    delta: i64,
}

async fn set_and_announce(
    s: &AppState,
    store_id: u32,
    product_id: u32,
    quantity_on_hand: u32,
    reorder_threshold: u32,
) -> ApiResult<Response> {
    let outcome =
        s.service
            .set_inventory(store_id, product_id, quantity_on_hand, reorder_threshold)?;
    s.notifier
        .changed(
            &[store_summary_uri(store_id), product_details_uri(product_id)],
            None,
        )
        .await;
    let status = if outcome.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(outcome.item)).into_response())
}

async fn create_inventory(
    State(s): Shared,
    body: Result<Json<NewInventoryBody>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(b) = body?;
    set_and_announce(
        &s,
        b.store_id,
        b.product_id,
        b.quantity_on_hand,
        b.reorder_threshold,
    )
    .await
}

async fn replace_inventory(
    State(s): Shared,
    ids: Result<Path<(u32, u32)>, PathRejection>,
    body: Result<Json<ReplaceInventoryBody>, JsonRejection>,
) -> ApiResult<Response> {
    let Path((store_id, product_id)) = ids?;
    let Json(b) = body?;
    set_and_announce(
        &s,
        store_id,
        product_id,
        b.quantity_on_hand,
        b.reorder_threshold,
    )
    .await
}

async fn adjust_inventory(
    State(s): Shared,
    ids: Result<Path<(u32, u32)>, PathRejection>,
    body: Result<Json<AdjustBody>, JsonRejection>,
) -> ApiResult<impl IntoResponse> {
    let Path((store_id, product_id)) = ids?;
    let Json(b) = body?;
    if b.delta == 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "delta must be a non-zero number of units",
        ));
    }
    let outcome = s.service.adjust_stock(store_id, product_id, b.delta)?;
    s.notifier
        .changed(
            &[store_summary_uri(store_id), product_details_uri(product_id)],
            None,
        )
        .await;
    Ok(Json(outcome.item))
}
