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
