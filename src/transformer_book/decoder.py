# This file is generated from book/07_cross_attention.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The decoder layer and the decoder stack (chapter 7, "Cross-attention").

A decoder layer has three sublayers: masked self-attention over the target,
cross-attention from the target to the encoder's output (the "memory"), and the
position-wise feed-forward network.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from transformer_book.encoder import (
    check_torch_layer,
    copy_torch_feed_forward_and_norms,
)
from transformer_book.feed_forward import PositionwiseFeedForward
from transformer_book.multihead import (
    MultiHeadAttention,
    check_attention_mask,
    load_torch_attention,
)
from transformer_book.normalization import LayerNorm, SublayerConnection
from transformer_book.validation import check_positive, check_tensor


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, then the FFN.

    x (batch, target, d_model), memory (batch, source, d_model) -> (batch, target,
    d_model). ``target_mask`` broadcasts to (batch, target, target) and ``source_mask``
    to (batch, target, source); both are boolean, True = may attend, and are checked by
    name. With ``need_weights`` the layer keeps its attention weights in
    ``self_attention_weights`` (batch, heads, target, target) and
    ``cross_attention_weights`` (batch, heads, target, source).
    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
    ):
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.sublayers = nn.ModuleList(
            [SublayerConnection(d_model, dropout, norm_first) for _ in range(3)]
        )
        self.self_attention_weights: torch.Tensor | None = None
        self.cross_attention_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: dict | None = None,
    ) -> torch.Tensor:
        """Run one decoder layer: self-attention, cross-attention, feed-forward.

        ``cache`` (chapter 10): {"self": {...}, "cross": {...}}, one key/value
        cache for each attention."""
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None
        # the positions self-attention reads: the cached ones, then x's
        cached = self_cache["key"].size(2) if self_cache and "key" in self_cache else 0
        self._check_inputs(x, memory, source_mask, target_mask, cached + x.size(1))

        def self_attend(normed: torch.Tensor) -> torch.Tensor:
            output, self.self_attention_weights = self.self_attn(
                normed, normed, normed, target_mask, need_weights, self_cache
            )
            return output  # (batch, target, d_model)

        def cross_attend(normed: torch.Tensor) -> torch.Tensor:
            # Queries from the decoder; keys and values from the encoder's output.
            output, self.cross_attention_weights = self.cross_attn(
                normed, memory, memory, source_mask, need_weights, cross_cache
            )
            return output  # (batch, target, d_model)

        x = self.sublayers[0](x, self_attend)  # (batch, target, d_model)
        x = self.sublayers[1](x, cross_attend)  # (batch, target, d_model)
        return self.sublayers[2](x, self.feed_forward)  # (batch, target, d_model)

    def _check_inputs(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        target_keys: int | None = None,
    ) -> None:
        """Raise a ValueError naming the shapes unless x and memory are floating
        (batch, target, d_model) and (batch, source, d_model) tensors, and one naming
        the mask unless each mask fits its attention's scores (chapter 6's rule):
        target_mask (batch, target, target_keys), source_mask (batch, target, source).
        ``target_keys``, the positions self-attention reads, defaults to target."""
        check_tensor("x", x, floating=True)
        check_tensor("memory", memory, floating=True)
        if x.dim() != 3 or memory.dim() != 3 or x.size(0) != memory.size(0):
            raise ValueError(
                "x and memory must have shapes (batch, target, d_model) and "
                "(batch, source, d_model) with the same batch; "
                f"got x {tuple(x.shape)} and memory {tuple(memory.shape)}"
            )
        (batch, target, _), source = x.shape, memory.size(1)
        keys = target if target_keys is None else target_keys
        for name, mask, mask_keys in (
            ("target_mask", target_mask, keys),
            ("source_mask", source_mask, source),
        ):
            if mask is not None:
                check_attention_mask(
                    mask, batch, target, mask_keys, name, self.self_attn.heads
                )


class Decoder(nn.Module):
    """A stack of decoder layers attending to one memory, then a final layer norm.

    A stack of num_layers copies of ``layer`` (independent weights), each attending
    to the same memory, then a final layer norm (``final_norm=False`` leaves it out).
    """

    def __init__(self, layer: DecoderLayer, num_layers: int, final_norm: bool = True):
        super().__init__()
        check_positive(num_layers=num_layers)
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = LayerNorm(layer.d_model) if final_norm else nn.Identity()

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        caches: list[dict] | None = None,
    ) -> torch.Tensor:
        """Run every decoder layer over the target, attending to the memory.

        x (batch, target, d_model), memory (batch, source, d_model)
        -> (batch, target, d_model). ``caches`` (chapter 10): one per layer."""
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(
                f"need one cache per layer: {len(self.layers)} layers, "
                f"got {len(caches)} caches"
            )
        for index, layer in enumerate(self.layers):
            cache = caches[index] if caches is not None else None
            # (batch, target, d_model)
            x = layer(x, memory, source_mask, target_mask, need_weights, cache)
        return self.norm(x)


@torch.no_grad()
def load_torch_decoder_layer(
    ours: DecoderLayer, theirs: nn.TransformerDecoderLayer
) -> DecoderLayer:
    """Copy an nn.TransformerDecoderLayer's weights into our decoder layer.

    Copy an nn.TransformerDecoderLayer's weights into ours, so that the two compute
    the same function.

    Refuses (ValueError, naming both values) layers that differ in d_model, heads, d_ff,
    norm placement, activation (ours is ReLU) or layer-norm eps, and (TypeError) any
    other kind of layer.
    """
    check_kinds(ours, theirs, DecoderLayer, nn.TransformerDecoderLayer)
    check_torch_layer(ours, theirs)  # chapter 5: same sizes, norm placement, ReLU, eps
    load_torch_attention(ours.self_attn, theirs.self_attn)
    load_torch_attention(ours.cross_attn, theirs.multihead_attn)
    copy_torch_feed_forward_and_norms(ours, theirs)  # linear1, linear2 and norm1..norm3
    return ours


def check_kinds(
    ours: nn.Module, theirs: nn.Module, our_class: type, their_class: type
) -> None:
    """Check that ours and theirs are modules of the kinds a loader expects.

    Raise a TypeError unless ours is an ``our_class`` and theirs a PyTorch
    ``their_class``: a loader given another kind of module would fail half-way, on a
    missing attribute."""
    for side, module, expected, prefix in (
        ("ours", ours, our_class, "a "),
        ("theirs", theirs, their_class, "an nn."),
    ):
        if not isinstance(module, expected):
            raise TypeError(
                f"{side} must be {prefix}{expected.__name__}; "
                f"got {type(module).__name__}"
            )
