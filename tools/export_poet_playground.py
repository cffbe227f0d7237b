"""Export the poets the package ships (chapter 15's, and chapter 20's taught to rhyme by DPO)
for the poem page of the playground.

    python tools/export_poet_playground.py           # write the four files
    python tools/export_poet_playground.py --check   # again; fail unless identical

The page is book/playground_poems.md; its model is book/_static/playground/gpt.js. The files
go to book/_static/playground/, two for each poet of ``POETS`` (``poet`` for the base poet,
``poet_dpo`` for the one DPO taught): ``NAME.bin``, every tensor of the shipped weights
(src/transformer_book/weights/tang_poet.pt or tang_poet_dpo.pt, half precision) as
little-endian float16, one after the other, the bytes as shipped; and ``NAME.json``: the GPT's
configuration, the vocabulary's tokens (index = id), the special ids, what the page says about
the training (read from tang_poet_history.json, or the DPO run's record), each tensor's name,
shape and offset (in float16 elements) in the binary file, the rhyme class of each character
of the vocabulary (chapter 19's table, rhyme_finals.tsv, as the page's rhyme checker
poet-rhyme.js reads it) and both poets' measured rates as tools/train_grpo.py recorded them
(tang_poet_dpo.json), with their scope. Each JSON file is whole (the DPO poet's repeats the
40 KB of the vocabulary), so each poet loads alone with the same loader. Nothing is trained or
rounded here: the files are a function of the shipped weights and records, the same on every
run. The page downloads a poet's two files when the reader picks it (the base poet as the page
opens), at most ``MAX_BYTES`` together.

tests/test_playground_poet.py checks that the files load back into the package's GPT as
exactly the shipped weights, the JavaScript model against PyTorch on both poets, and the
page's rhyme checker against chapter 19's.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import json
from dataclasses import asdict
from pathlib import Path

import torch

from notebooks import REPO_ROOT, WEIGHTS_DIR, regenerate_and_compare
from playground_files import read_files
from train_grpo import SEEDS
from transformer_book import (
    CLASS_OF_FINAL,
    GPT,
    HISTORY_FILE,
    POET_STAGES,
    PREFERENCE_RECORD,
    RHYME_CLASSES,
    GPTConfig,
    PoemVocabulary,
    Poet,
    rhyme_finals,
)

OUT_DIR = REPO_ROOT / "book" / "_static" / "playground"
NAME = "poet"
FORMAT = "transformer-book-poet/1"
MAX_BYTES = 4_000_000  # one poet's NAME.bin and NAME.json together: what the page downloads for it
# The page's poets: stage of pretrained_poet -> the files' name and what the page calls it.
POETS = {
    "base": {"name": NAME, "label": "the base poet (chapter 15)"},
    "dpo": {"name": f"{NAME}_dpo", "label": "taught to rhyme by DPO (chapter 20)"},
}
RECORD = PREFERENCE_RECORD.format(arm="dpo")  # the DPO run's record: both poets' measures
MEASURES = (
    "poems",
    "rhyme",
    "repeated",
    "rhymed_by_repeat",
    "form",
    "held_out_perplexity",
)
ACROSTIC_MAX = 4  # characters of a 藏头诗 prompt, one per verse (the page's limit)
PROMPT_MAX = 10  # characters of a first-verse prompt (two verses with their marks)
VERSE_ENDS = "，。？"  # the marks that close a verse
# The page's example buttons: (prompt, 藏头 or a first verse).
EXAMPLES = [
    ("春花秋月", True),
    ("山高水长", True),
    ("白日依山尽，", False),
    ("明月", False),
]
# More prompts for the browser test's parity checks (logits and greedy tokens).
PARITY_PROMPTS = [("", False), ("风", False), ("江上", True), ("故人西辞黄鹤楼", False)]


def read_shipped(weights_dir: Path = WEIGHTS_DIR, stage: str = "base") -> tuple[dict, bytes]:
    """The shipped checkpoint of ``stage`` (config, characters, float16 weights) and its bytes."""
    if stage not in POETS:
        raise ValueError(f"stage must be one of {sorted(POETS)}; got {stage!r}")
    raw = (weights_dir / POET_STAGES[stage]).read_bytes()
    return torch.load(io.BytesIO(raw), map_location="cpu"), raw


def tensor_table(weights: dict) -> tuple[list[dict], bytes]:
    """The float16 tensors as (name, shape, offset in float16 elements; the bytes)."""
    entries, chunks, offset = [], [], 0
    for name, tensor in weights.items():
        if tensor.dtype != torch.float16:
            raise ValueError(f"{name} is {tensor.dtype}; the poet ships float16 weights")
        chunks.append(tensor.contiguous().numpy().astype("<f2").tobytes())
        entries.append({"name": name, "shape": list(tensor.shape), "offset": offset})
        offset += tensor.numel()
    return entries, b"".join(chunks)


def rhyme_table(vocab: PoemVocabulary) -> dict:
    """What the page's rhyme checker needs of chapter 19's: each rhyme class's characters of the
    vocabulary (in the order of their ids) and its finals. A character in no class is in none."""
    finals = rhyme_finals()
    classes = {name: "" for name in RHYME_CLASSES}
    for token in vocab.tokens[3:]:
        name = CLASS_OF_FINAL.get(finals.get(token, ""))
        if name is not None:
            classes[name] += token
    return {
        "classes": classes,
        "finals": {name: list(f) for name, f in RHYME_CLASSES.items()},
    }


def measured(weights_dir: Path = WEIGHTS_DIR) -> dict:
    """Both poets' rates as tools/train_grpo.py recorded them, and their scope: the poems were
    written with ``Poet.write``'s default temperature and top-p, one a seed of ``SEEDS``."""
    record = json.loads((weights_dir / RECORD).read_text(encoding="utf-8"))
    defaults = inspect.signature(Poet.write).parameters
    seeds = list(SEEDS)
    if seeds != list(range(seeds[0], seeds[-1] + 1)):
        raise ValueError(f"the record's seeds are not a range: {seeds}")
    rates = {"base": record["base"], "dpo": record["tuned"]}
    for stage, rate in rates.items():
        if rate["poems"] != len(seeds):
            raise ValueError(f"{RECORD}: {stage} measured on {rate['poems']} poems, not {len(seeds)} (SEEDS)")
    return {
        "record": f"src/transformer_book/weights/{RECORD}",
        "seeds": [seeds[0], seeds[-1]],
        "temperature": defaults["temperature"].default,
        "top_p": defaults["top_p"].default,
        **{stage: {key: rate[key] for key in MEASURES} for stage, rate in rates.items()},
    }


def training_of(stage: str, weights_dir: Path) -> dict:
    """What the page says about the poet's training: chapter 15's history, or the DPO record's."""
    if stage == "base":
        history = json.loads((weights_dir / HISTORY_FILE).read_text(encoding="utf-8"))
        return {
            **history["training"],
            "held_out_perplexity": history["held_out_perplexity"],
            "final_loss": history["losses"][-1],
        }
    record = json.loads((weights_dir / RECORD).read_text(encoding="utf-8"))
    return {
        **record["training"],
        "held_out_perplexity": record["tuned"]["held_out_perplexity"],
    }


def export_poet(stage: str, out_dir: Path = OUT_DIR, weights_dir: Path = WEIGHTS_DIR) -> tuple[Path, Path]:
    """Write ``NAME.json`` and ``NAME.bin`` of ``stage`` (a key of ``POETS``) to ``out_dir``;
    return their paths."""
    stored, raw = read_shipped(weights_dir, stage)
    name = POETS[stage]["name"]
    vocab = PoemVocabulary(stored["characters"])
    config = GPTConfig(len(vocab), **stored["config"])
    entries, data = tensor_table(stored["weights"])
    for prompt, _ in EXAMPLES + PARITY_PROMPTS:
        if vocab.unknown(prompt):
            raise ValueError(f"prompt {prompt!r}: {vocab.unknown(prompt)} not in the vocabulary")
    document = {
        "format": FORMAT,
        "name": name,
        "stage": stage,
        "title": "写诗 (poems)",
        "poets": {key: {"label": poet["label"], "file": f"{poet['name']}.json"} for key, poet in POETS.items()},
        "config": asdict(config),
        "tokens": vocab.tokens,
        "pad_id": vocab.pad_id,
        "boundary_id": vocab.boundary_id,
        "unknown_id": vocab.unk_id,
        "verse_ends": VERSE_ENDS,
        "acrostic_max": ACROSTIC_MAX,
        "prompt_max": PROMPT_MAX,
        "examples": [{"prompt": p, "acrostic": a} for p, a in EXAMPLES],
        "parity_prompts": [{"prompt": p, "acrostic": a} for p, a in PARITY_PROMPTS],
        "training": training_of(stage, weights_dir),
        "measured": measured(weights_dir),
        "rhyme": rhyme_table(vocab),
        "source": {
            "file": f"src/transformer_book/weights/{POET_STAGES[stage]}",
            "sha256": hashlib.sha256(raw).hexdigest(),
        },
        "weights": {
            "file": f"{name}.bin",
            "dtype": "float16",
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        "tensors": entries,
    }
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
    total = len(data) + len(text.encode("utf-8"))
    if total > MAX_BYTES:
        raise ValueError(f"{name}.bin and {name}.json would be {total:,} bytes; the page's limit is {MAX_BYTES:,}")
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_path, json_path = out_dir / f"{name}.bin", out_dir / f"{name}.json"
    bin_path.write_bytes(data)
    json_path.write_text(text, encoding="utf-8")
    return json_path, bin_path


def export(out_dir: Path = OUT_DIR, weights_dir: Path = WEIGHTS_DIR) -> tuple[Path, ...]:
    """Write every poet's two files (``export_poet``) to ``out_dir``; return their paths."""
    return tuple(path for stage in POETS for path in export_poet(stage, out_dir, weights_dir))


def read_state(meta: dict, data: bytes) -> dict:
    """The file's weights as a float32 state dict (float16 -> float32 is exact)."""
    halves = torch.frombuffer(bytearray(data), dtype=torch.float16)
    state = {}
    for entry in meta["tensors"]:
        size = int(torch.Size(entry["shape"]).numel())
        start = entry["offset"]
        state[entry["name"]] = halves[start : start + size].view(entry["shape"]).float()
    return state


def load_poet(json_path: Path = OUT_DIR / f"{NAME}.json") -> tuple[Poet, dict]:
    """The package's Poet (eval mode, CPU, float32) with the file's weights; its metadata."""
    meta, data = read_files(json_path, FORMAT)
    vocab = PoemVocabulary(meta["tokens"][3:])
    if vocab.tokens != meta["tokens"]:
        raise ValueError(f"{json_path}: the tokens are not a PoemVocabulary's")
    model = GPT(GPTConfig(**meta["config"]))
    model.load_state_dict(read_state(meta, data), strict=True)
    return Poet(model.eval(), vocab), meta


def check(out_dir: Path = OUT_DIR, weights_dir: Path = WEIGHTS_DIR) -> list[str]:
    """Export again into a scratch folder; the names of the files that differ."""
    return regenerate_and_compare(lambda folder: export(folder, weights_dir), out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="export again and compare with the committed files",
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        different = check(args.out)
        print("identical" if not different else f"different: {different}")
        return 1 if different else 0
    paths = export(args.out)
    print("; ".join(f"{path.name}: {path.stat().st_size:,} bytes" for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
