//! OpenTelemetry traces, with the `otel` feature: when `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
//! the gateway's spans (chat turns, tool calls, proxied and upstream requests) are exported
//! over OTLP/HTTP (protobuf) in batches, and the supervisor passes each upstream request's
//! trace context to the app in `_meta`. The exporter reads the standard `OTEL_EXPORTER_OTLP_*`
//! variables itself; `OTEL_SERVICE_NAME` names the service (default `mcpapp-gateway`).
//!
//! Only the gateway's own spans at info level and above are exported: the per-connection
//! debug spans would otherwise tie every request of a keep-alive connection into one trace,
//! and the dependencies' spans are noise to an operator.

use tracing_subscriber::Layer;

/// Keeps the exporter alive; dropping it flushes and stops it.
#[derive(Debug)]
pub(crate) struct Traces {
    #[cfg(feature = "otel")]
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

#[cfg(feature = "otel")]
impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(err) = self.provider.shutdown() {
            eprintln!("mcpapp-gateway: could not flush the last traces: {err}");
        }
    }
}

/// The crates whose spans are exported.
#[cfg(feature = "otel")]
const TRACED: [&str; 8] = [
    "mcpapp_agent",
    "mcpapp_bridge",
    "mcpapp_discovery",
    "mcpapp_host",
    "mcpapp_manifest",
    "mcpapp_session",
    "mcpapp_supervisor",
    "mcpapp_gateway",
];

/// The layer that exports spans, when the feature is on and an endpoint is configured.
#[cfg(feature = "otel")]
pub(crate) fn layer<S>() -> (Option<Traces>, Option<Box<dyn Layer<S> + Send + Sync>>)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    use opentelemetry::trace::TracerProvider as _;
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default();
    if endpoint.trim().is_empty() {
        return (None, None);
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(err) => {
            // Logging is not installed yet; the gateway still runs, without traces.
            eprintln!("mcpapp-gateway: traces are off, the OTLP exporter cannot start: {err}");
            return (None, None);
        }
    };
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "mcpapp-gateway".to_owned());
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let tracer = provider.tracer("mcpapp-gateway");
    let targets = TRACED.iter().fold(
        tracing_subscriber::filter::Targets::new(),
        |targets, name| targets.with_target(*name, tracing::Level::INFO),
    );
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(targets)
        .boxed();
    (Some(Traces { provider }), Some(layer))
}

/// Without the feature there is nothing to export.
#[cfg(not(feature = "otel"))]
pub(crate) fn layer<S>() -> (Option<Traces>, Option<Box<dyn Layer<S> + Send + Sync>>)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    (None, None)
}
