"""The bench's in-process decode comparison (ops/bench_decode.py): fp32, packed weights and llama.cpp on the same
prompt ids, prefill and decode timed apart, each path checked against fp32's tokens; and the rows it adds."""

from __future__ import annotations

import math

import pytest
from test_speed import tiny_llama

from lab.ops.bench_decode import DecodeComparison, PathSpeed, compare_decode, decode_record
from lab.ops.bench_measure import VerdictTimes
from lab.ops.bench_speed import ReplyTimes, SpeedComparison, packed_rows


def test_fp32_and_packed_paths_are_timed_and_compared_and_a_missing_llama_cpp_says_why() -> None:
    c = compare_decode(tiny_llama(), None, list(range(2, 40)), tokens=6, repeats=2)
    assert set(c.paths) == {"fp32", "int4"} and "not asked for" in c.llama_cpp_error
    for p in c.paths.values():
        assert p.prompt_tokens == 38 and p.decode_tokens == 6 and len(p.tokens) == 6
        assert len(p.prefill_seconds) == len(p.decode_seconds) == 2 and p.decode_tok_s > 0
    assert c.agreeing_tokens["fp32"] == 6 and c.same_next_token["fp32"] == 1.0
    assert 1 <= c.agreeing_tokens["int4"] <= 6  # the first token comes from the fp32 prefill
    record = decode_record(c)
    assert record["int4"]["decode_tok_s"] == c.paths["int4"].decode_tok_s and record["threads"] == c.threads
    assert record["llama_cpp_in_process_error"] == c.llama_cpp_error and "llama_cpp_in_process" not in record


def fake_comparison(llama_decode_s: float | None) -> SpeedComparison:
    times = ReplyTimes((2.0, 2.0), (1.0, 1.0), (20, 20), (500, 500), 100)
    faster = ReplyTimes((1.0, 1.0), (0.4, 0.4), (20, 20), (500, 500), 100)
    paths = {
        "fp32": PathSpeed((1.0,), (2.0,), 361, 64, (1,)),
        "int4": PathSpeed((1.0,), (1.0,), 361, 64, (1,)),
    }
    if llama_decode_s is not None:
        paths["llama_cpp_in_process"] = PathSpeed((2.0,), (llama_decode_s,), 361, 64, (1,))
    error = None if "llama_cpp_in_process" in paths else "not installed"
    decode = DecodeComparison(2, paths, dict.fromkeys(paths, 1), dict.fromkeys(paths, 1.0), error)
    verdicts = VerdictTimes((1.0,))
    return SpeedComparison(verdicts, verdicts, times, faster, 4.0, 2.0, None, "x", times, decode)


def test_the_rows_give_the_packed_reply_ratio_and_the_in_process_ratio_against_their_targets() -> None:
    rows = {row.measure: row for row in packed_rows(fake_comparison(0.4))}
    reply = rows["window reply p50, all on: fp32 weights / packed weights"]
    assert reply.result == "2.00 / 1.00 s = 0.50x" and reply.met is True
    ratio = rows["decode tok/s, llama.cpp in-process / ours (packed weights)"]
    assert ratio.result.startswith("2.50x") and ratio.met is False  # 160 tok/s against 64
    missing = {row.measure: row for row in packed_rows(fake_comparison(None))}
    assert missing["decode, llama.cpp in-process"].result == "not measured: not installed"


@pytest.mark.slow
def test_llama_cpp_in_process_reads_the_embedded_gguf_and_agrees_with_fp32_on_a_plain_prompt() -> None:
    from raqa.models.local import TransformersBackend, embedded_model_path

    backend = TransformersBackend.load()
    prompt = backend.prompt_ids([{"role": "user", "content": "Who painted the Mona Lisa? Answer in one sentence."}])
    c = compare_decode(backend.model, str(embedded_model_path()), prompt, tokens=8, repeats=1)
    assert c.llama_cpp_error is None
    llama = c.paths["llama_cpp_in_process"]
    assert llama.decode_tok_s > 0 and math.isfinite(llama.prefill_tok_s)
    assert c.agreeing_tokens["llama_cpp_in_process"] >= 4 and c.agreeing_tokens["int4"] >= 4
