//! The MCP tools: data queries, stock changes, the dashboard tools and the elicitation wizards.
//!
//! Bad ids and filters come back as tool errors (`isError: true`) whose text says what was wrong
//! and what would be accepted; arguments of the wrong type or unknown argument names are caught
//! by deserialization and reported the same way.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use rmcp::service::{ElicitationError, RequestContext, RoleServer};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{Category, InventoryItem, NewProduct, Product, Store, Supplier};
use crate::notify::{product_details_uri, store_summary_uri};
use crate::server::{DASHBOARD_URI, GroceryServer};
use crate::service::{InventoryError, ProductFilter};
use crate::views::{self, DashboardPayload, LowStockEntry};

/// Adjustments of at least this many units (either way) need a confirmation in
/// `adjust_stock_with_confirmation`.
pub(crate) const LARGE_ADJUSTMENT: i64 = 50;

// Tool errors are plain text for the caller, so `?` turns a data error into its message.
impl From<InventoryError> for String {
    fn from(e: InventoryError) -> Self {
        e.to_string()
    }
}

fn dashboard_tool_meta() -> MetaObject {
    MetaObject(rmcp::object!({
        "ui": { "resourceUri": DASHBOARD_URI },
        "ui/resourceUri": DASHBOARD_URI
    }))
}

fn refresh_tool_meta() -> MetaObject {
    MetaObject(rmcp::object!({
        "ui": { "resourceUri": DASHBOARD_URI, "visibility": ["app"] }
    }))
}

fn model_only_meta() -> MetaObject {
    MetaObject(rmcp::object!({ "ui": { "visibility": ["model"] } }))
}

/// Arguments with an optional id filter.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct IdFilter {
    /// Return only the record with this id (omit for all).
    #[serde(default)]
    id: Option<u32>,
}

/// Arguments of `get_products`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ProductQuery {
    /// Return only the product with this id.
    #[serde(default)]
    id: Option<u32>,
    /// Return only products of this category id.
    #[serde(default)]
    category_id: Option<u32>,
    /// Return only products from this supplier id.
    #[serde(default)]
    supplier_id: Option<u32>,
}

/// Arguments of `get_inventory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct InventoryQuery {
    /// Return only rows of this store id.
    #[serde(default)]
    store_id: Option<u32>,
    /// Return only rows of this product id.
    #[serde(default)]
    product_id: Option<u32>,
}

/// Arguments with an optional store id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StoreFilter {
    /// Limit to this store id (omit for every store).
    #[serde(default)]
    store_id: Option<u32>,
}

/// Arguments of `set_inventory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SetInventoryArgs {
    /// Store id.
    store_id: u32,
    /// Product id.
    product_id: u32,
    /// The new absolute quantity on hand (0 to 1000000).
    quantity_on_hand: u32,
    /// The new reorder threshold (0 to 1000000).
    reorder_threshold: u32,
}

/// Arguments of `adjust_stock` and `adjust_stock_with_confirmation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AdjustArgs {
    /// Store id.
    store_id: u32,
    /// Product id.
    product_id: u32,
    /// Signed change in units: positive for a delivery, negative for sales or shrinkage. Not 0.
    delta: i64,
}

/// Arguments of `restock_wizard`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RestockArgs {
    /// Store id.
    store_id: u32,
    /// Product id.
    product_id: u32,
    /// Units received. Omit it to have the user asked (with a suggested amount).
    #[serde(default)]
    quantity: Option<u32>,
}

/// Arguments of `new_product_wizard`: any field given here is not asked for again.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct NewProductArgs {
    /// Stock keeping unit, letters, digits and dashes (for example JAM-025).
    #[serde(default)]
    sku: Option<String>,
    /// Product name.
    #[serde(default)]
    name: Option<String>,
    /// Retail price of one unit in dollars.
    #[serde(default)]
    unit_price: Option<f64>,
    /// Unit of measure (lb, each, jar...).
    #[serde(default)]
    unit_of_measure: Option<String>,
    /// Category id.
    #[serde(default)]
    category_id: Option<u32>,
    /// Supplier id.
    #[serde(default)]
    supplier_id: Option<u32>,
}

/// Arguments of tools that take none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// Result of `get_categories`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CategoryList {
    categories: Vec<Category>,
}

/// A product with the names of its category and supplier.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProductView {
    #[serde(flatten)]
    product: Product,
    /// Name of the category.
    category_name: String,
    /// Name of the supplier.
    supplier_name: String,
}

/// Result of `get_products`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProductList {
    products: Vec<ProductView>,
}

/// Result of `get_suppliers`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SupplierList {
    suppliers: Vec<Supplier>,
}

/// Result of `get_stores`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StoreList {
    stores: Vec<Store>,
}

/// Result of `get_inventory`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct InventoryList {
    /// Number of rows.
    count: usize,
    /// The rows.
    items: Vec<InventoryItem>,
}

/// Result of `get_low_stock`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LowStockList {
    /// Number of rows.
    count: usize,
    /// Low rows, emptiest shelves first.
    items: Vec<LowStockEntry>,
}

/// Result of `set_inventory`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SetInventoryResult {
    /// True if the row did not exist before.
    created: bool,
    /// The row as stored.
    item: InventoryItem,
}

/// Result of `adjust_stock` and of the wizards that change stock.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdjustResult {
    /// Store id.
    store_id: u32,
    /// Product id.
    product_id: u32,
    /// Units before the change.
    previous_quantity: u32,
    /// Units after the change.
    quantity_on_hand: u32,
    /// The applied change.
    delta: i64,
    /// Reorder threshold.
    reorder_threshold: u32,
    /// At or below the threshold after the change.
    low_stock: bool,
    /// Last delivery.
    last_restocked: String,
}

/// Result of `reset_inventory`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResetResult {
    /// Number of inventory rows restored to their seed values.
    rows_reset: usize,
}

/// Outcome of a wizard: what happened, and the change if one was made.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WizardResult {
    /// `applied`, `declined`, `cancelled` or `rejected`.
    status: String,
    /// A sentence for the user.
    message: String,
    /// The stock change, when one was applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    adjustment: Option<AdjustResult>,
    /// The created product, when one was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    product: Option<Product>,
}

/// The form `restock_wizard` shows.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RestockForm {
    /// Units received in this delivery.
    quantity: u32,
}
rmcp::elicit_safe!(RestockForm);

/// The form `adjust_stock_with_confirmation` shows.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ConfirmForm {
    /// Tick to apply the adjustment.
    confirm: bool,
}
rmcp::elicit_safe!(ConfirmForm);

/// The form `new_product_wizard` shows.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewProductForm {
    /// Stock keeping unit, letters, digits and dashes (for example JAM-025).
    sku: String,
    /// Product name.
    name: String,
    /// Retail price of one unit in dollars.
    unit_price: f64,
    /// Unit of measure (lb, each, jar...).
    unit_of_measure: String,
    /// Category id (1 Dairy, 2 Bakery, 3 Produce, 4 Meat & Seafood, 5 Pantry).
    category_id: u32,
    /// Supplier id.
    supplier_id: u32,
}
rmcp::elicit_safe!(NewProductForm);

fn adjust_result(outcome: crate::service::AdjustOutcome, delta: i64) -> AdjustResult {
    AdjustResult {
        store_id: outcome.item.store_id,
        product_id: outcome.item.product_id,
        previous_quantity: outcome.previous_quantity,
        quantity_on_hand: outcome.item.quantity_on_hand,
        delta,
        reorder_threshold: outcome.item.reorder_threshold,
        low_stock: outcome.item.is_low(),
        last_restocked: outcome.item.last_restocked,
    }
}

/// How an elicitation ended, reduced to what the wizards care about.
enum Answer<T> {
    Given(T),
    Declined,
    Cancelled,
    Unsupported,
    Failed(String),
}

async fn ask<T>(ctx: &RequestContext<RoleServer>, message: String) -> Answer<T>
where
    T: rmcp::service::ElicitationSafe + for<'de> Deserialize<'de>,
{
    match ctx.peer.elicit::<T>(message).await {
        Ok(Some(value)) => Answer::Given(value),
        Ok(None) | Err(ElicitationError::NoContent) => {
            Answer::Failed("the client accepted but sent no content".into())
        }
        Err(ElicitationError::UserDeclined) => Answer::Declined,
        Err(ElicitationError::UserCancelled) => Answer::Cancelled,
        Err(ElicitationError::CapabilityNotSupported) => Answer::Unsupported,
        Err(ElicitationError::ParseError { error, data }) => {
            Answer::Failed(format!("the answer {data} does not fit the form: {error}"))
        }
        Err(other) => Answer::Failed(other.to_string()),
    }
}

fn wizard(status: &str, message: impl Into<String>) -> WizardResult {
    WizardResult {
        status: status.into(),
        message: message.into(),
        adjustment: None,
        product: None,
    }
}

#[tool_router(vis = "pub(crate)")]
impl GroceryServer {
    /// List product categories, or one category by id.
    #[tool(annotations(read_only_hint = true))]
    fn get_categories(
        &self,
        Parameters(args): Parameters<IdFilter>,
    ) -> Result<Json<CategoryList>, String> {
        let categories = match args.id {
            Some(id) => vec![self.service().category(id)?],
            None => self.service().categories(),
        };
        Ok(Json(CategoryList { categories }))
    }

    /// List products with their category and supplier names. Filter by product id, category id
    /// and/or supplier id.
    #[tool(annotations(read_only_hint = true))]
    fn get_products(
        &self,
        Parameters(args): Parameters<ProductQuery>,
    ) -> Result<Json<ProductList>, String> {
        let service = self.service();
        let mut products = service.products(ProductFilter {
            category_id: args.category_id,
            supplier_id: args.supplier_id,
        })?;
        if let Some(id) = args.id {
            let product = service.product(id)?;
            products.retain(|p| p.id == product.id);
        }
        let categories = service.categories();
        let suppliers = service.suppliers();
        let products = products
            .into_iter()
            .map(|product| ProductView {
                category_name: categories
                    .iter()
                    .find(|c| c.id == product.category_id)
                    .map(|c| c.name.clone())
                    .unwrap_or_default(),
                supplier_name: suppliers
                    .iter()
                    .find(|s| s.id == product.supplier_id)
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                product,
            })
            .collect();
        Ok(Json(ProductList { products }))
    }

    /// List suppliers with their order contacts, or one supplier by id.
    #[tool(annotations(read_only_hint = true))]
    fn get_suppliers(
        &self,
        Parameters(args): Parameters<IdFilter>,
    ) -> Result<Json<SupplierList>, String> {
        let suppliers = match args.id {
            Some(id) => vec![self.service().supplier(id)?],
            None => self.service().suppliers(),
        };
        Ok(Json(SupplierList { suppliers }))
    }

    /// List the chain's stores, or one store by id.
    #[tool(annotations(read_only_hint = true))]
    fn get_stores(
        &self,
        Parameters(args): Parameters<IdFilter>,
    ) -> Result<Json<StoreList>, String> {
        let stores = match args.id {
            Some(id) => vec![self.service().store(id)?],
            None => self.service().stores(),
        };
        Ok(Json(StoreList { stores }))
    }

    /// List inventory rows (quantity on hand, reorder threshold, last restock), optionally for one
    /// store and/or one product.
    #[tool(annotations(read_only_hint = true))]
    fn get_inventory(
        &self,
        Parameters(args): Parameters<InventoryQuery>,
    ) -> Result<Json<InventoryList>, String> {
        let items = self.service().inventory(args.store_id, args.product_id)?;
        Ok(Json(InventoryList {
            count: items.len(),
            items,
        }))
    }

    /// List the items at or below their reorder threshold, emptiest shelves first, with the
    /// suggested order quantity and supplier. Optionally for one store.
    #[tool(annotations(read_only_hint = true))]
    fn get_low_stock(
        &self,
        Parameters(args): Parameters<StoreFilter>,
    ) -> Result<Json<LowStockList>, String> {
        let items = views::low_stock(self.service(), args.store_id)?;
        Ok(Json(LowStockList {
            count: items.len(),
            items,
        }))
    }

    /// Create or replace the inventory row of a product in a store with absolute values.
    #[tool(annotations(idempotent_hint = true, destructive_hint = false))]
    async fn set_inventory(
        &self,
        Parameters(args): Parameters<SetInventoryArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SetInventoryResult>, String> {
        let outcome = self.service().set_inventory(
            args.store_id,
            args.product_id,
            args.quantity_on_hand,
            args.reorder_threshold,
        )?;
        self.announce(&[(args.store_id, args.product_id)], &ctx)
            .await;
        Ok(Json(SetInventoryResult {
            created: outcome.created,
            item: outcome.item,
        }))
    }

    /// Change the quantity on hand of a product in a store by a signed delta (positive for a
    /// delivery, negative for sales or shrinkage). Sends notifications/resources/updated for the
    /// store summary and product details resources.
    #[tool(annotations(destructive_hint = false))]
    async fn adjust_stock(
        &self,
        Parameters(args): Parameters<AdjustArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<AdjustResult>, String> {
        if args.delta == 0 {
            return Err("delta must be a non-zero number of units".into());
        }
        let outcome = self
            .service()
            .adjust_stock(args.store_id, args.product_id, args.delta)?;
        self.announce(&[(args.store_id, args.product_id)], &ctx)
            .await;
        Ok(Json(adjust_result(outcome, args.delta)))
    }

    /// Show the interactive multi-store inventory dashboard (per-store stock, low-stock alerts,
    /// inventory value and value at risk). Optionally for one store.
    #[tool(
        annotations(read_only_hint = true),
        meta = dashboard_tool_meta(),
        output_schema = rmcp::handler::server::common::schema_for_output::<DashboardPayload>()
    )]
    fn show_store_inventory_dashboard(
        &self,
        Parameters(args): Parameters<StoreFilter>,
    ) -> Result<CallToolResult, String> {
        self.dashboard_result(args.store_id)
    }

    /// Reload the dashboard data. Called by the dashboard view itself; hidden from the model.
    #[tool(
        annotations(read_only_hint = true),
        meta = refresh_tool_meta(),
        output_schema = rmcp::handler::server::common::schema_for_output::<DashboardPayload>()
    )]
    fn refresh_dashboard(
        &self,
        Parameters(args): Parameters<StoreFilter>,
    ) -> Result<CallToolResult, String> {
        self.dashboard_result(args.store_id)
    }

    /// Put every inventory row back to its seed value. For the model (or an operator) only; the
    /// dashboard view must not be able to call it.
    #[tool(annotations(destructive_hint = true), meta = model_only_meta())]
    async fn reset_inventory(
        &self,
        Parameters(_): Parameters<NoArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Json<ResetResult> {
        let rows_reset = self.service().reset_inventory();
        let mut uris: Vec<String> = self
            .service()
            .stores()
            .iter()
            .map(|s| store_summary_uri(s.id))
            .collect();
        uris.extend(
            self.service()
                .products(ProductFilter::default())
                .unwrap_or_default()
                .iter()
                .map(|p| product_details_uri(p.id)),
        );
        self.state
            .notifier
            .changed(&uris, Some((self.connection, &ctx.peer)))
            .await;
        Json(ResetResult { rows_reset })
    }

    /// Guided restock: record a delivery for a product in a store. Without `quantity` the user
    /// is asked how many units arrived (the suggestion brings the row to twice its threshold).
    #[tool]
    async fn restock_wizard(
        &self,
        Parameters(args): Parameters<RestockArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WizardResult>, String> {
        let service = self.service();
        let store = service.store(args.store_id)?;
        let product = service.product(args.product_id)?;
        let row = service.inventory_item(args.store_id, args.product_id)?;
        let suggested = views::suggested_order(&row).max(1);
        let quantity = match args.quantity {
            Some(q) => q,
            None => {
                let question = format!(
                    "How many units of {} ({}) arrived at {}? {} on hand, reorder threshold {}; suggested delivery: {suggested}.",
                    product.name,
                    product.sku,
                    store.name,
                    row.quantity_on_hand,
                    row.reorder_threshold
                );
                match ask::<RestockForm>(&ctx, question).await {
                    Answer::Given(form) => form.quantity,
                    Answer::Declined => {
                        return Ok(Json(wizard(
                            "declined",
                            "The user declined the restock; nothing changed.",
                        )));
                    }
                    Answer::Cancelled => {
                        return Ok(Json(wizard(
                            "cancelled",
                            "The user cancelled the restock; nothing changed.",
                        )));
                    }
                    Answer::Unsupported => {
                        return Err(format!(
                            "this client cannot ask the user for the quantity (no elicitation support); call restock_wizard again with a quantity (suggested: {suggested}) or use adjust_stock"
                        ));
                    }
                    Answer::Failed(reason) => return Err(format!("restock not applied: {reason}")),
                }
            }
        };
        if quantity == 0 {
            return Err("quantity must be at least 1 unit".into());
        }
        let outcome = service.adjust_stock(args.store_id, args.product_id, i64::from(quantity))?;
        self.announce(&[(args.store_id, args.product_id)], &ctx)
            .await;
        let adjustment = adjust_result(outcome, i64::from(quantity));
        Ok(Json(WizardResult {
            status: "applied".into(),
            message: format!(
                "Received {quantity} x {} at {}: {} on hand now.",
                product.name, store.name, adjustment.quantity_on_hand
            ),
            adjustment: Some(adjustment),
            product: None,
        }))
    }

    /// Adjust stock like adjust_stock, but ask the user to confirm adjustments of 50 units or
    /// more. Without a client that can ask, large adjustments are refused.
    #[tool]
    async fn adjust_stock_with_confirmation(
        &self,
        Parameters(args): Parameters<AdjustArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WizardResult>, String> {
        if args.delta == 0 {
            return Err("delta must be a non-zero number of units".into());
        }
        let service = self.service();
        let store = service.store(args.store_id)?;
        let product = service.product(args.product_id)?;
        let row = service.inventory_item(args.store_id, args.product_id)?;
        if args.delta.abs() >= LARGE_ADJUSTMENT {
            let question = format!(
                "Confirm changing {} ({}) at {} by {:+} units, from {} to {}?",
                product.name,
                product.sku,
                store.name,
                args.delta,
                row.quantity_on_hand,
                i64::from(row.quantity_on_hand) + args.delta
            );
            match ask::<ConfirmForm>(&ctx, question).await {
                Answer::Given(ConfirmForm { confirm: true }) => {}
                Answer::Given(ConfirmForm { confirm: false }) | Answer::Declined => {
                    return Ok(Json(wizard(
                        "declined",
                        "The user did not confirm the adjustment; nothing changed.",
                    )));
                }
                Answer::Cancelled => {
                    return Ok(Json(wizard(
                        "cancelled",
                        "The user cancelled the confirmation; nothing changed.",
                    )));
                }
                Answer::Unsupported => {
                    return Err(format!(
                        "adjustments of {LARGE_ADJUSTMENT} units or more need the user's confirmation, and this client cannot ask (no elicitation support); nothing changed"
                    ));
                }
                Answer::Failed(reason) => {
                    return Err(format!("adjustment not applied: {reason}"));
                }
            }
        }
        let outcome = service.adjust_stock(args.store_id, args.product_id, args.delta)?;
        self.announce(&[(args.store_id, args.product_id)], &ctx)
            .await;
        let adjustment = adjust_result(outcome, args.delta);
        Ok(Json(WizardResult {
            status: "applied".into(),
            message: format!(
                "{} at {} changed by {:+}: {} on hand now.",
                product.name, store.name, args.delta, adjustment.quantity_on_hand
            ),
            adjustment: Some(adjustment),
            product: None,
        }))
    }

    /// Guided creation of a new product. Fields not given as arguments are asked for in a form;
    /// with every field given no question is asked.
    #[tool]
    async fn new_product_wizard(
        &self,
        Parameters(args): Parameters<NewProductArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WizardResult>, String> {
        let new = match args {
            NewProductArgs {
                sku: Some(sku),
                name: Some(name),
                unit_price: Some(unit_price),
                unit_of_measure: Some(unit_of_measure),
                category_id: Some(category_id),
                supplier_id: Some(supplier_id),
            } => NewProduct {
                sku,
                name,
                unit_price,
                unit_of_measure,
                category_id,
                supplier_id,
            },
            partial => {
                let missing: Vec<&str> = [
                    ("sku", partial.sku.is_none()),
                    ("name", partial.name.is_none()),
                    ("unitPrice", partial.unit_price.is_none()),
                    ("unitOfMeasure", partial.unit_of_measure.is_none()),
                    ("categoryId", partial.category_id.is_none()),
                    ("supplierId", partial.supplier_id.is_none()),
                ]
                .into_iter()
                .filter_map(|(name, missing)| missing.then_some(name))
                .collect();
                let question = format!(
                    "Describe the new product ({} still needed).",
                    missing.join(", ")
                );
                match ask::<NewProductForm>(&ctx, question).await {
                    // Arguments the caller gave win over the form, which asks for everything.
                    Answer::Given(form) => NewProduct {
                        sku: partial.sku.unwrap_or(form.sku),
                        name: partial.name.unwrap_or(form.name),
                        unit_price: partial.unit_price.unwrap_or(form.unit_price),
                        unit_of_measure: partial.unit_of_measure.unwrap_or(form.unit_of_measure),
                        category_id: partial.category_id.unwrap_or(form.category_id),
                        supplier_id: partial.supplier_id.unwrap_or(form.supplier_id),
                    },
                    Answer::Declined => {
                        return Ok(Json(wizard(
                            "declined",
                            "The user declined; no product was created.",
                        )));
                    }
                    Answer::Cancelled => {
                        return Ok(Json(wizard(
                            "cancelled",
                            "The user cancelled; no product was created.",
                        )));
                    }
                    Answer::Unsupported => {
                        return Err(format!(
                            "this client cannot show the product form (no elicitation support); call new_product_wizard with every field, missing: {}",
                            missing.join(", ")
                        ));
                    }
                    Answer::Failed(reason) => {
                        return Err(format!("no product created: {reason}"));
                    }
                }
            }
        };
        let product = self.service().create_product(new)?;
        Ok(Json(WizardResult {
            status: "applied".into(),
            message: format!(
                "Created product {} {} ({}).",
                product.id, product.name, product.sku
            ),
            adjustment: None,
            product: Some(product),
        }))
    }
}

impl GroceryServer {
    fn dashboard_result(&self, store_id: Option<u32>) -> Result<CallToolResult, String> {
        let payload = views::dashboard(self.service(), store_id)?;
        let mut lines = vec![format!(
            "Inventory dashboard for {} store(s), generated {}.",
            payload.stores.len(),
            payload.generated_at
        )];
        for store in &payload.stores {
            lines.push(format!(
                "{} ({}, {}): {} SKUs, {} low on stock, inventory value ${:.2}, value at risk ${:.2}.",
                store.name,
                store.city,
                store.state,
                store.total_skus,
                store.low_stock_count,
                store.inventory_value,
                store.value_at_risk
            ));
        }
        let structured = serde_json::to_value(&payload)
            .map_err(|e| format!("could not encode the dashboard: {e}"))?;
        let mut result = CallToolResult::success(vec![ContentBlock::text(lines.join("\n"))]);
        result.structured_content = Some(structured);
        Ok(result)
    }

    /// Announces a change to rows (store, product) through the notifier.
    async fn announce(&self, rows: &[(u32, u32)], ctx: &RequestContext<RoleServer>) {
        let mut uris = Vec::new();
        for &(store, product) in rows {
            uris.push(store_summary_uri(store));
            uris.push(product_details_uri(product));
        }
        self.state
            .notifier
            .changed(&uris, Some((self.connection, &ctx.peer)))
            .await;
    }
}
