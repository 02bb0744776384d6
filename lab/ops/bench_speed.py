"""The bench's speed comparison: the same windows read with every speed option off and on, in the same run (the two
alternate window by window, so a busy moment slows both), and through llama.cpp's server on the same GGUF file.

Measured, on real NQ-open test questions at the page's defaults (each question's first window):
    first verdict  seconds to the first window verdict at w=5, K=50, off and on;
    replies        per window: the whole reply, its decode part (after the verdict's first token) and its tokens;
                   the prompt tokens sent and those the model actually computed (the rest came from the prefix cache);
                   off, on with fp32 weights (every exact speed-up) and on (decode from packed weights), alternating;
    together       the same windows replied to all at once (on: batched) against one after another (off);
    llama.cpp      the same messages and token budget through llama.cpp's HTTP server (no guided format: the server
                   writes its reply freely, so its token counts are reported beside the time);
    decode         fp32, packed weights and llama.cpp called in-process on the first window's prompt (bench_decode.py).
Left out: repeating the whole comparison to average it (the load average is in the record instead).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import NamedTuple

from lab.ops.bench_decode import DecodeComparison, compare_decode, decode_record
from lab.ops.bench_measure import VERDICT_SETTINGS, VerdictTimes, first_verdict_seconds
from lab.ops.bench_timing import Row, percentile, progress
from raqa.cli.output import say
from raqa.config import AppConfig, RunSettings, SpeedOptions
from raqa.models.base import Backend, Choice, Usage
from raqa.models.endpoint import EndpointBackend, EndpointConfig
from raqa.models.local import embedded_model_path
from raqa.reading.engine import prompt, reply_plan, windows
from raqa.retrieval.index import BM25Index

SPEED_QUESTIONS = 8
PAGE_DEFAULTS = RunSettings()
TARGET_VERDICT_RATIO = 0.5  # on / off, first verdict p50
TARGET_DECODE_RATIO = 2.0  # on / off, decode tokens/s
TARGET_LLAMA_CPP_RATIO = 2.0  # ours (on) / llama.cpp, seconds per window
TARGET_PACKED_REPLY_RATIO = 0.6  # window reply p50, packed weights / fp32 weights (both all on)
TARGET_IN_PROCESS_RATIO = 2.0  # llama.cpp in-process decode tok/s / ours (packed)


class ReplyTimes(NamedTuple):
    seconds: tuple[float, ...]  # per window, the whole reply
    decode_seconds: tuple[float, ...]  # per window, after the first token's probabilities (the Choice)
    completion_tokens: tuple[int, ...]
    prompt_tokens: tuple[int, ...]  # sent
    computed_prompt_tokens: int | None = None  # summed over the windows; None when the backend cannot tell

    @property
    def p50(self) -> float:
        return percentile(self.seconds, 50)

    @property
    def decode_tok_s(self) -> float:
        return sum(self.completion_tokens) / max(sum(self.decode_seconds), 1e-9)


class SpeedComparison(NamedTuple):
    verdict_off: VerdictTimes
    verdict_on: VerdictTimes
    replies_off: ReplyTimes
    replies_on: ReplyTimes
    together_off_s: float  # the windows one after another, options off (the sum of their reply times)
    together_on_s: float  # the same windows all at once, options on (batched)
    llama_cpp: ReplyTimes | None
    llama_cpp_error: str | None = None
    replies_exact: ReplyTimes | None = None  # all on, fp32 weights (SpeedOptions.exact())
    decode: DecodeComparison | None = None


def first_windows(index: BM25Index, backend: Backend, questions: Sequence[str]) -> list[list[dict[str, str]]]:
    """Each question's first window at the page's defaults, as chat messages."""
    found = []
    for question in questions:
        hits = index.search(question, PAGE_DEFAULTS.k)
        if hits:
            first = windows(hits, PAGE_DEFAULTS.window, PAGE_DEFAULTS.order)[0]
            found.append(prompt(question, first, backend, PAGE_DEFAULTS))
    return found


def timed_reply(backend: Backend, messages) -> tuple[float, float, int, int]:
    """(seconds, decode seconds, completion tokens, prompt tokens) of one guided reply."""
    plan = reply_plan(PAGE_DEFAULTS)
    start = time.perf_counter()
    decode_from = None
    usage = Usage(0, 0)
    for piece in backend.reply(messages, plan, PAGE_DEFAULTS.answer_threshold):
        if decode_from is None and isinstance(piece, (Choice, str)):
            decode_from = time.perf_counter()
        if isinstance(piece, Usage):
            usage = piece
    end = time.perf_counter()
    return end - start, end - (decode_from or start), usage.completion_tokens, usage.prompt_tokens


def _times(rows: list[tuple[float, float, int, int]], computed: int | None) -> ReplyTimes:
    seconds, decode, completion, prompt_tokens = (tuple(column) for column in zip(*rows, strict=True))
    return ReplyTimes(seconds, decode, completion, prompt_tokens, computed)


def all_at_once(backend: Backend, messages: Sequence) -> list[tuple[float, int, int]]:
    """Every window's reply started at the same moment, one thread each: for each reply, in the order they ended,
    (seconds from the start until it was done, its prompt tokens, its completion tokens)."""
    start = threading.Barrier(len(messages) + 1)
    errors: list[BaseException] = []
    done: list[tuple[float, int, int]] = []
    lock = threading.Lock()
    began = 0.0

    def work(window) -> None:
        start.wait()
        try:
            _, _, completion, prompt_tokens = timed_reply(backend, window)
            with lock:
                done.append((time.perf_counter() - began, prompt_tokens, completion))
        except BaseException as e:  # noqa: BLE001 - reported below, in the measuring thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(m,), daemon=True) for m in messages]
    for t in threads:
        t.start()
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"A reply failed when all ran at once: {errors[0]}")
    return sorted(done)


def llama_cpp_replies(messages: Sequence) -> tuple[ReplyTimes | None, str | None]:
    """The same windows through llama.cpp's server on the embedded GGUF; (None, why) when it cannot run."""
    from lab.ops.llama_server import ALIAS, llama_cpp_server  # lazy: imports torch

    try:
        with llama_cpp_server(embedded_model_path()) as url:
            server = EndpointBackend(EndpointConfig("SmolLM2 (llama.cpp)", url, ALIAS, context_tokens=4096))
            timed_reply(server, messages[0])  # warm-up: the server loads the model on its first request
            rows = [timed_reply(server, m) for m in progress(messages, "llama.cpp replies")]
    except (RuntimeError, OSError) as e:
        return None, str(e).splitlines()[0]
    return _times(rows, None), None


def first_window_decode(index: BM25Index, backend, question: str, gguf: str | None) -> DecodeComparison:
    """fp32, packed weights and llama.cpp in-process (gguf; None leaves it out) on the question's first window.

    subtle: run it before anything calls torch from another thread (the batcher's worker, the replies all at once):
    afterwards torch's calls from this thread ran about 1.8x slower here, and llama.cpp's alongside them too."""
    say("Decode: fp32, packed weights and llama.cpp in-process, on the first window's prompt")
    [messages] = first_windows(index, backend, [question])
    return compare_decode(backend.model, gguf, backend.prompt_ids(messages))


def compare_speed(
    index: BM25Index,
    backend,
    questions: Sequence[str],
    verdict_questions: Sequence[str],
    with_llama_cpp: bool = True,
    decode: DecodeComparison | None = None,
) -> SpeedComparison:
    """Every speed option off and on, in the same run (see the module docstring)."""
    on, off = backend.with_speed(SpeedOptions()), backend.with_speed(SpeedOptions.off())
    exact = backend.with_speed(SpeedOptions.exact())
    verdicts = {"off": [], "on": []}
    for question in progress(verdict_questions, "first verdicts, off and on"):
        for name, which in (("off", off), ("on", on)):
            seconds = first_verdict_seconds(index, which, question, VERDICT_SETTINGS)
            if seconds is not None:
                verdicts[name].append(seconds)
    messages = first_windows(index, backend, questions)
    if not messages or not verdicts["on"]:
        raise RuntimeError("No question had pages to read.")
    for which in (on, off, exact):
        timed_reply(which, messages[0])  # warm-up: the first passes after a load are slow
    on.prompt_tokens_sent = on.prompt_tokens_computed = exact.prompt_tokens_sent = exact.prompt_tokens_computed = 0
    rows_off, rows_exact, rows_on = [], [], []
    for window in progress(messages, "replies: off, on with fp32 weights, on"):
        rows_off.append(timed_reply(off, window))
        rows_exact.append(timed_reply(exact, window))
        rows_on.append(timed_reply(on, window))
    replies_off, replies_on = _times(rows_off, None), _times(rows_on, on.prompt_tokens_computed)
    replies_exact = _times(rows_exact, exact.prompt_tokens_computed)
    say("The same windows all at once, batched")
    together_on = all_at_once(on, messages)[-1][0]
    llama, why = llama_cpp_replies(messages) if with_llama_cpp else (None, "not asked for (--no-llama-cpp)")
    return SpeedComparison(
        VerdictTimes(tuple(verdicts["off"])),
        VerdictTimes(tuple(verdicts["on"])),
        replies_off,
        replies_on=replies_on,
        together_off_s=sum(replies_off.seconds),
        together_on_s=together_on,
        llama_cpp=llama,
        llama_cpp_error=why,
        replies_exact=replies_exact,
        decode=decode,
    )


def speed_rows(s: SpeedComparison) -> list[Row]:
    """The table's rows for the comparison: off, on, their ratio, and the target each ratio has."""
    v_off, v_on, r_off, r_on = s.verdict_off, s.verdict_on, s.replies_off, s.replies_on
    verdict_ratio = v_on.p50 / v_off.p50
    decode_ratio = r_on.decode_tok_s / r_off.decode_tok_s
    windows = len(r_on.seconds)
    sent = sum(r_on.prompt_tokens)
    rows = [
        Row(
            f"first verdict p50, speed-ups off / on (w={VERDICT_SETTINGS.window}, K={VERDICT_SETTINGS.k})",
            f"{v_off.p50:.2f} / {v_on.p50:.2f} s = {verdict_ratio:.2f}x",
            f"<= {TARGET_VERDICT_RATIO:g}x",
            verdict_ratio <= TARGET_VERDICT_RATIO,
        ),
        Row(
            f"window reply p50, off / on (page defaults, {windows} windows)",
            f"{r_off.p50:.2f} / {r_on.p50:.2f} s = {r_on.p50 / r_off.p50:.2f}x",
        ),
        Row(
            "decode tokens/s in replies, off / on",
            f"{r_off.decode_tok_s:.1f} / {r_on.decode_tok_s:.1f} = {decode_ratio:.2f}x",
            f">= {TARGET_DECODE_RATIO:g}x",
            decode_ratio >= TARGET_DECODE_RATIO,
        ),
        Row(
            "prompt tokens per window, sent / computed (on)",
            f"{sent / windows:.0f} / {(r_on.computed_prompt_tokens or 0) / windows:.0f}",
        ),
        Row(
            f"{windows} windows one after another (off) / all at once (on)",
            f"{s.together_off_s:.1f} / {s.together_on_s:.1f} s = {s.together_on_s / s.together_off_s:.2f}x",
        ),
    ]
    rows += packed_rows(s)
    if s.llama_cpp is None:
        rows.append(Row("window reply p50, llama.cpp server", f"not measured: {s.llama_cpp_error}"))
        return rows
    llama = s.llama_cpp
    ratio = r_on.p50 / llama.p50
    rows += [
        Row(
            "window reply p50, llama.cpp server (same GGUF, messages, budget)",
            f"{llama.p50:.2f} s ({sum(llama.completion_tokens) / windows:.0f} tokens a reply, ours "
            f"{sum(r_on.completion_tokens) / windows:.0f})",
        ),
        Row(
            "window reply p50, ours (on) / llama.cpp",
            f"{ratio:.2f}x (off: {r_off.p50 / llama.p50:.2f}x)",
            f"<= {TARGET_LLAMA_CPP_RATIO:g}x",
            ratio <= TARGET_LLAMA_CPP_RATIO,
        ),
        Row("decode tokens/s, llama.cpp server", f"{llama.decode_tok_s:.1f}"),
    ]
    return rows


def packed_rows(s: SpeedComparison) -> list[Row]:
    """Packed weights against fp32 weights (both all on) in replies, and the in-process decode comparison."""
    rows = []
    if s.replies_exact is not None:
        exact, on = s.replies_exact, s.replies_on
        ratio = on.p50 / exact.p50
        rows += [
            Row(
                "window reply p50, all on: fp32 weights / packed weights",
                f"{exact.p50:.2f} / {on.p50:.2f} s = {ratio:.2f}x",
                f"<= {TARGET_PACKED_REPLY_RATIO:g}x",
                ratio <= TARGET_PACKED_REPLY_RATIO,
            ),
            Row(
                "decode tokens/s in replies, fp32 / packed weights", f"{exact.decode_tok_s:.1f} / {on.decode_tok_s:.1f}"
            ),
        ]
    if s.decode is None:
        return rows
    paths = s.decode.paths
    for name, label in (("fp32", "fp32 weights"), ("int4", "packed weights"), ("llama_cpp_in_process", "llama.cpp")):
        if name in paths:
            p = paths[name]
            rows.append(
                Row(
                    f"in-process prefill / decode, {label} ({p.prompt_tokens}-token prompt, {p.decode_tokens} tokens)",
                    f"{p.prefill_tok_s:.0f} / {p.decode_tok_s:.1f} tok/s",
                )
            )
    if "llama_cpp_in_process" not in paths:
        rows.append(Row("decode, llama.cpp in-process", f"not measured: {s.decode.llama_cpp_error}"))
        return rows
    ratio = paths["llama_cpp_in_process"].decode_tok_s / paths["int4"].decode_tok_s
    rows.append(
        Row(
            "decode tok/s, llama.cpp in-process / ours (packed weights)",
            f"{ratio:.2f}x (fp32 weights: {paths['llama_cpp_in_process'].decode_tok_s / paths['fp32'].decode_tok_s:.2f}x)",
            f"<= {TARGET_IN_PROCESS_RATIO:g}x",
            ratio <= TARGET_IN_PROCESS_RATIO,
        )
    )
    return rows


def speed_record(s: SpeedComparison | None) -> dict | None:
    """The comparison's raw numbers (per-window seconds and tokens) with its summary figures."""
    if s is None:
        return None
    replies = {
        "off": s.replies_off,
        "on_fp32_weights": s.replies_exact,
        "on": s.replies_on,
        "llama_cpp_server": s.llama_cpp,
    }
    return {
        **(decode_record(s.decode) if s.decode else {}),
        "options_on": asdict(SpeedOptions()),
        "options_off": asdict(SpeedOptions.off()),
        "options_on_fp32_weights": asdict(SpeedOptions.exact()),
        "first_verdict": {
            "off": s.verdict_off._asdict(),
            "on": s.verdict_on._asdict(),
            "p50_off": s.verdict_off.p50,
            "p50_on": s.verdict_on.p50,
        },
        "replies": {
            name: None if r is None else {**r._asdict(), "p50": r.p50, "decode_tok_s": r.decode_tok_s}
            for name, r in replies.items()
        },
        "together_off_s": s.together_off_s,
        "together_on_s": s.together_on_s,
        "llama_cpp_server_error": s.llama_cpp_error,
        "settings": asdict(PAGE_DEFAULTS),
    }


def embedded_gguf(config: AppConfig) -> str | None:
    """The GGUF file the model was loaded from, for llama.cpp in-process: the embedded one, or --model FILE.gguf;
    None with an adapter (llama.cpp would read the base model without it)."""
    if config.adapter:
        return None
    if config.model is None:
        return str(embedded_model_path())
    return config.model if str(config.model).endswith(".gguf") else None
