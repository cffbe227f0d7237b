"""What a training tool's steps achieved: tokens/s, FLOP/s and MFU (chapter 18), printed, never stored.

    with StepMeter(GPT, gpt_step_cost(pad_id)) as meter:
        train_poet(...)                 # the package's training, unchanged
    print(meter.result().line())

``StepMeter`` watches the training steps of one kind of model while it is active, through two of
PyTorch's global hooks (every module's forward pre-hook, every optimizer's step post-hook), so that
the one training loop (chapter 9's ``training_steps``) and the recipes that call it stay as they are.
The hooks only read, and the peak is measured on a forked random generator, so a run trains the same
bits with the meter as without it: the shipped weights' ``--check`` stays byte for byte. For every forward of the model in training
mode with gradients on, a ``cost(module, args)`` function gives (FLOPs, tokens) from the batch's real
shape:

* the FLOPs are the package's counts (``flops_per_token`` for a GPT, ``encoder_decoder_flops`` for the
  encoder-decoder) for the batch as the model computes it, padded positions included;
* the tokens are the positions that are not padding (the padding is computed but not counted).

A step's time runs from its first forward to the end of its optimizer step: forward, backward and
update, not the batching or the evaluation between steps. The peak is ``matmul_peak`` (float32, the
tools' dtype) on the threads the tool trains with, measured in the same run, on entry and on
exit; MFU is against the higher of the two (a machine whose load changed shows two different peaks).
The figures depend on the machine and its load: the tools print them and keep them out of their
records, which ``--check`` compares.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

import torch
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_post_hook

from transformer_book import GPT, encoder_decoder_flops, flops_per_token, matmul_peak, mfu, synchronize

PEAK_SIZE: int | None = None  # matmul_peak's default: 1,024 on the CPU, 4,096 on a GPU

Cost = Callable[[torch.nn.Module, tuple], tuple[int, int]]


def gpt_step_cost(pad_id: int) -> Cost:
    """(FLOPs, tokens) of a GPT's forward on (batch, seq) ids: ``flops_per_token`` at that length
    for every position, the positions other than ``pad_id`` as tokens."""

    def cost(model: GPT, args: tuple) -> tuple[int, int]:
        tokens = args[0]  # (batch, seq)
        positions = tokens.numel()
        return positions * flops_per_token(model.config, tokens.size(1)), int((tokens != pad_id).sum())

    return cost


def encoder_decoder_step_cost(config: dict, pad_id: int) -> Cost:
    """(FLOPs, tokens) of the encoder-decoder's forward on (source, decoder input, masks):
    ``encoder_decoder_flops`` with ``config`` (``make_model``'s keywords) and the model's target
    vocabulary, per sentence pair, at the batch's padded lengths; the source and decoder-input
    tokens other than ``pad_id`` as tokens."""

    def cost(model: torch.nn.Module, args: tuple) -> tuple[int, int]:
        source, target = args[0], args[1]  # (batch, source), (batch, target - 1)
        parts = encoder_decoder_flops(config, model.generator.vocab_size, source.size(1), target.size(1))
        real = int((source != pad_id).sum() + (target != pad_id).sum())
        return source.size(0) * sum(parts.values()), real

    return cost


@dataclass(frozen=True)
class Throughput:
    """What the metered steps did: their count, FLOPs, tokens and seconds, and the peaks."""

    steps: int
    flops: int
    tokens: int
    seconds: float
    peaks: tuple[float, float]  # FLOP/s before and after the steps
    threads: int
    device: str

    @property
    def peak(self) -> float:
        return max(self.peaks)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    @property
    def flop_rate(self) -> float:
        return self.flops / self.seconds

    @property
    def mfu(self) -> float:
        return mfu(self.flops, self.seconds, self.peak)

    def line(self, name: str = "") -> str:
        """One line: tokens/s, achieved GFLOP/s and MFU, and what they are made of."""
        where = f"{self.threads} thread{'s' if self.threads != 1 else ''}" if self.device == "cpu" else self.device
        return (
            f"{name + ': ' if name else ''}{self.tokens_per_second:,.0f} tokens/s (padding not counted), "
            f"{self.flop_rate / 1e9:.3g} GFLOP/s, MFU {100 * self.mfu:.2g}% of a float32 peak of "
            f"{self.peak / 1e9:.1f} GFLOP/s measured in this run on {where} "
            f"({self.peaks[0] / 1e9:.1f} before the steps, {self.peaks[1] / 1e9:.1f} after); "
            f"{self.steps:,} steps, {self.tokens:,} tokens, {self.flops / 1e12:.3g} TFLOP "
            f"in {self.seconds:.1f} s of steps"
        )


class StepMeter:
    """Meter the training steps of the models of ``model_class`` run while it is active.

    ``cost(module, args)`` gives the (FLOPs, tokens) of one training forward (``gpt_step_cost``,
    ``encoder_decoder_step_cost``); forwards in eval mode or without gradients (evaluation,
    decoding) are not counted. ``result()`` after the block gives the ``Throughput``."""

    def __init__(self, model_class: type, cost: Cost, device="cpu"):
        self.model_class, self.cost, self.device = model_class, cost, torch.device(device)
        self.steps = self.flops = self.tokens = 0
        self.seconds = 0.0
        self._started: float | None = None  # when the step in progress began
        self._pending = (0, 0)  # its forwards' FLOPs and tokens so far
        self._handles: list = []
        self._peaks: list[float] = []

    def _peak(self) -> float:
        # matmul_peak draws random matrices: on a forked generator, so that the training's draws
        # (initial weights, dropout) are the same with the meter as without it
        gpu = [torch.device(self.device).index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=gpu):
            return matmul_peak(self.device, size=PEAK_SIZE)

    def _forward(self, module: torch.nn.Module, args: tuple) -> None:
        if not (isinstance(module, self.model_class) and module.training and torch.is_grad_enabled()):
            return
        if self._started is None:
            synchronize(self.device)
            self._started = time.perf_counter()
        flops, tokens = self.cost(module, args)
        self._pending = (self._pending[0] + flops, self._pending[1] + tokens)

    def _stepped(self, optimizer, args, kwargs) -> None:
        if self._started is None:
            return  # not a step of the metered model
        synchronize(self.device)
        self.seconds += time.perf_counter() - self._started
        self.flops += self._pending[0]
        self.tokens += self._pending[1]
        self.steps += 1
        self._started, self._pending = None, (0, 0)

    def __enter__(self) -> Self:
        self._peaks.append(self._peak())
        self._handles = [
            register_module_forward_pre_hook(self._forward),
            register_optimizer_step_post_hook(self._stepped),
        ]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if exc[0] is None:
            self._peaks.append(self._peak())

    def result(self) -> Throughput:
        if len(self._peaks) != 2 or not self.steps:
            raise RuntimeError("StepMeter.result: no metered steps (use it as a `with` block around training)")
        threads = torch.get_num_threads()
        return Throughput(
            self.steps, self.flops, self.tokens, self.seconds, tuple(self._peaks), threads, str(self.device)
        )
