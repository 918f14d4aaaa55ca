"""A minimal upstream client written only from docs/protocol.md, on the PyPI
`websockets` package (not our code), to prove the protocol is portable.

Usage: client.py BASE_URL MODE   (token in the EXO_TOKEN environment variable)

Modes:
  register   hello -> welcome -> a snapshot in two chunks with deltas between
             them -> one more delta -> prints READY, then stays connected and
             silent (no heartbeats) until stdin closes.
  oversized  registers, then sends a frame larger than 2 MiB.
  malformed  registers, then sends text that is not JSON.
  binary     registers, then sends a binary message.
  version    sends hello with protocol 999.
Except for `register`, prints one JSON line: {"status": ..} for a refused
upgrade, or {"close_code": .., "close_reason": ..} for a closed connection.
"""

import json
import os
import sys
import time
import uuid

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect


def resource(name, rv, phase="Active"):
    return {
        "kind": "Agent",
        "namespace": "py",
        "name": name,
        "uid": str(uuid.uuid4()),
        "resourceVersion": rv,
        "phase": phase,
        "status": {"phase": phase},
    }


def send(ws, frame):
    ws.send(json.dumps(frame))


def hello(protocol=1):
    return {
        "type": "hello",
        "protocol": protocol,
        "agent_version": "python-client/1",
        "boot_id": uuid.uuid4().hex,
        "connection_id": uuid.uuid4().hex,
        "host": {"hostname": "python", "os": sys.platform, "arch": "", "namespace": "py"},
    }


def wait_closed(ws):
    try:
        while True:
            ws.recv(timeout=30)
    except ConnectionClosed as e:
        rcvd = e.rcvd
        print(json.dumps({
            "close_code": rcvd.code if rcvd else None,
            "close_reason": rcvd.reason if rcvd else None,
        }), flush=True)


def main():
    base, mode = sys.argv[1], sys.argv[2]
    url = base.replace("http://", "ws://", 1).rstrip("/") + "/api/v1/connect"
    headers = {"Authorization": "Bearer " + os.environ["EXO_TOKEN"]}
    try:
        ws = connect(url, additional_headers=headers, max_size=None, open_timeout=10)
    except InvalidStatus as e:
        print(json.dumps({"status": e.response.status_code}), flush=True)
        return
    with ws:
        if mode == "version":
            send(ws, hello(999))
            wait_closed(ws)
            return
        send(ws, hello())
        welcome = json.loads(ws.recv(timeout=10))
        assert welcome["type"] == "welcome", welcome
        if mode == "register":
            send(ws, {"type": "snapshot", "snapshot_id": "s1", "chunk": 0, "last": False,
                      "resources": [resource("a", "1"), resource("b", "1")]})
            send(ws, {"type": "delta", "seq": 1, "op": "upsert", "resource": resource("a", "2")})
            send(ws, {"type": "delta", "seq": 2, "op": "remove", "resource": resource("b", "1")})
            send(ws, {"type": "snapshot", "snapshot_id": "s1", "chunk": 1, "last": True,
                      "resources": [resource("c", "1")]})
            send(ws, {"type": "delta", "seq": 3, "op": "upsert", "resource": resource("d", "1")})
            send(ws, {"type": "heartbeat", "sent_at_ms": int(time.time() * 1000), "resources": 3})
            send(ws, {"type": "audit", "at_ms": int(time.time() * 1000), "actor": "python",
                      "action": "client.registered", "target": "py", "outcome": "ok"})
            print("READY " + welcome["deployment"], flush=True)
            sys.stdin.read()  # stay connected (and silent) until stdin closes
            return
        if mode == "oversized":
            send(ws, {"type": "heartbeat", "sent_at_ms": 0, "pad": "x" * (2 * 1024 * 1024)})
        elif mode == "malformed":
            ws.send("{this is not json")
        elif mode == "binary":
            ws.send(b"\x00\x01binary")
        else:
            raise SystemExit("unknown mode " + mode)
        wait_closed(ws)


if __name__ == "__main__":
    main()
