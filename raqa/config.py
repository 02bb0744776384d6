"""Configuration: frozen dataclasses, and the one place that reads environment variables.

`AppConfig` says *what* to load (corpus, model, adapter, cache, endpoints file) and, for a page strangers reach
(a Space, or RAQA_PUBLIC=1), the `PublicLimits` it keeps. `ServerConfig` says where the web page listens. `RunSettings` says *how* to read for one question (strategy, order,
window, K...). `secret(name)` reads an API key named in the endpoints file. Validation lives here
so the UI, the CLI and the API share one set of limits and one set of messages.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, get_args

Strategy = Literal["iterative", "topk"]
Order = Literal["forward", "backward"]
# How the pages of one window are listed before the question: in score order (the best page first), or
# reversed so the best page sits nearest the question (small models lean on the page they read last)
PageOrder = Literal["best_first", "best_last"]
# Who answers a window: the model; the model where the answer judge finds an answer (selective generation);
# or the judge alone (an extractive reader, the baseline)
ReaderMode = Literal["model", "model_judge", "judge"]
# Which pages a run reads: BM25's top K, or BM25's top 50 and the pages nearest by the MiniLM encoder reordered by it
# (retrieval/dense.py), the default because a page holding a gold answer is more often among them
# (python -m lab.evaluation.retrieval_eval)
Retrieval = Literal["hybrid", "bm25"]

# the repository's assets folder: CSS, examples, trained adapters and readers, committed results
ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"

WINDOW_RANGE = (1, 20)
K_RANGE = (5, 100)
MAX_QUESTION_CHARS = 1000


WEIGHTS = ("int4", "fp32")  # SpeedOptions.weights: packed weights for decode, or fp32 everywhere


@dataclass(frozen=True)
class SpeedOptions:
    """How the local model computes a reply. Every option but `weights` changes the speed only: for fixed inputs the
    verdicts, answers and P(answer) agree to 1e-4 with and without each (tests/test_speed.py). `weights` trades
    exactness for speed in decode only: prompts are still computed in fp32, so verdicts and P(answer) are unchanged,
    while the tokens of an answer come from 4-bit weights (the reader comparison measures what that changes). All
    off is the plain transformers forward with a DynamicCache, the baseline the bench and the load test compare
    against."""

    prefix_cache: bool = True  # compute the system prompt and worked examples once, start each window from them
    lean_forward: bool = True  # Llama models: llama_runner's forward (preallocated cache, last-row logits only)
    lookahead: int = 8  # tokens guessed from the prompt and checked in one pass (prompt lookup); 0 = off
    batching: bool = True  # lean forward only: runs in flight share each forward pass (batcher.py)
    weights: str = "int4"  # lean forward only: "int4" decodes from packed weights (models/weights.py), or "fp32"

    @classmethod
    def off(cls) -> SpeedOptions:
        return cls(prefix_cache=False, lean_forward=False, lookahead=0, batching=False, weights="fp32")

    @classmethod
    def exact(cls) -> SpeedOptions:
        """Every speed-up that changes no number: all on, decode in fp32."""
        return cls(weights="fp32")


def default_cache_dir() -> Path:
    return Path(os.environ.get("RAQA_CACHE") or Path.home() / ".cache" / "raqa")


def _threshold(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"RAQA_POP_THRESHOLD must be a number of 0 or more (monthly page views), got {text!r}.")
    return value


@dataclass(frozen=True)
class PublicLimits:
    """What a page open to strangers accepts (on with SPACE_ID set or RAQA_PUBLIC=1). Chosen for a Space's CPU
    Basic hardware (2 vCPU) and the default 135M model (docs/deploy.md, "Public page limits")."""

    runs_per_minute: int = 6  # live runs (Ask, pipeline, When to retrieve, a benchmark, the API) a visitor may start
    live_runs: int = 1  # a visitor's runs going at once; replays of recorded runs use no model and are free
    max_k: int = 30  # pages retrieved: one Top-K prompt over 30 pages is about 4,800 tokens, ~10 s of prefill
    max_window: int = 5  # pages per window: 5 x 320 tokens, ~3 s of prefill a window
    max_benchmark: int = 10  # questions in one benchmark (about a minute on 2 cores)
    # behind Spaces' proxy every request comes from the proxy, so the visitor is X-Forwarded-For's first address
    # (which a client can forge: the limits stop accidents and casual hammering, not a determined attacker)
    forwarded_for: bool = False


def public_limits(env: Mapping[str, str]) -> PublicLimits | None:
    """The limits of a public page: on when SPACE_ID is set or RAQA_PUBLIC=1, off with RAQA_PUBLIC=0 (a private
    Space's owner); ValueError for any other RAQA_PUBLIC.

    Example:
        >>> public_limits({"SPACE_ID": "me/raqa"}).forwarded_for
        True
        >>> public_limits({"SPACE_ID": "me/raqa", "RAQA_PUBLIC": "0"}) is None
        True
    """
    flag = (env.get("RAQA_PUBLIC") or "").strip()
    if flag not in ("", "0", "1"):
        raise ValueError(f"RAQA_PUBLIC must be 1 (a public page) or 0 (not public), got {flag!r}.")
    on_spaces = bool(env.get("SPACE_ID"))
    if flag == "1" or (on_spaces and flag != "0"):
        return PublicLimits(forwarded_for=on_spaces)
    return None


@dataclass(frozen=True)
class AppConfig:
    corpus: str | None = None  # JSONL or KILT file; None = the embedded Wikipedia lead sections
    model: str | None = None  # HF model id, local folder or .gguf file; None = embedded SmolLM2-135M
    adapter: str | None = None  # optional peft adapter folder applied on top of the model
    cache_dir: Path = Path.home() / ".cache" / "raqa"  # BM25 index and dequantised model live here
    reader: str | None = None  # the reader the page starts with (a folder under assets/readers, or "base")
    endpoints: str | None = None  # JSON file listing OpenAI-compatible model servers a visitor may pick
    popqa: str | None = None  # PopQA-format TSV: gives the popularity baseline a popularity per question
    pop_threshold: float | None = None  # retrieve below this popularity (tuned by experiment when_to_retrieve --popqa)
    speed: SpeedOptions = SpeedOptions()  # how the local model computes (all on; the bench compares with all off)
    flags_file: str | None = None  # JSONL the page's flag buttons append to (RAQA_FLAGS); None: no flag buttons
    public: PublicLimits | None = None  # a page strangers reach (SPACE_ID / RAQA_PUBLIC); None: no limits

    @classmethod
    def from_env(cls, **overrides: object) -> AppConfig:
        """Read the RAQA_* variables (CORPUS, MODEL, ADAPTER, CACHE, READER, ENDPOINTS, POPQA, POP_THRESHOLD, FLAGS,
        PUBLIC, WEIGHTS) and SPACE_ID; explicit overrides win (`weights` sets speed.weights). A POP_THRESHOLD that is
        not a number of 0 or more, a RAQA_PUBLIC other than 0 or 1, or RAQA_WEIGHTS other than int4 or fp32 raises
        ValueError."""
        env = {
            "corpus": os.environ.get("RAQA_CORPUS") or None,
            "model": os.environ.get("RAQA_MODEL") or None,
            "adapter": os.environ.get("RAQA_ADAPTER") or None,
            "reader": os.environ.get("RAQA_READER") or None,
            "endpoints": os.environ.get("RAQA_ENDPOINTS") or None,
            "popqa": os.environ.get("RAQA_POPQA") or None,
            "flags_file": os.environ.get("RAQA_FLAGS") or None,
            "pop_threshold": _threshold(os.environ.get("RAQA_POP_THRESHOLD") or None),
            "cache_dir": default_cache_dir(),
            "public": public_limits(os.environ),
        }
        weights = overrides.pop("weights", None) or os.environ.get("RAQA_WEIGHTS") or SpeedOptions.weights
        if weights not in WEIGHTS:
            raise ValueError(f"RAQA_WEIGHTS must be one of {', '.join(WEIGHTS)}, got {weights!r}.")
        env["speed"] = SpeedOptions(weights=weights)
        env.update({k: v for k, v in overrides.items() if v is not None})
        env["cache_dir"] = Path(env["cache_dir"])
        return cls(**env)


def secret(name: str) -> str | None:
    """The value of the environment variable called name (an endpoint's API key), or None when unset or empty.

    Keys are read here so this module stays the only reader of the environment; callers must keep the value
    out of names, reprs, logs and messages.
    """
    return os.environ.get(name) or None


DEFAULT_SERVER_NAME = "0.0.0.0"  # every interface: the page is reachable in a container or a Space
DEFAULT_SERVER_PORT = 7860


@dataclass(frozen=True)
class ServerConfig:
    """Where `python app.py` serves the page, and whether it runs on a Hugging Face Space.

    name or port None means "Gradio decides": it then reads its own GRADIO_SERVER_NAME / GRADIO_SERVER_PORT.
    """

    name: str | None = DEFAULT_SERVER_NAME
    port: int | None = DEFAULT_SERVER_PORT
    on_spaces: bool = False  # SPACE_ID is set: the data packages may need installing

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerConfig:
        """Gradio's variables win: with GRADIO_SERVER_NAME or GRADIO_SERVER_PORT set, Gradio reads them itself.
        Otherwise the name is 0.0.0.0 and the port is PORT (set by some hosts) or 7860. A PORT that is not a
        port number raises ValueError.

        Example:
            >>> ServerConfig.from_env({"PORT": "8080"})
            ServerConfig(name='0.0.0.0', port=8080, on_spaces=False)
            >>> ServerConfig.from_env({"GRADIO_SERVER_PORT": "9000", "PORT": "8080"}).port is None
            True
        """
        env = os.environ if environ is None else environ
        name = None if env.get("GRADIO_SERVER_NAME") else DEFAULT_SERVER_NAME
        if env.get("GRADIO_SERVER_PORT"):
            port = None
        elif env.get("PORT"):
            port = _port(env["PORT"])
        else:
            port = DEFAULT_SERVER_PORT
        return cls(name=name, port=port, on_spaces=bool(env.get("SPACE_ID")))


def _port(text: str) -> int:
    try:
        port = int(text.strip())
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise ValueError(f"PORT must be a port number from 1 to 65535, got {text!r}.")
    return port


@dataclass(frozen=True)
class RunSettings:
    strategy: Strategy = "iterative"  # iterative windows, or all K pages in one prompt
    order: Order = "forward"  # forward = the best-ranked page first; backward = the lowest-ranked first
    # w=1 and the best page nearest the question: what the 135M model reads best (experiment reading_defaults:
    # TriviaQA exact match on answer-bearing windows 23% at w=1, 15% / 23% at w=2 best first / last, 17% / 18% at w=3)
    window: int = 1  # pages per window (w)
    page_order: PageOrder = "best_last"  # pages inside a window, as the model reads them (see PageOrder)
    k: int = 15  # pages retrieved (K)
    retrieval: Retrieval = "hybrid"  # how the K pages are chosen and ranked (see Retrieval)
    grounded_only: bool = False  # an answer whose evidence is not in the page counts as a decline
    rationale: bool = False  # ask for a one-line reason on declined windows (costs tokens)
    page_tokens: int = 320  # each page is cut to this many model tokens in the prompt
    answer_tokens: int = 32  # generation budget after "ANSWER:"
    reason_tokens: int = 24  # generation budget after "NOT FOUND" when a rationale is asked for
    answer_threshold: float = 0.5  # answer when P(ANSWER) / (P(ANSWER) + P(NOT)) reaches this
    shots: int = 2  # worked examples before the window (prompts.DEMONSTRATIONS)
    reader_mode: ReaderMode = "model"  # who answers (see ReaderMode); judge modes need an answer judge
    judge_threshold: float = 0.5  # the judge finds an answer on a page when its score reaches this: P(answer)
    #                               (its card's threshold), or with a support model its Weak support threshold
    answered_threshold: float | None = None  # with a support model: an answer the judge agrees with is Answered
    #                                          at or above this support, Weak support below; None = never Answered
    gate_threshold: float = 0.5  # judge reader modes: the window is answered only when the judge's best page
    #                              reaches this (support model: its Weak support threshold; else the card's gate
    #                              for the window size, calibrated on dev windows)

    def replace(self, **changes: object) -> RunSettings:
        return replace(self, **changes)


class SettingsError(ValueError):
    """A setting is out of range or of the wrong type; the message says what is allowed."""


def _as_int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SettingsError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise SettingsError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.") from None
    if not math.isfinite(number) or number != int(number) or not lo <= number <= hi:
        raise SettingsError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}.")
    return int(number)


def _as_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise SettingsError(f"Invalid {name}: {value!r}. Choose from: {', '.join(choices)}.")
    return str(value)


def _as_bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise SettingsError(f"{name} must be true or false, got {value!r}.")


def run_ranges(limits: PublicLimits | None = None) -> tuple[tuple[int, int], tuple[int, int]]:
    """(window range, K range) a page accepts: WINDOW_RANGE and K_RANGE, capped by a public page's limits."""
    if limits is None:
        return WINDOW_RANGE, K_RANGE
    return (WINDOW_RANGE[0], min(WINDOW_RANGE[1], limits.max_window)), (K_RANGE[0], min(K_RANGE[1], limits.max_k))


@dataclass(frozen=True)
class RunForm:
    """A run's choices as a visitor, a link, a recording, a batch file or the command line gives them, not yet
    checked: `Service.plan(question, form)` validates them (validate_settings) and picks the reader."""

    strategy: object = "iterative"
    order: object = "forward"
    window: object = RunSettings.window
    k: object = RunSettings.k
    grounded_only: object = False
    rationale: object = False
    reader: object = None  # a reader's name; None: the page's default reader
    retrieval: object = RunSettings.retrieval

    def replace(self, **changes: object) -> RunForm:
        return replace(self, **changes)


def validate_settings(form: RunForm | None = None, limits: PublicLimits | None = None) -> RunSettings:
    """Turn a form's raw values into RunSettings, or raise SettingsError saying what was wrong and what is allowed.
    With limits (a public page), window and K are capped at limits.max_window and limits.max_k.

    Example:
        >>> validate_settings(RunForm("iterative", "backward", 2, 10)).window
        2
    """
    form, public = form or RunForm(), " on this public page" if limits else ""
    window_range, k_range = run_ranges(limits)
    return RunSettings(
        strategy=_as_choice("strategy", form.strategy, get_args(Strategy)),
        order=_as_choice("order", form.order, get_args(Order)),
        window=_as_int(f"window size{public}", form.window, *window_range),
        k=_as_int(f"K{public}", form.k, *k_range),
        retrieval=_as_choice("retrieval", form.retrieval, get_args(Retrieval)),
        grounded_only=_as_bool("grounded_only", form.grounded_only),
        rationale=_as_bool("rationale", form.rationale),
    )


def clean_question(question: object) -> str:
    """Validate a question: a non-empty string of at most MAX_QUESTION_CHARS printable characters.

    Control characters (other than spaces) are removed and runs of white space folded, because
    they only confuse the tokenizer; anything else (any script, emoji) is kept.
    """
    if not isinstance(question, str):
        raise SettingsError(f"The question must be text, got {type(question).__name__}.")
    if len(question) > MAX_QUESTION_CHARS * 20:
        raise SettingsError(f"The question is {len(question):,} characters long; the limit is {MAX_QUESTION_CHARS:,}.")
    printable = "".join(ch if ch.isprintable() else " " for ch in question)
    folded = " ".join(printable.split())
    if not folded:
        raise SettingsError("Please type a question: it is empty.")
    if len(folded) > MAX_QUESTION_CHARS:
        raise SettingsError(f"The question is {len(folded):,} characters long; the limit is {MAX_QUESTION_CHARS:,}.")
    return folded
