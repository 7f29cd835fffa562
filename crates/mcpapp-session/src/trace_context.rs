//! W3C trace context for apps: the `traceparent` and `tracestate` of a request's span, put
//! into the request's `params._meta` under the keys MCP reserves for them (SEP-414), so an
//! app that traces can join the gateway's trace.
//!
//! With the `otel` feature the context comes from the span's OpenTelemetry context (set by a
//! `tracing-opentelemetry` layer, which the binary installs; without one there is none and
//! nothing is added). Without the feature every function here does nothing. A `traceparent`
//! the client already sent is left as it is: its trace is the one the app should join.

use rmcp::model::RequestMetaObject;

use crate::raw::{RawMessage, raw_string};

/// The `_meta` keys, as W3C Trace Context names its headers.
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// `traceparent` and `tracestate` (if any) of `span`, when it has a valid context.
#[cfg(feature = "otel")]
fn context_of(span: &tracing::Span) -> Option<(String, Option<String>)> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let context = span.context();
    let otel_span = context.span();
    let span_context = otel_span.span_context();
    if !span_context.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        span_context.trace_id(),
        span_context.span_id(),
        span_context.trace_flags().to_u8()
    );
    let state = span_context.trace_state().header();
    Some((traceparent, (!state.is_empty()).then_some(state)))
}

#[cfg(not(feature = "otel"))]
fn context_of(_span: &tracing::Span) -> Option<(String, Option<String>)> {
    None
}

/// Adds `span`'s context to a raw request's `params._meta`, unless it has a `traceparent`.
pub(crate) fn inject_raw(message: &mut RawMessage, span: &tracing::Span) {
    // The span's context first: without one (no exporter) the message is not even read.
    let Some((traceparent, state)) = context_of(span) else {
        return;
    };
    if message.path(&["params", "_meta", TRACEPARENT]).is_some() {
        return;
    }
    // A request whose params are not an object cannot carry `_meta`; it goes as it is.
    if message
        .set_path(&["params", "_meta", TRACEPARENT], &raw_string(&traceparent))
        .is_ok()
        && let Some(state) = state
    {
        let _ = message.set_path(&["params", "_meta", TRACESTATE], &raw_string(&state));
    }
}

/// Adds `span`'s W3C trace context to the `_meta` of a request the gateway's own rmcp client
/// is about to send, unless it has a `traceparent` already. Without the `otel` feature, or
/// without a context (no `tracing-opentelemetry` layer), it does nothing.
pub fn inject_trace_context(meta: &mut Option<RequestMetaObject>, span: &tracing::Span) {
    if meta.as_ref().is_some_and(|m| m.get_traceparent().is_some()) {
        return;
    }
    let Some((traceparent, state)) = context_of(span) else {
        return;
    };
    let meta = meta.get_or_insert_with(RequestMetaObject::default);
    meta.set_traceparent(traceparent);
    if let Some(state) = state {
        meta.set_tracestate(state);
    }
}
