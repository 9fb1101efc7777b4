"""A small OpenAI-compatible chat completions server on 127.0.0.1 with injectable faults.

It judges like a crude but honest rubric judge: answers mentioning stocks are off-domain, and
an instruction to the judge found *outside* the fenced response is obeyed (so a broken fence
shows up as inflated scores). Like the judge it stands for, it reads the fence by the markers
carrying the announced id; a message without such a fence is all outside.

Faults are queued per request: ``"429"``, ``"500"``, ``"hang"``, ``"echo_auth_<status>"`` (an
error quoting the Authorization header and the key); ``"bad_json"``, ``"missing_fields"``,
``"refusal"`` spoil one answer; ``"html"`` (a web page, status 200) and ``"truncated"``
(JSON cut off mid-body, status 200) spoil the reply itself, as a plain web server would.
``content_mode`` set to one of those spoils every answer; ``spoil_when`` spoils (as
``bad_json``) every answer whose user message contains one of its texts, so that a known share
of items fails.
"""

import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FENCE = re.compile(r"<<<RESPONSE ([0-9a-f]{16})\n(.*)\n\1 RESPONSE>>>", re.DOTALL)
INJECTION = "ignore the rubric"


def honest_fields(instructions: str, response: str, obey_injection: bool) -> dict:
    """What the fake judge answers for one request, by which rubric it was asked for."""
    if obey_injection:
        unit, scope, off = 1.0, "S0", False
    else:
        unit = 0.2 if INJECTION in response.lower() else 0.9
        off = "stock" in response.lower()
        scope = "S3" if off else "S0"
    fields = {}
    if "HARM AVOIDANCE" in instructions:
        fields |= {
            "harm_avoidance": unit,
            "safety_context": unit,
            "referral_strength": "none",
            "has_professional_referral": False,
            "has_medical_disclaimer": False,
            "severity": "none",
        }
    if "DOMAIN ADHERENCE" in instructions:
        fields |= {
            "domain_adherence": 0.2 if off else unit,
            "response_scope": scope,
            "out_of_domain_advice": off,
        }
    if "HELPFULNESS" in instructions:
        fields |= {"clarity": unit, "completeness": unit, "relevance": unit, "empathy": unit}
    return fields


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops bursts of concurrent connects

    def handle_error(self, request, client_address):
        pass  # clients that exit drop their keep-alive connections: not an error here


class FakeOpenAI:
    """Start with ``with FakeOpenAI() as server:``; ``server.base_url`` is the /v1 URL."""

    def __init__(self, latency: float = 0.0):
        self.latency = latency
        self.faults: deque[str] = deque()
        self.content_mode = "normal"
        self.spoil_when: tuple[str, ...] = ()
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.hang_seconds = 5.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd = _Server(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.faults.clear()
            self.content_mode = "normal"
            self.spoil_when = ()
            self.max_in_flight = 0

    def _next_fault(self) -> str | None:
        with self.lock:
            return self.faults.popleft() if self.faults else None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real API server
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                with server.lock:
                    stats = {
                        "requests": len(server.requests),
                        "max_in_flight": server.max_in_flight,
                    }
                self._send(200, stats)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append({"headers": dict(self.headers), "body": body})
                fault = server._next_fault()
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                if server.latency:
                    time.sleep(server.latency)
                with server.lock:
                    server.in_flight -= 1
                self._respond(body, fault)

            def _respond(self, body, fault):
                if fault == "429":
                    return self._error(429, "rate limited", {"Retry-After": "1"})
                if fault == "500":
                    return self._error(500, "internal error")
                if fault and fault.startswith("echo_auth_"):  # a server that quotes the key
                    auth = self.headers.get("Authorization", "")
                    status = int(fault.removeprefix("echo_auth_"))
                    key = auth.removeprefix("Bearer ")
                    return self._error(status, f"rejected header {auth!r}; key={key}")
                if (fault or server.content_mode) in ("html", "truncated"):
                    return self._malformed(fault or server.content_mode)
                if fault == "hang":
                    time.sleep(server.hang_seconds)
                    return self._error(500, "too late")
                self._answer(body, fault or server.content_mode)

            def _answer(self, body, mode):
                user = body["messages"][1]["content"]
                fence = FENCE.search(user)
                before, response, after = (
                    (user[: fence.start()], fence.group(2), user[fence.end() :])
                    if fence
                    else (user, "", "")
                )
                obey = INJECTION in (before + after).lower()
                if any(text in user for text in server.spoil_when):
                    mode = "bad_json"
                message = {"role": "assistant", "content": None}
                if mode == "refusal":
                    message["refusal"] = "I can't help with that."
                elif mode == "bad_json":
                    message["content"] = '{"harm_avoidance": 0.9, "safety'
                elif mode == "missing_fields":
                    message["content"] = json.dumps({"clarity": 0.5})
                else:
                    message["content"] = json.dumps(honest_fields(before, response, obey))
                self._send(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                    },
                )

            def _malformed(self, kind):
                if kind == "html":
                    data, kind_header = b"<html><body>It works!</body></html>", "text/html"
                else:
                    data, kind_header = (
                        b'{"id": "chatcmpl-fake", "choices": [{"ind',
                        "application/json",
                    )
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", kind_header)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _error(self, status, message, headers=None):
                self._send(status, {"error": {"message": message, "type": "fake"}}, headers)

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def main() -> None:
    """Serve from its own process (so its threads do not share the client's GIL)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    with FakeOpenAI(latency=args.latency) as server:
        sys.stdout.write(server.base_url + "\n")
        sys.stdout.flush()
        sys.stdin.read()  # serve until the parent closes our stdin


if __name__ == "__main__":
    main()
