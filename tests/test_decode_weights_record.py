"""The committed quality comparison of decode weights (assets/results/decode-weights): the same reader comparison
with packed and with fp32 weights. Held here: the two records differ only in --weights, every window figure of the
packed run lies inside fp32's 95% interval, and what prompts decide (P(answer), the judge) is identical."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parent.parent / "assets" / "results" / "decode-weights"


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    return {
        "int4": json.loads((FOLDER / "reader_comparison-triviaqa-w1.json").read_text()),
        "fp32": json.loads((FOLDER / "reader_comparison-triviaqa-w1-fp32.json").read_text()),
    }


def test_the_two_runs_differ_only_in_their_weights(records) -> None:
    packed, exact = records["int4"], records["fp32"]
    assert (packed["weights"], exact["weights"]) == ("int4", "fp32")
    assert exact["command"] == packed["command"].replace(" --out", " --weights fp32 --out")
    assert packed["sample"] == exact["sample"] and packed["settings"] == exact["settings"]


def test_every_window_figure_with_packed_weights_lies_in_fp32s_interval(records) -> None:
    for reader, exact in records["fp32"]["results"]["readers"].items():
        packed = records["int4"]["results"]["readers"][reader]["windows"]
        for name, want in exact["windows"].items():
            got = packed[name]
            if isinstance(want, dict) and "low" in want:
                assert want["low"] <= got["value"] <= want["high"], (reader, name)
                assert got["n"] == want["n"] or name == "grounded_share_of_answers", (reader, name)
            elif isinstance(want, dict):  # the badge: precision and recall with intervals
                for part in ("precision", "recall"):
                    w, g = want[part], got[part]
                    assert math.isnan(g["value"]) == math.isnan(w["value"]), (reader, name, part)
                    assert math.isnan(g["value"]) or w["low"] <= g["value"] <= w["high"], (reader, name, part)
        for same in ("auc_p_answer", "auc_judge", "mean_p_answer_negative", "mean_p_answer_positive"):
            want, got = exact["windows"][same], packed[same]
            assert got == pytest.approx(want, abs=1e-3), (reader, same)  # prompts are read in fp32 either way


def test_the_docs_table_is_rendered_from_the_records_and_the_bench_holds_all_three_paths() -> None:
    from lab.ops.decode_report import decode_table, load_records

    records = load_records()
    speed = records["bench"]["speed"]
    for path in ("fp32", "int4", "llama_cpp_in_process"):
        assert speed[path]["decode_tok_s"] > 0 and speed[path]["prefill_tok_s"] > 0
        assert speed[path]["prompt_tokens"] == speed["fp32"]["prompt_tokens"]  # the same prompt for all three
    assert {"off", "on_fp32_weights", "on"} <= set(records["load"]["results"])
    speed = (FOLDER.parents[2] / "docs" / "speed.md").read_text(encoding="utf-8")
    assert decode_table(records) in speed
