"""The page's example questions (assets/examples.json): those the corpus answers, then those it cannot."""

from __future__ import annotations

import json

from raqa.config import ASSETS_DIR


def load_examples() -> list[str]:
    data = json.loads((ASSETS_DIR / "examples.json").read_text(encoding="utf-8"))
    return [item["question"] for item in data["in_corpus"]] + data["outside"]
