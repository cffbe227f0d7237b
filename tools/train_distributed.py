"""Train chapter 14's translator on several processes with torch.distributed (chapter 17).

    torchrun --nproc_per_node=2 tools/train_distributed.py --steps 20
    torchrun --nproc_per_node=1 tools/train_distributed.py --steps 20 --accumulate 2
    torchrun --nproc_per_node=2 tools/train_distributed.py --steps 20 --strategy fsdp
    torchrun --nproc_per_node=2 tools/train_distributed.py --steps 20 --precision bf16
    torchrun --nproc_per_node=2 tools/train_distributed.py --steps 20 --stop-at 10 \\
        --checkpoint /tmp/run.pt                    # stop after step 10, saving the run
    torchrun --nproc_per_node=2 tools/train_distributed.py --steps 20 --resume /tmp/run.pt

    python tools/train_distributed.py --record    # the runs above: write the record
    python tools/train_distributed.py --check     # run them again; fail unless they agree

(``torchrun`` is ``python -m torch.distributed.run``; add ``--standalone`` when another job
may hold its default port.) Under torchrun it is ``transformer_book.distributed.
train_distributed``: the model, data, loss and optimiser of chapter 14's ``train_recipe``,
each step reading the next (processes x accumulate) length batches of the training split,
one per process per micro-batch, the loss normalised by the step's token count over every
process (``--normalise per_batch`` is the mistake chapter 17 measures), gloo on the CPU and
nccl on CUDA. Its last line is one JSON object with ``loss`` (the last step's mean loss per
target token) and ``parameter_sum`` (the float64 sum of every parameter after the last step).

``--record`` runs the comparisons of ``RUNS`` (6 minutes on the 2 cores, with other jobs) and writes
``src/transformer_book/weights/distributed_runs.json``, which chapter 17 charts; ``--check``
runs them again and fails unless every run agrees with the record within ``TOLERANCE`` and
the equivalences hold. The equivalences, measured on the development machine (gloo, 2
CPU processes, the recipe's 1,500-token batches, 20 steps):

* DDP on 2 processes and 1 process accumulating 2 micro-batches: the same losses and
  parameter sum, bit for bit (gloo adds two gradients in one order, and the factor 2 of the
  averaging is exact);
* FSDP on 2 processes against them: 2.4e-7 in the loss, 2.0e-4 in the parameter sum
  (of about 1,305): float32 rounding in the sharded arithmetic;
* the per-batch mean (the mistake) against them: 7.5e-5 and 2.3e-2, 100 times further;
* resumed at step 10: bit for bit;
* bf16 autocast against float32: 2.7e-4 in the loss at most over the 20 steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from notebooks import REPO_ROOT
from transformer_book import launch, train_distributed

RECORD = REPO_ROOT / "src" / "transformer_book" / "weights" / "distributed_runs.json"
# A run agrees with another if its losses and parameter sum are this close: 10 times the
# float32 rounding measured between FSDP and DDP, a tenth of the per-batch mistake's error.
TOLERANCE = {"loss": 2e-6, "parameter_sum": 2e-3}
REFERENCE = "1 process, accumulate 2"
RUNS = {  # name: (processes, arguments)
    REFERENCE: (1, ["--accumulate", "2"]),
    "2 processes, DDP": (2, []),
    "2 processes, FSDP": (2, ["--strategy", "fsdp"]),
    "2 processes, per-batch mean": (2, ["--normalise", "per_batch"]),
    "2 processes, bf16": (2, ["--precision", "bf16"]),
    "stopped at 10": (2, ["--stop-at", "10", "--checkpoint", "{checkpoint}"]),
    "resumed at 10": (2, ["--resume", "{checkpoint}"]),
}
EQUAL = ("2 processes, DDP", "2 processes, FSDP")  # within TOLERANCE of REFERENCE


def run_all(steps: int = 20, max_tokens: int | None = None) -> dict:
    """Every run of ``RUNS`` for ``steps`` steps: name -> its record (no timings)."""
    common = ["--steps", str(steps), "--device", "cpu"]
    if max_tokens is not None:
        common += ["--max-tokens", str(max_tokens)]
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = str(Path(folder) / "checkpoint.pt")
        for name, (processes, arguments) in RUNS.items():
            filled = [argument.format(checkpoint=checkpoint) for argument in arguments]
            record = launch([*common, *filled], processes)
            record.pop("seconds")
            runs[name] = record
            print(f"{name}: loss {record['loss']:.6f}, parameter sum {record['parameter_sum']:.6f}", flush=True)
    return runs


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


def problems(runs: dict) -> list[str]:
    """What breaks the equivalences: [] when DDP, FSDP and the resumed run agree with
    one process accumulating, and the per-batch mean does not."""
    found = differences(runs)
    wrong = []
    for name in EQUAL:
        for key, tolerance in TOLERANCE.items():
            if found[name][key] > tolerance:
                wrong.append(f"{name}: {key} off by {found[name][key]:.3g} > {tolerance}")
    resumed, whole = runs["resumed at 10"], runs["2 processes, DDP"]
    if resumed["losses"] != whole["losses"][10:] or resumed["parameter_sum"] != whole["parameter_sum"]:
        wrong.append("the run resumed at step 10 differs from the uninterrupted one")
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


def record_or_check(check: bool) -> int:
    runs = run_all()
    record = {"tolerance": TOLERANCE, "reference": REFERENCE, "runs": runs, "differences": differences(runs)}
    wrong = problems(runs)
    if check:
        wrong += against_record(runs, json.loads(RECORD.read_text(encoding="utf-8")))
    else:
        RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RECORD.relative_to(REPO_ROOT)}")
    for line in wrong:
        print(line, file=sys.stderr)
    return 1 if wrong else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--record", "--check"):
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--record", action="store_true")
        group.add_argument("--check", action="store_true")
        return record_or_check(parser.parse_args(argv).check)
    train_distributed(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
