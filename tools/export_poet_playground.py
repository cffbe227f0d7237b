"""Export the poet the package ships (chapter 15) for the poem page of the playground.

    python tools/export_poet_playground.py           # write the two files
    python tools/export_poet_playground.py --check   # again; fail unless identical

The page is book/playground_poems.md; its model is book/_static/playground/gpt.js. The files
go to book/_static/playground/: ``poet.bin``, every tensor of the shipped weights
(src/transformer_book/weights/tang_poet.pt, half precision) as little-endian float16, one
after the other, the bytes as shipped; and ``poet.json``: the GPT's configuration, the
vocabulary's tokens (index = id), the special ids, what the page says about the training
(read from tang_poet_history.json) and each tensor's name, shape and offset (in float16
elements) in the binary file. Nothing is trained or rounded here: the files are a function
of the shipped weights, the same on every run. The page downloads both when the reader
presses its load button, at most ``MAX_BYTES`` together.

tests/test_playground_poet.py checks that the files load back into the package's GPT as
exactly the shipped weights, and the JavaScript model against PyTorch.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from dataclasses import asdict
from pathlib import Path

import torch

from notebooks import REPO_ROOT, regenerate_and_compare
from transformer_book import GPT, HISTORY_FILE, POET_WEIGHTS, GPTConfig, PoemVocabulary, Poet

OUT_DIR = REPO_ROOT / "book" / "_static" / "playground"
WEIGHTS = REPO_ROOT / "src" / "transformer_book" / "weights"
NAME = "poet"
FORMAT = "transformer-book-poet/1"
MAX_BYTES = 4_000_000  # poet.bin and poet.json together: all the page downloads
ACROSTIC_MAX = 4  # characters of a 藏头诗 prompt, one per verse (the page's limit)
PROMPT_MAX = 10  # characters of a first-verse prompt (two verses with their marks)
VERSE_ENDS = "，。？"  # the marks that close a verse
# The page's example buttons: (prompt, 藏头 or a first verse).
EXAMPLES = [("春花秋月", True), ("山高水长", True), ("白日依山尽，", False), ("明月", False)]
# More prompts for the browser test's parity checks (logits and greedy tokens).
PARITY_PROMPTS = [("", False), ("风", False), ("江上", True), ("故人西辞黄鹤楼", False)]


def read_shipped(weights_dir: Path = WEIGHTS) -> tuple[dict, bytes]:
    """The shipped checkpoint (config, characters, float16 weights) and its bytes."""
    raw = (weights_dir / POET_WEIGHTS).read_bytes()
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


def export(out_dir: Path = OUT_DIR, weights_dir: Path = WEIGHTS) -> tuple[Path, Path]:
    """Write ``poet.json`` and ``poet.bin`` to ``out_dir``; return their paths."""
    stored, raw = read_shipped(weights_dir)
    vocab = PoemVocabulary(stored["characters"])
    config = GPTConfig(len(vocab), **stored["config"])
    history = json.loads((weights_dir / HISTORY_FILE).read_text(encoding="utf-8"))
    entries, data = tensor_table(stored["weights"])
    for prompt, _ in EXAMPLES + PARITY_PROMPTS:
        if vocab.unknown(prompt):
            raise ValueError(f"prompt {prompt!r}: {vocab.unknown(prompt)} not in the vocabulary")
    document = {
        "format": FORMAT,
        "name": NAME,
        "title": "写诗 (poems)",
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
        "training": {
            **history["training"],
            "held_out_perplexity": history["held_out_perplexity"],
            "final_loss": history["losses"][-1],
        },
        "source": {
            "file": f"src/transformer_book/weights/{POET_WEIGHTS}",
            "sha256": hashlib.sha256(raw).hexdigest(),
        },
        "weights": {
            "file": f"{NAME}.bin",
            "dtype": "float16",
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        "tensors": entries,
    }
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
    total = len(data) + len(text.encode("utf-8"))
    if total > MAX_BYTES:
        raise ValueError(f"poet.bin and poet.json would be {total:,} bytes; the page's limit is {MAX_BYTES:,}")
    out_dir.mkdir(parents=True, exist_ok=True)
    bin_path, json_path = out_dir / f"{NAME}.bin", out_dir / f"{NAME}.json"
    bin_path.write_bytes(data)
    json_path.write_text(text, encoding="utf-8")
    return json_path, bin_path


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
    meta = json.loads(Path(json_path).read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{json_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    data = (Path(json_path).parent / meta["weights"]["file"]).read_bytes()
    if len(data) != meta["weights"]["bytes"] or hashlib.sha256(data).hexdigest() != meta["weights"]["sha256"]:
        raise ValueError(f"{meta['weights']['file']} does not match {json_path} (size or sha256)")
    vocab = PoemVocabulary(meta["tokens"][3:])
    if vocab.tokens != meta["tokens"]:
        raise ValueError(f"{json_path}: the tokens are not a PoemVocabulary's")
    model = GPT(GPTConfig(**meta["config"]))
    model.load_state_dict(read_state(meta, data), strict=True)
    return Poet(model.eval(), vocab), meta


def check(out_dir: Path = OUT_DIR, weights_dir: Path = WEIGHTS) -> list[str]:
    """Export again into a scratch folder; the names of the files that differ."""
    return regenerate_and_compare(lambda folder: export(folder, weights_dir), out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="export again and compare with the committed files")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        different = check(args.out)
        print("identical" if not different else f"different: {different}")
        return 1 if different else 0
    json_path, bin_path = export(args.out)
    print(f"{bin_path.name}: {bin_path.stat().st_size:,} bytes; {json_path.name}: {json_path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
