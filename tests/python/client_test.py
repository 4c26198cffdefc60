"""A Python caller of the session-processor, with a client generated from proto/ at test time.

Run by the Rust test `python_client` (tests/tests/python_client.rs), which starts both services, Redis and the fake
provider and passes their addresses: PROCESSOR_ADDR, PROCESSOR_TOKEN, OUT_DIR (where the generated code goes).
Each check prints `ok: <name>` when it holds and exits non-zero at the first that does not; the Rust side compares
the names printed with the list it expects, so a check that never ran fails the test. Checks are plain `if`s, not
`assert` statements, so they still run under PYTHONOPTIMIZE.
"""

import os
import subprocess
import sys


def check(ok: bool, name: str, detail: object = "") -> None:
    """Prints `ok: name`, or exits non-zero naming the failed check."""
    if not ok:
        print(f"FAILED: {name}: {detail!r}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {name}", flush=True)


def generate(proto_root: str, out_dir: str) -> None:
    subprocess.run(
        [
            sys.executable, "-m", "grpc_tools.protoc",
            "-I", proto_root,
            "--python_out", out_dir,
            "--grpc_python_out", out_dir,
            "llm/sessions/v1/sessions.proto",
        ],
        check=True,
    )


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    proto_root = os.path.join(here, "..", "..", "proto")
    out_dir = os.environ["OUT_DIR"]
    generate(proto_root, out_dir)
    for pkg in ("llm", "llm/sessions", "llm/sessions/v1"):
        open(os.path.join(out_dir, pkg, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)

    import grpc
    from llm.sessions.v1 import sessions_pb2 as pb
    from llm.sessions.v1 import sessions_pb2_grpc as rpc

    metadata = [("authorization", "Bearer " + os.environ["PROCESSOR_TOKEN"])]
    with grpc.insecure_channel(os.environ["PROCESSOR_ADDR"]) as channel:
        stub = rpc.SessionServiceStub(channel)
        session = stub.CreateSession(pb.CreateSessionRequest(), metadata=metadata).session
        check(session.id.startswith("ses_"), "create_session", session.id)

        prompt = pb.PromptRequest(session_id=session.id, parts=[pb.PromptPart(text="Hello from Python")])
        streamed = ""
        done = False
        for resp in stub.Prompt(prompt, metadata=metadata, timeout=30):
            kind = resp.event.WhichOneof("event")
            if kind == "part_delta":
                streamed += resp.event.part_delta.delta
            elif kind == "done":
                done = True
                break
        check(done, "prompt_ends_with_done")
        check(streamed == "Hello from the fake provider.", "prompt_streams_text", streamed)

        messages = stub.ListMessages(pb.ListMessagesRequest(session_id=session.id), metadata=metadata).messages
        check([m.role for m in messages] == [pb.ROLE_USER, pb.ROLE_ASSISTANT], "list_messages_roles", messages)
        texts = [p.text.text for p in messages[1].parts if p.WhichOneof("kind") == "text"]
        check(texts == ["Hello from the fake provider."], "answer_persisted", texts)
        check(messages[1].finish == "stop", "answer_finish", messages[1].finish)
        check(messages[1].cost_nano_usd > 0, "answer_cost", messages[1].cost_nano_usd)

        try:
            stub.GetSession(pb.GetSessionRequest(session_id=session.id))
            code = None
        except grpc.RpcError as e:
            code = e.code()
        check(code == grpc.StatusCode.UNAUTHENTICATED, "no_token_unauthenticated", code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
