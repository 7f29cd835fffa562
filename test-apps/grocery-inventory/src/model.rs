//! The grocery data model: categories, products, suppliers, stores and inventory rows.
//!
//! Every type serializes with camelCase field names, the shape both the REST API and the MCP
//! tools return. Ids are positive integers that start at 1.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A product category such as "Dairy".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Category {
    /// Category id.
    pub(crate) id: u32,
    /// Display name.
    pub(crate) name: String,
    /// One sentence about what the category holds.
    pub(crate) description: String,
}

/// A product the chain sells, with its category and supplier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Product {
    /// Product id.
    pub(crate) id: u32,
    /// Stock keeping unit, unique across the chain (for example `MILK-001`).
    pub(crate) sku: String,
    /// Display name.
    pub(crate) name: String,
    /// Retail price of one unit, in dollars.
    pub(crate) unit_price: f64,
    /// What one unit is (gallon, loaf, lb, each...).
    pub(crate) unit_of_measure: String,
    /// Id of the product's category.
    pub(crate) category_id: u32,
    /// Id of the product's supplier.
    pub(crate) supplier_id: u32,
}

/// A supplier that delivers products to the stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Supplier {
    /// Supplier id.
    pub(crate) id: u32,
    /// Company name.
    pub(crate) name: String,
    /// Where purchase orders go.
    pub(crate) contact_email: String,
    /// Phone number of the order desk.
    pub(crate) phone: String,
}

/// A store of the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Store {
    /// Store id.
    pub(crate) id: u32,
    /// Store name.
    pub(crate) name: String,
    /// City.
    pub(crate) city: String,
    /// Two-letter state code.
    pub(crate) state: String,
}

/// How much of one product one store has, and when it should reorder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InventoryItem {
    /// Store id.
    pub(crate) store_id: u32,
    /// Product id.
    pub(crate) product_id: u32,
    /// Units on the shelves and in the back room.
    pub(crate) quantity_on_hand: u32,
    /// At or below this quantity the item is low on stock and should be reordered.
    pub(crate) reorder_threshold: u32,
    /// When stock last arrived, as an RFC 3339 UTC timestamp.
    pub(crate) last_restocked: String,
}

impl InventoryItem {
    /// Whether the row is at or below its reorder threshold.
    pub(crate) fn is_low(&self) -> bool {
        self.quantity_on_hand <= self.reorder_threshold
    }
}

/// The fields of a product to create; the service assigns the id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewProduct {
    /// Stock keeping unit; must be unique.
    pub(crate) sku: String,
    /// Display name.
    pub(crate) name: String,
    /// Retail price of one unit, in dollars.
    pub(crate) unit_price: f64,
    /// What one unit is.
    pub(crate) unit_of_measure: String,
    /// Id of an existing category.
    pub(crate) category_id: u32,
    /// Id of an existing supplier.
    pub(crate) supplier_id: u32,
}

/// Rounds a dollar amount to whole cents.
pub(crate) fn round_cents(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}
