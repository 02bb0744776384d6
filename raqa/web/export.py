"""A run, kept: its events as JSON (the same dicts `python -m raqa ask --json` prints, one list) and a readable
Markdown report (question, settings, each window's pages, reply, verdict, highlighted sentence, totals).

Both are built from the events alone, so a recorded run exports like a live one. Text from pages, questions and
models goes into Markdown as it is, with the characters Markdown would read as markup escaped; the files are
downloads, never shown in the page. `temporary_folder` holds a download until the page has taken its copy.
Left out: the pages' full text (the report names each page; the corpus holds it).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def md(text: object) -> str:
    """Text for a Markdown line: markup characters escaped, line breaks as spaces.

    Example:
        >>> md("*Bold* <b>")
        '\\\\*Bold\\\\* \\\\<b\\\\>'
    """
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


VERDICT_WORDS = {
    "answered": "Answered",
    "weak": "Weak support",
    "unsupported": "Unsupported",
    "not_found": "Not found",
    "unparseable": "Unparseable",
}


def _window_section(verdict: dict, reply_text: str) -> list[str]:
    lines = [f"### Window {verdict['window']}: {VERDICT_WORDS.get(verdict['verdict'], md(verdict['verdict']))}", ""]
    for hit in verdict["hits"]:
        similarity = f", similarity {hit['similarity']:.2f}" if hit.get("similarity") is not None else ""
        lines.append(
            f"- page {md(hit['page_id'])}, rank {hit['rank']}, BM25 {hit['score']:.2f}{similarity}: {md(hit['title'])}"
        )
    lines.append("")
    reply = reply_text or verdict["reply"].get("raw", "")
    lines += ["Reply:", "", *[f"    {line}" for line in (reply.splitlines() or [""])], ""]
    if verdict.get("p_answer") is not None:
        lines.append(
            f"P(answer) {verdict['p_answer']:.2f}; {verdict['prompt_tokens']} prompt tokens, "
            f"{verdict['completion_tokens']} reply tokens, {verdict['seconds']:.1f} s"
        )
    grounding = verdict.get("grounding")
    if grounding:
        lines.append(f"Check: {md(grounding['note'])}")
        if grounding.get("passage"):
            lines.append(f"Highlighted sentence (page {md(grounding.get('page_id'))}): > {md(grounding['passage'])}")
    if verdict["reply"].get("reason"):
        lines.append(f"Reason given: {md(verdict['reply']['reason'])}")
    return lines + [""]


def markdown_report(events: Sequence[dict]) -> str:
    """The run as Markdown; a run that failed says why."""
    started = next((e for e in events if e["type"] == "run_started"), None)
    final = next((e for e in events if e["type"] == "final"), None)
    failed = next((e for e in events if e["type"] == "run_failed"), None)
    lines = ["# raqa run", ""]
    if started:
        s = started["settings"]
        lines += [
            f"**Question:** {md(started['question'])}",
            "",
            f"**Model:** {md(started['model'])}",
            "",
            "**Settings:** " + ", ".join(f"{k} {md(v)}" for k, v in s.items()),
            "",
        ]
    replies: dict[int, str] = {}
    for event in events:
        if event["type"] == "reply_delta":
            replies[event["window"]] = replies.get(event["window"], "") + event["text"]
        elif event["type"] == "window_verdict":
            lines += _window_section(event, replies.get(event["window"], ""))
        elif event["type"] == "notice":
            lines += [f"*Note: {md(event['message'])}*", ""]
        elif event["type"] == "attribution":
            lines += [f"Why this answer (window {event['window']}): {md(event['summary'])}", ""]
    if final:
        answer = md(final["answer"]) if final["answer"] is not None else "answer not found"
        lines += [
            "## Result",
            "",
            f"**Answer:** {answer} ({VERDICT_WORDS.get(final['verdict'], final['verdict'])})",
            "",
            f"{final['windows_read']} window{'s' * (final['windows_read'] != 1)} and {final['pages_read']} "
            f"page{'s' * (final['pages_read'] != 1)} read; {final['prompt_tokens']} "
            f"prompt tokens and {final['completion_tokens']} reply tokens (one Top-K prompt over the same pages: "
            f"{final['topk_prompt_tokens']}); {final['seconds']:.1f} s.",
            "",
        ]
    if failed:
        lines += ["## The run failed", "", md(failed["message"]), ""]
    return "\n".join(lines)


def write_exports(events: Sequence[dict], folder: Path) -> tuple[Path, Path]:
    """The run as raqa-run-<digest>.json and .md in folder (the digest of the events, so files never clash)."""
    text = json.dumps(list(events), ensure_ascii=False, indent=1)
    stem = "raqa-run-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    as_json, as_md = folder / f"{stem}.json", folder / f"{stem}.md"
    as_json.write_text(text, encoding="utf-8")
    as_md.write_text(markdown_report(events), encoding="utf-8")
    return as_json, as_md


@contextmanager
def temporary_folder(prefix: str) -> Iterator[Path]:
    """A new folder in the system's temporary folder, removed with its files on leaving the block.

    subtle: a generator that yields a download from inside the block is resumed only after Gradio has copied the
    file into its own cache (the copy is what the page serves, and Blocks(delete_cache=...) removes it later),
    and Stop closes the generator, so the folder goes when the run's last output is taken or the run is stopped.
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
