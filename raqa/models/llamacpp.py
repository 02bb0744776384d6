"""A GGUF model run in this process by llama.cpp (the prebuilt `xllamacpp` wheel: nothing compiles), behind the
Backend interface of base.py. It is the page's default reader, Qwen2.5-Coder-1.5B-Instruct, and its grader.

xllamacpp embeds llama.cpp's own server: `handle_chat_completions` takes an OpenAI-style request and returns the
reply, or streams its chunks to a callback. So one window is one chat-completion request at temperature 0 with the
first token's top log-probabilities, and its chunks become pieces exactly as a model server's do
(openai_stream.reply_pieces): the verdict's probabilities come from the first token's alternatives, and the
threshold can only turn an answer into a decline. What llama.cpp does itself is kept, not rebuilt: parallel slots
with continuous batching (several runs decode together), and the prompt cache of each slot (the system prompt and
worked examples, the same for every window, are not computed again).

The request runs on a worker thread (llama.cpp releases the GIL) and hands its chunks to the reply's generator
through a queue; closing the generator (Stop) makes the next callback return True, which ends the request.

Counting tokens needs the model's tokenizer: it is read from the GGUF once (about 10 s) and kept beside the model in
the cache. Page and question text is defused of special-token strings before it reaches the chat template.
Left out: teacher-forced scoring of a given answer (`can_score` is False: attribution needs the transformers
backend) and LoRA adapters.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from raqa.models.base import Backend, Messages, ModelError, ReplyPlan, Usage
from raqa.models.gguf_parts import QWEN_1P5B, SplitModel, assembled
from raqa.models.local import defuse_special_tokens, special_token_strings
from raqa.models.openai_stream import choice_probabilities, plan_budget, reply_pieces
from raqa.retrieval.atomic import replace_folder

THREADS = 2  # the machines this runs on (a Space's CPU Basic, these developers' machines) have 2 cores
# requests llama.cpp decodes together. On 2 cores prefill is compute-bound: 12 windows at once took 40 s on 1 slot,
# 45 s on 2, 52 s on 4 (assets/results/slots.json); 2 stays so the reader's and the grader's prompts each keep a slot
SLOTS = 2
SLOT_CONTEXT = 8192  # tokens per slot: a Top-K prompt over 15 pages of 320 tokens is about 5,300
LLAMACPP_TOP_LOGPROBS = 10
_END = object()


def _tokenizer(gguf: Path, cache_dir: Path | None, progress: Callable[[str], None]):
    """The GGUF's tokenizer, read from the file once and kept as a tokenizer folder in the cache."""
    from transformers import AutoTokenizer  # lazy: transformers takes seconds to import

    cached = Path(cache_dir) / "models" / f"{gguf.stem}-{gguf.stat().st_size}-tokenizer" if cache_dir else None
    if cached and (cached / "tokenizer_config.json").is_file():
        try:
            return AutoTokenizer.from_pretrained(cached)
        except (OSError, ValueError):
            progress("The cached tokenizer could not be read; reading it from the GGUF file again")
    progress(f"Reading the tokenizer of {gguf.name} (about 10 s, once)")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if cached:
        try:
            replace_folder(cached, tokenizer.save_pretrained)
        except OSError as e:
            progress(f"The tokenizer works but could not be cached: {e}")
    return tokenizer


class LlamaCppBackend(Backend):
    """A GGUF model in llama.cpp, in this process; safe to share between threads (llama.cpp queues the requests)."""

    def __init__(self, server, tokenizer, name: str, slots: int = SLOTS, context_tokens: int = SLOT_CONTEXT):
        self.server, self.tokenizer, self.name = server, tokenizer, name
        self.context_tokens = context_tokens
        self.requests_at_once = slots
        self.specials = special_token_strings(tokenizer)

    @classmethod
    def load(
        cls,
        gguf: Path | None = None,
        cache_dir: Path | None = None,
        progress: Callable[[str], None] = lambda message: None,
        model: SplitModel = QWEN_1P5B,
        slots: int = SLOTS,
        threads: int = THREADS,
    ) -> LlamaCppBackend:
        """Load a .gguf file, or (gguf None) the split model joined into cache_dir; ModelError says what failed."""
        try:
            import xllamacpp
        except ImportError:
            raise ModelError("llama.cpp is not installed: pip install xllamacpp==2026.10.11549") from None
        if gguf is None:
            if cache_dir is None:
                raise ModelError(f"{model.label} is joined from its parts into a cache folder; none was given.")
            gguf, name = assembled(model, cache_dir, progress), model.label
        else:
            gguf, name = Path(gguf), Path(gguf).name
            if not gguf.is_file():
                raise ModelError(f"No GGUF file at {gguf}.")
        tokenizer = _tokenizer(gguf, cache_dir, progress)
        progress(f"Loading {name} into llama.cpp")
        params = xllamacpp.CommonParams()
        params.model.path = str(gguf)
        params.n_parallel = slots
        params.n_ctx = slots * SLOT_CONTEXT
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.verbosity = -1  # llama.cpp's log lines would fill the page's console
        params.endpoint_metrics = True  # its counters of tokens and seconds: the load test's compute limit
        try:
            server = xllamacpp.Server(params)
        except Exception as e:  # the extension raises its own types
            raise ModelError(f"llama.cpp could not load {gguf}: {type(e).__name__}: {e}") from e
        return cls(server, tokenizer, name, slots)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _defused(self, messages: Messages) -> list[dict[str, str]]:
        return [{"role": m["role"], "content": defuse_special_tokens(m["content"], self.specials)} for m in messages]

    def count_prompt_tokens(self, messages: Messages) -> int:
        ids = self.tokenizer.apply_chat_template(self._defused(messages), add_generation_prompt=True, tokenize=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def _request(self, messages: Messages, max_tokens: int, stream: bool) -> dict:
        return {
            "messages": self._defused(messages),
            "max_tokens": max_tokens,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": LLAMACPP_TOP_LOGPROBS,
            "stream": stream,
        }

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64) -> Iterator:
        budget = plan_budget(plan, self.count_tokens) if plan else max_new_tokens
        chunks: queue.Queue = queue.Queue()
        closed = threading.Event()

        def on_chunk(chunk) -> bool:
            chunks.put(chunk)
            return closed.is_set()  # True ends the request: the reader stopped listening

        def work() -> None:
            try:
                result = self.server.handle_chat_completions(self._request(messages, budget, True), on_chunk)
                if isinstance(result, dict) and result.get("error"):
                    chunks.put(ModelError(f"llama.cpp refused the request: {result['error']}"))
            except Exception as e:  # the extension raises its own types
                chunks.put(ModelError(f"llama.cpp failed: {type(e).__name__}: {e}"))
            finally:
                chunks.put(_END)

        worker = threading.Thread(target=work, daemon=True, name="llamacpp-reply")
        worker.start()
        pieces = reply_pieces(_drain(chunks), list(plan or {}), threshold, [False])
        text = ""
        try:
            while True:
                try:
                    piece = next(pieces)
                except StopIteration as stop:
                    finished, usage, count = stop.value
                    break
                yield piece
                if isinstance(piece, str):
                    text += piece
                    if plan is not None and branch_done(text, plan):
                        # the plan's branch is written: the rest would be tokens nobody reads
                        pieces.close()
                        usage, count = None, self.count_tokens(text)
                        break
            if usage and isinstance(usage.get("prompt_tokens"), int):
                yield Usage(usage["prompt_tokens"], usage.get("completion_tokens", count))
            else:
                yield Usage(self.count_prompt_tokens(messages), count)
        finally:
            closed.set()
            # subtle: the request ends at its next token; a process that exits while it is still inside llama.cpp
            # aborts ("FATAL: exception not rethrown"), so wait for it (one token, well under a second)
            worker.join(timeout=10)

    def first_token_probabilities(self, messages: Messages, words: list[str]) -> dict[str, float] | None:
        """P(word) over words for the reply's first token (its top alternatives, normalised), or None when none of
        the words is among them: how a grader reads a yes or a no."""
        try:
            result = self.server.handle_chat_completions(self._request(messages, 1, False))
        except Exception as e:  # the extension raises its own types
            raise ModelError(f"llama.cpp failed: {type(e).__name__}: {e}") from e
        if not isinstance(result, dict) or result.get("error") or not result.get("choices"):
            raise ModelError(f"llama.cpp returned no reply: {str(result)[:200]}")
        return choice_probabilities(result["choices"][0].get("logprobs"), words)


def branch_done(text: str, plan: ReplyPlan) -> bool:
    """Whether the reply has written its branch of the plan: a line for each step, the last one ended (or, for a
    step that generates nothing, written whole).

    Example:
        >>> from raqa.models.base import Step
        >>> plan = {"ANSWER:": (Step("ANSWER:", 8), Step("\\nPAGE:", 4)), "NOT FOUND": (Step("NOT FOUND"),)}
        >>> branch_done("NOT FOUND", plan), branch_done("ANSWER: Paris\\nPAGE: 3", plan)
        (True, False)
    """
    body = text.lstrip()
    steps = next((plan[word] for word in plan if body.startswith(word)), None)
    if steps is None:
        return False
    lines = body.split("\n")
    if len(lines) > len(steps):
        return True
    last = steps[-1]
    return (
        len(lines) == len(steps)
        and last.max_tokens == 0
        and isinstance(last.prefill, str)
        and (lines[-1].strip() == last.prefill.strip())
    )


def _drain(chunks: queue.Queue) -> Iterator[dict]:
    """The chunks a request hands over, until it ends; an error it met is raised here, on the reader's thread."""
    while (item := chunks.get()) is not _END:
        if isinstance(item, ModelError):
            raise item
        if isinstance(item, dict):
            yield item
        elif isinstance(item, str):  # some builds hand the chunk over as JSON text
            yield json.loads(item)
