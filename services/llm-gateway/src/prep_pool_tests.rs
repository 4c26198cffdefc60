use super::*;

#[tokio::test(flavor = "current_thread")]
async fn work_runs_on_a_preparation_thread_and_its_result_comes_back() {
    let here = std::thread::current().id();
    let (thread, name) = run(|| {
        let t = std::thread::current();
        (t.id(), t.name().map(str::to_owned))
    })
    .await;
    assert_ne!(thread, here);
    assert!(name.is_some_and(|n| n.starts_with("prep-")));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn preparation_threads_run_under_the_idle_policy() {
    use thread_priority::unix::{NormalThreadSchedulePolicy, ThreadSchedulePolicy};
    let policy = run(thread_priority::unix::thread_schedule_policy)
        .await
        .unwrap();
    assert_eq!(
        policy,
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle)
    );
}

#[tokio::test]
async fn a_panic_in_the_work_reaches_the_caller_and_the_pool_keeps_serving() {
    let caught = tokio::spawn(run(|| -> u8 { panic!("bad request") })).await;
    let panic = caught.unwrap_err().into_panic();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"bad request"));
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    for i in 0..threads * 2 {
        assert_eq!(run(move || i).await, i);
    }
}
