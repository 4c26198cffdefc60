use super::*;

#[tokio::test(flavor = "current_thread")]
async fn large_work_runs_off_the_calling_thread_and_small_work_on_it() {
    let here = std::thread::current().id();
    let name = || std::thread::current().name().map(str::to_owned);
    assert_eq!(
        run(Where::Inline, move || std::thread::current().id()).await,
        here
    );
    assert_ne!(
        run(Where::Blocking, move || std::thread::current().id()).await,
        here
    );
    // Only a huge request goes to the idle-priority preparation threads.
    assert!(
        !run(Where::Blocking, name)
            .await
            .is_some_and(|n| n.starts_with("prep-"))
    );
    assert!(
        run(Where::Idle, name)
            .await
            .is_some_and(|n| n.starts_with("prep-"))
    );
}

#[test]
fn requests_are_placed_by_their_size() {
    let with = |n: usize| pb::Generation {
        tools: vec![pb::Tool::default(); n],
        ..Default::default()
    };
    assert_eq!(placement(&pb::Generation::default()), Where::Inline);
    assert_eq!(placement(&with(LARGE_REQUEST_ITEMS)), Where::Inline);
    assert_eq!(placement(&with(LARGE_REQUEST_ITEMS + 1)), Where::Blocking);
    assert_eq!(placement(&with(HUGE_REQUEST_ITEMS)), Where::Blocking);
    assert_eq!(placement(&with(HUGE_REQUEST_ITEMS + 1)), Where::Idle);
    assert_eq!(Where::for_bytes(HUGE_REQUEST_BYTES - 1, 0), Where::Blocking);
    assert_eq!(
        Where::for_bytes(HUGE_REQUEST_BYTES, HUGE_REQUEST_BYTES),
        Where::Idle
    );
    assert_eq!(Where::for_bytes(10, 10), Where::Inline);
    assert_eq!(Where::for_bytes(11, 10), Where::Blocking);
}

fn tools(n: usize) -> Vec<pb::Tool> {
    (0..n)
        .map(|i| pb::Tool {
            name: format!("t{i}"),
            description: String::new(),
            input_schema_json: r#"{"type":"object"}"#.into(),
            ..Default::default()
        })
        .collect()
}

fn request(model: &str, n: usize) -> pb::StreamRequest {
    pb::StreamRequest {
        generation: Some(pb::Generation {
            model: model.into(),
            messages: vec![pb::Message {
                role: pb::Role::User as i32,
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text(pb::TextPart { text: "hi".into() })),
                }],
            }],
            tools: tools(n),
            ..Default::default()
        }),
    }
}

fn encoded(r: &pb::StreamRequest) -> Incoming<pb::StreamRequest> {
    use prost::Message as _;
    Incoming::Encoded(Bytes::from(r.encode_to_vec()))
}

#[tokio::test]
async fn an_encoded_request_yields_the_generation_its_decoded_form_does() {
    let limits = Limits::default();
    let r = request("openai/gpt-4o", 100);
    let from_bytes = generation(encoded(&r), &limits).await.unwrap();
    let decoded = generation(Incoming::Decoded(r.clone()), &limits)
        .await
        .unwrap();
    assert_eq!(from_bytes, decoded);
    assert_eq!(Some(from_bytes), r.generation);
}

#[tokio::test]
async fn an_encoded_request_over_a_limit_is_refused_before_it_is_decoded() {
    use prost::Message as _;
    let limits = Limits {
        max_tools: 10,
        ..Limits::default()
    };
    // A model id that is not UTF-8: decoding would fail with INVALID_ARGUMENT. The census refuses first.
    let mut bytes = request("openai/gpt-4o", 11).encode_to_vec();
    let at = bytes.windows(6).position(|w| w == b"openai").unwrap();
    bytes[at] = 0xff;
    let err = generation(
        Incoming::<pb::StreamRequest>::Encoded(Bytes::from(bytes)),
        &limits,
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().contains("limits.max_tools"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn encoded_bytes_that_are_not_the_message_are_invalid_argument_naming_the_request() {
    let limits = Limits::default();
    for bytes in [
        vec![0x0a, 0x10, b'x'],
        vec![0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe],
    ] {
        let err = generation(
            Incoming::<pb::StreamRequest>::Encoded(Bytes::from(bytes)),
            &limits,
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains("request"), "{}", err.message());
    }
    let err = generation(encoded(&pb::StreamRequest::default()), &limits)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("generation"), "{}", err.message());
}
