use super::*;

fn get(key: &str) -> Cmd {
    redis::cmd("GET").arg(key).clone()
}

#[test]
fn slot_of_a_script_is_its_first_key_and_keyless_commands_have_none() {
    let script = redis::cmd("EVALSHA")
        .arg("abc")
        .arg(2)
        .arg("p:{sess:a}:session")
        .arg("x")
        .clone();
    assert_eq!(
        command_slot(&script),
        Some(Slot::for_key("p:{sess:a}:lease"))
    );
    let keyless = redis::cmd("EVALSHA").arg("abc").arg(0).arg("v").clone();
    assert_eq!(command_slot(&keyless), None);
    assert_eq!(command_slot(&redis::cmd("PING")), None);
}

#[test]
fn one_slot_pipelines_go_whole() {
    let a = get("p:{sess:a}:session");
    let b = redis::cmd("HGETALL").arg("p:{sess:a}:parts:m").clone();
    let ping = redis::cmd("PING");
    assert_eq!(plan(&[&a, &b, &ping]), Plan::Whole);
}

#[test]
fn cross_slot_reads_run_per_slot_at_once() {
    let (a, b) = (get("p:{sess:a}:session"), get("p:{sess:b}:session"));
    let a2 = redis::cmd("PTTL").arg("p:{sess:a}:lease").clone();
    assert_eq!(
        plan(&[&a, &b, &a2]),
        Plan::Concurrent(vec![vec![0, 2], vec![1]])
    );
}

#[test]
fn cross_slot_writes_keep_program_order() {
    let index = redis::cmd("ZADD").arg("p:sessions").arg(1).arg("a").clone();
    let tenant = redis::cmd("ZADD").arg("p:tenant:t:sessions").clone();
    let set = redis::cmd("SET").arg("p:{sess:a}:session").clone();
    let del = redis::cmd("DEL").arg("p:{sess:a}:events").clone();
    assert_eq!(
        plan(&[&index, &tenant, &set, &del]),
        Plan::Sequential(vec![vec![0], vec![1], vec![2, 3]])
    );
}

#[test]
fn wait_after_a_script_goes_whole_to_the_scripts_slot() {
    // `WAIT 1 100`: its first argument is a replica count, not a key.
    let script = redis::cmd("EVALSHA")
        .arg("abc")
        .arg(1)
        .arg("p:{sess:a}:session")
        .clone();
    let wait = redis::cmd("WAIT").arg(1).arg(100).clone();
    assert_eq!(command_slot(&wait), None);
    assert_eq!(plan(&[&script, &wait]), Plan::Whole);
}

/// The Redis connection a store's request took, as the server numbers it.
async fn client_id(store: &crate::store::Store) -> i64 {
    redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_connection_of_the_thread_serves_that_store_on_that_thread_only() {
    use crate::store::test_support::{redis_url, store};
    use crate::store::{RedisAccess, RedisTarget};
    let (mine, _) = store().await;
    let (other, _) = store().await;
    let shared = client_id(&mine).await;
    let others = client_id(&other).await;
    mine.connect_here(
        &RedisTarget::standalone(redis_url()),
        &RedisAccess::default(),
    )
    .await
    .unwrap();
    let here = client_id(&mine).await;
    assert_ne!(
        here, shared,
        "this thread's requests take its own connection"
    );
    assert_eq!(client_id(&mine.clone()).await, here, "clones share it");
    assert_eq!(
        client_id(&other).await,
        others,
        "another store keeps its connection"
    );
    // Another thread (its own runtime) still takes the shared one, which this runtime drives meanwhile.
    let elsewhere = tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(client_id(&mine))
    })
    .await
    .unwrap();
    assert_eq!(elsewhere, shared);
}
