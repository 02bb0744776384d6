"""Measure the serving path the way visitors use it: many sessions at once, and a long soak.

`serve` starts the real Gradio page on loopback; `drive_sessions` sends one question per session
through its `run_events` API with gradio_client (one Client per session, so one queue session each,
in the same queue and on the same worker as the page's own runs), all at once, and times each to
completion, keeping the run's events (the JSON of `ask --json`), not the page's HTML; `soak` runs one
question after another through Service.plan/events and records the process's memory. `python -m lab bench load` and
`python -m lab bench soak` use them on the real model and write result files; tests/test_serving.py uses
them on a scripted model. Left out: a network between client and server, and more than one server
process (a Space runs one).
"""

from __future__ import annotations

import contextlib
import gc
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, astuple, dataclass

from lab.ops.bench_timing import percentile
from raqa.config import RunForm, validate_settings
from raqa.evaluation.records import provenance
from raqa.service import Service

# The run's settings after the question, in the order the /run_events endpoint and Service.plan take them:
# strategy, order, window, K, grounded only, rationale, reader (None = the page's default reader).
DEFAULT_FORM = RunForm()
PROGRESS = ("in_line", "window_started", "final", "run_failed")  # events that show a visitor their run moving


@dataclass(frozen=True)
class SessionResult:
    question: str
    seconds: float  # from submitting to the last output
    updates: int  # how many events the session received
    events: tuple[dict, ...] = ()  # the run's events as JSON, in order (the last is final or run_failed)
    error: str | None = None
    # from submitting to the first sign the visitor sees of their own run: its place in line, its first window, or
    # its end (a run that waits in no line shows its first window)
    first_progress_s: float | None = None
    first_verdict_s: float | None = None  # from submitting to the first window's verdict

    @property
    def final(self) -> dict | None:
        return self.events[-1] if self.events else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(service: Service, port: int | None = None, page: dict | None = None, **launch_kwargs):
    """Start the page on loopback in this process; returns (demo, url). Close it with demo.close(). `page` holds
    build_demo's options (recordings_dir, results_dir), the rest go to Gradio's launch."""
    from raqa.web.app import build_demo  # lazy: imports gradio

    port = port or free_port()
    demo = build_demo(service, **(page or {}))
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_kwargs)
    return demo, f"http://127.0.0.1:{port}/"


def open_as_a_browser(client) -> None:
    """Do what a browser does on opening the page, before any click: run the page's own load events (those with a
    Python function and no inputs, as the browser posts them) in the client's session. Gradio makes a session's state
    (a copy of every block's config, about 20 ms on 2 idle cores for this page) at the session's first event: a
    visitor pays it on opening the page, so a click is timed here as a visitor's is, not with that cost added."""
    import httpx

    for dependency in client.config["dependencies"]:
        on_load = any(target[1] == "load" for target in dependency.get("targets", []))
        if on_load and dependency.get("backend_fn") and not dependency.get("queue") and not dependency.get("inputs"):
            body = {"data": [], "event_data": None, "fn_index": dependency["id"], "session_hash": client.session_hash}
            httpx.post(f"{client.src}{client.api_prefix}run/predict", json=body, timeout=60).raise_for_status()


def _one_session(
    url: str, question: str, form: RunForm, start: threading.Barrier, timeout: float, first_sign_only: bool = False
) -> SessionResult:
    """One visitor's run through /run_events, timed; with first_sign_only, stopped (as Stop does) at its first sign
    of progress, so that a class's first signs are measured without waiting for every run."""
    from gradio_client import Client

    began = time.perf_counter()
    try:
        client = Client(url, verbose=False)
        open_as_a_browser(client)
        start.wait(timeout)
        began = time.perf_counter()
        job = client.submit(question, *astuple(form), api_name="/run_events")
        first: dict[str, float] = {}  # event type -> when the first of its kind arrived
        for event in job:  # each event as it arrives, so the first sign of progress is timed
            kind = event.get("type") if isinstance(event, dict) else None
            first.setdefault("progress" if kind in PROGRESS else kind, time.perf_counter() - began)
            if first_sign_only and "progress" in first:
                seconds = time.perf_counter() - began
                with contextlib.suppress(Exception):  # a stop the page answers late is not this session's sign
                    job.cancel()
                return SessionResult(question, seconds, 1, (event,), first_progress_s=first["progress"])
        job.result(timeout=timeout)
        events = tuple(job.outputs())
        seconds = time.perf_counter() - began
        return SessionResult(
            question,
            seconds,
            len(events),
            events=events,
            first_progress_s=first.get("progress"),
            first_verdict_s=first.get("window_verdict"),
        )
    except Exception as e:  # one failed session is a measured outcome, not a crash of the measurement
        return SessionResult(question, time.perf_counter() - began, 0, (), f"{type(e).__name__}: {e}")


def drive_sessions(
    url: str,
    questions: Sequence[str],
    form: RunForm = DEFAULT_FORM,
    timeout: float = 600.0,
    progress: Callable[[int, int], None] | None = None,
    first_sign_only: bool = False,
) -> list[SessionResult]:
    """Submit every question at the same moment, each from its own session; results in question order (with
    first_sign_only, each stopped at its first sign of progress)."""
    results: list[SessionResult | None] = [None] * len(questions)
    start = threading.Barrier(len(questions))
    done = 0
    lock = threading.Lock()

    def work(i: int) -> None:
        nonlocal done
        results[i] = _one_session(
            url, questions[i], form, start=start, timeout=timeout, first_sign_only=first_sign_only
        )
        with lock:
            done += 1
            if progress:
                progress(done, len(questions))

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(questions))]
    for t in threads:
        t.start()
    # subtle: one deadline for all; joining each with the whole timeout gave up on a late session after the first
    # join had used it up (two of 30 sessions on the 1.5B were cut off this way at 660 s while still running)
    deadline = time.monotonic() + timeout + 60
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [r or SessionResult(q, timeout, 0, (), "no result") for q, r in zip(questions, results, strict=True)]


def drive_sessions_apart(
    url: str,
    questions: Sequence[str],
    form: RunForm = DEFAULT_FORM,
    timeout: float = 600.0,
    first_sign_only: bool = False,
) -> list[SessionResult]:
    """drive_sessions from a child process, so that the page's process holds the page alone: its memory, and its
    threads and interpreter lock shared with no client (`python -m lab.ops.reliability` reads the job on stdin)."""
    job = {"url": url, "questions": list(questions), "form": asdict(form), "timeout": timeout}
    job = json.dumps(job | {"first_sign_only": first_sign_only})
    child = [sys.executable, "-m", "lab.ops.reliability"]
    done = subprocess.run(child, input=job, capture_output=True, text=True, timeout=timeout + 300, check=True)
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return [SessionResult(**(row | {"events": tuple(row["events"])})) for row in rows]


def summarise_sessions(results: Sequence[SessionResult]) -> dict:
    seconds = [r.seconds for r in results if r.error is None]
    progress = [r.first_progress_s for r in results if r.first_progress_s is not None]
    return {
        "sessions": len(results),
        "completed": len(seconds),
        "errors": [r.error for r in results if r.error],
        "p50_s": percentile(seconds, 50),
        "p95_s": percentile(seconds, 95),
        "max_s": max(seconds, default=float("nan")),
        "mean_updates": statistics.fmean([r.updates for r in results]) if results else 0.0,
        "first_progress_p95_s": percentile(progress, 95) if progress else None,
        "first_progress_max_s": max(progress, default=None),
    }


def rss_mib(field: str = "VmRSS") -> float:
    """Resident memory of this process in MiB (from /proc, so no extra package is needed); field "VmHWM" gives the
    most it has held since it started."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def soak(
    service: Service,
    questions: Sequence[str],
    runs: int,
    form: RunForm = DEFAULT_FORM,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Run `runs` questions one after another, as the page does (Service.plan, then its events); memory after
    each run."""

    memory: list[float] = []
    seconds: list[float] = []
    # what exists before the runs (the model, the index, a test process's whole heap) is frozen out of the collector,
    # so the full collection after each run scans only what the runs made: a second a run in a large process, else
    gc.collect()
    gc.freeze()
    try:
        for i in range(runs):
            began = time.perf_counter()
            for _ in service.events(service.plan(questions[i % len(questions)], form)):
                pass
            seconds.append(time.perf_counter() - began)
            gc.collect()
            memory.append(rss_mib())
            if progress:
                progress(i + 1, runs)
    finally:
        gc.unfreeze()
    settle = min(20, max(1, runs // 10))  # allocator and caches warm up during the first runs
    return {
        "runs": runs,
        "rss_mib": memory,
        "seconds": seconds,
        "rss_after_warmup_mib": memory[settle - 1],
        "rss_last_mib": memory[-1],
        "growth_after_warmup_mib": memory[-1] - memory[settle - 1],
        "warmup_runs": settle,
    }


def own_run_check(service: Service, results: Sequence[SessionResult], form: RunForm) -> list[bool]:
    """Did each session get its own run? Its run must be of its own question, with that question's pages (found the
    way the form asks: hybrid or BM25)."""
    checks, searcher = [], service.searcher(validate_settings(form))
    for result in results:
        expected = [h.page.id for h in searcher.search(result.question, form.k)]
        started = next((e for e in result.events if e.get("type") == "run_started"), {})
        retrieved = next((e for e in result.events if e.get("type") == "retrieved"), {})
        pages = [h["page_id"] for h in retrieved.get("hits", [])]
        checks.append(bool(expected) and started.get("question") == result.question and pages == expected)
    return checks


def load_phase(service: Service, questions: Sequence[str], form: RunForm = DEFAULT_FORM, progress=None) -> dict:
    """Serve the page for service, send every question at once (one session each), then one more after them (the
    server still answers); the summary with each session's seconds and whether it got its own run only."""
    demo, url = serve(service)
    try:
        results = drive_sessions(url, questions, form, progress=progress)
        after = drive_sessions(url, questions[:1], form)
    finally:
        demo.close()
    return summarise_sessions(results) | {
        "own_run_only": sum(own_run_check(service, results, form)),
        "server_answered_afterwards": after[0].error is None,
        "seconds": [r.seconds for r in results],
        "concurrency_limit": service.concurrent_runs,
    }


def reliability_record(kind: str, command: str, service: Service, results: dict, model: str | None = None) -> dict:
    """A result file's content: what was measured, by which command, on what model (default: the base model) and
    corpus, with the shared provenance (code version, date, machine, load average)."""
    return {
        "measurement": kind,
        "command": command,
        "model": model or (service.backend.name if service.backend else None),
        "corpus": f"{service.corpus_label} ({len(service.pages):,} pages)",
        **provenance(),
        "results": results,
    }


if __name__ == "__main__":  # the child of drive_sessions_apart: a job on stdin, the sessions' results on stdout
    _job = json.load(sys.stdin)
    _results = drive_sessions(
        _job["url"],
        _job["questions"],
        RunForm(**_job["form"]),
        timeout=_job["timeout"],
        progress=None,
        first_sign_only=_job["first_sign_only"],
    )
    print(json.dumps([asdict(r) for r in _results]))
