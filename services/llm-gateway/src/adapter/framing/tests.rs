#![allow(clippy::unwrap_used)]

use crate::adapter::Decoder;
use crate::adapter::framing::{Framing, Parser, answered};
use crate::event::Event;

#[test]
fn a_json_media_type_is_one_document_whatever_was_asked() {
    for expected in [Framing::Sse, Framing::EventStream, Framing::Json] {
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/problem+json",
            "text/json",
        ] {
            assert_eq!(
                answered(expected, Some(ct)),
                Ok(Some(Framing::Json)),
                "{ct}"
            );
        }
    }
}

#[test]
fn a_stream_media_type_is_read_only_where_it_was_asked_for() {
    let sse = "text/event-stream; charset=utf-8";
    let es = "application/vnd.amazon.eventstream";
    assert_eq!(answered(Framing::Sse, Some(sse)), Ok(Some(Framing::Sse)));
    assert_eq!(
        answered(Framing::EventStream, Some(es)),
        Ok(Some(Framing::EventStream))
    );
    assert_eq!(answered(Framing::Sse, Some(es)), Err(es.to_string()));
    assert_eq!(
        answered(Framing::EventStream, Some(sse)),
        Err("text/event-stream".to_string())
    );
    assert_eq!(
        answered(Framing::Json, Some(sse)),
        Err("text/event-stream".to_string())
    );
}

#[test]
fn no_media_type_or_a_vague_one_is_sniffed_and_anything_else_refused() {
    for ct in [
        None,
        Some(""),
        Some("text/plain"),
        Some("application/octet-stream"),
    ] {
        assert_eq!(answered(Framing::Sse, ct), Ok(None), "{ct:?}");
    }
    for ct in [
        "text/html; charset=utf-8",
        "application/xml",
        "application/x-ndjson",
        "image/png",
    ] {
        let media = ct.split(';').next().unwrap().to_string();
        assert_eq!(answered(Framing::Sse, Some(ct)), Err(media), "{ct}");
    }
}

/// Records what the framing parser hands over.
#[derive(Default)]
struct Seen {
    frames: Vec<String>,
    wholes: Vec<String>,
}

impl Decoder for Seen {
    fn frame(&mut self, _event: &str, data: &str, _out: &mut Vec<Event>) {
        self.frames.push(data.to_string());
    }
    fn whole(&mut self, json: &str, _out: &mut Vec<Event>) {
        self.wholes.push(json.to_string());
    }
    fn end(&mut self, _out: &mut Vec<Event>) {}
    fn is_done(&self) -> bool {
        false
    }
    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(Seen::default())
    }
}

fn sniffed(body: &str, read: usize) -> Seen {
    let mut parser = Parser::sniffing(Framing::Sse, 1 << 16);
    let mut seen = Seen::default();
    let mut out = Vec::new();
    for bytes in body.as_bytes().chunks(read) {
        parser.feed(bytes, &mut seen, &mut out).unwrap();
    }
    parser.finish(&mut seen, &mut out).unwrap();
    seen
}

#[test]
fn sniffing_reads_a_body_that_opens_with_json_as_one_document_and_anything_else_as_expected() {
    for read in [1, 3, 1000] {
        let seen = sniffed("\n  {\"id\": 1}\n", read);
        assert_eq!(seen.wholes, vec!["\n  {\"id\": 1}\n"], "read {read}");
        assert!(seen.frames.is_empty());
        let seen = sniffed(" [1, 2]", read);
        assert_eq!(seen.wholes, vec![" [1, 2]"], "read {read}");
        let seen = sniffed("\ndata: a\n\ndata: b\n\n", read);
        assert_eq!(seen.frames, vec!["a", "b"], "read {read}");
        assert!(seen.wholes.is_empty());
    }
    let seen = sniffed("  \n", 1);
    assert!(seen.frames.is_empty() && seen.wholes.is_empty());
}

#[test]
fn sniffing_holds_no_more_white_space_than_the_limit() {
    let mut parser = Parser::sniffing(Framing::Sse, 8);
    let mut seen = Seen::default();
    let mut out = Vec::new();
    parser.feed(b"    ", &mut seen, &mut out).unwrap();
    assert!(parser.feed(b"     ", &mut seen, &mut out).is_err());
}
