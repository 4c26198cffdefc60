use proptest::prelude::*;

/// A JSON string literal: plain, with every kind of escape, unicode, surrogate pairs, or a lone surrogate (which
/// serde refuses).
pub(crate) fn string() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "[a-zA-Z0-9 ,.!?]{0,12}".prop_map(|s| format!("\"{s}\"")),
        2 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        1 => Just(r#""line\nbreak \"quoted\" back\\slash \/ \t \b\f\r""#.to_string()),
        1 => Just(r#""\u00e9t\u00E9 \ud83d\ude00 caf\u00e9""#.to_string()),
        1 => Just("\"héllo wörld 😀 日本\"".to_string()),
        1 => Just(r#""lone \ud800 surrogate""#.to_string()),
        1 => Just(r#""\u0000""#.to_string()),
        1 => Just(r#""""#.to_string()),
    ]
    .boxed()
}

/// Any JSON value, as text.
pub(crate) fn value() -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        any::<i32>().prop_map(|n| n.to_string()),
        Just("1.5e3".to_string()),
        Just("-0.25".to_string()),
        string(),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..4).prop_map(|kv| {
                let fields: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    })
    .boxed()
}

/// Inter-token whitespace: none (OpenAI), one space (Gemini), or pretty-printing.
pub(crate) fn space() -> BoxedStrategy<&'static str> {
    prop_oneof![6 => Just(""), 3 => Just(" "), 1 => Just("\n  "), 1 => Just("\r\n\t")].boxed()
}

/// A field: absent, or one of the given values (as JSON text).
pub(crate) fn field(
    key: &'static str,
    values: BoxedStrategy<String>,
) -> BoxedStrategy<Option<(String, String)>> {
    prop_oneof![1 => Just(None), 4 => values.prop_map(move |v| Some((key.to_string(), v)))].boxed()
}

/// A field that is usually absent (one that sends the chunk to the full parse).
pub(crate) fn rare(
    key: &'static str,
    values: BoxedStrategy<String>,
) -> BoxedStrategy<Option<(String, String)>> {
    prop_oneof![12 => Just(None), 1 => values.prop_map(move |v| Some((key.to_string(), v)))].boxed()
}

/// Writes an object from its fields, shuffled by `order`, with `sp` around the punctuation; `dup` repeats one
/// field (serde refuses duplicates of known fields).
pub(crate) fn object(
    fields: Vec<Option<(String, String)>>,
    order: &[usize],
    sp: &str,
    dup: bool,
) -> String {
    let mut fields: Vec<(String, String)> = fields.into_iter().flatten().collect();
    if !fields.is_empty() {
        for (i, &o) in order.iter().enumerate() {
            let j = o % fields.len();
            let i = i % fields.len();
            fields.swap(i, j);
        }
        if dup {
            let first = fields[0].clone();
            fields.push(first);
        }
    }
    let inner: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("{sp}\"{k}\"{sp}:{sp}{v}"))
        .collect();
    format!("{{{}{sp}}}", inner.join(","))
}

/// Feeds `frames` (then `end`) to a decoder that tries its fast path and to one that never does, and returns the
/// events; panics as soon as the two differ.
pub(crate) fn same_events(
    mut fast: impl crate::adapter::Decoder,
    mut slow: impl crate::adapter::Decoder,
    frames: &[String],
) -> Vec<crate::event::Event> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for f in frames {
        fast.frame("", f, &mut a);
        slow.frame("", f, &mut b);
        assert_eq!(a, b, "after frame {f}");
    }
    fast.end(&mut a);
    slow.end(&mut b);
    assert_eq!(a, b);
    a
}

/// Asserts that between a tenth and nine tenths of the frames `strategy` generates are `taken` by a fast path,
/// so an equivalence test over them compares both paths, not only the fallback.
pub(crate) fn reaches_both_paths(strategy: BoxedStrategy<String>, taken: fn(&str) -> bool) {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let total = 500;
    let fast = (0..total)
        .filter(|_| taken(&strategy.new_tree(&mut runner).unwrap().current()))
        .count();
    assert!(fast >= total / 10, "fast path taken {fast} of {total}");
    assert!(
        fast <= total * 9 / 10,
        "fallback taken {} of {total}",
        total - fast
    );
}

/// Every `.sse` fixture of `protocol` in `shared/fake-provider/fixtures/`, by file name.
pub(crate) fn fixtures(protocol: &str) -> Vec<(String, String)> {
    let dir = format!(
        "{}/../../shared/fake-provider/fixtures/{protocol}",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sse") {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            out.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    out
}

/// The `data:` payloads of an SSE body whose frames are one line each (as in the fixtures).
pub(crate) fn data_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.trim().to_string())
        .collect()
}

/// Sometimes breaks the text: truncates it or inserts a stray byte, so the malformed path is compared too.
pub(crate) fn corrupt(text: String, how: u8, at: usize) -> String {
    if text.is_empty() {
        return text;
    }
    let mut at = at % text.len();
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    match how % 8 {
        0 => text[..at].to_string(),
        1 => format!("{}\u{1}{}", &text[..at], &text[at..]),
        2 => format!("{},{}", &text[..at], &text[at..]),
        _ => text,
    }
}
