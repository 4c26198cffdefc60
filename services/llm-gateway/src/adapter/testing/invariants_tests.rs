use super::*;
use crate::error::{ErrorKind, ProviderError};
use crate::event::Finish;

fn t(id: &str) -> [Event; 3] {
    [
        Event::TextStart { id: id.into() },
        Event::TextDelta {
            id: id.into(),
            delta: "x".into(),
        },
        Event::TextEnd { id: id.into() },
    ]
}

fn call(id: &str, name: &str) -> Event {
    Event::ToolCall {
        call_id: id.into(),
        tool: name.into(),
        input_json: "{}".into(),
        metadata: None,
    }
}

#[test]
fn well_formed_streams_pass_and_each_violation_is_named() {
    let fin = Event::Finish(Finish::default());
    let mut ok: Vec<Event> = t("a").into();
    ok.extend([call("c1", "f"), fin.clone()]);
    assert_eq!(check(&ok), Ok(()));
    let err = Event::Error(ProviderError::new(ErrorKind::Network, "x"));
    assert_eq!(check(std::slice::from_ref(&err)), Ok(()));

    let cases: Vec<(Vec<Event>, &str)> = vec![
        (vec![], "no terminal"),
        (t("a").into(), "no terminal"),
        (vec![fin.clone(), fin.clone()], "not the last"),
        (
            vec![
                Event::TextDelta {
                    id: "a".into(),
                    delta: "x".into(),
                },
                fin.clone(),
            ],
            "outside",
        ),
        (
            vec![Event::TextEnd { id: "a".into() }, fin.clone()],
            "not open",
        ),
        (
            [
                t("a").as_slice(),
                t("a").as_slice(),
                std::slice::from_ref(&fin),
            ]
            .concat(),
            "twice",
        ),
        (vec![call("c1", ""), fin.clone()], "empty name"),
        (
            vec![call("c1", "f"), call("c1", "g"), fin.clone()],
            "used twice",
        ),
    ];
    for (events, want) in cases {
        let got = check(&events).unwrap_err();
        assert!(got.contains(want), "{got} / {want}");
    }
}

/// Every recorded fixture, decoded by its protocol's decoder through the real SSE parser, is well formed.
#[test]
fn every_fixture_decodes_to_a_well_formed_stream() {
    use crate::adapter::framing::sse::{SseItem, SseParser};
    use crate::adapter::{Protocol, Target};
    use crate::catalog::ModelInfo;
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fake-provider/fixtures"
    );
    // Bedrock's fixtures are eventstream, replayed by its own tests and the fuzzing harness.
    for protocol in Protocol::ALL
        .into_iter()
        .filter(|p| *p != Protocol::Bedrock)
    {
        let model = ModelInfo::for_tests("gemini-2.5-flash", protocol);
        let dir = format!("{root}/{}", protocol.as_str());
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("sse") {
                continue;
            }
            let body = std::fs::read(&path).unwrap_or_default();
            let mut decoder = protocol.adapter().decoder(&Target::new(&model));
            let mut parser = SseParser::new();
            let mut out = Vec::new();
            let mut on = |item: SseItem<'_>| -> Result<(), ()> {
                if !decoder.is_done() {
                    match item {
                        SseItem::Event { event, data } => decoder.frame(event, data, &mut out),
                        SseItem::BareJson(json) => decoder.bare_json(json, &mut out),
                        SseItem::Comment => out.push(Event::KeepAlive),
                    }
                }
                Ok(())
            };
            let _ = parser.feed(&body, &mut on);
            let _ = parser.finish(&mut on);
            if !decoder.is_done() {
                decoder.end(&mut out);
            }
            assert_eq!(check(&out), Ok(()), "{}", path.display());
            seen += 1;
        }
        assert!(seen > 0, "no fixtures in {dir}");
    }
}
