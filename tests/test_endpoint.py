"""The endpoint backend against a real loopback server that injects faults: streaming into engine events, retries
with measured backoff, broken and stalled streams, timeouts, malformed events, missing logprobs, refusals, and
the API key never leaking; and the operator's endpoints file."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from email.utils import formatdate
from pathlib import Path

import pytest
from fault_server import FaultServer, Reply, chunk, streamed

from raqa.config import AppConfig, RunSettings
from raqa.models.base import Choice, ModelError, Usage
from raqa.models.endpoint import EndpointBackend, EndpointConfig
from raqa.models.endpoints_file import EndpointConfigError, configured_endpoints, load_endpoints
from raqa.models.openai_stream import choice_probabilities, estimate_tokens, plan_budget, retry_after, sse_data
from raqa.reading.engine import reply_plan, run
from raqa.reading.events import Final, ReplyDelta, RunFailed, WindowVerdict, to_json
from raqa.reading.prompts import ANSWER_WORD, NOT_FOUND_WORD
from raqa.retrieval.index import BM25Index

QUESTION = "Who painted the Mona Lisa?"
SUPPORTED = "ANSWER: Leonardo da Vinci\nPAGE: p3\nSENTENCE: 1"
SETTINGS = RunSettings(window=3, k=8)
PLAN = reply_plan(SETTINGS)
MESSAGES = [{"role": "user", "content": "Question: anything?"}]
SENTINEL = "sk-SENTINEL-0123456789abcdef"


class Sleeps(list):
    """An injected sleep that records each wait instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def backend(server_url: str, sleeps: Sleeps | None = None, jitter: float = 1.0, **config) -> EndpointBackend:
    settings = {"backoff_s": 0.5, "timeout_s": 5.0, "connect_timeout_s": 2.0, **config}
    return EndpointBackend(
        EndpointConfig(name="Test server", base_url=server_url, model="test-model", **settings),
        sleep=sleeps if sleeps is not None else Sleeps(),
        jitter=lambda: jitter,
        clock=lambda: 1_000_000.0,
    )


def events_of(backend: EndpointBackend, index: BM25Index, settings: RunSettings = SETTINGS) -> list:
    return list(run(QUESTION, index, backend, settings))


def test_a_streamed_reply_becomes_the_engine_events_with_the_servers_usage(tiny_index):
    logprobs = {"ANSWER": -0.105, "NOT": -2.303, "The": -5.0}
    with FaultServer([Reply(events=streamed(SUPPORTED, usage=(321, 11), first=logprobs))]) as server:
        events = events_of(backend(server.url), tiny_index)
    final = events[-1]
    assert isinstance(final, Final), events[-1]
    assert final.answer == "Leonardo da Vinci" and final.supported is True
    assert (final.prompt_tokens, final.completion_tokens) == (321, 11)
    assert "".join(e.text for e in events if isinstance(e, ReplyDelta)) == SUPPORTED
    (verdict,) = [e for e in events if isinstance(e, WindowVerdict)]
    assert verdict.p_answer == pytest.approx(0.9 / (0.9 + 0.1), abs=1e-3)
    body = server.seen[0].body
    assert body["stream"] is True and body["temperature"] == 0 and body["model"] == "test-model"
    assert body["stream_options"] == {"include_usage": True}
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["max_tokens"] == plan_budget(PLAN, estimate_tokens)
    assert body["messages"][-1]["role"] == "user" and QUESTION in body["messages"][-1]["content"]
    assert "authorization" not in {k.lower() for k in server.seen[0].headers}  # no api_key_env, no header


def test_the_choice_comes_first_then_the_text_then_usage():
    with FaultServer([Reply(events=streamed("NOT FOUND\nREASON: no page says."))]) as server:
        pieces = list(backend(server.url).reply(MESSAGES, PLAN))
    # no logprobs: from how it starts, and marked as not measured
    assert pieces[0] == Choice({ANSWER_WORD: 0.0, NOT_FOUND_WORD: 1.0}, NOT_FOUND_WORD, measured=False)
    assert "".join(p for p in pieces if isinstance(p, str)) == "NOT FOUND\nREASON: no page says."
    assert pieces[-1] == Usage(123, 7)


def test_a_reply_without_logprobs_reads_the_choice_from_how_it_starts(tiny_index):
    with FaultServer([Reply(events=streamed(SUPPORTED))]) as server:
        events = events_of(backend(server.url), tiny_index)
    (verdict,) = [e for e in events if isinstance(e, WindowVerdict)]
    assert verdict.verdict != "not_found" and isinstance(events[-1], Final)
    assert verdict.p_answer is None  # the server reported no log-probabilities: missing, not 1.0


def test_a_reply_in_no_known_format_has_no_choice_and_is_shown_whole():
    with FaultServer([Reply(events=streamed("I think it was Leonardo."))]) as server:
        pieces = list(backend(server.url).reply(MESSAGES, PLAN))
    assert not any(isinstance(p, Choice) for p in pieces)
    assert "".join(p for p in pieces if isinstance(p, str)) == "I think it was Leonardo."


def test_below_the_threshold_an_answer_is_cut_to_a_decline():
    # P(ANSWER) = 0.6 < 0.8: the local model would have declined, so the server's answer is not shown
    logprobs = {"ANSWER": -0.5108, "NOT": -0.9163}
    with FaultServer([Reply(events=streamed(SUPPORTED, usage=(50, 9), first=logprobs))]) as server:
        pieces = list(backend(server.url).reply(MESSAGES, PLAN, threshold=0.8))
    assert pieces[0].chosen == NOT_FOUND_WORD and pieces[0].probabilities[ANSWER_WORD] == pytest.approx(0.6, abs=1e-3)
    assert pieces[1:] == [NOT_FOUND_WORD, Usage(50, 9)]  # the server's counts: what it generated


@pytest.mark.parametrize(
    "retry_after, expected",
    [("2", 2.0), (formatdate(1_000_000.0 + 3, usegmt=True), 3.0), (None, 0.5)],
    ids=["seconds", "http-date", "absent"],
)
def test_a_429_is_retried_after_what_retry_after_asks(retry_after, expected):
    headers = {"Retry-After": retry_after} if retry_after else {}
    sleeps = Sleeps()
    with FaultServer([Reply(429, '{"error": "slow down"}', headers), Reply(events=streamed(SUPPORTED))]) as server:
        pieces = list(backend(server.url, sleeps).reply(MESSAGES, PLAN))
    assert len(server.seen) == 2 and sleeps == [pytest.approx(expected)]
    assert pieces[-1] == Usage(123, 7)


def test_5xx_backoff_doubles_up_to_its_cap_then_succeeds():
    sleeps = Sleeps()
    script = [Reply(500, "oops"), Reply(503, "busy"), Reply(502, "bad gateway"), Reply(events=streamed(SUPPORTED))]
    with FaultServer(script) as server:
        pieces = list(backend(server.url, sleeps, retries=3, max_backoff_s=1.5).reply(MESSAGES, PLAN))
    assert sleeps == [0.5, 1.0, 1.5] and len(server.seen) == 4
    assert isinstance(pieces[0], Choice)


def test_jitter_spreads_each_wait_between_half_and_all_of_the_backoff():
    sleeps = Sleeps()
    with FaultServer([Reply(503), Reply(503), Reply(events=streamed(SUPPORTED))]) as server:
        list(backend(server.url, sleeps, jitter=0.0).reply(MESSAGES, PLAN))
    assert sleeps == [0.25, 0.5]


def test_a_retry_after_beyond_the_cap_ends_the_attempts_at_once():
    sleeps = Sleeps()
    with FaultServer([Reply(429, headers={"Retry-After": "3600"})]) as server:
        with pytest.raises(ModelError, match="3600 s, more than the 30 s allowed"):
            list(backend(server.url, sleeps).reply(MESSAGES, PLAN))
    assert len(server.seen) == 1 and sleeps == []


def test_when_every_attempt_fails_the_run_fails_with_a_clear_message(tiny_index):
    with FaultServer([Reply(503, "model is loading")]) as server:
        events = events_of(backend(server.url, retries=2), tiny_index)
    assert isinstance(events[-1], RunFailed)
    assert "failed after 3 attempts" in events[-1].message and "HTTP 503: model is loading" in events[-1].message
    assert len(server.seen) == 3


def test_a_server_that_is_not_there_is_retried_then_fails(tiny_index):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    events = events_of(backend(f"http://127.0.0.1:{port}/v1", sleeps, retries=2), tiny_index)
    assert isinstance(events[-1], RunFailed) and "could not reach http://127.0.0.1" in events[-1].message
    assert len(sleeps) == 2


def test_a_stream_that_breaks_mid_reply_fails_promptly_and_is_not_retried(tiny_index):
    events_before_break = streamed(SUPPORTED)[:3]  # the role chunk, "ANSWER:", " Leonardo"
    with FaultServer([Reply(events=events_before_break, breaks=True), Reply(events=streamed(SUPPORTED))]) as server:
        start = time.monotonic()
        events = events_of(backend(server.url), tiny_index)
        seconds = time.monotonic() - start
    assert isinstance(events[-1], RunFailed) and "broke mid-reply" in events[-1].message
    assert "".join(e.text for e in events if isinstance(e, ReplyDelta)) == "ANSWER: Leonardo"
    assert len(server.seen) == 1 and seconds < 3


def test_a_stream_that_stalls_mid_reply_times_out_between_chunks(tiny_index):
    stalled = [*streamed(SUPPORTED)[:3], 30.0, *streamed(SUPPORTED)[3:]]
    with FaultServer([Reply(events=stalled)]) as server:
        start = time.monotonic()
        events = events_of(backend(server.url, timeout_s=0.4), tiny_index)
        seconds = time.monotonic() - start
    assert isinstance(events[-1], RunFailed) and "sent nothing for 0.4 s" in events[-1].message
    assert 0.4 <= seconds < 3 and len(server.seen) == 1


def test_a_stream_that_breaks_before_any_text_is_retried():
    with FaultServer([Reply(events=[chunk(role="assistant")], breaks=True), Reply(events=streamed(SUPPORTED))]) as s:
        pieces = list(backend(s.url).reply(MESSAGES, PLAN))
    assert len(s.seen) == 2 and "".join(p for p in pieces if isinstance(p, str)) == SUPPORTED


def test_a_server_that_never_answers_times_out_within_bounds(tiny_index):
    timeout, attempts = 0.4, 2
    with FaultServer([Reply(hangs=True)]) as server:
        start = time.monotonic()
        events = events_of(backend(server.url, timeout_s=timeout, retries=attempts - 1), tiny_index)
        seconds = time.monotonic() - start
    assert isinstance(events[-1], RunFailed) and "within the timeout" in events[-1].message
    assert len(server.seen) == attempts
    assert attempts * timeout * 0.9 <= seconds < attempts * timeout + 3


def test_keep_alives_cannot_stretch_a_reply_past_its_deadline():
    trickle = [chunk(role="assistant")] + [": keep-alive", 0.1] * 100
    with FaultServer([Reply(events=trickle)]) as server:
        start = time.monotonic()
        with pytest.raises(ModelError, match="took longer than 0.5 s"):
            list(backend(server.url, deadline_s=0.5).reply(MESSAGES, PLAN))
    assert time.monotonic() - start < 2.5


def test_malformed_event_json_fails_the_run_with_an_excerpt(tiny_index):
    with FaultServer([Reply(events=[chunk(role="assistant"), '{"choices": [{"delta": {"content": "ANSW'])]) as server:
        events = events_of(backend(server.url), tiny_index)
    assert isinstance(events[-1], RunFailed) and "not JSON" in events[-1].message and "ANSW" in events[-1].message
    assert len(server.seen) == 1  # a garbled stream is not a passing fault


def test_an_error_event_mid_stream_is_reported():
    with FaultServer([Reply(events=[chunk("ANSWER:"), json.dumps({"error": {"message": "GPU fell over"}})])]) as s:
        with pytest.raises(ModelError, match="error mid-stream: GPU fell over"):
            list(backend(s.url).reply(MESSAGES, PLAN))


def test_comments_other_fields_and_split_data_lines_are_read():
    events = [
        ": keep-alive",
        "~event: message\nid: 7\nretry: 100\n",
        f"~data:{chunk('ANSWER:')}\n\n",
        '~data: {"choices": [{"delta": {"content": " Paris"},\ndata: "finish_reason": "stop"}]}\n\n',
        json.dumps({"choices": [], "usage": None}),
        "[DONE]",
    ]
    with FaultServer([Reply(events=events)]) as server:
        pieces = list(backend(server.url).reply(MESSAGES, PLAN))
    assert [p for p in pieces if isinstance(p, str)] == ["ANSWER:", " Paris"]
    assert pieces[-1] == Usage(sum(estimate_tokens(m["content"]) + 4 for m in MESSAGES), 2)  # no usage: estimated


def test_a_stream_that_ends_without_done_or_finish_is_incomplete():
    with FaultServer([Reply(events=[chunk("ANSWER:"), chunk(" Paris")])]) as server:
        with pytest.raises(ModelError, match="broke mid-reply.*ended before the reply was complete"):
            list(backend(server.url).reply(MESSAGES, PLAN))


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_a_client_error_is_not_retried_and_names_its_status(status):
    sleeps = Sleeps()
    with FaultServer([Reply(status, '{"error": {"message": "no such thing"}}')]) as server:
        with pytest.raises(ModelError, match=f"HTTP {status}: .*no such thing") as caught:
            list(backend(server.url, sleeps).reply(MESSAGES, PLAN))
    assert len(server.seen) == 1 and sleeps == []
    assert ("api_key_env" in str(caught.value)) == (status in (401, 403))


def test_the_api_key_is_sent_as_a_header_and_appears_nowhere_else(tiny_index, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("RAQA_TEST_KEY", SENTINEL)
    config = EndpointConfig(name="Keyed", base_url="", model="m", api_key_env="RAQA_TEST_KEY", backoff_s=0.01)
    # the server echoes the header back in its errors, as some do
    echo = f'{{"error": "bad key Bearer {SENTINEL}"}}'
    script = [Reply(503, echo), Reply(events=streamed(SUPPORTED)), Reply(503, echo), Reply(401, echo)]
    with FaultServer(script) as server:
        keyed = EndpointBackend(EndpointConfig(**{**config.__dict__, "base_url": server.url}), sleep=Sleeps())
        events = events_of(keyed, tiny_index)  # 503, then a good reply
        with pytest.raises(ModelError) as caught:  # 503, then 401
            list(keyed.reply(MESSAGES, PLAN))
    assert [s.headers.get("Authorization") for s in server.seen] == [f"Bearer {SENTINEL}"] * 4
    assert isinstance(events[-1], Final) and "HTTP 401" in str(caught.value) and "***" in str(caught.value)
    exposed = [
        json.dumps([to_json(e) for e in events]),
        str(caught.value),
        repr(caught.value),
        repr(keyed),
        repr(keyed.config),
        keyed.name,
        *(r.getMessage() for r in caplog.records),
        *(repr(r.args) for r in caplog.records),
    ]
    assert caplog.records, "the retries were logged"
    assert not [text for text in exposed if SENTINEL in text]


def test_a_named_key_variable_that_is_unset_fails_when_the_backend_is_built(monkeypatch):
    monkeypatch.delenv("RAQA_TEST_KEY", raising=False)
    with pytest.raises(ModelError, match="RAQA_TEST_KEY .* is not set"):
        EndpointBackend(EndpointConfig("k", "http://127.0.0.1:9/v1", "m", api_key_env="RAQA_TEST_KEY"))


def test_one_backend_serves_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    slow = [chunk(role="assistant"), 0.4, *streamed(SUPPORTED)[1:]]
    with FaultServer([Reply(events=slow)]) as server:
        shared = backend(server.url)
        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            replies = list(
                pool.map(lambda _: "".join(p for p in shared.reply(MESSAGES, PLAN) if isinstance(p, str)), range(8))
            )
        seconds = time.monotonic() - start
    assert replies == [SUPPORTED] * 8 and seconds < 2.4  # overlapped: in a row they take at least 3.2 s


def test_sse_data_joins_multi_line_data_and_skips_the_rest():
    lines = [": c", "event: x", "data: a", "data:b", "", "", "id: 1", "data: [DONE]"]
    assert list(sse_data(iter(lines))) == ["a\nb", "[DONE]"]


def test_choice_probabilities_sum_prefix_tokens_and_skip_ambiguous_ones():
    logprobs = {
        "content": [
            {"token": " ", "top_logprobs": []},
            {
                "token": "ANS",
                "top_logprobs": [
                    {"token": "ANS", "logprob": -1.0},
                    {"token": " ANSWER", "logprob": -1.0},
                    {"token": "N", "logprob": -1.0},
                    {"token": "", "logprob": 0.0},
                    {"token": "Hello", "logprob": -0.1},
                ],
            },
        ]
    }
    probabilities = choice_probabilities(logprobs, [ANSWER_WORD, NOT_FOUND_WORD])
    assert probabilities == pytest.approx({ANSWER_WORD: 2 / 3, NOT_FOUND_WORD: 1 / 3})
    assert choice_probabilities({"content": [{"token": "Hi", "top_logprobs": []}]}, [ANSWER_WORD]) is None
    assert choice_probabilities(None, [ANSWER_WORD]) is None


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        (" 3 ", 3.0),
        ("1.5", 1.5),
        ("soon", None),
        (formatdate(1_000_010.0, usegmt=True), 10.0),
    ],
)
def test_retry_after_reads_seconds_or_an_http_date(header, expected):
    assert retry_after(header, 1_000_000.0) == (None if expected is None else pytest.approx(expected))


def test_the_token_estimate_errs_high_against_words():
    text = "The Mona Lisa is a portrait painted by Leonardo da Vinci, in Florence."
    assert estimate_tokens(text) >= len(text.split()) + 2


# --- the operator's endpoints file ---


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "endpoints.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


GOOD = {
    "name": "Llama 3.1 8B (vLLM)",
    "base_url": "http://localhost:8000/v1",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
}


def test_load_endpoints_reads_entries_with_defaults(tmp_path):
    path = write(
        tmp_path, [{**GOOD, "api_key_env": "VLLM_KEY"}, {**GOOD, "name": "Other", "retries": 0, "timeout_s": 5}]
    )
    first, second = load_endpoints(path)
    assert first == EndpointConfig(GOOD["name"], GOOD["base_url"], GOOD["model"], api_key_env="VLLM_KEY")
    assert (second.name, second.retries, second.timeout_s) == ("Other", 0, 5)
    assert configured_endpoints(AppConfig(endpoints=str(path))) == [first, second]
    assert configured_endpoints(AppConfig()) == []


def test_the_endpoints_file_is_the_one_config_names(tmp_path, monkeypatch):
    path = write(tmp_path, [GOOD])
    monkeypatch.setenv("RAQA_ENDPOINTS", str(path))
    assert configured_endpoints(AppConfig.from_env()) == load_endpoints(path)
    monkeypatch.setenv("RAQA_ENDPOINTS", "")
    assert configured_endpoints(AppConfig.from_env()) == []


@pytest.mark.parametrize(
    "data, message",
    [
        ("[{", "not valid JSON"),
        ({"name": "x"}, "expected a non-empty JSON list"),
        ([], "expected a non-empty JSON list"),
        (["x"], "endpoint 1: expected a JSON object"),
        ([{k: v for k, v in GOOD.items() if k != "model"}], "field 'model' is required"),
        ([{**GOOD, "modle": "m"}], "unknown field 'modle'. Choose from: name, base_url, model"),
        ([{**GOOD, "base_url": "localhost:8000"}], "field 'base_url' must be an http(s) URL"),
        ([{**GOOD, "base_url": "http://u:p@host/v1"}], "must not carry credentials"),
        ([{**GOOD, "api_key_env": "sk-abc123"}], "field 'api_key_env' must be the name of an environment variable"),
        ([{**GOOD, "timeout_s": 0}], "field 'timeout_s' must be a number of seconds above 0"),
        ([{**GOOD, "backoff_s": "1"}], "field 'backoff_s' must be a number of seconds 0 or more"),
        ([{**GOOD, "retries": True}], "field 'retries' must be a whole number of 0 or more"),
        ([{**GOOD, "concurrency": 0}], "field 'concurrency' must be a whole number of 1 or more, got 0"),
        ([{**GOOD, "concurrency": 65}], "field 'concurrency' must be at most 64, got 65"),
        ([GOOD, {**GOOD, "model": "other"}], "endpoint 2: the name 'Llama 3.1 8B (vLLM)' is used twice"),
    ],
)
def test_a_malformed_endpoints_file_names_the_file_and_the_field(tmp_path, data, message):
    path = write(tmp_path, data)
    with pytest.raises(EndpointConfigError, match=f"{re.escape(str(path))}.*{re.escape(message)}"):
        load_endpoints(path)


def test_a_missing_endpoints_file_says_which_variable_named_it(tmp_path):
    with pytest.raises(EndpointConfigError, match="no such endpoints file .*RAQA_ENDPOINTS"):
        load_endpoints(tmp_path / "nope.json")


def test_pages_are_cut_by_the_served_models_own_tokenizer_when_it_is_given():
    config = EndpointConfig(name="Test server", base_url="http://127.0.0.1:9/v1", model="test-model")
    text = "Tenzing Norgay and Edmund Hillary first reached the summit in 1953."
    assert EndpointBackend(config).count_tokens(text) == estimate_tokens(text)  # no tokenizer: the estimate
    words = EndpointBackend(config, tokens=lambda t: len(t.split()))
    assert words.count_tokens(text) == 11
    assert words.count_prompt_tokens([{"role": "user", "content": text}]) == 11 + 4
