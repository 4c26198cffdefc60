//! clients/node built from this checkout (types generated from proto/, TypeScript compiled), its own node:test
//! suite, and examples/node/conversation.mjs using it, against the real processor, gateway and Redis with the demo
//! provider behind them. The npm dependencies are installed by scripts/install-test-deps.sh (`npm ci` in both
//! folders), which `make test` runs first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::clients::{
    INSTALL, assert_example_conversation, client_env, demo_product, repo, run_ok, tap_passed,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_package_builds_from_the_repo_passes_its_tests_and_runs_the_example() {
    let package = repo().join("clients/node");
    for needed in [
        package.join("node_modules/@grpc/grpc-js"),
        package.join("node_modules/.bin/tsc"),
        repo().join("examples/node/node_modules/llm-grpc-client"),
    ] {
        assert!(
            needed.exists(),
            "{} is missing; {INSTALL}",
            needed.display()
        );
    }
    let p = demo_product().await;
    // The build the package's `prepare` runs, so the suite tests this checkout's source and protos.
    run_ok(
        tokio::process::Command::new("node")
            .arg("scripts/build.mjs")
            .current_dir(&package),
        INSTALL,
    )
    .await;
    let node = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new("node");
        cmd.args(args).envs(client_env(&p));
        cmd
    };

    let suite = run_ok(
        node(&[
            "--test",
            "--test-reporter=tap",
            "dist/test/sessions.test.js",
        ])
        .current_dir(&package),
        INSTALL,
    )
    .await;
    let stdout = String::from_utf8_lossy(&suite.stdout);
    let mut passed = tap_passed(&stdout);
    passed.sort();
    assert_eq!(
        passed,
        [
            "a failing handler answers an error",
            "against the services",
            "an unknown session is not found",
            "an unknown token is unauthenticated",
            "channelTarget strips the scheme",
            "createSession",
            "offline",
            "prompt streams text until done",
            "run answers client tool calls",
            "subscribe replays after an event id",
        ],
        "{stdout}"
    );

    let example = repo().join("examples/node/conversation.mjs");
    let out = run_ok(&mut node(&[example.to_str().unwrap()]), INSTALL).await;
    assert_example_conversation(&String::from_utf8_lossy(&out.stdout));
}
