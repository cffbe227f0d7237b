"""Train the capstone models and export them for the playground (book/playground.md).

    python tools/export_playground.py               # every task: train, write the files
    python tools/export_playground.py --check       # again; fail unless identical
    python tools/export_playground.py --translator  # only the translator, with its BLEU

The files go to book/_static/playground/. Each task gets two: ``TASK.bin``, every tensor
of the model's state dict as little-endian float32, one after the other (a tensor shared
by several names, as with tied weights, is stored once); and ``TASK.json``: make_model's
arguments, the vocabularies, the decoding limits and each tensor's name, shape and
offset (in floats) in the binary file. ``manifest.json`` lists the tasks for the page.
Training is seeded, with a fixed number of steps on the CPU: the files are the same on
every run. The number-words model is not trained here: it is the package's final
checkpoint (``trained_numbers_model()``, 2,000 steps of tools/train_numbers.py).

The translator of chapter 14 (``pretrained_translator()``, 1.9 million parameters) is
exported in 8 bits: each row of a weight matrix as int8 with one float32 scale
(``quantize_rows``), vectors (biases, norms) as float32; its JSON holds the English
byte-pair merges too, for the page's tokenizer (book/_static/playground/tokenizer.js).
``translator_bleu.json`` records the test-set BLEU of the quantized weights beside the
full model's, and the quantized translations it scored.

The browser's model (book/_static/playground/transformer.js) reads the files;
tests/test_playground.py and tests/test_playground_translator.py check it against the
package's model (see ``load_model``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))

from transformer_book.model import make_model  # after the path is set

OUT_DIR = REPO_ROOT / "book" / "_static" / "playground"
FORMAT = "transformer-book-playground/1"


@dataclass(frozen=True)
class PlaygroundTask:
    """A task of the capstone chapters, and how its chapter trains it.

    ``factory``, ``config`` and ``training`` are "module:name" of the Task factory
    (called with ``held_out=True`` for the held-out pairs), of make_model's keyword
    arguments and of train_model's (the chapter's fixed, seeded training: steps, seed,
    batch_size, ...). ``package_file``, if given, is where the package gets its own copy
    of the trained weights (``transformer_book.training.trained_dates_model`` loads it).
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


PACKAGE_WEIGHTS = REPO_ROOT / "src" / "transformer_book" / "weights"
TASKS = [
    PlaygroundTask(  # chapter 9: train_model(dates_task(), **DATES_TRAINING)
        "dates",
        "transformer_book.tasks:dates_task",
        "transformer_book.training:DATES_CONFIG",
        "transformer_book.training:DATES_TRAINING",
        package_file=PACKAGE_WEIGHTS / "dates.pt",
    ),
    PlaygroundTask(  # chapter 12's run continued to 2,000 steps by tools/train_numbers.py
        "numbers",
        "transformer_book.numerals:numbers_task",
        "transformer_book.numerals:NUMBERS_CONFIG",
        "transformer_book.numerals:NUMBERS_TRAINING",
        pretrained="transformer_book.numerals:trained_numbers_model",
    ),
]
EXAMPLES = 3  # held-out sources shown on the page: ones it gets right, and one it gets
# wrong if there is one among the held-out pairs (the page says which)
PARITY_INPUTS = 5  # more of them, for the parity test only
HELD_OUT_PAIRS, HELD_OUT_SEED = 1000, 1  # chapter 9's held-out set
MAX_BYTES = 1_000_000  # the README promises less than 1 MB per weights file


def tensor_table(model: torch.nn.Module) -> tuple[list[dict], bytes]:
    """The state dict as (name, shape, offset in floats of each tensor; the bytes)."""
    entries, chunks, stored, offset = [], [], {}, 0
    for name, tensor in model.state_dict().items():
        # Tied weights share their storage: stored once, listed under every name.
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key not in stored:
            stored[key] = offset
            data = (
                tensor.detach()
                .cpu()
                .to(torch.float32)
                .contiguous()
                .numpy()
                .astype("<f4")
            )
            chunks.append(data.tobytes())
            offset += tensor.numel()
        entries.append(
            {"name": name, "shape": list(tensor.shape), "offset": stored[key]}
        )
    return entries, b"".join(chunks)


def export_model(
    model: torch.nn.Module, meta: dict, name: str, out_dir: Path = OUT_DIR
) -> tuple[Path, Path]:
    """Write ``name.bin`` and ``name.json`` to ``out_dir``; return their paths.

    ``meta`` holds ``config`` (make_model's keyword arguments, vocabulary sizes
    included), ``source_tokens`` and ``target_tokens`` (index = id), ``pad_id``,
    ``start_id``, ``end_id``, ``max_source_len``, ``max_new_tokens``, ``examples`` and
    anything else the page shows.
    """
    missing = {
        "config",
        "source_tokens",
        "target_tokens",
        "pad_id",
        "start_id",
        "end_id",
        "max_source_len",
        "max_new_tokens",
        "examples",
    } - set(meta)
    if missing:
        raise ValueError(f"meta for {name!r} lacks {sorted(missing)}")
    entries, data = tensor_table(model)
    if len(data) > MAX_BYTES:
        raise ValueError(
            f"{name}.bin would be {len(data):,} bytes; "
            f"the playground's limit is {MAX_BYTES:,}"
        )
    return write_files(out_dir, name, meta, entries, data)


def write_files(
    out_dir: Path, name: str, meta: dict, entries: list, data: bytes, *,
    weights_note: dict | None = None, compact: bool = False,
) -> tuple[Path, Path]:
    """Write ``name.bin`` (``data``) and ``name.json`` (``meta``, the file's size and
    sha256 with ``weights_note``, the tensor ``entries``); return their paths.
    ``compact`` writes the JSON without indentation (for a file the page downloads)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_path, json_path = out_dir / f"{name}.bin", out_dir / f"{name}.json"
    bin_path.write_bytes(data)
    document = {
        "format": FORMAT,
        "name": name,
        **meta,
        "weights": {
            "file": bin_path.name,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            **(weights_note or {}),
        },
        "tensors": entries,
    }
    layout = {"separators": (",", ":")} if compact else {"indent": 1}
    json_path.write_text(
        json.dumps(document, ensure_ascii=False, **layout) + "\n", encoding="utf-8"
    )
    return json_path, bin_path


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A matrix (rows, cols) as int8 and one float32 scale per row: row ~ q * scale.

    The scale maps the row's largest magnitude to 127 (symmetric, no zero point), so
    each weight is off by at most half a step, scale / 2.
    """
    weight = weight.detach().cpu().to(torch.float32)
    scales = weight.abs().amax(dim=1) / 127  # (rows,)
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))  # a zero row
    q = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scales


def dequantize_rows(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float32 q * scale, row by row: the weights the page computes with."""
    return q.to(torch.float32) * scales[:, None]


def quantized_state(model: torch.nn.Module) -> dict:
    """The state dict as the 8-bit file holds it: every matrix quantized and back."""
    return {
        name: dequantize_rows(*quantize_rows(value)) if value.dim() == 2
        else value.detach().cpu().to(torch.float32).clone()
        for name, value in model.state_dict().items()
    }  # fmt: skip


def export_quantized(
    model: torch.nn.Module, meta: dict, name: str, out_dir: Path = OUT_DIR,
    max_bytes: int = 4_000_000,
) -> tuple[Path, Path]:
    """As ``export_model``, with every matrix in 8 bits (``quantize_rows``).

    The file holds the float32 tensors (vectors, then each matrix's scales) and then
    the int8 matrices. A tensor's ``offset`` counts elements of its ``dtype`` from the
    start of the file; an int8 matrix's ``scales`` is the float32 offset of its scales.
    """
    floats, entries, matrices, float_count = [], [], [], 0
    for tensor_name, value in model.state_dict().items():
        value = value.detach().cpu().to(torch.float32)
        if value.dim() == 2:
            matrices.append((tensor_name, value))
            continue
        floats.append(value.contiguous().numpy().astype("<f4").tobytes())
        entries.append({"name": tensor_name, "shape": list(value.shape),
                        "dtype": "float32", "offset": float_count})
        float_count += value.numel()
    quantized = []
    for tensor_name, value in matrices:
        q, scales = quantize_rows(value)
        floats.append(scales.numpy().astype("<f4").tobytes())
        quantized.append((tensor_name, list(value.shape), q, float_count))
        float_count += scales.numel()
    integers, byte_offset = [], 4 * float_count
    for tensor_name, shape, q, scales_offset in quantized:
        integers.append(q.contiguous().numpy().tobytes())
        entries.append({"name": tensor_name, "shape": shape, "dtype": "int8",
                        "offset": byte_offset, "scales": scales_offset})
        byte_offset += q.numel()
    data = b"".join(floats + integers)
    if len(data) > max_bytes:
        raise ValueError(
            f"{name}.bin would be {len(data):,} bytes; the limit is {max_bytes:,}"
        )
    return write_files(out_dir, name, meta, entries, data,
                       weights_note={"quantized": "int8 rows"}, compact=True)


def read_state(meta: dict, data: bytes) -> dict:
    """An exported file's state dict, float32 (8-bit matrices dequantized)."""
    floats = torch.frombuffer(bytearray(data[: len(data) // 4 * 4]), dtype=torch.float32)
    raw = torch.frombuffer(bytearray(data), dtype=torch.int8)
    state = {}
    for entry in meta["tensors"]:
        shape, start = entry["shape"], entry["offset"]
        size = int(torch.Size(shape).numel())
        if entry.get("dtype", "float32") == "float32":
            state[entry["name"]] = floats[start : start + size].view(shape).clone()
        else:
            q = raw[start : start + size].view(shape)
            scales = floats[entry["scales"] : entry["scales"] + shape[0]]
            state[entry["name"]] = dequantize_rows(q, scales)
    return state


def load_model(json_path: Path) -> tuple[torch.nn.Module, dict]:
    """The package's model (eval mode, CPU) with the file's weights; its metadata."""
    meta = json.loads(Path(json_path).read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(
            f"{json_path}: format {meta.get('format')!r}, expected {FORMAT!r}"
        )
    data = (Path(json_path).parent / meta["weights"]["file"]).read_bytes()
    if (
        len(data) != meta["weights"]["bytes"]
        or hashlib.sha256(data).hexdigest() != meta["weights"]["sha256"]
    ):
        raise ValueError(
            f"{meta['weights']['file']} does not match {json_path} (size or sha256)"
        )
    state = read_state(meta, data)
    model = make_model(**meta["config"])
    model.load_state_dict(state, strict=True)
    return model.eval(), meta


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
    tokens = [
        token for index, token in enumerate(vocab.tokens) if index not in specials
    ]
    return "" if all(len(token) == 1 for token in tokens) else " "


def as_text(source, vocab) -> str:
    """A source as the reader types it: characters run together, words spaced."""
    return source if isinstance(source, str) else separator(vocab).join(source)


@torch.no_grad()
def greedy_right(model, task, pairs) -> list[bool]:
    """For each (source, target) pair: does greedy decoding give exactly the target?"""
    from transformer_book.decoding import greedy_decode
    from transformer_book.masking import padding_mask

    vocab = task.target_vocab
    source, _ = task.batch(pairs)  # (pairs, source)
    mask = padding_mask(source, task.source_vocab.pad_id)
    tokens = greedy_decode(
        model, source, mask, vocab.start_id, task.max_target_len + 1, end_id=vocab.end_id
    )  # (pairs, 1 + generated)
    join = separator(vocab).join
    return [join(vocab.decode(row)) == as_text(target, vocab)
            for row, (_, target) in zip(tokens.tolist(), pairs, strict=True)]


def pick_examples(right: list[bool]) -> list[int]:
    """Indices of the page's examples: the first held-out pairs the model gets right,
    and the first it gets wrong, last, if there is one."""
    wrong = [index for index, ok in enumerate(right) if not ok][:1]
    good = [index for index, ok in enumerate(right) if ok]
    return good[: EXAMPLES - len(wrong)] + wrong


def task_meta(task, config: dict, sources: list[str]) -> dict:
    """The page's metadata for a task (of transformer_book.tasks, with CharVocabs)."""
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
    return resolve(spec.factory)(held_out=True).pairs(
        HELD_OUT_PAIRS, seed=HELD_OUT_SEED
    )


def train_and_export(out_dir: Path = OUT_DIR) -> list[dict]:
    """Train each task there is (its chapter's seed and steps, CPU); export it."""
    from transformer_book.training import exact_match_accuracy, train_model

    torch.set_num_threads(1)  # the same arithmetic, in the same order, on every run
    manifest = []
    for spec in TASKS:
        factory, config = resolve(spec.factory), resolve(spec.config)
        training = resolve(spec.training)
        if factory is None or config is None or training is None:
            print(f"{spec.name}: skipped, {spec.factory}, {spec.config} or "
                  f"{spec.training} is missing")
            continue
        task = factory()
        if spec.pretrained is not None:  # the package's weights, trained by their tool
            model, history = resolve(spec.pretrained)()
            training = {**training, "steps": history[-1]["step"]}
        else:
            model, history = train_model(task, **training, device="cpu", config=config)
        model = model.cpu().eval()
        if spec.package_file is not None:
            save_for_package(model, task, config, training, history, spec, out_dir)
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
        meta["example_answers"] = [
            as_text(held_out[index][1], task.target_vocab) for index in chosen
        ]
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
        json_path, bin_path = export_model(model, meta, spec.name, out_dir)
        check_round_trip(model, json_path)
        manifest.append(spec.name)
        print(
            f"{spec.name}: {training['steps']} steps, held-out exact match {accuracy:.1%}, "
            f"{bin_path.stat().st_size:,} bytes in {bin_path.name}"
        )
    return manifest


def write_manifest(out_dir: Path = OUT_DIR) -> list[dict]:
    """manifest.json: every task exported to ``out_dir``, in the page's order, with the
    sizes of its two files (the page says what choosing it downloads)."""
    manifest = []
    for name in [spec.name for spec in TASKS] + [TRANSLATOR]:
        json_path = out_dir / f"{name}.json"
        if not json_path.exists():
            continue
        meta = json.loads(json_path.read_text(encoding="utf-8"))
        manifest.append({
            "name": name,
            "title": meta["title"],
            "file": json_path.name,
            "bytes": meta["weights"]["bytes"],
            "json_bytes": json_path.stat().st_size,
        })  # fmt: skip
    (out_dir / "manifest.json").write_text(
        json.dumps({"tasks": manifest}, indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return manifest


# --- The translator (chapter 14), in 8 bits ----------------------------------------------
TRANSLATOR = "translator"
# Test sentences (never trained on) for the page's buttons: three that the 8-bit model
# translates exactly as Tatoeba does, and one it gets plainly wrong, with what is wrong.
TRANSLATOR_EXAMPLES = (
    "I accepted her invitation.",
    "Tom sat beside Mary.",
    "Do you have a pencil?",
    "These shoes are hers.",
)
TRANSLATOR_WRONG = {  # sentence: (the 8-bit model's beam output, what is wrong with it)
    "These shoes are hers.": (
        "这些鞋子很棒。",
        "it says these shoes are great (很棒), not whose they are (她的: hers)",
    ),
}
TRANSLATOR_MAX_BYTES = 4_000_000  # weights and JSON: all the page downloads for the task
BEAM_SIZE, ALPHA = 4, 0.6  # chapter 14's beam search
BLEU_FILE = "translator_bleu.json"
BLEU_LIMIT = 0.5  # the 8-bit weights' test BLEU is within this of the full model's


def translator_meta(translator) -> dict:
    """The page's metadata for a ``Translator``: vocabularies, merges, limits."""
    source, target = translator.source_vocab, translator.target_vocab
    return {
        "title": "English → 中文",
        "config": {"source_vocab": len(source), "target_vocab": len(target),
                   **translator.config},
        "source_tokens": list(source.tokens),
        "target_tokens": list(target.tokens),
        # chapter 13: NFKC, pre-tokenize, byte-pair merges; unknown tokens are <unk>
        "tokenizer": {
            "kind": "bpe",
            "normalize": "NFKC",
            "end_of_word": "</w>",
            "merges": [" ".join(pair) for pair in translator.bpe.merges],
        },
        "source_separator": None,
        "target_separator": "",
        "pad_id": target.pad_id,
        "start_id": target.start_id,
        "end_id": target.end_id,
        "unk_id": source.unk_id,
        "max_source_len": translator.max_tokens,
        # Translator.translate: min(2 * source tokens + 10, max_len - 1) new tokens
        "max_new_tokens": translator.max_tokens - 1,
        "max_new_per_source": [2, 10],
        "length_penalty": ALPHA,
        "answer_label": "Tatoeba's translation",
    }


def translate_all(translator, sentences, beam_size: int) -> list[str]:
    """One sentence at a time, as the page decodes (no padding)."""
    return translator.translate(sentences, beam_size=beam_size, alpha=ALPHA, batch_size=1)


def export_translator(out_dir: Path = OUT_DIR) -> dict:
    """The shipped translator in 8 bits, and the BLEU record of those weights."""
    from transformer_book.tatoeba import tatoeba_split
    from transformer_book.translation import (
        Translator,
        corpus_scores,
        pretrained_translator,
    )

    torch.set_num_threads(1)
    full, _ = pretrained_translator()
    meta = translator_meta(full)
    quantized_model = make_model(**meta["config"])
    quantized_model.load_state_dict(quantized_state(full.model))
    quantized = Translator(
        quantized_model.eval(), full.bpe.merges, full.source_vocab, full.target_vocab,
        full.config,
    )  # fmt: skip
    test = tatoeba_split("test")
    sources = [english for english, _ in test]
    references = [options for _, options in test]
    examples = [quantized.translate([text], BEAM_SIZE, ALPHA, 1)[0]
                for text in TRANSLATOR_EXAMPLES]
    answers = [dict(test)[text] for text in TRANSLATOR_EXAMPLES]  # KeyError: not a test sentence
    right = [output in options for output, options in zip(examples, answers)]
    for text, output, ok in zip(TRANSLATOR_EXAMPLES, examples, right):
        expected = TRANSLATOR_WRONG.get(text, (None,))[0]
        if ok == (text in TRANSLATOR_WRONG) or (expected and output != expected):
            raise AssertionError(f"example {text!r}: the 8-bit model writes {output!r}")
    meta |= {
        "examples": list(TRANSLATOR_EXAMPLES),
        "example_answers": answers,
        "example_right": right,
        "example_notes": [TRANSLATOR_WRONG.get(text, (None, None))[1]
                          for text in TRANSLATOR_EXAMPLES],
    }
    outputs = {
        "full beam": translate_all(full, sources, BEAM_SIZE),
        "8-bit beam": translate_all(quantized, sources, BEAM_SIZE),
        "full greedy": translate_all(full, sources, 1),
        "8-bit greedy": translate_all(quantized, sources, 1),
    }
    scores = {name: corpus_scores(texts, references) for name, texts in outputs.items()}
    scores = {name: {key: round(value, 4) for key, value in score.items()}
              for name, score in scores.items()}
    meta["test_scores"] = {"sentences": len(test), **scores}
    json_path, bin_path = export_quantized(
        full.model, meta, TRANSLATOR, out_dir, max_bytes=TRANSLATOR_MAX_BYTES
    )
    total = bin_path.stat().st_size + json_path.stat().st_size
    if total > TRANSLATOR_MAX_BYTES:
        raise ValueError(f"the translator's files are {total:,} bytes; "
                         f"the limit is {TRANSLATOR_MAX_BYTES:,}")
    loaded, _ = load_model(json_path)
    for name, value in quantized_model.state_dict().items():
        if not torch.equal(loaded.state_dict()[name], value):
            raise AssertionError(f"{json_path}: {name} does not load back")
    gap = scores["full beam"]["bleu"] - scores["8-bit beam"]["bleu"]
    record = {
        "weights_sha256": json.loads(json_path.read_text("utf-8"))["weights"]["sha256"],
        "test_sentences": len(test),
        "decoding": {"beam_size": BEAM_SIZE, "alpha": ALPHA, "batch_size": 1},
        "bleu": "sacrebleu corpus BLEU, tokenize='zh', every reference (corpus_scores)",
        "scores": scores,
        "bleu_gap": round(gap, 4),
        "translations": outputs,
    }
    (out_dir / BLEU_FILE).write_text(
        json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    if abs(gap) > BLEU_LIMIT:
        raise AssertionError(f"8-bit beam BLEU is {gap:.2f} below the full model's")
    print(
        f"translator: {bin_path.stat().st_size:,} + {json_path.stat().st_size:,} bytes; "
        f"test BLEU beam {scores['8-bit beam']['bleu']:.2f} (full "
        f"{scores['full beam']['bleu']:.2f}), greedy {scores['8-bit greedy']['bleu']:.2f} "
        f"(full {scores['full greedy']['bleu']:.2f})"
    )
    return record


def save_for_package(model, task, config, training, history, spec, out_dir) -> Path:
    """The package's copy of the trained model (torch.save of plain tensors and numbers,
    loadable with weights_only=True), with the history train_model returned. Written
    next to the playground files when exporting elsewhere (``--check``)."""
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
        raise AssertionError(
            f"{json_path}: the exported model computes a different function"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="train again and compare with the committed files",
    )
    parser.add_argument(
        "--translator",
        action="store_true",
        help="export only the translator (and its BLEU record); keep the other tasks",
    )
    args = parser.parse_args(argv)
    if not args.check:
        if not args.translator:
            train_and_export()
        export_translator()
        write_manifest()
        return 0
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        train_and_export(Path(scratch))
        export_translator(Path(scratch))
        write_manifest(Path(scratch))
        committed = {path.name: path for path in OUT_DIR.iterdir()}
        committed |= {spec.package_file.name: spec.package_file for spec in TASKS
                      if spec.package_file is not None}
        different = [
            path.name
            for path in sorted(Path(scratch).iterdir())
            if path.name not in committed
            or committed[path.name].read_bytes() != path.read_bytes()
        ]
    print("identical" if not different else f"different: {different}")
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
