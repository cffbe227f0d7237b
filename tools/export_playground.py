"""Train the capstone models and export them for the playground (book/playground.md).

    python tools/export_playground.py               # every task: train, write the files
    python tools/export_playground.py --check       # again; fail unless identical (and
                                                    # name the environment if it changed)
    python tools/export_playground.py --translator  # only the translator, with its BLEU

The files go to book/_static/playground/. Each task gets two: ``TASK.bin``, every tensor
of the model's state dict as little-endian float32, one after the other (a tensor shared
by several names, as with tied weights, is stored once); and ``TASK.json``: make_model's
arguments, the vocabularies, the decoding limits and each tensor's name, shape and
offset (in floats) in the binary file. ``manifest.json`` lists the tasks for the page.
Training is seeded, with a fixed number of steps on the CPU, one thread: the files are
the same on every run with the same torch build and CPU kernels. A trained task records
that environment (``notebooks.environment()``: torch's version, CPU capability, MKL
version, threads) in its JSON's "training" record and in the package's copy; ``--check``
compares the files without it, and names it if they differ and it is not this one.
The number-words model is not trained here: it is the package's final checkpoint
(``pretrained_numbers_model()``, 2,000 steps of tools/train_numbers.py).

The translator of chapter 14 (``pretrained_translator()``, 1.9 million parameters) is
exported in 8 bits: each row of a weight matrix as int8 with one float32 scale
(``quantize_rows``), vectors (biases, norms) as float32; its JSON holds the English
byte-pair merges too, for the page's tokenizer (book/_static/playground/tokenizer.js).
``translator_bleu.json`` records the test-set BLEU of the quantized weights beside the
full model's, and the quantized translations it scored.

The browser's model (book/_static/playground/transformer.js) reads the files;
tests/test_playground.py and tests/test_playground_translator.py check it against the
package's model (see ``load_model``). The jobs are in modules of their own: the files'
format (tools/playground_files.py), the dates and numbers tasks (tools/playground_tasks.py)
and the translator (tools/playground_translator.py); this script runs them and writes the
manifest.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from notebooks import check_outcome, json_differs, regenerate_and_compare, saved_differs
from playground_files import OUT_DIR
from playground_tasks import TASKS, train_and_export
from playground_translator import TRANSLATOR, export_translator


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

    def export_all(folder: Path) -> None:
        train_and_export(folder)
        export_translator(folder)
        write_manifest(folder)

    committed = {path.name: path for path in OUT_DIR.iterdir()}
    committed |= {spec.package_file.name: spec.package_file for spec in TASKS if spec.package_file is not None}
    different = regenerate_and_compare(export_all, committed, COMPARE)
    return check_outcome(different, "the committed files", recorded=recorded_environment())


def trained_json_differences(new: Path, old: Path) -> list[str]:
    """A trained task's page file, compared without the record of where it was trained
    (another machine may give the same bits)."""
    return [new.name] if json_differs(new, old, ("training", "environment")) else []


def package_weights_differences(new: Path, old: Path) -> list[str]:
    """The package's copy of a trained model, compared without its environment record."""
    return [new.name] if saved_differs(new, old, "environment") else []


COMPARE = {f"{spec.name}.json": trained_json_differences for spec in TASKS if spec.pretrained is None}
COMPARE |= {spec.package_file.name: package_weights_differences for spec in TASKS if spec.package_file is not None}


def recorded_environment() -> dict | None:
    """The environment the committed trained tasks were made in (None: not recorded)."""
    for spec in TASKS:
        path = OUT_DIR / f"{spec.name}.json"
        if spec.pretrained is None and path.exists():
            training = json.loads(path.read_text(encoding="utf-8"))["training"]
            return training.get("environment")
    return None


if __name__ == "__main__":
    raise SystemExit(main())
