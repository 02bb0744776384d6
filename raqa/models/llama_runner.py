"""A lean forward pass for Llama-architecture models (SmolLM2 is one) over their transformers weights, with a key/value
cache per request that is allocated once and written in place, and several requests packed into one call.

Why not the transformers forward: on this CPU a decode step is bound by reading the weights (540 MB in fp32 for the
135M model), and transformers' DynamicCache concatenates every layer's cache on every step (a fifth of a step's
time here). This runner writes each new key and value into a preallocated buffer instead, computes logits only
for the positions that are asked for (a prefill needs its last one, not all of them), and packs the new tokens of
several requests into one matrix, so that every weight is read once per step for all of them: rows are
independent in every layer except attention, which runs per request against that request's own cache.

It is the same arithmetic as transformers' LlamaForCausalLM (RMSNorm in fp32, rotary embedding, grouped-query
attention through scaled_dot_product_attention, SwiGLU); tests/test_speed.py checks its logits against
transformers' to 1e-4. Left out: rotary scaling other than the default, sliding windows, and every other
architecture (`supports` says no and the backend uses transformers' forward).

Example:
    >>> runner = LlamaRunner(model)                      # doctest: +SKIP
    >>> seq = runner.new_sequence()                      # doctest: +SKIP
    >>> [logits] = runner.forward([Request(seq, ids)])   # logits of the token after ids  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from raqa.config import WEIGHTS
from raqa.models.torch_thread import on_torch_thread
from raqa.models.weights import Int4Linear, Int8Linear, int4_available, int4_fits

GROWTH_TOKENS = 512  # a sequence's buffer grows by at least this many positions when it is full
PACKED_FILE = f"packed-int4-torch{torch.__version__}.pt"  # the packed layout is torch's: a file per version
DECODE_ROWS = 16  # a request of at most this many new tokens is a decode step: it reads the packed weights


def supports(model) -> bool:
    """True for a plain Llama-architecture causal LM this runner computes exactly like transformers does."""
    config = getattr(model, "config", None)
    rope = getattr(config, "rope_parameters", None) or {}
    return (
        getattr(config, "model_type", None) == "llama"
        and rope.get("rope_type", "default") == "default"
        and not getattr(config, "sliding_window", None)
        and hasattr(model, "model")
        and hasattr(model, "lm_head")
    )


class Sequence:
    """One request's key/value cache: [layers, kv heads, capacity, head dim] for keys and for values, of which the
    first `length` positions are filled."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int, dtype: torch.dtype):
        self.keys = torch.empty(layers, kv_heads, capacity, head_dim, dtype=dtype)
        self.values = torch.empty_like(self.keys)
        self.length = 0

    def reserve(self, extra: int) -> None:
        """Make room for `extra` more positions, copying the filled part into a larger buffer if needed."""
        needed = self.length + extra
        if needed <= self.keys.shape[2]:
            return
        capacity = max(needed, self.keys.shape[2] + GROWTH_TOKENS)
        for name in ("keys", "values"):
            old = getattr(self, name)
            new = old.new_empty(old.shape[0], old.shape[1], capacity, old.shape[3])
            new[:, :, : self.length] = old[:, :, : self.length]
            setattr(self, name, new)

    def truncate(self, length: int) -> None:
        """Forget every position from `length` on (a speculated token that did not match)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"Cannot truncate a sequence of {self.length} positions to {length}.")
        self.length = length

    def copy_from(self, other: Sequence) -> None:
        """Start this sequence as a copy of other's filled positions (a shared prompt prefix)."""
        self.length = 0
        self.reserve(other.length)
        self.keys[:, :, : other.length] = other.keys[:, :, : other.length]
        self.values[:, :, : other.length] = other.values[:, :, : other.length]
        self.length = other.length


@dataclass
class Request:
    sequence: Sequence
    ids: list[int]  # new tokens, appended to the sequence
    all_logits: bool = False  # logits for every new token (to check speculated ones), else for the last only


class LlamaRunner:
    def __init__(self, model, weights: str = "fp32", packed_file: Path | None = None):
        if weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, not {weights!r}.")
        if not supports(model):
            raise ValueError(f"LlamaRunner supports Llama-architecture models, not {type(model).__name__}.")
        config = model.config
        self.layers = list(model.model.layers)
        self.embed = model.model.embed_tokens.weight
        self.norm = model.model.norm
        self.lm_head = model.lm_head
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.dtype = self.embed.dtype
        self.scale = self.head_dim**-0.5
        theta = float((getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (theta**exponent)
        self.intermediate = config.intermediate_size
        packed = packed_weights(model, packed_file) if weights == "int4" else None
        self.small, self.small_head = packed if packed else (None, None)
        self.weights = "int4" if self.small else "fp32"

    def new_sequence(self, capacity: int = 1024) -> Sequence:
        return Sequence(len(self.layers), self.kv_heads, self.head_dim, capacity, self.dtype)

    def _rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # as transformers' LlamaRotaryEmbedding: frequencies in fp32, the halves repeated
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dtype)[:, None, :], emb.sin().to(self.dtype)[:, None, :]

    @staticmethod
    def _rms(norm, x: torch.Tensor) -> torch.Tensor:
        hidden = x.to(torch.float32)
        hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
        return norm.weight * hidden.to(x.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, requests, spans) -> torch.Tensor:
        """Write each request's new keys and values into its cache, then attend over its whole cache."""
        out = torch.empty_like(q)
        for request, (start, end) in zip(requests, spans, strict=True):
            seq, n, past = request.sequence, end - start, request.sequence.length
            seq.keys[layer, :, past : past + n] = k[start:end].transpose(0, 1)
            seq.values[layer, :, past : past + n] = v[start:end].transpose(0, 1)
            keys, values = seq.keys[layer, :, : past + n], seq.values[layer, :, : past + n]
            if n == 1:  # one new token: two small matmuls per group of heads beat the general kernel's overhead
                grouped = q[start].view(self.kv_heads, self.heads // self.kv_heads, self.head_dim)
                weights = torch.softmax(torch.matmul(grouped, keys.transpose(1, 2)) * self.scale, dim=-1)
                out[start] = torch.matmul(weights, values).view(self.heads, self.head_dim)
                continue
            mask = None
            if n > 1:  # new token i sees the past and new tokens up to itself
                mask = torch.ones(n, past + n, dtype=torch.bool).tril(diagonal=past)
            attended = F.scaled_dot_product_attention(
                q[start:end].transpose(0, 1), keys, values, attn_mask=mask, enable_gqa=self.kv_heads != self.heads
            )
            out[start:end] = attended.transpose(0, 1)
        return out

    @on_torch_thread
    def forward(self, requests: list[Request]) -> list[torch.Tensor]:
        """Append each request's tokens to its sequence; returns, per request, the logits of its last token
        ([vocab]) or of all its tokens ([n, vocab]) when it asked for all."""
        if not requests or any(not r.ids for r in requests):
            raise ValueError("Every request needs at least one token.")
        if len({id(r.sequence) for r in requests}) != len(requests):
            raise ValueError("A sequence can be in one request of a call only.")
        with torch.inference_mode():
            return self._forward(requests)

    def _forward(self, requests: list[Request]) -> list[torch.Tensor]:
        spans, offset, positions = [], 0, []
        for r in requests:
            r.sequence.reserve(len(r.ids))
            spans.append((offset, offset + len(r.ids)))
            positions.append(torch.arange(r.sequence.length, r.sequence.length + len(r.ids)))
            offset += len(r.ids)
        ids = torch.tensor([t for r in requests for t in r.ids])
        cos, sin = self._rotary(torch.cat(positions))
        hidden = F.embedding(ids, self.embed)
        rows = len(ids)
        route = self._route(requests, spans)
        q_end, k_end = self.heads * self.head_dim, (self.heads + self.kv_heads) * self.head_dim
        for i, layer in enumerate(self.layers):
            qkv_dense, out_dense, gate_up_dense, down_dense = _groups(layer)
            small = self.small[i] if self.small else NO_SMALL_LAYER
            x = self._rms(layer.input_layernorm, hidden)
            qkv = self._project(route, x, qkv_dense, small.qkv)
            q = qkv[:, :q_end].reshape(rows, self.heads, self.head_dim)
            k = qkv[:, q_end:k_end].reshape(rows, self.kv_heads, self.head_dim)
            v = qkv[:, k_end:].reshape(rows, self.kv_heads, self.head_dim)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            attended = self._attend(i, q, k, v=v, requests=requests, spans=spans).reshape(rows, -1)
            hidden = hidden + self._project(route, attended, out_dense, small.out)
            x = self._rms(layer.post_attention_layernorm, hidden)
            gate_up = self._project(route, x, gate_up_dense, small.gate_up)
            gated = F.silu(gate_up[:, : self.intermediate]) * gate_up[:, self.intermediate :]
            hidden = hidden + self._project(route, gated, down_dense, small.down)
        for r in requests:
            r.sequence.length += len(r.ids)
        # subtle: the vocabulary projection is a fifth of the weights; only the rows asked for go through it
        keep = [
            torch.arange(s, e) if r.all_logits else torch.tensor([e - 1])
            for r, (s, e) in zip(requests, spans, strict=True)
        ]
        chosen = torch.cat(keep)
        head_route = route[chosen] if isinstance(route, torch.Tensor) else route
        normed = self._rms(self.norm, hidden[chosen])
        if head_route is None:  # the module itself, so that hooks on it apply as in transformers' forward
            logits = self.lm_head(normed)
        else:
            logits = self._project(head_route, normed, (self.lm_head,), self.small_head)
        out, at = [], 0
        for r, rows_kept in zip(requests, keep, strict=True):
            part = logits[at : at + len(rows_kept)]
            out.append(part if r.all_logits else part[0])
            at += len(rows_kept)
        return out

    def _route(self, requests: list[Request], spans) -> torch.Tensor | bool | None:
        """Which rows go through the small weights: those of requests of at most DECODE_ROWS new tokens. None when
        every row stays in fp32 (no small weights, or only prefills), True when every row goes small, else a mask
        with both (each request gives the vocabulary projection a row, so its part of the mask has both too)."""
        if self.small is None:
            return None
        small = [len(r.ids) <= DECODE_ROWS for r in requests]
        if all(small) or not any(small):
            return all(small) or None
        mask = torch.zeros(spans[-1][1], dtype=torch.bool)
        for is_small, (start, end) in zip(small, spans, strict=True):
            mask[start:end] = is_small
        return mask

    @staticmethod
    def _project(route: torch.Tensor | bool | None, x: torch.Tensor, dense, small) -> torch.Tensor:
        """x through the linear layers `dense` (their outputs side by side) in fp32, or, for the rows the route
        marks, through their packed copy `small`."""
        if route is None:
            outputs = [F.linear(x, layer.weight, layer.bias) for layer in dense]
            return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=-1)
        if route is True:
            return small(x)
        out = torch.empty(x.shape[0], sum(layer.weight.shape[0] for layer in dense), dtype=x.dtype)
        out[route] = small(x[route])
        out[~route] = LlamaRunner._project(None, x[~route], dense, small)
        return out


class SmallLayer(NamedTuple):
    qkv: Callable[[torch.Tensor], torch.Tensor]  # q, k and v projections side by side
    out: Callable[[torch.Tensor], torch.Tensor]
    gate_up: Callable[[torch.Tensor], torch.Tensor]
    down: Callable[[torch.Tensor], torch.Tensor]


class _WithBias:
    def __init__(self, linear: Int4Linear, bias: torch.Tensor | None):
        self.linear, self.bias = linear, bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y if self.bias is None else y + self.bias

    def state(self) -> dict[str, torch.Tensor]:
        return self.linear.state() | ({} if self.bias is None else {"bias": self.bias})

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> _WithBias:
        return cls(Int4Linear.from_state(state), state.get("bias"))


def _packed(*layers) -> _WithBias:
    """The layers' weights side by side in one Int4Linear (one kernel call instead of several), their biases too."""
    weight = torch.cat([layer.weight.detach() for layer in layers])
    if all(layer.bias is None for layer in layers):
        return _WithBias(Int4Linear(weight), None)
    biases = [torch.zeros(layer.weight.shape[0]) if layer.bias is None else layer.bias.detach() for layer in layers]
    return _WithBias(Int4Linear(weight), torch.cat(biases))


NO_SMALL_LAYER = SmallLayer(None, None, None, None)  # fp32 only: no packed copy of a layer


def _groups(layer) -> tuple[tuple, ...]:
    attn, mlp = layer.self_attn, layer.mlp
    return (attn.q_proj, attn.k_proj, attn.v_proj), (attn.o_proj,), (mlp.gate_proj, mlp.up_proj), (mlp.down_proj,)


Packed = tuple[list[SmallLayer], Int8Linear]


def packed_weights(model, packed_file: Path | None = None) -> Packed | None:
    """The model's layers packed for decode and its vocabulary projection in int8 (weights.py), or None when this
    torch or these shapes cannot be. Packing takes a few seconds: the result is kept on the model (every runner of
    it shares one copy) and, given packed_file, on disk (a file per torch version: the packed layout is torch's)."""
    memo = getattr(model, "_raqa_packed", None)
    if memo is not None:
        return memo
    if not int4_available() or model.lm_head.weight.dtype != torch.float32:
        return None
    groups = [_groups(layer) for layer in model.model.layers]
    shapes = [(sum(m.weight.shape[0] for m in group), group[0].weight.shape[1]) for g in groups for group in g]
    if not all(int4_fits(*shape) for shape in shapes):
        return None
    packed = _read_packed(packed_file, len(groups))
    if packed is None:
        packed = [SmallLayer(*(_packed(*group) for group in g)) for g in groups], Int8Linear(model.lm_head.weight)
        if packed_file is not None:
            _write_packed(packed_file, packed)
    model._raqa_packed = packed
    return packed


def _read_packed(path: Path | None, layers: int) -> Packed | None:
    if path is None or not path.is_file():
        return None
    try:
        state = torch.load(path, weights_only=True)
        small = [SmallLayer(*(_WithBias.from_state(part) for part in layer)) for layer in state["layers"]]
        head = Int8Linear.from_state(state["head"])
    except Exception:  # noqa: BLE001 - an unreadable cache is packed again and rewritten
        return None
    return (small, head) if len(small) == layers else None


def _write_packed(path: Path, packed: Packed) -> None:
    small, head = packed
    state = {"layers": [[part.state() for part in layer] for layer in small], "head": head.state()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(path)
    except OSError:
        pass  # the packed weights work; only the next start packs them again
