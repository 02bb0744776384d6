"""Prompt templates and the parser of model replies.

The reply format is designed for a small, slow model: the verdict comes first (so it can be read
from the probabilities of the first word), and evidence is cited by page id and sentence number
rather than copied, which costs a few tokens instead of dozens:

    ANSWER: Leonardo da Vinci          NOT FOUND
    PAGE: 5071                         REASON: The pages are about other paintings.
    SENTENCE: 1

`parse_reply` never raises: text it cannot read becomes an "unparseable" reply carrying the raw text.
Formatting for a browser is not done here (see render.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from raqa.retrieval.index import Hit
from raqa.text import split_sentences

ANSWER_WORD = "ANSWER:"
NOT_FOUND_WORD = "NOT FOUND"
REPLY_CHOICES = (ANSWER_WORD, NOT_FOUND_WORD)

SYSTEM_PROMPT = """You answer a question using only the Wikipedia pages the user gives you. \
Each page has an ID, a title and numbered sentences.
Read every page. If one page states the answer, reply exactly:
ANSWER: <the answer, in a few words>
PAGE: <the ID of that page>
SENTENCE: <the number of the sentence that states it>
If no page states the answer, reply exactly:
NOT FOUND
REASON: <one short sentence saying why>
Use only the pages, not your own memory. Never guess."""

# Worked examples shown before the real window, alternating one that answers and one that declines,
# so the first n of them are balanced for any even n (the experiments use 0, 2, 4, 6 and 8). They are
# written for this project, not taken from any dataset, and keep a 135M model on the format.
DEMONSTRATIONS: tuple[tuple[str, str], ...] = (
    (
        "Page 901: Eiffel Tower\n[1] The Eiffel Tower is a wrought-iron lattice tower in Paris, France.\n"
        "[2] It was designed by the company of the engineer Gustave Eiffel and completed in 1889.\n\n"
        "Page 902: Seine\n[1] The Seine is a river in northern France.\n\n"
        "Question: Whose company designed the Eiffel Tower?",
        "ANSWER: Gustave Eiffel\nPAGE: 901\nSENTENCE: 2",
    ),
    (
        "Page 903: Amazon River\n[1] The Amazon River in South America is the largest river by discharge "
        "volume of water in the world.\n\nPage 904: Nile\n[1] The Nile is a major river in northeastern Africa."
        "\n[2] It flows into the Mediterranean Sea.\n\nQuestion: Who was the first person to swim the English Channel?",
        "NOT FOUND\nREASON: The pages are about rivers, not about swimming the Channel.",
    ),
    (
        "Page 905: Photosynthesis\n[1] Photosynthesis is the process by which plants use light to make sugars."
        "\n[2] It releases oxygen as a by-product.\n\nPage 906: Chlorophyll\n[1] Chlorophyll is a green "
        "pigment found in plants.\n[2] It absorbs mostly blue and red light.\n\n"
        "Question: Which gas does photosynthesis release?",
        "ANSWER: oxygen\nPAGE: 905\nSENTENCE: 2",
    ),
    (
        "Page 907: Violin\n[1] The violin is a string instrument played with a bow.\n[2] It has four strings."
        "\n\nPage 908: Cello\n[1] The cello is a larger bowed string instrument.\n\n"
        "Question: In which year was the first electric guitar sold?",
        "NOT FOUND\nREASON: The pages describe bowed instruments and say nothing about electric guitars.",
    ),
    (
        "Page 909: Mount Kilimanjaro\n[1] Mount Kilimanjaro is a dormant volcano in Tanzania.\n[2] Its summit "
        "is about 5,895 metres above sea level.\n\nPage 910: Serengeti\n[1] The Serengeti is a large "
        "ecosystem in East Africa.\n\nQuestion: In which country is Mount Kilimanjaro?",
        "ANSWER: Tanzania\nPAGE: 909\nSENTENCE: 1",
    ),
    (
        "Page 911: Chess\n[1] Chess is a board game for two players.\n[2] Each player starts with sixteen pieces."
        "\n\nPage 912: Checkers\n[1] Checkers is played on an eight-by-eight board.\n\n"
        "Question: Who won the first Tour de France?",
        "NOT FOUND\nREASON: The pages are about board games, not cycling races.",
    ),
    (
        "Page 913: Penguin\n[1] Penguins are flightless seabirds.\n[2] Most species live in the Southern "
        "Hemisphere.\n\nPage 914: Emperor penguin\n[1] The emperor penguin is the tallest and heaviest of "
        "all living penguin species.\n\nQuestion: Which is the tallest living penguin species?",
        "ANSWER: emperor penguin\nPAGE: 914\nSENTENCE: 1",
    ),
    (
        "Page 915: Copper\n[1] Copper is a soft metal with very high electrical conductivity.\n\n"
        "Page 916: Bronze\n[1] Bronze is an alloy made mainly of copper and tin.\n\n"
        "Question: What is the melting point of tungsten?",
        "NOT FOUND\nREASON: The pages are about copper and bronze; neither mentions tungsten.",
    ),
)

ReplyKind = Literal["answer", "not_found", "unparseable"]


@dataclass(frozen=True)
class ParsedReply:
    kind: ReplyKind
    raw: str
    answer: str | None = None
    page_id: str | None = None
    sentence: int | None = None  # 1-based, as numbered in the prompt
    quote: str | None = None  # a passage the model copied instead of citing a number
    reason: str | None = None


def page_block(
    hit: Hit, max_tokens: int, count_tokens: Callable[[str], int], leave_out: int | None = None
) -> tuple[str, bool]:
    """A page as the model reads it: id, title, numbered sentences, cut at a sentence within max_tokens.

    Returns the block and whether it was cut. With leave_out, that sentence (1-based) is left out and the others
    keep their numbers and the same cut: the prompt differs from the whole one by that line only (attribution).
    """
    header = f"Page {hit.page.id}: {hit.page.title}"
    lines = [header]
    used = count_tokens(header)
    sentences = split_sentences(hit.page.text)
    for number, sentence in enumerate(sentences, start=1):
        line = f"[{number}] {sentence}"
        cost = count_tokens(line) + 1
        if used + cost > max_tokens and number > 1:
            return "\n".join(lines), True
        if number != leave_out:
            lines.append(line)
        used += cost
    return "\n".join(lines), False


def shown_sentences(hit: Hit, max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """The sentences of a page that its block shows the model (those before the cut), in order."""
    block, _ = page_block(hit, max_tokens, count_tokens)
    return split_sentences(hit.page.text)[: block.count("\n")]


def build_messages(
    question: str,
    hits: Sequence[Hit],
    max_page_tokens: int,
    count_tokens: Callable[[str], int],
    shots: Sequence[tuple[str, str]] = DEMONSTRATIONS[:2],
    leave_out: tuple[str, int] | None = None,
) -> list[dict[str, str]]:
    """The chat messages for one window: the system instruction, worked examples, the pages, the question.

    leave_out (page id, sentence number) drops that one sentence from its page (page_block); with no pages the last
    message is the question alone.
    """
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for user, assistant in shots:
        messages += [
            {"role": "user", "content": user},
            {"role": "assistant", "content": assistant},
        ]
    blocks = [
        page_block(
            hit, max_page_tokens, count_tokens, leave_out[1] if leave_out and leave_out[0] == hit.page.id else None
        )[0]
        for hit in hits
    ]
    messages.append({"role": "user", "content": "\n\n".join([*blocks, f"Question: {question}"])})
    return messages


_FIELD = re.compile(
    r"^\W*(ANSWER|PAGE|PAGE ID|SENTENCE|QUOTE|PASSAGE|REASON|RATIONALE)\W*?[:\-]\s*(.*)$",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(r"^\W*(NOT\s+FOUND|ANSWER\W*\s*NOT\s+FOUND|NO\s+ANSWER)\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
# Small models often wrap the answer: "The answer is: X", "[1] X". Strip those wrappers.
_ANSWER_WRAPPER = re.compile(r"^(?:the\s+answer\s+is\s*:?\s*|\[\d+\]\s*)+", re.IGNORECASE)
_PAGE_ID = re.compile(r"^\W*(?:page\s*(?:id)?\W*)?([^\]\s),;*]+?)[.:]?(?:[\]\s),;*]|$)", re.IGNORECASE)


def _fields(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = _FIELD.match(line.strip())
        if match:
            name = match.group(1).upper().replace("PAGE ID", "PAGE").replace("PASSAGE", "QUOTE")
            name = name.replace("RATIONALE", "REASON")
            found.setdefault(name, match.group(2).strip())
    return found


def parse_reply(raw: object) -> ParsedReply:
    """Read a model reply into a ParsedReply; never raises.

    Example:
        >>> parse_reply("ANSWER: Paris\\nPAGE: 12\\nSENTENCE: 2").page_id
        '12'
        >>> parse_reply("I think maybe").kind
        'unparseable'
    """
    text = raw if isinstance(raw, str) else ""
    if not text.strip():
        return ParsedReply("unparseable", text)
    fields = _fields(text)
    first_line = text.strip().splitlines()[0]
    if _NOT_FOUND.match(first_line):
        return ParsedReply("not_found", text, reason=fields.get("REASON") or None)
    answer = _ANSWER_WRAPPER.sub("", (fields.get("ANSWER") or "").strip().strip("\"'*").strip()).strip().rstrip(" .")
    if not answer:
        return ParsedReply("unparseable", text, reason=fields.get("REASON") or None)
    if _NOT_FOUND.match(answer):
        return ParsedReply("not_found", text, reason=fields.get("REASON") or None)
    page_match = _PAGE_ID.match(fields.get("PAGE", ""))
    sentence_match = _NUMBER.search(fields.get("SENTENCE", ""))
    quote = fields.get("QUOTE", "").strip().strip("\"'“”") or None
    return ParsedReply(
        "answer",
        text,
        answer=answer,
        page_id=page_match.group(1) if page_match else None,
        sentence=int(sentence_match.group()) if sentence_match and len(sentence_match.group()) < 6 else None,
        quote=quote,
        reason=fields.get("REASON") or None,
    )
