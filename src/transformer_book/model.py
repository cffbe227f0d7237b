# This file is generated from book/09_full_transformer.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The whole Transformer: assembly, parity with nn.Transformer, training helpers, decoding (chapter 9)."""

from __future__ import annotations

import torch
from torch import nn

from transformer_book.decoder import Decoder, DecoderLayer, load_torch_decoder_layer
from transformer_book.encoder import Encoder, EncoderLayer, load_torch_encoder_layer
from transformer_book.generator import Generator
from transformer_book.masking import padding_mask, subsequent_mask, target_mask
from transformer_book.multihead import MultiHeadAttention
from transformer_book.normalization import LayerNorm
from transformer_book.positional import Embeddings, PositionalEncoding


class EmbeddingWithPositions(nn.Module):
    """Token ids -> scaled embeddings plus positional encodings, then dropout.

    tokens (batch, seq) -> (batch, seq, d_model). ``offset`` is the position of the first token (nonzero
    when decoding one token at a time). ``positional=False`` leaves the positions out (an ablation).
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
        self.dropout = nn.Dropout(
            dropout
        )  # used only without positions: PositionalEncoding has its own

    def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        embedded = self.embeddings(
            tokens
        )  # (batch, seq, d_model), already times sqrt(d_model)
        if self.positional_encoding is None:
            return self.dropout(embedded)
        return self.positional_encoding(embedded, offset)  # (batch, seq, d_model)


class Transformer(nn.Module):
    """The encoder-decoder: embed and encode the source once, then decode the target against it.

    ``forward`` returns the decoder's output (batch, target, d_model); ``generator`` turns it into
    log-probabilities (batch, target, vocab), as in The Annotated Transformer's EncoderDecoder.
    """

    def __init__(
        self,
        encoder: Encoder,
        decoder: Decoder,
        source_embed: EmbeddingWithPositions,
        target_embed: EmbeddingWithPositions,
        generator: Generator,
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
        """source (batch, source) ids and a mask broadcasting to (batch, 1, source) -> memory (batch, source, d_model)."""
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

        With ``caches`` (from ``new_caches``), feed one new token per call, at position ``offset``, with
        no target mask: the cached keys are exactly the earlier positions, which the new token may see.
        """
        embedded = self.target_embed(target, offset)  # (batch, target, d_model)
        return self.decoder(
            embedded, memory, source_mask, target_mask, need_weights, caches
        )

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

    def new_caches(self) -> list[dict]:
        """Empty key/value caches for step-by-step decoding, one per decoder layer."""
        return [{"self": {}, "cross": {"static": True}} for _ in self.decoder.layers]


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
    """A Transformer with the paper's base hyperparameters as defaults, Xavier-initialised.

    ``final_norm`` (default: ``norm_first``) ends each stack with a layer norm, which pre-norm needs and
    nn.Transformer always has. ``positional=False`` leaves out the positional encodings and
    ``attention_scale`` replaces 1/sqrt(d_k) in every attention (1.0: no scaling); both are ablations.
    ``tie_weights`` shares one matrix between both embeddings and the generator (the paper's section
    3.4), which needs one vocabulary for source and target.
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
            f"attention_scale must be positive (None means 1/sqrt(d_k)); got attention_scale={attention_scale}"
        )
    if tie_weights and source_vocab != target_vocab:
        raise ValueError(
            "tie_weights shares one embedding matrix, so source and target need the same vocabulary; "
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
        Generator(d_model, target_vocab),
    )
    if (
        tie_weights
    ):  # one (vocab, d_model) matrix: both lookups and the generator's projection
        model.source_embed.embeddings.lookup.weight = model.generator.proj.weight
        model.target_embed.embeddings.lookup.weight = model.generator.proj.weight
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.scale = attention_scale  # None keeps the paper's 1/sqrt(d_k)
    for (
        parameter
    ) in model.parameters():  # a shared matrix is listed, and initialised, once
        if parameter.dim() > 1:
            nn.init.xavier_uniform_(parameter)
    return model


@torch.no_grad()
def load_torch_transformer(ours: Transformer, theirs: nn.Transformer) -> Transformer:
    """Copy an nn.Transformer's weights into our encoder and decoder stacks (same sizes and norm_first).

    nn.Transformer has no embeddings or generator, and it always ends each stack with a layer norm,
    so ours must be built with ``final_norm=True``.
    """
    pairs = {
        "encoder layers": (len(ours.encoder.layers), len(theirs.encoder.layers)),
        "decoder layers": (len(ours.decoder.layers), len(theirs.decoder.layers)),
        "norm_first": (
            ours.encoder.layers[0].sublayers[0].norm_first,
            theirs.encoder.layers[0].norm_first,
        ),
        "final norms": (
            isinstance(ours.encoder.norm, LayerNorm),
            theirs.encoder.norm is not None,
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
    for layer, their_layer in zip(ours.encoder.layers, theirs.encoder.layers):
        load_torch_encoder_layer(layer, their_layer)
    for layer, their_layer in zip(ours.decoder.layers, theirs.decoder.layers):
        load_torch_decoder_layer(layer, their_layer)
    for norm, their_norm in (
        (ours.encoder.norm, theirs.encoder.norm),
        (ours.decoder.norm, theirs.decoder.norm),
    ):
        norm.gamma.copy_(their_norm.weight)
        norm.beta.copy_(their_norm.bias)
    return ours


def _next_log_probs(
    model: Transformer,
    memory: torch.Tensor,
    source_mask: torch.Tensor | None,
    tokens: torch.Tensor,
    caches: list[dict] | None,
    step: int,
) -> torch.Tensor:
    """Log-probabilities of the token after ``tokens`` (batch, step + 1): (batch, vocab)."""
    if (
        caches is not None
    ):  # only the newest token goes in; the earlier keys and values are cached
        hidden = model.decode(
            memory, source_mask, tokens[:, -1:], None, caches=caches, offset=step
        )
    else:  # the plain path: the whole prefix again, under the look-ahead mask
        hidden = model.decode(
            memory, source_mask, tokens, subsequent_mask(tokens.size(1), tokens.device)
        )
    return model.generator(hidden[:, -1])  # (batch, vocab)


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    source: torch.Tensor,
    source_mask: torch.Tensor | None,
    start_id: int,
    max_new_tokens: int,
    end_id: int | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """The most probable token at every step. source (batch, source) -> tokens (batch, 1 + generated).

    The output starts with ``start_id``. A sequence that has emitted ``end_id`` only repeats it, and
    decoding stops once every sequence has ended. ``use_cache`` feeds one token per step and keeps the
    keys and values of earlier ones; ``use_cache=False`` re-decodes the whole prefix every step (same
    tokens, more work). Call ``model.eval()`` first: dropout would make the tokens random.
    """
    if max_new_tokens <= 0:
        raise ValueError(
            f"max_new_tokens must be positive; got max_new_tokens={max_new_tokens}"
        )
    memory = model.encode(source, source_mask)  # (batch, source, d_model), once
    tokens = torch.full(
        (source.size(0), 1), start_id, dtype=torch.long, device=source.device
    )  # (batch, 1)
    finished = torch.zeros(
        source.size(0), dtype=torch.bool, device=source.device
    )  # (batch,)
    caches = model.new_caches() if use_cache else None
    for step in range(max_new_tokens):
        next_token = _next_log_probs(
            model, memory, source_mask, tokens, caches, step
        ).argmax(dim=-1)  # (batch,)
        if end_id is not None:
            next_token = next_token.masked_fill(finished, end_id)
            finished |= next_token == end_id
        tokens = torch.cat(
            [tokens, next_token.unsqueeze(1)], dim=1
        )  # (batch, step + 2)
        if end_id is not None and bool(finished.all()):
            break
    return tokens


def sequence_loss(
    model: Transformer,
    source: torch.Tensor,
    target: torch.Tensor,
    pad_id: int,
    loss_fn: nn.Module,
) -> torch.Tensor:
    """Teacher forcing: read target[:, :-1], predict target[:, 1:]; ``loss_fn`` of (N, vocab) and (N,).

    source (batch, source) and target (batch, target) are token ids padded with ``pad_id``; each target
    starts with the start token.
    """
    decoder_input, labels = target[:, :-1], target[:, 1:]  # (batch, target - 1) each
    source_mask = padding_mask(source, pad_id)  # (batch, 1, source)
    hidden = model(
        source, decoder_input, source_mask, target_mask(decoder_input, pad_id)
    )  # (batch, t, d_model)
    log_probs = model.generator(hidden)  # (batch, t, vocab)
    return loss_fn(log_probs.reshape(-1, log_probs.size(-1)), labels.reshape(-1))


def warmup_rate(
    step: int, d_model: int, warmup_steps: int, factor: float = 1.0
) -> float:
    """The paper's learning rate: factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    It rises linearly for ``warmup_steps`` steps, to a peak of factor / sqrt(d_model * warmup_steps), then
    decays as 1 / sqrt(step). Step 0 (LambdaLR asks for it when created) counts as step 1.
    """
    if warmup_steps <= 0 or d_model <= 0:
        raise ValueError(
            f"d_model and warmup_steps must be positive; got d_model={d_model}, warmup_steps={warmup_steps}"
        )
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


@torch.no_grad()
def beam_search(
    model: Transformer,
    source: torch.Tensor,
    source_mask: torch.Tensor | None,
    start_id: int,
    max_new_tokens: int,
    beam_size: int = 4,
    end_id: int | None = None,
    length_penalty: float = 0.0,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``beam_size`` most probable prefixes at every step; return the best hypothesis.

    source (batch, source) -> tokens (batch, 1 + generated) and their total log-probabilities (batch,).
    A hypothesis that has emitted ``end_id`` keeps its score and is padded with ``end_id``. The best
    one maximises score / ((5 + length) / 6) ** length_penalty (Wu et al. 2016; 0 ranks by score).
    """
    if beam_size <= 0 or max_new_tokens <= 0:
        raise ValueError(
            f"beam_size and max_new_tokens must be positive; got beam_size={beam_size}, max_new_tokens={max_new_tokens}"
        )
    batch, device = source.size(0), source.device
    memory = model.encode(source, source_mask).repeat_interleave(
        beam_size, dim=0
    )  # (batch * beam, source, d_model)
    if source_mask is not None:
        source_mask = source_mask.repeat_interleave(
            beam_size, dim=0
        )  # (batch * beam, 1, source)
    tokens = torch.full(
        (batch * beam_size, 1), start_id, dtype=torch.long, device=device
    )  # (batch * beam, 1)
    scores = torch.full(
        (batch, beam_size), float("-inf"), device=device
    )  # (batch, beam)
    scores[:, 0] = (
        0.0  # one live hypothesis at first, or step 1 would pick the best token beam_size times
    )
    finished = torch.zeros(
        batch, beam_size, dtype=torch.bool, device=device
    )  # (batch, beam)
    lengths = torch.zeros(
        batch, beam_size, device=device
    )  # (batch, beam): tokens up to and including the end
    first_row = (
        torch.arange(batch, device=device).unsqueeze(1) * beam_size
    )  # (batch, 1): each source's first row
    caches = model.new_caches() if use_cache else None
    for step in range(max_new_tokens):
        log_probs = _next_log_probs(
            model, memory, source_mask, tokens, caches, step
        )  # (batch * beam, vocab)
        vocab = log_probs.size(-1)
        log_probs = log_probs.view(batch, beam_size, vocab)
        if end_id is not None:  # a finished hypothesis may only add end_id, at no cost
            only_end = torch.full((vocab,), float("-inf"), device=device)
            only_end[end_id] = 0.0
            log_probs = torch.where(finished.unsqueeze(-1), only_end, log_probs)
        candidates = (scores.unsqueeze(-1) + log_probs).view(
            batch, beam_size * vocab
        )  # (batch, beam * vocab)
        scores, best = candidates.topk(
            beam_size, dim=-1
        )  # (batch, beam) each, best first
        origin, next_token = (
            best // vocab,
            best % vocab,
        )  # the hypothesis each comes from, and its new token
        rows = (first_row + origin).view(
            -1
        )  # (batch * beam,): rows of the hypotheses kept
        tokens = torch.cat(
            [tokens[rows], next_token.view(-1, 1)], dim=1
        )  # (batch * beam, step + 2)
        if caches is not None:  # the self-attention caches follow their hypotheses
            for cache in caches:
                cache["self"]["key"] = cache["self"]["key"][rows]
                cache["self"]["value"] = cache["self"]["value"][rows]
        was_finished = finished.gather(1, origin)  # (batch, beam)
        lengths = lengths.gather(1, origin) + (~was_finished).float()
        if end_id is not None:
            finished = was_finished | (next_token == end_id)
            if bool(finished.all()):
                break
    ranking = scores / ((5.0 + lengths) / 6.0) ** length_penalty  # (batch, beam)
    pick = ranking.argmax(dim=-1)  # (batch,)
    return tokens[first_row.squeeze(1) + pick], scores.gather(
        1, pick.unsqueeze(1)
    ).squeeze(1)


@torch.no_grad()
def sequence_log_prob(
    model: Transformer,
    source: torch.Tensor,
    source_mask: torch.Tensor | None,
    tokens: torch.Tensor,
    end_id: int | None = None,
) -> torch.Tensor:
    """Total log-probability of tokens[:, 1:] given the source, by one plain teacher-forced pass: (batch,).

    Tokens after the first ``end_id`` are not counted (a decoder pads finished sequences with it).
    """
    decoder_input, following = tokens[:, :-1], tokens[:, 1:]  # (batch, t) each
    memory = model.encode(source, source_mask)  # (batch, source, d_model)
    hidden = model.decode(
        memory,
        source_mask,
        decoder_input,
        subsequent_mask(decoder_input.size(1), tokens.device),
    )
    log_probs = (
        model.generator(hidden).gather(-1, following.unsqueeze(-1)).squeeze(-1)
    )  # (batch, t)
    if end_id is not None:
        is_end = (following == end_id).long()  # (batch, t)
        after_end = (
            is_end.cumsum(dim=1) - is_end
        ) > 0  # an end token came strictly earlier
        log_probs = log_probs.masked_fill(after_end, 0.0)
    return log_probs.sum(dim=1)  # (batch,)
