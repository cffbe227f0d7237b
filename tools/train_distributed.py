"""Train chapter 14's translator on several processes with torch.distributed (chapter 17).

    torchrun --standalone --nproc_per_node=2 tools/train_distributed.py --steps 20
    torchrun --standalone --nproc_per_node=1 tools/train_distributed.py --steps 20 --accumulate 2
    torchrun --standalone --nproc_per_node=2 tools/train_distributed.py --steps 20 --strategy fsdp
    torchrun --standalone --nproc_per_node=2 tools/train_distributed.py --steps 20 --strategy buckets
    torchrun --standalone --nproc_per_node=2 tools/train_distributed.py --steps 20 --precision bf16
    torchrun --standalone --nproc_per_node=2 tools/train_distributed.py --steps 20 --stop-at 10 \\
        --checkpoint /tmp/run                       # stop after step 10, a sharded checkpoint
    torchrun --standalone --nproc_per_node=1 tools/train_distributed.py --steps 20 --accumulate 2 \\
        --resume /tmp/run                           # go on in 1 process, the same batches

    python tools/train_distributed.py --record    # the runs of RUNS: write the record
    python tools/train_distributed.py --check     # run them again; fail unless they agree
    python tools/train_distributed.py --record --cuda   # on a machine with a GPU: its record

(``torchrun`` is ``python -m torch.distributed.run``.) Each process runs
``transformer_book.train_distributed`` with the settings of the flags (one flag per field of
``transformer_book.DistributedRun``, or ``--settings`` with their JSON): chapter 14's recipe,
each step reading the next (processes x accumulate) length batches, the loss normalised by
the step's token count over every process, gloo on the CPU and nccl on CUDA. Process 0 prints
the run's record as its last line, one JSON object. ``launch`` starts such a run from Python.

``--record`` runs the comparisons of ``RUNS`` (2 gloo processes on the CPU, or 1 process
accumulating 2 micro-batches; the recipe's 1,500-token batches, 20 steps) and the long runs of
``LONG_RUNS`` (the bf16 and mean-of-means gaps after a warm-up that reaches the recipe's peak,
and the yardstick: float32 from other initial weights, ``init_seed=1``, on the same batches),
and writes ``src/transformer_book/weights/distributed_runs.json``, which chapter 17 reads;
``--check`` runs them again and fails unless every run agrees with the record within
``TOLERANCE`` and the equivalences of ``problems`` hold. Chapter 17 prints the measured
differences from the record; this docstring quotes none of them, so it cannot go stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import typing
from collections.abc import Sequence
from pathlib import Path

import torch

from notebooks import REPO_ROOT, WEIGHTS_DIR
from transformer_book import DistributedRun, train_distributed

RECORD = WEIGHTS_DIR / "distributed_runs.json"
SCRIPT = Path(__file__).resolve()
# A run agrees with another if its losses and parameter sum are this close: a few times the
# float32 rounding measured between FSDP and DDP, a tenth of the per-batch mistake's error.
TOLERANCE = {"loss": 2e-6, "parameter_sum": 2e-3}
REFERENCE = "1 process, accumulate 2"
RUNS = {  # name: (processes, settings)
    REFERENCE: (1, {"accumulate": 2}),
    "2 processes, DDP": (2, {}),
    "2 processes, hand-written DDP": (2, {"strategy": "buckets"}),
    "2 processes, FSDP": (2, {"strategy": "fsdp"}),
    "2 processes, per-batch mean": (2, {"normalise": "per_batch"}),
    "2 processes, bf16": (2, {"precision": "bf16"}),
    "stopped at 10": (2, {"stop_at": 10, "checkpoint": "{folder}/ddp"}),
    "resumed at 10": (2, {"resume": "{folder}/ddp"}),
    "resumed at 10 in 1 process": (1, {"accumulate": 2, "resume": "{folder}/ddp"}),
    "2 processes, own dropout": (2, {"reseed": False}),
    "own dropout, stopped at 10": (
        2,
        {"reseed": False, "stop_at": 10, "checkpoint": "{folder}/own"},
    ),
    "own dropout, resumed at 10": (2, {"reseed": False, "resume": "{folder}/own"}),
}
EQUAL = ("2 processes, DDP", "2 processes, hand-written DDP", "2 processes, FSDP")
BIT_FOR_BIT = {  # run: the run it equals bit for bit, over the steps both ran
    "2 processes, DDP": REFERENCE,
    "2 processes, hand-written DDP": "2 processes, DDP",
    "resumed at 10": "2 processes, DDP",
    "resumed at 10 in 1 process": "2 processes, DDP",
    "own dropout, resumed at 10": "2 processes, own dropout",
}
# The long runs: 1 process accumulating 2 micro-batches (the same updates as 2 processes),
# 300 steps, the warm-up cut to 100 steps with the rate scaled to chapter 14's peak
# (1,000 steps of warm-up at factor 1: a factor of sqrt(100 / 1000)).
LONG = {"steps": 300, "accumulate": 2, "warmup_steps": 100, "lr_factor": 0.1**0.5}
LONG_RUNS = {
    "long, float32": (1, LONG),
    "long, bf16": (1, {**LONG, "precision": "bf16"}),
    "long, per-batch mean": (1, {**LONG, "normalise": "per_batch"}),
    # the yardstick: float32 again, other initial weights and dropout, the same batches
    "long, float32, init seed 1": (1, {**LONG, "init_seed": 1}),
}
# On a machine with a GPU (--record --cuda): the paths the CPU cannot take, one process on one GPU
# with NCCL (a second GPU would need a second process), the chapter's 20-step run in float32 (DDP
# and FSDP), bf16 and fp16 with its gradient scaler, and a checkpoint stopped at step 10 and resumed.
RECORD_CUDA = RECORD.with_name("distributed_runs_cuda.json")
CUDA_REFERENCE = "1 GPU, DDP"
CUDA_RUNS = {
    CUDA_REFERENCE: (1, {}),
    "1 GPU, FSDP": (1, {"strategy": "fsdp"}),
    "1 GPU, bf16": (1, {"precision": "bf16"}),
    "1 GPU, fp16 with a scaler": (1, {"precision": "fp16"}),
    "1 GPU, stopped at 10": (1, {"stop_at": 10, "checkpoint": "{folder}/gpu"}),
    "1 GPU, resumed at 10": (1, {"resume": "{folder}/gpu"}),
}


def launch(run: DistributedRun, processes: int = 2, script: Path = SCRIPT) -> typing.Any:
    """Run ``script`` under torchrun in ``processes`` processes with ``run``'s settings
    (as ``--settings JSON``); what process 0 printed last, read as JSON.

    ``python -m torch.distributed.run --standalone`` (torchrun on a free port) starts
    the processes. A failure raises with the end of the processes' output."""
    if not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be an int >= 1; got {processes!r}")
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={processes}", str(script), "--settings", run.to_json(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"torchrun {' '.join(command[4:])} failed ({done.returncode}):\n" + (done.stdout + done.stderr)[-3000:]
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_all(runs: dict, steps: int = 20, **common) -> dict:
    """Every run of ``runs`` (name -> (processes, settings)): name -> its record, without
    what differs from one run to the next (timings, the checkpoint's folder)."""
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, (processes, settings) in runs.items():
            filled = {
                key: value.format(folder=folder) if isinstance(value, str) else value for key, value in settings.items()
            }
            run = DistributedRun(**{"steps": steps, "device": "cpu", **common, **filled})
            record = launch(run, processes)
            found[name] = strip(record)
            loss, total = found[name]["loss"], found[name]["parameter_sum"]
            print(f"{name}: loss {loss:.6f}, parameter sum {total:.6f}, {record['seconds']:.1f} s", flush=True)
    return found


def strip(record: dict) -> dict:
    """``record`` without what varies between two runs of the same settings."""
    kept = {key: value for key, value in record.items() if key not in ("seconds", "checkpoint", "resume")}
    kept["resumed"] = record["resume"] is not None
    if kept.get("timeline") is None:
        kept.pop("timeline", None)
    return kept


def differences(runs: dict, reference: str = REFERENCE) -> dict:
    """Each run's largest loss difference and its parameter-sum difference against
    ``reference``, over the steps both ran."""
    base = runs[reference]
    found = {}
    for name, run in runs.items():
        first = run["first_step"] - base["first_step"]  # align the steps
        losses = base["losses"][first : first + len(run["losses"])]
        found[name] = {
            "loss": max(abs(a - b) for a, b in zip(run["losses"], losses)),
            "parameter_sum": abs(run["parameter_sum"] - base["parameter_sum"]),
        }
    return found


def same_bits(run: dict, base: dict) -> bool:
    """Whether ``run`` has ``base``'s losses (over its steps) and, if it ran to the same
    step, its parameter sum, bit for bit."""
    first = run["first_step"] - base["first_step"]
    if run["losses"] != base["losses"][first : first + len(run["losses"])]:
        return False
    return run["last_step"] != base["last_step"] or run["parameter_sum"] == base["parameter_sum"]


def problems(runs: dict) -> list[str]:
    """What breaks the equivalences: [] when DDP, the hand-written DDP, FSDP and the
    resumed runs agree with one process accumulating, and the per-batch mean does not."""
    found = differences(runs)
    wrong = []
    for name in EQUAL:
        for key, tolerance in TOLERANCE.items():
            if found[name][key] > tolerance:
                wrong.append(f"{name}: {key} off by {found[name][key]:.3g} > {tolerance}")
    for name, base in BIT_FOR_BIT.items():
        if name in runs and not same_bits(runs[name], runs[base]):
            wrong.append(f"{name} differs from {base} (expected bit for bit)")
    naive = found["2 processes, per-batch mean"]["parameter_sum"]
    if naive <= 10 * TOLERANCE["parameter_sum"]:
        wrong.append(f"the per-batch mean came within {naive:.3g} of the token mean")
    return wrong


def against_record(runs: dict, saved: dict) -> list[str]:
    """Where ``runs`` differ from the ``saved`` record by more than ``TOLERANCE``."""
    wrong = []
    for name, run in runs.items():
        if name not in saved["runs"]:
            wrong.append(f"{name}: not in the record")
            continue
        again = differences({"saved": saved["runs"][name], "now": run}, "saved")["now"]
        wrong += [
            f"{name}: {key} differs from the record by {again[key]:.3g}"
            for key, tolerance in TOLERANCE.items()
            if again[key] > tolerance
        ]
    return wrong


def cuda_problems(runs: dict) -> list[str]:
    """What breaks the GPU's equivalences: FSDP and the resumed run within ``TOLERANCE``
    of DDP (a GPU's kernels need not repeat their bits; whether they did is recorded)."""
    found = differences(runs, CUDA_REFERENCE)
    return [
        f"{name}: {key} off by {found[name][key]:.3g} > {tolerance}"
        for name in ("1 GPU, FSDP", "1 GPU, resumed at 10")
        for key, tolerance in TOLERANCE.items()
        if found[name][key] > tolerance
    ]


def cuda_record(runs: dict, machine: dict) -> dict:
    """The GPU's record: the machine, the runs of ``CUDA_RUNS``, each one's differences
    from DDP, and whether the resumed run repeated the uninterrupted one's bits."""
    return {
        "machine": machine,
        "tolerance": TOLERANCE,
        "reference": CUDA_REFERENCE,
        "runs": runs,
        "differences": differences(runs, CUDA_REFERENCE),
        "resumed_bit_for_bit": same_bits(runs["1 GPU, resumed at 10"], runs[CUDA_REFERENCE]),
    }


def write_or_report(check: bool, path: Path, record: dict, wrong: list[str]) -> int:
    """Write ``record`` to ``path`` unless ``check``; print what is ``wrong``; 1 if anything is."""
    if not check:
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    for line in wrong:
        print(line, file=sys.stderr)
    return 1 if wrong else 0


def record_or_check_cuda(check: bool) -> int:
    """``--record --cuda`` and ``--check --cuda``: the runs of ``CUDA_RUNS`` on this
    machine's GPU, written to (or compared with) ``RECORD_CUDA``."""
    if not torch.cuda.is_available():
        raise SystemExit("--cuda needs a CUDA GPU; torch.cuda.is_available() is False here")
    machine = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
    record = cuda_record(run_all(CUDA_RUNS, device="cuda"), machine)
    wrong = cuda_problems(record["runs"])
    if check:
        wrong += against_record(record["runs"], json.loads(RECORD_CUDA.read_text(encoding="utf-8")))
    return write_or_report(check, RECORD_CUDA, record, wrong)


def record_or_check(check: bool) -> int:
    runs = run_all(RUNS)
    long = run_all(LONG_RUNS, steps=LONG["steps"])
    record = {
        "tolerance": TOLERANCE,
        "reference": REFERENCE,
        "runs": runs,
        "differences": differences(runs),
        "long_runs": long,
    }
    wrong = problems(runs)
    if check:
        saved = json.loads(RECORD.read_text(encoding="utf-8"))
        wrong += against_record(runs, saved)
        wrong += against_record(long, {"runs": saved["long_runs"]})
    return write_or_report(check, RECORD, record, wrong)


def parse_run(argv: Sequence[str]) -> DistributedRun:
    """The settings of one run from the command line: a flag for each field of
    ``DistributedRun`` (``--stop-at``, ``--no-reseed``, ...), or ``--settings JSON``."""
    parser = argparse.ArgumentParser(description="Train chapter 14's translator on several processes.")
    parser.add_argument("--settings", help="every setting at once, as DistributedRun.to_json writes")
    hints = typing.get_type_hints(DistributedRun)
    for field in dataclasses.fields(DistributedRun):
        flag = "--" + field.name.replace("_", "-")
        kind = hints[field.name]
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default)
        else:
            kind = next((t for t in typing.get_args(kind) if t is not type(None)), kind)
            parser.add_argument(flag, type=kind, default=field.default)
    args = vars(parser.parse_args(argv))
    settings = args.pop("settings")
    try:
        return DistributedRun.from_json(settings) if settings else DistributedRun(**args)
    except ValueError as error:
        parser.error(str(error))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--record", "--check"):
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--record", action="store_true")
        group.add_argument("--check", action="store_true")
        parser.add_argument("--cuda", action="store_true", help="the GPU's runs and record")
        args = parser.parse_args(argv)
        return record_or_check_cuda(args.check) if args.cuda else record_or_check(args.check)
    torch.set_num_threads(1)
    record = train_distributed(parse_run(argv))
    if record["rank"] == 0:
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
