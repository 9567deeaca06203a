"""(No tests here.) A tiny OpenAI-compatible HTTP server on 127.0.0.1 for the backend's tests: each
request to /v1/chat/completions is answered by a Python function of (request body, headers) ->
(status, JSON body), so a test scripts exactly what the server says (an error echoing the key, a 429
then a reply, logprobs, a tool call)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

Answer = Callable[[dict, dict], tuple[int, dict]]


class Stub:
    def __init__(self, answer: Answer):
        self.answer = answer
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):   # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                stub.requests.append(body)
                status, reply, *extra = stub.answer(body, self.headers)   # case-insensitive .get
                data = json.dumps(reply).encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():   # (status, body, headers)
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):   # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "Stub":
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def completion(text: str = "", *, tool_call: dict | None = None, logprobs: list | None = None) -> dict:
    """A chat.completion body with one choice (`logprobs`: [(token, logprob)] top tokens of the first)."""
    message = {"role": "assistant", "content": None if tool_call else text}
    if tool_call:
        message["tool_calls"] = [{"id": "call_0", "type": "function", "function": tool_call}]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_call else "stop"}
    if logprobs is not None:
        top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in logprobs]
        choice["logprobs"] = {"content": [{"token": logprobs[0][0], "logprob": logprobs[0][1], "bytes": None,
                                           "top_logprobs": top}]}
    return {"id": "stub", "object": "chat.completion", "created": 0, "model": "stub", "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
