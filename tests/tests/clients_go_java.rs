//! examples/go and examples/java built offline from Debian's packages (Go: golang-go, golang-google-grpc-dev,
//! golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev (grpc-go's codec calls it; the 1.3 series it
//! replaces cannot decode messages protoc-gen-go generates today), protoc-gen-go, protoc-gen-go-grpc,
//! protobuf-compiler, built in GOPATH mode against /usr/share/gocode; Java: a JDK, libgrpc-java, libprotobuf-java,
//! libnetty-java, libperfmark-java, libgeronimo-annotation-1.3-spec-java, protobuf-compiler-grpc-java-plugin), then run against the real processor, gateway and Redis with the demo provider.
//! scripts/install-test-deps.sh installs the packages (`make test` runs it first). Without them a test fails under CI
//! (`CI` set) and elsewhere skips, saying so loudly (service_kit::prerequisite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use e2e_tests::clients::{
    INSTALL, assert_example_conversation, client_env, demo_product, repo, run_ok, which,
};
use service_kit::prerequisite::skip_or_fail;

/// Whether every tool and path is there; if not, the test fails under CI, and elsewhere is skipped, saying so.
fn present(tools: &[&str], paths: &[&str], packages: &str) -> bool {
    let absent: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| which(t).is_none())
        .chain(paths.iter().copied().filter(|p| !Path::new(p).exists()))
        .collect();
    if absent.is_empty() {
        return true;
    }
    skip_or_fail(
        &format!("{absent:?} not installed"),
        &format!("apt-get install {packages}; {INSTALL}"),
    );
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_example_compiles_offline_against_debians_grpc_and_converses() {
    let packages = "golang-go golang-google-grpc-dev golang-google-protobuf-dev \
                    golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc protobuf-compiler";
    if !present(
        &["go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc"],
        &[
            "/usr/share/gocode/src/google.golang.org/grpc",
            "/usr/share/gocode/src/github.com/golang/protobuf/proto/wrappers.go",
        ],
        packages,
    ) {
        return;
    }
    let gopath = tempfile::tempdir().unwrap();
    let src = gopath.path().join("src");
    let example = repo().join("examples/go");
    run_ok(
        tokio::process::Command::new(example.join("generate.sh")).arg(&src),
        packages,
    )
    .await;
    let main_dir = src.join("llm/cmd/conversation");
    std::fs::create_dir_all(&main_dir).unwrap();
    std::fs::copy(
        example.join("cmd/conversation/main.go"),
        main_dir.join("main.go"),
    )
    .unwrap();
    let binary = gopath.path().join("conversation");
    // GOPATH mode: the generated packages under $GOPATH/src/llm, grpc and protobuf from Debian's source tree; no
    // module download. The build cache persists in target/ between runs.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build-cache");
    run_ok(
        tokio::process::Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(&main_dir)
            .env("GO111MODULE", "off")
            .env(
                "GOPATH",
                format!("{}:/usr/share/gocode", gopath.path().display()),
            )
            .env("GOCACHE", cache)
            .env("GOFLAGS", "")
            .env("GOPROXY", "off"),
        packages,
    )
    .await;

    let p = demo_product().await;
    let out = run_ok(
        tokio::process::Command::new(&binary).envs(client_env(&p)),
        "the Go example",
    )
    .await;
    assert_example_conversation(&String::from_utf8_lossy(&out.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_example_compiles_against_debians_grpc_java_and_converses() {
    let packages = "default-jdk-headless libgrpc-java libprotobuf-java libnetty-java libperfmark-java \
                    libgeronimo-annotation-1.3-spec-java protobuf-compiler \
                    protobuf-compiler-grpc-java-plugin";
    if !present(
        &["javac", "java", "protoc", "grpc_java_plugin"],
        &[
            "/usr/share/java/grpc-netty.jar",
            "/usr/share/java/perfmark-api.jar",
        ],
        packages,
    ) {
        return;
    }
    let out_dir = tempfile::tempdir().unwrap();
    let example = repo().join("examples/java");
    run_ok(
        tokio::process::Command::new(example.join("build.sh")).arg(out_dir.path()),
        packages,
    )
    .await;

    let p = demo_product().await;
    let out = run_ok(
        tokio::process::Command::new(example.join("run.sh"))
            .arg(out_dir.path())
            .envs(client_env(&p)),
        "the Java example",
    )
    .await;
    assert_example_conversation(&String::from_utf8_lossy(&out.stdout));
}

/// Under CI a missing toolchain fails the example's test, naming it and its package, instead of skipping: the Go
/// test run again (this very binary, that test alone) with `CI=1` and a PATH holding every tool it needs but `go`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_ci_the_go_test_fails_naming_go_when_it_is_missing() {
    let path = tempfile::tempdir().unwrap();
    for tool in ["protoc", "protoc-gen-go", "protoc-gen-go-grpc"] {
        if let Some(found) = which(tool) {
            std::os::unix::fs::symlink(found, path.path().join(tool)).unwrap();
        }
    }
    let out = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "clients_go_java::the_go_example_compiles_offline_against_debians_grpc_and_converses",
            "--exact",
            "--nocapture",
        ])
        .env("CI", "1")
        .env("PATH", path.path())
        .output()
        .await
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("1 failed"), "{said}");
    assert!(
        said.contains(r#"["go""#) && said.contains("not installed"),
        "{said}"
    );
    assert!(said.contains("apt-get install golang-go"), "{said}");
    assert!(said.contains("under CI a test never skips"), "{said}");
}
