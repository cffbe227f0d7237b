# This file is generated from book/09_full_transformer.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The whole Transformer: assembly, parity with nn.Transformer, the loss (ch. 9)."""

from __future__ import annotations

import torch
from torch import nn

from transformer_book.decoder import (
    Decoder,
    DecoderLayer,
    check_kinds,
    load_torch_decoder_layer,
)
from transformer_book.encoder import (
    Encoder,
    EncoderLayer,
    check_torch_layer,
    load_torch_encoder_layer,
)
from transformer_book.generator import OutputLayer
from transformer_book.masking import padding_mask, target_mask
from transformer_book.multihead import MultiHeadAttention
from transformer_book.normalization import LayerNorm
from transformer_book.positional import Embeddings, PositionalEncoding
from transformer_book.validation import check_positive


class EmbeddingWithPositions(nn.Module):
    """Token ids -> scaled embeddings plus positional encodings, then dropout.

    tokens (batch, seq) -> (batch, seq, d_model). ``positional=False`` leaves the
    positions out (an ablation).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        dropout: float = 0.1,
        max_len: int = 5000,
        positional: bool = True,
    ):
        super().__init__()
        self.embeddings = Embeddings(vocab_size, d_model)
        self.positional_encoding = (
            PositionalEncoding(d_model, max_len, dropout) if positional else None
        )
        # used only without positions: PositionalEncoding has its own
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """The first token is at position ``offset`` (chapter 1's argument)."""
        # (batch, seq, d_model), already times sqrt(d_model)
        embedded = self.embeddings(tokens)
        if self.positional_encoding is None:
            return self.dropout(embedded)
        return self.positional_encoding(embedded, offset)  # (batch, seq, d_model)


class Transformer(nn.Module):
    """The encoder-decoder: encode the source once, decode the target against it.

    ``forward`` returns the decoder's output (batch, target, d_model); ``generator``
    turns it into log-probabilities (batch, target, vocab), as in The Annotated
    Transformer's EncoderDecoder.
    """

    def __init__(
        self,
        encoder: Encoder,
        decoder: Decoder,
        source_embed: EmbeddingWithPositions,
        target_embed: EmbeddingWithPositions,
        generator: OutputLayer,
    ):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.source_embed = source_embed
        self.target_embed = target_embed
        self.generator = generator

    def encode(
        self,
        source: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        """Encode the source token ids into the memory the decoder attends to.

        source (batch, source) ids and a mask broadcasting to (batch, 1, source)
        -> memory (batch, source, d_model)."""
        return self.encoder(self.source_embed(source), source_mask, need_weights)

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
        """target (batch, target) ids -> (batch, target, d_model).

        With ``caches`` (from ``new_caches``; chapter 10), feed the new tokens only, the
        first at position ``offset``: the cached keys and values stand for the earlier
        positions. A single new token may see all of them, so it needs no target mask.
        """
        embedded = self.target_embed(target, offset)  # (batch, target, d_model)
        return self.decoder(
            embedded, memory, source_mask, target_mask, need_weights, caches
        )

    def new_caches(self) -> list[dict]:
        """Make empty key/value caches, one per decoder layer.

        Empty key/value caches for decoding one token at a time, one per decoder
        layer: a growing one for self-attention, a static one for cross-attention."""
        return [{"self": {}, "cross": {"static": True}} for _ in self.decoder.layers]

    def forward(
        self,
        source: torch.Tensor,
        target: torch.Tensor,
        source_mask: torch.Tensor | None = None,
        target_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.decode(
            self.encode(source, source_mask), source_mask, target, target_mask
        )


def make_model(
    source_vocab: int,
    target_vocab: int,
    num_layers: int = 6,
    d_model: int = 512,
    d_ff: int = 2048,
    heads: int = 8,
    dropout: float = 0.1,
    norm_first: bool = False,
    final_norm: bool | None = None,
    max_len: int = 5000,
    positional: bool = True,
    attention_scale: float | None = None,
    tie_weights: bool = False,
) -> Transformer:
    """A Xavier-initialised Transformer; the defaults are the paper's base model.

    ``final_norm`` (default: ``norm_first``) ends each stack with a layer norm, which
    pre-norm needs and nn.Transformer always has. ``positional=False`` leaves out the
    positional encodings and ``attention_scale`` replaces 1/sqrt(d_k) in every attention
    (1.0: no scaling); both are ablations. ``tie_weights`` shares one matrix between
    both embeddings and the generator (the paper's section 3.4), which needs one
    vocabulary for source and target.
    """
    for name, value in (
        ("source_vocab", source_vocab),
        ("target_vocab", target_vocab),
        ("num_layers", num_layers),
    ):
        if value <= 0:
            raise ValueError(f"{name} must be positive; got {name}={value}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout is a probability in [0, 1); got dropout={dropout}")
    if attention_scale is not None and attention_scale <= 0:
        raise ValueError(
            "attention_scale must be positive (None means 1/sqrt(d_k)); "
            f"got attention_scale={attention_scale}"
        )
    if tie_weights and source_vocab != target_vocab:
        raise ValueError(
            "tie_weights shares one embedding matrix, so source and target need the "
            "same vocabulary; "
            f"got source_vocab={source_vocab}, target_vocab={target_vocab}"
        )
    final_norm = norm_first if final_norm is None else final_norm
    model = Transformer(
        Encoder(
            EncoderLayer(d_model, heads, d_ff, dropout, norm_first),
            num_layers,
            final_norm,
        ),
        Decoder(
            DecoderLayer(d_model, heads, d_ff, dropout, norm_first),
            num_layers,
            final_norm,
        ),
        EmbeddingWithPositions(source_vocab, d_model, dropout, max_len, positional),
        EmbeddingWithPositions(target_vocab, d_model, dropout, max_len, positional),
        OutputLayer(d_model, target_vocab),
    )
    if tie_weights:
        # one (vocab, d_model) matrix: both lookups and the generator's projection
        model.source_embed.embeddings.lookup.weight = model.generator.proj.weight
        model.target_embed.embeddings.lookup.weight = model.generator.proj.weight
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.scale = attention_scale  # None keeps the paper's 1/sqrt(d_k)
    # a shared matrix is listed, and initialised, once
    for parameter in model.parameters():
        if parameter.dim() > 1:
            nn.init.xavier_uniform_(parameter)
    return model


@torch.no_grad()
def load_torch_transformer(ours: Transformer, theirs: nn.Transformer) -> Transformer:
    """Copy an nn.Transformer's weights into our encoder and decoder stacks.

    nn.Transformer has no embeddings or generator, and it ends each stack with a layer
    norm (unless given custom stacks without one), so ours is built with
    ``final_norm=True`` to match. Any difference that would make the two compute
    different functions is refused, naming it, before anything is copied.
    """
    check_torch_transformer(ours, theirs)
    for layer, their_layer in zip(ours.encoder.layers, theirs.encoder.layers):
        load_torch_encoder_layer(layer, their_layer)
    for layer, their_layer in zip(ours.decoder.layers, theirs.decoder.layers):
        load_torch_decoder_layer(layer, their_layer)
    for norm, their_norm in (
        (ours.encoder.norm, theirs.encoder.norm),
        (ours.decoder.norm, theirs.decoder.norm),
    ):
        if their_norm is not None:  # then ours has one too: checked above
            norm.gamma.copy_(their_norm.weight)
            norm.beta.copy_(their_norm.bias)
    return ours


def check_torch_transformer(ours: Transformer, theirs: nn.Transformer) -> None:
    """Check that load_torch_transformer can copy theirs into ours.

    Raise unless load_torch_transformer can make ours compute what theirs computes,
    naming what differs: another kind of model (TypeError); the number of layers, the
    norm placement or the final norms; then, layer by layer, the sizes, activation and
    layer-norm eps (chapter 5's check), and the eps of the final norms (ValueError).
    """
    check_kinds(ours, theirs, Transformer, nn.Transformer)
    pairs = {
        "encoder layers": (len(ours.encoder.layers), len(theirs.encoder.layers)),
        "decoder layers": (len(ours.decoder.layers), len(theirs.decoder.layers)),
        "norm_first": (
            ours.encoder.layers[0].sublayers[0].norm_first,
            theirs.encoder.layers[0].norm_first,
        ),
        "encoder final norm": (
            isinstance(ours.encoder.norm, LayerNorm),
            theirs.encoder.norm is not None,
        ),
        "decoder final norm": (
            isinstance(ours.decoder.norm, LayerNorm),
            theirs.decoder.norm is not None,
        ),
    }
    different = [
        f"{name} (ours {mine}, theirs {their})"
        for name, (mine, their) in pairs.items()
        if mine != their
    ]
    if different:
        raise ValueError(
            "cannot copy nn.Transformer's weights: the models differ in "
            + ", ".join(different)
        )
    for stack in ("encoder", "decoder"):
        our_stack, their_stack = getattr(ours, stack), getattr(theirs, stack)
        for index, (layer, their_layer) in enumerate(
            zip(our_stack.layers, their_stack.layers)
        ):
            try:
                check_torch_layer(layer, their_layer)
            except ValueError as error:
                raise ValueError(f"{stack} layer {index}: {error}") from None
        if their_stack.norm is not None and our_stack.norm.eps != their_stack.norm.eps:
            raise ValueError(
                f"layer-norm eps differs in the {stack} final norm: "
                f"ours eps={our_stack.norm.eps}, theirs eps={their_stack.norm.eps}"
            )


def sequence_loss(
    model: Transformer,
    source: torch.Tensor,
    target: torch.Tensor,
    pad_id: int,
    loss_fn: nn.Module,
) -> torch.Tensor:
    """Compute the teacher-forced loss of predicting each target token.

    Teacher forcing: read target[:, :-1], predict target[:, 1:];
    ``loss_fn`` of (N, vocab) and (N,).

    source (batch, source) and target (batch, target) are token ids padded with
    ``pad_id``; each target starts with the start token.
    """
    decoder_input, labels = target[:, :-1], target[:, 1:]  # (batch, target - 1) each
    source_mask = padding_mask(source, pad_id)  # (batch, 1, source)
    # (batch, t, d_model)
    hidden = model(
        source, decoder_input, source_mask, target_mask(decoder_input, pad_id)
    )
    log_probs = model.generator(hidden)  # (batch, t, vocab)
    return loss_fn(log_probs.reshape(-1, log_probs.size(-1)), labels.reshape(-1))


def warmup_rate(
    step: int, d_model: int, warmup_steps: int, factor: float = 1.0
) -> float:
    """Compute the paper's learning rate at ``step``: warmup, then decay.

    The paper's learning rate:
    factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    It rises linearly for ``warmup_steps`` steps, to a peak of factor / sqrt(d_model *
    warmup_steps), then decays as 1 / sqrt(step). Step 0 (LambdaLR asks for it when
    created) counts as step 1.
    """
    check_positive(d_model=d_model, warmup_steps=warmup_steps)
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
