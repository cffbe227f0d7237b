"""Train chapter 12's number-words model for longer, keep checkpoints, and record its search.

    python tools/train_numbers.py          # train, decode, write the files (about 8 minutes)
    python tools/train_numbers.py --check  # do it again; fail unless identical

Chapter 12 trains the number model for 120 steps, where it is right on about half the held-out
numbers. This tool continues the same seeded run (``train_model(numbers_task(), ...)`` with
``NUMBERS_CONFIG`` and ``NUMBERS_TRAINING``, only more steps) and keeps its weights at
``CHECKPOINT_STEPS``. A run of N steps starts exactly like a longer one (the same batches, the
same schedule, the same dropout draws), so each checkpoint is trained as its own run and the tool
checks that the runs' loss histories agree step for step: the checkpoints are points of one run.

For every checkpoint it decodes ``HELD_OUT`` held-out numbers (multiples of 7, never trained on)
with greedy decoding and with beams of 2, 4 and 8, with and without the length penalty, from the
half-precision weights it ships, and records each decoder's wrong outputs and the
log-probabilities that split the errors into search and model errors. It writes

* ``src/transformer_book/weights/numbers.pt``: the checkpoints in half precision, with the
  configuration and the longest run's loss history (``pretrained_numbers_model()`` loads them);
* ``src/transformer_book/weights/numbers_runs.json``: the decodings (chapter 12 reads them).

Both record the environment that trained them (``notebooks.environment()``: the torch build, its
CPU kernels, the thread count). Everything runs on the CPU with one thread, so a second run in the
same environment writes the same files; ``--check`` compares them without that record and, when
they differ, names how this environment differs from the recorded one. It prints the training steps'
throughput (tokens/s, FLOP/s and MFU against a float32 peak measured in the same run on its one
thread: tools/throughput.py), which neither file stores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from notebooks import (
    WEIGHTS_DIR,
    check_outcome,
    differing_files,
    environment,
    json_differs,
    regenerate_and_compare,
)
from throughput import StepMeter, Throughput, encoder_decoder_step_cost
from transformer_book import (
    NUMBERS_CONFIG,
    NUMBERS_TRAINING,
    Transformer,
    beam_search,
    greedy_decode,
    make_model,
    numbers_task,
    padding_mask,
    sequence_log_prob,
    train_model,
)

WEIGHTS_FILE, RUNS_FILE = "numbers.pt", "numbers_runs.json"
CHECKPOINT_STEPS = (120, 250, 500, 1000, 2000)
HELD_OUT, HELD_OUT_SEED = 2000, 1  # chapter 12's 400 held-out numbers are the first 400
DECODERS = {  # name: (beam size, length penalty alpha); a beam of 1 is greedy decoding
    "greedy": (1, 0.0),
    "beam 2": (2, 0.0),
    "beam 4": (4, 0.0),
    "beam 8": (8, 0.0),
    "beam 2, alpha 0.6": (2, 0.6),
    "beam 4, alpha 0.6": (4, 0.6),
    "beam 8, alpha 0.6": (8, 0.6),
}


def half(model: torch.nn.Module) -> dict:
    return {name: value.detach().cpu().half() for name, value in model.state_dict().items()}


def decode_all(model, task, pairs) -> dict:
    """Every decoder's wrong outputs (index -> text) and their log-probabilities, and the
    log-probability of every right answer."""
    vocab = task.target_vocab
    source, target = task.batch(pairs)
    mask = padding_mask(source, task.source_vocab.pad_id)
    expected = [text for _, text in pairs]
    max_new = task.max_target_len + 1
    reference = sequence_log_prob(model, source, mask, target, end_id=vocab.end_id)
    record = {"right answer log p": [round(x, 4) for x in reference.tolist()], "decoders": {}}
    for name, (beam_size, alpha) in DECODERS.items():
        if beam_size == 1:
            tokens = greedy_decode(model, source, mask, vocab.start_id, max_new, end_id=vocab.end_id)
        else:
            tokens, _ = beam_search(
                model,
                source,
                mask,
                vocab.start_id,
                max_new,
                beam_size=beam_size,
                end_id=vocab.end_id,
                length_penalty=alpha,
            )
        outputs = [vocab.decode(row) for row in tokens]
        scores = sequence_log_prob(model, source, mask, tokens, end_id=vocab.end_id).tolist()
        wrong = {i: (out, round(scores[i], 4)) for i, out in enumerate(outputs) if out != expected[i]}
        record["decoders"][name] = {
            "right": len(pairs) - len(wrong),
            "wrong": {str(i): {"output": out, "log p": score} for i, (out, score) in wrong.items()},
        }
    return record


@torch.no_grad()
def evaluate(saved_state: dict, task, held_out_task, pairs) -> dict:
    model = make_model(len(task.source_vocab), len(task.target_vocab), **NUMBERS_CONFIG)
    model.load_state_dict({name: value.float() for name, value in saved_state.items()})
    return decode_all(model.eval(), held_out_task, pairs)


def train_all() -> tuple[dict, dict, Throughput]:
    """(the weights to save, the record, the training steps' throughput: printed, not stored)."""
    torch.set_num_threads(1)
    made_in = environment()  # what the bits depend on, besides the code and seed
    started = time.perf_counter()
    task, held_out_task = numbers_task(), numbers_task(held_out=True)
    pairs = held_out_task.pairs(HELD_OUT, seed=HELD_OUT_SEED)
    options = {key: value for key, value in NUMBERS_TRAINING.items() if key != "steps"}
    checkpoints, histories, runs = {}, {}, {}
    cost = encoder_decoder_step_cost(NUMBERS_CONFIG, task.source_vocab.pad_id)
    # the training steps of every run; the decoding between them runs without gradients: not metered
    with StepMeter(Transformer, cost) as meter:
        for steps in CHECKPOINT_STEPS:
            model, history = train_model(task, steps, config=NUMBERS_CONFIG, **options)
            checkpoints[steps], histories[steps] = half(model), history
            runs[str(steps)] = evaluate(checkpoints[steps], task, held_out_task, pairs)
            greedy = runs[str(steps)]["decoders"]["greedy"]["right"] / HELD_OUT
            elapsed = time.perf_counter() - started
            print(f"{steps} steps: greedy exact match {greedy:.1%} ({elapsed:.0f} s)", flush=True)
    longest = histories[CHECKPOINT_STEPS[-1]]
    for steps, history in histories.items():  # every run is the start of the longest one
        assert history == longest[: len(history)], f"the {steps}-step run is not a prefix of the longest"
    saved = {
        "config": dict(NUMBERS_CONFIG, source_vocab=len(task.source_vocab), target_vocab=len(task.target_vocab)),
        "training": dict(NUMBERS_TRAINING, steps=CHECKPOINT_STEPS[-1]),
        "checkpoints": checkpoints,
        "history": longest,
        "environment": made_in,
    }
    record = {
        "settings": {
            "checkpoint_steps": list(CHECKPOINT_STEPS),
            "held_out": {"count": HELD_OUT, "seed": HELD_OUT_SEED},
            "decoders": {name: list(setting) for name, setting in DECODERS.items()},
            "training": NUMBERS_TRAINING,
            "config": NUMBERS_CONFIG,
        },
        "checkpoints": runs,
        "environment": made_in,
        "seconds": time.perf_counter() - started,
    }
    return saved, record, meter.result()


def write(saved: dict, record: dict, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(saved, folder / WEIGHTS_FILE)
    text = json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True)
    (folder / RUNS_FILE).write_text(text + "\n", encoding="utf-8")


def weights_differences(new: Path, old: Path) -> list[str]:
    """What differs between two numbers.pt: each checkpoint's tensors, then the rest (the
    environment that trained them aside)."""
    found = []
    ours = torch.load(new, weights_only=True)
    theirs = torch.load(old, weights_only=True)
    for steps, state in theirs["checkpoints"].items():
        for name, value in state.items():
            if not torch.equal(ours["checkpoints"].get(steps, {}).get(name, torch.empty(0)), value):
                found.append(f"{WEIGHTS_FILE}: checkpoint {steps}, tensor {name}")
    aside = ("checkpoints", "environment")
    if {k: v for k, v in ours.items() if k not in aside} != {k: v for k, v in theirs.items() if k not in aside}:
        found.append(f"{WEIGHTS_FILE}: configuration or history")
    return found


def runs_differences(new: Path, old: Path) -> list[str]:
    """Whether two numbers_runs.json record other decodings (the time and environment aside)."""
    return [f"{RUNS_FILE}: decodings"] if json_differs(new, old, ("seconds",), ("environment",)) else []


COMPARE = {WEIGHTS_FILE: weights_differences, RUNS_FILE: runs_differences}


def differences(new: Path, old: Path) -> list[str]:
    """What differs between the files written to ``new`` and those in ``old`` (the time and
    environment aside)."""
    return differing_files(new, old, COMPARE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="train again and compare")
    args = parser.parse_args(argv)
    saved, record, throughput = train_all()
    print(f"{record['seconds'] / 60:.1f} minutes")
    print(throughput.line("training steps"))
    if not args.check:
        write(saved, record, WEIGHTS_DIR)
        size = (WEIGHTS_DIR / WEIGHTS_FILE).stat().st_size + (WEIGHTS_DIR / RUNS_FILE).stat().st_size
        print(f"wrote {WEIGHTS_FILE} and {RUNS_FILE} ({size / 1e6:.2f} MB) to {WEIGHTS_DIR}")
        return 0
    found = regenerate_and_compare(lambda folder: write(saved, record, folder), WEIGHTS_DIR, COMPARE)
    # a seeded CPU run's bits depend on the torch build: a difference names how this environment
    # differs from the one the shipped files record
    return check_outcome(
        found,
        "the shipped files",
        same="identical to the shipped files (the time aside)",
        recorded=recorded_environment(),
    )


def recorded_environment() -> dict | None:
    """The environment the shipped numbers_runs.json was made in (None: it records none)."""
    path = WEIGHTS_DIR / RUNS_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("environment")


if __name__ == "__main__":
    raise SystemExit(main())
