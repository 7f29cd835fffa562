//! `completion/complete` for prompt arguments and resource-template variables.
//!
//! Id arguments complete to ids (as strings): typed digits match ids that start with them;
//! other text matches records whose name (or a product's SKU) contains it, ignoring case. So
//! typing `2` for a product offers `2, 20, 21...` and typing `up` for a store offers `2`
//! (Uptown Grocery). Word arguments (`urgency`, `term`) complete by
//! case-insensitive prefix.

use rmcp::ErrorData as McpError;
use rmcp::model::{CompleteRequestParams, CompletionInfo, Reference};

use crate::prompts::{GLOSSARY, URGENCIES};
use crate::server::{PRODUCT_DETAILS_TEMPLATE, STORE_SUMMARY_TEMPLATE};
use crate::service::{InventoryService, ProductFilter};

fn matching_ids<'a>(typed: &str, records: impl Iterator<Item = (u32, &'a str)>) -> Vec<String> {
    let needle = typed.trim().to_lowercase();
    let numeric = needle.chars().all(|c| c.is_ascii_digit());
    records
        .filter(|(id, label)| {
            if numeric {
                id.to_string().starts_with(&needle)
            } else {
                label.to_lowercase().contains(&needle)
            }
        })
        .map(|(id, _)| id.to_string())
        .collect()
}

fn matching_words<'a>(typed: &str, words: impl Iterator<Item = &'a str>) -> Vec<String> {
    let needle = typed.trim().to_lowercase();
    words
        .filter(|w| w.to_lowercase().starts_with(&needle))
        .map(str::to_owned)
        .collect()
}

fn store_ids(service: &dyn InventoryService, typed: &str) -> Vec<String> {
    let stores = service.stores();
    matching_ids(typed, stores.iter().map(|s| (s.id, s.name.as_str())))
}

fn product_ids(service: &dyn InventoryService, typed: &str) -> Vec<String> {
    let products = service
        .products(ProductFilter::default())
        .unwrap_or_default();
    let labels: Vec<(u32, String)> = products
        .iter()
        .map(|p| (p.id, format!("{} {}", p.sku, p.name)))
        .collect();
    matching_ids(typed, labels.iter().map(|(id, l)| (*id, l.as_str())))
}

fn supplier_ids(service: &dyn InventoryService, typed: &str) -> Vec<String> {
    let suppliers = service.suppliers();
    matching_ids(typed, suppliers.iter().map(|s| (s.id, s.name.as_str())))
}

/// Completes one argument.
pub(crate) fn complete(
    service: &dyn InventoryService,
    request: &CompleteRequestParams,
) -> Result<CompletionInfo, McpError> {
    let typed = request.argument.value.as_str();
    let argument = request.argument.name.as_str();
    let values = match &request.r#ref {
        Reference::Prompt(prompt) => match (prompt.name.as_str(), argument) {
            ("analyze_store_performance", "storeId") => store_ids(service, typed),
            ("draft_supplier_order", "supplierId") => supplier_ids(service, typed),
            ("draft_supplier_order", "urgency") => matching_words(typed, URGENCIES.into_iter()),
            ("explain_inventory_term", "term") => {
                matching_words(typed, GLOSSARY.iter().map(|(t, _)| *t))
            }
            (
                "analyze_store_performance" | "draft_supplier_order" | "explain_inventory_term",
                _,
            ) => Vec::new(),
            (other, _) => {
                return Err(McpError::invalid_params(
                    format!("no prompt named {other}"),
                    None,
                ));
            }
        },
        Reference::Resource(template) => match (template.uri.as_str(), argument) {
            (STORE_SUMMARY_TEMPLATE, "storeId") => store_ids(service, typed),
            (PRODUCT_DETAILS_TEMPLATE, "productId") => product_ids(service, typed),
            (STORE_SUMMARY_TEMPLATE | PRODUCT_DETAILS_TEMPLATE, _) => Vec::new(),
            (other, _) => {
                return Err(McpError::invalid_params(
                    format!("no resource template {other}"),
                    None,
                ));
            }
        },
        other => {
            return Err(McpError::invalid_params(
                format!(
                    "unsupported completion reference {}",
                    other.reference_type()
                ),
                None,
            ));
        }
    };
    let total = u32::try_from(values.len()).unwrap_or(u32::MAX);
    let has_more = values.len() > CompletionInfo::MAX_VALUES;
    let shown: Vec<String> = values
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .collect();
    let mut info = CompletionInfo::new(shown)
        .map_err(|e| McpError::internal_error(format!("completion: {e}"), None))?;
    info.total = Some(total);
    info.has_more = Some(has_more);
    Ok(info)
}
