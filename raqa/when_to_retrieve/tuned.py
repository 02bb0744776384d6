"""What the When-to-retrieve tab takes from the committed pipeline evaluation: the policies it offers, the questions
the small model may know without a page, and each policy's threshold as the evaluation chose it on dev questions.

The evaluation itself (`python -m lab experiment pipeline`) is the lab's; the page only reads its record.
"""

from __future__ import annotations

from raqa.when_to_retrieve.pipeline import DEFAULT_RET_THRESHOLD

PAGE_POLICIES = ("adapt", "p_true", "token_probability", "sequence_probability", "never", "always")  # the tab's
MEMORY_QUESTIONS = (
    "What is the capital of France?",
    "Who wrote Romeo and Juliet?",
    "How many legs does a spider have?",
)


def tuned_thresholds(record: dict | None) -> dict[str, float]:
    """Each page policy's threshold from the committed evaluation (the mean over its test sets of the dev-chosen
    thresholds, in the policy's units), else the defaults."""
    tuned = {p: DEFAULT_RET_THRESHOLD for p in PAGE_POLICIES}
    for policy in PAGE_POLICIES:
        values = [
            d["configurations"][f"pipeline:{policy}:base"]["threshold"]
            for d in (record or {}).get("results", {}).get("datasets", {}).values()
            if f"pipeline:{policy}:base" in d.get("configurations", {})
        ]
        numbers = [v for v in values if isinstance(v, (int, float))]
        if numbers:
            tuned[policy] = round(min(1.0, max(0.0, sum(numbers) / len(numbers))), 3)
    return tuned
