# This file is generated from book/05_feed_forward.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The encoder layer and the encoder stack.

Written in chapter 5, assembled from chapters 3 to 5.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.feed_forward import PositionwiseFeedForward
from transformer_book.multihead import MultiHeadAttention, load_torch_attention
from transformer_book.normalization import LayerNorm, SublayerConnection
from transformer_book.validation import check_positive


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each in a sublayer connection.

    x (batch, source, d_model) -> (batch, source, d_model). ``mask`` is boolean, True =
    may attend, with 3 axes, e.g. a (batch, 1, source) padding mask, or 4;
    MultiHeadAttention checks it. With ``need_weights=True`` the attention weights
    (batch, heads, source, source) are kept in ``self.attention_weights``.
    ``norm_first`` picks pre-norm; the paper is post-norm.
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
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.sublayers = nn.ModuleList(
            [SublayerConnection(d_model, dropout, norm_first) for _ in range(2)]
        )
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        def self_attend(sublayer_input: torch.Tensor) -> torch.Tensor:
            # Queries, keys and values all come from the same sequence.
            output, self.attention_weights = self.self_attn(
                sublayer_input, sublayer_input, sublayer_input, mask, need_weights
            )
            return output  # (batch, source, d_model)

        x = self.sublayers[0](x, self_attend)  # (batch, source, d_model)
        return self.sublayers[1](x, self.feed_forward)  # (batch, source, d_model)


class Encoder(nn.Module):
    """num_layers copies of ``layer`` (independent weights), then a final layer norm.

    x (batch, source, d_model) -> (batch, source, d_model). The final norm is optional:
    needed after pre-norm layers. nn.TransformerEncoder has none unless given
    ``norm=``, so compare with final_norm=False.
    """

    def __init__(self, layer: EncoderLayer, num_layers: int, final_norm: bool = True):
        super().__init__()
        check_positive(num_layers=num_layers)
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = LayerNorm(layer.self_attn.d_model) if final_norm else nn.Identity()

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, need_weights)  # (batch, source, d_model)
        return self.norm(x)  # (batch, source, d_model)


def check_torch_layer(ours: nn.Module, theirs: nn.Module) -> None:
    """Check that PyTorch's layer ``theirs`` computes the same function as ours.

    Raise a ValueError, naming both values, unless PyTorch's encoder or decoder layer
    ``theirs`` computes the same function as our ``ours``: the same d_model, heads and
    d_ff, the same norm placement, a ReLU, and the same eps in every layer norm. Chapter
    7's decoder loader reuses it.
    """
    our_sizes = (ours.self_attn.d_model, ours.self_attn.heads, ours.feed_forward.d_ff)
    their_sizes = (
        theirs.self_attn.embed_dim,
        theirs.self_attn.num_heads,
        theirs.linear1.out_features,
    )
    if our_sizes != their_sizes:
        raise ValueError(
            "sizes differ: ours d_model={}, heads={}, d_ff={}; "
            "theirs d_model={}, nhead={}, dim_feedforward={}".format(
                *our_sizes, *their_sizes
            )
        )
    if ours.sublayers[0].norm_first != theirs.norm_first:
        raise ValueError(
            "norm placement differs: "
            f"ours norm_first={ours.sublayers[0].norm_first}, "
            f"theirs norm_first={theirs.norm_first}"
        )
    if not (theirs.activation is F.relu or isinstance(theirs.activation, nn.ReLU)):
        name = getattr(theirs.activation, "__name__", type(theirs.activation).__name__)
        raise ValueError(f"ours uses ReLU; theirs uses activation={name}")
    # norm1, norm2 (and the decoder's norm3)
    for index, sublayer in enumerate(ours.sublayers, start=1):
        their_eps = getattr(theirs, f"norm{index}").eps
        if sublayer.norm.eps != their_eps:
            raise ValueError(
                f"layer-norm eps differs in norm{index}: "
                f"ours eps={sublayer.norm.eps}, theirs eps={their_eps}"
            )


@torch.no_grad()
def copy_torch_feed_forward_and_norms(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy a PyTorch layer's feed-forward weights and norms into ours.

    Copy ``linear1``/``linear2`` into our FFN and ``norm1``, ``norm2`` (, ``norm3``)
    into our sublayers' norms."""
    ours.feed_forward.expand.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.contract.load_state_dict(theirs.linear2.state_dict())
    for index, sublayer in enumerate(ours.sublayers, start=1):
        their_norm = getattr(theirs, f"norm{index}")
        sublayer.norm.gamma.copy_(their_norm.weight)
        sublayer.norm.beta.copy_(their_norm.bias)


@torch.no_grad()
def load_torch_encoder_layer(
    ours: EncoderLayer, theirs: nn.TransformerEncoderLayer
) -> EncoderLayer:
    """Copy an nn.TransformerEncoderLayer's weights into our encoder layer.

    Copy an nn.TransformerEncoderLayer's weights into ours, so that the two compute
    the same function.

    Refuses (ValueError, naming both values) layers that differ in d_model, heads, d_ff,
    norm placement, activation (ours is ReLU) or layer-norm eps.
    """
    check_torch_layer(ours, theirs)
    load_torch_attention(ours.self_attn, theirs.self_attn)
    copy_torch_feed_forward_and_norms(ours, theirs)
    return ours
