# This file is generated from book/09_full_transformer.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Training for a fixed, seeded number of steps; teacher-forced exact match (ch. 9)."""

from __future__ import annotations

import random

import torch

from transformer_book.generator import LabelSmoothingLoss
from transformer_book.masking import padding_mask, target_mask
from transformer_book.model import Transformer, make_model, sequence_loss, warmup_rate
from transformer_book.tasks import Task

# make_model keyword arguments for the dates task: about 240,000 parameters.
DATES_CONFIG = dict(num_layers=2, d_model=64, d_ff=256, heads=4, dropout=0.1)
# How chapter 9 trains it: train_model(dates_task(), **DATES_TRAINING). Chapters 10
# and 11 load the result, which the package ships (pretrained_dates_model, below).
DATES_TRAINING = dict(steps=300, seed=0, batch_size=64)


def paper_optimizer(
    model: torch.nn.Module, d_model: int, warmup_steps: int, factor: float = 1.0
):
    """The paper's optimiser: (Adam with betas (0.9, 0.98), eps 1e-9, its schedule).

    The schedule sets the rate to ``warmup_rate`` at every step (lr=1.0 is scaled)."""
    optimizer = torch.optim.Adam(
        model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_rate(step + 1, d_model, warmup_steps, factor)
    )
    return optimizer, schedule


def train_model(
    task: Task,
    steps: int,
    *,
    seed: int = 0,
    device="cpu",
    batch_size: int = 128,
    config: dict | None = None,
    log_every: int = 1,
    warmup_steps: int = 200,
    factor: float = 1.0,
    smoothing: float = 0.1,
    **overrides,
):
    """Train a fresh model on ``task`` for exactly ``steps`` steps: (model, history).

    ``config`` (default ``DATES_CONFIG``) updated by ``overrides`` goes to
    ``make_model``. Everything random follows from ``seed``: the same model on every
    run. ``history`` holds one dict (step, loss, lr) every ``log_every`` steps.
    """
    if steps < 1 or batch_size < 1 or log_every < 1:
        raise ValueError(
            f"steps, batch_size and log_every must be >= 1; got {steps}, "
            f"{batch_size}, {log_every}"
        )
    settings = (DATES_CONFIG if config is None else config) | overrides
    torch.manual_seed(seed)  # initial weights and dropout
    model = make_model(len(task.source_vocab), len(task.target_vocab), **settings).to(
        device
    )
    loss_fn = LabelSmoothingLoss(
        len(task.target_vocab), task.target_vocab.pad_id, smoothing
    )
    optimizer, schedule = paper_optimizer(
        model, settings["d_model"], warmup_steps, factor
    )
    rng = random.Random(seed)  # the batches: a fresh draw of pairs for every step
    history = []
    model.train()
    for step in range(1, steps + 1):
        source, target = task.batch(
            task.pairs(batch_size, rng.randrange(2**31)), device
        )
        loss = sequence_loss(model, source, target, task.target_vocab.pad_id, loss_fn)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        learning_rate = schedule.get_last_lr()[0]  # the rate this step used
        schedule.step()
        if step % log_every == 0 or step == steps:
            history.append({"step": step, "loss": loss.item(), "lr": learning_rate})
    return model.eval(), history


@torch.no_grad()
def exact_match_accuracy(
    model: Transformer, task: Task, pairs, device="cpu", batch_size: int = 500
) -> float:
    """Fraction of ``pairs`` whose every target token is the argmax, teacher-forced.

    That is exactly the fraction greedy decoding gets right (chapter 9 proves it),
    without decoding: one forward pass per batch.
    """
    was_training = model.training
    model.eval()
    pad_id = task.target_vocab.pad_id
    right = 0
    for first in range(0, len(pairs), batch_size):
        source, target = task.batch(pairs[first : first + batch_size], device)
        # (batch, target + 1) each
        decoder_input, labels = (
            target[:, :-1],
            target[:, 1:],
        )
        # (batch, target + 1, d_model)
        hidden = model(
            source,
            decoder_input,
            padding_mask(source, task.source_vocab.pad_id),
            target_mask(decoder_input, pad_id),
        )
        predicted = model.generator(hidden).argmax(dim=-1)  # (batch, target + 1)
        # positions after </s> do not count
        correct = (predicted == labels) | (labels == pad_id)
        right += int(correct.all(dim=1).sum().item())
    model.train(was_training)
    return right / len(pairs)


def training_spread(run: str, figure: str) -> tuple[float, float, int]:
    """Look up the recorded spread of one figure of a chapter's training.

    (lowest, highest, number of runs) of ``figure`` in the recorded spread of one of
    the chapters' trainings (``run``: "dates", "ablations", "numbers" or "poems").

    tools/measure_training_spread.py trained each as its chapter does, with five seeds,
    on three CPU kernel paths, and recorded the figures in weights/training_spread.json.
    """
    import json
    from importlib.resources import files

    path = files("transformer_book") / "weights" / "training_spread.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    runs = record["runs"]  # also recorded: the machine and the kernel paths
    if run not in runs:
        raise ValueError(f"run must be one of {sorted(runs)}; got run={run!r}")
    figures = next(iter(runs[run].values()))
    if figure not in figures:
        raise ValueError(
            f"figure must be one of {sorted(figures)}; got figure={figure!r}"
        )
    values = [recorded[figure] for recorded in runs[run].values()]
    return min(values), max(values), len(values)


def pretrained_dates_model(device="cpu") -> tuple[Transformer, list[dict]]:
    """Load the dates model shipped with the package, and its history.

    (model, history) of ``train_model(dates_task(), **DATES_TRAINING)``, from the
    weights shipped with the package (``weights/dates.pt``, written on a CPU by
    tools/export_playground.py); the model in eval mode, on ``device``."""
    from importlib.resources import files

    with (files("transformer_book") / "weights" / "dates.pt").open("rb") as handle:
        saved = torch.load(handle, map_location="cpu", weights_only=True)
    model = make_model(saved["source_vocab"], saved["target_vocab"], **saved["config"])
    model.load_state_dict(saved["state_dict"])
    return model.to(device).eval(), saved["history"]
