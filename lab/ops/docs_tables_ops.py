"""The docs' speed, reliability, server and limits tables, each a function from committed files to Markdown
(render_docs.py writes them into docs/). Where a module already formats its record (decode weights, the server
comparison), the table is that module's. Left out: the quality tables and the shared helpers (docs_tables.py).
"""

from __future__ import annotations

from statistics import linear_regression

from lab.ops import decode_report, server_experiment
from lab.ops.docs_tables import load_record, made_by, markdown_rows, source_line
from raqa.config import PublicLimits
from raqa.evaluation.records import RESULTS_DIR


def bench() -> str:
    path = "assets/results/bench.json"
    record = load_record(path)
    met = {True: "met", False: "**missed**", None: ""}
    rows = [
        [r["measure"], r["result"], f"{r['target']}: {met[r['met']]}" if r["target"] else ""] for r in record["table"]
    ]
    notes = [f"Note: {n}" for n in record.get("notes", [])]
    return "\n".join([made_by(path, record), "", *markdown_rows(("measure", "result", "target"), rows), "", *notes])


def decode_weights() -> str:
    records = decode_report.load_records(RESULTS_DIR)
    sources = [
        ("assets/results/bench.json", records["bench"]),
        ("assets/results/load-test.json", records["load"]),
        ("assets/results/decode-weights/reader_comparison-triviaqa-w1.json", records["int4"]),
        ("assets/results/decode-weights/reader_comparison-triviaqa-w1-fp32.json", records["fp32"]),
    ]
    made = [f"- {source_line(path, record)}" for path, record in sources]
    return "\n".join(["From the records:", *made, "", decode_report.decode_table(records)])


def _load_test(record: dict) -> str:
    phases = record["results"]
    order = [p for p in ("off", "on_fp32_weights", "on") if p in phases]
    ratio, p95 = phases["p95_ratio_on_off"], phases["on"]["p95_s"]

    def each(key: str, fmt: str = "{:.1f}", sep: str = " → ") -> str:
        return sep.join(fmt.format(phases[p][key]) for p in order)

    return (
        f"of {phases['on']['sessions']} sessions, completed {each('completed', '{}', ' / ')}, each with its own run "
        f"only {each('own_run_only', '{}', ' / ')}, the server answering afterwards "
        f"{each('server_answered_afterwards', '{}', ' / ')} (speed-ups off / on with fp32 weights / on with packed "
        f"weights); time to a complete run p50 {each('p50_s')} s, p95 {each('p95_s')} s (on / off {ratio:.2f}x: the "
        f"<= 0.5x asked {'met' if ratio <= 0.5 else '**missed**'}; the 30 s asked for p95: "
        f"{'met' if p95 <= 30 else '**missed**'}), max {each('max_s')} s"
    )


def _soak(record: dict) -> str:
    s = record["results"]
    after = s["rss_mib"][s["warmup_runs"] :]
    return (
        f"resident memory {s['rss_after_warmup_mib']:,.0f} MiB after {s['warmup_runs']} runs, {s['rss_last_mib']:,.0f}"
        f" MiB after {s['runs']}; from run {s['warmup_runs']} on between {min(after):,.0f} and {max(after):,.0f} MiB, "
        f"a slope of {linear_regression(range(len(after)), after).slope:.2f} MiB a run"
    )


def _scale(record: dict) -> str:
    c = record["results"]
    return (
        f"{c['pages']:,} pages ({c['corpus_mib']:.0f} MiB): streamed build {c['build']['total_s']:.0f} s "
        f"({c['build']['tokenize_s']:.0f} s tokenizing), peak resident memory {c['rss_peak_mib']:.0f} MiB, index "
        f"{c['index_mib']:.0f} MiB; memory-mapped query p50 {c['query_ms']['p50']:.1f} ms, p95 "
        f"{c['query_ms']['p95']:.1f} ms (top 10 pages read from the file included)"
    )


def reliability() -> str:
    records = {n: load_record(f"assets/results/{n}.json") for n in ("load-test", "soak", "scale")}
    cells = {"load-test": _load_test, "soak": _soak, "scale": _scale}
    rows = [(f"`{r['command']}`", cells[n](r)) for n, r in records.items()]
    k = records["scale"]["results"]["kilt_extrapolation"]
    extrapolated = (
        f"Extrapolated linearly in tokens to KILT's {k['pages'] / 1e6:.1f} M pages (assuming "
        f"{k['assumed_tokens_per_page']} WordPiece tokens a page, an assumption, not a measurement): the build takes "
        f"about {k['build_hours']:.1f} hours, the index about {k['index_gib']:.0f} GiB on disk, the offset table "
        f"{k['offset_table_mib']:.0f} MiB, and a query about {k['query_ms_p50']:.0f} ms at p50 if the index's pages are "
        f"in the page cache. The record's note: {k['note']}."
    )
    made = [f"- `assets/results/{n}.json`: {r['code_version']}, {r['created'][:10]}" for n, r in records.items()]
    return "\n".join(
        [
            "From the records (each row's command remakes its file):",
            *made,
            "",
            *markdown_rows(("command", "result"), rows),
            "",
            extrapolated,
        ]
    )


def servers() -> str:
    folder = "assets/results/server"
    summary = load_record(f"{folder}/server_experiment-negative_windows-triviaqa.json")
    records = {
        label: load_record(f"{folder}/negative_windows-triviaqa-{label}.json")
        for label in ("local", "server_c1", "server_c4")
    }
    return server_experiment.report(summary, records, folder)


LIMIT_ROWS = {
    "runs_per_minute": "live runs a visitor may start in a minute (Run, the API, When to retrieve, the pipeline, a "
    "benchmark; an attempt refused because their run is still going counts too)",
    "live_runs": "live runs at once per visitor",
    "max_k": "K (pages retrieved), at most",
    "max_window": "w (pages a window), at most",
    "max_benchmark": "questions in one benchmark, at most",
}


def limits() -> str:
    """Not a record: the values `PublicLimits` holds, so the page cannot say other limits than the code keeps."""
    rows = [(label, str(getattr(PublicLimits(), name))) for name, label in LIMIT_ROWS.items()]
    return "\n".join(["From `PublicLimits` in `raqa/config.py`:", "", *markdown_rows(("limit", "value"), rows)])


DECODE = "assets/results/reader-decode.json"


def _verdict(value: float | None, limit: float) -> str:
    return "" if value is None else ("met" if value <= limit else "**missed**")


def readers_load() -> str:
    """The 1.5B and the small model side by side under a class (`bench load --readers`), each row with its target."""
    path = "assets/results/load-readers.json"
    r = load_record(path)
    big, small, speed = r["load"], r["load_small_model"], r["speed"]["reader_1p5b"]
    sizes = sorted(int(k.split("_")[1]) for k in big)
    solo, most = f"sessions_{sizes[0]}", f"sessions_{sizes[-1]}"

    def both(key: str, size: str, fmt: str = "{:.1f} s") -> list[str]:
        return [fmt.format(g[size][key]) if g[size].get(key) is not None else "" for g in (big, small)]

    alone = load_record(DECODE)["results"]
    ratio = alone["clean_over_page_ours"]
    rows = [
        [
            "decode in the page's process: through the backend / llama.cpp's own timings (same request)",
            f"{speed['decode_tok_s']:.1f} / {speed['llama_cpp_decode_tok_s']:.1f} tok/s",
            "",
            "",
        ],
        [
            f"decode, `{DECODE}`: llama.cpp alone in its own process / through the backend in a process set up as "
            "the page's",
            f"{alone['clean_tok_s']:.1f} / {alone['page_ours_tok_s']:.1f} tok/s",
            "",
            f"within 1.2x: {_verdict(ratio, 1.2)} ({ratio:.2f}x)",
        ],
        [
            f"first verdict p50, one visitor ({len(big[solo]['seconds'])} questions, one after another)",
            *both("first_verdict_p50_s", solo),
            f"<= 3 s: {_verdict(big[solo]['first_verdict_p50_s'], 3)}",
        ],
        ["whole run p50 / p95, one visitor", *both("p50_s", solo), ""],
    ]
    rows[-1][1:3] = [f"{g[solo]['p50_s']:.1f} / {g[solo]['p95_s']:.1f} s" for g in (big, small)]
    for n in sizes[1:]:
        size, compute = f"sessions_{n}", big[f"sessions_{n}"].get("compute")
        target = f"<= 45 s: {_verdict(big[size]['p95_s'], 45)}" if n == 10 else ""
        if compute and n == sizes[-1]:
            target = f"<= 1.3x the compute limit: {_verdict(compute['p95_over_limit'], 1.3)}"
        runs = [f"{g[size]['p50_s']:.1f} / {g[size]['p95_s']:.1f} s" for g in (big, small)]
        timed = [g[size]["completed"] for g in (big, small)]
        label = f" ({timed[0]} of {n} timed on the 1.5B)" if timed[0] < n else ""
        rows.append([f"{n} visitors at once: whole run p50 / p95{label}", *runs, target])
        if compute:
            rows.append(
                [
                    f"{n} visitors: compute limit, llama.cpp's busy seconds ({compute['prompt_tokens']:,} prompt and "
                    f"{compute['reply_tokens']:,} reply tokens); p95 over it",
                    f"{compute['limit_s']:.0f} s; {compute['p95_over_limit']:.2f}x",
                    "",
                    "",
                ]
            )
        rows.append(
            [
                f"{n} visitors: first sign of progress (place in line or first window), slowest",
                *both("first_progress_max_s", size, "{:.2f} s"),
                f"<= 2 s: {_verdict(big[size]['first_progress_max_s'], 2)}" if n == sizes[-1] else "",
            ]
        )
    g = big[most]
    rows.append([f"{sizes[-1]} visitors: offered the small model while waiting", str(g["offered_small_model"]), "", ""])
    if g.get("offer_taken"):
        taken = g["offer_taken"]
        rows.append(["one more visitor, 5 s later, takes the offer: whole run", "", f"{taken['seconds']:.1f} s", ""])
    rss = max(x[most].get("rss_peak_mib", x[most]["rss_mib"]) for x in (big, small))
    peak = "peak of the page's process alone" if "rss_peak_mib" in big[most] else "after"
    rows.append(
        [
            f"resident memory ({peak}), both readers and the judge loaded, {sizes[-1]} visitors",
            f"{rss:,.0f} MiB",
            "",
            f"< 8 GB: {_verdict(rss, 8192)}",
        ]
    )
    header = ("measure", r["models"]["load"], r["models"]["load_small_model"], "target")
    made = [f"- {source_line(p, load_record(p))}" for p in (path, DECODE)]
    return "\n".join(["From the records:", *made, "", *markdown_rows(header, rows)])


def readme_speed() -> str:
    """The README's speed table: each group of visitors on each reader, from the same record as `readers_load`."""
    path = "assets/results/load-readers.json"
    r = load_record(path)
    big, small = r["load"], r["load_small_model"]
    rows = []
    for size in sorted(big, key=lambda k: int(k.split("_")[1])):
        g, s, n = big[size], small[size], int(size.split("_")[1])
        compute = g.get("compute")
        limit = f"{compute['limit_s']:.0f} s ({g['p95_s'] / compute['limit_s']:.2f}x)" if compute else ""
        rows.append(
            [
                f"1 (alone, {len(g['seconds'])} questions)" if n == 1 else str(n),
                f"{g['first_verdict_p50_s']:.1f} s",
                f"{g['p50_s']:.0f} / {g['p95_s']:.0f} s",
                limit,
                f"{g['first_progress_max_s']:.1f} s",
                f"{s['p50_s']:.1f} / {s['p95_s']:.1f} s",
            ]
        )
    header = (
        "visitors at once",
        "1.5B: first verdict p50",
        "1.5B: whole run p50 / p95",
        "compute limit (p95 / limit)",
        "slowest first sign",
        "small model: run p50 / p95",
    )
    return "\n".join([made_by(path, r), "", *markdown_rows(header, rows)])


def first_sign() -> str:
    """A class arriving at once, each run stopped at its first sign (`python -m lab.ops.first_sign`): per group, the
    p50 and slowest first sign and how many were within 2 s."""
    path = "assets/results/first-sign.json"
    r = load_record(path)
    groups = {k: v for k, v in r["results"].items() if k.startswith("visitors_")}
    largest = max(groups, key=lambda k: groups[k]["visitors"])
    rows = [
        [
            str(g["visitors"]),
            f"{g['first_sign_p50_s']:.2f} s",
            f"{g['first_sign_max_s']:.2f} s",
            f"{g['within_2_s']} of {g['visitors']}",
            f"all within 2 s: {_verdict(g['first_sign_max_s'], 2)}" if name == largest else "",
        ]
        for name, g in groups.items()
    ]
    header = ("visitors at once", "first sign p50", "slowest first sign", "within 2 s", "target")
    return "\n".join([made_by(path, r), "", *markdown_rows(header, rows)])


def page_start() -> str:
    """`python app.py` to a usable page on a new, empty cache and again warm (`bench start --out`)."""
    path = "assets/results/page-start.json"
    r = load_record(path)
    fresh, warm = r["results"]["fresh"], r["results"]["warm"]
    rows = [
        ["fresh: an empty cache (joins the 1.5B's GGUF from its parts, builds the index)", fresh, ""],
        ["warm: the same cache again", warm, f"<= 15 s: {_verdict(warm['seconds'], 15)}"],
    ]
    cells = [
        [label, f"{x['seconds']:.1f} s", f"{x['rss_mib']:,.0f} MiB" if x["rss_mib"] else "", t] for label, x, t in rows
    ]
    header = ("start", "seconds to a usable page", "resident memory then", "target")
    return "\n".join([made_by(path, r), "", *markdown_rows(header, cells)])
