"""A scaling law for the poet (issue 44): an IsoFLOP sweep, a fit, and a larger run it predicts.

    python tools/train_scaling_sweep.py --plan        # the sweep's arms and steps, counted (no training)
    python tools/train_scaling_sweep.py               # train every arm, fit, train the held-out run (not run yet)

SCAFFOLD: the plan, the training of one arm and the fit are written and the plan and the fit are
tested (tests/test_train_scaling_sweep.py); the sweep itself has not been run (it needs about an
hour on a quiet 2-core machine, MAINTAINING.md's plan). Until it has, ``weights/scaling_sweep.json``
does not exist and nothing reads it.

On chapter 15's Tang poems (``poem_split``), with the poet's recipe (``train_lm``: AdamW, warm-up
then linear decay, batches of ``BATCH_SIZE`` poems drawn by ``random.Random(seed)``), each arm is a
GPT of one size (``SIZES``: d_model and layers, 32 features a head) trained for as many steps as fit
a compute budget (``BUDGETS``). A step's FLOPs are counted exactly from its batch's padded length
with chapter 18's ``flops_per_token`` (the batches are drawn here as ``train_lm`` draws them), and
an arm takes the fewest steps whose FLOPs reach the budget. Each arm is scored by its mean
cross-entropy per token on the held-out poems (``poem_losses``).

The fit (``fit``): at each budget a parabola of the held-out loss against log(parameters) gives the
compute-optimal size and its loss (the IsoFLOP method, Hoffmann et al. 2022, approach 2); a line
through log(optimal loss) against log(budget) is the law L(C) = a · C^(−b), and a line through
log(optimal parameters) against log(budget) gives N_opt(C). The law then predicts the loss at
``HELD_OUT_BUDGET``, and one run at that budget, of the size N_opt predicts (the nearest of
``SIZES``), is trained after the fit: ``held_out_run``. Written to
``src/transformer_book/weights/scaling_sweep.json``: ``settings``, ``runs`` (budget -> size ->
parameters, steps, tokens, epochs, loss), ``fit``, ``prediction`` (with its ``loss``) and
``held_out_run`` (with its ``loss``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

import torch

from notebooks import REPO_ROOT

WEIGHTS_DIR = REPO_ROOT / "src" / "transformer_book" / "weights"
RECORD_FILE = "scaling_sweep.json"
BUDGETS = (1e12, 3e12, 1e13)  # training FLOPs per arm
HELD_OUT_BUDGET = 3e13  # the run the fit predicts, trained after the fit
SIZES = ((64, 2), (96, 2), (96, 3), (128, 3), (128, 4), (160, 4), (192, 5))  # (d_model, layers)
BATCH_SIZE = 64
LR = 3e-3
SEED = 0
MAX_LEN = 64  # the poet's


def config_of(size: tuple[int, int], vocab_size: int):
    from transformer_book import GPTConfig

    d_model, layers = size
    return GPTConfig(vocab_size, max_len=MAX_LEN, d_model=d_model, heads=d_model // 32, layers=layers)


def parameters_of(config) -> int:
    from transformer_book import GPT

    return sum(p.numel() for p in GPT(config).parameters())


def steps_for(budget: float, config, poems, vocab, seed: int = SEED) -> tuple[int, int, int]:
    """The fewest steps whose FLOPs reach ``budget``, drawing the batches as ``train_lm`` does:
    (steps, their FLOPs, the real tokens they read)."""
    from transformer_book import flops_per_token

    draw = random.Random(seed)
    lengths = [len(vocab.encode(poem)) for poem in poems]
    index = {poem: i for i, poem in enumerate(poems)}
    steps = flops = tokens = 0
    while flops < budget:
        batch = draw.sample(poems, min(BATCH_SIZE, len(poems)))
        width = max(lengths[index[poem]] for poem in batch)
        flops += len(batch) * width * flops_per_token(config, width)
        tokens += sum(lengths[index[poem]] for poem in batch)
        steps += 1
    return steps, flops, tokens


def plan(poems, vocab, budgets=BUDGETS, sizes=SIZES) -> list[dict]:
    """Every arm of the sweep: its size, parameters, steps, FLOPs, tokens and epochs (no training)."""
    training_tokens = sum(len(vocab.encode(poem)) for poem in poems)
    arms = []
    for budget in budgets:
        for size in sizes:
            config = config_of(size, len(vocab))
            parameters = parameters_of(config)
            steps, flops, tokens = steps_for(budget, config, poems, vocab)
            arms.append(
                {
                    "budget": budget,
                    "d_model": size[0],
                    "layers": size[1],
                    "parameters": parameters,
                    "steps": steps,
                    "flops": flops,
                    "tokens": tokens,
                    "tokens_per_parameter": round(tokens / parameters, 2),
                    "epochs": round(tokens / training_tokens, 3),
                }
            )
    return arms


def train_arm(arm: dict, poems, held_out, vocab) -> float:
    """Train one arm with the poet's recipe; its mean held-out cross-entropy per token."""
    from transformer_book import GPT, poem_losses, train_lm

    torch.manual_seed(SEED)
    model = GPT(config_of((arm["d_model"], arm["layers"]), len(vocab)))
    train_lm(model, vocab, poems, arm["steps"], batch_size=BATCH_SIZE, lr=LR, seed=SEED)
    sums, counts = poem_losses(model, vocab, held_out)
    return float(sums.sum() / counts.sum())


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = intercept + slope · x."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def _parabola_minimum(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """The vertex (x, y) of the least-squares parabola through the points."""
    import numpy

    a, b, c = numpy.polyfit(xs, ys, 2)
    if a <= 0:
        raise ValueError(f"the losses at one budget have no minimum in log(parameters): {list(zip(xs, ys))}")
    x = -b / (2 * a)
    return float(x), float(c - b * b / (4 * a))


def fit(runs: list[dict]) -> dict:
    """The IsoFLOP fit of ``runs`` (each with budget, parameters and loss): the optimum at each budget,
    L(C) = a · C^(-b) through the optima's losses, and N_opt(C) = k · C^e through their sizes."""
    budgets = sorted({run["budget"] for run in runs})
    if len(budgets) < 2:
        raise ValueError(f"a law needs at least two budgets; got {budgets}")
    optima = []
    for budget in budgets:
        arms = [run for run in runs if run["budget"] == budget]
        log_n, loss = _parabola_minimum([math.log(run["parameters"]) for run in arms], [run["loss"] for run in arms])
        optima.append({"budget": budget, "parameters": math.exp(log_n), "loss": loss})
    log_c = [math.log(o["budget"]) for o in optima]
    loss_intercept, loss_slope = _line(log_c, [math.log(o["loss"]) for o in optima])
    size_intercept, size_slope = _line(log_c, [math.log(o["parameters"]) for o in optima])
    return {
        "optima": optima,
        "loss_law": {"a": math.exp(loss_intercept), "b": -loss_slope},  # L(C) = a · C^(-b)
        "size_law": {"k": math.exp(size_intercept), "e": size_slope},  # N_opt(C) = k · C^e
    }


def predict(law: dict, budget: float) -> dict:
    """The loss and the compute-optimal parameters the fit predicts at ``budget``."""
    loss = law["loss_law"]["a"] * budget ** -law["loss_law"]["b"]
    parameters = law["size_law"]["k"] * budget ** law["size_law"]["e"]
    return {"budget": budget, "loss": loss, "parameters": parameters}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="print the arms and their steps; train nothing")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    from transformer_book import PoemVocabulary, poem_split

    poems = poem_split("train")
    vocab = PoemVocabulary.from_poems(poems)
    arms = plan(poems, vocab)
    if args.plan:
        print(
            f"{'budget':>8} {'d_model':>7} {'layers':>6} {'params':>9} {'steps':>6} {'tokens/param':>12} {'epochs':>6}"
        )
        for arm in arms:
            print(
                f"{arm['budget']:8.0e} {arm['d_model']:7d} {arm['layers']:6d} {arm['parameters']:9,d} "
                f"{arm['steps']:6d} {arm['tokens_per_parameter']:12.2f} {arm['epochs']:6.3f}"
            )
        return 0
    # Not run yet (see the module's docstring): train every arm, fit, predict, train the held-out run.
    held_out = poem_split("held-out")
    runs = [dict(arm, loss=round(train_arm(arm, poems, held_out, vocab), 4)) for arm in arms]
    law = fit(runs)
    prediction = predict(law, HELD_OUT_BUDGET)
    size = min(SIZES, key=lambda s: abs(math.log(parameters_of(config_of(s, len(vocab))) / prediction["parameters"])))
    (run,) = plan(poems, vocab, budgets=(HELD_OUT_BUDGET,), sizes=(size,))
    held_out_run = dict(run, loss=round(train_arm(run, poems, held_out, vocab), 4))
    record = {
        "settings": {"budgets": BUDGETS, "sizes": SIZES, "batch_size": BATCH_SIZE, "lr": LR, "seed": SEED},
        "runs": runs,
        "fit": law,
        "prediction": prediction,
        "held_out_run": held_out_run,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / RECORD_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    error = held_out_run["loss"] / prediction["loss"] - 1
    print(f"predicted {prediction['loss']:.4f}, trained {held_out_run['loss']:.4f}: {error:+.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
