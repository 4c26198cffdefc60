//! clients/python installed from the repository (`pip install clients/python`, which generates the stubs from
//! proto/), its own unittest suite, and examples/python/conversation.py, against the real processor, gateway and
//! Redis with the demo provider behind them. Both run under PYTHONOPTIMIZE, so no check may be an `assert`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::clients::{
    INSTALL, assert_example_conversation, client_env, demo_product, python3, repo, run_ok,
    unittest_passed,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_package_installs_from_the_repo_passes_its_tests_and_runs_the_example() {
    let p = demo_product().await;
    let site = tempfile::tempdir().unwrap();
    // Offline and from this checkout: no build isolation (setuptools and grpcio-tools are already installed).
    run_ok(
        tokio::process::Command::new(python3())
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-build-isolation",
                "--no-deps",
            ])
            .arg("--target")
            .arg(site.path())
            .arg(repo().join("clients/python")),
        INSTALL,
    )
    .await;
    let python = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(python3());
        cmd.args(args)
            .current_dir(site.path())
            .env("PYTHONPATH", site.path())
            .env("PYTHONOPTIMIZE", "2")
            .envs(client_env(&p));
        cmd
    };

    let tests = repo().join("clients/python/tests");
    let suite = run_ok(
        &mut python(&[
            "-m",
            "unittest",
            "discover",
            "-v",
            "-s",
            tests.to_str().unwrap(),
        ]),
        INSTALL,
    )
    .await;
    let mut passed = unittest_passed(&String::from_utf8_lossy(&suite.stderr));
    passed.sort();
    assert_eq!(
        passed,
        [
            "test_a_failing_handler_answers_an_error",
            "test_an_unknown_session_is_not_found",
            "test_an_unknown_token_is_unauthenticated",
            "test_channel_target_strips_the_scheme",
            "test_client_tool_schema_is_json",
            "test_create_session",
            "test_prompt_streams_text_until_done",
            "test_run_answers_client_tool_calls",
            "test_subscribe_replays_after_an_event_id",
        ],
        "{}",
        String::from_utf8_lossy(&suite.stderr)
    );

    let example = repo().join("examples/python/conversation.py");
    let out = run_ok(&mut python(&[example.to_str().unwrap()]), INSTALL).await;
    assert_example_conversation(&String::from_utf8_lossy(&out.stdout));
}
