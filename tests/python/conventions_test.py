"""The gRPC conventions as a Python caller sees them, against both running services.

Run by the Rust test `grpc_conventions` (tests/tests/grpc_conventions.rs), which starts both services, Redis and the
fake provider and passes GATEWAY_ADDR, GATEWAY_TOKEN, PROCESSOR_ADDR, PROCESSOR_TOKEN and OUT_DIR (where the code
generated from proto/ goes). Prints one JSON object of what it found, which the Rust test asserts; exits non-zero
when a call fails in a way no assertion expects.

The channel options are the client settings docs/operations.md ("Client settings") documents.
"""

import json
import os
import subprocess
import sys

MIB = 1024 * 1024

# docs/operations.md, "Client settings".
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 32 * MIB),
    ("grpc.max_receive_message_length", 32 * MIB),
    ("grpc.keepalive_time_ms", 30000),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


def generate(proto_root: str, out_dir: str) -> None:
    subprocess.run(
        [
            sys.executable, "-m", "grpc_tools.protoc",
            "-I", proto_root,
            "--python_out", out_dir,
            "--grpc_python_out", out_dir,
            "llm/gateway/v1/gateway.proto",
            "llm/sessions/v1/sessions.proto",
        ],
        check=True,
    )
    for pkg in ("llm", "llm/gateway", "llm/gateway/v1", "llm/sessions", "llm/sessions/v1"):
        open(os.path.join(out_dir, pkg, "__init__.py"), "a").close()


def reflection(channel) -> dict:
    """What `grpc.reflection.v1alpha` (the version grpcio-reflection speaks) says the server serves."""
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    db = ProtoReflectionDescriptorDatabase(channel)
    services = sorted(db.get_services())
    methods = {}
    for name in services:
        file = db.FindFileContainingSymbol(name)
        for svc in file.service:
            full = (file.package + "." if file.package else "") + svc.name
            if full == name:
                methods[name] = sorted(m.name for m in svc.method)
    return {"services": services, "methods": methods}


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = os.environ["OUT_DIR"]
    generate(os.path.join(here, "..", "..", "proto"), out_dir)
    sys.path.insert(0, out_dir)

    import grpc
    from llm.gateway.v1 import gateway_pb2 as gpb
    from llm.gateway.v1 import gateway_pb2_grpc as grpc_gateway
    from llm.sessions.v1 import sessions_pb2 as spb
    from llm.sessions.v1 import sessions_pb2_grpc as grpc_sessions

    found = {}
    gateway_auth = [("authorization", "Bearer " + os.environ["GATEWAY_TOKEN"])]
    processor_auth = [("authorization", "Bearer " + os.environ["PROCESSOR_TOKEN"])]

    with grpc.insecure_channel(os.environ["GATEWAY_ADDR"], options=CHANNEL_OPTIONS) as channel:
        found["gateway_reflection"] = reflection(channel)
        stub = grpc_gateway.GatewayServiceStub(channel)
        # A 5 MiB prompt, gzip-compressed both ways.
        big = "x" * (5 * MIB)
        gen = gpb.Generation(
            model="openai/gpt-4o",
            messages=[gpb.Message(role=gpb.ROLE_USER, parts=[gpb.Part(text=gpb.TextPart(text=big))])],
        )
        text = ""
        finish = ""
        for ev in stub.Stream(
            gpb.StreamRequest(generation=gen),
            metadata=gateway_auth,
            timeout=60,
            compression=grpc.Compression.Gzip,
        ):
            kind = ev.WhichOneof("event")
            if kind == "text_delta":
                text += ev.text_delta.delta
            elif kind == "step_finish":
                finish = ev.step_finish.raw_finish_reason or "finished"
            elif kind == "error":
                finish = "error: " + ev.error.message
        found["gateway_big_prompt"] = {"text": text, "finish": finish}

    with grpc.insecure_channel(os.environ["PROCESSOR_ADDR"], options=CHANNEL_OPTIONS) as channel:
        found["processor_reflection"] = reflection(channel)
        stub = grpc_sessions.SessionServiceStub(channel)
        session = stub.CreateSession(
            spb.CreateSessionRequest(), metadata=processor_auth, compression=grpc.Compression.Gzip
        ).session
        # A prompt over the processor's 3 MiB content limit: RESOURCE_EXHAUSTED naming the field.
        try:
            for _ in stub.Prompt(
                spb.PromptRequest(session_id=session.id, parts=[spb.PromptPart(text="y" * (5 * MIB))]),
                metadata=processor_auth,
                timeout=60,
            ):
                pass
            found["processor_big_prompt"] = "accepted"
        except grpc.RpcError as e:
            found["processor_big_prompt"] = {"code": e.code().name, "details": e.details()}
        # A prompt at the limit, read back through its own Prompt stream and ListMessages.
        at_limit = "z" * (3 * MIB - 64)
        echoed = 0
        streamed = ""
        error = ""
        for resp in stub.Prompt(
            spb.PromptRequest(session_id=session.id, parts=[spb.PromptPart(text=at_limit)]),
            metadata=processor_auth,
            timeout=60,
            compression=grpc.Compression.Gzip,
        ):
            kind = resp.event.WhichOneof("event")
            if kind == "part_updated" and resp.event.part_updated.WhichOneof("kind") == "text":
                echoed = max(echoed, len(resp.event.part_updated.text.text))
            elif kind == "part_delta":
                streamed += resp.event.part_delta.delta
            elif kind == "error":
                error = str(resp.event.error)
            elif kind == "done":
                break
        messages = stub.ListMessages(spb.ListMessagesRequest(session_id=session.id), metadata=processor_auth).messages
        found["processor_limit_prompt"] = {
            "echoed": echoed,
            "streamed": streamed,
            "error": error,
            "stored": [len(p.text.text) for m in messages for p in m.parts if p.WhichOneof("kind") == "text"],
        }

    print(json.dumps(found, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
