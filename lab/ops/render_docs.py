"""`python -m lab.ops.render_docs`: every measured table in docs/, and every figure the page shows, drawn again from the
committed records.

A table sits between `<!-- table: NAME -->` and `<!-- /table -->` in a page under docs/; NAME is a key of
TABLES, a function from the committed files to Markdown that starts by naming its record and the command
that remakes it. The command rewrites only what lies between the markers, never the prose around them, and draws the
records' figures again (lab/figures/committed.py); `--check` writes nothing and exits 1 naming the pages and
figures that differ (tests/test_docs.py and tests/test_figures.py do the same in memory). Left out:
prose numbers (the pages' prose cites the tables instead of copying numbers from them) and running anything.

Example:
    >>> render("a\\n<!-- table: x -->\\nold\\n<!-- /table -->\\nb\\n", {"x": lambda: "new"})
    'a\\n<!-- table: x -->\\nnew\\n<!-- /table -->\\nb\\n'
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from lab.figures import committed
from lab.ops import docs_tables, docs_tables_judge, docs_tables_ops, docs_tables_reader
from lab.ops.docs_tables import ROOT

DOCS = ROOT / "docs"
TABLES: dict[str, Callable[[], str]] = {  # a docs page's table name -> the function that renders it
    "reading/negative-windows": docs_tables.negative_windows_table,
    "reading/readers": docs_tables.readers,
    "reading/attribution": docs_tables.attribution,
    "reading/graded-reader": docs_tables_reader.reading,
    "reading/grader": docs_tables_reader.grader,
    "reading/grader-formulations": docs_tables_reader.formulations,
    "reading/retrieval": docs_tables_reader.retrieval,
    "judge/support": docs_tables_judge.support,
    "judge/badges": docs_tables_judge.badges,
    "judge/judges": docs_tables_judge.judges,
    "judge/verifier": docs_tables_judge.verifier,
    "judge/labels": docs_tables_judge.labels,
    "judge/gate-with-model": docs_tables_judge.gate_with_model,
    "when-to-retrieve/adapters": docs_tables.adapters,
    "when-to-retrieve/ret-signal": docs_tables.ret_signal,
    "when-to-retrieve/pipeline": docs_tables.pipeline_table,
    "speed/bench": docs_tables_ops.bench,
    "speed/decode-weights": docs_tables_ops.decode_weights,
    "speed/readers": docs_tables_ops.readers_load,
    "readme/speed": docs_tables_ops.readme_speed,
    "speed/first-sign": docs_tables_ops.first_sign,
    "deploy/start": docs_tables_ops.page_start,
    "reliability/load-soak-scale": docs_tables_ops.reliability,
    "servers/llama-cpp": docs_tables_ops.servers,
    "deploy/limits": docs_tables_ops.limits,
}
BLOCK = re.compile(r"(<!-- table: (?P<name>[\w/-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def render(text: str, tables: Mapping[str, Callable[[], str]] = TABLES) -> str:
    """The page with every marked table rendered again; KeyError naming the table for a marker nothing renders."""

    def one(match: re.Match) -> str:
        name = match["name"]
        if name not in tables:
            raise KeyError(f"Unknown table: {name}. Choose from: {', '.join(tables)}")
        return f"{match[1]}{tables[name]()}\n{match[4]}"

    return BLOCK.sub(one, text)


def pages(docs: Path = DOCS) -> list[Path]:
    """The pages with tables: the docs, and the README (its speed table)."""
    return [*sorted(docs.glob("*.md")), docs.parent / "README.md"]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.render_docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = parser.parse_args(list(argv) if argv is not None else None)
    stale = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        fresh = render(text)
        if fresh != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(fresh, encoding="utf-8")
    figures = committed.drawn()  # drawn once: compared, then written
    stale += [f"figures/{name}" for name in committed.outdated(fresh=figures)]
    if not args.check:
        committed.write(files=figures)
    verb = "differ from the records" if args.check else "rendered again"
    print(f"{len(stale)} page(s) and figure(s) {verb}" + "".join(f"\n  {p}" for p in stale))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
