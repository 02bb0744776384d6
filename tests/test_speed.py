"""The speed options change nothing but the speed: llama_runner's logits against transformers', prompt-lookup
decoding against plain greedy decoding, the batcher's packed calls against one at a time, and (marked slow) the
real model's verdicts, answers and P(answer) with every option off and on."""

from __future__ import annotations

import math
import threading

import pytest
import torch

from raqa.config import AppConfig, RunSettings, SpeedOptions
from raqa.models.base import Choice, Usage
from raqa.models.batcher import Batcher
from raqa.models.decoding import LeanCursor, TransformersCursor, guided_reply, lookup_proposals
from raqa.models.llama_runner import LlamaRunner, Request, supports
from raqa.models.local import TransformersBackend
from raqa.reading.engine import reply_plan


def tiny_llama(layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_theta=10000.0,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def llama():
    return tiny_llama()


def reference_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0]


def test_the_runner_computes_transformers_logits_prefill_then_step_by_step(llama) -> None:
    ids = torch.randint(0, 50, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    runner = LlamaRunner(llama)
    seq = runner.new_sequence(capacity=8)  # too small on purpose: the buffer must grow and keep what it holds
    first = runner.forward([Request(seq, ids[:25], all_logits=True)])[0]
    middle = runner.forward([Request(seq, ids[25:30], all_logits=True)])[0]
    steps = [runner.forward([Request(seq, [token])])[0] for token in ids[30:]]
    mine = torch.cat([first, middle, torch.stack(steps)])
    assert seq.length == len(ids)
    assert torch.allclose(mine, reference_logits(llama, ids), atol=1e-4)


def test_packed_requests_get_the_logits_they_would_get_alone(llama) -> None:
    a, b = [3, 5, 7, 9, 11, 13], [2, 4, 6, 8]
    runner = LlamaRunner(llama)
    one, two = runner.new_sequence(), runner.new_sequence()
    runner.forward([Request(one, a[:4])])
    last_of_a, all_of_b = runner.forward([Request(one, a[4:]), Request(two, b, all_logits=True)])
    assert torch.allclose(last_of_a, reference_logits(llama, a)[-1], atol=1e-4)
    assert torch.allclose(all_of_b, reference_logits(llama, b), atol=1e-4)
    with pytest.raises(ValueError, match="one request of a call"):
        runner.forward([Request(one, [1]), Request(one, [2])])


def test_truncate_forgets_positions_and_a_copied_prefix_continues_like_the_original(llama) -> None:
    runner = LlamaRunner(llama)
    prefix = runner.new_sequence()
    runner.forward([Request(prefix, [1, 2, 3, 4])])
    seq = runner.new_sequence(capacity=2)
    seq.copy_from(prefix)
    runner.forward([Request(seq, [40, 41, 42])])  # a guess that is then taken back
    seq.truncate(4)
    logits = runner.forward([Request(seq, [5, 6])])[0]
    assert torch.allclose(logits, reference_logits(llama, [1, 2, 3, 4, 5, 6])[-1], atol=1e-4)
    with pytest.raises(ValueError, match="Cannot truncate"):
        seq.truncate(99)


def test_only_plain_llama_models_take_the_lean_forward(llama) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    assert supports(llama)
    assert not supports(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20)))
    with pytest.raises(ValueError, match="Llama-architecture"):
        LlamaRunner(object())


class CopyingModel:
    """A fake cursor whose model continues the prompt's sequence 0 1 2 ... 9 and then stops (token 20),
    counting the forward passes it is asked for."""

    def __init__(self) -> None:
        self.length, self.tokens, self.calls = 0, [], 0

    def _next(self, token: int) -> torch.Tensor:
        logits = torch.zeros(30)
        logits[token + 1 if token < 9 else 20] = 10.0
        return logits

    def feed(self, ids, all_logits=False):
        self.calls += 1
        self.tokens = self.tokens[: self.length] + list(ids)
        self.length = len(self.tokens)
        rows = torch.stack([self._next(t) for t in ids])
        return rows if all_logits else rows[-1]

    def truncate(self, length):
        self.length = min(self.length, length)

    def close(self):
        pass


@pytest.mark.parametrize("lookahead", [0, 4])
def test_prompt_lookup_gives_the_greedy_reply_in_fewer_passes(lookahead: int) -> None:
    prompt = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 25, 0, 1]
    cursor = CopyingModel()
    logits = cursor.feed(prompt)
    pieces = list(
        guided_reply(
            cursor,
            logits,
            prompt,
            None,
            0.5,
            20,
            100,
            lambda s: [],
            lambda ids: " ".join(map(str, ids)),
            frozenset({20}),
            lookahead,
        )
    )
    assert "".join(p for p in pieces if isinstance(p, str)) == "2 3 4 5 6 7 8 9"
    assert pieces[-1] == Usage(len(prompt), 8)
    assert cursor.length == len(prompt) + 8  # every taken token fed, no guess left behind
    assert cursor.calls == (1 + 8 if lookahead == 0 else 1 + 2)  # [2 3 4 5 6], then [7 8 9 25 0]


def test_lookup_proposals_follow_the_latest_match() -> None:
    assert lookup_proposals([4, 1, 2], [1, 2, 9, 1, 2, 7, 8], 3) == [7, 8]
    assert lookup_proposals([1, 2], [1, 2, 9], 0) == []


def test_the_batcher_packs_concurrent_requests_and_each_gets_its_own_logits(llama) -> None:
    runner = LlamaRunner(llama)
    batcher = Batcher(runner, gather_s=0.5)
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    cursors = [LeanCursor(runner, runner.new_sequence(), batcher) for _ in prompts]
    results: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        results[i] = cursors[i].feed(prompts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert batcher.calls == 1 and batcher.packed_requests == 3  # all three waited for each other
    for i, ids in enumerate(prompts):
        assert torch.allclose(results[i], reference_logits(llama, ids)[-1], atol=1e-4)
    for cursor in cursors:
        cursor.close()
    assert batcher._open == 0  # a closed run is not waited for


def test_a_request_that_fails_in_a_packed_call_fails_alone(llama) -> None:
    runner = LlamaRunner(llama)
    batcher = Batcher(runner, gather_s=0.0)
    cursor = LeanCursor(runner, runner.new_sequence(), batcher)
    with pytest.raises(ValueError, match="at least one token"):
        cursor.feed([])
    assert torch.allclose(cursor.feed([1, 2]), reference_logits(llama, [1, 2])[-1], atol=1e-4)
    cursor.close()


def test_both_cursors_continue_alike(llama) -> None:
    lean, plain = LeanCursor(LlamaRunner(llama), LlamaRunner(llama).new_sequence()), TransformersCursor(llama)
    for cursor in (lean, plain):
        cursor.feed([1, 2, 3, 4])
        cursor.truncate(2)
    assert torch.allclose(lean.feed([7]), plain.feed([7]), atol=1e-4)


def _answer_line(pieces: list) -> str:
    return "".join(p for p in pieces if isinstance(p, str)).split("\n")[0]


@pytest.fixture(scope="module")
def real_model() -> TransformersBackend:
    return TransformersBackend.load(cache_dir=AppConfig.from_env().cache_dir)


OPTIONS = {
    "none": SpeedOptions.off(),
    "prefix cache": SpeedOptions(lean_forward=False, lookahead=0, batching=False),
    "lean forward": SpeedOptions(prefix_cache=False, lookahead=0, batching=False),
    "lookahead": SpeedOptions(prefix_cache=False, lean_forward=False, batching=False),
    "all": SpeedOptions.exact(),
}


@pytest.mark.slow
def test_every_speed_option_keeps_verdicts_answers_and_probabilities(real_model, tiny_pages) -> None:
    from raqa.reading.prompts import build_messages
    from raqa.retrieval.index import Hit

    plan = reply_plan(RunSettings())
    questions = ("Who painted the Mona Lisa?", "What is the capital of France?")  # each on another page
    windows = [
        build_messages(question, [Hit(1, 1.0, page)], 320, real_model.count_tokens)
        for question, page in zip(questions, tiny_pages[:2], strict=True)
    ]
    replies = {}
    for name, speed in OPTIONS.items():
        backend = real_model.with_speed(speed)
        replies[name] = [list(backend.reply(messages, plan)) for messages in windows]
    for name, got in replies.items():
        for want, have in zip(replies["none"], got, strict=True):
            assert isinstance(have[0], Choice) and have[0].chosen == want[0].chosen, name
            for word, p in want[0].probabilities.items():
                assert math.isclose(have[0].probabilities[word], p, abs_tol=1e-4), name
            # the same answer line; the page and sentence numbers after it are written for pages that do not hold the
            # answer, where greedy decoding meets near ties a different summation order can flip (CI once saw
            # "PAGE: 1" against "PAGE: 1001" from lean forward), so they are not held to the letter
            assert _answer_line(have[1:]) == _answer_line(want[1:]), name


@pytest.mark.slow
def test_packed_weights_keep_verdicts_and_probabilities_and_these_answers(real_model, tiny_pages) -> None:
    """int4 decode computes every prompt in fp32, so the verdict and its probabilities are exact; the answer's tokens
    come from the packed weights (here the same answers; the reader comparison measures the rest)."""
    from raqa.reading.prompts import build_messages
    from raqa.retrieval.index import Hit

    plan = reply_plan(RunSettings())
    exact, packed = real_model.with_speed(SpeedOptions.exact()), real_model.with_speed(SpeedOptions())
    assert packed.runner.weights == "int4" and exact.runner.weights == "fp32"
    for question in ("Who painted the Mona Lisa?", "What is the capital of France?"):
        for page in tiny_pages[:2]:
            messages = build_messages(question, [Hit(1, 1.0, page)], 320, real_model.count_tokens)
            want, have = list(exact.reply(messages, plan)), list(packed.reply(messages, plan))
            assert have[0].chosen == want[0].chosen
            for word, p in want[0].probabilities.items():
                assert math.isclose(have[0].probabilities[word], p, abs_tol=1e-4)
            answer = [line for line in "".join(x for x in have if isinstance(x, str)).splitlines() if "ANSWER" in line]
            assert answer == [
                line for line in "".join(x for x in want if isinstance(x, str)).splitlines() if "ANSWER" in line
            ]


def test_a_brought_llama_replies_alike_at_once_and_a_closed_reply_is_no_longer_waited_for(tmp_path) -> None:
    from test_llm import tiny_model_folder

    backend = TransformersBackend.load(str(tiny_model_folder(tmp_path / "m")))
    assert backend.batcher is not None  # a Llama model: lean forward, shared passes
    baseline = backend.with_speed(SpeedOptions.off())
    questions = [[{"role": "user", "content": words}] for words in ("bees make", "make honey bees", "honey")]
    want = [list(baseline.reply(m, None, max_new_tokens=12)) for m in questions]
    assert all(any(isinstance(piece, str) for piece in reply) for reply in want)  # the random model does write
    got: dict[int, list] = {}

    def work(i: int) -> None:
        got[i] = list(backend.reply(questions[i], None, max_new_tokens=12))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [got[i] for i in range(len(questions))] == want
    stopped = backend.reply(questions[0], None, max_new_tokens=12)
    next(stopped)
    assert backend.batcher._open == 1
    stopped.close()  # what Stop does to a run's generator
    assert backend.batcher._open == 0
    assert list(backend.reply(questions[1], None, max_new_tokens=12)) == want[1]
