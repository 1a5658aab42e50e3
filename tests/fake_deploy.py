"""A stand-in for ``swift deploy`` in the quick endpoint tests: the same routes the service uses
(``/health``, ``/v1/models``, ``/v1/chat/completions`` with and without ``"stream": true``),
listening where ``--host``/``--port`` say, answering at once. The real server on the tiny model
is exercised in tests/e2e/test_swift_deploy_endpoint.py; this one keeps the proxy, idle and
quota tests from waiting a minute for torch to load each time.

``--model PATH`` names the served model (its last path part, as ms-swift does); ``--fail_health``
makes ``/health`` answer 503 forever (a server that never gets ready); ``--stream_gate FILE`` holds a
streamed answer after its first chunk until FILE exists (at most 30 s), then says ``gate`` opened
or timed out in one more event: a client that makes FILE when the first chunk reaches it shows
the chunks passed through as they came, not held to the end. ``--crash TEXT`` prints TEXT and exits 3
at once (a server that fails to start). Other arguments are ignored. It exits by itself after
``LIFETIME`` seconds: an endpoint a failed test left running (it outlives its server, as jobs do)
does not outlive the test run for long.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="0.0.0.0")
parser.add_argument("--port", type=int, default=8000)
parser.add_argument("--model", default="fake")
parser.add_argument("--fail_health", action="store_true")
parser.add_argument("--stream_gate", default="")
parser.add_argument("--crash", default="")
args, _ = parser.parse_known_args()
LIFETIME = 600.0
MODEL = os.path.basename(args.model.rstrip("/"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/health":
            self._send(503 if args.fail_health else 200, b"")
        elif self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "swift"}]})
        else:
            self._json({"detail": "Not Found"}, 404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path != "/v1/chat/completions":
            self._json({"detail": "Not Found"}, 404)
            return
        words = ["echo:", *str(body["messages"][-1]["content"]).split()]
        if not body.get("stream"):
            message = {"role": "assistant", "content": " ".join(words)}
            self._json({"object": "chat.completion", "model": MODEL, "choices": [{"index": 0, "message": message}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, word in enumerate(words):
            chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": word}}]}
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            if i == 0 and args.stream_gate:
                deadline = time.monotonic() + 30
                while not os.path.exists(args.stream_gate) and time.monotonic() < deadline:
                    time.sleep(0.05)
                gate = "opened" if os.path.exists(args.stream_gate) else "timed out"
        if args.stream_gate:
            self._chunk(f"data: {json.dumps({'gate': gate})}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, value, status=200):
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send(self, status, data, content_type="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):  # the job's log: one line per request
        print(self.requestline, flush=True)


if args.crash:
    print(args.crash, flush=True)
    raise SystemExit(3)
print(f"fake swift deploy: serving {MODEL} on http://{args.host}:{args.port}", flush=True)
threading.Timer(LIFETIME, os._exit, [0]).start()
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
