"""The committed comparison of an experiment read locally and through llama.cpp's server at concurrency 1 and 4
(assets/results/server, made by `python -m lab.ops.server_experiment`): what it names, that its summary follows
from its records, and that docs/servers.md shows exactly what it holds."""

from __future__ import annotations

import json
from pathlib import Path

from lab.ops.server_experiment import agreement, report, same_results

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "assets/results/server"
SUMMARY = ROOT / FOLDER / "server_experiment-negative_windows-triviaqa.json"


def _records() -> dict[str, dict]:
    return {
        label: json.loads((ROOT / FOLDER / f"negative_windows-triviaqa-{label}.json").read_text())
        for label in ("local", "server_c1", "server_c4")
    }


def test_the_records_name_the_server_its_concurrency_and_the_command_that_made_them() -> None:
    summary, records = json.loads(SUMMARY.read_text()), _records()
    assert summary["command"].startswith("python -m lab.ops.server_experiment")
    assert records["local"]["weights"] and "server" not in records["local"]
    for n in (1, 4):
        served = records[f"server_c{n}"]
        assert served["server"]["concurrency"] == n and served["server"]["sampling"]["temperature"] == 0
        assert served["server"]["reported_model"] and served["weights"] is None
        assert f"--concurrency {n}" in served["command"] and served["made_by"] == summary["command"]
    # the same windows read three ways: the same sample, the same windows counted
    kinds = {(r["results"]["negative_windows"], r["results"]["positive_windows"]) for r in records.values()}
    assert len(kinds) == 1


def test_the_summary_follows_from_the_records() -> None:
    summary, records = json.loads(SUMMARY.read_text()), _records()
    for label in ("server_c1", "server_c4"):
        assert summary["agreement"][label] == agreement(records["local"]["results"], records[label]["results"])
    seconds = summary["seconds"]
    assert abs(summary["ratio_concurrency"]["value"] - seconds["server_c4"] / seconds["server_c1"]) < 0.01
    assert summary["identical_results_c1_cN"] == same_results(
        records["server_c1"]["results"], records["server_c4"]["results"]
    )


def test_the_docs_show_the_committed_numbers() -> None:
    summary, records = json.loads(SUMMARY.read_text()), _records()
    assert report(summary, records, FOLDER) in (ROOT / "docs" / "servers.md").read_text()
