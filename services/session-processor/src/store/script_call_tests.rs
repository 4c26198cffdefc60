//! The call's command, byte for byte, and a real Redis that has never seen the script.

use super::ScriptCall;
use crate::store::test_support::redis_url;
use llm_proto::sessions as pb;
use prost::Message as _;

#[test]
fn keys_come_first_with_their_count_then_every_argument_once() {
    let script = redis::Script::new("return 1");
    let part = pb::Part {
        id: "prt_1".into(),
        ..Default::default()
    };
    let mut call = ScriptCall::new(&script, ["{s}:a".to_string(), "{s}:bb".to_string()]);
    call.arg(7).arg("").message(&part);
    let encoded = part.encode_to_vec();
    let mut expected = format!(
        "*8\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n2\r\n$5\r\n{{s}}:a\r\n$6\r\n{{s}}:bb\r\n$1\r\n7\r\n$0\r\n\r\n${}\r\n",
        script.get_hash(),
        encoded.len()
    )
    .into_bytes();
    expected.extend_from_slice(&encoded);
    expected.extend_from_slice(b"\r\n");
    assert_eq!(call.cmd().get_packed_command(), expected);
}

#[test]
fn a_call_without_keys_says_so() {
    let script = redis::Script::new("return 1");
    let call = ScriptCall::new(&script, std::iter::empty::<String>());
    let expected = format!(
        "*3\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n0\r\n",
        script.get_hash()
    );
    assert_eq!(call.cmd().get_packed_command(), expected.into_bytes());
}

#[tokio::test]
async fn a_script_the_node_does_not_know_is_loaded_and_the_call_sent_again() {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    // A body no other test sends: the node has never seen it, so the first EVALSHA is refused with NOSCRIPT.
    let marker = format!("{:016x}", rand::random::<u64>());
    let script = redis::Script::new(&format!("return {{KEYS[1], ARGV[1], ARGV[2], '{marker}'}}"));
    let known: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(script.get_hash())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(known, [false]);
    let part = pb::Part {
        id: "prt_1".into(),
        ..Default::default()
    };
    let mut call = ScriptCall::new(&script, ["k".to_string()]);
    call.arg("a").message(&part);
    let (key, arg, bytes, seen): (String, String, Vec<u8>, String) =
        call.invoke(&mut conn).await.unwrap();
    assert_eq!(
        (key.as_str(), arg.as_str(), seen.as_str()),
        ("k", "a", marker.as_str())
    );
    assert_eq!(pb::Part::decode(bytes.as_slice()).unwrap(), part);
    // Loaded now: the same call goes out once.
    let again: (String, String, Vec<u8>, String) = call.invoke(&mut conn).await.unwrap();
    assert_eq!(again.3, marker);
}

#[tokio::test]
async fn a_script_error_is_the_callers_and_is_not_retried() {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new("return redis.error_reply('REFUSED by the script')");
    let err = ScriptCall::new(&script, ["k".to_string()])
        .invoke::<i64>(&mut conn)
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("REFUSED") && shown.contains("by the script"),
        "{shown}"
    );
}

#[test]
fn a_call_with_room_is_the_same_command() {
    let script = redis::Script::new("return 1");
    let keys = ["{s}:a".to_string(), "{s}:bb".to_string()];
    let part = pb::Part {
        id: "prt_1".into(),
        ..Default::default()
    };
    let mut grown = ScriptCall::new(&script, keys.clone());
    grown.arg(7).arg("").message(&part);
    // Room too small and room to spare both write the same bytes.
    for (args, bytes) in [(0, 0), (3, 1 + part.encoded_len()), (64, 4096)] {
        let mut sized = ScriptCall::with_room(&script, &keys, args, bytes);
        sized.arg(7).arg("").message(&part);
        assert_eq!(
            sized.cmd().get_packed_command(),
            grown.cmd().get_packed_command()
        );
    }
}
