use super::format::{pretty_json, rfc3339, usd};
use super::watch::{Shown, part_line};
use super::*;
use pb::session_event::Event as SE;

#[test]
fn a_part_published_again_in_the_same_state_prints_once() {
    let finish = pb::Part {
        id: "prt_1".into(),
        kind: Some(pb::part::Kind::StepFinish(pb::StepFinishPart {
            reason: "stop".into(),
            model: "openai/gpt-4o".into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let line = part_line(&finish).unwrap();
    assert!(line.contains("(openai/gpt-4o)"), "{line}");
    let mut shown = Shown::default();
    let mut with_snapshot = finish.clone();
    if let Some(pb::part::Kind::StepFinish(f)) = with_snapshot.kind.as_mut() {
        f.snapshot = "abc".into();
    }
    shown.show(&SE::PartUpdated(finish)).unwrap();
    shown.show(&SE::PartUpdated(with_snapshot)).unwrap();
    assert_eq!(shown.lines.len(), 1, "one line for one part id");
}

#[test]
fn times_and_amounts_print_for_people() {
    let t = |seconds| prost_types::Timestamp { seconds, nanos: 0 };
    assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(t(1_796_083_200 + 3_723)), "2026-12-01T01:02:03Z");
    assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00Z");
    assert_eq!(usd(1_500_000), "$0.001500");
    assert_eq!(pretty_json("{\"a\":1}"), "{\n  \"a\": 1\n}");
    assert_eq!(pretty_json("not json"), "not json");
}

#[test]
fn the_cli_parses_the_new_commands() {
    let args = Args::try_parse_from([
        "sessions",
        "--token",
        "t",
        "diff",
        "ses_1",
        "--message",
        "msg_1",
        "--step",
        "2",
        "--patch",
    ])
    .unwrap();
    assert!(matches!(
        args.command,
        Command::Diff {
            step: Some(2),
            patch: true,
            ..
        }
    ));
    // --step needs --message; --retry-count needs --format-schema.
    assert!(
        Args::try_parse_from(["sessions", "--token", "t", "diff", "ses_1", "--step", "1"]).is_err()
    );
    assert!(
        Args::try_parse_from([
            "sessions",
            "--token",
            "t",
            "prompt",
            "s",
            "hi",
            "--retry-count",
            "3"
        ])
        .is_err()
    );
    let args = Args::try_parse_from([
        "sessions",
        "--token",
        "t",
        "prompt",
        "s",
        "hi",
        "--format-schema",
        "schema.json",
        "--retry-count",
        "3",
    ])
    .unwrap();
    assert!(matches!(
        args.command,
        Command::Prompt {
            retry_count: Some(3),
            format_schema: Some(_),
            ..
        }
    ));
}

#[test]
fn an_address_with_or_without_its_scheme_names_the_same_processor() {
    use super::connect::endpoint_url;
    assert_eq!(endpoint_url("127.0.0.1:50152"), "http://127.0.0.1:50152");
    assert_eq!(
        endpoint_url("http://127.0.0.1:50152"),
        "http://127.0.0.1:50152"
    );
    assert_eq!(
        endpoint_url(" https://sp.internal:443 "),
        "https://sp.internal:443"
    );
    assert_eq!(endpoint_url("[::1]:50152"), "http://[::1]:50152");
}

#[test]
fn an_error_shows_each_of_its_causes_once() {
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }
    let refused = Layer("Connection refused (os error 111)", None);
    let tcp = Layer("tcp connect error", Some(Box::new(refused)));
    let err = Layer("transport error", Some(Box::new(tcp)));
    assert_eq!(
        super::connect::causes(&err),
        "transport error: tcp connect error: Connection refused (os error 111)"
    );
    let repeated = Layer("io: broken", Some(Box::new(Layer("broken", None))));
    assert_eq!(super::connect::causes(&repeated), "io: broken");
}

#[test]
fn watch_parses_its_resume_point() {
    let args = Args::try_parse_from([
        "sessions",
        "--token",
        "t",
        "watch",
        "ses_1",
        "--after",
        "42-0",
        "--until-done",
    ])
    .unwrap();
    assert!(matches!(
        args.command,
        Command::Watch { ref after, until_done: true, .. } if after == "42-0"
    ));
}

#[test]
fn the_empty_workspace_snapshot_is_named_not_hashed() {
    use super::views::snapshot_name;
    assert_eq!(
        snapshot_name("4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
        "(empty workspace)"
    );
    assert_eq!(
        snapshot_name("537fb7d080e26652e68d22f6bd394c639134de1f"),
        "537fb7d080e2"
    );
}
