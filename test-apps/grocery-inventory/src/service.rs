//! The data layer: the [`InventoryService`] trait and its in-memory implementation.
//!
//! The MCP tools, resources, prompts and the REST API all go through this trait and share one
//! instance, so a change made through one surface is visible through every other.

use std::collections::BTreeMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::model::{Category, InventoryItem, NewProduct, Product, Store, Supplier};
use crate::seed::{Seed, seed};
use crate::time::now_rfc3339;

/// Largest quantity or threshold the service accepts, so arithmetic never overflows.
pub(crate) const MAX_QUANTITY: u32 = 1_000_000;

/// Why a lookup or change was refused. The messages are written for people and models.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum InventoryError {
    /// No store has this id.
    #[error("store {id} does not exist (known store ids: {known})")]
    UnknownStore {
        /// The id asked for.
        id: u32,
        /// The ids that exist, comma separated.
        known: String,
    },
    /// No product has this id.
    #[error("product {id} does not exist (product ids run from 1 to {max})")]
    UnknownProduct {
        /// The id asked for.
        id: u32,
        /// The largest product id.
        max: u32,
    },
    /// No category has this id.
    #[error("category {id} does not exist (known category ids: {known})")]
    UnknownCategory {
        /// The id asked for.
        id: u32,
        /// The ids that exist, comma separated.
        known: String,
    },
    /// No supplier has this id.
    #[error("supplier {id} does not exist (known supplier ids: {known})")]
    UnknownSupplier {
        /// The id asked for.
        id: u32,
        /// The ids that exist, comma separated.
        known: String,
    },
    /// The store does not stock the product yet.
    #[error(
        "store {store_id} has no inventory row for product {product_id}; create one with set_inventory first"
    )]
    NoInventoryRow {
        /// Store id.
        store_id: u32,
        /// Product id.
        product_id: u32,
    },
    /// An adjustment would take the quantity below zero or above the maximum.
    #[error(
        "adjusting store {store_id} product {product_id} by {delta} is out of range: {current} on hand, the result must be between 0 and {MAX_QUANTITY}"
    )]
    QuantityOutOfRange {
        /// Store id.
        store_id: u32,
        /// Product id.
        product_id: u32,
        /// Quantity before the adjustment.
        current: u32,
        /// The requested change.
        delta: i64,
    },
    /// A field value is not acceptable.
    #[error("invalid {field}: {reason}")]
    InvalidField {
        /// The field, as named in the API (camelCase).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// The result of creating or replacing an inventory row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SetOutcome {
    /// The row as stored.
    pub(crate) item: InventoryItem,
    /// True if the row did not exist before.
    pub(crate) created: bool,
}

/// The result of adjusting an inventory row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AdjustOutcome {
    /// The row as stored after the change.
    pub(crate) item: InventoryItem,
    /// The quantity before the change.
    pub(crate) previous_quantity: u32,
}

/// Filters for [`InventoryService::products`]; `None` means "any".
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProductFilter {
    pub(crate) category_id: Option<u32>,
    pub(crate) supplier_id: Option<u32>,
}

/// Everything the app can ask of its data store.
pub(crate) trait InventoryService: Send + Sync + std::fmt::Debug {
    /// All categories, by id.
    fn categories(&self) -> Vec<Category>;
    /// One category.
    fn category(&self, id: u32) -> Result<Category, InventoryError>;
    /// Products matching the filter, by id. Filter ids must exist.
    fn products(&self, filter: ProductFilter) -> Result<Vec<Product>, InventoryError>;
    /// One product.
    fn product(&self, id: u32) -> Result<Product, InventoryError>;
    /// All suppliers, by id.
    fn suppliers(&self) -> Vec<Supplier>;
    /// One supplier.
    fn supplier(&self, id: u32) -> Result<Supplier, InventoryError>;
    /// All stores, by id.
    fn stores(&self) -> Vec<Store>;
    /// One store.
    fn store(&self, id: u32) -> Result<Store, InventoryError>;
    /// Inventory rows, optionally for one store and/or one product (both must exist).
    fn inventory(
        &self,
        store_id: Option<u32>,
        product_id: Option<u32>,
    ) -> Result<Vec<InventoryItem>, InventoryError>;
    /// One inventory row.
    fn inventory_item(
        &self,
        store_id: u32,
        product_id: u32,
    ) -> Result<InventoryItem, InventoryError>;
    /// Creates or replaces a row with absolute values.
    fn set_inventory(
        &self,
        store_id: u32,
        product_id: u32,
        quantity_on_hand: u32,
        reorder_threshold: u32,
    ) -> Result<SetOutcome, InventoryError>;
    /// Changes the quantity of an existing row by a signed delta. A positive delta counts as a
    /// delivery and updates the restock time.
    fn adjust_stock(
        &self,
        store_id: u32,
        product_id: u32,
        delta: i64,
    ) -> Result<AdjustOutcome, InventoryError>;
    /// Adds a product to the catalogue.
    fn create_product(&self, product: NewProduct) -> Result<Product, InventoryError>;
    /// Puts every inventory row back to its seed value; returns the number of rows.
    fn reset_inventory(&self) -> usize;
}

#[derive(Debug)]
struct Data {
    categories: BTreeMap<u32, Category>,
    products: BTreeMap<u32, Product>,
    suppliers: BTreeMap<u32, Supplier>,
    stores: BTreeMap<u32, Store>,
    inventory: BTreeMap<(u32, u32), InventoryItem>,
}

impl Data {
    fn require_store(&self, id: u32) -> Result<&Store, InventoryError> {
        self.stores
            .get(&id)
            .ok_or_else(|| InventoryError::UnknownStore {
                id,
                known: known_ids(self.stores.keys()),
            })
    }

    fn require_product(&self, id: u32) -> Result<&Product, InventoryError> {
        self.products
            .get(&id)
            .ok_or_else(|| InventoryError::UnknownProduct {
                id,
                max: self.products.keys().next_back().copied().unwrap_or(0),
            })
    }

    fn require_category(&self, id: u32) -> Result<&Category, InventoryError> {
        self.categories
            .get(&id)
            .ok_or_else(|| InventoryError::UnknownCategory {
                id,
                known: known_ids(self.categories.keys()),
            })
    }

    fn require_supplier(&self, id: u32) -> Result<&Supplier, InventoryError> {
        self.suppliers
            .get(&id)
            .ok_or_else(|| InventoryError::UnknownSupplier {
                id,
                known: known_ids(self.suppliers.keys()),
            })
    }
}

fn known_ids<'a>(ids: impl Iterator<Item = &'a u32>) -> String {
    ids.map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// The in-memory implementation, seeded on creation.
#[derive(Debug)]
pub(crate) struct InMemoryInventoryService {
    data: RwLock<Data>,
    seed_inventory: BTreeMap<(u32, u32), InventoryItem>,
}

impl InMemoryInventoryService {
    /// A service holding the seed data set.
    pub(crate) fn seeded() -> Self {
        let Seed {
            categories,
            products,
            suppliers,
            stores,
            inventory,
        } = seed();
        let inventory: BTreeMap<_, _> = inventory
            .into_iter()
            .map(|row| ((row.store_id, row.product_id), row))
            .collect();
        Self {
            data: RwLock::new(Data {
                categories: categories.into_iter().map(|c| (c.id, c)).collect(),
                products: products.into_iter().map(|p| (p.id, p)).collect(),
                suppliers: suppliers.into_iter().map(|s| (s.id, s)).collect(),
                stores: stores.into_iter().map(|s| (s.id, s)).collect(),
                inventory: inventory.clone(),
            }),
            seed_inventory: inventory,
        }
    }

    // A panic while holding the lock cannot leave the maps half-updated (every change is a
    // single insert), so a poisoned lock is safe to keep using.
    fn read(&self) -> RwLockReadGuard<'_, Data> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Data> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
}

fn check_quantity(field: &'static str, value: u32) -> Result<(), InventoryError> {
    if value > MAX_QUANTITY {
        return Err(InventoryError::InvalidField {
            field,
            reason: format!("{value} is larger than the maximum of {MAX_QUANTITY}"),
        });
    }
    Ok(())
}

impl InventoryService for InMemoryInventoryService {
    fn categories(&self) -> Vec<Category> {
        self.read().categories.values().cloned().collect()
    }

    fn category(&self, id: u32) -> Result<Category, InventoryError> {
        self.read().require_category(id).cloned()
    }

    fn products(&self, filter: ProductFilter) -> Result<Vec<Product>, InventoryError> {
        let data = self.read();
        if let Some(id) = filter.category_id {
            data.require_category(id)?;
        }
        if let Some(id) = filter.supplier_id {
            data.require_supplier(id)?;
        }
        Ok(data
            .products
            .values()
            .filter(|p| filter.category_id.is_none_or(|c| p.category_id == c))
            .filter(|p| filter.supplier_id.is_none_or(|s| p.supplier_id == s))
            .cloned()
            .collect())
    }

    fn product(&self, id: u32) -> Result<Product, InventoryError> {
        self.read().require_product(id).cloned()
    }

    fn suppliers(&self) -> Vec<Supplier> {
        self.read().suppliers.values().cloned().collect()
    }

    fn supplier(&self, id: u32) -> Result<Supplier, InventoryError> {
        self.read().require_supplier(id).cloned()
    }

    fn stores(&self) -> Vec<Store> {
        self.read().stores.values().cloned().collect()
    }

    fn store(&self, id: u32) -> Result<Store, InventoryError> {
        self.read().require_store(id).cloned()
    }

    fn inventory(
        &self,
        store_id: Option<u32>,
        product_id: Option<u32>,
    ) -> Result<Vec<InventoryItem>, InventoryError> {
        let data = self.read();
        if let Some(id) = store_id {
            data.require_store(id)?;
        }
        if let Some(id) = product_id {
            data.require_product(id)?;
        }
        Ok(data
            .inventory
            .values()
            .filter(|row| store_id.is_none_or(|s| row.store_id == s))
            .filter(|row| product_id.is_none_or(|p| row.product_id == p))
            .cloned()
            .collect())
    }

    fn inventory_item(
        &self,
        store_id: u32,
        product_id: u32,
    ) -> Result<InventoryItem, InventoryError> {
        let data = self.read();
        data.require_store(store_id)?;
        data.require_product(product_id)?;
        data.inventory
            .get(&(store_id, product_id))
            .cloned()
            .ok_or(InventoryError::NoInventoryRow {
                store_id,
                product_id,
            })
    }

    fn set_inventory(
        &self,
        store_id: u32,
        product_id: u32,
        quantity_on_hand: u32,
        reorder_threshold: u32,
    ) -> Result<SetOutcome, InventoryError> {
        check_quantity("quantityOnHand", quantity_on_hand)?;
        check_quantity("reorderThreshold", reorder_threshold)?;
        let mut data = self.write();
        data.require_store(store_id)?;
        data.require_product(product_id)?;
        let previous = data.inventory.get(&(store_id, product_id)).cloned();
        // Raising the quantity is a delivery; otherwise the old restock time stays.
        let last_restocked = match &previous {
            Some(old) if quantity_on_hand <= old.quantity_on_hand => old.last_restocked.clone(),
            _ => now_rfc3339(),
        };
        let item = InventoryItem {
            store_id,
            product_id,
            quantity_on_hand,
            reorder_threshold,
            last_restocked,
        };
        data.inventory.insert((store_id, product_id), item.clone());
        Ok(SetOutcome {
            item,
            created: previous.is_none(),
        })
    }

    fn adjust_stock(
        &self,
        store_id: u32,
        product_id: u32,
        delta: i64,
    ) -> Result<AdjustOutcome, InventoryError> {
        let mut data = self.write();
        data.require_store(store_id)?;
        data.require_product(product_id)?;
        let row = data.inventory.get_mut(&(store_id, product_id)).ok_or(
            InventoryError::NoInventoryRow {
                store_id,
                product_id,
            },
        )?;
        let previous_quantity = row.quantity_on_hand;
        let new_quantity = i64::from(previous_quantity)
            .checked_add(delta)
            .filter(|q| (0..=i64::from(MAX_QUANTITY)).contains(q))
            .and_then(|q| u32::try_from(q).ok())
            .ok_or(InventoryError::QuantityOutOfRange {
                store_id,
                product_id,
                current: previous_quantity,
                delta,
            })?;
        row.quantity_on_hand = new_quantity;
        if delta > 0 {
            row.last_restocked = now_rfc3339();
        }
        Ok(AdjustOutcome {
            item: row.clone(),
            previous_quantity,
        })
    }

    fn create_product(&self, product: NewProduct) -> Result<Product, InventoryError> {
        let sku = product.sku.trim().to_ascii_uppercase();
        if sku.is_empty()
            || sku.len() > 32
            || !sku.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(InventoryError::InvalidField {
                field: "sku",
                reason: format!(
                    "{:?} must be 1 to 32 letters, digits or dashes (for example JAM-025)",
                    product.sku
                ),
            });
        }
        let name = product.name.trim().to_owned();
        if name.is_empty() || name.len() > 100 {
            return Err(InventoryError::InvalidField {
                field: "name",
                reason: "must be 1 to 100 characters".into(),
            });
        }
        let unit = product.unit_of_measure.trim().to_owned();
        if unit.is_empty() || unit.len() > 32 {
            return Err(InventoryError::InvalidField {
                field: "unitOfMeasure",
                reason: "must be 1 to 32 characters (for example lb, each, jar)".into(),
            });
        }
        if !product.unit_price.is_finite()
            || product.unit_price <= 0.0
            || product.unit_price > 10_000.0
        {
            return Err(InventoryError::InvalidField {
                field: "unitPrice",
                reason: format!(
                    "{} must be more than 0 and at most 10000",
                    product.unit_price
                ),
            });
        }
        let mut data = self.write();
        data.require_category(product.category_id)?;
        data.require_supplier(product.supplier_id)?;
        if let Some(existing) = data.products.values().find(|p| p.sku == sku) {
            return Err(InventoryError::InvalidField {
                field: "sku",
                reason: format!("{sku} is already used by product {}", existing.id),
            });
        }
        let id = data.products.keys().next_back().copied().unwrap_or(0) + 1;
        let created = Product {
            id,
            sku,
            name,
            unit_price: crate::model::round_cents(product.unit_price),
            unit_of_measure: unit,
            category_id: product.category_id,
            supplier_id: product.supplier_id,
        };
        data.products.insert(id, created.clone());
        Ok(created)
    }

    fn reset_inventory(&self) -> usize {
        let mut data = self.write();
        data.inventory = self.seed_inventory.clone();
        data.inventory.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_has_the_documented_shape() {
        let service = InMemoryInventoryService::seeded();
        assert_eq!(service.stores().len(), 3);
        assert_eq!(service.categories().len(), 5);
        assert_eq!(service.suppliers().len(), 5);
        assert_eq!(
            service.products(ProductFilter::default()).unwrap().len(),
            24
        );
        let rows = service.inventory(None, None).unwrap();
        assert_eq!(rows.len(), 72);
        assert!(rows.iter().filter(|r| r.is_low()).count() >= 6);
        let milk = service.product(1).unwrap();
        assert_eq!((milk.sku.as_str(), milk.unit_price), ("MILK-001", 4.99));
        assert_eq!(service.store(2).unwrap().city, "Seattle");
    }

    #[test]
    fn adjust_refuses_negative_results_and_keeps_the_row() {
        let service = InMemoryInventoryService::seeded();
        let before = service.inventory_item(1, 1).unwrap();
        let err = service.adjust_stock(1, 1, -1000).unwrap_err();
        assert!(matches!(err, InventoryError::QuantityOutOfRange { .. }));
        assert_eq!(service.inventory_item(1, 1).unwrap(), before);
        let done = service.adjust_stock(1, 1, 5).unwrap();
        assert_eq!(done.item.quantity_on_hand, before.quantity_on_hand + 5);
        assert_eq!(service.reset_inventory(), 72);
        assert_eq!(service.inventory_item(1, 1).unwrap(), before);
    }
}
