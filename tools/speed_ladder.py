"""The speed ladder of the poet's training step (issue 44): each rung against the float32 baseline,
measured side by side in one run, on the CPU or a CUDA GPU.

    python tools/speed_ladder.py --plan                  # the rungs and what each changes (no training)
    python tools/speed_ladder.py                         # every rung of this machine's ladder
    python tools/speed_ladder.py --device cuda --out DIR # the GPU's ladder, its record in DIR
    python tools/speed_ladder.py --rungs bf16 --steps 20

On chapter 15's poems, the shipped poet's configuration and recipe (AdamW at ``LR``, batches of
``BATCH_SIZE`` poems drawn by ``random.Random(SEED)``), every arm (the baseline, each rung and
``baseline_again``, a second copy of the baseline that shows the noise of the timings and of the
losses) starts from the same seeded weights and takes the same batches, one step each in turn (the
order rotating every step), so a machine that slows down slows all alike. The batch is built before
the clock starts; the clock stops after the optimizer's step, the device synchronised.

The two ladders:

* the CPU's (``CPU_RUNGS``): each rung is the baseline (float32, PyTorch's fused attention kernel,
  AdamW's per-weight loop, eager, one thread) with one change, as each change wins or loses on its
  own on a CPU (bfloat16 needs AVX512-BF16 or AMX instructions, ``has_bf16_matmul``);
* a CUDA GPU's (``CUDA_RUNGS``): each rung adds its change to the rung above it, from a float32
  baseline with TF32 off, the book's explicit attention and AdamW's per-weight loop: TF32, bfloat16
  autocast, the fused attention kernel, the fused AdamW, ``torch.compile`` on fixed shapes (the
  batches padded to the model's ``max_len``, so it compiles once), then 4 times the batch.

For each arm: the median step time, tokens/s (padding not counted) and its ratio to the baseline's,
the FLOP/s its steps reach (``flops_per_token`` of the padded batch) and the MFU against the float32
peak measured in the same run, against the peak of the arm's own precision measured in the same run
(TF32, bfloat16) and, on an H100, against the data sheet's (``DATASHEET``, named). Its loss check:
after the timed steps every arm's model is scored in float32 on the same ``EVAL_POEMS`` held-out
poems; an arm passes when its held-out loss is within ``LOSS_TOLERANCE`` of the baseline's (a rung
that reads more poems a step, no worse than the baseline's by more than it). The tolerance is wider
than the two baselines' difference should be: GPU kernels are not bit-reproducible (atomic additions
in the backward pass), so two runs of one recipe differ in the last bits and training amplifies it;
``baseline_again`` measures that difference in the same run. The record (``--out``) is
``speed_ladder_<device>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

BATCH_SIZE = 64
LR = 3e-3
SEED = 0
EVAL_POEMS = 256  # held-out poems that score every arm after its steps
LOSS_TOLERANCE = 0.05  # nats of held-out loss: a rung's loss check (see the docstring)
# What an arm is: these settings, the baseline's first.
COMMON = dict(tf32=False, bf16=False, adamw="loop", compile=False, batch=BATCH_SIZE, threads=1, loss="logits")
BASELINE = {
    "cpu": dict(COMMON, attention="fused"),  # PyTorch's kernel, as the poet trains on the CPU
    "cuda": dict(COMMON, attention="explicit"),  # the book's: the GPU's ladder adds the fused one
}
# name: (what the rung changes, the change). The CPU's rungs each change the baseline once.
CPU_RUNGS = {
    "foreach": ("AdamW(foreach=True): one kernel per step for all weights", {"adamw": "foreach"}),
    "fused": ("AdamW(fused=True): the update fused into one kernel", {"adamw": "fused"}),
    "explicit_attention": (
        "chapter 2's explicit attention (need_weights=True) instead of the fused kernel",
        {"attention": "explicit"},
    ),
    "bf16": ("torch.autocast(bfloat16) around the forward pass and the loss", {"bf16": True}),
    "bf16_math_attention": (
        "bfloat16 autocast with PyTorch's math attention kernel (sdpa_kernel(SDPBackend.MATH))",
        {"bf16": True, "attention": "math"},
    ),
    "chunked_loss": (
        "chapter 18's lm_loss: the hidden states sliced before the head, the head and the loss chunked",
        {"loss": "chunked"},
    ),
    "bf16_chunked_loss": (
        "lm_loss(precision='bf16'): bfloat16 autocast, the math attention kernel, the chunked head and loss",
        {"loss": "chunked", "bf16": True, "attention": "math"},
    ),
    "compile": ("torch.compile(model, dynamic=False), the batches padded to max_len", {"compile": True}),
    "threads2": ("torch.set_num_threads(2) for the rung (the baseline keeps 1)", {"threads": 2}),
    "batch128": ("128 poems a step (tokens/s compared, not step time)", {"batch": 2 * BATCH_SIZE}),
}
# A GPU's rungs each add their change to the rung above.
CUDA_RUNGS = {
    "tf32": ("float32 products on the tensor cores in TF32 (set_float32_matmul_precision('high'))", {"tf32": True}),
    "bf16": ("+ torch.autocast(bfloat16) around the forward pass and the loss", {"bf16": True}),
    "sdpa": ("+ the fused attention kernel (scaled_dot_product_attention)", {"attention": "fused"}),
    "fused_adamw": ("+ AdamW(fused=True): the update in one kernel", {"adamw": "fused"}),
    "compile": ("+ torch.compile(model, dynamic=False), the batches padded to max_len", {"compile": True}),
    "batch256": ("+ 256 poems a step (tokens/s compared, not step time)", {"batch": 4 * BATCH_SIZE}),
}
# NVIDIA's data sheet of the H100 SXM5, dense (no sparsity), FLOP/s: read only on an H100, named.
DATASHEET = {"name": "NVIDIA H100 SXM5 data sheet, dense", "fp32": 67e12, "tf32": 495e12, "bf16": 989e12}


def is_h100_sxm(name: str) -> bool:
    """Whether a CUDA device's name is an H100 SXM5's ("NVIDIA H100 80GB HBM3"; the PCIe and NVL
    cards have other peaks and say so in their names)."""
    return "H100" in name and not any(other in name for other in ("PCIe", "NVL"))


def device_from(name: str) -> torch.device:
    """``cuda``, ``mps``, ``cpu`` or ``auto`` (CUDA, then MPS, then the CPU) as a torch.device."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name not in ("cuda", "mps", "cpu"):
        raise ValueError(f"device must be cuda, mps, cpu or auto; got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but torch.cuda.is_available() is False here")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' asked for, but torch.backends.mps.is_available() is False here")
    return torch.device(name)


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: torch.device, bf16: bool = True) -> dict:
    """What ran a record: the device, its name, torch's version, and the peaks measured now (FLOP/s of
    a large matrix product: float32 with TF32 off; on CUDA TF32 too; bfloat16 where it has the
    instructions)."""
    from transformer_book import has_bf16_matmul, matmul_peak

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = cpu_name()
    precision = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        peaks = {"fp32": matmul_peak(device)}
        if device.type == "cuda":
            torch.set_float32_matmul_precision("high")
            peaks["tf32"] = matmul_peak(device)
    finally:
        torch.set_float32_matmul_precision(precision)
    if bf16 and has_bf16_matmul(device):
        peaks["bf16"] = matmul_peak(device, torch.bfloat16)
    facts = {
        "device": device.type,
        "device_name": name,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "peak_flops": peaks,
        "datasheet": DATASHEET if is_h100_sxm(name) else None,
        "date": time.strftime("%Y-%m-%d"),
    }
    if device.type == "cpu":  # the instructions that decide the bfloat16 rungs
        probes = {"avx512": "_is_avx512_supported", "avx512_bf16": "_is_avx512_bf16_supported"}
        probes["amx"] = "_is_amx_tile_supported"
        facts["cpu_instructions"] = {
            name: bool(getattr(torch.cpu, probe, lambda: False)()) for name, probe in probes.items()
        }
        facts["kernels"] = torch.backends.cpu.get_cpu_capability()  # ATen's vector kernels
        # another CPU's kernels on this one (tools/notebooks.py's KERNEL_PATHS), if asked for
        variables = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
        facts["kernel_environment"] = {name: os.environ[name] for name in variables if name in os.environ}
    if device.type == "cuda":
        facts["cuda"] = torch.version.cuda
    return facts


def ladder(device_type: str, chosen: list[str] | None = None) -> dict[str, dict]:
    """The arms of a device's ladder: name -> its settings (the baseline, the chosen rungs, and the
    baseline again). On a GPU each chosen rung adds its change to the chosen rung above it."""
    rungs = CUDA_RUNGS if device_type == "cuda" else CPU_RUNGS
    chosen = list(rungs) if chosen is None else chosen
    unknown = [name for name in chosen if name not in rungs]
    if unknown:
        raise ValueError(f"{device_type}'s ladder has no rungs {unknown}; it has {list(rungs)}")
    base = BASELINE["cuda" if device_type == "cuda" else "cpu"]
    arms = {"baseline": dict(base)}
    settings = dict(base)
    for name, (_, change) in rungs.items():
        if name in chosen:
            settings = {**settings, **change} if device_type == "cuda" else {**base, **change}
            arms[name] = dict(settings)
    arms["baseline_again"] = dict(base)
    return arms


def precision_of(settings: dict) -> str:
    return "bf16" if settings["bf16"] else "tf32" if settings["tf32"] else "fp32"


class Arm:
    """One arm's model (seeded like every arm's), optimizer, and the step it takes."""

    def __init__(self, settings: dict, config, device: torch.device):
        from transformer_book import GPT, has_bf16_matmul

        self.settings = settings
        self.device = device
        torch.manual_seed(SEED)
        self.model = GPT(config).to(device)
        adamw = {"loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=LR, weight_decay=0.01, **adamw[settings["adamw"]]
        )
        if settings["bf16"] and not has_bf16_matmul(device):
            raise ValueError(f"bfloat16 autocast needs bfloat16 matrix instructions; {device} has none")
        self.runner = torch.compile(self.model, dynamic=False) if settings["compile"] else self.model
        self.pad_to = config.max_len if settings["compile"] else None
        self.seconds, self.flops, self.tokens, self.losses = [], [], [], []
        self.error = None

    def context(self):
        stack = contextlib.ExitStack()
        if self.settings["bf16"]:
            stack.enter_context(torch.autocast(self.device.type, dtype=torch.bfloat16))
        if self.settings["attention"] == "math":
            stack.enter_context(sdpa_kernel(SDPBackend.MATH))
        return stack

    def step(self, tokens, pad_id: int, config) -> None:
        from transformer_book import causal_lm_loss, flops_per_token, lm_loss, synchronize

        if self.pad_to is not None:
            tokens = torch.nn.functional.pad(tokens, (0, self.pad_to - tokens.size(1)), value=pad_id)
        torch.set_float32_matmul_precision("high" if self.settings["tf32"] else "highest")
        if self.device.type == "cpu":
            torch.set_num_threads(self.settings["threads"])
        need_weights = self.settings["attention"] == "explicit"
        try:
            synchronize(self.device)
            started = time.perf_counter()
            self.optimizer.zero_grad()
            if self.settings["loss"] == "chunked":  # lm_loss sets its own precision and kernel
                loss = lm_loss(pad_id, precision=precision_of(self.settings))(self.runner, tokens)
            else:
                with self.context():
                    loss = causal_lm_loss(self.runner(tokens, need_weights=need_weights), tokens, pad_id)
            loss.backward()
            self.optimizer.step()
            synchronize(self.device)
            elapsed = time.perf_counter() - started
        finally:
            torch.set_float32_matmul_precision("highest")
            if self.device.type == "cpu":
                torch.set_num_threads(1)
        self.seconds.append(elapsed)
        self.flops.append(tokens.numel() * flops_per_token(config, tokens.size(1)))
        self.tokens.append(int((tokens != pad_id).sum()))
        self.losses.append(loss.item())


def held_out_loss(model, vocab, poems, device) -> float:
    """Mean cross-entropy per token of ``poems`` in float32 (TF32 off), eager."""
    from transformer_book import poem_losses

    with torch.no_grad():
        sums, counts = poem_losses(model, vocab, poems, device=device)
    model.train()
    return float(sums.sum() / counts.sum())


def run_ladder(
    device: torch.device, chosen=None, steps: int = 30, warmup: int = 5, log=print, which: str | None = None
) -> dict:
    """Every arm side by side, scored and checked: the record. ``which`` ladder (``cpu`` or ``cuda``;
    default: the device's) lets a CPU run the GPU's rungs, to try them where no GPU is."""
    from transformer_book import POET_CONFIG, GPTConfig, PoemVocabulary, poem_split

    facts = machine(device)
    peaks = facts["peak_flops"]
    log(f"{facts['device_name']} ({device.type}), torch {facts['torch']}")
    log(
        "peaks measured in this run: "
        + ", ".join(f"{name} {value / 1e12:.3g} TFLOP/s" for name, value in peaks.items())
        + (" (1 CPU thread)" if device.type == "cpu" else "")
    )
    poems = poem_split("train")
    vocab = PoemVocabulary.from_poems(poems)
    config = GPTConfig(len(vocab), **POET_CONFIG)
    scoring = poem_split("held-out")[:EVAL_POEMS]
    which = which or ("cuda" if device.type == "cuda" else "cpu")
    plan = ladder(which, chosen)
    arms, unrunnable = {}, {}
    for name, settings in plan.items():
        try:
            arms[name] = Arm(settings, config, device)
        except Exception as error:  # noqa: BLE001 - an arm this machine cannot run is recorded, not fatal
            unrunnable[name] = f"{type(error).__name__}: {error}"
            log(f"{name}: not run ({unrunnable[name]})")
            arms[name] = None
    draw = random.Random(SEED)
    names = [name for name in arms if arms[name] is not None]
    started = time.perf_counter()
    for step in range(warmup + steps):
        largest = max(arms[name].settings["batch"] for name in names)
        chosen_poems = draw.sample(poems, min(largest, len(poems)))
        turn = step % len(names)
        for name in names[turn:] + names[:turn]:
            arm = arms[name]
            if arm.error is not None:
                continue
            tokens = vocab.batch(chosen_poems[: arm.settings["batch"]], device)
            try:
                arm.step(tokens, vocab.pad_id, config)
            except Exception as error:  # noqa: BLE001 - e.g. torch.compile failing: the arm stops, the rest go on
                arm.error = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
                log(f"{name}: failed at step {step + 1} ({arm.error})")
            if step < warmup and arm.error is None:  # warm-up steps are not timed
                for kept in (arm.seconds, arm.flops, arm.tokens):
                    kept.clear()
    wall = time.perf_counter() - started
    results = {}
    for name, arm in arms.items():
        if arm is None or arm.error is not None or not arm.seconds:
            results[name] = {"settings": plan[name], "error": arm.error if arm is not None else unrunnable[name]}
            continue
        flop_rate = sum(arm.flops) / sum(arm.seconds)
        precision = precision_of(arm.settings)
        own_peak = peaks.get(precision)
        results[name] = {
            "settings": arm.settings,
            "precision": precision,
            "median_step_ms": round(1000 * statistics.median(arm.seconds), 3),
            "tokens_per_s": round(sum(arm.tokens) / sum(arm.seconds), 1),
            "flops_per_s": flop_rate,
            "mfu_fp32_peak": round(flop_rate / peaks["fp32"], 4),
            "mfu_own_peak": round(flop_rate / own_peak, 4) if own_peak else None,
            "mfu_datasheet": round(flop_rate / facts["datasheet"][precision], 4) if facts["datasheet"] else None,
            "train_loss_last": round(arm.losses[-1], 4),
            "held_out_loss": round(held_out_loss(arm.model, vocab, scoring, device), 4),
        }
    base = results["baseline"]
    if "error" in base:
        raise RuntimeError(f"the baseline did not run: {base['error']}")
    for name, result in results.items():
        if "error" in result:
            continue
        result["speedup"] = round(result["tokens_per_s"] / base["tokens_per_s"], 3)
        difference = result["held_out_loss"] - base["held_out_loss"]
        result["loss_difference"] = round(difference, 4)
        more_poems = result["settings"]["batch"] > base["settings"]["batch"]
        result["loss_check"] = "pass" if (difference if more_poems else abs(difference)) <= LOSS_TOLERANCE else "FAIL"
    return {
        "machine": facts,
        "settings": {
            "config": dict(POET_CONFIG, vocab_size=len(vocab)),
            "batch_size": BATCH_SIZE,
            "lr": LR,
            "seed": SEED,
            "warmup_steps": warmup,
            "timed_steps": steps,
            "eval_poems": len(scoring),
            "loss_tolerance": LOSS_TOLERANCE,
            "ladder": which,
            "rungs_add_up": which == "cuda",  # True: each rung adds to the one above
        },
        "rungs": {
            name: (CUDA_RUNGS if which == "cuda" else CPU_RUNGS)[name][0]
            for name in plan
            if name not in ("baseline", "baseline_again")
        },
        "arms": results,
        "seconds": round(wall, 1),
    }


def table(record: dict) -> str:
    """The record's arms, one line each."""
    lines = [
        (
            f"{'arm':>18} {'ms/step':>8} {'tokens/s':>10} {'x base':>7} {'TFLOP/s':>8} "
            f"{'MFU fp32':>8} {'MFU own':>8} {'MFU sheet':>9} {'held-out':>8} {'check':>6}"
        )
    ]
    for name, result in record["arms"].items():
        if "error" in result:
            lines.append(f"{name:>18} not run: {result['error']}")
            continue

        def share(value):
            return "-" if value is None else f"{value:.1%}"

        lines.append(
            f"{name:>18} {result['median_step_ms']:8.2f} {result['tokens_per_s']:10,.0f} {result['speedup']:7.2f} "
            f"{result['flops_per_s'] / 1e12:8.3f} {share(result['mfu_fp32_peak']):>8} {share(result['mfu_own_peak']):>8} "
            f"{share(result['mfu_datasheet']):>9} {result['held_out_loss']:8.4f} {result['loss_check']:>6}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="list the rungs; train nothing")
    parser.add_argument("--device", default="auto", help="cuda, mps, cpu or auto (default)")
    parser.add_argument("--rungs", nargs="*", default=None, help="some of the device's rungs (default: all)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per arm")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (torch.compile compiles here)")
    parser.add_argument("--ladder", choices=("cpu", "cuda"), default=None, help="whose rungs (default: the device's)")
    parser.add_argument("--out", type=Path, default=None, help="folder of the record (default: print only)")
    args = parser.parse_args(argv)
    device = device_from(args.device)
    which = args.ladder or ("cuda" if device.type == "cuda" else "cpu")
    if args.plan:
        rungs = CUDA_RUNGS if which == "cuda" else CPU_RUNGS
        print(f"baseline ({which}): {BASELINE[which]}")
        for name, (change, _) in rungs.items():
            print(f"{name:>18}: {change}")
        return 0
    if args.steps < 1 or args.warmup < 1:
        raise SystemExit(f"--steps and --warmup must be at least 1; got {args.steps} and {args.warmup}")
    torch.set_num_threads(1)
    record = run_ladder(device, args.rungs, args.steps, args.warmup, lambda line: print(line, flush=True), which)
    print(table(record))
    print(
        f"{record['seconds']:.0f} s side by side; loss check: held-out loss within {LOSS_TOLERANCE} nats of the baseline's"
    )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"speed_ladder_{device.type}.json"
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    failed = [name for name, result in record["arms"].items() if result.get("loss_check") == "FAIL"]
    if failed:
        print(f"loss check failed: {failed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not waiting for the worker processes torch.compile started: on a busy machine their shutdown
    # held the finished ladder for minutes.
    os._exit(code)
