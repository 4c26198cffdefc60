//! `hook-server`: a small `llm.gateway.v1.HooksService` for the end-to-end tests, run as its own process so the
//! gateway calls it over a real socket exactly as it would call a team's hook service.
//!
//! Behaviour is chosen by flags (`--header name=value`, `--temperature`, `--system-prefix`, `--delay-ms`, `--fail`).
//! Once it accepts connections it prints `listening on <addr>` on stdout, which is how the test learns the port.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use llm_proto::gateway as pb;
use llm_proto::gateway::hooks_service_server::{HooksService, HooksServiceServer};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// A HooksService whose answers are set by flags.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// A header to add (`name=value`); repeatable.
    #[arg(long = "header", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// Temperature to set.
    #[arg(long)]
    temperature: Option<f64>,
    /// A system section to put first.
    #[arg(long)]
    system_prefix: Option<String>,
    /// Wait this long before answering each call.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Answer every call with PERMISSION_DENIED.
    #[arg(long)]
    fail: bool,
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{s}` is not name=value"))
}

struct Hooks {
    args: Arc<Args>,
}

impl Hooks {
    /// The behaviour every call shares: the delay, then the failure if asked for.
    async fn before(&self, call: &str) -> Result<(), Status> {
        if self.args.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.args.delay_ms)).await;
        }
        if self.args.fail {
            return Err(Status::permission_denied(format!(
                "hook-server: {call} blocked by policy"
            )));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl HooksService for Hooks {
    async fn transform_system(
        &self,
        request: Request<pb::TransformSystemRequest>,
    ) -> Result<Response<pb::TransformSystemResponse>, Status> {
        self.before("system").await?;
        let system = match &self.args.system_prefix {
            Some(prefix) => std::iter::once(prefix.clone())
                .chain(request.into_inner().system)
                .collect(),
            // An empty answer means "unchanged".
            None => Vec::new(),
        };
        Ok(Response::new(pb::TransformSystemResponse { system }))
    }

    async fn transform_params(
        &self,
        request: Request<pb::TransformParamsRequest>,
    ) -> Result<Response<pb::TransformParamsResponse>, Status> {
        self.before("params").await?;
        let sampling = self.args.temperature.map(|t| pb::Sampling {
            temperature: Some(t),
            ..request.into_inner().sampling.unwrap_or_default()
        });
        Ok(Response::new(pb::TransformParamsResponse {
            sampling,
            provider_options_json: None,
        }))
    }

    async fn transform_headers(
        &self,
        _request: Request<pb::TransformHeadersRequest>,
    ) -> Result<Response<pb::TransformHeadersResponse>, Status> {
        self.before("headers").await?;
        Ok(Response::new(pb::TransformHeadersResponse {
            headers: self.args.headers.iter().cloned().collect(),
        }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Arc::new(Args::parse());
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let mut out = std::io::stdout();
    writeln!(out, "listening on {addr}")?;
    out.flush()?;
    tonic::transport::Server::builder()
        .add_service(HooksServiceServer::new(Hooks { args }))
        .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
        .await?;
    Ok(())
}
