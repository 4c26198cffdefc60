//! Structured output and session titles through both services, the fake provider and real Redis.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{
    Product, SessionsClient, get_session, messages, prompt, prompt_until_done, text_reply,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

const SCHEMA: &str = r#"{"type":"object","properties":{"city":{"type":"string"},"temp_c":{"type":"number"}},"required":["city","temp_c"],"additionalProperties":false}"#;

fn answer_call(id: &str, call: &str, args: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", id)
            .tool_call(call, "structured_output", &[args])
            .finish("tool_calls", Some((50, 8))),
    )
}

fn text(id: &str, words: &[&str]) -> Reply {
    text_reply(id, words, (20, 4))
}

fn structured_prompt(session_id: &str, retry_count: Option<u32>) -> spb::PromptRequest {
    let mut req = prompt(session_id, "Weather in Paris, as JSON");
    req.format = Some(spb::OutputFormat {
        r#type: spb::output_format::Type::JsonSchema as i32,
        schema_json: SCHEMA.into(),
        retry_count,
    });
    req
}

async fn new_session(c: &mut SessionsClient) -> spb::Session {
    c.create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
}

fn structured_calls(ms: &[spb::Message]) -> Vec<spb::ToolState> {
    ms.iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Tool(t)) if t.tool == "structured_output" => t.state.clone(),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_structured_answer_on_the_first_try_ends_the_loop_and_is_returned() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    p.gateway.openai.push(answer_call(
        "c1",
        "call_1",
        r#"{"city": "Paris", "temp_c": 21.5}"#,
    ));
    let events = prompt_until_done(&mut c, structured_prompt(&s.id, None)).await;
    let Some(SE::Done(done)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(done.finish, "stop");

    let reqs = p.gateway.openai.requests();
    assert_eq!(
        reqs.len(),
        1,
        "the loop ends with the answer: no further step"
    );
    let body = reqs[0].json();
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"structured_output"), "{tools:?}");
    assert_eq!(body["tool_choice"], "required");

    let ms = messages(&mut c, &s.id).await;
    assert_eq!(ms.len(), 2);
    assert_eq!(
        ms[0].format.as_ref().unwrap().schema_json,
        SCHEMA,
        "the format is kept with the user message"
    );
    let answer = &ms[1];
    assert_eq!(
        answer.structured_output_json,
        r#"{"city":"Paris","temp_c":21.5}"#
    );
    assert_eq!(answer.finish, "stop");
    assert!(answer.error.is_none());
    let calls = structured_calls(&ms);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].status(), spb::tool_state::Status::Completed);
    // The answer also reached the caller live, on the message events.
    assert!(events.iter().any(
        |e| matches!(e, SE::MessageUpdated(m) if m.structured_output_json == answer.structured_output_json)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_structured_answer_is_a_tool_error_the_model_corrects() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    p.gateway
        .openai
        .push(answer_call("c1", "call_1", r#"{"city": "Paris"}"#));
    p.gateway.openai.push(answer_call(
        "c2",
        "call_2",
        r#"{"city": "Paris", "temp_c": 21}"#,
    ));
    let events = prompt_until_done(&mut c, structured_prompt(&s.id, None)).await;
    assert!(
        !events.iter().any(|e| matches!(e, SE::Error(_))),
        "{events:?}"
    );

    let reqs = p.gateway.openai.requests();
    assert_eq!(reqs.len(), 2);
    // The second step shows the model why its first answer was refused.
    let second = reqs[1].json();
    let tool_result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content = tool_result["content"].to_string();
    assert!(
        content.contains("temp_c") && content.contains("structured_output"),
        "{content}"
    );

    let ms = messages(&mut c, &s.id).await;
    let calls = structured_calls(&ms);
    assert_eq!(
        calls.iter().map(|c| c.status()).collect::<Vec<_>>(),
        [
            spb::tool_state::Status::Error,
            spb::tool_state::Status::Completed
        ]
    );
    let last = ms.last().unwrap();
    assert_eq!(
        last.structured_output_json,
        r#"{"city":"Paris","temp_c":21}"#
    );
    assert!(last.error.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structured_answer_still_invalid_after_retry_count_corrections_fails() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    for i in 0..2 {
        p.gateway.openai.push(answer_call(
            &format!("c{i}"),
            &format!("call_{i}"),
            r#"{"temp_c": "warm"}"#,
        ));
    }
    p.gateway.openai.push(text("c9", &["never requested"]));
    let events = prompt_until_done(&mut c, structured_prompt(&s.id, Some(1))).await;
    let errors: Vec<&spb::MessageError> = events
        .iter()
        .filter_map(|e| match e {
            SE::Error(e) => Some(e),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert_eq!(errors[0].kind(), spb::message_error::Kind::StructuredOutput);
    assert_eq!(
        p.gateway.openai.requests().len(),
        2,
        "one try and retry_count = 1 correction"
    );
    let ms = messages(&mut c, &s.id).await;
    let last = ms.last().unwrap();
    assert_eq!(
        last.error.as_ref().unwrap().kind(),
        spb::message_error::Kind::StructuredOutput
    );
    assert!(last.structured_output_json.is_empty());
    assert!(
        structured_calls(&ms)
            .iter()
            .all(|c| c.status() == spb::tool_state::Status::Error)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finishing_with_text_instead_of_the_structured_answer_fails() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = new_session(&mut c).await;
    p.gateway.openai.push(text("c1", &["It is ", "sunny."]));
    let events = prompt_until_done(&mut c, structured_prompt(&s.id, None)).await;
    assert!(events.iter().any(
        |e| matches!(e, SE::Error(e) if e.kind() == spb::message_error::Kind::StructuredOutput)
    ));
    let ms = messages(&mut c, &s.id).await;
    assert_eq!(
        ms[1].error.as_ref().unwrap().kind(),
        spb::message_error::Kind::StructuredOutput
    );
    // Validation happens before anything runs.
    let mut bad = structured_prompt(&s.id, None);
    bad.format.as_mut().unwrap().schema_json = r#"{"type":"array"}"#.into();
    let status = c.prompt(bad).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_is_generated_after_the_first_prompt_with_the_small_model() {
    let p = Product::start(
        "[titles]\nenabled = true\n[agents.titled]\nmodel = \"openai/gpt-4o\"\nsmall_model = \"openai/gpt-4o-mini\"\n",
    )
    .await;
    // Two kinds of requests race: the step and the title. One reply serves both, by what was asked.
    let reply = Reply::fn_reply(|req| {
        let body = req.json();
        if body.to_string().contains("Write a title") {
            Reply::sse(
                ChatStream::new("gpt-4o-mini", "title")
                    .text(&[
                        "<think>they ask about ",
                        "weather</think>\n",
                        "\"Weather in Paris\"",
                        "\nignored",
                    ])
                    .finish("stop", Some((30, 12))),
            )
        } else {
            Reply::sse(
                ChatStream::new("gpt-4o-2024-08-06", "step")
                    .text(&["Sunny."])
                    .finish("stop", Some((20, 2))),
            )
        }
    });
    p.gateway.openai.push(reply.clone());
    p.gateway.openai.push(reply.clone());
    p.gateway.openai.push(reply);
    let mut c = p.client().await;
    let s = c
        .create_session(spb::CreateSessionRequest {
            agent: "titled".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert!(s.title.is_empty());
    prompt_until_done(&mut c, prompt(&s.id, "What's the weather in Paris?")).await;

    // The title call runs beside the loop: wait for its request, then for the title to be stored.
    let reqs = p
        .gateway
        .openai
        .wait_requests(2, Duration::from_secs(5))
        .await;
    let title_req = reqs
        .iter()
        .map(|r| r.json())
        .find(|b| b.to_string().contains("Write a title"))
        .expect("a title request");
    assert_eq!(title_req["model"], "gpt-4o-mini", "the agent's small model");
    assert!(title_req.get("tools").is_none(), "no tools");
    let session = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let s = get_session(&mut c, &s.id).await;
            if !s.title.is_empty() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the title is stored");
    assert_eq!(session.title, "Weather in Paris");
    // The title did not disturb the loop's totals (both are written as compare-and-set).
    let ms = messages(&mut c, &s.id).await;
    assert_eq!(session.cost_nano_usd, ms[1].cost_nano_usd);
    assert!(session.cost_nano_usd > 0);

    // Only the first prompt gets a title.
    prompt_until_done(&mut c, prompt(&s.id, "And tomorrow?")).await;
    let titles = p
        .gateway
        .openai
        .requests()
        .iter()
        .filter(|r| r.json().to_string().contains("Write a title"))
        .count();
    assert_eq!(titles, 1);
}
