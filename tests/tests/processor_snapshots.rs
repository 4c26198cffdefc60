//! Workspace snapshots end to end: both services on loopback, a fake provider, real Redis. A workspace session whose
//! steps write, edit and delete files gets one patch part per changing step listing exactly the files that step's
//! tools changed, a session summary with per-file line counts, and `GetDiff` over a step, a message and the session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{Product, get_session, messages, prompt, prompt_until_done, text_reply};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::file_change::Status as FileStatus;
use tonic_types::StatusExt;

/// An agent that may write, edit and run commands without asking.
const AGENT: &str = r#"
[agents.builder]
role_prompt = "You change files."
model = "openai/gpt-4o"
tools = ["read", "write", "edit", "bash"]
max_steps = 8
doom_loop = "deny"
permissions = [
  { tool = "write", decision = "allow" },
  { tool = "edit", decision = "allow" },
  { tool = "bash", decision = "allow" },
]
"#;

fn calls(id: &str, calls: &[(&str, &str, serde_json::Value)]) -> Reply {
    let mut stream = ChatStream::new("gpt-4o-2024-08-06", id);
    let args: Vec<String> = calls.iter().map(|(_, _, a)| a.to_string()).collect();
    for ((call, tool, _), args) in calls.iter().zip(&args) {
        stream = stream.tool_call(call, tool, &[args.as_str()]);
    }
    Reply::sse(stream.finish("tool_calls", Some((50, 10))))
}

fn text(id: &str, words: &[&str]) -> Reply {
    text_reply(id, words, (60, 5))
}

async fn create(p: &Product, agent: &str, workspace: &str) -> spb::Session {
    p.client()
        .await
        .create_session(spb::CreateSessionRequest {
            agent: agent.into(),
            workspace: workspace.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
}

fn change(path: &str, status: FileStatus, additions: u64, deletions: u64) -> spb::FileChange {
    spb::FileChange {
        path: path.into(),
        status: status as i32,
        additions,
        deletions,
        binary: false,
    }
}

/// The step-start, step-finish and patch parts of a message (one step per assistant message here).
struct Step {
    start: String,
    finish: String,
    patch: Option<spb::PatchPart>,
}

fn step(m: &spb::Message) -> Step {
    let mut s = Step {
        start: String::new(),
        finish: String::new(),
        patch: None,
    };
    let mut starts = 0;
    for p in &m.parts {
        match &p.kind {
            Some(spb::part::Kind::StepStart(x)) => {
                starts += 1;
                s.start.clone_from(&x.snapshot);
            }
            Some(spb::part::Kind::StepFinish(x)) => s.finish.clone_from(&x.snapshot),
            Some(spb::part::Kind::Patch(x)) => {
                assert!(s.patch.is_none(), "one patch per step");
                s.patch = Some(x.clone());
            }
            _ => {}
        }
    }
    assert_eq!(starts, 1, "one step per assistant message: {m:?}");
    s
}

fn tools_completed(m: &spb::Message) -> bool {
    m.parts.iter().all(|p| match &p.kind {
        Some(spb::part::Kind::Tool(t)) => {
            t.state.as_ref().unwrap().status() == spb::tool_state::Status::Completed
        }
        _ => true,
    })
}

fn diff_request(session_id: &str, message_id: &str, step: u32) -> spb::GetDiffRequest {
    spb::GetDiffRequest {
        session_id: session_id.into(),
        message_id: message_id.into(),
        step,
        include_patch: true,
    }
}

fn files(d: &spb::GetDiffResponse) -> Vec<spb::FileChange> {
    d.files.iter().map(|f| f.change.clone().unwrap()).collect()
}

fn patch_of<'a>(d: &'a spb::GetDiffResponse, path: &str) -> &'a str {
    let f = d
        .files
        .iter()
        .find(|f| f.change.as_ref().unwrap().path == path)
        .unwrap();
    assert!(!f.truncated);
    &f.patch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_session_whose_patches_list_exactly_the_files_each_step_changed() {
    let p = Product::start(AGENT).await;
    let session = create(&p, "builder", "proj").await;
    let ws = p.workspaces.path().join("proj");
    // Already there before the session's first step, and never touched: in no patch and not in the summary.
    std::fs::write(ws.join("README.md"), "# Project\n").unwrap();
    let fake = &p.gateway.openai;
    fake.push(calls(
        "chatcmpl-1",
        &[
            (
                "call_w1",
                "write",
                serde_json::json!({"path": "src/a.txt", "content": "alpha\nbeta\n"}),
            ),
            (
                "call_w2",
                "write",
                serde_json::json!({"path": "b.txt", "content": "one\n"}),
            ),
        ],
    ));
    fake.push(calls(
        "chatcmpl-2",
        &[
            (
                "call_e1",
                "edit",
                serde_json::json!({"path": "src/a.txt", "old": "beta\n", "new": "gamma\ndelta\n"}),
            ),
            (
                "call_b1",
                "bash",
                serde_json::json!({"command": "rm b.txt"}),
            ),
        ],
    ));
    fake.push(text("chatcmpl-3", &["All ", "done."]));
    let mut c = p.client().await;
    prompt_until_done(&mut c, prompt(&session.id, "build it")).await;

    let ms = messages(&mut c, &session.id).await;
    let assistants: Vec<&spb::Message> = ms
        .iter()
        .filter(|m| m.role() == spb::Role::Assistant)
        .collect();
    assert_eq!(assistants.len(), 3, "{ms:#?}");
    assert!(
        assistants.iter().all(|m| tools_completed(m)),
        "{assistants:#?}"
    );
    let (s1, s2, s3) = (
        step(assistants[0]),
        step(assistants[1]),
        step(assistants[2]),
    );

    // Step 1 wrote two files.
    let patch1 = s1.patch.clone().expect("step 1 changed files");
    assert_eq!(patch1.files, ["b.txt", "src/a.txt"]);
    assert_eq!(
        patch1.changes,
        [
            change("b.txt", FileStatus::Added, 1, 0),
            change("src/a.txt", FileStatus::Added, 2, 0),
        ]
    );
    assert_eq!(
        (patch1.hash.as_str(), patch1.after.as_str()),
        (s1.start.as_str(), s1.finish.as_str())
    );
    assert_eq!(s1.start.len(), 40, "a git tree id: {}", s1.start);
    assert_ne!(s1.start, s1.finish);
    // The patch part comes right after the step-finish part.
    let kinds: Vec<&str> = assistants[0]
        .parts
        .iter()
        .map(|p| match &p.kind {
            Some(spb::part::Kind::StepStart(_)) => "step-start",
            Some(spb::part::Kind::StepFinish(_)) => "step-finish",
            Some(spb::part::Kind::Patch(_)) => "patch",
            Some(spb::part::Kind::Tool(_)) => "tool",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["step-start", "tool", "tool", "step-finish", "patch"]
    );

    // Step 2 edited one and deleted the other; it starts where step 1 ended.
    let patch2 = s2.patch.clone().expect("step 2 changed files");
    assert_eq!(s2.start, s1.finish);
    assert_eq!(patch2.files, ["b.txt", "src/a.txt"]);
    assert_eq!(
        patch2.changes,
        [
            change("b.txt", FileStatus::Deleted, 0, 1),
            change("src/a.txt", FileStatus::Modified, 2, 1),
        ]
    );
    assert_eq!(
        (patch2.hash.as_str(), patch2.after.as_str()),
        (s2.start.as_str(), s2.finish.as_str())
    );

    // Step 3 only talked: its snapshots are equal and it has no patch.
    assert!(s3.patch.is_none());
    assert_eq!(
        (s3.start.as_str(), s3.finish.as_str()),
        (s2.finish.as_str(), s2.finish.as_str())
    );

    // The summary: first snapshot → latest. b.txt came and went; README.md was there before.
    let stored = get_session(&mut c, &session.id).await;
    assert_eq!(
        stored.summary,
        Some(spb::SessionSummary {
            additions: 3,
            deletions: 0,
            files: vec![change("src/a.txt", FileStatus::Added, 3, 0)],
            files_omitted: 0,
        })
    );

    // GetDiff: one step.
    let d = c
        .get_diff(diff_request(&session.id, &assistants[0].id, 1))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (d.from_snapshot.as_str(), d.to_snapshot.as_str()),
        (s1.start.as_str(), s1.finish.as_str())
    );
    assert_eq!(files(&d), patch1.changes);
    assert_eq!((d.additions, d.deletions), (3, 0));
    assert!(
        patch_of(&d, "src/a.txt").contains("+++ b/src/a.txt\n@@ -0,0 +1,2 @@\n+alpha\n+beta\n")
    );
    // One message (all its steps).
    let d = c
        .get_diff(diff_request(&session.id, &assistants[1].id, 0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(files(&d), patch2.changes);
    assert!(patch_of(&d, "src/a.txt").contains(" alpha\n-beta\n+gamma\n+delta\n"));
    assert!(patch_of(&d, "b.txt").contains("deleted file mode"));
    let d = c
        .get_diff(diff_request(&session.id, &assistants[2].id, 0))
        .await
        .unwrap()
        .into_inner();
    assert!(d.files.is_empty() && d.from_snapshot == d.to_snapshot);
    // The whole session, with and without patches.
    let d = c
        .get_diff(diff_request(&session.id, "", 0))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (d.from_snapshot.as_str(), d.to_snapshot.as_str()),
        (s1.start.as_str(), s3.finish.as_str())
    );
    assert_eq!(files(&d), [change("src/a.txt", FileStatus::Added, 3, 0)]);
    assert_eq!((d.additions, d.deletions), (3, 0));
    assert!(patch_of(&d, "src/a.txt").contains("+alpha\n+gamma\n+delta\n"));
    let totals = c
        .get_diff(spb::GetDiffRequest {
            include_patch: false,
            ..diff_request(&session.id, "", 0)
        })
        .await
        .unwrap()
        .into_inner();
    assert!(totals.files.iter().all(|f| f.patch.is_empty()));
    assert_eq!(files(&totals), files(&d));

    // Snapshots live outside the workspace, which never gets a `.git`.
    let snapshot_dir = p.engine.config().snapshots.root.join(&session.id);
    assert!(
        snapshot_dir.join("HEAD").exists(),
        "{}",
        snapshot_dir.display()
    );
    assert!(!snapshot_dir.starts_with(&ws));
    assert!(!ws.join(".git").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.txt")).unwrap(),
        "alpha\ngamma\ndelta\n"
    );

    // Deleting the session deletes its snapshots at once.
    let other = create(&p, "builder", "other").await;
    let other_dir = p.engine.config().snapshots.root.join(&other.id);
    std::fs::create_dir_all(&other_dir).unwrap();
    c.delete_session(spb::DeleteSessionRequest {
        session_id: session.id.clone(),
    })
    .await
    .unwrap();
    assert!(
        !snapshot_dir.exists(),
        "DeleteSession removed the snapshots"
    );
    // The sweeper removes what another replica's DeleteSession could not reach (a root that is not shared).
    let orphan = p
        .engine
        .config()
        .snapshots
        .root
        .join("ses_00000000000000000000000000");
    std::fs::create_dir_all(&orphan).unwrap();
    let removed =
        session_processor::snapshot::sweep(&p.engine.config().snapshots, p.engine.store())
            .await
            .unwrap();
    assert_eq!(removed, 1);
    assert!(!orphan.exists());
    assert!(other_dir.exists(), "a live session's snapshots stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_diff_errors_name_the_problem() {
    let p = Product::start(AGENT).await;
    let mut c = p.client().await;
    let with_ws = create(&p, "builder", "errs").await;
    let without = create(&p, "builder", "").await;
    p.gateway
        .openai
        .push(text("chatcmpl-1", &["Nothing ", "to do."]));
    prompt_until_done(&mut c, prompt(&with_ws.id, "hello")).await;
    let ms = messages(&mut c, &with_ws.id).await;
    let user = ms.iter().find(|m| m.role() == spb::Role::User).unwrap();
    let assistant = ms
        .iter()
        .find(|m| m.role() == spb::Role::Assistant)
        .unwrap();

    let field = |s: &tonic::Status| {
        s.get_details_bad_request()
            .and_then(|b| b.field_violations.first().map(|v| v.field.clone()))
            .unwrap_or_default()
    };
    let e = c.get_diff(diff_request("", "", 0)).await.unwrap_err();
    assert_eq!(
        (e.code(), field(&e).as_str()),
        (tonic::Code::InvalidArgument, "session_id")
    );
    let e = c
        .get_diff(diff_request(&with_ws.id, "", 2))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), field(&e).as_str()),
        (tonic::Code::InvalidArgument, "step")
    );
    let e = c
        .get_diff(diff_request(&with_ws.id, &user.id, 0))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), field(&e).as_str()),
        (tonic::Code::InvalidArgument, "message_id")
    );
    let e = c
        .get_diff(diff_request("ses_00000000000000000000000", "", 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let e = c
        .get_diff(diff_request(&with_ws.id, "msg_00000000000000000000000", 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let e = c
        .get_diff(diff_request(&with_ws.id, &assistant.id, 2))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    assert!(e.message().contains("has 1 step"), "{e:?}");
    let e = c
        .get_diff(diff_request(&without.id, "", 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");

    // The step that ran is there, and changed nothing.
    let d = c
        .get_diff(diff_request(&with_ws.id, &assistant.id, 1))
        .await
        .unwrap()
        .into_inner();
    assert!(d.files.is_empty());
    assert_eq!(d.from_snapshot, d.to_snapshot);
    assert_eq!(d.from_snapshot.len(), 40);

    // Authenticated like every other call.
    let mut anonymous = p.client_with_token("not-a-valid-token-0123456789").await;
    let e = anonymous
        .get_diff(diff_request(&with_ws.id, "", 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
}
