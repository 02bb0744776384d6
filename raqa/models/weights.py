"""Smaller weights for decode: the layers' linear maps in 4 bits, the vocabulary projection in 8 bits.

Why: a decode step computes one row per request, so it is bound by reading the weights, not by arithmetic: 540 MB of
fp32 for the 135M model every token. The layers' weights packed 4-bit (groups of 32 along the input, a scale and an
offset each, as the GGUF's own Q4_1 blocks) are 8x smaller, the tied embedding used as the vocabulary projection
(a fifth of the model, a Q8_0 tensor in the GGUF) 4x smaller in 8 bits.

Both keep every row of a call independent of the others, so a request's numbers never depend on which other requests
share its forward pass (the batcher packs several):
    Int4Linear   torch's weight-only int4 kernel: activations rounded to bfloat16, weights unpacked per group,
                 products summed in fp32 (the kernel takes bfloat16 activations only; fp32 ones take a slow path).
    Int8Linear   int8 weights with one scale per output, activations rounded to int8 with one scale per row, the
                 products summed exactly in int32 (torch._int_mm), then both scales applied.
Prefills (many rows) stay in fp32: there the arithmetic dominates, and these kernels are slower than fp32's.

Example:
    >>> w = torch.randn(64, 32)
    >>> x = torch.randn(3, 32)
    >>> bool((Int4Linear(w)(x) - x @ w.T).abs().max() < 0.3)
    True
"""

from __future__ import annotations

import torch

GROUP = 32  # input features per 4-bit group (the GGUF's Q4_1 block)
LEVELS = 15  # 4 bits: 0..15
INT4_OUTPUT_MULTIPLE = 16  # torch's int4 packing needs the output size to be a multiple of this


def int4_available() -> bool:
    """True when this torch has the CPU weight-only int4 kernel (torch 2.5 on)."""
    aten = torch.ops.aten
    return hasattr(aten, "_convert_weight_to_int4pack_for_cpu") and hasattr(aten, "_weight_int4pack_mm_for_cpu")


def int4_fits(out_features: int, in_features: int) -> bool:
    """True when a [out, in] weight can be packed: in a multiple of GROUP, out of INT4_OUTPUT_MULTIPLE."""
    return in_features % GROUP == 0 and out_features % INT4_OUTPUT_MULTIPLE == 0


class Int4Linear:
    """y = x W^T with W in 4-bit groups: w = scale * q + low for q in 0..15, per GROUP inputs of each output."""

    def __init__(self, weight: torch.Tensor):
        if not int4_fits(*weight.shape):
            raise ValueError(f"A {tuple(weight.shape)} weight cannot be packed in 4-bit groups of {GROUP}.")
        out_features, in_features = weight.shape
        groups = weight.detach().float().reshape(out_features, in_features // GROUP, GROUP)
        low, high = groups.amin(-1), groups.amax(-1)
        scale = ((high - low) / LEVELS).clamp(min=torch.finfo(torch.float32).tiny)
        levels = (groups - low[..., None]).div_(scale[..., None]).round_().clamp_(0, LEVELS).to(torch.int32)
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(levels.reshape(out_features, in_features), 1)
        # subtle: the kernel computes (q - 8) * scale + zero, so the offset it takes is low + 8 * scale
        zero = low + scale * (LEVELS + 1) / 2
        self.scales_and_zeros = torch.stack([scale, zero], -1).transpose(0, 1).contiguous().to(torch.bfloat16)
        self.out_features = out_features

    def state(self) -> dict[str, torch.Tensor]:
        return {"packed": self.packed, "scales_and_zeros": self.scales_and_zeros}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> Int4Linear:
        linear = cls.__new__(cls)
        linear.packed, linear.scales_and_zeros = state["packed"], state["scales_and_zeros"]
        linear.out_features = state["scales_and_zeros"].shape[1]
        return linear

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.packed, GROUP, self.scales_and_zeros)
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scales_and_zeros.nbytes


class Int8Linear:
    """y = x W^T with W in int8 (one scale per output) and each row of x in int8 (one scale per row)."""

    def __init__(self, weight: torch.Tensor):
        weight = weight.detach().float()
        self.scale = (weight.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        # subtle: _int_mm reads the [in, out] operand fastest as the transpose of a row-major [out, in] tensor
        self.levels = (weight / self.scale[:, None]).round_().to(torch.int8)

    def state(self) -> dict[str, torch.Tensor]:
        return {"levels": self.levels, "scale": self.scale}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> Int8Linear:
        linear = cls.__new__(cls)
        linear.levels, linear.scale = state["levels"], state["scale"]
        return linear

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).float()
        row_scale = (rows.abs().amax(dim=1, keepdim=True) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        quantized = torch.round(rows / row_scale).to(torch.int8)
        y = torch._int_mm(quantized, self.levels.t()).float() * row_scale * self.scale
        return y.to(x.dtype).reshape(*x.shape[:-1], -1)

    @property
    def nbytes(self) -> int:
        return self.levels.nbytes + self.scale.nbytes
