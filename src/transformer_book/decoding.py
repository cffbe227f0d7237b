# This file is generated from book/10_decoding.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Decoding: greedy, the key/value cache, beam search, sampling (chapter 10)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from transformer_book.generator import sample_next_token
from transformer_book.masking import subsequent_mask
from transformer_book.model import Transformer
from transformer_book.validation import check_positive, check_tensor


def _next_log_probs(
    model: Transformer,
    memory: torch.Tensor,
    source_mask: torch.Tensor | None,
    tokens: torch.Tensor,
    caches: list[dict] | None,
    step: int,
) -> torch.Tensor:
    """Log-probabilities of the token after ``tokens`` (batch, step + 1):
    (batch, vocab)."""
    # only the newest token goes in; earlier keys/values are cached
    if caches is not None:
        hidden = model.decode(
            memory, source_mask, tokens[:, -1:], None, caches=caches, offset=step
        )
    else:  # the plain path: the whole prefix again, under the look-ahead mask
        look_ahead = subsequent_mask(tokens.size(1), tokens.device)
        hidden = model.decode(memory, source_mask, tokens, look_ahead)
    return model.generator(hidden[:, -1])  # (batch, vocab)


def _check_source(source: torch.Tensor) -> None:
    """Refuse anything but token ids (batch, source) with at least one sequence."""
    check_tensor("source", source)
    if source.dim() != 2:
        raise ValueError(
            "source must be token ids (batch, source); "
            f"got shape {tuple(source.shape)}"
        )
    if source.size(0) == 0:
        raise ValueError(
            f"source holds no sequences (shape {tuple(source.shape)}); "
            "decode at least one"
        )


def _decode_loop(
    model: Transformer,
    source: torch.Tensor,
    source_mask: torch.Tensor | None,
    start_id: int,
    max_new_tokens: int,
    end_id: int | None,
    use_cache: bool,
    pick_next: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Encode once, then append ``pick_next(log_probs)`` (batch,) at every step; a
    sequence that has emitted ``end_id`` only repeats it, and the loop stops once
    every sequence has ended. source (batch, source) -> (batch, 1 + new)."""
    check_positive(max_new_tokens=max_new_tokens)
    _check_source(source)
    batch, device = source.size(0), source.device
    memory = model.encode(source, source_mask)  # (batch, source, d_model), once
    tokens = torch.full((batch, 1), start_id, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)  # (batch,)
    caches = model.new_caches() if use_cache else None
    for step in range(max_new_tokens):
        log_probs = _next_log_probs(model, memory, source_mask, tokens, caches, step)
        next_token = pick_next(log_probs)  # (batch,)
        if end_id is not None:
            next_token = next_token.masked_fill(finished, end_id)
            finished |= next_token == end_id
        # (batch, step + 2)
        tokens = torch.cat([tokens, next_token.unsqueeze(1)], dim=1)
        if end_id is not None and bool(finished.all()):
            break
    return tokens


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
    """Decode by picking the most probable token at every step.

    The most probable token at every step:
    source (batch, source) -> (batch, 1 + new).

    The output starts with ``start_id``. A sequence that has emitted ``end_id`` only
    repeats it, and decoding stops once every sequence has ended. ``use_cache`` feeds
    one token per step and keeps the keys and values of earlier ones;
    ``use_cache=False`` re-decodes the whole prefix every step (same tokens, more work).
    Call ``model.eval()`` first: dropout would make the tokens random.
    """
    return _decode_loop(
        model, source, source_mask, start_id, max_new_tokens, end_id, use_cache,
        pick_next=lambda log_probs: log_probs.argmax(dim=-1),
    )


def length_penalized(
    scores: torch.Tensor, lengths: torch.Tensor, alpha: float
) -> torch.Tensor:
    """score / ((5 + length) / 6) ** alpha, the length penalty of Wu et al. (2016).

    ``alpha`` 0 leaves the scores as they are; larger values favour longer outputs.
    """
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0; got alpha={alpha}")
    return scores / ((5.0 + lengths) / 6.0) ** alpha


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
    """Keep the ``beam_size`` most probable prefixes at every step; return the best.

    source (batch, source) -> tokens (batch, 1 + generated) and their total
    log-probabilities (batch,). A hypothesis that has emitted ``end_id`` keeps its
    score and is padded with ``end_id``. The best one maximises
    ``length_penalized(score, length, length_penalty)`` (0: ranks by score).
    """
    check_positive(beam_size=beam_size, max_new_tokens=max_new_tokens)
    _check_source(source)
    batch, device = source.size(0), source.device
    memory = model.encode(source, source_mask)  # (batch, source, d_model)
    # (batch * beam, source, d_model)
    memory = memory.repeat_interleave(beam_size, dim=0)
    if source_mask is not None:  # one per source (even if shared), then per hypothesis
        source_mask = source_mask.expand(batch, *source_mask.shape[1:])
        # (batch * beam, 1, source)
        source_mask = source_mask.repeat_interleave(beam_size, dim=0)
    # (batch * beam, 1)
    tokens = torch.full(
        (batch * beam_size, 1), start_id, dtype=torch.long, device=device
    )
    scores = torch.full((batch, beam_size), float("-inf"), device=device)
    # One live hypothesis at first, or step 1 would pick the best token beam_size times.
    scores[:, 0] = 0.0  # (batch, beam)
    finished = torch.zeros(batch, beam_size, dtype=torch.bool, device=device)
    lengths = torch.zeros(batch, beam_size, device=device)  # tokens up to the end
    # (batch, 1)
    first_row = torch.arange(batch, device=device).unsqueeze(1) * beam_size
    caches = model.new_caches() if use_cache else None
    for step in range(max_new_tokens):
        log_probs = _next_log_probs(model, memory, source_mask, tokens, caches, step)
        vocab = log_probs.size(-1)
        log_probs = log_probs.view(batch, beam_size, vocab)
        if end_id is not None:  # a finished hypothesis may only add end_id, at no cost
            only_end = torch.full((vocab,), float("-inf"), device=device)
            only_end[end_id] = 0.0
            log_probs = torch.where(finished.unsqueeze(-1), only_end, log_probs)
        candidates = scores.unsqueeze(-1) + log_probs  # (batch, beam, vocab)
        # (batch, beam)
        scores, best = candidates.view(batch, -1).topk(beam_size, dim=-1)
        origin, next_token = best // vocab, best % vocab  # source beam, new token
        rows = (first_row + origin).view(-1)  # (batch * beam,): the rows kept
        tokens = torch.cat([tokens[rows], next_token.view(-1, 1)], dim=1)
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
    ranking = length_penalized(scores, lengths, length_penalty)  # (batch, beam)
    pick = ranking.argmax(dim=-1)  # (batch,)
    best_tokens = tokens[first_row.squeeze(1) + pick]  # (batch, 1 + generated)
    return best_tokens, scores.gather(1, pick.unsqueeze(1)).squeeze(1)


@torch.no_grad()
def sequence_log_prob(
    model: Transformer,
    source: torch.Tensor,
    source_mask: torch.Tensor | None,
    tokens: torch.Tensor,
    end_id: int | None = None,
) -> torch.Tensor:
    """Score each sequence's total log-probability in one teacher-forced pass.

    Total log-probability of tokens[:, 1:] by one plain teacher-forced pass,
    (batch,).

    Tokens after the first ``end_id`` are not counted (decoders pad with it).
    """
    decoder_input, following = tokens[:, :-1], tokens[:, 1:]  # (batch, t) each
    memory = model.encode(source, source_mask)  # (batch, source, d_model)
    look_ahead = subsequent_mask(decoder_input.size(1), tokens.device)
    hidden = model.decode(memory, source_mask, decoder_input, look_ahead)
    log_probs = model.generator(hidden)  # (batch, t, vocab)
    log_probs = log_probs.gather(-1, following.unsqueeze(-1)).squeeze(-1)  # (batch, t)
    if end_id is not None:
        is_end = (following == end_id).long()  # (batch, t)
        after_end = (is_end.cumsum(dim=1) - is_end) > 0  # an end came strictly earlier
        log_probs = log_probs.masked_fill(after_end, 0.0)
    return log_probs.sum(dim=1)  # (batch,)


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """(..., vocab) logits with -inf outside the nucleus (Holtzman et al., 2020).

    The nucleus is the smallest set of most probable tokens whose probabilities sum
    to at least ``top_p``; the most probable token is always in it.
    """
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1]; got top_p={top_p}")
    if top_p == 1.0:  # every token: a float32 running sum may reach 1 before the tail
        return logits.clone()
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., vocab)
    probabilities = sorted_logits.softmax(dim=-1)
    mass_before = probabilities.cumsum(dim=-1) - probabilities  # of the likelier ones
    drop_sorted = mass_before >= top_p  # the nucleus is complete without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


@torch.no_grad()
def sample_decode(
    model: Transformer,
    source: torch.Tensor,
    source_mask: torch.Tensor | None,
    start_id: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    end_id: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw every token: source (batch, source) -> tokens (batch, 1 + generated).

    The distribution is softmax(log_probs / temperature), restricted to the ``top_k``
    most probable tokens and to the ``top_p`` nucleus if given; ``temperature`` 0 is
    greedy. A seeded ``generator`` on the source's device makes the draws repeatable.
    Uses the key/value cache; ends like ``greedy_decode``.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0; got temperature={temperature}")

    def draw(log_probs: torch.Tensor) -> torch.Tensor:
        if temperature == 0:
            return log_probs.argmax(dim=-1)  # (batch,)
        scaled = log_probs / temperature  # (batch, vocab)
        if top_p is not None:
            scaled = top_p_filter(scaled, top_p)
        return sample_next_token(scaled, 1.0, top_k, generator)  # (batch,)

    return _decode_loop(
        model, source, source_mask, start_id, max_new_tokens, end_id,
        use_cache=True, pick_next=draw,
    )
