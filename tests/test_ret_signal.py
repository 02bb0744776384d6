"""experiment ret_signal: two adapters' P(<RET>) compared on the same questions (paired AUCs, spread), the comparison
written as a record, and the pipeline record scored again with the candidate's P(<RET>)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.__main__ import main
from lab.evaluation.ret_signal import compare, paired_auc, rescored_rows, spread
from lab.figures.when_to_retrieve import ret_signal_figure
from lab.training.when_to_retrieve_data import Labelled
from raqa.config import ASSETS_DIR
from raqa.web.render_when_to_retrieve import ret_signal_summary
from raqa.when_to_retrieve.uncertainty import SIGNALS


def test_paired_auc_orders_the_adapters_and_bounds_the_difference():
    needs = [False] * 10 + [True] * 30
    flat = [0.9] * 40  # tells nothing: AUC 0.5
    informative = [0.1 + 0.01 * i for i in range(10)] + [0.5 + 0.01 * i for i in range(30)]
    r = paired_auc(flat, informative, needs)
    assert r["baseline"]["value"] == 0.5 and r["candidate"]["value"] == 1.0 and r["difference"]["value"] == 0.5
    assert 0 < r["difference"]["low"] <= 0.5 <= r["difference"]["high"]
    assert r["n"] == 40 and r["needs_retrieval"] == 30
    assert paired_auc(flat, flat, needs)["difference"] == {"value": 0.0, "low": 0.0, "high": 0.0}


def test_spread_shows_a_probability_that_barely_moves():
    s = spread([0.83, 0.85, 0.9, 0.93])
    assert s["min"] == 0.83 and s["max"] == 0.93 and s["at_or_above_half"] == 1.0 and s["stdev"] < 0.05


def _groups(candidate_better_on: set[str]) -> dict:
    needs = [False, False, True, True]
    good, bad = [0.1, 0.2, 0.8, 0.9], [0.9, 0.8, 0.2, 0.1]
    return {
        f"test:{d}": {"needs": needs, "baseline": [0.5] * 4, "candidate": good if d in candidate_better_on else bad}
        for d in ("nq", "triviaqa")
    }


@pytest.mark.parametrize(("better", "verdict"), [({"nq", "triviaqa"}, True), ({"nq"}, False), (set(), False)])
def test_more_informative_means_a_higher_auc_on_every_test_set(better, verdict):
    result = compare(_groups(better), {"nq": [0.5] * 4, "triviaqa": [0.5, 0.5, 0.5, 0.51]})
    assert result["candidate_higher_on_every_test_set"] is verdict
    assert result["record_matches"]["baseline"] == {"nq": 0.0, "triviaqa": 0.01}


def _row(i: int, dataset: str, split: str, knows: bool) -> dict:
    ending = {"answer": "x", "correct": False, "exact": False, "verdict": "answered", "windows_read": 1}
    return {
        "id": f"{dataset}-{split}-{i}",
        "dataset": dataset,
        "split": split,
        "question": f"question {i} of {dataset}?",
        "answers": ["gold"],
        "answerable": True,
        "closed_book": {"answer": "y", "correct": knows, "exact": knows, "signals": {s: 0.5 for s in SIGNALS}},
        "readers": {"base": ending, "base+judge": {**ending, "answer": None}},
    }


def test_rescored_rows_replace_only_not_ret():
    rows = [_row(0, "nq", "test", True), _row(1, "nq", "test", False)]
    out = rescored_rows(rows, {("nq", "test", "nq-test-0"): 0.2, ("nq", "test", "nq-test-1"): 0.9})
    assert [round(r["closed_book"]["signals"]["not_ret"], 6) for r in out] == [0.8, 0.1]
    assert all(r["closed_book"]["signals"]["p_true"] == 0.5 for r in out)
    assert rows[0]["closed_book"]["signals"]["not_ret"] == 0.5  # the input is left as it was


class _FakeAdapters:
    """P(<RET>) from the question alone: the candidate knows which questions the model gets right."""

    name = "fake + Adapt-LLM adapters"

    def __init__(self, known: set[str]):
        self.known = known

    def ret_probability(self, messages, adapter: str) -> float:
        question = messages[-1]["content"]
        if adapter == "baseline":
            return 0.9
        return 0.1 if any(q in question for q in self.known) else 0.8


@pytest.fixture
def record_files(tmp_path: Path) -> dict[str, Path]:
    rows = {"dev": [], "test": []}
    for split in rows:
        for d in ("nq", "triviaqa"):
            rows[split] += [_row(i, d, split, knows=i < 3) for i in range(10)]
    for row in rows["test"]:
        row["closed_book"]["signals"]["not_ret"] = 0.1  # what the baseline adapter gave: P(<RET>) 0.9
    record = {
        "experiment": "pipeline",
        "dataset": "nq+triviaqa",
        "command": "python -m lab experiment pipeline",
        "results": {"rows": rows},
    }
    (tmp_path / "record.json").write_text(json.dumps(record))
    labelled = [
        Labelled("nq", f"nq-dev-{i}", f"trained {i}?", ("a",), "r", i < 2, "", "", None, False) for i in range(6)
    ]
    (tmp_path / "training.jsonl").write_text("\n".join(json.dumps(x.as_dict()) for x in labelled))
    for name in ("baseline", "candidate"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text("{}")
    return {
        name: tmp_path / f
        for name, f in (
            ("record", "record.json"),
            ("training", "training.jsonl"),
            ("baseline", "baseline"),
            ("candidate", "candidate"),
            ("out", "out"),
        )
    }


def _args(files: dict[str, Path], *extra: str) -> list[str]:
    return [
        "experiment",
        "ret_signal",
        "--candidate",
        str(files["candidate"]),
        "--baseline",
        str(files["baseline"]),
        "--record",
        str(files["record"]),
        "--training",
        str(files["training"]),
        "--out",
        str(files["out"]),
        *extra,
    ]


def test_compare_ret_writes_the_comparison_and_can_rescore_the_pipeline_record(record_files, monkeypatch, capsys):
    known = {f"question {i} of" for i in range(3)} | {"trained 0?", "trained 1?"}
    monkeypatch.setattr("lab.cli.ret_signal._load", lambda args: _FakeAdapters(known))
    monkeypatch.setattr("lab.cli.ret_signal.example_decisions", lambda model, results: [])
    assert main(_args(record_files)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["candidate_higher_on_every_test_set"] is True
    written = json.loads((record_files["out"] / "ret_signal-nq+triviaqa.json").read_text())
    groups = written["results"]["groups"]
    assert set(groups) == {"test:nq", "test:triviaqa", "dev:nq", "dev:triviaqa", "training"}
    assert groups["test:nq"]["auc"]["baseline"]["value"] == 0.5 and groups["test:nq"]["auc"]["candidate"]["value"] == 1
    assert groups["training"]["auc"]["candidate"]["value"] == 1.0
    assert written["results"]["record_matches"]["baseline"] == {"nq": 0.0, "triviaqa": 0.0}
    assert written["command"].startswith("python -m lab experiment ret_signal --candidate")
    assert written["corpus"].startswith("none")
    assert len(written["results"]["questions"]["test:nq"]) == 10
    figure = ret_signal_figure(written)
    assert len(figure.data) == 4 and "AUC 0.5 (baseline) vs 1.0 (candidate)" in figure.layout.annotations[0].text
    summary_html = ret_signal_summary(written)
    assert "ranks wrong closed-book answers better on every test set" in summary_html
    assert "AUC 0.5 → 1.0" in summary_html and "&lt;RET&gt;" in summary_html
    before = record_files["record"].read_text()
    assert main(_args(record_files, "--update-record")) == 0
    assert record_files["record"].read_text() != before
    updated = json.loads(record_files["record"].read_text())
    assert (
        updated["rescored"]["command"].endswith("--update-record")
        and updated["command"] == "python -m lab experiment pipeline"
    )
    signals = {r["id"]: r["closed_book"]["signals"]["not_ret"] for r in updated["results"]["rows"]["test"]}
    assert round(signals["nq-test-0"], 6) == 0.9 and round(signals["nq-test-5"], 6) == 0.2
    assert updated["results"]["datasets"]["nq"]["auc"]["not_ret"]["value"] == 1.0
    from raqa.web.experiments_tab import experiment_caption

    assert "experiment pipeline</code>, then <code>python -m lab experiment ret_signal" in experiment_caption(updated)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: (f["candidate"] / "adapter_config.json").unlink(), "--candidate .* not a peft adapter folder"),
        (lambda f: f["training"].unlink(), "--training .* no such file"),
        (lambda f: f["record"].write_text("{}"), "--record .* not a pipeline record"),
        (lambda f: f["record"].write_text("not json"), "--record .* not a pipeline record"),
    ],
)
def test_bad_input_is_named_before_any_model_loads(record_files, change, message, monkeypatch, capsys):
    monkeypatch.setattr("lab.cli.ret_signal._load", lambda args: pytest.fail("no model should load"))
    change(record_files)
    assert main(_args(record_files)) == 2
    import re

    assert re.search(message, capsys.readouterr().err)
    assert not record_files["out"].exists()


COMMITTED = sorted((ASSETS_DIR / "results").glob("ret_signal-*.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_the_committed_comparison_is_what_its_questions_give(path):
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["command"].startswith("python -m lab experiment ret_signal") and record["code_version"]
    questions = record["results"]["questions"]
    groups = {
        name: {
            "needs": [q["needs_retrieval"] for q in qs],
            "baseline": [q["baseline"] for q in qs],
            "candidate": [q["candidate"] for q in qs],
        }
        for name, qs in questions.items()
    }
    assert {len(questions[n]) for n in questions if n.startswith("test:")} == {300}
    again = compare(groups, {})
    assert json.dumps(again["groups"], sort_keys=True) == json.dumps(record["results"]["groups"], sort_keys=True)
    assert again["candidate_higher_on_every_test_set"] == record["results"]["candidate_higher_on_every_test_set"]
    # one adapter reproduces the P(<RET>) the pipeline record held when this was made
    assert min(max(m.values()) for m in record["results"]["record_matches"].values()) < 1e-3
    assert ret_signal_figure(record).data


def test_adapters_that_do_not_load_are_an_error_not_a_traceback(record_files, monkeypatch, capsys):
    from raqa.models.base import ModelError

    def fail(args):
        raise ModelError("no such base model")

    monkeypatch.setattr("lab.cli.ret_signal._load", fail)
    assert main(_args(record_files)) == 2
    assert "Could not load the adapters: ModelError: no such base model" in capsys.readouterr().err
