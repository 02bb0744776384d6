"""The one LoRA trainer with Adapt's config, on a tiny random Llama and a character tokenizer (fast, no real model)."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from lab.training.loop import Schedule, learning_rate  # noqa: E402
from lab.training.lora import (  # noqa: E402
    ADAPT_LORA,
    READER_LORA,
    Example,
    LoraSettings,
    encode_example,
    left_padded,
    micro_batches,
    save_adapter,
    step_batches,
    train_adapter,
)
from lab.training.when_to_retrieve import loss_curve  # noqa: E402


class CharTokenizer:
    """Bytes as tokens, plus <|im_end|>; a chat template of 'role: content' lines."""

    eos_token_id = 257
    pad_token_id = 0
    unk_token_id = 258

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [b + 1 for b in text.encode()]}

    def convert_tokens_to_ids(self, token):
        return 256 if token == "<|im_end|>" else self.unk_token_id

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + (
            "assistant: " if add_generation_prompt else ""
        )
        return self(text)["input_ids"]


def _model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=260,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
    )
    return LlamaForCausalLM(config).eval()


EXAMPLES = [Example(({"role": "user", "content": f"q{i} " + "x" * i},), "yes" if i % 2 else "<RET>") for i in range(6)]


def test_each_use_keeps_its_settings():
    # today's defaults of the two trainers this one replaced; the CLI's train adapt relies on the class defaults
    assert LoraSettings() == ADAPT_LORA
    assert (ADAPT_LORA.rank, ADAPT_LORA.alpha, ADAPT_LORA.dropout, ADAPT_LORA.lr, ADAPT_LORA.seed) == (
        8,
        16,
        0.05,
        3e-4,
        0,
    )
    assert (ADAPT_LORA.epochs, ADAPT_LORA.batch, ADAPT_LORA.micro_batch, ADAPT_LORA.warmup_steps) == (3, 128, 8, 0)
    assert ADAPT_LORA.target_modules == ("q_proj", "v_proj")
    assert (ADAPT_LORA.average, ADAPT_LORA.verdict_weight, ADAPT_LORA.shared_prefix) == ("tokens", 0.0, False)
    r = READER_LORA
    assert (r.rank, r.alpha, r.dropout, r.lr, r.seed, r.epochs, r.warmup_steps) == (8, 16, 0.05, 3e-4, 0, 1, 4)
    assert (r.batch, r.micro_batch, r.average, r.verdict_weight, r.shared_prefix) == (4, 1, "replies", 0.5, True)
    assert r.target_modules == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert (r.page_tokens, r.shots) == (200, 2)
    ADAPT_LORA.check()
    READER_LORA.check()


def test_encode_appends_the_end_of_turn_after_the_target():
    encoded = encode_example(EXAMPLES[1], CharTokenizer())
    assert encoded.prefix == []
    assert bytes(t - 1 for t in encoded.rest).decode() == "user: q1 x\nassistant: "
    assert encoded.target == [ord(c) + 1 for c in "yes"] + [256]


def test_a_shared_prefix_is_every_message_but_the_last():
    example = Example(({"role": "system", "content": "S"}, {"role": "user", "content": "Q"}), "A")
    encoded = encode_example(example, CharTokenizer(), shared_prefix=True)
    assert bytes(t - 1 for t in encoded.prefix).decode() == "system: S\n"
    assert bytes(t - 1 for t in encoded.rest).decode() == "user: Q\nassistant: "
    assert (
        encode_example(EXAMPLES[0], CharTokenizer(), shared_prefix=True).prefix == []
    )  # one message: nothing to share


def test_left_padding_gives_the_same_loss_as_each_example_alone():
    import torch.nn.functional as F

    model, tok = _model(), CharTokenizer()
    rows = [(e.rest, e.target) for e in (encode_example(x, tok) for x in EXAMPLES)]
    alone = 0.0
    with torch.no_grad():
        for prompt, target in rows:
            logits = model(input_ids=torch.tensor([prompt + target])).logits[0]
            alone += float(F.cross_entropy(logits[len(prompt) - 1 : -1], torch.tensor(target), reduction="sum"))
        ids, labels, mask, positions = left_padded(rows, 0, "cpu")
        keep = max(len(t) for _, t in rows) + 1
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits
        batched = float(
            F.cross_entropy(logits[:, :-1].reshape(-1, 260), labels[:, -(keep - 1) :].reshape(-1), reduction="sum")
        )
    assert batched == pytest.approx(alone, rel=1e-4)
    assert int(mask.sum()) == sum(len(p) + len(t) for p, t in rows)
    assert positions[0, -1] == len(rows[0][0]) + len(rows[0][1]) - 1


def test_each_epoch_sees_every_example_once_in_steps_of_the_batch():
    steps = step_batches(10, 3, 4, random.Random(0))
    assert [len(s) for s in steps] == [4, 4, 2] * 3
    for epoch in range(3):
        assert sorted(sum(steps[epoch * 3 : epoch * 3 + 3], [])) == list(range(10))
    assert steps[:3] != steps[3:6]  # a fresh shuffle each epoch
    assert micro_batches([0, 1, 2, 3], [5, 1, 9, 3], 2) == [[1, 3], [0, 2]]
    assert micro_batches([0, 1, 2, 3], [5, 1, 9, 3], 1) == [[0], [1], [2], [3]]  # nothing to pad: step order
    # passes never mix prefixes: each runs from one cache
    assert micro_batches([0, 1, 2, 3], [5, 1, 9, 3], 4, [(1,), (2,), (1,), (2,)]) == [[0, 2], [1, 3]]


def test_the_learning_rate_warms_up_then_decays_linearly_to_zero():
    flat = Schedule(lr=1.0)
    assert learning_rate(0, 4, flat) == 1.0 and learning_rate(3, 4, flat) == 0.25
    warm = Schedule(lr=1.0, warmup_steps=2)
    assert [learning_rate(s, 6, warm) for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("rank", 0, "rank must be 1"),
        ("batch", 0, "batch must be 1"),
        ("lr", 0, "lr must be"),
        ("dropout", 1, "dropout"),
        ("verdict_weight", 1.5, "verdict_weight"),
        ("average", "examples", "average must be"),
    ],
)
def test_bad_settings_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        LoraSettings(**{field: value}).check()


def test_training_lowers_the_loss_saves_peft_format_and_reloads_identically(tmp_path):
    from peft import PeftModel

    base, tok = _model(), CharTokenizer()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    settings = replace(ADAPT_LORA, epochs=10, batch=3, micro_batch=2, lr=1e-1, dropout=0.0)
    progress = []
    encoded = [encode_example(e, tok) for e in EXAMPLES]
    peft_model, log = train_adapter(copy.deepcopy(base), encoded, settings, lambda done, stats: progress.append(done))
    assert len(log.steps) == 10 * 2 and progress[-1] == 10 * len(EXAMPLES)
    curve = loss_curve(log)
    means = curve["epoch_means"]
    # the tiny model's output layer is random and frozen, so the loss cannot fall far; it must still fall
    assert list(means) == [str(e) for e in range(1, 11)] and means["10"] < means["1"] - 0.2
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())  # the base stays untouched
    save_adapter(tmp_path / "a", peft_model, {"kind": "test"}, log, "# card\n", "card.json", "tiny-base")
    assert {p.name for p in (tmp_path / "a").iterdir()} >= {
        "adapter_config.json",
        "adapter_model.safetensors",
        "card.json",
        "training_log.json",
        "README.md",
    }
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["base_model_name_or_path"] == "tiny-base"
    reloaded = PeftModel.from_pretrained(copy.deepcopy(base), str(tmp_path / "a")).eval()
    ids = torch.tensor([encoded[0].rest])
    with torch.no_grad():
        assert torch.allclose(reloaded(input_ids=ids).logits, peft_model(input_ids=ids).logits, atol=1e-5)


def test_no_examples_is_an_error():
    with pytest.raises(ValueError, match="No training examples"):
        train_adapter(_model(), [], ADAPT_LORA)
