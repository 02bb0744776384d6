"""A model backend that talks to any OpenAI-compatible chat-completions endpoint (vLLM, TGI, llama.cpp's
server, Ollama, hosted APIs), streaming the reply into the same pieces as the local model.

One window is one streamed POST to `{base_url}/chat/completions` with temperature 0. The verdict:

- when the server reports log-probabilities, the first word's probabilities come from the top 5 alternatives of
  the reply's first token, normalised over the plan's words (a word outside the top 5 counts as 0);
- when it does not, the Choice is read from how the reply starts, with probability 1 for that word and 0 for
  the others; a reply that starts with none of them has no Choice, as with ScriptedBackend.

A server cannot be steered after its first token, so the threshold can only make it decline: when the reply
starts with the plan's first word (ANSWER:) but its probability is below the threshold, the reply is cut to the
likeliest other word, exactly what the local model would have written first. Step budgets are not enforced
token by token; their total bounds `max_tokens`.

Robustness: connect and read timeouts (the read timeout applies between chunks, and a whole reply has a
deadline, so a stalled or trickling stream never hangs); retries with capped exponential backoff and jitter on
429, 5xx and connection failures, honouring Retry-After, but only before any piece was yielded: a stream that
breaks after text was shown raises ModelError rather than retrying a half-streamed reply.

The API key is read from the environment variable the config names (through config.secret), sent only as the Authorization header, and
kept out of `name`, repr, log records and every error message (a server that echoes it is redacted).

Left out: tool calls, images, the legacy completions API, and exact tokenization (`count_tokens` is an
estimate, see `openai_stream.estimate_tokens`); token counts of a reply come from the server's usage report.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from raqa.config import secret
from raqa.models.base import Backend, Messages, ModelError, ReplyPlan, Usage
from raqa.models.openai_stream import estimate_tokens, plan_budget, reply_pieces, retry_after, sse_data

log = logging.getLogger(__name__)

ENDPOINT_TOP_LOGPROBS = 5
EXCERPT_CHARS = 200  # of an error body shown in a message


@dataclass(frozen=True)
class EndpointConfig:
    name: str  # shown to visitors and recorded in results, e.g. "Llama 3.1 8B (vLLM)"
    base_url: str  # up to and including /v1, e.g. http://localhost:8000/v1
    model: str  # the model name the server expects
    api_key_env: str | None = None  # the environment variable holding the key; None = no Authorization header
    timeout_s: float = 60.0  # read timeout: the longest wait for the first byte and between chunks
    connect_timeout_s: float = 5.0
    retries: int = 3  # further attempts after the first, on 429, 5xx and connection failures
    backoff_s: float = 1.0  # the first wait; doubled each attempt
    max_backoff_s: float = 30.0  # no wait is longer; a Retry-After beyond it ends the attempts
    context_tokens: int = 8192  # the model's context, for cutting pages to fit
    deadline_s: float = 300.0  # a whole reply, keep-alive comments included, must end within this
    public: bool = False  # offered to the visitors of a public page (a Space, RAQA_PUBLIC=1); off by default
    concurrency: int = 1  # questions the page's live benchmark sends at once (a server that batches serves several)


def _origin(url: str) -> str:
    """scheme://host:port of a URL: what error messages show, never a path, query or user info."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


class _Retryable(Exception):
    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait  # what Retry-After asked for, if anything


class EndpointBackend(Backend):
    """Streams replies from an OpenAI-compatible server; safe to share between threads (one httpx client)."""

    def __init__(
        self,
        config: EndpointConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.time,
        tokens: Callable[[str], int] = estimate_tokens,
    ):
        """tokens counts a text's tokens for cutting pages to fit: an estimate, unless the served model's own
        tokenizer is at hand (then the server reads exactly the pages the local model would)."""
        key = None
        if config.api_key_env:
            key = secret(config.api_key_env)
            if not key:
                raise ModelError(
                    f"{config.name}: the environment variable {config.api_key_env} holding its key is not set."
                )
        self.config = config
        self.name = config.name
        self.context_tokens = config.context_tokens
        self.requests_at_once = self.runs_at_once = config.concurrency
        self._sleep, self._jitter, self._clock, self._tokens = sleep, jitter, clock, tokens
        self._redact = key
        headers = {"Accept": "text/event-stream"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self.served: dict[str, str] = {}  # what the server's replies say it is: its model id and system fingerprint

    def __repr__(self) -> str:
        return f"EndpointBackend({self.name!r}, model={self.config.model!r}, url={_origin(self._url)!r})"

    def provenance(self) -> dict:
        """What a record names about this server: the model asked for and reported, the fingerprint, the sampling."""
        return {
            "endpoint": self.name,
            "url": _origin(self._url),
            "model": self.config.model,
            "reported_model": self.served.get("model"),
            "system_fingerprint": self.served.get("system_fingerprint"),
            "sampling": {"temperature": 0, "logprobs": True, "top_logprobs": ENDPOINT_TOP_LOGPROBS},
        }

    def close(self) -> None:
        self._client.close()

    def count_tokens(self, text: str) -> int:
        return self._tokens(text)

    def count_prompt_tokens(self, messages: Messages) -> int:
        return sum(self._tokens(m["content"]) + 4 for m in messages)  # + role and separators

    def _safe(self, text: str) -> str:
        """A short excerpt of server text for a message: one line, key redacted."""
        text = " ".join(text.split())
        if self._redact:
            text = text.replace(self._redact, "***")
        return text[:EXCERPT_CHARS] + ("..." if len(text) > EXCERPT_CHARS else "")

    def _body(self, messages: Messages, plan: ReplyPlan | None, max_new_tokens: int) -> dict:
        return {
            "model": self.config.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0,
            "max_tokens": plan_budget(plan, self.count_tokens) if plan else max_new_tokens,
            "logprobs": True,
            "top_logprobs": ENDPOINT_TOP_LOGPROBS,
        }

    def _wait(self, attempt: int, asked: float | None, reason: str) -> None:
        """Sleep before the next attempt: exponential backoff with jitter, at least what Retry-After asked."""
        cap = self.config.max_backoff_s
        if asked is not None and asked > cap:
            raise ModelError(
                f"{self.name}: {reason}; it asks to wait {asked:.0f} s, more than the {cap:.0f} s allowed."
            )
        backoff = min(cap, self.config.backoff_s * 2**attempt) * (0.5 + 0.5 * self._jitter())
        delay = max(backoff, asked or 0.0)
        log.warning("%s: %s; retrying in %.1f s", self.name, reason, delay)
        self._sleep(delay)

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64) -> Iterator:
        body = self._body(messages, plan, max_new_tokens)
        attempts = self.config.retries + 1
        for attempt in range(attempts):
            shown = [False]  # set once a piece was yielded: from then on a failure is final
            try:
                yield from self._attempt(body, plan, threshold, messages, shown)
                return
            except _Retryable as e:
                if shown[0]:
                    raise ModelError(f"{self.name}: the stream broke mid-reply ({e}).") from None
                if attempt == attempts - 1:
                    raise ModelError(f"{self.name} failed after {attempts} attempts; last: {e}.") from None
                self._wait(attempt, e.wait, str(e))

    def _attempt(self, body: dict, plan, threshold: float, messages: Messages, shown: list[bool]) -> Iterator:
        request = self._client.build_request("POST", self._url, json=body)
        try:
            response = self._client.send(request, stream=True)
        except httpx.TimeoutException:
            raise _Retryable(f"no answer from {_origin(self._url)} within the timeout") from None
        except httpx.TransportError as e:
            raise _Retryable(f"could not reach {_origin(self._url)} ({type(e).__name__})") from None
        try:
            if response.status_code != 200:
                self._refuse(response)
            yield from self._stream(response, plan, threshold, messages, shown)
        except httpx.TimeoutException:
            raise _Retryable(f"the server sent nothing for {self.config.timeout_s:g} s") from None
        except httpx.TransportError as e:
            raise _Retryable(f"the connection broke ({type(e).__name__})") from None
        finally:
            response.close()

    def _refuse(self, response: httpx.Response) -> None:
        """Raise for a non-200 answer: retryable for 429 and 5xx, a ModelError for any other status."""
        try:
            excerpt = self._safe(response.read().decode("utf-8", "replace"))
        except httpx.HTTPError:
            excerpt = ""
        status = f"HTTP {response.status_code}" + (f": {excerpt}" if excerpt else "")
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retryable(status, retry_after(response.headers.get("Retry-After"), self._clock()))
        hint = " (check the key in the config's api_key_env)" if response.status_code in (401, 403) else ""
        raise ModelError(f"{self.name} refused the request, {status}{hint}")

    def _stream(self, response: httpx.Response, plan, threshold: float, messages: Messages, shown: list[bool]):
        """Yield Choice, text and Usage from the event stream; the Choice waits until the first word is known."""
        deadline = time.monotonic() + self.config.deadline_s
        done = [False]
        chunks = self._chunks(sse_data(self._before(deadline, response.iter_lines())), done)
        finished, usage, count = yield from reply_pieces(chunks, list(plan or {}), threshold, shown)
        if not (finished or done[0]):
            raise _Retryable("the stream ended before the reply was complete")
        yield self._usage(usage, messages, count)

    def _chunks(self, events: Iterator[str], done: list[bool]) -> Iterator[dict]:
        """The stream's JSON chunks until [DONE] (then done[0] is set), noting the model and fingerprint served."""
        for data in events:
            if data.strip() == "[DONE]":
                done[0] = True
                return
            chunk = self._parse(data)
            for key in ("model", "system_fingerprint"):
                if isinstance(chunk.get(key), str) and chunk[key]:
                    self.served[key] = chunk[key]
            yield chunk

    def _before(self, deadline: float, lines: Iterator[str]) -> Iterator[str]:
        """The lines, until the deadline passes (checked on every line, keep-alive comments included)."""
        for line in lines:
            if time.monotonic() > deadline:
                raise ModelError(f"{self.name}: the reply took longer than {self.config.deadline_s:g} s.")
            yield line

    def _parse(self, data: str) -> dict:
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ModelError(f"{self.name} sent an event that is not JSON: {self._safe(data)!r}") from None
        if not isinstance(chunk, dict):
            raise ModelError(f"{self.name} sent an event that is not a JSON object: {self._safe(data)!r}")
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise ModelError(f"{self.name} reported an error mid-stream: {self._safe(str(message))}")
        return chunk

    def _usage(self, usage: dict | None, messages: Messages, chunks: int) -> Usage:
        """The server's counts; without a usage report, the estimate of the prompt and one token per chunk."""
        if usage and isinstance(usage.get("prompt_tokens"), int) and isinstance(usage.get("completion_tokens"), int):
            return Usage(usage["prompt_tokens"], usage["completion_tokens"])
        return Usage(self.count_prompt_tokens(messages), chunks)
