# This file is generated from book/03_multi_head_attention.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Multi-head attention, written in chapter 3, "Multi-head attention".

h scaled dot-product attentions side by side, each on its own learned projection of the
input to d_k = d_model / h features, concatenated and projected back to d_model. Masks
are boolean, True = may attend (chapter 2's convention, the opposite of
torch.nn.MultiheadAttention's).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.attention import scaled_dot_product_attention
from transformer_book.validation import check_dropout, check_tensor


def check_attention_mask(
    mask: torch.Tensor,
    batch: int,
    queries: int,
    keys: int,
    name: str = "mask",
    heads: int | None = None,
) -> None:
    """Raise a ValueError unless ``mask`` fits the attention scores.

    It must be boolean, with 3 axes that broadcast to (batch, queries, keys) or 4 that
    broadcast to (batch, heads, queries, keys). Two axes are refused: a (batch, keys)
    padding mask would broadcast as (queries, keys), silently wrong whenever
    batch == queries.
    """
    check_tensor(name, mask)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"{name} must be boolean (True = may attend); got dtype {mask.dtype} and "
            f"shape {tuple(mask.shape)}. A float mask would be added to the scores, "
            "not block them."
        )
    if mask.dim() not in (3, 4):
        raise ValueError(
            f"{name} must have 3 or 4 axes, (batch, 1, keys), (batch, queries, keys) "
            f"or (batch, heads, queries, keys), here ({batch}, 1, {keys}), "
            f"({batch}, {queries}, {keys}) or "
            f"({batch}, {heads or 'heads'}, {queries}, {keys}); "
            f"got shape {tuple(mask.shape)}. For a (batch, keys) padding mask, as "
            f"nn.MultiheadAttention takes, use {name}.unsqueeze(1)."
        )
    expected = (
        (batch, queries, keys)
        if mask.dim() == 3
        else (batch, heads or mask.size(1), queries, keys)
    )
    try:
        fits = torch.broadcast_shapes(mask.shape, expected) == expected
    except RuntimeError:  # the shapes do not broadcast at all
        fits = False
    if not fits:
        axes = (
            "(batch, queries, keys)"
            if mask.dim() == 3
            else "(batch, heads, queries, keys)"
        )
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to {axes} = "
            f"{expected}; each axis must have that size or 1"
        )


class MultiHeadAttention(nn.Module):
    """h attention heads of size d_k = d_model / h, concatenated and projected.

    Each head attends on its own learned projections. query (batch, queries, d_model),
    key and value (batch, keys, d_model) -> (batch, queries, d_model). ``mask`` is
    boolean, True = may attend, with 3 axes (batch, queries or 1, keys), given a heads
    axis, or 4 (batch, heads, queries, keys); size-1 axes broadcast. Two-axis masks
    are refused.
    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        scale: float | None = None,
    ):
        super().__init__()
        check_dropout(dropout)
        if heads <= 0 or d_model <= 0 or d_model % heads != 0:
            raise ValueError(
                "d_model must split evenly into heads; got "
                f"d_model={d_model}, heads={heads} "
                f"(d_model % heads = {d_model % heads if heads > 0 else 'undefined'})"
            )
        self.d_model = d_model
        self.heads = heads
        self.d_k = d_model // heads
        self.scale = scale  # None: 1/sqrt(d_k), as in the paper
        # W^Q of all heads, stacked
        self.query_proj = nn.Linear(d_model, d_model, bias=bias)
        self.key_proj = nn.Linear(d_model, d_model, bias=bias)  # W^K
        self.value_proj = nn.Linear(d_model, d_model, bias=bias)  # W^V
        self.output_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O
        self.dropout = nn.Dropout(dropout)  # on the attention weights

    def split_heads(self, projected: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, heads, seq, d_k).

        Head i gets features i*d_k to (i+1)*d_k - 1.
        """
        batch, seq, _ = projected.shape
        return projected.view(batch, seq, self.heads, self.d_k).transpose(1, 2)

    def merge_heads(self, per_head: torch.Tensor) -> torch.Tensor:
        """(batch, heads, seq, d_k) -> (batch, seq, d_model): the heads concatenated."""
        batch, _, seq, _ = per_head.shape
        return per_head.transpose(1, 2).reshape(batch, seq, self.d_model)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: dict | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Returns (output, weights).

        The weights, (batch, heads, queries, keys), only if ``need_weights``.
        ``cache``: see ``cached_keys_and_values``.
        """
        self._check_inputs(query, key, value)
        # (batch, heads, queries, d_k), then (batch, heads, keys, d_k) twice
        queries = self.split_heads(self.query_proj(query))
        if cache is not None:  # decoding one token at a time (chapter 10)
            keys, values = self.cached_keys_and_values(key, value, cache)
        else:
            keys = self.split_heads(self.key_proj(key))
            values = self.split_heads(self.value_proj(value))
        return self.attend(queries, keys, values, mask, need_weights)

    def attend(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention over projected, split heads.

        queries (batch, heads, queries, d_k), keys and values (batch, heads, keys, d_k)
        -> (output, weights or None).
        """
        if mask is not None:
            batch, _, query_count, _ = queries.shape
            check_attention_mask(
                mask, batch, query_count, keys.size(2), heads=self.heads
            )
            if mask.dim() == 3:
                # (batch, 1, queries or 1, keys): the same mask for every head
                mask = mask.unsqueeze(1)
        if need_weights:
            attended, weights = scaled_dot_product_attention(
                queries, keys, values, mask, self.dropout, self.scale
            )
        else:
            # The same computation in PyTorch's fused kernel: faster, and it
            # never stores the weights. (batch, heads, queries, d_k)
            attended = F.scaled_dot_product_attention(
                queries,
                keys,
                values,
                attn_mask=mask,
                dropout_p=self.dropout.p if self.training else 0.0,
                scale=self.scale,
            )
            if mask is not None:
                # A query that may attend to nothing gets a zero output, as on the
                # explicit path. PyTorch's CPU kernel already returns zeros there; we do
                # not rely on every backend doing so.
                attended = attended.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
            weights = None
        # (batch, queries, d_model)
        return self.output_proj(self.merge_heads(attended)), weights

    def _check_inputs(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> None:
        """Raise a ValueError naming the shapes.

        Raised if query, key and value cannot be attended together.
        """
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            check_tensor(
                name, tensor, floating=True, dtype=self.query_proj.weight.dtype
            )
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            if tensor.dim() != 3 or tensor.size(-1) != self.d_model:
                raise ValueError(
                    f"{name} must have shape (batch, seq, d_model={self.d_model}); "
                    f"got {tuple(tensor.shape)} (query {tuple(query.shape)}, "
                    f"key {tuple(key.shape)}, value {tuple(value.shape)})"
                )
        if not query.size(0) == key.size(0) == value.size(0):
            raise ValueError(
                "query, key and value must have the same batch size; got "
                f"{query.size(0)}, {key.size(0)} and {value.size(0)}"
            )
        if key.size(1) != value.size(1):
            raise ValueError(
                f"every key needs a value; got {key.size(1)} keys and "
                f"{value.size(1)} values"
            )

    def cached_keys_and_values(
        self, key: torch.Tensor, value: torch.Tensor, cache: dict
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values to attend over, through a key/value cache (chapter 10).

        A self-attention cache (made as ``{}``) gets each call's projected keys and
        values appended after the earlier calls'; a cross-attention cache (made as
        ``{"static": True}``) is filled by its first call, from the memory, and reused.
        Returns keys and values (batch, heads, keys, d_k).
        """
        if cache.get("static") and "key" in cache:
            return cache["key"], cache["value"]  # the memory's, projected once
        keys = self.split_heads(self.key_proj(key))  # (batch, heads, new keys, d_k)
        values = self.split_heads(self.value_proj(value))
        if "key" in cache:  # the earlier positions' keys and values come first
            # (batch, heads, keys, d_k)
            keys = torch.cat([cache["key"], keys], dim=2)
            values = torch.cat([cache["value"], values], dim=2)
        cache["key"], cache["value"] = keys, values
        return keys, values


@torch.no_grad()
def load_torch_attention(
    ours: MultiHeadAttention, theirs: nn.MultiheadAttention
) -> MultiHeadAttention:
    """Copy an nn.MultiheadAttention's weights into ours: the same function.

    PyTorch stacks W^Q, W^K and W^V into one (3 d_model, d_model) ``in_proj_weight``;
    we keep three.
    """
    if theirs.embed_dim != ours.d_model or theirs.num_heads != ours.heads:
        raise ValueError(
            f"sizes differ: ours d_model={ours.d_model}, heads={ours.heads}; "
            f"theirs embed_dim={theirs.embed_dim}, num_heads={theirs.num_heads}"
        )
    if (
        theirs.in_proj_weight is None
        or theirs.bias_k is not None
        or theirs.add_zero_attn
    ):
        raise ValueError(
            "only nn.MultiheadAttention with kdim = vdim = embed_dim, "
            "add_bias_kv=False and add_zero_attn=False can be copied; got "
            f"kdim={theirs.kdim}, vdim={theirs.vdim}, "
            f"add_bias_kv={theirs.bias_k is not None}, "
            f"add_zero_attn={theirs.add_zero_attn}"
        )
    if (theirs.in_proj_bias is None) != (ours.query_proj.bias is None):
        raise ValueError(
            f"bias settings differ: ours bias={ours.query_proj.bias is not None}, "
            f"theirs bias={theirs.in_proj_bias is not None}"
        )
    for projection, weight, bias in zip(
        (ours.query_proj, ours.key_proj, ours.value_proj),
        theirs.in_proj_weight.chunk(3),
        theirs.in_proj_bias.chunk(3)
        if theirs.in_proj_bias is not None
        else (None,) * 3,
    ):
        projection.weight.copy_(weight)
        if bias is not None:
            projection.bias.copy_(bias)
    ours.output_proj.weight.copy_(theirs.out_proj.weight)
    if theirs.out_proj.bias is not None:
        ours.output_proj.bias.copy_(theirs.out_proj.bias)
    return ours
