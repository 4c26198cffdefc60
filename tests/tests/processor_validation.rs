//! Every edge of the sessions API typed and bounded: a table of malformed and oversized requests, each sent to the
//! real processor (real gRPC, real Redis, the real gateway for the model catalog), each answered with the expected
//! code and the field it names, none with `UNAVAILABLE` or `INTERNAL`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use e2e_tests::processor::{Product, SessionsClient, create_session, prompt};
use llm_proto::sessions as spb;
use tonic::{Code, Status};
use tonic_types::StatusExt;

type Answer = Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>;

/// One request and what it must get: the code, and the field its `BadRequest` names (`None`: no field, e.g.
/// `NOT_FOUND`, or a request refused before it is read).
struct Case {
    name: String,
    code: Code,
    field: Option<String>,
    call: Box<dyn FnOnce(SessionsClient) -> Answer>,
}

fn case<F, Fut>(name: impl Into<String>, code: Code, field: Option<&str>, call: F) -> Case
where
    F: FnOnce(SessionsClient) -> Fut + 'static,
    Fut: Future<Output = Result<(), Status>> + Send + 'static,
{
    Case {
        name: name.into(),
        code,
        field: field.map(String::from),
        call: Box::new(move |c| Box::pin(call(c))),
    }
}

const IA: Code = Code::InvalidArgument;
const RE: Code = Code::ResourceExhausted;

/// Ids that are malformed, too long, or contain braces.
fn bad_ids() -> Vec<(&'static str, String)> {
    vec![
        ("empty", String::new()),
        ("129 characters", "s".repeat(129)),
        ("an open brace", "ses_{x".into()),
        ("a close brace", "ses_}x".into()),
        ("a hash tag", "{ses_1}".into()),
        ("a space", "ses 1".into()),
        ("a slash", "ses/1".into()),
        ("a climb", "../ses".into()),
        ("a newline", "ses\n1".into()),
        ("non-ASCII", "séss".into()),
    ]
}

/// Every RPC that names a session, with that session id and otherwise valid fields.
fn session_rpcs(id: &str, code: Code, field: Option<&str>, what: &str) -> Vec<Case> {
    let name = |rpc: &str| format!("{rpc} with {what}");
    let [i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11] = std::array::from_fn(|_| id.to_string());
    vec![
        case(name("GetSession"), code, field, |mut c| async move {
            c.get_session(spb::GetSessionRequest { session_id: i1 })
                .await
                .map(drop)
        }),
        case(name("DeleteSession"), code, field, |mut c| async move {
            c.delete_session(spb::DeleteSessionRequest { session_id: i2 })
                .await
                .map(drop)
        }),
        case(name("Prompt"), code, field, |mut c| async move {
            c.prompt(prompt(&i3, "hello")).await.map(drop)
        }),
        case(name("Subscribe"), code, field, |mut c| async move {
            c.subscribe(spb::SubscribeRequest {
                session_id: i4,
                after_event_id: String::new(),
            })
            .await
            .map(drop)
        }),
        case(name("ListMessages"), code, field, |mut c| async move {
            c.list_messages(spb::ListMessagesRequest {
                session_id: i5,
                ..Default::default()
            })
            .await
            .map(drop)
        }),
        case(name("Abort"), code, field, |mut c| async move {
            c.abort(spb::AbortRequest { session_id: i6 })
                .await
                .map(drop)
        }),
        case(name("SubmitToolResult"), code, field, |mut c| async move {
            c.submit_tool_result(spb::SubmitToolResultRequest {
                session_id: i7,
                call_id: "call_1".into(),
                output: "x".into(),
                is_error: false,
            })
            .await
            .map(drop)
        }),
        case(name("ReplyPermission"), code, field, |mut c| async move {
            c.reply_permission(spb::ReplyPermissionRequest {
                session_id: i8,
                permission_id: "per_1".into(),
                allow: true,
            })
            .await
            .map(drop)
        }),
        case(name("Compact"), code, field, |mut c| async move {
            c.compact(spb::CompactRequest {
                session_id: i9,
                model: String::new(),
            })
            .await
            .map(drop)
        }),
        case(name("GetDiff"), code, field, |mut c| async move {
            c.get_diff(spb::GetDiffRequest {
                session_id: i10,
                ..Default::default()
            })
            .await
            .map(drop)
        }),
        case(name("Diagnose"), code, field, |mut c| async move {
            c.diagnose(spb::DiagnoseRequest { session_id: i11 })
                .await
                .map(drop)
        }),
    ]
}

fn create(what: &str, code: Code, field: &str, req: spb::CreateSessionRequest) -> Case {
    case(
        format!("CreateSession with {what}"),
        code,
        Some(field),
        |mut c| async move { c.create_session(req).await.map(drop) },
    )
}

fn metadata(entries: impl IntoIterator<Item = (String, String)>) -> spb::CreateSessionRequest {
    spb::CreateSessionRequest {
        metadata: entries.into_iter().collect::<HashMap<_, _>>(),
        ..Default::default()
    }
}

fn create_cases() -> Vec<Case> {
    let mut cases = vec![
        create(
            "a 5 MB metadata value",
            RE,
            "metadata",
            metadata([("k".into(), "v".repeat(5_000_000))]),
        ),
        create(
            "65 metadata entries",
            RE,
            "metadata",
            metadata((0..65).map(|i| (format!("k{i}"), String::new()))),
        ),
        create(
            "20 KiB of metadata",
            RE,
            "metadata",
            metadata((0..5).map(|i| (format!("k{i}"), "v".repeat(4096)))),
        ),
        create(
            "an empty metadata key",
            IA,
            "metadata",
            metadata([(String::new(), "v".into())]),
        ),
        create(
            "a 257-byte metadata key",
            RE,
            "metadata",
            metadata([("k".repeat(257), "v".into())]),
        ),
    ];
    for ws in [
        "../x",
        "a/b",
        "@tenants",
        "..",
        ".",
        &"w".repeat(129),
        "a b",
        "/abs",
    ] {
        cases.push(create(
            &format!("workspace {ws:?}"),
            IA,
            "workspace",
            spb::CreateSessionRequest {
                workspace: ws.to_string(),
                ..Default::default()
            },
        ));
    }
    for usd in [-1.0, f64::NAN, f64::INFINITY, 1e12] {
        cases.push(create(
            &format!("budget {usd}"),
            IA,
            "budget_usd",
            spb::CreateSessionRequest {
                budget_usd: usd,
                ..Default::default()
            },
        ));
    }
    let long_model = format!("openai/{}", "m".repeat(300));
    for model in [
        "gpt-4o",
        "/gpt-4o",
        "openai/",
        "openai/no-such-model",
        "open ai/x",
        &long_model,
    ] {
        cases.push(create(
            &format!("default_model {:.20?}", model),
            IA,
            "default_model",
            spb::CreateSessionRequest {
                default_model: model.to_string(),
                ..Default::default()
            },
        ));
    }
    for agent in ["nobody", &"a".repeat(129)] {
        cases.push(create(
            &format!("agent {:.20?}", agent),
            IA,
            "agent",
            spb::CreateSessionRequest {
                agent: agent.to_string(),
                ..Default::default()
            },
        ));
    }
    // Larger than the server reads at all: refused before decoding, so no field is named.
    cases.push(case(
        "CreateSession of 9 MiB",
        RE,
        None,
        |mut c| async move {
            c.create_session(metadata([("k".into(), "v".repeat(9 * 1024 * 1024))]))
                .await
                .map(drop)
        },
    ));
    cases
}

fn tool(name: &str, description: usize, schema: &str) -> spb::ClientTool {
    spb::ClientTool {
        name: name.into(),
        description: "d".repeat(description),
        input_schema_json: schema.into(),
    }
}

/// A valid object schema of about `n` bytes.
fn schema_of(n: usize) -> String {
    format!(r#"{{"type":"object","description":"{}"}}"#, "x".repeat(n))
}

fn prompt_case(
    what: &str,
    code: Code,
    field: &str,
    sid: &str,
    edit: impl FnOnce(&mut spb::PromptRequest),
) -> Case {
    let mut req = prompt(sid, "hello");
    edit(&mut req);
    case(
        format!("Prompt with {what}"),
        code,
        Some(field),
        |mut c| async move { c.prompt(req).await.map(drop) },
    )
}

fn file(
    media_type: &str,
    filename: &str,
    source: Option<spb::file_part::Source>,
) -> spb::PromptPart {
    spb::PromptPart {
        kind: Some(spb::prompt_part::Kind::File(spb::FilePart {
            media_type: media_type.into(),
            filename: filename.into(),
            source,
        })),
    }
}

fn prompt_cases(sid: &str) -> Vec<Case> {
    use spb::file_part::Source;
    let text = |t: String| spb::PromptPart {
        kind: Some(spb::prompt_part::Kind::Text(t)),
    };
    let mut cases = vec![
        prompt_case("no parts", IA, "parts", sid, |r| r.parts.clear()),
        prompt_case("only blank text", IA, "parts", sid, |r| {
            r.parts = vec![text("  \n".into())]
        }),
        prompt_case("an empty part", IA, "parts[0]", sid, |r| {
            r.parts = vec![spb::PromptPart { kind: None }]
        }),
        prompt_case("3 MiB and a byte of text", RE, "parts", sid, |r| {
            r.parts = vec![text("x".repeat(3 * 1024 * 1024 + 1))]
        }),
        prompt_case("65 parts", RE, "parts", sid, |r| {
            r.parts = vec![text("x".into()); 65]
        }),
        prompt_case(
            "a file without content",
            IA,
            "parts[0].file.source",
            sid,
            |r| r.parts = vec![file("text/plain", "a.txt", None)],
        ),
        prompt_case(
            "a file without a media type",
            IA,
            "parts[0].file.media_type",
            sid,
            |r| r.parts = vec![file("", "a.txt", Some(Source::Data(b"x".to_vec())))],
        ),
        prompt_case("a file at an http URL", IA, "parts[0].file.url", sid, |r| {
            r.parts = vec![file(
                "image/png",
                "a.png",
                Some(Source::Url("http://x/a.png".into())),
            )]
        }),
        prompt_case(
            "a 256-byte file name",
            IA,
            "parts[0].file.filename",
            sid,
            |r| {
                r.parts = vec![file(
                    "text/plain",
                    &"f".repeat(256),
                    Some(Source::Data(b"x".to_vec())),
                )]
            },
        ),
        prompt_case("3 MiB of file data", RE, "parts", sid, |r| {
            r.parts.push(file(
                "application/octet-stream",
                "b",
                Some(Source::Data(vec![0; 3 * 1024 * 1024])),
            ))
        }),
        prompt_case("model `nope`", IA, "model", sid, |r| {
            r.model = "nope".into()
        }),
        prompt_case("an unknown agent", IA, "agent", sid, |r| {
            r.agent = "nobody".into()
        }),
        prompt_case("64 KiB and a byte of system", RE, "system", sid, |r| {
            r.system = "s".repeat(64 * 1024 + 1)
        }),
        prompt_case(
            "a 257-byte idempotency key",
            IA,
            "idempotency_key",
            sid,
            |r| r.idempotency_key = "k".repeat(257),
        ),
        prompt_case("65 client tools", RE, "client_tools", sid, |r| {
            r.client_tools = (0..65).map(|i| tool(&format!("t{i}"), 0, "{}")).collect()
        }),
        prompt_case("300 KiB of client tools", RE, "client_tools", sid, |r| {
            r.client_tools = (0..5)
                .map(|i| tool(&format!("t{i}"), 0, &schema_of(60_000)))
                .collect()
        }),
        prompt_case(
            "a duplicate client tool",
            IA,
            "client_tools[1].name",
            sid,
            |r| r.client_tools = vec![tool("t", 0, "{}"), tool("t", 0, "{}")],
        ),
        prompt_case(
            "a 5 KiB tool description",
            RE,
            "client_tools[0].description",
            sid,
            |r| r.client_tools = vec![tool("t", 5 * 1024, "{}")],
        ),
        prompt_case(
            "a 70 KB tool schema",
            RE,
            "client_tools[0].input_schema_json",
            sid,
            |r| r.client_tools = vec![tool("t", 0, &schema_of(70_000))],
        ),
        prompt_case(
            "a tool schema that is not an object",
            IA,
            "client_tools[0].input_schema_json",
            sid,
            |r| r.client_tools = vec![tool("t", 0, "[]")],
        ),
        prompt_case("a bad format schema", IA, "format", sid, |r| {
            r.format = Some(spb::OutputFormat {
                r#type: spb::output_format::Type::JsonSchema as i32,
                schema_json: "{\"type\":\"string\"}".into(),
                retry_count: None,
            })
        }),
        prompt_case(
            "a 70 KB format schema",
            RE,
            "format.schema_json",
            sid,
            |r| {
                r.format = Some(spb::OutputFormat {
                    r#type: spb::output_format::Type::JsonSchema as i32,
                    schema_json: schema_of(70_000),
                    retry_count: None,
                })
            },
        ),
        prompt_case(
            "an unknown reasoning effort",
            IA,
            "reasoning.effort",
            sid,
            |r| {
                r.reasoning = Some(spb::Reasoning {
                    effort: 99,
                    budget_tokens: 0,
                })
            },
        ),
        prompt_case(
            "a reasoning budget of 10",
            IA,
            "reasoning.budget_tokens",
            sid,
            |r| {
                r.reasoning = Some(spb::Reasoning {
                    effort: 0,
                    budget_tokens: 10,
                })
            },
        ),
        prompt_case(
            "a client tool named structured_output",
            IA,
            "client_tools[0].name",
            sid,
            |r| {
                r.format = Some(spb::OutputFormat {
                    r#type: spb::output_format::Type::JsonSchema as i32,
                    schema_json: "{\"type\":\"object\"}".into(),
                    retry_count: None,
                });
                r.client_tools = vec![tool("structured_output", 0, "{}")];
            },
        ),
    ];
    for name in [
        "read",
        "write",
        "edit",
        "list",
        "grep",
        "bash",
        "",
        "has space",
        &"n".repeat(65),
    ] {
        cases.push(prompt_case(
            &format!("client tool {:.12?}", name),
            IA,
            "client_tools[0].name",
            sid,
            |r| r.client_tools = vec![tool(name, 0, "{}")],
        ));
    }
    cases
}

fn other_cases(sid: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for token in ["garbage", "1:", "x:ses_1", "1:{a}", ":", "1:ses 1"] {
        cases.push(case(
            format!("ListSessions page_token {token:?}"),
            IA,
            Some("page_token"),
            move |mut c| async move {
                c.list_sessions(spb::ListSessionsRequest {
                    page_size: 0,
                    page_token: token.into(),
                })
                .await
                .map(drop)
            },
        ));
    }
    cases.push(case(
        "ListSessions page_size -1",
        IA,
        Some("page_size"),
        |mut c| async move {
            c.list_sessions(spb::ListSessionsRequest {
                page_size: -1,
                page_token: String::new(),
            })
            .await
            .map(drop)
        },
    ));
    for (token, size) in [("(", 0), ("a:b:c", 0), ("msg_1:", 0), ("{m}", 0), ("", -5)] {
        let sid = sid.to_string();
        let field = if size < 0 { "page_size" } else { "page_token" };
        cases.push(case(
            format!("ListMessages {token:?} {size}"),
            IA,
            Some(field),
            move |mut c| async move {
                c.list_messages(spb::ListMessagesRequest {
                    session_id: sid,
                    page_size: size,
                    page_token: token.into(),
                })
                .await
                .map(drop)
            },
        ));
    }
    for after in ["nope", "1-x", "-1", "{1}"] {
        let sid = sid.to_string();
        cases.push(case(
            format!("Subscribe after {after:?}"),
            IA,
            Some("after_event_id"),
            move |mut c| async move {
                c.subscribe(spb::SubscribeRequest {
                    session_id: sid,
                    after_event_id: after.into(),
                })
                .await
                .map(drop)
            },
        ));
    }
    let long = "c".repeat(257);
    for (what, call_id, output, code, field) in [
        ("no call id", "", 1, IA, "call_id"),
        ("a call id with braces", "{x}", 1, IA, "call_id"),
        ("a 257-character call id", long.as_str(), 1, IA, "call_id"),
        (
            "1 MiB and a byte of output",
            "call_1",
            1024 * 1024 + 1,
            RE,
            "output",
        ),
    ] {
        let sid = sid.to_string();
        let call_id = call_id.to_string();
        cases.push(case(
            format!("SubmitToolResult with {what}"),
            code,
            Some(field),
            move |mut c| async move {
                c.submit_tool_result(spb::SubmitToolResultRequest {
                    session_id: sid,
                    call_id,
                    output: "o".repeat(output),
                    is_error: false,
                })
                .await
                .map(drop)
            },
        ));
    }
    for pid in ["", "a b", "{p}"] {
        let sid = sid.to_string();
        cases.push(case(
            format!("ReplyPermission {pid:?}"),
            IA,
            Some("permission_id"),
            move |mut c| async move {
                c.reply_permission(spb::ReplyPermissionRequest {
                    session_id: sid,
                    permission_id: pid.into(),
                    allow: false,
                })
                .await
                .map(drop)
            },
        ));
    }
    let s = sid.to_string();
    cases.push(case(
        "Compact with model `x`",
        IA,
        Some("model"),
        move |mut c| async move {
            c.compact(spb::CompactRequest {
                session_id: s,
                model: "x".into(),
            })
            .await
            .map(drop)
        },
    ));
    for (what, message_id, step, field) in [
        ("a step without a message", "", 2, "step"),
        ("a message id with braces", "{m}", 0, "message_id"),
        ("a message id with a space", "msg 1", 1, "message_id"),
    ] {
        let sid = sid.to_string();
        cases.push(case(
            format!("GetDiff with {what}"),
            IA,
            Some(field),
            move |mut c| async move {
                c.get_diff(spb::GetDiffRequest {
                    session_id: sid,
                    message_id: message_id.into(),
                    step,
                    include_patch: false,
                })
                .await
                .map(drop)
            },
        ));
    }
    for tenant in ["../x", "a b", "{t}"] {
        cases.push(case(
            format!("GetSpend of {tenant:?}"),
            IA,
            Some("tenant"),
            move |mut c| async move {
                c.get_spend(spb::GetSpendRequest {
                    tenant: tenant.into(),
                })
                .await
                .map(drop)
            },
        ));
    }
    cases
}

/// What is wrong with `answer`, given the code and field expected, if anything.
fn check(code: Code, field: Option<&str>, answer: Result<(), Status>) -> Option<String> {
    let status = match answer {
        Ok(()) => return Some("succeeded".into()),
        Err(s) => s,
    };
    if matches!(status.code(), Code::Unavailable | Code::Internal) {
        return Some(format!(
            "{:?} is never the answer to a caller's mistake: {status:?}",
            status.code()
        ));
    }
    if status.code() != code {
        return Some(format!("expected {code:?}, got {status:?}"));
    }
    let details = status.get_error_details();
    let named = details
        .bad_request()
        .and_then(|b| b.field_violations.first())
        .map(|v| v.field.clone());
    if named.as_deref() != field {
        return Some(format!(
            "expected field {field:?}, got {named:?} ({})",
            status.message()
        ));
    }
    if let Some(field) = field
        && !status.message().starts_with(&format!("{field}:"))
    {
        return Some(format!(
            "the message does not name {field}: {}",
            status.message()
        ));
    }
    let from_handler = field.is_some() || code == Code::NotFound;
    if from_handler
        && details
            .error_info()
            .is_none_or(|i| i.domain != "session-processor" || i.reason.is_empty())
    {
        return Some(format!("no ErrorInfo with a reason: {status:?}"));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_requests_get_the_right_code_and_field() {
    let p = Product::start("").await;
    let sid = create_session(&mut p.client().await, spb::CreateSessionRequest::default())
        .await
        .id;
    let mut cases = Vec::new();
    for (what, id) in bad_ids() {
        cases.extend(session_rpcs(
            &id,
            IA,
            Some("session_id"),
            &format!("a session id with {what}"),
        ));
    }
    cases.extend(session_rpcs(
        "ses_0000000000000000deadbeef",
        Code::NotFound,
        None,
        "a missing session",
    ));
    cases.extend(create_cases());
    cases.extend(prompt_cases(&sid));
    cases.extend(other_cases(&sid));
    assert!(cases.len() >= 100, "{} cases", cases.len());
    let total = cases.len();
    let mut failures = Vec::new();
    for Case {
        name,
        code,
        field,
        call,
    } in cases
    {
        let answer = call(p.client().await).await;
        if let Some(why) = check(code, field.as_deref(), answer) {
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Nothing of it reached the model, and the session is as it was.
    assert_eq!(p.gateway.openai.requests().len(), 0);
    let messages = e2e_tests::processor::messages(&mut p.client().await, &sid).await;
    assert!(messages.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_that_are_not_the_request_message_are_the_callers_mistake() {
    let p = Product::start("").await;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/llm.sessions.v1.SessionService/GetSession",
    );
    // Field 1 (`session_id`) holding bytes that are not UTF-8, then a field cut short.
    for body in [vec![0x0a, 0x02, 0xff, 0xfe], vec![0x0a, 0x10, b'x']] {
        let mut grpc = tonic::client::Grpc::new(e2e_tests::processor::channel(p.addr).await);
        grpc.ready().await.unwrap();
        let mut request = tonic::Request::new(body.clone());
        let auth = format!("Bearer {}", e2e_tests::processor::PROCESSOR_TOKEN);
        request
            .metadata_mut()
            .insert("authorization", auth.parse().unwrap());
        let e = grpc
            .unary(request, path.clone(), e2e_tests::raw::RawCodec)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{body:?}: {e:?}");
    }
}
