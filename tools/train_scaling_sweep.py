"""A scaling law for the poet (issue 44): an IsoFLOP sweep, a fit, and a larger run it predicts.

    python tools/train_scaling_sweep.py --plan               # the arms, steps and FLOPs (no training)
    python tools/train_scaling_sweep.py --device cpu  # the committed record: every arm, the fit, the held-out run
    python tools/train_scaling_sweep.py --device cpu --seed 1  # another seed: scaling_sweep_seed1.json
    python tools/train_scaling_sweep.py --refit      # fit the recorded runs again (after a change to the fit)
    python tools/train_scaling_sweep.py --refit --seed 1 --train-held-out  # and train the run a new fit names
    python tools/train_scaling_sweep.py --device cuda        # the same on a GPU
    python tools/train_scaling_sweep.py --device cpu --check  # retrain one recorded arm and compare
    python tools/train_scaling_sweep.py --budgets 1e9 3e9 --held-out-budget 1e10 --sizes 32x1 64x1 --out DIR

The committed record (``weights/scaling_sweep.json``, chapter 18) was made with the defaults on one
thread of a shared 2-core Intel Xeon on 2026-11-28: 18 arms and the held-out run, 5e13 FLOPs, 26 minutes.
The grid is bounded by the data, not by the machine: the training poems are about 770,000 tokens, and
scaling laws assume tokens read once or a few times (Muennighoff et al. 2023: up to about four epochs
are nearly as good as new data). So the held-out budget, 8e12, is where the fit's size (about 450,000
parameters) reads the poems under four times, the budgets are a factor of two apart below it, and the
held-out run is one step of the grid beyond the largest. The sizes run from d_model 32 and 1 layer to 128
and 3, because the poet's 5,501-token vocabulary makes the embedding most of a small model's weights:
the smallest sizes are nearly all embedding, the largest read under one token per weight at the
smallest budget. Batches are of 16 poems, not the poet's 64: at these budgets a large model gets only
tens of steps of 64 poems; a pilot at 1e12 FLOPs (2026-11-28) gave 5.21 against about 5.7 nats for
d_model 64 with one layer, and 5.76 against 6.11 for 128 with three, with batches of 16 against 64.
An earlier record (batches of 64, budgets 5e11 to 5e12, sizes from 64x1 to 160x4, held-out run at
1.5e13 reading the poems 7.2 times) found the smallest size best at every budget and missed its
held-out run by 4.8%.
``--device`` (``auto``: CUDA, then MPS, then the CPU) holds everything; the record names the device,
torch's version and the float32 peak measured in the same run, and each arm's seconds, FLOP/s and
MFU against that peak. Training is float32 with TF32 off.

On chapter 15's Tang poems (``poem_split``), with the poet's recipe (``train_lm``: AdamW, warm-up
then linear decay, batches of ``BATCH_SIZE`` poems drawn by ``random.Random(seed)``), each arm is a
GPT of one size (``SIZES``: d_model and layers, 32 features a head) trained for as many steps as fit
a compute budget (``BUDGETS``). A step's FLOPs are counted exactly from its batch's padded length
with chapter 18's ``flops_per_token`` (the batches are drawn here as ``train_lm`` draws them), and
an arm takes the fewest steps whose FLOPs reach the budget. Each arm is scored by its mean
cross-entropy per token on the held-out poems (``poem_losses``).

The fit (chapter 18's ``isoflop_fit``, with ``predict_at``): at each budget a parabola of the held-out
loss against log(size), the size counted without the embedding tables (chapter 18's ``SIZE``, as Kaplan
et al. 2020 count N: the poet's vocabulary makes the tables most of a small model), gives the
compute-optimal size and its loss (the IsoFLOP method, Hoffmann et al. 2022, approach 2); a line
through log(optimal loss) against log(budget) is the law L(C) = a · C^(−b), and a line through
log(optimal parameters) against log(budget) gives N_opt(C). The law then predicts the loss at
``HELD_OUT_BUDGET``, and one run at that budget, of the size N_opt predicts (the nearest of
``SIZES``), is trained after the fit: ``held_out_run``. Written to
``src/transformer_book/weights/scaling_sweep.json``: ``settings``, ``runs`` (budget -> size ->
parameters, steps, tokens, epochs, loss), ``fit``, ``prediction`` (with its ``loss``) and
``held_out_run`` (with its ``loss``), and ``machine``. The record is rewritten after every arm, so
a sweep that stops keeps the arms it trained. Where the parabola at a budget has no minimum, the
lowest arm stands for the optimum and its ``method`` says so.

``--check`` retrains the recorded compute-optimal arm of the smallest budget and compares its
held-out loss with the record's within ``CHECK_TOLERANCE``: on one CPU and thread count the rerun
is bit-identical, but GPU kernels are not bit-reproducible (atomic additions in the backward pass
run in a varying order), and training carries their last-bit differences into the loss.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

from notebooks import WEIGHTS_DIR

BUDGETS = (1e12, 2e12, 4e12)  # training FLOPs per arm
HELD_OUT_BUDGET = 8e12  # the run the fit predicts, trained after the fit: under 4 epochs
SIZES = ((32, 1), (32, 2), (64, 1), (64, 2), (96, 2), (128, 3))  # (d_model, layers)
BATCH_SIZE = 16  # poems a step: more steps for a budget than the poet's 64 (see above)
LR = 3e-3
SEED = 0
MAX_LEN = 64  # the poet's
CHECK_TOLERANCE = 0.02  # nats of held-out loss between a rerun of one arm and its record (see --check)
ASSUMED_RATE = 2e12  # FLOP/s, for the plan's estimate of its duration (the poet's step on an H100)
STEP_FLOOR = 0.008  # seconds: a step no faster than this on a GPU (kernel launches), for the estimate


def config_of(size: tuple[int, int], vocab_size: int):
    from transformer_book import GPTConfig

    d_model, layers = size
    return GPTConfig(vocab_size, max_len=MAX_LEN, d_model=d_model, heads=d_model // 32, layers=layers)


def parameters_of(config) -> int:
    from transformer_book import GPT

    return sum(p.numel() for p in GPT(config).parameters())


def size_of(config) -> int:
    """The model's size as the fit reads it (chapter 18's ``SIZE``): its parameters outside the
    embedding tables, as Kaplan et al. count N."""
    from transformer_book import GPT, non_embedding_parameters

    return non_embedding_parameters(GPT(config))


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


def record_name(seed: int = SEED) -> str:
    """The record's file for ``seed``, as chapter 18's ``scaling_record`` reads it."""
    from transformer_book import scaling_record_name

    return scaling_record_name(seed)


def plan(poems, vocab, budgets=BUDGETS, sizes=SIZES, seed: int = SEED) -> list[dict]:
    """Every arm of the sweep: its size, parameters, steps, FLOPs, tokens and epochs (no training)."""
    training_tokens = sum(len(vocab.encode(poem)) for poem in poems)
    arms = []
    for budget in budgets:
        for size in sizes:
            config = config_of(size, len(vocab))
            parameters = parameters_of(config)
            steps, flops, tokens = steps_for(budget, config, poems, vocab, seed)
            arms.append(
                {
                    "budget": budget,
                    "d_model": size[0],
                    "layers": size[1],
                    "parameters": parameters,
                    "non_embedding_parameters": size_of(config),
                    "steps": steps,
                    "flops": flops,
                    "tokens": tokens,
                    "tokens_per_parameter": round(tokens / parameters, 2),
                    "epochs": round(tokens / training_tokens, 3),
                }
            )
    return arms


def train_arm(arm: dict, poems, held_out, vocab, device=None, seed: int = SEED) -> tuple[float, float]:
    """Train one arm with the poet's recipe on ``device`` (float32, TF32 off): its mean held-out
    cross-entropy per token, and the seconds its training took."""
    from transformer_book import GPT, poem_losses, synchronize, train_lm

    device = torch.device("cpu") if device is None else torch.device(device)
    torch.manual_seed(seed)
    model = GPT(config_of((arm["d_model"], arm["layers"]), len(vocab))).to(device)
    synchronize(device)
    started = time.perf_counter()
    train_lm(model, vocab, poems, arm["steps"], batch_size=BATCH_SIZE, lr=LR, seed=seed, device=device)
    synchronize(device)
    seconds = time.perf_counter() - started
    with torch.no_grad():
        sums, counts = poem_losses(model, vocab, held_out, device=device)
    return float(sums.sum() / counts.sum()), seconds


def timing(arm: dict, seconds: float, machine: dict) -> dict:
    """An arm's seconds, the FLOP/s its training reached and its MFU against the float32 peak measured
    in the same run (the steps' time includes reading the batches, as training does)."""
    rate = arm["flops"] / seconds
    return {"seconds": round(seconds, 2), "flops_per_s": rate, "mfu": round(rate / machine["peak_flops"]["fp32"], 4)}


def estimate_seconds(arms: list[dict], rate: float = ASSUMED_RATE, floor: float = STEP_FLOOR) -> float:
    """A rough duration of training ``arms``: each step at ``rate`` FLOP/s, and no faster than
    ``floor`` seconds (on a GPU a small model's step waits on kernel launches, not on arithmetic)."""
    return sum(arm["steps"] * max(floor, arm["flops"] / arm["steps"] / rate) for arm in arms)


def record_of(
    machine: dict,
    runs: list[dict],
    budgets,
    sizes,
    law=None,
    prediction=None,
    held_out_run=None,
    held_out_budget: float = HELD_OUT_BUDGET,
    seed: int = SEED,
) -> dict:
    return {
        "machine": machine,
        "settings": {
            "budgets": list(budgets),
            "held_out_budget": held_out_budget,
            "sizes": [list(size) for size in sizes],
            "batch_size": BATCH_SIZE,
            "lr": LR,
            "seed": seed,
            "check_tolerance": CHECK_TOLERANCE,
        },
        "runs": runs,
        "fit": law,
        "prediction": prediction,
        "held_out_run": held_out_run,
    }


def write(record: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / record_name(record["settings"]["seed"])
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


def check(out: Path, device: torch.device, poems, held_out, vocab, seed: int = SEED) -> int:
    """Retrain the recorded compute-optimal arm of the smallest budget; compare its loss."""
    path = out / record_name(seed)
    if not path.exists():
        raise SystemExit(f"--check: no record at {path}; run the sweep first")
    record = json.loads(path.read_text(encoding="utf-8"))
    smallest = min(run["budget"] for run in record["runs"])
    arm = min((run for run in record["runs"] if run["budget"] == smallest), key=lambda run: run["loss"])
    loss, seconds = train_arm(arm, poems, held_out, vocab, device, record["settings"]["seed"])
    recorded = record["machine"]
    difference = loss - arm["loss"]
    print(
        f"--check: {arm['d_model']}x{arm['layers']} at {arm['budget']:.2g} FLOPs on {device.type}: "
        f"{loss:.4f} now, {arm['loss']:.4f} recorded on {recorded['device']} ({recorded['device_name']}): "
        f"{difference:+.4f} ({seconds:.1f} s)"
    )
    if recorded["device"] != device.type:
        print(f"--check: the record was made on {recorded['device']}, this check on {device.type}: kernels differ")
    if abs(difference) > CHECK_TOLERANCE:
        print(f"--check FAILED: the loss moved by more than {CHECK_TOLERANCE}", file=sys.stderr)
        return 1
    print(f"--check passed (tolerance {CHECK_TOLERANCE} nats)")
    return 0


def nearest_size(sizes, vocab_size: int, parameters: float) -> tuple[int, int]:
    """The size of ``sizes`` whose count of non-embedding parameters (the fit's ``SIZE``) is nearest
    ``parameters`` in log: the held-out run's."""
    return min(sizes, key=lambda s: abs(math.log(size_of(config_of(s, vocab_size)) / parameters)))


def refit(out: Path, seed: int = SEED, train: bool = False, device: str = "cpu") -> int:
    """Fit the recorded runs again with the package's ``isoflop_fit`` (after a change to the fit) and
    rewrite the record's ``fit`` and ``prediction``. If the new prediction names another size for the
    held-out run than the one trained, refused; with ``train``, that size is trained now (after the
    fit, as the sweep trains it) and the earlier run is kept as ``superseded_held_out_run``, with the
    size measure that chose it."""
    from transformer_book import SIZE, PoemVocabulary, isoflop_fit, poem_split, predict_at

    path = out / record_name(seed)
    record = json.loads(path.read_text(encoding="utf-8"))
    vocab_size = len(PoemVocabulary.from_poems(poem_split("train")))

    def with_size(run: dict) -> dict:  # records before the fit read this size lack it
        return dict(run, non_embedding_parameters=size_of(config_of((run["d_model"], run["layers"]), vocab_size)))

    runs = [with_size(run) for run in record["runs"]]
    law = isoflop_fit(runs, size=SIZE)
    # the budget the held-out run trained at (records before 2026-11-28 wrote the default here)
    settings = dict(record["settings"], held_out_budget=record["held_out_run"]["budget"])
    prediction = predict_at(law, settings["held_out_budget"])
    sizes = [tuple(size) for size in record["settings"]["sizes"]]
    size = nearest_size(sizes, vocab_size, prediction["parameters"])
    held_out_run = with_size(record["held_out_run"])
    trained = (held_out_run["d_model"], held_out_run["layers"])
    extra = {}
    if size != trained:
        if not train:
            print(
                f"--refit: the new fit would train {size}, the record trained {trained}; --train-held-out trains it",
                file=sys.stderr,
            )
            return 1
        from speed_ladder import device_from, machine

        where = device_from(device)
        torch.set_num_threads(1)
        poems, held_out = poem_split("train"), poem_split("held-out")
        vocab = PoemVocabulary.from_poems(poems)
        (run,) = plan(poems, vocab, budgets=(settings["held_out_budget"],), sizes=(size,), seed=seed)
        facts = machine(where, bf16=False)
        loss, seconds = train_arm(run, poems, held_out, vocab, where, seed)
        chosen_by = (record["fit"] or {}).get("size", "parameters")
        extra = {"superseded_held_out_run": dict(held_out_run, chosen_by=chosen_by)}
        held_out_run = dict(run, loss=round(loss, 4), **timing(run, seconds, facts))
    write(
        dict(record, runs=runs, settings=settings, fit=law, prediction=prediction, held_out_run=held_out_run, **extra),
        out,
    )
    error = held_out_run["loss"] / prediction["loss"] - 1
    print(f"--refit: predicted {prediction['loss']:.4f}, trained {held_out_run['loss']:.4f} ({error:+.2%})")
    return 0


def parse_size(text: str) -> tuple[int, int]:
    try:
        d_model, layers = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is d_modelxlayers, e.g. 128x4; got {text!r}") from None
    if d_model % 32 or d_model < 32 or layers < 1:
        raise argparse.ArgumentTypeError(f"d_model must be a multiple of 32 and layers at least 1; got {text!r}")
    return d_model, layers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="print the arms and their steps; train nothing")
    parser.add_argument("--check", action="store_true", help="retrain one recorded arm and compare its loss")
    parser.add_argument("--device", default="auto", help="cuda, mps, cpu or auto (default)")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS), help="FLOPs per arm")
    parser.add_argument("--held-out-budget", type=float, default=HELD_OUT_BUDGET)
    parser.add_argument("--sizes", type=parse_size, nargs="+", default=list(SIZES), help="d_modelxlayers")
    parser.add_argument("--refit", action="store_true", help="fit the recorded runs again; train nothing")
    parser.add_argument(
        "--train-held-out", action="store_true", help="with --refit: train the held-out run the new fit names"
    )
    parser.add_argument("--seed", type=int, default=SEED, help="initialisation and batches (0: chapter 18's record)")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"--seed must be 0 or more; got {args.seed}")
    if args.refit:
        return refit(args.out, args.seed, args.train_held_out, args.device)
    from speed_ladder import device_from, machine
    from transformer_book import SIZE, isoflop_fit, predict_at, synchronize

    device = device_from(args.device)
    torch.set_num_threads(1)
    from transformer_book import PoemVocabulary, poem_split

    poems = poem_split("train")
    vocab = PoemVocabulary.from_poems(poems)
    held_out = poem_split("held-out")
    if args.check:
        return check(args.out, device, poems, held_out, vocab, args.seed)
    arms = plan(poems, vocab, args.budgets, args.sizes, args.seed)
    # the held-out run's size is the fit's: counted here as the size whose run would take longest
    last = [max(plan(poems, vocab, (args.held_out_budget,), args.sizes), key=lambda arm: estimate_seconds([arm]))]
    total_flops = sum(arm["flops"] for arm in arms + last)
    total_steps = sum(arm["steps"] for arm in arms + last)
    print(f"{'budget':>8} {'d_model':>7} {'layers':>6} {'params':>9} {'steps':>6} {'tokens/param':>12} {'epochs':>6}")
    for arm in arms:
        print(
            f"{arm['budget']:8.2g} {arm['d_model']:7d} {arm['layers']:6d} {arm['parameters']:9,d} "
            f"{arm['steps']:6d} {arm['tokens_per_parameter']:12.2f} {arm['epochs']:6.3f}"
        )
    print(
        f"plan: {len(arms)} arms and a held-out run at {args.held_out_budget:.2g}: {total_flops:.3g} FLOPs, "
        f"{total_steps:,} steps (the held-out run counted at its slowest size); at "
        f"{ASSUMED_RATE / 1e12:g} TFLOP/s and {1000 * STEP_FLOOR:g} ms a step at least, about "
        f"{estimate_seconds(arms + last):.0f} s"
    )
    if args.plan:
        return 0
    facts = machine(device, bf16=False)
    print(
        f"{facts['device_name']} ({device.type}), torch {facts['torch']}: float32 peak measured now "
        f"{facts['peak_flops']['fp32'] / 1e12:.3g} TFLOP/s (TF32 off, as the sweep trains)",
        flush=True,
    )
    runs = []
    for arm in arms:
        loss, seconds = train_arm(arm, poems, held_out, vocab, device, args.seed)
        runs.append(dict(arm, loss=round(loss, 4), **timing(arm, seconds, facts)))
        print(
            f"{arm['budget']:8.2g} {arm['d_model']:4d}x{arm['layers']}: held-out loss {loss:.4f} "
            f"({seconds:.1f} s, MFU {runs[-1]['mfu']:.1%})",
            flush=True,
        )
        write(
            record_of(facts, runs, args.budgets, args.sizes, held_out_budget=args.held_out_budget, seed=args.seed),
            args.out,
        )  # so far, in case it stops
    law = isoflop_fit(runs, size=SIZE)
    prediction = predict_at(law, args.held_out_budget)
    size = nearest_size(args.sizes, len(vocab), prediction["parameters"])
    (run,) = plan(poems, vocab, budgets=(args.held_out_budget,), sizes=(size,), seed=args.seed)
    loss, seconds = train_arm(run, poems, held_out, vocab, device, args.seed)
    held_out_run = dict(run, loss=round(loss, 4), **timing(run, seconds, facts))
    synchronize(device)
    record = record_of(
        facts, runs, args.budgets, args.sizes, law, prediction, held_out_run, args.held_out_budget, args.seed
    )
    path = write(record, args.out)
    error = held_out_run["loss"] / prediction["loss"] - 1
    print(
        f"law: L(C) = {law['loss_law']['a']:.4g} * C^-{law['loss_law']['b']:.4f}, "
        f"N_opt(C) = {law['size_law']['k']:.4g} * C^{law['size_law']['e']:.4f}"
    )
    print(
        f"predicted at {args.held_out_budget:.2g} FLOPs: loss {prediction['loss']:.4f} with "
        f"{prediction['parameters']:,.0f} parameters; trained {size[0]}x{size[1]} "
        f"({held_out_run['parameters']:,d}): {held_out_run['loss']:.4f}, {error:+.2%}"
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
