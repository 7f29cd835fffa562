//! The seed data set: 3 stores, 5 categories, 5 suppliers, 24 products and one inventory row
//! per store and product, several of them at or below their reorder threshold.
//!
//! Everything here is deterministic (including the restock times) so tests and demos see the
//! same numbers on every start.

use crate::model::{Category, InventoryItem, Product, Store, Supplier};
use crate::time::rfc3339;

/// 2026-11-20T06:00:00Z: the seed's restock times count back from this instant.
const SEED_EPOCH: i64 = 1_795_154_400;

/// The complete seed data set.
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    pub(crate) categories: Vec<Category>,
    pub(crate) products: Vec<Product>,
    pub(crate) suppliers: Vec<Supplier>,
    pub(crate) stores: Vec<Store>,
    pub(crate) inventory: Vec<InventoryItem>,
}

/// Builds the seed data set.
pub(crate) fn seed() -> Seed {
    let categories = [
        ("Dairy", "Milk, eggs, cheese, yogurt and butter."),
        ("Bakery", "Bread, bagels and pastries baked daily."),
        ("Produce", "Fresh fruit and vegetables."),
        ("Meat & Seafood", "Fresh meat, poultry and fish."),
        (
            "Pantry",
            "Shelf-stable staples: grains, oils, cans and spreads.",
        ),
    ]
    .into_iter()
    .zip(1..)
    .map(|((name, description), id)| Category {
        id,
        name: name.into(),
        description: description.into(),
    })
    .collect();

    let suppliers = [
        (
            "Green Valley Dairy Co-op",
            "orders@greenvalley-dairy.example",
            "503-555-0101",
        ),
        (
            "Hearthstone Bakery Supply",
            "sales@hearthstone-bakery.example",
            "503-555-0102",
        ),
        (
            "Pacific Fresh Produce",
            "orders@pacificfresh.example",
            "206-555-0103",
        ),
        (
            "Cascade Meats & Seafood",
            "desk@cascade-meats.example",
            "206-555-0104",
        ),
        (
            "Northwest Pantry Wholesale",
            "po@nw-pantry.example",
            "415-555-0105",
        ),
    ]
    .into_iter()
    .zip(1..)
    .map(|((name, email, phone), id)| Supplier {
        id,
        name: name.into(),
        contact_email: email.into(),
        phone: phone.into(),
    })
    .collect();

    let stores = [
        ("Downtown Market", "Portland", "OR"),
        ("Uptown Grocery", "Seattle", "WA"),
        ("Harbor Foods", "San Francisco", "CA"),
    ]
    .into_iter()
    .zip(1..)
    .map(|((name, city, state), id)| Store {
        id,
        name: name.into(),
        city: city.into(),
        state: state.into(),
    })
    .collect::<Vec<_>>();

    // (sku, name, unit price, unit of measure, category id, supplier id, reorder threshold)
    let catalogue: [(&str, &str, f64, &str, u32, u32, u32); 24] = [
        ("MILK-001", "Organic Milk", 4.99, "gallon", 1, 1, 20),
        ("BREAD-002", "Whole Wheat Bread", 3.49, "loaf", 2, 2, 15),
        ("EGGS-003", "Free-Range Eggs", 5.29, "dozen", 1, 1, 18),
        ("CHEESE-004", "Aged Cheddar", 6.99, "block", 1, 1, 10),
        ("YOGURT-005", "Greek Yogurt", 1.29, "cup", 1, 1, 30),
        ("BUTTER-006", "Salted Butter", 4.49, "lb", 1, 1, 12),
        ("BAGEL-007", "Everything Bagels", 4.99, "6-pack", 2, 2, 10),
        ("CROIS-008", "Butter Croissants", 5.99, "4-pack", 2, 2, 8),
        ("SOUR-009", "Sourdough Loaf", 5.49, "loaf", 2, 2, 10),
        ("APPLE-010", "Honeycrisp Apples", 2.49, "lb", 3, 3, 40),
        ("BANANA-011", "Bananas", 0.69, "lb", 3, 3, 50),
        ("SPIN-012", "Baby Spinach", 3.99, "bag", 3, 3, 15),
        ("AVO-013", "Hass Avocados", 1.49, "each", 3, 3, 25),
        ("TOM-014", "Roma Tomatoes", 1.99, "lb", 3, 3, 30),
        ("CHKN-015", "Chicken Breast", 6.49, "lb", 4, 4, 20),
        ("BEEF-016", "Ground Beef", 5.99, "lb", 4, 4, 20),
        ("SALM-017", "Atlantic Salmon Fillet", 11.99, "lb", 4, 4, 8),
        ("SHRMP-018", "Wild Shrimp", 12.99, "lb", 4, 4, 6),
        ("RICE-019", "Jasmine Rice", 8.99, "5 lb bag", 5, 5, 12),
        ("PASTA-020", "Penne Pasta", 1.79, "box", 5, 5, 25),
        (
            "OIL-021",
            "Extra Virgin Olive Oil",
            9.99,
            "bottle",
            5,
            5,
            10,
        ),
        ("BEANS-022", "Black Beans", 1.19, "can", 5, 5, 30),
        ("OATS-023", "Rolled Oats", 4.29, "canister", 5, 5, 12),
        ("HONEY-024", "Wildflower Honey", 7.49, "jar", 5, 5, 6),
    ];
    let products = catalogue
        .iter()
        .zip(1..)
        .map(
            |(&(sku, name, price, unit, category_id, supplier_id, _), id)| Product {
                id,
                sku: sku.into(),
                name: name.into(),
                unit_price: price,
                unit_of_measure: unit.into(),
                category_id,
                supplier_id,
            },
        )
        .collect();

    // Rows that start at or below their threshold: (store id, product id, quantity on hand).
    let low_rows: [(u32, u32, u32); 9] = [
        (1, 1, 8),   // Downtown Market is short on Organic Milk.
        (1, 5, 30),  // ...and exactly at the threshold for Greek Yogurt.
        (1, 17, 3),  // ...and low on salmon.
        (2, 2, 6),   // Uptown Grocery is short on Whole Wheat Bread.
        (2, 12, 15), // ...exactly at the threshold for Baby Spinach.
        (2, 18, 0),  // ...and out of shrimp.
        (3, 11, 22), // Harbor Foods is low on bananas.
        (3, 21, 4),  // ...olive oil.
        (3, 24, 2),  // ...and honey.
    ];
    let mut inventory = Vec::new();
    for store in &stores {
        for (&(_, _, _, _, _, _, threshold), product_id) in catalogue.iter().zip(1u32..) {
            let quantity = low_rows
                .iter()
                .find(|(s, p, _)| *s == store.id && *p == product_id)
                .map_or_else(
                    || threshold * 2 + (store.id * 7 + product_id * 13) % 25 + 1,
                    |&(_, _, q)| q,
                );
            let hours_ago = i64::from((store.id * 5 + product_id * 3) % 72);
            inventory.push(InventoryItem {
                store_id: store.id,
                product_id,
                quantity_on_hand: quantity,
                reorder_threshold: threshold,
                last_restocked: rfc3339(SEED_EPOCH - hours_ago * 3600),
            });
        }
    }

    Seed {
        categories,
        products,
        suppliers,
        stores,
        inventory,
    }
}
