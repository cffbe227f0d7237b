# This file is generated from book/10_decoding.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The key/value cache for step-by-step decoding (chapter 10, "Decoding").

Adds what decoding one token at a time needs to classes of earlier chapters: a
``cache`` to MultiHeadAttention (chapter 3), ``cache`` and ``caches`` to the decoder
layer and stack (chapter 7), a position ``offset`` to PositionalEncoding (chapter 1)
and EmbeddingWithPositions (chapter 9), and ``caches``, ``offset`` and ``new_caches``
to the Transformer (chapter 9). Importing transformer_book applies them.
"""

from __future__ import annotations

import torch

from transformer_book.decoder import Decoder, DecoderLayer
from transformer_book.model import EmbeddingWithPositions, Transformer
from transformer_book.multihead import MultiHeadAttention
from transformer_book.positional import PositionalEncoding


def add_to_class(cls: type):
    """Decorator: attach the function to ``cls`` as the method of the same name
    (d2l.ai's ``add_to_class``)."""

    def attach(function):
        setattr(cls, function.__name__, function)
        return function

    return attach


@add_to_class(MultiHeadAttention)
def forward(
    self,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    need_weights: bool = False,
    cache: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chapter 3's forward, with an optional ``cache`` of projected keys and values.

    Self-attention appends each call's keys and values to the cache; a cache made as
    ``{"static": True}`` (cross-attention) is filled by the first call and reused.
    """
    self._check_inputs(query, key, value)
    # (batch, heads, queries, d_k)
    queries = self.split_heads(self.query_proj(query))
    if cache is not None and cache.get("static") and "key" in cache:
        keys, values = cache["key"], cache["value"]  # the memory's, projected once
    else:
        keys = self.split_heads(self.key_proj(key))  # (batch, heads, new keys, d_k)
        values = self.split_heads(self.value_proj(value))
        if cache is not None:
            if "key" in cache:  # the earlier positions' keys and values come first
                # (batch, heads, keys, d_k)
                keys = torch.cat([cache["key"], keys], dim=2)
                values = torch.cat([cache["value"], values], dim=2)
            cache["key"], cache["value"] = keys, values
    return self.attend(queries, keys, values, mask, need_weights)


@add_to_class(DecoderLayer)
def forward(
    self,
    x: torch.Tensor,
    memory: torch.Tensor,
    source_mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    need_weights: bool = False,
    cache: dict | None = None,
) -> torch.Tensor:
    """Chapter 7's forward; ``cache`` is {"self": {...}, "cross": {...}}, one dict for
    each attention."""
    self_cache = cache["self"] if cache is not None else None
    cross_cache = cache["cross"] if cache is not None else None
    cached = self_cache["key"].size(2) if self_cache and "key" in self_cache else 0
    self._check_inputs(x, memory, source_mask, target_mask, cached + x.size(1))

    def self_attend(normed: torch.Tensor) -> torch.Tensor:
        output, self.self_attention_weights = self.self_attn(
            normed, normed, normed, target_mask, need_weights, self_cache
        )
        return output  # (batch, target, d_model)

    def cross_attend(normed: torch.Tensor) -> torch.Tensor:
        output, self.cross_attention_weights = self.cross_attn(
            normed, memory, memory, source_mask, need_weights, cross_cache
        )
        return output  # (batch, target, d_model)

    x = self.sublayers[0](x, self_attend)  # (batch, target, d_model)
    x = self.sublayers[1](x, cross_attend)  # (batch, target, d_model)
    return self.sublayers[2](x, self.feed_forward)  # (batch, target, d_model)


@add_to_class(Decoder)
def forward(
    self,
    x: torch.Tensor,
    memory: torch.Tensor,
    source_mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    need_weights: bool = False,
    caches: list[dict] | None = None,
) -> torch.Tensor:
    """Chapter 7's forward, with one cache per layer."""
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


@add_to_class(PositionalEncoding)
def forward(self, embeddings: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Chapter 1's forward, for the positions offset, offset + 1, ..."""
    self._check_embeddings(embeddings)
    seq_len = embeddings.size(1)
    if offset < 0 or offset + seq_len > self.max_len:
        raise ValueError(
            f"positions {offset}..{offset + seq_len - 1} (a sequence of length "
            f"{seq_len} at offset {offset}) do not fit the encoding table of "
            f"max_len={self.max_len}; build PositionalEncoding with a larger max_len"
        )
    # (seq, d_model)
    positions = self.table[offset : offset + seq_len].to(embeddings.dtype)
    return self.dropout(embeddings + positions)  # (batch, seq, d_model)


@add_to_class(EmbeddingWithPositions)
def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """Chapter 9's forward, with the first token at position ``offset``."""
    embedded = self.embeddings(tokens)  # (batch, seq, d_model)
    if self.positional_encoding is None:
        return self.dropout(embedded)
    return self.positional_encoding(embedded, offset)  # (batch, seq, d_model)


@add_to_class(Transformer)
def decode(
    self,
    memory: torch.Tensor,
    source_mask: torch.Tensor | None,
    target: torch.Tensor,
    target_mask: torch.Tensor | None,
    need_weights: bool = False,
    caches: list[dict] | None = None,
    offset: int = 0,
) -> torch.Tensor:
    """Chapter 9's decode. With ``caches`` (from ``new_caches``), feed one new token
    per call, at position ``offset``, with no target mask: the cached keys are exactly
    the earlier positions, which the new token may see."""
    embedded = self.target_embed(target, offset)  # (batch, target, d_model)
    return self.decoder(
        embedded, memory, source_mask, target_mask, need_weights, caches
    )


@add_to_class(Transformer)
def new_caches(self) -> list[dict]:
    """Empty key/value caches for step-by-step decoding, one per decoder layer."""
    return [{"self": {}, "cross": {"static": True}} for _ in self.decoder.layers]
