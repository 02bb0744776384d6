"""A page strangers reach (a Space, or RAQA_PUBLIC=1): when it is public, the visitor gate, the caps on K, w and
benchmark size, which endpoints it offers, and the API visibility of its events. The browser and API tests of the
same limits are in test_e2e_public.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from scripted import ScriptedBackend

from raqa.config import AppConfig, PublicLimits, RunForm, SettingsError, public_limits, validate_settings
from raqa.service import Service
from raqa.web.visitors import WINDOW_S, VisitorGate, limit_runs, visitor_of

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("env", "public", "forwarded"),
    [
        ({}, False, None),
        ({"RAQA_PUBLIC": "0"}, False, None),
        ({"RAQA_PUBLIC": ""}, False, None),
        ({"RAQA_PUBLIC": "1"}, True, False),  # on this machine: the connection's address is the visitor
        ({"SPACE_ID": "me/raqa"}, True, True),  # behind Spaces' proxy
        ({"SPACE_ID": "me/raqa", "RAQA_PUBLIC": "1"}, True, True),
        ({"SPACE_ID": "me/raqa", "RAQA_PUBLIC": "0"}, False, None),  # a private Space's owner turns it off
    ],
)
def test_a_page_is_public_on_a_space_or_when_asked(env, public, forwarded):
    limits = public_limits(env)
    assert (limits is not None) == public
    if limits is not None:
        assert limits.forwarded_for is forwarded


def test_a_bad_raqa_public_is_named(monkeypatch):
    with pytest.raises(ValueError, match="RAQA_PUBLIC must be 1 .* or 0 .*, got 'yes'"):
        public_limits({"RAQA_PUBLIC": "yes"})
    monkeypatch.setenv("RAQA_PUBLIC", "1")
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert AppConfig.from_env().public == PublicLimits()
    monkeypatch.setenv("RAQA_PUBLIC", "true")
    with pytest.raises(ValueError, match="RAQA_PUBLIC"):
        AppConfig.from_env()


def test_a_public_page_caps_k_and_the_window_with_a_message():
    limits = PublicLimits(max_k=30, max_window=5)
    assert validate_settings(RunForm(window=5, k=30), limits).k == 30
    with pytest.raises(SettingsError, match="K on this public page must be a whole number from 5 to 30, got 31"):
        validate_settings(RunForm(k=31), limits)
    with pytest.raises(SettingsError, match="window size on this public page must be .* from 1 to 5, got 6"):
        validate_settings(RunForm(window=6), limits)
    assert validate_settings(RunForm(window=20, k=100)).k == 100  # not public: the full ranges


def test_the_service_applies_the_caps_to_every_run(tiny_pages, tiny_index, tmp_path):
    public = Service(
        AppConfig(cache_dir=tmp_path, public=PublicLimits()),
        tiny_pages,
        tiny_index,
        ScriptedBackend(["NOT FOUND"]),
        "tiny",
        {},
    )
    with pytest.raises(SettingsError, match="K on this public page"):
        public.plan("Who painted the Mona Lisa?", RunForm(k=PublicLimits().max_k + 1))
    assert public.plan("Who painted the Mona Lisa?", RunForm(k=PublicLimits().max_k)).settings.k == PublicLimits().max_k


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_visitor_gets_one_live_run_at_a_time_and_another_visitor_is_unaffected():
    gate = VisitorGate(PublicLimits(runs_per_minute=10, live_runs=1), clock=Clock())
    assert gate.admit("a") is None
    message = gate.admit("a")
    assert message and "already have a live run going" in message and "press Stop" in message
    assert gate.admit("b") is None  # another visitor
    gate.release("a")
    assert gate.admit("a") is None  # the first run ended: the next starts
    assert gate.live("a") == 1 and gate.live("b") == 1


def test_a_new_run_waits_briefly_for_the_visitors_stopped_run_to_let_go():
    import threading

    gate = VisitorGate(PublicLimits(runs_per_minute=10, live_runs=1))
    assert gate.admit("a") is None
    threading.Timer(0.3, gate.release, ["a"]).start()  # Stop: the generator is closed a moment later
    assert gate.admit("a", settle_s=5.0) is None
    started = time.monotonic()
    assert "already have a live run going" in gate.admit("a", settle_s=0.3)  # the run goes on: refused
    assert 0.25 < time.monotonic() - started < 3


def test_attempts_count_towards_the_minute_so_waiting_cannot_be_used_to_hold_the_queue():
    gate = VisitorGate(PublicLimits(runs_per_minute=3, live_runs=1), clock=Clock())
    assert gate.admit("a") is None
    assert "already have" in gate.admit("a") and "already have" in gate.admit("a")
    assert "3 live runs in the last minute" in gate.admit("a", settle_s=5.0)  # refused at once, without waiting


def test_a_visitor_over_the_runs_a_minute_waits_and_says_how_long():
    clock = Clock()
    gate = VisitorGate(PublicLimits(runs_per_minute=3, live_runs=1), clock=clock)
    for _ in range(3):
        assert gate.admit("a") is None
        gate.release("a")
        clock.now += 10
    message = gate.admit("a")
    assert message and "3 live runs in the last minute" in message and "next can start in 30 s" in message
    assert gate.admit("b") is None  # another visitor
    gate.release("b")
    clock.now += 30  # the first run is now a minute old
    assert gate.admit("a") is None
    assert WINDOW_S == 60


def test_the_visitor_is_the_forwarded_address_only_behind_spaces_proxy():
    headers = {"x-forwarded-for": "203.0.113.7, 10.16.3.1"}
    assert visitor_of(headers, "10.16.3.80", forwarded_for=True) == "203.0.113.7"
    assert visitor_of({}, "10.16.3.80", forwarded_for=True) == "10.16.3.80"
    assert visitor_of(headers, "198.51.100.2", forwarded_for=False) == "198.51.100.2"
    assert visitor_of({}, None, forwarded_for=False) == "unknown"


class Request:
    def __init__(self, address: str):
        self.headers = {"x-forwarded-for": address}
        self.client = type("Client", (), {"host": "10.0.0.1"})()


def test_a_limited_run_is_released_when_it_ends_fails_or_is_stopped():
    gate = VisitorGate(PublicLimits(runs_per_minute=100, live_runs=1, forwarded_for=True))

    def run(n):
        yield from range(n)

    limited = limit_runs(gate, run, lambda message: ("refused", message))
    assert list(limited(Request("a"), 3)) == [0, 1, 2] and gate.live("a") == 0
    stopped = limited(Request("a"), 3)
    assert next(stopped) == 0 and gate.live("a") == 1
    refused = list(limited(Request("a"), 3))
    assert refused[0][0] == "refused" and len(refused) == 1
    assert list(limited(Request("b"), 2)) == [0, 1]  # another visitor runs meanwhile
    stopped.close()  # what Stop does to the generator
    assert gate.live("a") == 0

    def broken():
        yield 1
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        list(limit_runs(gate, broken, str)(Request("a")))
    assert gate.live("a") == 0


def test_without_a_gate_runs_are_not_limited():
    limited = limit_runs(None, lambda n: iter(range(n)), str)
    assert [list(limited(None, 2)) for _ in range(20)][-1] == [0, 1]


def _endpoints_service(tmp_path, tiny_pages, public: PublicLimits | None) -> Service:
    endpoints = tmp_path / "endpoints.json"
    entry = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "retries": 0}
    endpoints.write_text(json.dumps([{**entry, "name": "Paid"}, {**entry, "name": "Open", "public": True}]))
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps(p._asdict()) + "\n" for p in tiny_pages))
    config = AppConfig(corpus=str(corpus), cache_dir=tmp_path / "cache", endpoints=str(endpoints), public=public)
    return Service.load(config, progress=lambda m: None, backend=ScriptedBackend([]))


def test_a_public_page_offers_only_the_endpoints_marked_public(tmp_path, tiny_pages):
    assert list(_endpoints_service(tmp_path, tiny_pages, None).readers) == ["base", "endpoint:Paid", "endpoint:Open"]
    public = _endpoints_service(tmp_path, tiny_pages, PublicLimits())
    assert list(public.readers) == ["base", "endpoint:Open"]
    with pytest.raises(SettingsError, match="Invalid reader: 'endpoint:Paid'"):
        public.plan("Who painted the Mona Lisa?", RunForm(reader="endpoint:Paid"))  # nor through the API


def test_the_endpoints_file_says_public_with_true_or_false(tmp_path):
    from raqa.models.endpoints_file import EndpointConfigError, load_endpoints

    path = tmp_path / "endpoints.json"
    path.write_text(json.dumps([{"name": "x", "base_url": "http://h/v1", "model": "m", "public": "yes"}]))
    with pytest.raises(EndpointConfigError, match="field 'public' must be true or false"):
        load_endpoints(path)


def test_the_page_spells_api_visibility_as_gradio_6_does():
    """No `api_name=False` (Gradio 5's spelling) is left: hidden events say api_visibility="private"."""
    sources = {p: p.read_text(encoding="utf-8") for p in (ROOT / "raqa" / "web").glob("*.py")}
    assert [str(p) for p, text in sources.items() if "api_name=False" in text] == []
    assert sum(text.count('api_visibility="private"') for text in sources.values()) >= 5


def test_only_the_documented_endpoints_are_public(tiny_pages, tiny_index, tmp_path):
    """The named API endpoints docs/deploy.md lists are the ones Gradio offers to clients, and no others."""
    from raqa.web.app import build_demo

    service = Service(AppConfig(cache_dir=tmp_path), tiny_pages, tiny_index, ScriptedBackend([]), "tiny", {})
    demo = build_demo(service)
    offered = sorted(demo.get_api_info()["named_endpoints"])
    assert offered == ["/ask", "/pipeline", "/run_events"]
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = deploy.split("## Named API endpoints", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{name}`" in section for name in offered)


def test_a_public_page_caps_the_benchmark_size(tiny_pages, tiny_index, tmp_path):
    from raqa.web.benchmark_tab import benchmark, benchmark_size

    service = Service(
        AppConfig(cache_dir=tmp_path, public=PublicLimits(max_benchmark=4)),
        tiny_pages,
        tiny_index,
        ScriptedBackend([]),
        "tiny",
        {},
    )
    assert benchmark_size(service) == 4
    outputs = list(benchmark(service, "NQ-open", 5, RunForm(k=5)))
    assert len(outputs) == 1 and "at most 4 questions" in outputs[0][0]


def test_a_downloads_temporary_folder_goes_when_the_run_ends_or_is_stopped():
    from raqa.web.export import temporary_folder

    def run():
        with temporary_folder("raqa-run-") as folder:
            (folder / "run.json").write_text("[]")
            yield folder

    finished = run()
    folder = next(finished)
    assert (folder / "run.json").is_file()  # there while the page takes its copy
    assert list(finished) == [] and not folder.exists()
    stopped = run()
    folder = next(stopped)
    stopped.close()
    assert not folder.exists()


def test_a_public_page_without_raqa_flags_has_no_flag_buttons(tiny_pages, tiny_index, tmp_path):
    from raqa.web.app import build_demo

    service = Service(
        AppConfig(cache_dir=tmp_path, public=PublicLimits()), tiny_pages, tiny_index, ScriptedBackend([]), "tiny", {}
    )
    demo = build_demo(service)
    flags = [b for b in demo.blocks.values() if str(getattr(b, "elem_id", "")).startswith("raqa-flag-")]
    assert flags and all(not _visible(b, demo) for b in flags)
    assert demo.delete_cache == (3600, 3600)  # Gradio's copies of the downloads are cleaned


def _visible(block, demo) -> bool:
    """A block is shown when it and every parent are visible."""
    while block is not None:
        if getattr(block, "visible", True) is False:
            return False
        block = block.parent
    return True


def test_idle_visitors_are_forgotten_so_memory_stays_bounded():
    from raqa.web.visitors import FORGET_ABOVE

    clock = Clock()
    gate = VisitorGate(PublicLimits(runs_per_minute=2, live_runs=1), clock=clock)
    for n in range(FORGET_ABOVE + 1):
        assert gate.admit(f"v{n}") is None
        gate.release(f"v{n}")
    assert gate.admit("v0") is None  # v0's second run in the minute
    gate.release("v0")
    clock.now += WINDOW_S
    assert gate.admit("new") is None
    assert len(gate._started) == 1  # only the visitor who just started is remembered
