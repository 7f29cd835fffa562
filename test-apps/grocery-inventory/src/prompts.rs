//! The MCP prompts, built from live data each time they are requested:
//! `analyze_store_performance`, `draft_supplier_order` and `explain_inventory_term`.

use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};

use crate::service::{InventoryService, ProductFilter};
use crate::views;

/// Accepted values of `draft_supplier_order`'s `urgency`.
pub(crate) const URGENCIES: [&str; 3] = ["routine", "urgent", "emergency"];

/// Terms `explain_inventory_term` has a definition for, with that definition.
pub(crate) const GLOSSARY: [(&str, &str); 15] = [
    (
        "reorder threshold",
        "the stock level at which a store should order more; at or below it an item counts as low on stock",
    ),
    (
        "quantity on hand",
        "the units a store physically has right now, on the shelves and in the back room",
    ),
    (
        "low stock",
        "an item whose quantity on hand is at or below its reorder threshold",
    ),
    (
        "stockout",
        "the moment an item's quantity on hand reaches zero, so customers cannot buy it",
    ),
    (
        "sku",
        "stock keeping unit: the code that identifies one product, such as MILK-001",
    ),
    (
        "unit of measure",
        "what one counted unit of a product is: a gallon, a loaf, a pound, a jar",
    ),
    (
        "inventory value",
        "quantity on hand times unit price, summed over the items of a store",
    ),
    (
        "value at risk",
        "the retail value of the stock needed to bring every low item back to twice its reorder threshold: sales a store may lose if those shelves empty",
    ),
    (
        "suggested order",
        "the units that bring an item back to twice its reorder threshold",
    ),
    (
        "safety stock",
        "extra stock kept on purpose to absorb late deliveries or a rush of demand",
    ),
    (
        "lead time",
        "the time between placing an order with a supplier and the goods arriving on the shelf",
    ),
    (
        "shrinkage",
        "stock lost without a sale: spoilage, damage, theft or counting mistakes",
    ),
    (
        "inventory turnover",
        "how many times a store sells through its average stock of an item in a period",
    ),
    (
        "fifo",
        "first in, first out: selling the oldest stock first, which matters for perishables",
    ),
    (
        "purchase order",
        "the document a store sends a supplier listing the products, quantities and prices it wants",
    ),
];

fn arg(name: &str, description: &str, required: bool) -> PromptArgument {
    PromptArgument::new(name)
        .with_description(description)
        .with_required(required)
}

/// The prompt list.
pub(crate) fn list() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "analyze_store_performance",
            Some(
                "Analyze a store's inventory health: coverage, low-stock hotspots, value at risk and suggested actions.",
            ),
            Some(vec![arg("storeId", "Id of the store to analyze.", true)]),
        ),
        Prompt::new(
            "draft_supplier_order",
            Some(
                "Draft a purchase order to a supplier from the current low-stock data, sized for the urgency.",
            ),
            Some(vec![
                arg("supplierId", "Id of the supplier to order from.", true),
                arg("urgency", "routine (default), urgent or emergency.", false),
            ]),
        ),
        Prompt::new(
            "explain_inventory_term",
            Some("Explain an inventory management term in plain language, with a live example."),
            Some(vec![arg(
                "term",
                "The term, e.g. reorder threshold, value at risk, SKU.",
                true,
            )]),
        ),
    ]
}

/// Reads a string argument; numbers are accepted and turned into text.
fn text_arg(args: Option<&JsonObject>, name: &str) -> Option<String> {
    match args?.get(name)? {
        serde_json::Value::String(s) => Some(s.trim().to_owned()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
    .filter(|s| !s.is_empty())
}

fn required(args: Option<&JsonObject>, prompt: &str, name: &str) -> Result<String, McpError> {
    text_arg(args, name).ok_or_else(|| {
        McpError::invalid_params(format!("prompt {prompt} needs the argument {name}"), None)
    })
}

fn id_arg(args: Option<&JsonObject>, prompt: &str, name: &str) -> Result<u32, McpError> {
    let text = required(args, prompt, name)?;
    text.parse::<u32>().map_err(|_| {
        McpError::invalid_params(
            format!(
                "argument {name} of prompt {prompt} must be a positive integer id, got {text:?}"
            ),
            None,
        )
    })
}

fn user(text: String) -> PromptMessage {
    PromptMessage::new_text(Role::User, text)
}

/// Builds one prompt.
pub(crate) fn get(
    service: &dyn InventoryService,
    name: &str,
    args: Option<&JsonObject>,
) -> Result<GetPromptResult, McpError> {
    let invalid = |e: crate::service::InventoryError| McpError::invalid_params(e.to_string(), None);
    match name {
        "analyze_store_performance" => {
            let store_id = id_arg(args, name, "storeId")?;
            let summary = views::store_summary(service, store_id).map_err(invalid)?;
            let healthy = summary.total_skus - summary.low_stock_count;
            let mut text = format!(
                "Analyze the inventory health of {} ({}, {}), store {}.\n\nLive data as of {}:\n\
                 - {} SKUs stocked, {} units on hand, inventory value ${:.2}\n\
                 - {} of {} SKUs above their reorder threshold; {} at or below it\n\
                 - value at risk (retail value of the suggested orders of low items): ${:.2}\n\nBy category:\n",
                summary.store.name,
                summary.store.city,
                summary.store.state,
                summary.store.id,
                summary.generated_at,
                summary.total_skus,
                summary.total_units,
                summary.inventory_value,
                healthy,
                summary.total_skus,
                summary.low_stock_count,
                summary.value_at_risk,
            );
            for c in &summary.categories {
                text.push_str(&format!(
                    "- {}: {} SKUs, {} units, ${:.2}\n",
                    c.name, c.skus, c.units, c.value
                ));
            }
            text.push_str("\nLow-stock items:\n");
            if summary.low_stock_items.is_empty() {
                text.push_str("- none\n");
            }
            for item in &summary.low_stock_items {
                text.push_str(&format!(
                    "- {} ({}): {} on hand, threshold {}, suggested order {} from {}\n",
                    item.product_name,
                    item.sku,
                    item.quantity_on_hand,
                    item.reorder_threshold,
                    item.suggested_order,
                    item.supplier_name
                ));
            }
            text.push_str(
                "\nCover: stock coverage, low-stock hotspots (by category and supplier), the value \
                 at risk, and three concrete actions for the store manager, most urgent first.",
            );
            Ok(
                GetPromptResult::new(vec![user(text)]).with_description(format!(
                    "Inventory health analysis of {}",
                    summary.store.name
                )),
            )
        }
        "draft_supplier_order" => {
            let supplier_id = id_arg(args, name, "supplierId")?;
            let urgency = text_arg(args, "urgency")
                .unwrap_or_else(|| "routine".into())
                .to_ascii_lowercase();
            let (factor, window) = match urgency.as_str() {
                "routine" => (1.0, "with the next scheduled delivery (3 to 5 days)"),
                "urgent" => (1.25, "within 48 hours"),
                "emergency" => (1.5, "same day or next morning, expedited"),
                other => {
                    return Err(McpError::invalid_params(
                        format!(
                            "urgency must be one of {}, got {other:?}",
                            URGENCIES.join(", ")
                        ),
                        None,
                    ));
                }
            };
            let supplier = service.supplier(supplier_id).map_err(invalid)?;
            let products = service
                .products(ProductFilter {
                    supplier_id: Some(supplier_id),
                    category_id: None,
                })
                .map_err(invalid)?;
            let lines: Vec<_> = views::low_stock(service, None)
                .map_err(invalid)?
                .into_iter()
                .filter(|row| row.supplier_id == supplier_id)
                .collect();
            let mut text = format!(
                "Draft a {urgency} purchase order to {} ({}, {}). Delivery needed {window}.\n\n",
                supplier.name, supplier.contact_email, supplier.phone
            );
            if lines.is_empty() {
                text.push_str(
                    "No product from this supplier is at or below its reorder threshold in any \
                     store right now. Write a short note to the supplier saying no order is needed \
                     this cycle, and list anything worth watching.\n",
                );
            } else {
                text.push_str("Order lines from live low-stock data (store, SKU, product, on hand / threshold, quantity, unit price, line total):\n");
                let mut total = 0.0;
                for row in &lines {
                    let quantity = (f64::from(row.suggested_order) * factor).ceil();
                    let price = products
                        .iter()
                        .find(|p| p.id == row.product_id)
                        .map_or(0.0, |p| p.unit_price);
                    total += quantity * price;
                    text.push_str(&format!(
                        "- {}, {}, {}, {} / {}, {quantity}, ${price:.2}, ${:.2}\n",
                        row.store_name,
                        row.sku,
                        row.product_name,
                        row.quantity_on_hand,
                        row.reorder_threshold,
                        quantity * price
                    ));
                }
                text.push_str(&format!(
                    "\nEstimated total at retail prices: ${total:.2}.\nWrite the order as an email \
                     to the supplier: greeting, a table of lines grouped by store, the delivery \
                     window, and a request to confirm quantities and delivery date."
                ));
            }
            Ok(GetPromptResult::new(vec![user(text)])
                .with_description(format!("{urgency} purchase order to {}", supplier.name)))
        }
        "explain_inventory_term" => {
            let term = required(args, name, "term")?;
            let key = term.to_ascii_lowercase();
            let definition = GLOSSARY.iter().find(|(t, _)| *t == key).map(|(_, d)| *d);
            let mut text = match definition {
                Some(d) => format!(
                    "Explain the inventory management term \"{term}\" in plain language to a new \
                     store employee. Working definition: {d}.\n"
                ),
                None => format!(
                    "Explain the inventory management term \"{term}\" in plain language to a new \
                     store employee.\n"
                ),
            };
            if let Some(example) = views::low_stock(service, None)
                .map_err(invalid)?
                .into_iter()
                .next()
            {
                text.push_str(&format!(
                    "Use this live example from our stores where it helps: {} has {} units of {} \
                     ({}) on hand against a reorder threshold of {}, so it is low on stock; the \
                     suggested order is {} units from {}.\n",
                    example.store_name,
                    example.quantity_on_hand,
                    example.product_name,
                    example.sku,
                    example.reorder_threshold,
                    example.suggested_order,
                    example.supplier_name
                ));
            }
            text.push_str("Keep it under 150 words and end with one practical tip.");
            Ok(GetPromptResult::new(vec![user(text)])
                .with_description(format!("Plain-language explanation of {term}")))
        }
        other => Err(McpError::invalid_params(
            format!(
                "no prompt named {other}; known prompts: analyze_store_performance, draft_supplier_order, explain_inventory_term"
            ),
            None,
        )),
    }
}
