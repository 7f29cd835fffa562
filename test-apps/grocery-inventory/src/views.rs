//! Read models computed from the live data: the dashboard payload, store summaries, product
//! details and the low-stock report.
//!
//! Definitions used throughout:
//! - *inventory value*: the sum of quantity on hand times unit price;
//! - *low stock*: quantity on hand at or below the reorder threshold;
//! - *suggested order*: the units that bring a row back to its restock target of twice the
//!   reorder threshold;
//! - *value at risk*: the retail value of the suggested orders of the low-stock rows, i.e. the
//!   sales a store stands to lose if those shelves run empty before the next delivery.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::model::{Category, InventoryItem, Product, Store, Supplier, round_cents};
use crate::service::{InventoryError, InventoryService, ProductFilter};
use crate::time::now_rfc3339;

/// Units needed to bring a row back to twice its reorder threshold.
pub(crate) fn suggested_order(item: &InventoryItem) -> u32 {
    (item.reorder_threshold * 2).saturating_sub(item.quantity_on_hand)
}

/// The structured content of `show_store_inventory_dashboard` and `refresh_dashboard`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DashboardPayload {
    /// When the payload was computed (RFC 3339, UTC).
    pub(crate) generated_at: String,
    /// One entry per store shown.
    pub(crate) stores: Vec<StoreDashboard>,
}

/// One store on the dashboard.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoreDashboard {
    /// Store id.
    pub(crate) id: u32,
    /// Store name.
    pub(crate) name: String,
    /// City.
    pub(crate) city: String,
    /// State code.
    pub(crate) state: String,
    /// Number of products the store stocks.
    pub(crate) total_skus: usize,
    /// Number of rows at or below their reorder threshold.
    pub(crate) low_stock_count: usize,
    /// Retail value of everything on hand, in dollars.
    pub(crate) inventory_value: f64,
    /// Retail value of the suggested orders of low-stock rows, in dollars.
    pub(crate) value_at_risk: f64,
    /// Every inventory row of the store, by product id.
    pub(crate) items: Vec<DashboardItem>,
}

/// One inventory row on the dashboard.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DashboardItem {
    /// Product id.
    pub(crate) product_id: u32,
    /// SKU.
    pub(crate) sku: String,
    /// Product name.
    pub(crate) name: String,
    /// Category name.
    pub(crate) category: String,
    /// Unit price in dollars.
    pub(crate) unit_price: f64,
    /// Unit of measure.
    pub(crate) unit_of_measure: String,
    /// Units on hand.
    pub(crate) quantity_on_hand: u32,
    /// Reorder threshold.
    pub(crate) reorder_threshold: u32,
    /// Last delivery (RFC 3339).
    pub(crate) last_restocked: String,
    /// At or below the threshold.
    pub(crate) low_stock: bool,
    /// Quantity times unit price.
    pub(crate) value: f64,
    /// Units to order to reach twice the threshold.
    pub(crate) suggested_order: u32,
}

/// A low-stock row with the names a buyer needs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LowStockEntry {
    /// Store id.
    pub(crate) store_id: u32,
    /// Store name.
    pub(crate) store_name: String,
    /// Product id.
    pub(crate) product_id: u32,
    /// SKU.
    pub(crate) sku: String,
    /// Product name.
    pub(crate) product_name: String,
    /// Units on hand.
    pub(crate) quantity_on_hand: u32,
    /// Reorder threshold.
    pub(crate) reorder_threshold: u32,
    /// Units to order to reach twice the threshold.
    pub(crate) suggested_order: u32,
    /// Supplier id.
    pub(crate) supplier_id: u32,
    /// Supplier name.
    pub(crate) supplier_name: String,
    /// Last delivery (RFC 3339).
    pub(crate) last_restocked: String,
}

/// The `inventory://stores/{storeId}/summary` resource.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoreSummary {
    /// The store.
    pub(crate) store: Store,
    /// When the summary was computed.
    pub(crate) generated_at: String,
    /// Number of products stocked.
    pub(crate) total_skus: usize,
    /// Units on hand across all products.
    pub(crate) total_units: u64,
    /// Rows at or below threshold.
    pub(crate) low_stock_count: usize,
    /// Retail value on hand.
    pub(crate) inventory_value: f64,
    /// Retail value of the suggested orders of low-stock rows.
    pub(crate) value_at_risk: f64,
    /// Per-category breakdown.
    pub(crate) categories: Vec<CategoryBreakdown>,
    /// The low-stock rows.
    pub(crate) low_stock_items: Vec<LowStockEntry>,
}

/// Units and value of one category in one store.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CategoryBreakdown {
    /// Category id.
    pub(crate) category_id: u32,
    /// Category name.
    pub(crate) name: String,
    /// Products stocked in this category.
    pub(crate) skus: usize,
    /// Units on hand.
    pub(crate) units: u64,
    /// Retail value on hand.
    pub(crate) value: f64,
}

/// The `inventory://products/{productId}/details` resource.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProductDetails {
    /// The product.
    pub(crate) product: Product,
    /// Its category.
    pub(crate) category: Category,
    /// Its supplier.
    pub(crate) supplier: Supplier,
    /// Units on hand across all stores.
    pub(crate) total_on_hand: u64,
    /// Stock per store.
    pub(crate) stock: Vec<StoreStock>,
}

/// Stock of one product in one store.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoreStock {
    /// Store id.
    pub(crate) store_id: u32,
    /// Store name.
    pub(crate) store_name: String,
    /// Units on hand.
    pub(crate) quantity_on_hand: u32,
    /// Reorder threshold.
    pub(crate) reorder_threshold: u32,
    /// At or below threshold.
    pub(crate) low_stock: bool,
    /// Last delivery.
    pub(crate) last_restocked: String,
}

struct Lookup {
    products: BTreeMap<u32, Product>,
    categories: BTreeMap<u32, Category>,
    suppliers: BTreeMap<u32, Supplier>,
    stores: BTreeMap<u32, Store>,
}

impl Lookup {
    fn load(service: &dyn InventoryService) -> Result<Self, InventoryError> {
        Ok(Self {
            products: service
                .products(ProductFilter::default())?
                .into_iter()
                .map(|p| (p.id, p))
                .collect(),
            categories: service
                .categories()
                .into_iter()
                .map(|c| (c.id, c))
                .collect(),
            suppliers: service.suppliers().into_iter().map(|s| (s.id, s)).collect(),
            stores: service.stores().into_iter().map(|s| (s.id, s)).collect(),
        })
    }

    fn low_entry(&self, row: &InventoryItem) -> Option<LowStockEntry> {
        let product = self.products.get(&row.product_id)?;
        Some(LowStockEntry {
            store_id: row.store_id,
            store_name: self
                .stores
                .get(&row.store_id)
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            product_id: row.product_id,
            sku: product.sku.clone(),
            product_name: product.name.clone(),
            quantity_on_hand: row.quantity_on_hand,
            reorder_threshold: row.reorder_threshold,
            suggested_order: suggested_order(row),
            supplier_id: product.supplier_id,
            supplier_name: self
                .suppliers
                .get(&product.supplier_id)
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            last_restocked: row.last_restocked.clone(),
        })
    }

    fn price(&self, product_id: u32) -> f64 {
        self.products.get(&product_id).map_or(0.0, |p| p.unit_price)
    }

    fn value_at_risk(&self, rows: &[InventoryItem]) -> f64 {
        round_cents(
            rows.iter()
                .filter(|r| r.is_low())
                .map(|r| f64::from(suggested_order(r)) * self.price(r.product_id))
                .sum(),
        )
    }

    fn inventory_value(&self, rows: &[InventoryItem]) -> f64 {
        round_cents(
            rows.iter()
                .map(|r| f64::from(r.quantity_on_hand) * self.price(r.product_id))
                .sum(),
        )
    }
}

/// The dashboard payload for all stores, or for one.
pub(crate) fn dashboard(
    service: &dyn InventoryService,
    store_id: Option<u32>,
) -> Result<DashboardPayload, InventoryError> {
    let lookup = Lookup::load(service)?;
    let stores = match store_id {
        Some(id) => vec![service.store(id)?],
        None => lookup.stores.values().cloned().collect(),
    };
    let mut out = Vec::with_capacity(stores.len());
    for store in stores {
        let rows = service.inventory(Some(store.id), None)?;
        let items = rows
            .iter()
            .filter_map(|row| {
                let product = lookup.products.get(&row.product_id)?;
                Some(DashboardItem {
                    product_id: row.product_id,
                    sku: product.sku.clone(),
                    name: product.name.clone(),
                    category: lookup
                        .categories
                        .get(&product.category_id)
                        .map(|c| c.name.clone())
                        .unwrap_or_default(),
                    unit_price: product.unit_price,
                    unit_of_measure: product.unit_of_measure.clone(),
                    quantity_on_hand: row.quantity_on_hand,
                    reorder_threshold: row.reorder_threshold,
                    last_restocked: row.last_restocked.clone(),
                    low_stock: row.is_low(),
                    value: round_cents(f64::from(row.quantity_on_hand) * product.unit_price),
                    suggested_order: suggested_order(row),
                })
            })
            .collect::<Vec<_>>();
        out.push(StoreDashboard {
            id: store.id,
            name: store.name,
            city: store.city,
            state: store.state,
            total_skus: rows.len(),
            low_stock_count: rows.iter().filter(|r| r.is_low()).count(),
            inventory_value: lookup.inventory_value(&rows),
            value_at_risk: lookup.value_at_risk(&rows),
            items,
        });
    }
    Ok(DashboardPayload {
        generated_at: now_rfc3339(),
        stores: out,
    })
}

/// Low-stock rows, for one store or all, most urgent (largest shortfall ratio) first.
pub(crate) fn low_stock(
    service: &dyn InventoryService,
    store_id: Option<u32>,
) -> Result<Vec<LowStockEntry>, InventoryError> {
    let lookup = Lookup::load(service)?;
    let mut rows: Vec<InventoryItem> = service
        .inventory(store_id, None)?
        .into_iter()
        .filter(InventoryItem::is_low)
        .collect();
    // Emptiest shelves first: compare quantity/threshold without floating point.
    rows.sort_by(|a, b| {
        (u64::from(a.quantity_on_hand) * u64::from(b.reorder_threshold.max(1)))
            .cmp(&(u64::from(b.quantity_on_hand) * u64::from(a.reorder_threshold.max(1))))
            .then((a.store_id, a.product_id).cmp(&(b.store_id, b.product_id)))
    });
    Ok(rows.iter().filter_map(|r| lookup.low_entry(r)).collect())
}

/// The summary of one store.
pub(crate) fn store_summary(
    service: &dyn InventoryService,
    store_id: u32,
) -> Result<StoreSummary, InventoryError> {
    let store = service.store(store_id)?;
    let lookup = Lookup::load(service)?;
    let rows = service.inventory(Some(store_id), None)?;
    let mut categories: BTreeMap<u32, CategoryBreakdown> = BTreeMap::new();
    for row in &rows {
        let Some(product) = lookup.products.get(&row.product_id) else {
            continue;
        };
        let entry = categories
            .entry(product.category_id)
            .or_insert_with(|| CategoryBreakdown {
                category_id: product.category_id,
                name: lookup
                    .categories
                    .get(&product.category_id)
                    .map(|c| c.name.clone())
                    .unwrap_or_default(),
                skus: 0,
                units: 0,
                value: 0.0,
            });
        entry.skus += 1;
        entry.units += u64::from(row.quantity_on_hand);
        entry.value =
            round_cents(entry.value + f64::from(row.quantity_on_hand) * product.unit_price);
    }
    Ok(StoreSummary {
        store,
        generated_at: now_rfc3339(),
        total_skus: rows.len(),
        total_units: rows.iter().map(|r| u64::from(r.quantity_on_hand)).sum(),
        low_stock_count: rows.iter().filter(|r| r.is_low()).count(),
        inventory_value: lookup.inventory_value(&rows),
        value_at_risk: lookup.value_at_risk(&rows),
        categories: categories.into_values().collect(),
        low_stock_items: low_stock(service, Some(store_id))?,
    })
}

/// The details of one product with its stock in every store.
pub(crate) fn product_details(
    service: &dyn InventoryService,
    product_id: u32,
) -> Result<ProductDetails, InventoryError> {
    let product = service.product(product_id)?;
    let category = service.category(product.category_id)?;
    let supplier = service.supplier(product.supplier_id)?;
    let stores: BTreeMap<u32, Store> = service.stores().into_iter().map(|s| (s.id, s)).collect();
    let stock: Vec<StoreStock> = service
        .inventory(None, Some(product_id))?
        .into_iter()
        .map(|row| StoreStock {
            store_id: row.store_id,
            store_name: stores
                .get(&row.store_id)
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            quantity_on_hand: row.quantity_on_hand,
            reorder_threshold: row.reorder_threshold,
            low_stock: row.is_low(),
            last_restocked: row.last_restocked,
        })
        .collect();
    Ok(ProductDetails {
        total_on_hand: stock.iter().map(|s| u64::from(s.quantity_on_hand)).sum(),
        product,
        category,
        supplier,
        stock,
    })
}
