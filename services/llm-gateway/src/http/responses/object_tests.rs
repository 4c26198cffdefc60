use super::*;

fn head() -> Head {
    let mut echo = Map::new();
    echo.insert("instructions".into(), Value::from("Be kind."));
    Head {
        id: "resp_1".into(),
        created_at: 7,
        model: "gpt-4o".into(),
        echo,
    }
}

#[test]
fn usage_counts_every_prompt_and_output_token_as_the_api_does() {
    let u = pb::Usage {
        input_tokens: 10,
        cache_read_tokens: 5,
        cache_write_tokens: 2,
        output_tokens: 7,
        reasoning_tokens: 3,
        total_tokens: 27,
    };
    assert_eq!(
        usage_json(&u),
        json!({"input_tokens": 17, "input_tokens_details": {"cached_tokens": 5}, "output_tokens": 10,
               "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 27})
    );
}

#[test]
fn a_response_cut_short_is_incomplete_with_its_reason() {
    for (reason, status) in [
        (
            pb::FinishReason::Length,
            Status::Incomplete("max_output_tokens"),
        ),
        (
            pb::FinishReason::ContentFilter,
            Status::Incomplete("content_filter"),
        ),
        (pb::FinishReason::ToolCalls, Status::Completed),
        (pb::FinishReason::Stop, Status::Completed),
    ] {
        let f = pb::StepFinish {
            finish_reason: reason as i32,
            ..Default::default()
        };
        assert_eq!(status_of(&f), status);
    }
    let r = response(
        &head(),
        Status::Incomplete("max_output_tokens"),
        &[],
        None,
        None,
    );
    assert_eq!(
        (r["status"].as_str(), &r["incomplete_details"]),
        (Some("incomplete"), &json!({"reason": "max_output_tokens"}))
    );
    assert_eq!(r["instructions"], "Be kind.");
    assert_eq!(r["store"], false);
}

#[test]
fn items_are_empty_in_progress_and_whole_when_completed() {
    let call = Item::FunctionCall {
        id: "fc_1".into(),
        call_id: "c1".into(),
        name: "w".into(),
        arguments: "{\"a\":1}".into(),
    };
    assert_eq!(call.to_json(false)["arguments"], "");
    assert_eq!(call.to_json(true)["arguments"], "{\"a\":1}");
    let r = Item::Reasoning {
        id: "rs_1".into(),
        text: "t".into(),
        encrypted: Some("gwr1.x".into()),
    };
    assert_eq!(r.to_json(false).get("encrypted_content"), None);
    assert_eq!(r.to_json(true)["encrypted_content"], "gwr1.x");
    assert_eq!(
        r.to_json(true)["summary"],
        json!([{"type": "summary_text", "text": "t"}])
    );
}
