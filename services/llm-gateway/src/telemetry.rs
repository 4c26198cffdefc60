//! Logging and tracing set-up: structured logs to stderr, plus an OTLP span exporter when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the standard `OTEL_*` variables configure it).

use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Keeps the exporter alive; dropping it flushes pending spans.
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            tracing::warn!(message = "flushing spans failed", error = %e);
        }
    }
}

/// Installs the global subscriber. `RUST_LOG` filters (default `info`); `LOG_FORMAT=json` switches to JSON lines.
pub fn init(
    service_name: &'static str,
) -> Result<Telemetry, Box<dyn std::error::Error + Send + Sync>> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v == "json");
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = vec![Box::new(filter)];
    layers.push(if json {
        Box::new(fmt.json())
    } else {
        Box::new(fmt)
    });

    let provider = if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(service_name)
            .build();
        Some(
            opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource)
                .build(),
        )
    } else {
        None
    };
    if let Some(p) = &provider {
        layers.push(Box::new(
            tracing_opentelemetry::layer().with_tracer(p.tracer(service_name)),
        ));
    }
    tracing_subscriber::registry().with(layers).try_init()?;
    Ok(Telemetry { provider })
}
