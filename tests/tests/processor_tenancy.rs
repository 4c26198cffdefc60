//! Tenants isolated end to end, through both services, the fake provider and real Redis: another tenant gets
//! `NOT_FOUND` for every RPC on a tenant's session (exactly the status of a missing one), nothing of the first
//! tenant's changes, workspaces are per tenant, agents per tenant, and an operator can act on any tenant, logged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{
    OPERATOR_TOKEN, PROCESSOR_TOKEN, ProcessorSetup, Product, SessionsClient, channel,
    create_session, prompt,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;
use tonic::Code;

const ACME: &str = "acme-tenant-token-0123456789";
const EVIL: &str = "evil-tenant-token-0123456789";
const TENANTS: &str = r#"
[agents.coder]
role_prompt = "You write code."
model = "openai/gpt-4o"
client_tool_timeout_ms = 60000
[tenants.acme]
tokens = ["acme-tenant-token-0123456789"]
agents = ["default", "coder"]
[tenants.evil]
tokens = ["evil-tenant-token-0123456789"]
agents = ["default"]
"#;

/// A well-formed id no session has.
const MISSING: &str = "ses_0000000000000000deadbeef";

fn lookup_tool() -> spb::ClientTool {
    spb::ClientTool {
        name: "lookup".into(),
        description: "Looks a thing up".into(),
        input_schema_json: r#"{"type":"object","properties":{"q":{"type":"string"}}}"#.into(),
    }
}

/// Every RPC that names a session, against `id`, as `c`: the status each returns (`None` when it succeeded).
async fn every_session_rpc(
    c: &mut SessionsClient,
    id: &str,
) -> Vec<(&'static str, Option<tonic::Status>)> {
    let sid = || id.to_string();
    let mut prompt_req = prompt(id, "pay for my tokens");
    prompt_req.client_tools.push(lookup_tool());
    vec![
        (
            "GetSession",
            c.get_session(spb::GetSessionRequest { session_id: sid() })
                .await
                .err(),
        ),
        (
            "ListMessages",
            c.list_messages(spb::ListMessagesRequest {
                session_id: sid(),
                ..Default::default()
            })
            .await
            .err(),
        ),
        ("Prompt", c.prompt(prompt_req).await.err()),
        (
            "Subscribe",
            c.subscribe(spb::SubscribeRequest {
                session_id: sid(),
                after_event_id: String::new(),
            })
            .await
            .err(),
        ),
        (
            "SubmitToolResult",
            c.submit_tool_result(spb::SubmitToolResultRequest {
                session_id: sid(),
                call_id: "call_acme_1".into(),
                output: "evil's answer".into(),
                is_error: false,
            })
            .await
            .err(),
        ),
        (
            "ReplyPermission",
            c.reply_permission(spb::ReplyPermissionRequest {
                session_id: sid(),
                permission_id: "per_1".into(),
                allow: true,
            })
            .await
            .err(),
        ),
        (
            "Compact",
            c.compact(spb::CompactRequest {
                session_id: sid(),
                model: String::new(),
            })
            .await
            .err(),
        ),
        (
            "GetDiff",
            c.get_diff(spb::GetDiffRequest {
                session_id: sid(),
                ..Default::default()
            })
            .await
            .err(),
        ),
        (
            "Diagnose",
            c.diagnose(spb::DiagnoseRequest { session_id: sid() })
                .await
                .err(),
        ),
        (
            "Abort",
            c.abort(spb::AbortRequest { session_id: sid() }).await.err(),
        ),
        (
            "DeleteSession",
            c.delete_session(spb::DeleteSessionRequest { session_id: sid() })
                .await
                .err(),
        ),
    ]
}

fn same_status(a: &tonic::Status, b: &tonic::Status) -> bool {
    a.code() == b.code() && a.message() == b.message() && a.details() == b.details()
}

/// Reads the prompt stream up to the client tool call it waits for.
async fn until_awaiting(
    stream: &mut tonic::Streaming<spb::PromptResponse>,
) -> spb::ToolCallAwaiting {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.message())
            .await
            .expect("an event within 20 s")
            .expect("stream")
            .expect("not ended");
        if let Some(SE::ToolCallAwaiting(a)) = ev.event.and_then(|e| e.event) {
            return a;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_gets_not_found_for_every_rpc_and_changes_nothing() {
    let logs = e2e_tests::logs::capture();
    let p = Product::start(TENANTS).await;
    let mut acme = p.client_with_token(ACME).await;
    let mut evil = p.client_with_token(EVIL).await;
    let session = create_session(
        &mut acme,
        spb::CreateSessionRequest {
            agent: "coder".into(),
            workspace: "proj".into(),
            metadata: [("owner".to_string(), "acme".to_string())].into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(session.tenant, "acme");
    let acme_ws = p.workspace("acme", "proj");
    std::fs::write(acme_ws.join("secret.txt"), "acme's secret").unwrap();

    // acme's loop waits for its client tool call while evil tries everything.
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "c1")
            .tool_call("call_acme_1", "lookup", &["{\"q\":\"x\"}"])
            .finish("tool_calls", Some((1000, 10))),
    ));
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "c2")
            .text(&["Found it."])
            .finish("stop", Some((1200, 5))),
    ));
    let mut req = prompt(&session.id, "look it up");
    req.client_tools.push(lookup_tool());
    let mut stream = acme.prompt(req).await.unwrap().into_inner();
    let awaiting = until_awaiting(&mut stream).await;
    assert_eq!(awaiting.call_id, "call_acme_1");

    let missing = every_session_rpc(&mut evil, MISSING).await;
    let foreign = every_session_rpc(&mut evil, &session.id).await;
    let unnamed = every_session_rpc(&mut p.client().await, &session.id).await;
    for (rpc, status) in missing.iter().chain(&foreign).chain(&unnamed) {
        let s = status.as_ref().unwrap_or_else(|| panic!("{rpc} succeeded"));
        assert_eq!(s.code(), Code::NotFound, "{rpc}: {s:?}");
    }
    for ((rpc, m), (_, f)) in missing.iter().zip(&foreign) {
        assert!(
            same_status(m.as_ref().unwrap(), f.as_ref().unwrap()),
            "{rpc}: another tenant's session must look exactly like a missing one"
        );
    }
    let spend = evil
        .get_spend(spb::GetSpendRequest {
            tenant: "acme".into(),
        })
        .await
        .unwrap_err();
    let nobody = evil
        .get_spend(spb::GetSpendRequest {
            tenant: "nobody".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(spend.code(), Code::NotFound);
    assert!(
        same_status(&spend, &nobody),
        "another tenant's spend looks unknown"
    );
    let listed = evil
        .list_sessions(spb::ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.sessions.is_empty(), "{listed:?}");

    // The same workspace name is another folder for evil, and it does not see acme's files.
    let evil_session = create_session(
        &mut evil,
        spb::CreateSessionRequest {
            workspace: "proj".into(),
            ..Default::default()
        },
    )
    .await;
    let evil_ws = p.workspace("evil", "proj");
    assert!(evil_ws.is_dir());
    assert_ne!(evil_ws, acme_ws);
    assert!(!evil_ws.join("secret.txt").exists());
    let evil_listed = evil
        .list_sessions(spb::ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = evil_listed.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [evil_session.id.as_str()]);

    // acme's pending call still takes acme's answer, and the loop finishes with it.
    acme.submit_tool_result(spb::SubmitToolResultRequest {
        session_id: session.id.clone(),
        call_id: awaiting.call_id.clone(),
        output: "acme's answer".into(),
        is_error: false,
    })
    .await
    .unwrap();
    e2e_tests::processor::until_done(&mut stream, |r| r.event).await;
    let messages = e2e_tests::processor::messages(&mut acme, &session.id).await;
    let outputs: Vec<String> = messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|part| match &part.kind {
            Some(spb::part::Kind::Tool(t)) => t.state.as_ref().map(|s| s.output.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, ["acme's answer"]);
    let users: Vec<String> = messages
        .iter()
        .filter(|m| m.role() == spb::Role::User)
        .flat_map(|m| &m.parts)
        .filter_map(|part| match &part.kind {
            Some(spb::part::Kind::Text(t)) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        users,
        ["look it up"],
        "evil's prompt added nothing: {messages:#?}"
    );
    let after = e2e_tests::processor::get_session(&mut acme, &session.id).await;
    assert_eq!(after.metadata["owner"], "acme");
    assert!(after.cost_nano_usd > 0);
    let acme_spend = acme
        .get_spend(spb::GetSpendRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        acme_spend.spend_nano_usd, after.cost_nano_usd,
        "acme paid for its own steps only"
    );
    let evil_spend = evil
        .get_spend(spb::GetSpendRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(evil_spend.spend_nano_usd, 0);
    assert_eq!(
        std::fs::read_to_string(acme_ws.join("secret.txt")).unwrap(),
        "acme's secret"
    );

    // The operator sees and acts on every tenant, and each call is logged without the token.
    let mut operator = p.operator().await;
    let seen = e2e_tests::processor::get_session(&mut operator, &session.id).await;
    assert_eq!(seen.tenant, "acme");
    let all = operator
        .list_sessions(spb::ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.sessions.len(), 2);
    operator
        .diagnose(spb::DiagnoseRequest {
            session_id: session.id.clone(),
        })
        .await
        .unwrap();
    let lines = logs.lines();
    let audited = |rpc: &str, sid: &str, tenant: &str| {
        lines.iter().any(|l| {
            l["target"] == "session_processor::audit"
                && l["fields"]["message"] == "operator access"
                && l["fields"]["rpc"] == rpc
                && l["fields"]["session_id"] == sid
                && l["fields"]["tenant"] == tenant
        })
    };
    assert!(audited("GetSession", &session.id, "acme"), "{lines:#?}");
    assert!(audited("Diagnose", &session.id, "acme"));
    assert!(audited("ListSessions", "", "*"));
    assert!(
        !lines
            .iter()
            .any(|l| l["target"] == "session_processor::audit" && l["fields"]["rpc"] == "GetSpend"),
        "tenant calls are not audited as operator calls"
    );
    let text = logs.text();
    for token in [OPERATOR_TOKEN, ACME, EVIL, PROCESSOR_TOKEN] {
        assert!(!text.contains(token), "a token reached the logs");
    }
    // The operator may delete it too (and that is logged).
    operator
        .delete_session(spb::DeleteSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .unwrap();
    assert!(
        logs.lines()
            .iter()
            .any(|l| l["fields"]["rpc"] == "DeleteSession" && l["fields"]["tenant"] == "acme")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_selects_only_the_agents_it_is_allowed() {
    let p = Product::start(TENANTS).await;
    let mut evil = p.client_with_token(EVIL).await;
    let denied = evil
        .create_session(spb::CreateSessionRequest {
            agent: "coder".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let unknown = evil
        .create_session(spb::CreateSessionRequest {
            agent: "nobody".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::InvalidArgument);
    let own = create_session(&mut evil, spb::CreateSessionRequest::default()).await;
    let mut req = prompt(&own.id, "use the coder");
    req.agent = "coder".into();
    let denied = evil.prompt(req).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(
        p.gateway.openai.requests().len(),
        0,
        "nothing reached the model"
    );
    // acme may; so may the unnamed tenant (no list) and the operator.
    for token in [ACME, PROCESSOR_TOKEN, OPERATOR_TOKEN] {
        p.client_with_token(token)
            .await
            .create_session(spb::CreateSessionRequest {
                agent: "coder".into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
}

/// A client that sends `authorization` exactly as given.
fn raw_auth(value: &str) -> impl tonic::service::Interceptor + Clone {
    let value: tonic::metadata::MetadataValue<_> = value.parse().unwrap();
    move |mut req: tonic::Request<()>| {
        req.metadata_mut().insert("authorization", value.clone());
        Ok(req)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive_in_both_services() {
    use llm_proto::gateway as gpb;
    use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
    use llm_proto::sessions::session_service_client::SessionServiceClient;
    let p = Product::start("").await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let value = format!("{scheme} {PROCESSOR_TOKEN}");
        let mut c = SessionServiceClient::with_interceptor(channel(p.addr).await, raw_auth(&value));
        c.list_sessions(spb::ListSessionsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("processor refused `{scheme}`: {e:?}"));
        let value = format!("{scheme} {}", e2e_tests::TOKEN);
        let mut g =
            GatewayServiceClient::with_interceptor(channel(p.gateway.addr).await, raw_auth(&value));
        g.list_models(gpb::ListModelsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("gateway refused `{scheme}`: {e:?}"));
    }
    for value in [
        "Basic x",
        &format!("Bearer{PROCESSOR_TOKEN}"),
        "Bearer not-a-token-0123456789",
    ] {
        let mut c = SessionServiceClient::with_interceptor(channel(p.addr).await, raw_auth(value));
        let e = c
            .list_sessions(spb::ListSessionsRequest::default())
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{value}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_model_the_gateway_does_not_serve_is_refused_at_creation() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let e = c
        .create_session(spb::CreateSessionRequest {
            default_model: "openai/no-such-model".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().starts_with("default_model:"), "{}", e.message());
    c.create_session(spb::CreateSessionRequest {
        default_model: "openai/gpt-4o".into(),
        ..Default::default()
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_holds_at_most_its_streams_and_leaves_other_tenants_theirs() {
    let p = Product::start_setup(
        "",
        ProcessorSetup {
            server_lines: "max_streams_per_tenant = 2".into(),
            extra: TENANTS.into(),
            ..Default::default()
        },
    )
    .await;
    let mut acme = p.client_with_token(ACME).await;
    let mut evil = p.client_with_token(EVIL).await;
    let mine = create_session(&mut evil, Default::default()).await;
    let theirs = create_session(&mut acme, Default::default()).await;
    let subscribe = |id: &str| spb::SubscribeRequest {
        session_id: id.into(),
        ..Default::default()
    };
    // The hostile tenant fills its share with streams on its own idle session.
    let held = [
        evil.subscribe(subscribe(&mine.id)).await.unwrap(),
        evil.subscribe(subscribe(&mine.id)).await.unwrap(),
    ];
    let refused = evil.subscribe(subscribe(&mine.id)).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let info = tonic_types::StatusExt::get_details_error_info(&refused).unwrap();
    assert_eq!(info.reason, "TOO_MANY_STREAMS");
    // Ops see them: the refused one is not counted.
    assert!(
        p.engine
            .metrics()
            .encode()
            .lines()
            .any(|l| l == "session_processor_open_streams 2"),
        "{}",
        p.engine.metrics().encode()
    );
    // A prompt over the limit is refused before anything is written: no message, nothing queued or run.
    let refused = evil.prompt(prompt(&mine.id, "one more")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let stored = e2e_tests::processor::messages(&mut evil, &mine.id).await;
    assert!(stored.is_empty(), "{stored:?}");
    // The other tenant's streams are its own.
    p.gateway
        .openai
        .push(e2e_tests::processor::text_reply("c1", &["fine."], (10, 3)));
    let mut stream = acme
        .prompt(prompt(&theirs.id, "hello"))
        .await
        .unwrap()
        .into_inner();
    let events = e2e_tests::processor::until_done(&mut stream, |r| r.event).await;
    assert!(matches!(events.last(), Some(SE::Done(_))));
    // A stream the caller closes frees its place.
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match evil.subscribe(subscribe(&mine.id)).await {
            Ok(_) => break,
            Err(e) if e.code() == Code::ResourceExhausted => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the places were never freed"
                );
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_holds_at_most_its_sessions() {
    let tenants = TENANTS.replace("[tenants.evil]\n", "[tenants.evil]\nmax_sessions = 2\n");
    let p = Product::start(&tenants).await;
    let mut acme = p.client_with_token(ACME).await;
    let mut evil = p.client_with_token(EVIL).await;
    let first = create_session(&mut evil, Default::default()).await;
    create_session(&mut evil, Default::default()).await;
    let refused = evil
        .create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let info = tonic_types::StatusExt::get_details_error_info(&refused).unwrap();
    assert_eq!(info.reason, "TOO_MANY_SESSIONS");
    // The other tenant is under the deployment's default, untouched by this one's.
    create_session(&mut acme, Default::default()).await;
    // Deleting one gives its place back.
    evil.delete_session(spb::DeleteSessionRequest {
        session_id: first.id.clone(),
    })
    .await
    .unwrap();
    create_session(&mut evil, Default::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_questions_nobody_asked_are_refused_and_store_nothing() {
    let p = Product::start(TENANTS).await;
    let mut evil = p.client_with_token(EVIL).await;
    let s = create_session(&mut evil, Default::default()).await;
    // A megabyte of "tool result" for a call the loop never made, the way a caller would fill Redis.
    let refused = evil
        .submit_tool_result(spb::SubmitToolResultRequest {
            session_id: s.id.clone(),
            call_id: "call_made_up".into(),
            output: "x".repeat(1 << 20),
            is_error: false,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    let info = tonic_types::StatusExt::get_details_error_info(&refused).unwrap();
    assert_eq!(info.reason, "QUESTION_NOT_FOUND");
    assert_eq!(
        info.metadata.get("field").map(String::as_str),
        Some("call_id")
    );
    let refused = evil
        .reply_permission(spb::ReplyPermissionRequest {
            session_id: s.id.clone(),
            permission_id: "per_made_up".into(),
            allow: true,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    let store = &p.engine.store();
    assert_eq!(
        store
            .mailboxes()
            .wait_tool_result(&s.id, "call_made_up", Duration::ZERO)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .mailboxes()
            .wait_permission(&s.id, "per_made_up", Duration::ZERO)
            .await
            .unwrap(),
        None
    );
}
