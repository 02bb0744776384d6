"""Tests of the benchmark's pure helpers and of its retrieval-latency part on a small corpus (no model)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
import pytest

from lab.ops import bench, bench_start
from lab.ops.bench import BenchResults, Row, build_rows, format_table
from lab.ops.bench_measure import (
    IndexTimes,
    ModelLoad,
    RetrievalLatency,
    Throughput,
    TokenCosts,
    VerdictTimes,
    retrieval_latency,
    top_k,
)
from lab.ops.bench_start import AskStart, StartTime
from lab.ops.bench_timing import CpuWatch, percentile
from raqa.config import AppConfig
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import BM25Index

PAGES = [
    Page("1", "Mona Lisa", "The Mona Lisa is a portrait painted by Leonardo da Vinci."),
    Page("2", "Leonardo da Vinci", "Leonardo was an Italian painter, engineer and scientist."),
    Page("3", "Paris", "Paris is the capital of France and home of the Louvre museum."),
    Page("4", "Louvre", "The Louvre in Paris holds the Mona Lisa."),
    Page("5", "Physics", "The first Nobel Prize in Physics went to Wilhelm Röntgen for X-rays."),
    Page("6", "Deadpool", "Deadpool 2 was released in May 2018."),
    Page("7", "Shortwave", "Shortwave broadcasting uses amplitude modulation and digital modes."),
    Page("8", "Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
]
QUESTIONS = [
    "who painted the mona lisa",
    "who got the first nobel prize in physics",
    "when was deadpool 2 released",
    "which mode is used for short wave broadcast",
    "who wrote hamlet",
    "where is the louvre",
]


@pytest.mark.parametrize("q", [0, 5, 25, 50, 90, 95, 100])
@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(np.linspace(0, 1, 17) ** 2)])
def test_percentile_matches_numpy(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_no_values_is_nan():
    assert math.isnan(percentile([], 50))


@pytest.mark.parametrize("q", [-1, 101])
def test_percentile_rejects_q_outside_0_to_100(q):
    with pytest.raises(ValueError):
        percentile([1.0], q)


def test_format_table_aligns_columns_and_marks_targets():
    table = format_table(
        [
            Row("bm25s query p50", "0.300 ms", "p50 < 1 ms", True),
            Row("speed-up", "20x", ">= 50x", False),
            Row("a longer measure without a target", "7 s"),
        ]
    )
    lines = table.splitlines()
    assert lines[0].split() == ["measure", "result", "target", "met"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].endswith("yes") and lines[3].endswith("NO") and lines[4].endswith("7 s")
    # every column starts at the same offset on every line
    starts = [lines[0].index(word) for word in ("result", "target", "met")]
    assert [lines[2].index("0.300"), lines[2].index("p50 <"), lines[2].index("yes")] == starts
    assert [lines[3].index("20x"), lines[3].index(">= 50x"), lines[3].index("NO")] == starts


def _results(tokens: TokenCosts | None, others_cpu: dict[str, float] | None = None) -> BenchResults:
    return BenchResults(
        IndexTimes(10_033, 8.0, 0.2),
        RetrievalLatency(500, 0.5, 0.9, 500, 25.0, 40.0),
        ModelLoad(30.0, 3.0),
        Throughput(134_515_008, 512, 800.0, 32, 20.0, 50.0),
        StartTime(9.0, 8.0),
        AskStart("Who painted the Mona Lisa?", 4.0, 5.5, 7.25),
        VerdictTimes((2.0, 3.0, 5.0)),
        tokens,
        others_cpu or {},
    )


def test_build_rows_reports_targets_from_the_numbers():
    rows = {row.measure.split(" (")[0]: row for row in build_rows(_results(TokenCosts(50, 0, 700.0, 2000.0, 1.2)))}
    assert rows["bm25s query p50 / p95"].met is True
    assert rows["speed-up over rank_bm25"] == Row("speed-up over rank_bm25 (p50)", "50x", ">= 50x", True)
    assert rows["first verdict p50"].result == "3.0 s" and rows["first verdict p50"].met is True
    assert rows["first verdict max"].met is False
    assert rows["app start, cached"].met is True
    assert rows["ask start, cached"] == Row(
        "ask start, cached (new process, until its run begins)",
        "4.0 s (first verdict 5.5 s, final 7.2 s)",
        "< 6 s",
        True,
    )
    assert rows["prefill"].result == "800 tok/s = 215.2 GFLOP/s"
    assert rows["iterative / Top-K"].result == "0.35 (1.20 windows read)"
    assert not any(r.measure.startswith("prompt tokens") for r in build_rows(_results(None)))


def test_json_record_is_serialisable():
    args = argparse.Namespace(queries=500, token_questions=50, corpus=None, model=None, adapter=None, out="b.json")
    payload = bench.bench_record(args, _results(TokenCosts(50, 0, 700.0, 2000.0, 1.2)), "wiki", "smol")
    text = json.dumps(payload)
    assert payload["command"] == "python -m lab bench speed --queries 500 --token-questions 50 --out b.json"
    assert payload["retrieval"]["speedup"] == 50.0 and payload["tokens"]["ratio"] == 0.35
    assert {"cpu_count", "platform", "torch_threads"} <= payload["machine"].keys()
    assert {"code_version", "date", "load_average_before"} <= payload.keys()
    assert payload["code_version"].startswith("raqa ")
    assert json.loads(text)["first_verdict"]["max"] == 5.0
    assert payload["ask_start"] == {
        "question": "Who painted the Mona Lisa?",
        "run_started_s": 4.0,
        "first_verdict_s": 5.5,
        "final_s": 7.25,
        "command": "python -m raqa ask 'Who painted the Mona Lisa?' --json",
    }


@pytest.mark.parametrize(
    ("ask", "result", "met"),
    [
        (AskStart("q", 1.5, 6.0, 9.0), "1.5 s (first verdict 6.0 s, final 9.0 s)", True),
        (AskStart("q", 6.2, 17.4, None), "6.2 s (first verdict 17.4 s, no final)", False),
        (AskStart("q", 1.5, None, 3.0), "1.5 s (no window verdict, final 3.0 s)", True),
        (AskStart("q", None, None, None), "never began (no window verdict, no final)", False),
    ],
)
def test_ask_start_row_is_judged_on_the_start_like_the_app_start(ask, result, met):
    row = bench.ask_start_row(ask)
    assert (row.result, row.target, row.met) == (result, "< 6 s", met)


def test_ask_command_passes_the_bench_settings_through(tmp_path):
    config = AppConfig(corpus="c.jsonl", model="m.gguf", adapter=None, cache_dir=tmp_path)
    argv = bench_start.ask_command(config, "who?")
    assert argv[1:] == ["-m", "raqa", "ask", "who?", "--json", "--cache", str(tmp_path), "--corpus", "c.jsonl"] + [
        "--model",
        "m.gguf",
    ]


# Stands in for `python -m raqa ask --json`: progress on stderr, then event lines on stdout, a while apart.
SCRIPTED_ASK = """
import json, sys, time
print("Loading the model", file=sys.stderr)
time.sleep(0.2)
for kind in ("run_started", "retrieved", "window_started", "reply_delta", "window_verdict"):
    print(json.dumps({"type": kind}), flush=True)
print("not json", flush=True)
time.sleep(0.3)
print(json.dumps({"type": "final"}), flush=True)
sys.exit(int(sys.argv[1]))
"""


def test_ask_start_times_the_first_verdict_and_the_final_line(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_start, "ask_command", lambda config, q: [sys.executable, "-c", SCRIPTED_ASK, "0"])
    asked = bench_start.ask_start(AppConfig(cache_dir=tmp_path), "q")
    assert asked.question == "q"
    assert 0.2 <= asked.run_started_s <= asked.first_verdict_s < asked.final_s
    assert asked.final_s - asked.first_verdict_s >= 0.25


def test_ask_start_reports_a_failed_process(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_start, "ask_command", lambda config, q: [sys.executable, "-c", SCRIPTED_ASK, "3"])
    with pytest.raises(RuntimeError, match="failed \\(3\\): Loading the model"):
        bench_start.ask_start(AppConfig(cache_dir=tmp_path), "q")


def test_notes_name_the_parts_other_processes_slowed():
    quiet = bench.notes(_results(None, {"query latency": 0.01}))
    assert quiet == ["NQ-open test questions (pyserini 0.17.0), the first 500; top-100 pages."]
    busy = bench.notes(_results(None, {"query latency": 0.01, "first verdicts": 0.4}))
    assert busy[-1] == "Other processes used part of the CPUs meanwhile (first verdicts 40%); those times are inflated."
    fewer = _results(None)._replace(retrieval=RetrievalLatency(900, 0.5, 0.9, 500, 25.0, 40.0))
    assert "rank_bm25 timed on the first 500 of those questions." in bench.notes(fewer)


def test_cpu_watch_records_a_share_per_part():
    watch = CpuWatch()
    with watch.part("sleep"):
        time.sleep(0.05)
    assert set(watch.shares) <= {"sleep"}  # empty where /proc/stat is missing
    assert all(share >= 0.0 for share in watch.shares.values())


def test_top_k_orders_by_score_then_position():
    scores = np.array([0.5, 2.0, 0.5, 3.0, 0.0])
    assert top_k(scores, 3).tolist() == [3, 1, 0]
    assert top_k(scores, 10).tolist() == [3, 1, 0, 2, 4]


def test_retrieval_latency_on_a_small_corpus():
    index = BM25Index.build(PAGES)
    assert index.search(QUESTIONS[0], 1)[0].page.title == "Mona Lisa"
    latency = retrieval_latency(index, QUESTIONS, k=5, baseline_max=4)
    assert latency.queries == len(QUESTIONS) and latency.baseline_queries == 4
    assert 0 < latency.bm25s_p50_ms <= latency.bm25s_p95_ms
    assert 0 < latency.rank_bm25_p50_ms <= latency.rank_bm25_p95_ms
    assert latency.speedup == pytest.approx(latency.rank_bm25_p50_ms / latency.bm25s_p50_ms)


@pytest.mark.parametrize(("queries", "token_questions"), [(0, 50), (500, -1)])
def test_main_rejects_bad_counts(queries, token_questions, capsys):
    args = argparse.Namespace(
        queries=queries, token_questions=token_questions, out=None, corpus=None, model=None, adapter=None, cache=None
    )
    assert bench.main(args) == 2
    assert "must be" in capsys.readouterr().err
