"""(No tests here.) A tiny OpenAI-compatible HTTP server on 127.0.0.1 for the backend's tests: each
request to /v1/chat/completions is answered by a Python function of (request body, headers) ->
(status, JSON body), so a test scripts exactly what the server says (an error echoing the key, a 429
then a reply, logprobs, a tool call). A body that is a `Raw` goes out as its bytes (an HTML page, broken
JSON), optionally one byte at a time (a trickling proxy). `Stub(answer, models=...)` also answers
GET /v1/models with that list of model entries (or what a function of no arguments returns); without it a
GET is answered 501, as before. Every request's headers are kept in `headers`.

`Stub(answer, vendor_rules=True)` also answers as the hosted APIs of config/paper.yaml's judges do to a
request they reject, by the model id's family (`vendor_error`), before `answer` sees it: HTTP 400 with the
vendor's error text. Without it (the default) every request reaches `answer`.

A reply body whose `model` is the placeholder "stub" (what `completion()` writes unless given `model=`) goes
out with the request's model id, as a server that serves what it is asked for; `completion(model=...,
system_fingerprint=...)` plays a server that answers with another model id (a dated snapshot, an alias).
`Stub(answer, echo_model=False)` sends the placeholder as it is."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

Answer = Callable[[dict, dict], tuple[int, dict]]


@dataclass(frozen=True)
class Raw:
    """A reply body sent as these bytes with this content type; `trickle_s` > 0 sends it one byte at a time
    with that pause before each (a proxy that keeps a connection alive by dribbling)."""
    data: bytes
    content_type: str = "text/html; charset=utf-8"
    trickle_s: float = 0.0


def _openai_400(message: str, param: str, code: str) -> tuple[int, dict]:
    return 400, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def vendor_error(body: dict) -> tuple[int, object] | None:
    """The 400 that a hosted API answers to a request it rejects (the rules each vendor documents; their error
    texts as the APIs send them); None where it would accept the request.
    - OpenAI's reasoning models (gpt-5 family, o-series): max_tokens, top_p, presence_penalty, logprobs and
      top_logprobs are unsupported parameters; temperature only its default 1.
    - Anthropic's OpenAI SDK compatibility layer, Claude Sonnet 4.5: temperature and top_p not both.
    - Google's OpenAI-compatible endpoint, gemini-2.5-pro: logprobs are not enabled."""
    model = str(body.get("model", ""))
    if model.startswith(("gpt-5", "o1", "o3", "o4")):
        for name in ("max_tokens", "top_p", "presence_penalty", "logprobs", "top_logprobs"):
            if name in body:
                hint = " Use 'max_completion_tokens' instead." if name == "max_tokens" else ""
                return _openai_400(f"Unsupported parameter: '{name}' is not supported with this model.{hint}",
                                   name, "unsupported_parameter")
        if body.get("temperature", 1) != 1:
            return _openai_400(f"Unsupported value: 'temperature' does not support {body['temperature']} with this "
                               "model. Only the default (1) value is supported.", "temperature", "unsupported_value")
    if model.startswith("claude") and "temperature" in body and "top_p" in body:
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                     "`temperature` and `top_p` cannot both be specified for this model. Please use only one."}}
    if model.startswith("gemini-2.5") and body.get("logprobs"):
        return 400, [{"error": {"code": 400, "message": f"Logprobs is not enabled for models/{model}",
                                "status": "INVALID_ARGUMENT"}}]
    return None


class Stub:
    def __init__(self, answer: Answer, vendor_rules: bool = False,
                 models: list[dict] | Callable[[], list[dict]] | None = None, echo_model: bool = True):
        self.answer = answer
        self.echo_model = echo_model
        self.vendor_rules = vendor_rules
        self.models = models
        self.requests: list[dict] = []
        self.headers: list = []           # each POST's headers (email.message.Message: .get ignores case)
        self.model_lists = 0              # GET /v1/models answered
        self.rejected: list[dict] = []   # the requests vendor_rules answered with a 400
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):   # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                stub.requests.append(body)
                stub.headers.append(self.headers)   # case-insensitive .get
                refusal = vendor_error(body) if stub.vendor_rules else None
                if refusal:
                    stub.rejected.append(body)
                status, reply, *extra = refusal or stub.answer(body, self.headers)   # case-insensitive .get
                if stub.echo_model and isinstance(reply, dict) and reply.get("model") == "stub":
                    reply = {**reply, "model": body.get("model", "stub")}
                self.reply(status, reply, extra[0] if extra else {})

            def do_GET(self):   # noqa: N802
                if stub.models is None or self.path.rstrip("/") != "/v1/models":
                    self.send_error(501, "Unsupported method ('GET')")   # what http.server answered before
                    return
                stub.model_lists += 1
                entries = stub.models() if callable(stub.models) else stub.models
                self.reply(200, {"object": "list", "data": entries}, {})

            def reply(self, status, reply, headers):
                raw = reply if isinstance(reply, Raw) else Raw(json.dumps(reply).encode(), "application/json")
                self.send_response(status)
                for name, value in headers.items():   # (status, body, headers)
                    self.send_header(name, value)
                self.send_header("Content-Type", raw.content_type)
                self.send_header("Content-Length", str(len(raw.data)))
                self.end_headers()
                try:
                    if raw.trickle_s <= 0:
                        self.wfile.write(raw.data)
                        return
                    for i in range(len(raw.data)):
                        time.sleep(raw.trickle_s)
                        self.wfile.write(raw.data[i:i + 1])
                        self.wfile.flush()
                except OSError:   # the client gave up on it
                    pass

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


def completion(text: str = "", *, tool_call: dict | None = None, logprobs: list | None = None,
               model: str = "stub", system_fingerprint: str | None = None) -> dict:
    """A chat.completion body with one choice (`logprobs`: [(token, logprob)] top tokens of the first).
    `model`: the id the server says it served ("stub": the request's, see Stub); `system_fingerprint`: sent
    where given."""
    message = {"role": "assistant", "content": None if tool_call else text}
    if tool_call:
        message["tool_calls"] = [{"id": "call_0", "type": "function", "function": tool_call}]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_call else "stop"}
    if logprobs is not None:
        top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in logprobs]
        choice["logprobs"] = {"content": [{"token": logprobs[0][0], "logprob": logprobs[0][1], "bytes": None,
                                           "top_logprobs": top}]}
    body = {"id": "stub", "object": "chat.completion", "created": 0, "model": model, "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
    if system_fingerprint is not None:
        body["system_fingerprint"] = system_fingerprint
    return body
