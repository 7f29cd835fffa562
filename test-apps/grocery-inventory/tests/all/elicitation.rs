//! The elicitation wizards with a client that accepts, one that declines and one that cannot
//! elicit, over stdio and HTTP.

use serde_json::json;

use mcpapp_testkit::{Elicit, Event, Over, assert_tool_error, over_both_transports, structured};

use crate::support::connect;

over_both_transports!(
    restock_wizard_round_trips,
    large_adjustments_need_confirmation,
    new_product_wizard_asks_for_missing_fields,
);

async fn quantity(c: &crate::support::Connection, store: u32, product: u32) -> u64 {
    let row = c
        .call(
            "get_inventory",
            json!({"storeId": store, "productId": product}),
        )
        .await;
    structured(&row)["items"][0]["quantityOnHand"]
        .as_u64()
        .unwrap()
}

async fn restock_wizard_round_trips(kind: Over) {
    // Accepting client: the question names the product and the suggestion.
    let mut accepting = connect(kind, Elicit::Accept(json!({"quantity": 12})), &[]).await;
    let result = accepting
        .call("restock_wizard", json!({"storeId": 1, "productId": 1}))
        .await;
    let Event::ElicitationAsked {
        message: question, ..
    } = accepting.next_event().await
    else {
        panic!("expected an elicitation first");
    };
    assert!(question.contains("Organic Milk (MILK-001)"), "{question}");
    assert!(question.contains("suggested delivery: 32"), "{question}");
    let outcome = structured(&result).clone();
    assert_eq!(outcome["status"], "applied");
    assert_eq!(outcome["adjustment"]["previousQuantity"], 8);
    assert_eq!(outcome["adjustment"]["quantityOnHand"], 20);
    assert_eq!(quantity(&accepting, 1, 1).await, 20);
    accepting
        .expect_updates(&[
            "inventory://stores/1/summary",
            "inventory://products/1/details",
        ])
        .await;

    // Declining client: nothing changes, and it is not an error.
    let mut declining = connect(kind, Elicit::Decline, &[]).await;
    let result = declining
        .call("restock_wizard", json!({"storeId": 2, "productId": 2}))
        .await;
    assert!(matches!(
        declining.next_event().await,
        Event::ElicitationAsked { .. }
    ));
    assert_eq!(structured(&result)["status"], "declined");
    assert_eq!(quantity(&declining, 2, 2).await, 6);

    // A client without elicitation gets a tool error explaining the way out, unless the
    // quantity is given up front.
    let unable = connect(kind, Elicit::Unsupported, &[]).await;
    assert_tool_error(
        &unable
            .call("restock_wizard", json!({"storeId": 2, "productId": 2}))
            .await,
        &["cannot ask the user", "quantity (suggested: 24)"],
    );
    let direct = unable
        .call(
            "restock_wizard",
            json!({"storeId": 2, "productId": 2, "quantity": 5}),
        )
        .await;
    assert_eq!(structured(&direct)["adjustment"]["quantityOnHand"], 11);
    assert_tool_error(
        &unable
            .call("restock_wizard", json!({"storeId": 2, "productId": 99}))
            .await,
        &["product 99 does not exist"],
    );
}

async fn large_adjustments_need_confirmation(kind: Over) {
    let mut accepting = connect(kind, Elicit::Accept(json!({"confirm": true})), &[]).await;
    // Small: applied without a question.
    let small = accepting
        .call(
            "adjust_stock_with_confirmation",
            json!({"storeId": 3, "productId": 10, "delta": -3}),
        )
        .await;
    assert_eq!(structured(&small)["status"], "applied");
    let before = quantity(&accepting, 3, 10).await;
    // Large: asked, then applied.
    let large = accepting
        .call(
            "adjust_stock_with_confirmation",
            json!({"storeId": 3, "productId": 10, "delta": 60}),
        )
        .await;
    let mut asked = None;
    while asked.is_none() {
        if let Event::ElicitationAsked {
            message: question, ..
        } = accepting.next_event().await
        {
            asked = Some(question);
        }
    }
    assert!(asked.unwrap().contains("by +60 units"));
    assert_eq!(structured(&large)["status"], "applied");
    assert_eq!(quantity(&accepting, 3, 10).await, before + 60);

    let declining = connect(kind, Elicit::Decline, &[]).await;
    let before = quantity(&declining, 3, 10).await;
    let declined = declining
        .call(
            "adjust_stock_with_confirmation",
            json!({"storeId": 3, "productId": 10, "delta": -50}),
        )
        .await;
    assert_eq!(structured(&declined)["status"], "declined");
    assert_eq!(quantity(&declining, 3, 10).await, before);

    let refusing = connect(kind, Elicit::Accept(json!({"confirm": false})), &[]).await;
    let refused = refusing
        .call(
            "adjust_stock_with_confirmation",
            json!({"storeId": 3, "productId": 10, "delta": 50}),
        )
        .await;
    assert_eq!(structured(&refused)["status"], "declined");

    let unable = connect(kind, Elicit::Unsupported, &[]).await;
    for (args, needle) in [
        (
            json!({"storeId": 3, "productId": 10, "delta": 0}),
            "non-zero",
        ),
        (
            json!({"storeId": 9, "productId": 10, "delta": 1}),
            "store 9 does not exist",
        ),
        (
            json!({"storeId": 3, "productId": 10}),
            "missing field `delta`",
        ),
    ] {
        assert_tool_error(
            &unable.call("adjust_stock_with_confirmation", args).await,
            &[needle],
        );
    }
    assert_tool_error(
        &unable
            .call(
                "adjust_stock_with_confirmation",
                json!({"storeId": 3, "productId": 10, "delta": 500}),
            )
            .await,
        &["need the user's confirmation", "nothing changed"],
    );
}

async fn new_product_wizard_asks_for_missing_fields(kind: Over) {
    let form = json!({"sku": "tea-030", "name": "Green Tea", "unitPrice": 4.5,
                      "unitOfMeasure": "box", "categoryId": 5, "supplierId": 5});
    let mut accepting = connect(kind, Elicit::Accept(form), &[]).await;
    // The caller's arguments win over the form's answers.
    let created = accepting
        .call("new_product_wizard", json!({"name": "Jasmine Green Tea"}))
        .await;
    let Event::ElicitationAsked {
        message: question, ..
    } = accepting.next_event().await
    else {
        panic!("expected a question");
    };
    assert!(question.contains("sku, unitPrice, unitOfMeasure, categoryId, supplierId"));
    let product = structured(&created)["product"].clone();
    assert_eq!(
        product,
        json!({"id": 25, "sku": "TEA-030", "name": "Jasmine Green Tea", "unitPrice": 4.5,
               "unitOfMeasure": "box", "categoryId": 5, "supplierId": 5})
    );
    let listed = accepting.call("get_products", json!({"id": 25})).await;
    assert_eq!(structured(&listed)["products"][0]["sku"], "TEA-030");
    // The same SKU again is refused with the reason.
    assert_tool_error(
        &accepting.call("new_product_wizard", json!({})).await,
        &["TEA-030 is already used by product 25"],
    );

    let declining = connect(kind, Elicit::Decline, &[]).await;
    let declined = declining.call("new_product_wizard", json!({})).await;
    assert_eq!(structured(&declined)["status"], "declined");
    let products = declining.call("get_products", json!({})).await;
    assert_eq!(
        structured(&products)["products"].as_array().unwrap().len(),
        24
    );

    let bad_answer = connect(
        kind,
        Elicit::Accept(json!({"sku": "X-1", "name": "Odd", "unitPrice": -2.0,
                               "unitOfMeasure": "each", "categoryId": 1, "supplierId": 1})),
        &[],
    )
    .await;
    assert_tool_error(
        &bad_answer.call("new_product_wizard", json!({})).await,
        &["invalid unitPrice"],
    );

    let unable = connect(kind, Elicit::Unsupported, &[]).await;
    assert_tool_error(
        &unable
            .call("new_product_wizard", json!({"sku": "A-1"}))
            .await,
        &["cannot show the product form", "missing: name, unitPrice"],
    );
}
