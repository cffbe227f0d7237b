# This file is generated from book/15_writing_poems.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""A decoder-only Transformer, GPT-style (chapter 15), built from the book's parts:
one causal stack of self-attention and feed-forward layers that predicts every next
token, with GPT-2's choices as options, and ``gpt_from_hf`` that copies a Hugging
Face GPT-2 into it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.feed_forward import PositionwiseFeedForward
from transformer_book.multihead import MultiHeadAttention
from transformer_book.normalization import LayerNorm, SublayerConnection
from transformer_book.positional import Embeddings, sinusoidal_table
from transformer_book.validation import check_token_ids

ACTIVATIONS = {
    "relu": torch.relu,  # the 2017 paper
    "gelu": F.gelu,  # exact: x * Phi(x)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
}


def check_positive_int(name: str, value) -> None:
    """Refuse anything but a positive int (a bool is not one), naming the value."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int; got {name}={value!r}")


@dataclass(frozen=True)
class GPTConfig:
    """The size of a decoder-only model and the choices GPT-1 and GPT-2 made."""

    vocab_size: int
    max_len: int = 64
    d_model: int = 128
    heads: int = 4
    layers: int = 4
    d_ff: int | None = None  # None: 4 * d_model
    dropout: float = 0.0
    norm_first: bool = True  # pre-norm with a final norm (2017: post-norm)
    activation: str = "gelu_tanh"  # 2017: "relu" (GELU: GPT-1)
    learned_positions: bool = True  # 2017: the sinusoid table (learned: GPT-1)
    tie_embeddings: bool = True  # output = token embedding, transposed (as in 2017)
    eps: float = 1e-5

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "heads", "layers"):
            check_positive_int(name, getattr(self, name))
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}; "
                f"got {self.activation!r}"
            )


class ActivationFeedForward(PositionwiseFeedForward):
    """Chapter 5's feed-forward network with another activation than ReLU."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu"):
        super().__init__(d_model, d_ff)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = ACTIVATIONS[self.activation](self.expand(x))  # (..., d_ff)
        return self.contract(hidden)  # (..., d_model)


class GPTLayer(nn.Module):
    """A decoder-only layer: masked self-attention, then the feed-forward network.

    Chapter 7's decoder layer without cross-attention: masked self-attention, then
    the feed-forward network, each inside a residual sublayer connection."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        d_ff = config.d_ff or 4 * config.d_model
        self.self_attn = MultiHeadAttention(
            config.d_model, config.heads, config.dropout
        )
        self.feed_forward = ActivationFeedForward(
            config.d_model, d_ff, config.activation
        )
        self.sublayers = nn.ModuleList(
            SublayerConnection(
                config.d_model, config.dropout, config.norm_first, config.eps
            )
            for _ in range(2)
        )
        self.attention_weights = None

    def forward(self, x, mask, need_weights=False, cache=None):
        def self_attend(normed: torch.Tensor) -> torch.Tensor:
            output, self.attention_weights = self.self_attn(
                normed, normed, normed, mask, need_weights, cache
            )
            return output  # (batch, seq, d_model)

        x = self.sublayers[0](x, self_attend)
        return self.sublayers[1](x, self.feed_forward)  # (batch, seq, d_model)


def causal_mask(queries: int, offset: int = 0, device=None) -> torch.Tensor:
    """Build the causal mask of ``queries`` new positions after ``offset`` old ones.

    (1, queries, offset + queries): query i (at position offset + i) may attend to
    positions 0 .. offset + i. With offset 0, chapter 6's subsequent_mask."""
    keys = offset + queries
    return torch.ones(1, queries, keys, dtype=torch.bool, device=device).tril(offset)


class GPT(nn.Module):
    """Token ids (batch, seq) -> next-token logits (batch, seq, vocab).

    ``caches`` (from ``new_caches``) and ``offset`` let it decode one token at a time,
    reusing the keys and values of earlier positions (chapter 10).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tokens = Embeddings(config.vocab_size, config.d_model)
        if config.learned_positions:
            self.positions = nn.Embedding(config.max_len, config.d_model)
        else:
            table = sinusoidal_table(config.max_len, config.d_model)
            self.register_buffer("position_table", table, persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(GPTLayer(config) for _ in range(config.layers))
        # Pre-norm layers leave their sum unnormalized: one LayerNorm at the end.
        self.final_norm = (
            LayerNorm(config.d_model, config.eps) if config.norm_first else None
        )
        if not config.tie_embeddings:
            self.output = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise the weights as GPT-2 does.

        GPT-2's initialisation: normal(0, 0.02) weights, zero biases, and the
        projections that add into the residual stream scaled by 1/sqrt(2 * layers)."""
        for name, parameter in self.named_parameters():
            if name.endswith(("bias", "beta")):
                nn.init.zeros_(parameter)
            elif name.endswith("gamma"):
                nn.init.ones_(parameter)
            else:
                std = 0.02
                if name.endswith(("output_proj.weight", "contract.weight")):
                    std /= math.sqrt(2 * self.config.layers)
                nn.init.normal_(parameter, 0.0, std)

    def output_weight(self) -> torch.Tensor:
        if self.config.tie_embeddings:
            return self.tokens.lookup.weight  # (vocab, d_model)
        return self.output.weight

    def new_caches(self) -> list[dict]:
        return [{} for _ in self.layers]

    def forward(self, tokens, caches=None, offset=0, need_weights=False):
        check_token_ids("tokens", tokens, self.config.vocab_size)
        if tokens.dim() != 2:
            raise ValueError(
                f"tokens must have shape (batch, seq); got {tuple(tokens.shape)}"
            )
        seq = tokens.size(1)
        if offset < 0 or offset + seq > self.config.max_len:
            raise ValueError(
                f"positions {offset}..{offset + seq - 1} do not fit "
                f"max_len={self.config.max_len}"
            )
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(
                f"need one cache per layer: {len(self.layers)} layers, "
                f"got {len(caches)} caches"
            )
        # GPT-2 does not scale its embeddings by sqrt(d_model): the lookup alone.
        x = self.tokens.lookup(tokens)  # (batch, seq, d_model)
        if self.config.learned_positions:
            where = torch.arange(offset, offset + seq, device=tokens.device)
            x = x + self.positions(where)
        else:
            x = x + self.position_table[offset : offset + seq].to(x.dtype)
        x = self.dropout(x)
        mask = causal_mask(seq, offset, tokens.device)
        for index, layer in enumerate(self.layers):
            cache = caches[index] if caches is not None else None
            x = layer(x, mask, need_weights, cache)  # (batch, seq, d_model)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x @ self.output_weight().T  # (batch, seq, vocab)


def causal_lm_loss(logits: torch.Tensor, tokens: torch.Tensor, pad_id: int | None = 0):
    """Compute the mean cross-entropy of predicting every next token.

    Mean cross-entropy of every next token: the logits at position t against the
    token at t + 1 (the shift), padding targets left out."""
    if logits.shape[:2] != tokens.shape:
        raise ValueError(
            f"logits (batch, seq, vocab) {tuple(logits.shape)} and tokens (batch, seq) "
            f"{tuple(tokens.shape)} must agree on batch and seq"
        )
    predictions = logits[:, :-1].reshape(-1, logits.size(-1))
    targets = tokens[:, 1:].reshape(-1)
    ignore = -100 if pad_id is None else pad_id
    return F.cross_entropy(predictions, targets, ignore_index=ignore)


HF_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}


def hf_config(theirs, class_name: str, body: str, needed):
    """Return the configuration of ``theirs``, a transformers ``class_name``.

    Anything else is refused, and so is a configuration we do not implement:
    ``needed(config)`` gives {setting: (its value, the value we support)}.
    """
    if type(theirs).__name__ != class_name or not hasattr(theirs, body):
        raise TypeError(
            f"expected a transformers {class_name}; got "
            f"{type(theirs).__module__}.{type(theirs).__name__}"
        )
    config = theirs.config
    for name, (value, need) in needed(config).items():
        if value != need:
            raise ValueError(
                f"{type(config).__name__}.{name}={value!r} is not supported "
                f"(need {need!r})"
            )
    return config


def _config_from_hf(theirs) -> GPTConfig:
    c = hf_config(theirs, "GPT2LMHeadModel", "transformer", lambda c: {
        "scale_attn_weights": (c.scale_attn_weights, True),
        "scale_attn_by_inverse_layer_idx": (c.scale_attn_by_inverse_layer_idx, False),
        "add_cross_attention": (getattr(c, "add_cross_attention", False), False),
    })
    if c.activation_function not in HF_ACTIVATIONS:
        raise ValueError(
            f"GPT2Config.activation_function={c.activation_function!r} is not one of "
            f"{sorted(HF_ACTIVATIONS)}"
        )
    return GPTConfig(
        vocab_size=c.vocab_size,
        max_len=c.n_positions,
        d_model=c.n_embd,
        heads=c.n_head,
        layers=c.n_layer,
        d_ff=c.n_inner or 4 * c.n_embd,
        dropout=0.0,
        norm_first=True,
        activation=HF_ACTIVATIONS[c.activation_function],
        learned_positions=True,
        tie_embeddings=bool(c.tie_word_embeddings),
        eps=c.layer_norm_epsilon,
    )


def hf_parameter_pairs(
    ours: GPT, theirs
) -> list[tuple[str, torch.Tensor, object, object]]:
    """Pair each of our GPT's parameters with its Hugging Face GPT-2 counterpart.

    (our name, our parameter, their parameter, convert) for every weight, where
    ``convert`` turns their tensor (the weight or its gradient) into our layout.

    GPT-2 stores its linear maps as Conv1D, x @ W + b with W (in, out): ours are
    nn.Linear, x @ W.T + b, so the weight is transposed; its query, key and value
    projections are one matrix, cut in three.
    """
    d = ours.config.d_model
    h = theirs.transformer
    def same(t):
        return t

    def transposed(t):
        return t.T


    def part(i):
        return lambda t: (
            t[:, i * d : (i + 1) * d].T if t.dim() == 2 else t[i * d : (i + 1) * d]
        )

    pairs = [
        ("tokens.lookup.weight", ours.tokens.lookup.weight, h.wte.weight, same),
        ("positions.weight", ours.positions.weight, h.wpe.weight, same),
    ]
    for index, (mine, block) in enumerate(zip(ours.layers, h.h)):
        p = f"layers.{index}."
        attention, ffn = mine.self_attn, mine.feed_forward
        for i, proj in enumerate(("query_proj", "key_proj", "value_proj")):
            for kind, theirs_t in (
                ("weight", block.attn.c_attn.weight),
                ("bias", block.attn.c_attn.bias),
            ):
                name = f"{p}self_attn.{proj}.{kind}"
                pairs.append(
                    (name, getattr(getattr(attention, proj), kind), theirs_t, part(i))
                )
        for mine_linear, their_conv, name in (
            (attention.output_proj, block.attn.c_proj, "self_attn.output_proj"),
            (ffn.expand, block.mlp.c_fc, "feed_forward.expand"),
            (ffn.contract, block.mlp.c_proj, "feed_forward.contract"),
        ):
            pairs.append(
                (f"{p}{name}.weight", mine_linear.weight, their_conv.weight, transposed)
            )
            pairs.append((f"{p}{name}.bias", mine_linear.bias, their_conv.bias, same))
        for i, norm in enumerate((block.ln_1, block.ln_2)):
            pairs.append(
                (
                    f"{p}sublayers.{i}.norm.gamma",
                    mine.sublayers[i].norm.gamma,
                    norm.weight,
                    same,
                )
            )
            pairs.append(
                (
                    f"{p}sublayers.{i}.norm.beta",
                    mine.sublayers[i].norm.beta,
                    norm.bias,
                    same,
                )
            )
    pairs.append(("final_norm.gamma", ours.final_norm.gamma, h.ln_f.weight, same))
    pairs.append(("final_norm.beta", ours.final_norm.beta, h.ln_f.bias, same))
    if not ours.config.tie_embeddings:
        pairs.append(("output.weight", ours.output.weight, theirs.lm_head.weight, same))
    return pairs


@torch.no_grad()
def gpt_from_hf(theirs) -> GPT:
    """Build our GPT holding a copy of a Hugging Face GPT-2 model's weights.

    Our GPT with GPT-2's configuration, holding a copy of a Hugging Face
    ``GPT2LMHeadModel``'s weights, in their dtype and on their device."""
    config = _config_from_hf(theirs)
    reference = next(theirs.parameters())
    ours = GPT(config).to(device=reference.device, dtype=reference.dtype)
    pairs = hf_parameter_pairs(ours, theirs)
    for name, mine, their, convert in pairs:
        mine.copy_(convert(their.detach()))
    copied = {id(mine) for _, mine, _, _ in pairs}
    missed = [name for name, p in ours.named_parameters() if id(p) not in copied]
    if missed:
        raise RuntimeError(f"no GPT-2 weight copied into {missed}")
    return ours.train(theirs.training)
