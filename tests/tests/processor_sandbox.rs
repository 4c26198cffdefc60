//! The bash sandbox end to end: a session's model-written commands try to read another session's workspace,
//! `/etc/shadow` and the processor's environment, write into another workspace and onto the root, reach the gateway over the network,
//! fork-bomb and print a gigabyte. Each is refused or capped, the other session's files are untouched, and the
//! processor keeps serving. A processor whose sandbox cannot start says so at start-up and offers no `bash`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use e2e_tests::processor::{
    PROCESSOR_TOKEN, ProcessorSetup, Product, client_at, create_session, messages, prompt,
    prompt_until_done, redis_url, tool_calls_reply,
};
use e2e_tests::{Harness, TOKEN};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;

const AGENT: &str = r#"
[agents.shell]
role_prompt = "You run commands."
model = "openai/gpt-4o"
tools = ["read", "write", "bash"]
max_steps = 4
doom_loop = "allow"
permissions = [
  { tool = "write", decision = "allow" },
  { tool = "bash", decision = "allow" },
]
bash = { timeout_ms = 3000, max_processes = 64 }
"#;

fn text(id: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", id)
            .text(&["Done."])
            .finish("stop", Some((60, 5))),
    )
}

async fn session(p: &Product, workspace: &str) -> spb::Session {
    create_session(&mut p.client().await, session_in("shell", workspace)).await
}

/// Every file named `name` under `dir` (wherever the processor lays workspaces out).
fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if entry.file_name() == name {
                found.push(path);
            }
        }
    }
    found
}

/// `(status, output or error)` of each tool call of the session, by call id.
async fn tool_results(
    p: &Product,
    session_id: &str,
) -> std::collections::BTreeMap<String, (bool, String)> {
    let mut results = std::collections::BTreeMap::new();
    for m in messages(&mut p.client().await, session_id).await {
        for part in m.parts {
            if let Some(spb::part::Kind::Tool(t)) = part.kind {
                let state = t.state.unwrap();
                let result = match state.status() {
                    spb::tool_state::Status::Completed => (true, state.output),
                    spb::tool_state::Status::Error => (false, state.error),
                    // Neither done nor failed: said, so an assertion on the text names it.
                    other => (false, format!("(status {other:?}) {}", state.error)),
                };
                results.insert(t.call_id, result);
            }
        }
    }
    results
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_commands_are_refused_or_capped_and_the_processor_carries_on() {
    // The fork bomb starves the machine by design; the harness's 1.5 s lease could then go unrenewed, and the loop
    // would hand the session off (no recovery runs here) with the bomb's call left running. This test is about
    // containment, so the lease outlasts the bomb.
    let p = Product::start_setup(
        "",
        ProcessorSetup {
            extra: AGENT.into(),
            redis_lines: "lease_ttl_ms = 20000\n".into(),
            ..Default::default()
        },
    )
    .await;
    let fake = &p.gateway.openai;

    // The victim's session writes a secret into its workspace (through the processor's own write tool).
    let victim = session(&p, "victim").await;
    fake.push(tool_calls_reply(
        "chatcmpl-v1",
        &[(
            "call_w",
            "write",
            serde_json::json!({"path": "secret.txt", "content": "victim-secret-42\n"}),
        )],
    ));
    fake.push(text("chatcmpl-v2"));
    prompt_until_done(&mut p.client().await, prompt(&victim.id, "store it")).await;
    let secret = find(p.workspaces.path(), "secret.txt");
    assert_eq!(secret.len(), 1, "{secret:?}");
    let secret = &secret[0];
    // Into the victim's workspace, which the attacker's sandbox does not have; and onto the sandbox's read-only root.
    let escape = secret.parent().unwrap().join("escaped.txt");
    let root_escape = PathBuf::from(format!(
        "/escaped-{}",
        session_processor::ids::new("sandbox")
    ));

    let attacker = session(&p, "attacker").await;
    let gateway_port = p.gateway.addr.port();
    let attempts = [
        ("read_other", format!("cat {}", secret.display())),
        ("shadow", "cat /etc/shadow".to_owned()),
        ("env", "env".to_owned()),
        (
            "write_other",
            format!("echo x > {} && echo wrote", escape.display()),
        ),
        (
            "write_root",
            format!("echo x > {} && echo wrote", root_escape.display()),
        ),
        (
            "network",
            format!(
                "perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{gateway_port}\", Timeout => 3) or die \"refused: $!\\n\"; print \"connected\\n\"'"
            ),
        ),
        ("fork_bomb", "f() { f | f & }; f; sleep 30".to_owned()),
        ("gigabyte", "head -c 1073741824 /dev/zero".to_owned()),
    ];
    let step: Vec<(&str, &str, serde_json::Value)> = attempts
        .iter()
        .map(|(id, command)| (*id, "bash", serde_json::json!({ "command": command })))
        .collect();
    fake.push(tool_calls_reply("chatcmpl-a1", &step));
    fake.push(text("chatcmpl-a2"));
    let started = Instant::now();
    prompt_until_done(&mut p.client().await, prompt(&attacker.id, "go")).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );

    let results = tool_results(&p, &attacker.id).await;
    let get = |id: &str| {
        results
            .get(id)
            .cloned()
            .unwrap_or_else(|| panic!("no result for {id}: {results:#?}"))
    };
    for id in ["read_other", "shadow"] {
        let (ok, out) = get(id);
        assert!(
            ok && out.contains("No such file or directory"),
            "{id}: {out}"
        );
        assert!(!out.contains("victim-secret-42"), "{id} leaked: {out}");
    }
    // `env` ran and printed the sandbox's environment (so the absence below is a finding, not a failed command).
    let (ok, env) = get("env");
    assert!(ok && env.starts_with("exit code: 0\nstdout:\n"), "{env}");
    let vars: Vec<&str> = env.lines().skip(2).collect();
    for needed in ["PATH=", "HOME="] {
        assert!(
            vars.iter().any(|v| v.starts_with(needed)),
            "{needed} missing: {env}"
        );
    }
    for leaked in ["REDIS_URL", "redis://", TOKEN, PROCESSOR_TOKEN, "GATEWAY"] {
        assert!(!env.contains(leaked), "{leaked} in the environment: {env}");
    }
    // Each write failed in the command itself, saying why (dash's words or bash's for a missing directory), and
    // nothing appeared on the host.
    for (id, host, refusal) in [
        (
            "write_other",
            &escape,
            &["Directory nonexistent", "No such file or directory"][..],
        ),
        ("write_root", &root_escape, &["Read-only file system"][..]),
    ] {
        let (ok, out) = get(id);
        assert!(
            ok && out.starts_with("exit code: ") && !out.starts_with("exit code: 0"),
            "{id}: {out}"
        );
        assert!(
            refusal.iter().any(|r| out.contains(r)) && !out.contains("\nwrote"),
            "{id}: {out}"
        );
        assert!(!host.exists(), "{id}: {} was created", host.display());
    }
    let (_, network) = get("network");
    assert!(
        network.contains("refused:") && !network.contains("connected"),
        "{network}"
    );
    // Contained either way: the timeout kills it (a tool error), or the process limit stops the shell's own last
    // fork first and it exits (ordinary output: an exit code and the shell's complaint). Which comes first is the
    // scheduler's race.
    let (ok, bomb) = get("fork_bomb");
    assert!(
        (!ok && bomb.starts_with("timed out after 3 s"))
            || (ok && bomb.starts_with("exit code:") && bomb.contains("Cannot fork")),
        "{bomb}"
    );
    let (ok, gigabyte) = get("gigabyte");
    assert!(
        !ok && gigabyte.starts_with("output limit:"),
        "{}",
        &gigabyte[..gigabyte.len().min(300)]
    );
    assert!(
        gigabyte.len() < 128 * 1024,
        "{} bytes reached the model",
        gigabyte.len()
    );

    // The victim's files are as they were, and the processor still serves both sessions.
    assert_eq!(
        std::fs::read_to_string(secret).unwrap(),
        "victim-secret-42\n"
    );
    fake.push(tool_calls_reply(
        "chatcmpl-v3",
        &[(
            "call_cat",
            "bash",
            serde_json::json!({"command": "cat secret.txt"}),
        )],
    ));
    fake.push(text("chatcmpl-v4"));
    prompt_until_done(&mut p.client().await, prompt(&victim.id, "show it")).await;
    let (ok, own) = tool_results(&p, &victim.id).await["call_cat"].clone();
    assert!(
        ok && own.contains("victim-secret-42"),
        "a session still reads its own workspace: {own}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_whose_sandbox_cannot_start_says_so_and_offers_no_bash() {
    let gateway = Harness::start().await;
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("e2e:{}:", session_processor::ids::new("nobash"));
    let config = dir.path().join("processor.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[gateway]\nurl = \"http://{}\"\n[redis]\nprefix = \"{prefix}\"\n\
             [titles]\nenabled = false\n[tools.bash]\nbwrap = \"bwrap-is-not-installed\"\n{AGENT}",
            gateway.addr
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_processor_replica"));
    cmd.arg(&config)
        .env("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN)
        .env("GATEWAY_TOKEN", TOKEN)
        .env("REDIS_URL", redis_url())
        .env("PROCESSOR_WORKSPACE_ROOT", dir.path());
    let processor = e2e_tests::service::start(cmd, "session-processor listening on ")
        .await
        .unwrap();
    let lines = processor.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("bash is disabled") && l.contains("bwrap-is-not-installed")),
        "{lines:#?}"
    );

    let mut client = client_at(&processor.addr, PROCESSOR_TOKEN).await;
    let session = create_session(&mut client, session_in("shell", "w")).await;
    gateway.openai.push(text("chatcmpl-n1"));
    prompt_until_done(&mut client, prompt(&session.id, "hi")).await;
    let request = gateway.openai.requests().pop().unwrap().json();
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        offered.contains(&"read") && !offered.contains(&"bash"),
        "{offered:?}"
    );
}

/// A session of `agent` in `workspace`.
fn session_in(agent: &str, workspace: &str) -> spb::CreateSessionRequest {
    spb::CreateSessionRequest {
        agent: agent.into(),
        workspace: workspace.into(),
        ..Default::default()
    }
}
