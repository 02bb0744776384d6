"""Packed weights for decode (models/weights.py) and the runner's use of them: close to fp32, every row independent of
the rows it is computed with, prompts still exact, and a clear refusal where packing cannot apply."""

from __future__ import annotations

import pytest
import torch
from test_speed import tiny_llama

from raqa.models.llama_runner import DECODE_ROWS, LlamaRunner, Request
from raqa.models.weights import GROUP, Int4Linear, Int8Linear, int4_available, int4_fits

pytestmark = pytest.mark.skipif(not int4_available(), reason="this torch has no CPU int4 kernel")


def q4_1_like(out_features: int, in_features: int) -> torch.Tensor:
    """Weights as a Q4_1 GGUF stores them: per group of 32 inputs, scale * level + low with levels 0..15."""
    torch.manual_seed(1)
    groups = in_features // GROUP
    scale = torch.rand(out_features, groups, 1) * 0.01 + 0.001
    low = -scale * 7.5 + torch.randn(out_features, groups, 1) * 0.001
    levels = torch.randint(0, 16, (out_features, groups, GROUP))
    levels[..., 0], levels[..., 1] = 0, 15  # every group spans the whole range, as large Q4_1 blocks do
    return (scale * levels + low).reshape(out_features, in_features)


def test_int4_reproduces_4_bit_group_weights_up_to_bfloat16_rounding() -> None:
    weight = q4_1_like(64, 96)
    x = torch.randn(5, 96)
    want = x @ weight.T
    got = Int4Linear(weight)(x)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert (got - want).abs().max() < 0.02 * want.abs().max()  # bfloat16 activations and scales: ~2^-8 each


def test_int8_is_close_to_fp32_and_a_quarter_of_its_size() -> None:
    torch.manual_seed(2)
    weight, x = torch.randn(50, 32), torch.randn(3, 32)
    want = x @ weight.T
    linear = Int8Linear(weight)
    assert (linear(x) - want).abs().max() < 0.03 * want.abs().max()
    assert linear.nbytes < weight.nbytes / 3


@pytest.mark.parametrize("make", [Int4Linear, Int8Linear])
def test_each_row_gets_the_same_numbers_alone_or_with_others(make) -> None:
    torch.manual_seed(3)
    linear = make(torch.randn(64, 64))
    rows = torch.randn(7, 64) * torch.logspace(-2, 2, 7)[:, None]  # very different magnitudes in one call
    together = linear(rows)
    for i in range(len(rows)):
        assert torch.equal(linear(rows[i : i + 1])[0], together[i])


def test_shapes_that_cannot_be_packed_are_refused_with_the_reason() -> None:
    assert int4_fits(64, 64) and not int4_fits(50, 64) and not int4_fits(64, 40)
    with pytest.raises(ValueError, match="groups of 32"):
        Int4Linear(torch.randn(64, 40))


def test_the_runner_reads_prompts_in_fp32_and_decodes_close_to_it() -> None:
    model = tiny_llama()
    exact, packed = LlamaRunner(model), LlamaRunner(model, "int4")
    assert (exact.weights, packed.weights) == ("fp32", "int4")
    prompt = list(range(3, 3 + DECODE_ROWS + 4))  # long enough to be a prefill
    a, b = exact.new_sequence(), packed.new_sequence()
    [want], [got] = exact.forward([Request(a, prompt)]), packed.forward([Request(b, prompt)])
    assert torch.equal(got, want)
    for token in (5, 9, 11):
        [want], [got] = exact.forward([Request(a, [token])]), packed.forward([Request(b, [token])])
        assert not torch.equal(got, want)  # the packed weights did compute this step
        assert (got - want).abs().max() < 0.05 * want.abs().max() + 1e-3


def test_a_prefill_and_decode_steps_packed_together_get_what_each_gets_alone() -> None:
    runner = LlamaRunner(tiny_llama(), "int4")
    long_prompt, short = list(range(1, 30)), [4, 8, 15]
    alone = []
    for ids in (long_prompt, short):
        seq = runner.new_sequence()
        runner.forward([Request(seq, [2, 3])])
        alone.append(runner.forward([Request(seq, ids)])[0])
    first, second = runner.new_sequence(), runner.new_sequence()
    runner.forward([Request(first, [2, 3]), Request(second, [2, 3])])
    together = runner.forward([Request(first, long_prompt), Request(second, short)])
    assert torch.allclose(together[0], alone[0], atol=1e-5) and torch.allclose(together[1], alone[1], atol=1e-5)


def test_an_unknown_weight_format_is_refused() -> None:
    with pytest.raises(ValueError, match="int4, fp32"):
        LlamaRunner(tiny_llama(), "int3")


def test_packing_is_done_once_per_model_and_read_back_from_its_file(tmp_path) -> None:
    from raqa.models.llama_runner import packed_weights

    model, again = tiny_llama(), tiny_llama()
    path = tmp_path / "packed.pt"
    first = packed_weights(model, path)
    assert path.is_file() and packed_weights(model, path) is first  # kept on the model
    read = packed_weights(again, path)  # another copy of the same weights: read from the file, not packed
    assert read is not first
    x = torch.randn(2, 32)
    assert torch.equal(read[0][0].qkv(x), first[0][0].qkv(x)) and torch.equal(read[1](x), first[1](x))
    path.write_bytes(b"not a torch file")
    assert packed_weights(tiny_llama(), path) is not None  # an unreadable cache is packed again
