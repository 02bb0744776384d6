"""docs/speed.md's table on decode weights, rendered from the committed records (a test holds the page to it):

assets/results/bench.json                 speed.fp32 / .int4 / .llama_cpp_in_process, and the replies;
assets/results/load-test.json             the classroom, all on with fp32 weights against packed weights;
assets/results/decode-weights/*.json      the reader comparison at the page's defaults, fp32 and packed.
"""

from __future__ import annotations

import json
from pathlib import Path

from raqa.evaluation.records import RESULTS_DIR

QUALITY = RESULTS_DIR / "decode-weights"
PATH_LABELS = {
    "fp32": "fp32 weights",
    "int4": "packed weights (int4 layers, int8 vocabulary)",
    "llama_cpp_in_process": "llama.cpp in-process (Q4_1 GGUF)",
}


def _interval(e: dict) -> str:
    return f"{e['value']:.0%} [{e['low']:.0%}, {e['high']:.0%}] (n={e['n']})"


def load_records(results: Path = RESULTS_DIR) -> dict:
    quality = results / "decode-weights"
    return {
        "bench": json.loads((results / "bench.json").read_text(encoding="utf-8")),
        "load": json.loads((results / "load-test.json").read_text(encoding="utf-8")),
        "fp32": json.loads((quality / "reader_comparison-triviaqa-w1-fp32.json").read_text(encoding="utf-8")),
        "int4": json.loads((quality / "reader_comparison-triviaqa-w1.json").read_text(encoding="utf-8")),
    }


def decode_table(records: dict) -> str:
    """Speed (bench, load test) and quality (reader comparison), fp32 weights against packed ones."""
    speed, load = records["bench"]["speed"], records["load"]["results"]
    lines = [
        "| in-process, one stream, same prompt ids (`bench.json` speed) | prefill tok/s | decode tok/s |",
        "|---|---|---|",
    ]
    for name, label in PATH_LABELS.items():
        p = speed[name]
        lines.append(f"| {label} | {p['prefill_tok_s']:.0f} | {p['decode_tok_s']:.1f} |")
    llama, packed, exact = (speed[n]["decode_tok_s"] for n in ("llama_cpp_in_process", "int4", "fp32"))
    lines += [
        "",
        "| measure | fp32 weights | packed weights | ratio | target |",
        "|---|---|---|---|---|",
        f"| decode, llama.cpp in-process / ours | {llama / exact:.2f}x | {llama / packed:.2f}x | | <= 2x: "
        + ("met" if llama / packed <= 2 else "**missed**")
        + " |",
    ]
    replies = speed["replies"]
    r_exact, r_packed = replies["on_fp32_weights"]["p50"], replies["on"]["p50"]
    lines.append(
        f"| window reply p50 (page defaults, all speed-ups on) | {r_exact:.2f} s | {r_packed:.2f} s | "
        f"{r_packed / r_exact:.2f}x | <= 0.6x: " + ("met" if r_packed / r_exact <= 0.6 else "**missed**") + " |"
    )
    l_exact, l_packed = load["on_fp32_weights"], load["on"]
    sessions = l_packed["sessions"]
    lines.append(
        f"| {sessions} sessions at once, time to a complete run p95 (`bench load.json`) | {l_exact['p95_s']:.1f} s | "
        f"{l_packed['p95_s']:.1f} s | {l_packed['p95_s'] / l_exact['p95_s']:.2f}x | <= 30 s: "
        + ("met" if l_packed["p95_s"] <= 30 else "**missed**")
        + " |"
    )
    lines += [
        "",
        "| TriviaQA test windows, page defaults (`decode-weights/`) | fp32 weights | packed weights |",
        "|---|---|---|",
    ]
    for reader in records["fp32"]["results"]["readers"]:
        a = records["fp32"]["results"]["readers"][reader]["windows"]
        b = records["int4"]["results"]["readers"][reader]["windows"]
        rows = (
            ("exact match on answer-bearing windows", "exact_match_on_positive"),
            ("answers on answer-free windows", "false_answer_rate_on_negative"),
        )
        for label, key in rows:
            lines.append(f"| {reader}: {label} | {_interval(a[key])} | {_interval(b[key])} |")
        lines.append(
            f"| {reader}: P(answer) AUC, answer-bearing vs answer-free | {a['auc_p_answer']:.3f} | "
            f"{b['auc_p_answer']:.3f} |"
        )
        pa, pb = a["badge_lexical"]["precision"], b["badge_lexical"]["precision"]
        lines.append(
            f"| {reader}: supported answers that are right (lexical badge) | {_interval(pa)} | {_interval(pb)} |"
        )
    return "\n".join(lines)


def main() -> None:
    """`python -m lab.ops.decode_report`: print the table docs/speed.md shows."""
    print(decode_table(load_records()))


if __name__ == "__main__":
    main()
