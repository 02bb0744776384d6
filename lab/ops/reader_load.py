"""Both readers under a class, in one run: the 1.5B in llama.cpp and the small model, each with 1, 10, 20 and 30
visitors asking distinct live questions at once through the served page's API, and the 1.5B's decode in-process
against llama.cpp's own figure for the same request.

For each group of visitors: every session's whole run (p50, p95), its first sign of progress (its place in line or
its first window) and its first verdict, whether it was offered the small model, and the page's memory now and at
its peak. The visitors' clients run in a child process, so the page's process holds the page alone. For the
1.5B the group's compute limit comes from llama.cpp's own counters (`/metrics`: the seconds it spent on prompt and
reply tokens, which is every token the runs needed divided by the engine's measured throughput); one run at a time
reads, so the slowest visitors should end close to it. While the 30 wait for the 1.5B, one more visitor takes the
offer and asks the small model; its run is timed too. A group of one visitor is asked `solo` times, one after
another, for a first verdict p50 of one visitor.

Decode parity, after the groups: the first window of the first question, 64 tokens at temperature 0, streamed
through the backend the page uses (tokens after the first, over the time from the first to the last) against
`timings.predicted_per_second` that llama.cpp reports for the same request, in this process and alone in a child
process that loads nothing else (median of 3 each). Left out: llama.cpp's separate `llama-bench` program (no
wheel ships it), and the browser's part of the time.
"""

from __future__ import annotations

import re
import statistics
import threading
from collections.abc import Callable, Sequence

from lab.ops.bench_timing import percentile
from lab.ops.reader_decode import READER_DECODE_TOKENS, clean_process, decode_rate
from lab.ops.reliability import SessionResult, drive_sessions_apart, rss_mib, serve, summarise_sessions
from raqa.config import RunForm
from raqa.service import Service

LINE_TIMEOUT_S = 3600.0  # 30 runs of about a minute, one at a time: the last ends after half an hour
COUNTERS = ("prompt_tokens_total", "prompt_seconds_total", "tokens_predicted_total", "tokens_predicted_seconds_total")
OFFER_TAKER_DELAY_S = 5.0  # when the visitor who takes the offer arrives, after the 30


def engine_counters(backend) -> dict[str, float] | None:
    """llama.cpp's cumulative counters (its /metrics text), or None for a backend that is not llama.cpp."""
    server = getattr(backend, "server", None)
    if server is None:
        return None
    text = server.handle_metrics()
    text = text if isinstance(text, str) else str(text)
    found = {name: re.search(rf"^llamacpp:{name} ([0-9.eE+-]+)$", text, re.M) for name in COUNTERS}
    return {name: float(m.group(1)) for name, m in found.items() if m}


def compute_used(before: dict | None, after: dict | None) -> dict | None:
    """What the engine computed between two counter readings: tokens and seconds, prompt and reply."""
    if not before or not after:
        return None
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    busy = delta["prompt_seconds_total"] + delta["tokens_predicted_seconds_total"]
    return {
        "prompt_tokens": int(delta["prompt_tokens_total"]),
        "reply_tokens": int(delta["tokens_predicted_total"]),
        "prompt_tok_s": delta["prompt_tokens_total"] / max(delta["prompt_seconds_total"], 1e-9),
        "reply_tok_s": delta["tokens_predicted_total"] / max(delta["tokens_predicted_seconds_total"], 1e-9),
        "limit_s": busy,
    }


def _session_figures(results: Sequence[SessionResult]) -> dict:
    verdicts = [r.first_verdict_s for r in results if r.first_verdict_s is not None]
    told = [[e for e in r.events if e.get("type") == "in_line"] for r in results]
    return {
        "first_verdict_p50_s": percentile(verdicts, 50) if verdicts else None,
        "waited": sum(bool(t) for t in told),
        "offered_small_model": sum(any(e.get("offer") for e in t) for t in told),
        "answered": sum(bool(r.final and r.final.get("answer")) for r in results),
        "first_progress_s": [r.first_progress_s for r in results],
        "first_verdict_s": [r.first_verdict_s for r in results],
        "seconds": [r.seconds for r in results],
    }


def reader_group(
    url: str, service: Service, questions: Sequence[str], form: RunForm, one_by_one: bool, taker=None
) -> dict:
    """One group of visitors: all at once, or (one_by_one) each alone after the other; taker (a question and a form)
    is a visitor who arrives a little later on another reader, timed apart."""
    backend = service.reader(form.reader)[1]
    before = engine_counters(backend)
    extra: list[SessionResult] = []
    if taker is not None:
        late = threading.Timer(
            OFFER_TAKER_DELAY_S, lambda: extra.extend(drive_sessions_apart(url, [taker[0]], taker[1], LINE_TIMEOUT_S))
        )
        late.start()
    if one_by_one:
        results = [drive_sessions_apart(url, [question], form, LINE_TIMEOUT_S)[0] for question in questions]
    else:
        results = drive_sessions_apart(url, questions, form, LINE_TIMEOUT_S)
    if taker is not None:
        late.join()
    summary = summarise_sessions(results) | _session_figures(results)
    summary |= {"rss_mib": rss_mib(), "rss_peak_mib": rss_mib("VmHWM")}
    used = compute_used(before, engine_counters(backend))
    if used is not None and not one_by_one:
        used["p95_over_limit"] = summary["p95_s"] / used["limit_s"]
    summary["compute"] = used
    if extra:
        summary["offer_taken"] = {"reader": taker[1].reader, "question": extra[0].question} | {
            k: v for k, v in vars(extra[0]).items() if k in ("seconds", "first_progress_s", "first_verdict_s", "error")
        }
    return summary


def decode_parity(backend, messages, runs: int = 3, gguf: str | None = None) -> dict:
    """Decode tok/s of one reply streamed through the backend against llama.cpp's own figure for the same request:
    its timings in this process and, given the GGUF's path, alone in a child process that loads nothing else."""
    from raqa.models.llamacpp import THREADS

    ours, own, prompt_own = [], [], []
    request = backend._request(messages, READER_DECODE_TOKENS, False)
    for _ in range(runs):
        ours.append(decode_rate(backend, messages))
        result = backend.server.handle_chat_completions(request)
        timings = result.get("timings", {}) if isinstance(result, dict) else {}
        own.append(timings.get("predicted_per_second", float("nan")))
        prompt_own.append(timings.get("prompt_per_second", float("nan")))
    decode, engine = statistics.median(ours), statistics.median(own)
    out = {
        "decode_tok_s": decode,
        "llama_cpp_decode_tok_s": engine,
        "llama_cpp_over_ours": engine / decode,
        "decode_tok_s_runs": ours,
        "llama_cpp_decode_tok_s_runs": own,
        "llama_cpp_prompt_tok_s_runs": prompt_own,
        "prompt_tokens": backend.count_prompt_tokens(messages),
        "reply_tokens": READER_DECODE_TOKENS,
        "threads": THREADS,
    }
    if gguf:
        alone = [t["predicted_per_second"] for t in clean_process(gguf, request, THREADS, runs)]
        out |= {
            "llama_cpp_alone_decode_tok_s": statistics.median(alone),
            "llama_cpp_alone_decode_tok_s_runs": alone,
            "alone_over_ours": statistics.median(alone) / decode,
        }
    return out


def measure_reader_load(
    service: Service,
    readers: dict[str, str],
    visitors: Sequence[int],
    questions: Sequence[str],
    form: RunForm,
    solo: int,
    progress: Callable[[str], None] = print,
) -> dict:
    """Every reader (a record key -> its reader name) with every group size: each group its own questions, the same
    for each reader."""
    demo, url = serve(service)
    out: dict = {}
    try:
        for key, reader in readers.items():
            out[key], cursor = {}, 0
            for n in visitors:
                asked = list(questions[cursor : cursor + (solo if n == 1 else n)])
                cursor += len(asked)
                taker = None
                if n == max(visitors) and key == "load" and "load_small_model" in readers:
                    taker = (questions[cursor], form.replace(reader=readers["load_small_model"]))
                    cursor += 1
                progress(f"{reader}: {n} visitor(s) at once, {len(asked)} question(s)")
                result = reader_group(
                    url, service, asked, form=form.replace(reader=reader), one_by_one=n == 1, taker=taker
                )
                out[key][f"sessions_{n}"] = result
                progress(
                    f"  p50 {result['p50_s']:.1f} s, p95 {result['p95_s']:.1f} s, first progress max "
                    f"{result['first_progress_max_s']:.2f} s, RSS {result['rss_mib']:.0f} MiB"
                )
    finally:
        demo.close()
    return out
