//! The `elicit` tool at 2026-07-28, where a server may not send requests: its form travels as
//! an input-required result (SEP-2322) and the answer comes back on the client's retry.
//!
//! The fixture stays stateless across rounds, as a 2026 server should: the `requestState` it
//! hands out is derived from the call's `message` alone, so any process (any HTTP request)
//! recognises it. It is not secret and not sealed; a test may forge it on purpose. A retry
//! whose state is missing or is not the one for its `message`, or that lacks the `form`
//! answer, is asked again (the specification's SHOULD) rather than failed; an answer under
//! `form` that is not an elicitation result is an invalid-params error.

use base64::Engine as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, MetaObject,
};
use serde_json::{Value, json};

/// The key of the form in `inputRequests` and `inputResponses`.
pub(crate) const FORM_KEY: &str = "form";
/// The `_meta` key of an input-required result that says why the form is asked (again).
pub(crate) const REASON_KEY: &str = "fixture/askedBecause";
const STATE_PREFIX: &str = "fixture-elicit/v1/";

/// The `requestState` of an `elicit` call with this `message`.
pub(crate) fn request_state(message: &str) -> String {
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(message);
    format!("{STATE_PREFIX}{encoded}")
}

/// What a round of `elicit` at 2026-07-28 comes to.
#[derive(Debug)]
pub(crate) enum Round {
    /// The retry carries the answer.
    Answered(ElicitResult),
    /// Ask for the form (again), saying why.
    Ask(&'static str),
}

/// Reads one round of an `elicit` call: the first attempt or a retry.
pub(crate) fn read_round(
    message: &str,
    state: Option<&str>,
    responses: Option<&InputResponses>,
) -> Result<Round, McpError> {
    let answer = responses.and_then(|r| r.get(FORM_KEY));
    let reason = match (state, answer) {
        (None, None) => "first round",
        (None, Some(_)) => "requestState missing",
        (Some(state), _) if state != request_state(message) => {
            "requestState does not match this call"
        }
        (Some(_), None) => "inputResponses has no form answer",
        (Some(_), Some(answer)) => {
            let result = serde_json::from_value::<ElicitResult>(answer.clone()).map_err(|e| {
                McpError::invalid_params(
                    format!("inputResponses.{FORM_KEY} is not an elicitation result: {e}"),
                    None,
                )
            })?;
            return Ok(Round::Answered(result));
        }
    };
    Ok(Round::Ask(reason))
}

/// The input-required result that asks for the form.
pub(crate) fn ask(message: &str, schema: ElicitationSchema, reason: &str) -> InputRequiredResult {
    let request = InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_owned(),
            requested_schema: schema,
        },
    ));
    let requests = InputRequests::from([(FORM_KEY.to_owned(), request)]);
    let meta = match json!({ REASON_KEY: reason }) {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::new(),
    };
    InputRequiredResult::new(Some(requests), Some(request_state(message))).with_meta(meta)
}

/// Whether per-request client capabilities allow a form elicitation: a declared
/// `elicitation` with `form`, or with neither mode (which means form, for compatibility).
pub(crate) fn allows_form(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.elicitation.as_ref())
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_follow_the_state_and_the_answer() {
        let state = request_state("Who?");
        let answer = InputResponses::from([(
            FORM_KEY.to_owned(),
            json!({"action": "accept", "content": {"name": "Ada"}}),
        )]);
        let other = InputResponses::from([("other".to_owned(), json!({}))]);
        assert!(matches!(
            read_round("Who?", None, None),
            Ok(Round::Ask("first round"))
        ));
        assert!(matches!(
            read_round("Who?", None, Some(&answer)),
            Ok(Round::Ask("requestState missing"))
        ));
        let wrong = request_state("What?");
        assert!(matches!(
            read_round("Who?", Some(&wrong), Some(&answer)),
            Ok(Round::Ask("requestState does not match this call"))
        ));
        assert!(matches!(
            read_round("Who?", Some(&state), Some(&other)),
            Ok(Round::Ask("inputResponses has no form answer"))
        ));
        let Ok(Round::Answered(result)) = read_round("Who?", Some(&state), Some(&answer)) else {
            panic!("the answer was not taken");
        };
        assert_eq!(result.content, Some(json!({"name": "Ada"})));
        let bad = InputResponses::from([(FORM_KEY.to_owned(), json!({"action": "shrug"}))]);
        let error = read_round("Who?", Some(&state), Some(&bad)).unwrap_err();
        assert!(
            error.message.contains("not an elicitation result"),
            "{error:?}"
        );
    }

    #[test]
    fn form_needs_a_declared_elicitation() {
        assert!(!allows_form(None));
        assert!(!allows_form(Some(&ClientCapabilities::default())));
        let any = ClientCapabilities::builder().enable_elicitation().build();
        assert!(allows_form(Some(&any)));
    }
}
