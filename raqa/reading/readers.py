"""The readers a person can choose: the base model, and each trained adapter shipped under assets/readers/.

A reader folder holds a peft adapter (adapter_config.json + adapter_model.safetensors) and
raqa_reader.json, which says how the reader was calibrated to be used:

    {"label": "Abstention-tuned reader", "answer_threshold": 0.62, "shots": 2, "page_tokens": 320, ...}

Other keys (training data, loss, calibration) are kept for the card and ignored here. Loading the model
is left to llm.TransformersBackend.load(adapter=reader.adapter); this module only finds and validates.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from raqa.config import ASSETS_DIR, ReaderMode, RunSettings
from raqa.reading.prompts import DEMONSTRATIONS

READERS_DIR = ASSETS_DIR / "readers"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
READER_CARD = "raqa_reader.json"
BASE = "base"


class ReaderError(ValueError):
    """A reader folder is incomplete or its raqa_reader.json is malformed; the message names the file."""


@dataclass(frozen=True)
class Reader:
    name: str  # folder name, or "base"
    label: str  # what the page shows
    adapter: Path | None  # peft adapter folder; None = the base model as it is
    answer_threshold: float = 0.5  # answer when P(ANSWER) / (P(ANSWER) + P(NOT)) reaches this
    shots: int = 2  # worked examples in the prompt
    page_tokens: int = 320  # each page cut to this many tokens
    mode: ReaderMode = "model"  # who answers: the model, the model where the judge finds an answer, the judge
    graded: bool = False  # its own model grades each answer (grader.py) instead of the answer judge, and only
    #                       answers the grader supports end a run

    def settings(self, base: RunSettings) -> RunSettings:
        """The run settings with this reader's calibrated threshold, shots, page cut and mode.

        With the judge's gate (model_judge), an answer stands only when the judge also agrees with it on the
        cited page (Answered): one it does not confirm counts as a decline, so the run moves on.
        """
        return base.replace(
            answer_threshold=self.answer_threshold,
            shots=self.shots,
            page_tokens=self.page_tokens,
            reader_mode=self.mode,
            grounded_only=base.grounded_only or self.graded or self.mode == "model_judge",
        )


BASE_READER = Reader(BASE, "Small model: SmolLM2-135M (few-shot prompting)", None)
# The page's default reader when its packages are installed: Qwen2.5-Coder-1.5B-Instruct in llama.cpp, which also
# grades its own answers against the cited page (grader.py)
GRADED_READER = Reader("qwen-1.5b", "Qwen2.5 1.5B in llama.cpp, graded against the page", None, graded=True)
# The readers an answer judge (assets/judge) makes possible: selective generation, and the judge alone.
MODEL_JUDGE_READER = Reader(
    "base+judge", "Base model + answer judge (answers stand only where the judge agrees)", None, mode="model_judge"
)
JUDGE_READER = Reader("judge", "Answer judge alone (extractive baseline)", None, mode="judge")
JUDGE_READERS = (MODEL_JUDGE_READER, JUDGE_READER)


def _number(card: Path, record: dict, key: str, lo: float, hi: float, whole: bool) -> float:
    value = record.get(key)
    kind = "a whole number" if whole else "a number"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and whole:
        ok = float(value) == int(value)
    if not ok or not lo <= value <= hi:
        raise ReaderError(f"{card}: {key!r} must be {kind} from {lo:g} to {hi:g}, got {value!r}.")
    return int(value) if whole else float(value)


def load_reader(folder: Path) -> Reader:
    """The reader in one folder; raises ReaderError saying which file is missing or which field is wrong."""
    folder = Path(folder)
    missing = [name for name in (*ADAPTER_FILES, READER_CARD) if not (folder / name).is_file()]
    if missing:
        raise ReaderError(f"{folder}: a reader folder needs {', '.join(missing)}.")
    card = folder / READER_CARD
    try:
        record = json.loads(card.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReaderError(f"{card}: not readable JSON ({e}).") from None
    if not isinstance(record, dict):
        raise ReaderError(f"{card}: expected a JSON object with answer_threshold, shots and page_tokens.")
    label = record.get("label", folder.name)
    if not isinstance(label, str) or not label.strip():
        raise ReaderError(f"{card}: 'label' must be a non-empty string, got {label!r}.")
    return Reader(
        name=folder.name,
        label=label.strip(),
        adapter=folder,
        answer_threshold=_number(card, record, "answer_threshold", lo=0.0, hi=1.0, whole=False),
        shots=_number(card, record, "shots", lo=0, hi=len(DEMONSTRATIONS), whole=True),
        page_tokens=_number(card, record, "page_tokens", lo=16, hi=4096, whole=True),
    )


def available_readers(root: Path = READERS_DIR) -> list[Reader]:
    """The base reader, then one reader per folder under root (sorted by name) holding an adapter and a card.

    Folders with neither adapter nor card are ignored; a folder with a card but a broken one raises
    ReaderError, so a malformed reader is reported instead of silently disappearing.
    """
    readers = [BASE_READER]
    if not Path(root).is_dir():
        return readers
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        if any((folder / name).exists() for name in (*ADAPTER_FILES, READER_CARD)):
            readers.append(load_reader(folder))
    return readers
