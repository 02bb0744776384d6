"""The reader's training: the threshold rule, the loss weights, the shared-prefix shortcut, and a few LoRA steps
on a tiny model under READER_LORA."""

import math
import time
from dataclasses import replace

import pytest

from lab.stats import auc
from lab.training.calibration import choose_reader_threshold
from lab.training.lora import READER_LORA, Encoded, TrainLog, save_adapter, target_losses, token_weights, train_adapter
from lab.training.reader import READER_LABEL, loss_summary
from raqa.reading.readers import READER_CARD, load_reader

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_threshold_meets_the_target_with_the_best_exact_match():
    # negatives score low, positives high; the right positive answers are the high-scoring ones
    threshold, rule = choose_reader_threshold(
        [0.1, 0.2, 0.6, 0.3], [0.5, 0.7, 0.8, 0.9], [False, True, True, False], 1.0, 0.25
    )
    assert rule == "target met"
    # above the top negative (0.6) and below the first right answer (0.7): no false answer, both right answers
    assert threshold == pytest.approx(0.65)


def test_threshold_falls_back_when_the_target_cannot_be_met():
    # every negative outscores every positive: halving false answers costs every right answer
    threshold, rule = choose_reader_threshold([0.8, 0.9], [0.1, 0.2], [True, True], 1.0, 0.5)
    assert rule.startswith("false answers halved")
    assert threshold > 0.2


def test_auc():
    assert auc([0.1, 0.2], [0.3, 0.4]) == 1.0
    assert auc([0.3, 0.4], [0.1, 0.2]) == 0.0
    assert auc([0.5], [0.5]) == 0.5
    assert math.isnan(auc([], [0.5]))


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_the_reply_loss_gives_the_first_token_its_share(weight):
    logits = torch.randn(5, 64)
    target = torch.tensor([3, 1, 4, 1, 5])
    each = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    (weights,) = token_weights([5], replace(READER_LORA, verdict_weight=weight))
    loss = float((each * torch.tensor(weights)).sum())
    assert loss == pytest.approx(float((1 - weight) * each.mean() + weight * each[0]), rel=1e-5)


def test_replies_weigh_the_same_whatever_their_length_and_tokens_do_under_adapts_average():
    replies = token_weights([2, 4], replace(READER_LORA, verdict_weight=0.5))
    assert [sum(r) for r in replies] == pytest.approx([0.5, 0.5])
    assert replies[0] == pytest.approx([0.375, 0.125]) and replies[1][1:] == pytest.approx([0.0625] * 3)
    tokens = token_weights([2, 4], replace(READER_LORA, average="tokens", verdict_weight=0.0))
    assert sum(tokens, []) == pytest.approx([1 / 6] * 6)


def test_continuing_from_the_prefix_cache_gives_the_same_logits_as_the_whole_sequence():
    model = tiny_model()
    prefix, rest = [1, 2, 3, 4, 5, 6], [7, 8, 9, 10]
    with torch.no_grad():
        whole = model(input_ids=torch.tensor([prefix + rest])).logits[0, len(prefix) :]
        cache = model(input_ids=torch.tensor([prefix]), use_cache=True).cache
        continued = model(input_ids=torch.tensor([rest]), cache=cache, use_cache=True).logits[0]
    assert torch.allclose(whole, continued, atol=1e-5)


def test_a_left_padded_pass_from_the_prefix_cache_gives_each_windows_own_losses():
    model = tiny_model()
    prefix = [1, 2, 3, 4, 5, 6]
    rows = [([7, 8, 9], [10, 11]), ([12], [13, 14, 15, 16])]
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([prefix]), use_cache=True).cache
        batched = target_losses(model, rows, "cpu", cache, len(prefix))
        for r, (rest, target) in enumerate(rows):
            logits = model(input_ids=torch.tensor([prefix + rest + target])).logits[0]
            alone = torch.nn.functional.cross_entropy(
                logits[-len(target) - 1 : -1], torch.tensor(target), reduction="none"
            )
            assert torch.allclose(batched[r, -len(target) :], alone, atol=1e-5)
    assert float(batched[0, :2].abs().sum()) == 0.0  # before the shorter target: padding, no loss


def test_a_few_lora_steps_lower_the_loss_and_train_only_the_adapter(tmp_path):
    pytest.importorskip("peft")
    model = tiny_model()
    frozen = {n: p.detach().clone() for n, p in model.named_parameters()}
    encoded = [Encoded([1, 2, 3, 4], [5, 6, 7], [8, 9, 10]), Encoded([1, 2, 3, 4], [11, 12], [13, 14])] * 8
    settings = replace(READER_LORA, lr=1e-2, batch=2, warmup_steps=1, epochs=2, dropout=0.0)
    seen = []
    start = time.perf_counter()
    peft_model, log = train_adapter(model, encoded, settings, lambda done, stats: seen.append(done))
    assert time.perf_counter() - start < 20
    assert seen[-1] == len(encoded) * 2 and len(log.steps) == len(encoded)
    assert log.steps[-1]["loss"] < log.steps[0]["loss"]
    assert log.tokens > 0 and log.device in ("cpu", "cuda")
    merged = peft_model.merge_and_unload()
    changed = [n for n, p in merged.named_parameters() if not torch.equal(p.detach().cpu(), frozen[n])]
    assert changed and all(any(m in n for m in settings.target_modules) for n in changed)


def test_loss_summary_reads_the_log():
    log = TrainLog(steps=[{"loss": v, "verdict_loss": v * 2} for v in (4.0, 3.0, 2.0, 1.0)])
    summary = loss_summary(log, tail=2)
    assert summary == {
        "first_steps_loss": 3.5,
        "last_steps_loss": 1.5,
        "first_steps_verdict_loss": 7.0,
        "last_steps_verdict_loss": 3.0,
        "steps": 4,
    }


def test_a_saved_reader_folder_is_found_with_its_threshold(tmp_path):
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(tiny_model(), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    card = {"label": READER_LABEL, "answer_threshold": 0.7, "shots": 2, "page_tokens": 320}
    save_adapter(tmp_path / "abstain", model, card, TrainLog(), "# card\n", READER_CARD)
    reader = load_reader(tmp_path / "abstain")
    assert (reader.name, reader.answer_threshold, reader.shots, reader.adapter) == (
        "abstain",
        0.7,
        2,
        tmp_path / "abstain",
    )
    assert reader.label == "Abstention-tuned reader"


@pytest.mark.slow
def test_encoded_windows_are_the_demos_prompt_then_a_reply_starting_with_the_verdict_token():
    from lab.training.reader import encode_window
    from lab.training.reader_data import WindowExample, example_messages
    from raqa.config import default_cache_dir
    from raqa.models.local import TransformersBackend
    from raqa.reading.prompts import ANSWER_WORD, NOT_FOUND_WORD
    from raqa.retrieval.corpus import Page
    from raqa.retrieval.index import Hit

    backend = TransformersBackend.load(cache_dir=default_cache_dir())
    hits = (Hit(1, 1.0, Page("7", "Paris", "Paris is the capital of France.")),)
    replies = (
        ("ANSWER: Paris\nPAGE: 7\nSENTENCE: 1", ANSWER_WORD),
        ("NOT FOUND\nREASON: No page says.", NOT_FOUND_WORD),
    )
    for target, word in replies:
        example = WindowExample(
            "nq", "nq-dev-1", "What is the capital of France?", ("Paris",), "positive", hits, 1, target
        )
        encoded = encode_window(example, backend.tokenizer, 200, 2)
        prompt = backend.prompt_ids(example_messages(example, 200, backend.count_tokens, 2))
        assert encoded.prefix and encoded.prefix + encoded.rest == prompt
        assert encoded.target[0] == backend._ids(word)[0]
        assert encoded.target[-1] == backend.tokenizer.convert_tokens_to_ids("<|im_end|>")
