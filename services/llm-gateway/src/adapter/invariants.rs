//! The unified stream's invariants, as one function every decoder's output can be checked with (the tests replay
//! the fixtures through it; fuzz targets can call it on any bytes): block ids unique, every block opened before its
//! deltas and closed once, tool calls with a name and an id used once, and exactly one terminal event, last.

use std::collections::{HashMap, HashSet};

use crate::event::Event;

#[derive(PartialEq)]
enum Block {
    Open,
    Closed,
}

/// `Ok` when `events` is a well-formed unified stream, else what is wrong and at which event.
pub fn check(events: &[Event]) -> Result<(), String> {
    let mut blocks: HashMap<(&str, &str), Block> = HashMap::new();
    let mut calls: HashSet<&str> = HashSet::new();
    for (i, ev) in events.iter().enumerate() {
        let at = |what: &str| format!("event {i}: {what}");
        let terminal = matches!(ev, Event::Finish(_) | Event::Error(_));
        if terminal && i + 1 != events.len() {
            return Err(at("a terminal event is not the last"));
        }
        let (kind, id, step) = match ev {
            Event::TextStart { id } => ("text", id.as_str(), 0),
            Event::TextDelta { id, .. } => ("text", id.as_str(), 1),
            Event::TextEnd { id } => ("text", id.as_str(), 2),
            Event::ReasoningStart { id } => ("reasoning", id.as_str(), 0),
            Event::ReasoningDelta { id, .. } => ("reasoning", id.as_str(), 1),
            Event::ReasoningEnd { id, .. } => ("reasoning", id.as_str(), 2),
            Event::ToolInputStart { call_id, tool } => {
                if tool.is_empty() {
                    return Err(at("tool input with an empty name"));
                }
                ("tool", call_id.as_str(), 0)
            }
            Event::ToolInputDelta { call_id, .. } => ("tool", call_id.as_str(), 1),
            Event::ToolInputEnd { call_id } => ("tool", call_id.as_str(), 2),
            Event::ToolCall { call_id, tool, .. } => {
                if tool.is_empty() || call_id.is_empty() {
                    return Err(at("a tool call with an empty name or id"));
                }
                if !calls.insert(call_id) {
                    return Err(at("a tool-call id used twice"));
                }
                continue;
            }
            Event::Finish(_) | Event::Error(_) => continue,
        };
        match (step, blocks.get(&(kind, id))) {
            (0, None) => {
                blocks.insert((kind, id), Block::Open);
            }
            (0, Some(_)) => return Err(at("a block id opened twice")),
            (1, Some(Block::Open)) => {}
            (1, _) => return Err(at("a delta outside an open block")),
            (_, Some(Block::Open)) => {
                blocks.insert((kind, id), Block::Closed);
            }
            (_, _) => return Err(at("a block closed that is not open")),
        }
    }
    match events.last() {
        Some(Event::Finish(_) | Event::Error(_)) => Ok(()),
        _ => Err("no terminal event".into()),
    }
}

#[cfg(test)]
mod tests {
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
        use crate::adapter::sse::{SseItem, SseParser};
        use crate::adapter::{Protocol, Target};
        use crate::catalog::ModelInfo;
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fake-provider/fixtures"
        );
        for protocol in [
            Protocol::OpenaiChat,
            Protocol::OpenaiResponses,
            Protocol::Anthropic,
            Protocol::Gemini,
            Protocol::VertexGemini,
            Protocol::VertexAnthropic,
        ] {
            let model = ModelInfo::for_tests("gemini-2.5-flash", protocol);
            let dir = format!("{root}/{}", protocol.as_str());
            let mut seen = 0;
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("sse") {
                    continue;
                }
                let body = std::fs::read(&path).unwrap_or_default();
                let mut decoder = protocol.adapter().decoder(&Target { model: &model });
                let mut parser = SseParser::new();
                let mut out = Vec::new();
                let mut on = |item: SseItem<'_>| -> Result<(), ()> {
                    if !decoder.is_done() {
                        match item {
                            SseItem::Event { event, data } => decoder.frame(event, data, &mut out),
                            SseItem::BareJson(json) => decoder.bare_json(json, &mut out),
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
}
