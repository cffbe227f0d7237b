# This file is generated from book/08_linear_and_softmax.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The final linear layer and softmax, sampling, and label smoothing (chapter 8).

``OutputLayer`` (The Annotated Transformer's ``Generator``) maps decoder outputs to
log-probabilities over the vocabulary; ``sample_next_token`` chooses a token from them
(greedy, temperature, top-k); ``LabelSmoothingLoss`` is the paper's training loss, KL
divergence to a smoothed target distribution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.validation import (
    check_features,
    check_positive,
    check_tensor,
    check_token_ids,
)


class OutputLayer(nn.Module):
    """Decoder output (..., d_model) -> log-probabilities (..., vocab_size).

    A linear layer gives one score (logit) per token; log_softmax turns the scores into
    log-probabilities, stably (the log-sum-exp trick). ``proj.weight`` has shape
    (vocab_size, d_model), the same as an embedding table's, so the two can be tied (the
    paper's section 3.4).
    """

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        check_positive(d_model=d_model, vocab_size=vocab_size)
        self.d_model = d_model
        self.vocab_size = vocab_size
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_features(
            "x", x, self.d_model, self.proj.weight.dtype,
            expected=f"decoder outputs (..., d_model={self.d_model})",
        )
        return F.log_softmax(self.proj(x), dim=-1)  # (..., vocab_size)


def sample_next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(batch, vocab) logits -> (batch,) token ids; (vocab,) -> a 0-d tensor.

    ``temperature`` 0 is greedy (argmax); otherwise the token is drawn from
    softmax(logits / temperature), restricted to the ``top_k`` highest logits if given
    (tokens tied with the k-th are kept). Log-probabilities work as well as logits: they
    differ by a constant per row, which softmax ignores. ``generator`` (a seeded
    torch.Generator on the logits' device) makes the draws reproducible.
    """
    check_tensor("logits", logits, floating=True)
    if logits.dim() not in (1, 2):
        raise ValueError(
            "logits must have shape (batch, vocab) or (vocab,); "
            f"got shape {tuple(logits.shape)}"
        )
    vocab = logits.size(-1)
    if temperature < 0:
        raise ValueError(
            f"temperature must be >= 0 (0 means greedy); got temperature={temperature}"
        )
    if top_k is not None and not 1 <= top_k <= vocab:
        raise ValueError(
            f"top_k must be between 1 and the vocabulary size {vocab}; "
            f"got top_k={top_k}"
        )
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature  # (..., vocab)
    if top_k is not None:
        kth_best = scaled.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
        scaled = scaled.masked_fill(scaled < kth_best, float("-inf"))
    probabilities = torch.softmax(scaled, dim=-1)  # (..., vocab)
    rows = probabilities.reshape(-1, vocab)  # (rows, vocab)
    drawn = torch.multinomial(rows, 1, generator=generator)  # (rows, 1)
    return drawn.view(logits.shape[:-1])  # (batch,) or ()


class LabelSmoothingLoss(nn.Module):
    """Label-smoothed loss: the KL divergence to a smoothed target distribution.

    KL divergence to a smoothed target: 1 - smoothing on the right token, the rest
    spread evenly over the other tokens except padding. Positions whose target is
    padding contribute nothing.

    log_probs (N, vocab), targets (N,) -> scalar loss (mean over non-padding positions).
    Entries with a zero target probability add exactly 0, even where log_probs is -inf.
    """

    def __init__(self, vocab_size: int, pad_id: int, smoothing: float = 0.1):
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1); got smoothing={smoothing}")
        if vocab_size <= 2:
            raise ValueError(
                "label smoothing needs a vocabulary of more than 2 tokens; "
                f"got vocab_size={vocab_size}"
            )
        if not 0 <= pad_id < vocab_size:
            raise ValueError(
                f"pad_id must be a token id in [0, {vocab_size}); got pad_id={pad_id}"
            )
        self.vocab_size, self.pad_id, self.smoothing = vocab_size, pad_id, smoothing

    def smoothed_targets(
        self, targets: torch.Tensor, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """(N,) token ids -> (N, vocab) target distributions (zero on padding rows)."""
        share = self.smoothing / (self.vocab_size - 2)  # what each other token gets
        size = (targets.size(0), self.vocab_size)
        # (N, vocab)
        distribution = torch.full(size, share, dtype=dtype, device=targets.device)
        distribution.scatter_(1, targets.unsqueeze(1), 1.0 - self.smoothing)
        distribution[:, self.pad_id] = 0.0  # never predict padding
        distribution[targets == self.pad_id] = 0.0  # padding positions are not scored
        return distribution

    def forward(self, log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_tensor("log_probs", log_probs, floating=True)
        check_tensor("targets", targets)
        if (
            log_probs.dim() != 2
            or log_probs.size(-1) != self.vocab_size
            or targets.shape != log_probs.shape[:1]
        ):
            raise ValueError(
                f"expected log_probs (N, vocab_size={self.vocab_size}) and targets "
                f"(N,); got {tuple(log_probs.shape)} and {tuple(targets.shape)}"
            )
        check_token_ids("targets", targets, self.vocab_size)
        target = self.smoothed_targets(targets, log_probs.dtype)  # (N, vocab)
        # 0 * log p is 0 even where log p = -inf: multiply only where target > 0.
        cross = torch.where(target > 0, target * log_probs, 0.0)  # (N, vocab)
        per_position = (torch.xlogy(target, target) - cross).sum(-1)  # (N,)
        real = targets != self.pad_id
        return per_position[real].sum() / real.sum().clamp(min=1)
