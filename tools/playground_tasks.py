"""The playground's tasks of chapters 9 and 12 (dates, number words): train or load, then export.

Training is seeded, with a fixed number of steps on the CPU, one thread: the files are the same on
every run with the same torch build and CPU kernels (recorded: ``notebooks.environment()``).
The number-words model is not trained here: it is the package's final checkpoint
(``pretrained_numbers_model()``, 2,000 steps of tools/train_numbers.py). Each task's page metadata
holds held-out examples the model gets right, and one it gets wrong if there is one.
Run by tools/export_playground.py.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import torch

from notebooks import WEIGHTS_DIR, environment
from playground_files import OUT_DIR, export_model, load_model


@dataclass(frozen=True)
class PlaygroundTask:
    """A task of the capstone chapters, and how its chapter trains it.

    ``factory``, ``config`` and ``training`` are "module:name" of the Task factory
    (called with ``held_out=True`` for the held-out pairs), of make_model's keyword
    arguments and of train_model's (the chapter's fixed, seeded training: steps, seed,
    batch_size, ...). ``package_file``, if given, is where the package gets its own copy
    of the trained weights (``transformer_book.pretrained_dates_model`` loads it).
    ``pretrained``, if given, is "module:name" of a function returning (model, history)
    of weights the package already ships, trained longer by a tool of their own: they
    are exported as they are, with ``training``'s options and the steps of their history.
    """

    name: str
    factory: str
    config: str
    training: str
    package_file: Path | None = None
    pretrained: str | None = None

    @property
    def options(self) -> dict:
        return dict(resolve(self.training) or {})

    @property
    def steps(self) -> int:
        if self.pretrained is not None:
            _, history = resolve(self.pretrained)()
            return history[-1]["step"]
        return self.options["steps"]


TASKS = [
    PlaygroundTask(  # chapter 9: train_model(dates_task(), **DATES_TRAINING)
        "dates",
        "transformer_book:dates_task",
        "transformer_book:DATES_CONFIG",
        "transformer_book:DATES_TRAINING",
        package_file=WEIGHTS_DIR / "dates.pt",
    ),
    PlaygroundTask(  # chapter 12's run continued to 2,000 steps by tools/train_numbers.py
        "numbers",
        "transformer_book:numbers_task",
        "transformer_book:NUMBERS_CONFIG",
        "transformer_book:NUMBERS_TRAINING",
        pretrained="transformer_book.numerals:pretrained_numbers_model",  # as numbers.json records it
    ),
]
EXAMPLES = 3  # held-out sources shown on the page: ones it gets right, and one it gets
# wrong if there is one among the held-out pairs (the page says which)
PARITY_INPUTS = 5  # more of them, for the parity test only
HELD_OUT_PAIRS, HELD_OUT_SEED = 1000, 1  # chapter 9's held-out set


def resolve(reference: str):
    """``"module:name"`` -> the object; None if the module does not exist (yet)."""
    module_name, name = reference.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return None
    return getattr(module, name, None)


def separator(vocab) -> str:
    """What joins tokens into text: "" if they are characters, " " if they are words."""
    specials = {vocab.pad_id, vocab.start_id, vocab.end_id}
    tokens = [token for index, token in enumerate(vocab.tokens) if index not in specials]
    return "" if all(len(token) == 1 for token in tokens) else " "


def as_text(source, vocab) -> str:
    """A source as the reader types it: characters run together, words spaced."""
    return source if isinstance(source, str) else separator(vocab).join(source)


@torch.no_grad()
def greedy_right(model, task, pairs) -> list[bool]:
    """For each (source, target) pair: does greedy decoding give exactly the target?"""
    from transformer_book import greedy_decode, padding_mask

    vocab = task.target_vocab
    source, _ = task.batch(pairs)  # (pairs, source)
    mask = padding_mask(source, task.source_vocab.pad_id)
    tokens = greedy_decode(
        model, source, mask, vocab.start_id, task.max_target_len + 1, end_id=vocab.end_id
    )  # (pairs, 1 + generated)
    join = separator(vocab).join
    return [
        join(vocab.decode(row)) == as_text(target, vocab)
        for row, (_, target) in zip(tokens.tolist(), pairs, strict=True)
    ]


def pick_examples(right: list[bool]) -> list[int]:
    """Indices of the page's examples: the first held-out pairs the model gets right,
    and the first it gets wrong, last, if there is one."""
    wrong = [index for index, ok in enumerate(right) if not ok][:1]
    good = [index for index, ok in enumerate(right) if ok]
    return good[: EXAMPLES - len(wrong)] + wrong


def task_meta(task, config: dict, sources: list[str]) -> dict:
    """The page's metadata for a task (of transformer_book.tasks, with Vocabulary objects)."""
    source, target = task.source_vocab, task.target_vocab
    return {
        "title": task.name,
        "config": config,
        "source_tokens": list(source.tokens),
        "target_tokens": list(target.tokens),
        "source_separator": separator(source),
        "target_separator": separator(target),
        "pad_id": target.pad_id,
        "start_id": target.start_id,
        "end_id": target.end_id,
        "max_source_len": task.max_source_len,
        "max_new_tokens": task.max_target_len + 1,  # the target's tokens, then </s>
        "examples": sources[:EXAMPLES],
        "parity_inputs": sources[EXAMPLES:],
    }


def held_out_pairs(spec: PlaygroundTask) -> list[tuple]:
    """The task's held-out pairs, as its chapter draws them (never trained on)."""
    return resolve(spec.factory)(held_out=True).pairs(HELD_OUT_PAIRS, seed=HELD_OUT_SEED)


def train_and_export(out_dir: Path = OUT_DIR) -> list[dict]:
    """Train each task there is (its chapter's seed and steps, CPU); export it."""
    from transformer_book import exact_match_accuracy, train_model

    torch.set_num_threads(1)  # the same arithmetic, in the same order, on every run
    manifest = []
    for spec in TASKS:
        factory, config = resolve(spec.factory), resolve(spec.config)
        training = resolve(spec.training)
        if factory is None or config is None or training is None:
            print(f"{spec.name}: skipped, {spec.factory}, {spec.config} or {spec.training} is missing")
            continue
        task = factory()
        if spec.pretrained is not None:  # the package's weights, trained by their tool
            model, history = resolve(spec.pretrained)()
            training = {**training, "steps": history[-1]["step"]}
            made_in = None
        else:
            model, history = train_model(task, **training, device="cpu", config=config)
            made_in = environment()  # what these bits depend on, besides the code and seed
        model = model.cpu().eval()
        if spec.package_file is not None:
            save_for_package(model, task, config, training, history, spec, out_dir, made_in)
        config = {
            "source_vocab": len(task.source_vocab),
            "target_vocab": len(task.target_vocab),
            **config,
        }
        held_out = held_out_pairs(spec)
        right = greedy_right(model, task, held_out)
        chosen = pick_examples(right)
        rest = [index for index in range(len(held_out)) if index not in chosen]
        shown = chosen + rest[:PARITY_INPUTS]
        sources = [as_text(held_out[index][0], task.source_vocab) for index in shown]
        meta = task_meta(task, config, sources)
        # What the page says of each example: the held-out answer, and whether greedy
        # decoding finds it.
        meta["example_answers"] = [as_text(held_out[index][1], task.target_vocab) for index in chosen]
        meta["example_right"] = [right[index] for index in chosen]
        accuracy = exact_match_accuracy(model, task, held_out, "cpu")
        if round(accuracy, 6) != round(sum(right) / len(right), 6):
            raise AssertionError(f"{spec.name}: greedy and teacher-forced exact match differ")
        meta["training"] = {
            **training,
            "device": "cpu",
            "held_out_exact_match": round(accuracy, 4),
            "held_out_pairs": len(held_out),
        }
        if spec.pretrained is not None:
            meta["training"]["loaded_with"] = spec.pretrained
        else:
            meta["training"]["environment"] = made_in
        json_path, bin_path = export_model(model, meta, spec.name, out_dir)
        check_round_trip(model, json_path)
        manifest.append(spec.name)
        print(
            f"{spec.name}: {training['steps']} steps, held-out exact match {accuracy:.1%}, "
            f"{bin_path.stat().st_size:,} bytes in {bin_path.name}"
        )
    return manifest


def save_for_package(model, task, config, training, history, spec, out_dir, made_in=None) -> Path:
    """The package's copy of the trained model (torch.save of plain tensors and numbers,
    loadable with weights_only=True), with the history train_model returned and the
    environment that trained it (``notebooks.environment()``). Written next to the
    playground files when exporting elsewhere (``--check``)."""
    path = spec.package_file if out_dir == OUT_DIR else out_dir / spec.package_file.name
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "config": dict(config),
            "training": dict(training),
            "source_vocab": len(task.source_vocab),
            "target_vocab": len(task.target_vocab),
            "state_dict": {name: value.clone() for name, value in model.state_dict().items()},
            "history": history,
            "environment": made_in,
        },
        path,
    )
    return path


@torch.no_grad()
def check_round_trip(model: torch.nn.Module, json_path: Path) -> None:
    """Fail unless the exported file loads back into make_model as the same function."""
    loaded, meta = load_model(json_path)
    source = torch.randint(
        3,
        meta["config"]["source_vocab"],
        (2, 7),
        generator=torch.Generator().manual_seed(1),
    )
    target = torch.randint(
        3,
        meta["config"]["target_vocab"],
        (2, 5),
        generator=torch.Generator().manual_seed(2),
    )
    was_training = model.training
    expected = model.eval().generator(model(source, target))  # eval: no dropout
    model.train(was_training)
    if not torch.equal(loaded.generator(loaded(source, target)), expected):
        raise AssertionError(f"{json_path}: the exported model computes a different function")
