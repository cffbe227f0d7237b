# This file is generated from book/06_masking.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Padding and look-ahead masks (chapter 6, "Masking").

The convention everywhere in this package: a mask is a boolean tensor, and True means "may attend"
(the same as F.scaled_dot_product_attention, and the opposite of nn.MultiheadAttention).
"""

from __future__ import annotations

import torch


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(batch, seq) token ids -> (batch, 1, seq): True at real tokens, False at padding.

    The middle axis of size 1 broadcasts over the queries: every query may look at every real key.
    """
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (batch, seq); got shape {tuple(tokens.shape)}")
    if tokens.is_floating_point() or tokens.is_complex():
        raise ValueError(f"tokens must be integer ids; got dtype {tokens.dtype}")
    return (tokens != pad_id).unsqueeze(1)  # (batch, 1, seq)


def subsequent_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(1, size, size): True on and below the diagonal, so position i may attend to positions 0..i.

    The leading axis of size 1 broadcasts over the batch: every sentence gets the same triangle.
    """
    if size <= 0:
        raise ValueError(f"size must be a positive sequence length; got size={size}")
    return torch.ones(1, size, size, dtype=torch.bool, device=device).tril()  # (1, size, size)


def target_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(batch, seq) target ids -> (batch, seq, seq): no padding keys and no future positions.

    (batch, 1, seq) & (1, seq, seq) broadcasts to (batch, seq, seq).
    """
    return padding_mask(tokens, pad_id) & subsequent_mask(tokens.size(1), tokens.device)


def check_attention_mask(
    mask: torch.Tensor, batch: int, queries: int, keys: int, name: str = "mask"
) -> None:
    """Raise a ValueError naming ``name``, its shape and dtype, unless ``mask`` is a boolean mask that
    broadcasts to (batch, queries, keys), or to (batch, heads, queries, keys) if it has a heads axis.
    """
    if mask.dtype != torch.bool:
        raise ValueError(
            f"{name} must be boolean (True = may attend); got dtype {mask.dtype} and shape "
            f"{tuple(mask.shape)}. A float mask would be added to the scores, not block them."
        )
    expected = (batch, queries, keys) if mask.dim() != 4 else (batch, mask.size(1), queries, keys)
    try:
        fits = mask.dim() in (3, 4) and torch.broadcast_shapes(mask.shape, expected) == expected
    except RuntimeError:  # the shapes do not broadcast at all
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to (batch, queries, keys) = "
            f"{(batch, queries, keys)}; masks have 3 axes, (batch or 1, queries or 1, keys), "
            "or 4 with a heads axis"
        )
