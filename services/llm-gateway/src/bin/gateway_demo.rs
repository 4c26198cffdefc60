//! `gateway-demo`: a small client that runs a tool-using conversation through llm-gateway and prints the unified
//! events live. It plays the part a session-processor plays in production: it executes the model's tool calls
//! (`get_time`, answered locally) and starts the next step with their results.
#![allow(clippy::print_stdout)]

use std::io::Write;

use clap::Parser;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use pb::stream_response::Event as E;
use service_kit::auth::BearerInterceptor;

/// Runs one prompt with a `get_time` tool through llm-gateway, step by step.
#[derive(Parser)]
struct Args {
    /// Gateway address.
    #[arg(long, default_value = "http://127.0.0.1:50051", env = "GATEWAY_ADDR")]
    addr: String,
    /// Bearer token for the gateway.
    #[arg(long, env = "GATEWAY_TOKEN")]
    token: String,
    /// Model id (`provider/model`).
    #[arg(long, default_value = "demo/scripted")]
    model: String,
    /// Most steps to run.
    #[arg(long, default_value_t = 4)]
    max_steps: u32,
    /// The prompt.
    #[arg(default_value = "What time is it in UTC?")]
    prompt: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let channel = tonic::transport::Endpoint::from_shared(args.addr.clone())?
        .connect()
        .await?;
    let bearer = BearerInterceptor::new(&args.token)?;
    let mut client = GatewayServiceClient::with_interceptor(channel, bearer);

    let mut messages = vec![pb::Message {
        role: pb::Role::User as i32,
        parts: vec![text_part(&args.prompt)],
    }];
    println!("> {}", args.prompt);
    let mut total_cost = 0i64;
    for step in 1..=args.max_steps {
        let generation = generation(&args, step, &messages);
        let (mut assistant, results, text, finish) =
            run_step(&mut client, generation, step).await?;
        let Some(f) = finish else {
            return Err("stream ended without step_finish".into());
        };
        let u = f.usage.unwrap_or_default();
        let cost = f.cost.unwrap_or_default().total_nano_usd;
        total_cost += cost;
        println!(
            "[step {step} finished: {:?}; tokens in {} (+{} cached) out {} reasoning {}; cost {} nano-USD]",
            pb::FinishReason::try_from(f.finish_reason).unwrap_or_default(),
            u.input_tokens,
            u.cache_read_tokens,
            u.output_tokens,
            u.reasoning_tokens,
            cost
        );
        if !text.is_empty() {
            assistant.parts.insert(0, text_part(&text));
        }
        messages.push(assistant);
        if results.is_empty() {
            break;
        }
        messages.push(pb::Message {
            role: pb::Role::Tool as i32,
            parts: results,
        });
    }
    println!("[done: total cost {total_cost} nano-USD]");
    Ok(())
}

/// Step `step`'s request: the conversation so far and the `get_time` tool.
fn generation(args: &Args, step: u32, messages: &[pb::Message]) -> pb::Generation {
    pb::Generation {
        model: args.model.clone(),
        system: vec!["You are a concise assistant. Use tools when they help.".into()],
        messages: messages.to_vec(),
        tools: vec![pb::Tool {
            name: "get_time".into(),
            description: "Current time in a timezone".into(),
            input_schema_json: r#"{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}"#.into(),
            ..Default::default()
        }],
        context: Some(pb::RequestContext { session_id: "demo".into(), request_id: format!("demo-{step}"), agent: "demo".into() }),
        ..Default::default()
    }
}

type Client = GatewayServiceClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, BearerInterceptor>,
>;

/// Streams one step, printing its events: the assistant's tool calls, the results of running them, its text and the
/// step's finish.
async fn run_step(
    client: &mut Client,
    generation: pb::Generation,
    step: u32,
) -> Result<(pb::Message, Vec<pb::Part>, String, Option<pb::StepFinish>), Box<dyn std::error::Error>>
{
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation),
        })
        .await?
        .into_inner();
    let mut assistant = pb::Message {
        role: pb::Role::Assistant as i32,
        parts: vec![],
    };
    let mut results = vec![];
    let mut text = String::new();
    let mut finish = None;
    while let Some(ev) = stream.message().await? {
        match ev.event {
            Some(E::StreamStart(s)) => println!(
                "[step {step}: {} via {}, attempt {}]",
                s.model, s.provider, s.attempt
            ),
            Some(E::TextDelta(d)) => {
                text.push_str(&d.delta);
                print!("{}", d.delta);
                std::io::stdout().flush()?;
            }
            Some(E::TextEnd(_)) => println!(),
            Some(E::ReasoningDelta(d)) => print!("\x1b[2m{}\x1b[0m", d.delta),
            Some(E::ToolCall(c)) => {
                println!(
                    "[tool call {} {}({})]",
                    c.call_id, c.tool_name, c.input_json
                );
                let output = run_tool(&c.tool_name, &c.input_json);
                println!("[tool result {output}]");
                results.push(pb::Part {
                    kind: Some(pb::part::Kind::ToolResult(pb::ToolResultPart {
                        call_id: c.call_id.clone(),
                        tool_name: c.tool_name.clone(),
                        output,
                        is_error: false,
                    })),
                });
                assistant.parts.push(pb::Part {
                    kind: Some(pb::part::Kind::ToolCall(pb::ToolCallPart {
                        call_id: c.call_id,
                        tool_name: c.tool_name,
                        input_json: c.input_json,
                        provider_metadata: c.provider_metadata,
                    })),
                });
            }
            Some(E::StepFinish(f)) => finish = Some(f),
            Some(E::Error(e)) => {
                println!(
                    "\n[error {:?}: {}]",
                    pb::ErrorKind::try_from(e.kind).unwrap_or_default(),
                    e.message
                );
                return Err("generation failed".into());
            }
            _ => {}
        }
    }
    Ok((assistant, results, text, finish))
}

fn text_part(text: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Text(pb::TextPart {
            text: text.to_string(),
        })),
    }
}

/// The demo's only tool: the current UTC time (other timezones are answered in UTC too, and say so).
fn run_tool(name: &str, input_json: &str) -> String {
    if name != "get_time" {
        return format!("unknown tool {name}");
    }
    let tz = serde_json::from_str::<serde_json::Value>(input_json)
        .ok()
        .and_then(|v| v.get("timezone").and_then(|t| t.as_str()).map(String::from))
        .unwrap_or_else(|| "UTC".into());
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    if tz.eq_ignore_ascii_case("utc") {
        format!("{h:02}:{m:02}:{s:02} UTC")
    } else {
        format!("{h:02}:{m:02}:{s:02} UTC (the demo tool only knows UTC, not {tz})")
    }
}
