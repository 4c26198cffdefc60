use super::*;

#[tokio::test(flavor = "current_thread")]
async fn large_work_runs_off_the_calling_thread_and_small_work_on_it() {
    let here = std::thread::current().id();
    assert_eq!(run(false, move || std::thread::current().id()).await, here);
    assert_ne!(run(true, move || std::thread::current().id()).await, here);
    let g = pb::Generation {
        tools: vec![pb::Tool::default(); LARGE_REQUEST_ITEMS + 1],
        ..Default::default()
    };
    assert!(is_large(&g));
    assert!(!is_large(&pb::Generation::default()));
}
