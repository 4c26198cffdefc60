#!/usr/bin/env python3
"""Writes the Bedrock eventstream fixtures (shared/fake-provider/fixtures/bedrock/*.es) from their readable sources
(*.jsonl next to them): one message per line, {"event": name, "payload": {...}} or {"exception": name, "payload":
{...}}. The framing is encoded here independently of the gateway's Rust code (prelude, string headers, payload, both
CRC32s), so the decoder's tests read bytes it did not write itself. Run it after editing a .jsonl; the gateway's
tests fail when a .es file no longer matches its source."""

import json
import pathlib
import struct
import zlib

DIR = pathlib.Path(__file__).resolve().parent.parent / "shared" / "fake-provider" / "fixtures" / "bedrock"


def header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v


def message(headers: list, payload: bytes) -> bytes:
    head = b"".join(header(n, v) for n, v in headers)
    prelude = struct.pack(">II", 16 + len(head) + len(payload), len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def encode(line: dict) -> bytes:
    payload = json.dumps(line["payload"], separators=(",", ":"), ensure_ascii=False).encode()
    if "event" in line:
        headers = [(":event-type", line["event"]), (":content-type", "application/json"), (":message-type", "event")]
    else:
        headers = [(":exception-type", line["exception"]), (":content-type", "application/json"),
                   (":message-type", "exception")]
    return message(headers, payload)


def main() -> None:
    for source in sorted(DIR.glob("*.jsonl")):
        lines = [json.loads(l) for l in source.read_text().splitlines() if l.strip()]
        source.with_suffix(".es").write_bytes(b"".join(encode(l) for l in lines))


if __name__ == "__main__":
    main()
