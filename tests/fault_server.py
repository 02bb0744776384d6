"""A real OpenAI-style chat-completions server on loopback that answers from a script, to inject faults.

Each request takes the next `Reply` of the script (the last one repeats): a status with a body, a streamed
reply of server-sent events (with pauses between them), a stream that breaks without finishing its chunked
body, or no answer at all. Requests are recorded with their headers, JSON body and arrival time.

Left out: anything but POST .../chat/completions, and TLS.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: str = ""  # sent whole, for a status other than 200
    headers: dict[str, str] = field(default_factory=dict)
    # for 200: SSE data (a str, sent as "data: ..."), a line sent as it is (a str starting with ":", a comment,
    # or "~", whose rest is sent raw), or a pause in seconds
    events: Sequence[str | float] = ()
    breaks: bool = False  # end the connection without finishing the chunked body
    hangs: bool = False  # accept the request and never answer


def chunk(content: str | None = None, logprobs: list[tuple[str, dict[str, float]]] | None = None, **extra) -> str:
    """One streamed chunk as JSON: a content delta, with (token, {alternative: logprob}) entries if given."""
    choice: dict = {"index": 0, "delta": {} if content is None else {"content": content}, "finish_reason": None}
    if logprobs is not None:
        choice["logprobs"] = {
            "content": [
                {
                    "token": token,
                    "logprob": top.get(token, -9.0),
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top.items()],
                }
                for token, top in logprobs
            ]
        }
    choice.update(extra)
    return json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [choice]})


def streamed(text: str, usage: tuple[int, int] = (123, 7), first: dict[str, float] | None = None) -> list[str]:
    """The events of a whole reply: one chunk per word, a finish, a usage chunk with empty choices, [DONE].

    With `first`, the first chunk carries those log-probabilities of its token's alternatives.
    """
    words = text.split(" ")
    events = [chunk(role="assistant")]
    for i, word in enumerate(words):
        piece = word if i == 0 else " " + word
        events.append(chunk(piece, [(piece, first)] if first is not None and i == 0 else None))
    events.append(chunk(finish_reason="stop"))
    events.append(json.dumps({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}))
    events.append("[DONE]")
    return events


@dataclass
class Seen:
    headers: dict[str, str]
    body: dict
    at: float  # time.monotonic() on arrival


class FaultServer:
    """Serve a script of replies on 127.0.0.1; use as a context manager.

    Example:
        with FaultServer([Reply(429, headers={"Retry-After": "1"}), Reply(events=streamed("ANSWER: x"))]) as s:
            ... EndpointConfig(name="t", base_url=s.url, model="m") ...
    """

    def __init__(self, script: Sequence[Reply]):
        self.script = list(script)
        self.seen: list[Seen] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.seen.append(Seen(dict(self.headers), json.loads(raw or b"{}"), time.monotonic()))
                    reply = server.script[min(len(server.seen), len(server.script)) - 1]
                server._answer(self, reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.hangs:
            self.stopping.wait(60)
            handler.close_connection = True
            return
        if reply.status != 200:
            body = reply.body.encode()
            handler.send_response(reply.status)
            for name, value in {"Content-Type": "application/json", **reply.headers}.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        handler.send_response(200)
        for name, value in {"Content-Type": "text/event-stream", **reply.headers}.items():
            handler.send_header(name, value)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            for event in reply.events:
                if isinstance(event, float):
                    if self.stopping.wait(event):
                        break
                elif event.startswith(":"):
                    self._send(handler, event + "\n")
                elif event.startswith("~"):
                    self._send(handler, event[1:])
                else:
                    self._send(handler, f"data: {event}\n\n")
            if reply.breaks:
                handler.close_connection = True
                return
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except OSError:  # the client went away
            handler.close_connection = True

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, text: str) -> None:
        data = text.encode()
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()

    def __enter__(self) -> FaultServer:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
