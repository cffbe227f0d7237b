# This file is generated from book/16_modern_decoder.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Today's decoder-only block (chapter 16): RMSNorm, rotary position embeddings,
the SwiGLU feed-forward network and grouped-query attention, assembled as Llama
does (pre-norm, no biases, an untied output layer), with ``llama_from_hf`` that
copies a Hugging Face ``LlamaForCausalLM`` into it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib.resources import files

import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.gpt import (
    ActivationFeedForward,
    causal_mask,
    check_positive_int,
    hf_config,
)
from transformer_book.normalization import LayerNorm
from transformer_book.positional import sinusoidal_table
from transformer_book.validation import check_tensor, check_token_ids


def _positive_number(name: str, value) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number; got {name}={value!r}")


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: LayerNorm without the mean and the bias.

    x / sqrt(mean(x^2) + eps) * gamma over the last axis: LayerNorm without the
    mean and the bias. Computed in float32, as Llama's reference code does: a
    half-precision input is upcast, a float64 one rounded, and the result is cast
    back to the input's dtype."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        check_positive_int("d_model", d_model)
        _positive_number("eps", eps)
        self.d_model, self.eps = d_model, eps
        self.gamma = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, floating=True)
        if x.size(-1) != self.d_model:
            raise ValueError(
                f"x must end with d_model={self.d_model} features; "
                f"got shape {tuple(x.shape)}"
            )
        x32 = x.float()  # Llama's reference code normalises in float32
        mean_square = x32.pow(2).mean(-1, keepdim=True)  # (..., 1)
        normed = x32 * torch.rsqrt(mean_square + self.eps)  # eps inside the root
        return self.gamma * normed.to(x.dtype)  # (..., d_model)


LAYOUTS = ("half", "interleaved")


def rotary_table(
    positions: torch.Tensor, d_k: int, theta: float = 10000.0, dtype=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compute the cos and sin tables of rotary position embeddings.

    cos and sin of the angles m * theta^(-2i/d_k), (seq, d_k) each, for the
    positions m (seq,), in the half-split layout: the d_k/2 angles, twice.

    The angles are computed in float32, as Llama's reference code does (a model
    reads the angles it was trained with), then cast to ``dtype``.
    """
    check_tensor("positions", positions)
    if positions.is_floating_point() or positions.dim() != 1:
        raise ValueError(
            "positions must be a 1-axis integer tensor (seq,); got dtype "
            f"{positions.dtype} and shape {tuple(positions.shape)}"
        )
    check_positive_int("d_k", d_k)
    if d_k % 2:
        raise ValueError(f"d_k must be even (features are rotated in pairs); got {d_k}")
    _positive_number("theta", theta)
    pairs = torch.arange(0, d_k, 2, dtype=torch.float32, device=positions.device)
    frequencies = 1.0 / (theta ** (pairs / d_k))  # (d_k / 2,)
    angles = positions.float()[:, None] * frequencies  # (seq, d_k / 2)
    angles = torch.cat([angles, angles], dim=-1)  # (seq, d_k)
    dtype = dtype or torch.get_default_dtype()
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotate the two halves of the last axis: (x1, x2) -> (-x2, x1).

    (x1, x2) -> (-x2, x1), halves of the last axis: feature i is paired with
    feature i + d_k/2 (Hugging Face Llama's layout)."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half"
) -> torch.Tensor:
    """Rotate each pair of features of x (..., seq, d_k) by its angle.

    ``layout="half"`` pairs feature i with i + d_k/2 (Hugging Face's Llama);
    ``"interleaved"`` pairs 2i with 2i + 1 (the RoPE paper, Meta's Llama code).
    ``cos`` and ``sin`` come from ``rotary_table`` (seq, d_k), in either case.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
    check_tensor("x", x, floating=True)
    if cos.shape != sin.shape or cos.shape != x.shape[-2:]:
        raise ValueError(
            f"cos and sin must have shape (seq, d_k) = {tuple(x.shape[-2:])} like the "
            f"last two axes of x; got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if layout == "half":
        return x * cos + rotate_half(x) * sin
    half = x.size(-1) // 2
    # pair i's angle sits at i (and i + d_k/2) in the table: spread it to 2i, 2i+1
    cos = cos[..., :half].repeat_interleave(2, dim=-1)
    sin = sin[..., :half].repeat_interleave(2, dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    turned = torch.stack([-odd, even], dim=-1).flatten(-2)  # (-x1, x0, -x3, x2, ...)
    return x * cos + turned * sin


class SwiGLU(nn.Module):
    """Llama's feed-forward network: W_down (silu(W_gate x) * W_up x).

    W_down (silu(W_gate x) * W_up x): the feed-forward network of Llama, three
    matrices and no biases. (..., d_model) -> (..., d_model)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("d_ff", d_ff)
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.silu(self.gate(x)) * self.up(x)  # (..., d_ff)
        return self.down(hidden)  # (..., d_model)


def swiglu_hidden(d_model: int, multiple_of: int = 256) -> int:
    """Compute Llama's hidden size of the SwiGLU feed-forward network.

    Llama's hidden size: 8/3 * d_model (the parameters of a 4 * d_model ReLU
    layer, over three matrices instead of two), rounded up to ``multiple_of``."""
    check_positive_int("d_model", d_model)
    check_positive_int("multiple_of", multiple_of)
    hidden = int(2 * (4 * d_model) / 3)
    return multiple_of * -(-hidden // multiple_of)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with key/value heads shared by groups of query heads.

    Causal self-attention with ``heads`` query heads sharing ``kv_heads`` key/value
    heads (``heads // kv_heads`` queries per group), rotary positions, no biases.

    x (batch, seq, d_model) -> (batch, seq, d_model). kv_heads = heads is multi-head
    attention; kv_heads = 1 is multi-query attention. ``cache`` is chapter 10's
    key/value cache (a dict, ``{}`` at first): it stores the rotated keys and the
    values of the kv_heads heads, (batch, kv_heads, positions, d_k). ``cos`` and
    ``sin`` None: no rotation (the model gives positions another way); a 4-axis
    ``mask`` (1, heads, queries, keys) is added per head (ALiBi's, later on).
    """

    def __init__(self, d_model: int, heads: int, kv_heads: int | None = None,
                 layout: str = "half"):
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        for name, value in (("d_model", d_model), ("heads", heads),
                            ("kv_heads", kv_heads)):
            check_positive_int(name, value)
        if d_model % heads:
            raise ValueError(
                f"d_model must split evenly into heads; got d_model={d_model}, "
                f"heads={heads}"
            )
        if heads % kv_heads:
            raise ValueError(
                "heads must be a multiple of kv_heads (each key/value head serves "
                f"a group of query heads); got heads={heads}, kv_heads={kv_heads}"
            )
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
        self.heads, self.kv_heads, self.layout = heads, kv_heads, layout
        self.d_k = d_model // heads
        self.query_proj = nn.Linear(d_model, heads * self.d_k, bias=False)
        self.key_proj = nn.Linear(d_model, kv_heads * self.d_k, bias=False)
        self.value_proj = nn.Linear(d_model, kv_heads * self.d_k, bias=False)
        self.output_proj = nn.Linear(heads * self.d_k, d_model, bias=False)

    def split(self, projected: torch.Tensor, heads: int) -> torch.Tensor:
        """(batch, seq, heads * d_k) -> (batch, heads, seq, d_k)."""
        batch, seq, _ = projected.shape
        return projected.view(batch, seq, heads, self.d_k).transpose(1, 2)

    def forward(self, x, cos, sin, mask=None, cache=None):
        queries = self.split(self.query_proj(x), self.heads)  # (b, heads, seq, d_k)
        keys = self.split(self.key_proj(x), self.kv_heads)  # (b, kv_heads, seq, d_k)
        values = self.split(self.value_proj(x), self.kv_heads)
        if cos is not None:  # rotary positions (None: the model adds its own)
            queries = apply_rotary(queries, cos, sin, self.layout)
            keys = apply_rotary(keys, cos, sin, self.layout)
        if cache is not None:  # chapter 10: earlier positions first, then the new
            if "key" in cache:
                keys = torch.cat([cache["key"], keys], dim=2)
                values = torch.cat([cache["value"], values], dim=2)
            cache["key"], cache["value"] = keys, values
        group = self.heads // self.kv_heads  # query heads h * group .. share kv head h
        keys = keys.repeat_interleave(group, dim=1)  # (b, heads, positions, d_k)
        values = values.repeat_interleave(group, dim=1)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (batch, 1, queries, keys): every head
        attended = F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask
        )  # (batch, heads, seq, d_k)
        batch, _, seq, _ = attended.shape
        merged = attended.transpose(1, 2).reshape(batch, seq, self.heads * self.d_k)
        return self.output_proj(merged)  # (batch, seq, d_model)


POSITIONS = ("rotary", "alibi", "learned", "sinusoidal", "none")
NORMS = ("rms", "layer")
FEED_FORWARDS = ("swiglu", "gelu")


@dataclass(frozen=True)
class ModernConfig:
    """The size of a Llama-style decoder and its choices."""

    vocab_size: int
    d_model: int = 128
    heads: int = 4
    kv_heads: int | None = None  # None: heads (multi-head attention)
    layers: int = 4
    d_ff: int | None = None  # None: swiglu_hidden(d_model, multiple_of)
    multiple_of: int = 16
    theta: float = 10000.0  # the rotary base
    layout: str = "half"  # the rotary pairs: "half" (HF Llama) or "interleaved"
    eps: float = 1e-6
    tie_embeddings: bool = False  # Llama: an output layer of its own
    # Each of Llama's choices undone, to measure what it buys (off by default):
    positions: str = "rotary"  # or "alibi", "learned", "sinusoidal", "none"
    norm: str = "rms"  # or "layer": chapter 4's LayerNorm
    feed_forward: str = "swiglu"  # or "gelu": chapter 15's GELU layer, 4 * d_model
    max_len: int = 64  # the learned position table's length

    def __post_init__(self):
        names = ("vocab_size", "d_model", "heads", "layers", "multiple_of", "max_len")
        for name in names:
            check_positive_int(name, getattr(self, name))
        kv_heads = self.heads if self.kv_heads is None else self.kv_heads
        check_positive_int("kv_heads", kv_heads)
        if self.d_ff is not None:
            check_positive_int("d_ff", self.d_ff)
        _positive_number("theta", self.theta)
        _positive_number("eps", self.eps)
        for name, allowed in (("positions", POSITIONS), ("norm", NORMS),
                              ("feed_forward", FEED_FORWARDS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}; "
                                 f"got {name}={getattr(self, name)!r}")
        rotary = self.positions == "rotary"
        if self.d_model % self.heads or (rotary and (self.d_model // self.heads) % 2):
            raise ValueError(
                "d_model must split into heads of an even size d_k (rotary pairs); "
                f"got d_model={self.d_model}, heads={self.heads}"
            )
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model; "
                             f"got d_model={self.d_model}")
        if self.heads % kv_heads:
            raise ValueError(
                f"heads must be a multiple of kv_heads; got heads={self.heads}, "
                f"kv_heads={kv_heads}"
            )
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}; got {self.layout!r}")

    @property
    def hidden(self) -> int:
        if self.feed_forward == "gelu":
            return self.d_ff or 4 * self.d_model
        return self.d_ff or swiglu_hidden(self.d_model, self.multiple_of)


class ModernLayer(nn.Module):
    """Pre-norm: x + attention(RMSNorm(x)), then h + SwiGLU(RMSNorm(h))."""

    def __init__(self, config: ModernConfig):
        super().__init__()
        norm = RMSNorm if config.norm == "rms" else LayerNorm
        self.attention_norm = norm(config.d_model, config.eps)
        self.self_attn = GroupedQueryAttention(
            config.d_model, config.heads, config.kv_heads, config.layout
        )
        self.ffn_norm = norm(config.d_model, config.eps)
        if config.feed_forward == "swiglu":
            self.feed_forward = SwiGLU(config.d_model, config.hidden)
        else:
            self.feed_forward = ActivationFeedForward(
                config.d_model, config.hidden, "gelu_tanh")

    def forward(self, x, cos, sin, mask, cache=None):
        x = x + self.self_attn(self.attention_norm(x), cos, sin, mask, cache)
        return x + self.feed_forward(self.ffn_norm(x))  # (batch, seq, d_model)


class ModernDecoder(nn.Module):
    """Token ids (batch, seq) -> next-token logits (batch, seq, vocab), Llama-style.

    No position table: rotary positions are applied to the queries and keys of each
    layer. ``caches`` (from ``new_caches``) and ``offset`` decode one token at a time.
    ``config.positions`` chooses another scheme: ALiBi's bias on the scores, a
    learned table of ``max_len`` positions, the sinusoids, or none (causal mask only).
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab_size, config.d_model)
        if config.positions == "learned":
            self.positions = nn.Embedding(config.max_len, config.d_model)
        self.layers = nn.ModuleList(ModernLayer(config) for _ in range(config.layers))
        norm = RMSNorm if config.norm == "rms" else LayerNorm
        self.final_norm = norm(config.d_model, config.eps)
        if not config.tie_embeddings:
            self.output = nn.Linear(config.d_model, config.vocab_size, bias=False)
        for name, parameter in self.named_parameters():
            if name.endswith(("beta", "bias")):  # LayerNorm's shift, the GELU layer's
                nn.init.zeros_(parameter)
            elif not name.endswith("gamma"):
                nn.init.normal_(parameter, 0.0, 0.02)

    def output_weight(self) -> torch.Tensor:
        if self.config.tie_embeddings:
            return self.tokens.weight  # (vocab, d_model)
        return self.output.weight

    def new_caches(self) -> list[dict]:
        return [{} for _ in self.layers]

    def forward(self, tokens, caches=None, offset=0):
        check_token_ids("tokens", tokens, self.config.vocab_size)
        if tokens.dim() != 2:
            raise ValueError(
                f"tokens must have shape (batch, seq); got {tuple(tokens.shape)}"
            )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0; got offset={offset!r}")
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(
                f"need one cache per layer: {len(self.layers)} layers, "
                f"got {len(caches)} caches"
            )
        seq = tokens.size(1)
        x = self.tokens(tokens)  # (batch, seq, d_model): no sqrt(d_model) scaling
        config = self.config
        positions = torch.arange(offset, offset + seq, device=tokens.device)
        mask = causal_mask(seq, offset, tokens.device)  # (1, seq, offset + seq)
        cos = sin = None
        if config.positions == "rotary":
            d_k = config.d_model // config.heads
            cos, sin = rotary_table(positions, d_k, config.theta, x.dtype)
        elif config.positions == "alibi":  # (1, heads, seq, offset + seq)
            mask = alibi_mask(config.heads, seq, offset, tokens.device, x.dtype)
        elif config.positions == "learned":
            if offset + seq > config.max_len:
                raise ValueError(
                    f"positions {offset}..{offset + seq - 1} do not fit the learned "
                    f"table of max_len={config.max_len}"
                )
            x = x + self.positions(positions)
        elif config.positions == "sinusoidal":  # computed in float64 on the CPU
            table = sinusoidal_table(offset + seq, config.d_model)[offset:]
            x = x + table.to(x.dtype).to(x.device)
        for index, layer in enumerate(self.layers):
            cache = caches[index] if caches is not None else None
            x = layer(x, cos, sin, mask, cache)  # (batch, seq, d_model)
        return self.final_norm(x) @ self.output_weight().T  # (batch, seq, vocab)


def _rope(c) -> dict:
    """The rotary settings of a LlamaConfig (newer transformers: rope_parameters)."""
    return getattr(c, "rope_parameters", None) or {
        "rope_type": "default", "rope_theta": getattr(c, "rope_theta", 10000.0)}


def _llama_config(theirs) -> ModernConfig:
    c = hf_config(theirs, "LlamaForCausalLM", "model", lambda c: {
        "attention_bias": (c.attention_bias, False),
        "mlp_bias": (c.mlp_bias, False),
        "hidden_act": (c.hidden_act, "silu"),
        "rope_type": (_rope(c).get("rope_type", "default"), "default"),
        "head_dim": (getattr(c, "head_dim", None) or c.hidden_size
                     // c.num_attention_heads, c.hidden_size // c.num_attention_heads),
    })
    rope = _rope(c)
    return ModernConfig(
        vocab_size=c.vocab_size, d_model=c.hidden_size, heads=c.num_attention_heads,
        kv_heads=c.num_key_value_heads or c.num_attention_heads,
        layers=c.num_hidden_layers, d_ff=c.intermediate_size,
        theta=float(rope["rope_theta"]), layout="half", eps=c.rms_norm_eps,
        tie_embeddings=bool(c.tie_word_embeddings),
    )


def llama_parameter_pairs(ours: ModernDecoder, theirs) -> list[tuple]:
    """Pair each of our ModernDecoder's parameters with its Llama counterpart.

    (our name, our parameter, their parameter) for every weight: the two
    models keep the same matrices in the same layout, under other names."""
    h = theirs.model
    pairs = [("tokens.weight", ours.tokens.weight, h.embed_tokens.weight)]
    for index, (mine, block) in enumerate(zip(ours.layers, h.layers)):
        p = f"layers.{index}."
        a, f = mine.self_attn, mine.feed_forward
        for name, our, their in (
            ("attention_norm.gamma", mine.attention_norm.gamma,
             block.input_layernorm.weight),
            ("self_attn.query_proj.weight", a.query_proj.weight,
             block.self_attn.q_proj.weight),
            ("self_attn.key_proj.weight", a.key_proj.weight,
             block.self_attn.k_proj.weight),
            ("self_attn.value_proj.weight", a.value_proj.weight,
             block.self_attn.v_proj.weight),
            ("self_attn.output_proj.weight", a.output_proj.weight,
             block.self_attn.o_proj.weight),
            ("ffn_norm.gamma", mine.ffn_norm.gamma,
             block.post_attention_layernorm.weight),
            ("feed_forward.gate.weight", f.gate.weight, block.mlp.gate_proj.weight),
            ("feed_forward.up.weight", f.up.weight, block.mlp.up_proj.weight),
            ("feed_forward.down.weight", f.down.weight, block.mlp.down_proj.weight),
        ):
            pairs.append((p + name, our, their))
    pairs.append(("final_norm.gamma", ours.final_norm.gamma, h.norm.weight))
    if not ours.config.tie_embeddings:
        pairs.append(("output.weight", ours.output.weight, theirs.lm_head.weight))
    return pairs


@torch.no_grad()
def llama_from_hf(theirs) -> ModernDecoder:
    """Build our ModernDecoder holding a copy of a Hugging Face Llama's weights.

    Our ModernDecoder with the configuration of a Hugging Face
    ``LlamaForCausalLM``, holding a copy of its weights, in their dtype and on
    their device."""
    config = _llama_config(theirs)
    reference = next(theirs.parameters())
    ours = ModernDecoder(config).to(device=reference.device, dtype=reference.dtype)
    pairs = llama_parameter_pairs(ours, theirs)
    for name, mine, their in pairs:
        if mine.shape != their.shape:
            raise ValueError(f"{name}: ours {tuple(mine.shape)}, "
                             f"theirs {tuple(their.shape)}")
        mine.copy_(their.detach())
    # their embedding's padding row gets no gradient: nor does ours
    ours.tokens.padding_idx = theirs.model.embed_tokens.padding_idx
    copied = {id(mine) for _, mine, _ in pairs}
    missed = [name for name, p in ours.named_parameters() if id(p) not in copied]
    if missed:
        raise RuntimeError(f"no Llama weight copied into {missed}")
    return ours.train(theirs.training)


SWEEPS = ("modern_sweep", "length_sweep")  # weights/NAME.json, by tools/train_NAME.py


def sweep_record(name: str) -> dict:
    """Load what tools/train_modern_sweep.py or tools/train_length_sweep.py recorded.

    Their settings, each arm's configuration and parameter count, every run's
    figures by arm and seed, and the seconds each run took."""
    if name not in SWEEPS:
        raise ValueError(f"name must be one of {SWEEPS}; got name={name!r}")
    path = files("transformer_book") / "weights" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def alibi_slopes(heads: int) -> torch.Tensor:
    """Compute ALiBi's slope of each head, (heads,) float32.

    For 2^k heads, 2^(-8/heads), 2^(-16/heads), ... 2^(-8): a geometric series, one
    slope a head. Otherwise Press et al.'s rule: the slopes of the largest power of
    two below ``heads``, then every other slope of twice that many."""
    check_positive_int("heads", heads)
    power = 2 ** math.floor(math.log2(heads))

    def series(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    slopes = series(power) + series(2 * power)[0::2][: heads - power]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_mask(heads: int, queries: int, offset: int = 0, device=None,
               dtype=None) -> torch.Tensor:
    """Build ALiBi's causal additive mask, (1, heads, queries, offset + queries).

    Query i (at position offset + i) and key j get -slope_h * (offset + i - j)
    added to their score: a penalty growing with the distance, steeper for some
    heads than others; keys after the query get -inf (the causal mask)."""
    check_positive_int("queries", queries)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an int >= 0; got offset={offset!r}")
    slopes = alibi_slopes(heads).to(device)  # (heads,)
    where = torch.arange(offset, offset + queries, device=device)  # (queries,)
    keys = torch.arange(offset + queries, device=device)  # (keys,)
    distance = (where[:, None] - keys[None, :]).float()  # (queries, keys)
    bias = -slopes[:, None, None] * distance  # (heads, queries, keys)
    bias = bias.masked_fill(distance < 0, float("-inf"))
    return bias.unsqueeze(0).to(dtype or torch.get_default_dtype())
