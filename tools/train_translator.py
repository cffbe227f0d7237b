"""Train the English -> Chinese translator the package ships (chapters 13 and 14).

    python tools/train_translator.py           # train, write the files (about 15 minutes)
    python tools/train_translator.py --check   # train again; fail unless identical
    python tools/train_translator.py --device cuda --out /tmp/run   # a GPU run, elsewhere
    python tools/train_translator.py --seed 1 --out /tmp/seed1       # another seed, elsewhere
    python tools/train_translator.py --spread 1 2   # two more seeds: the run-to-run spread

It learns the byte-pair merges on the English side of the Tatoeba training split
(``learn_bpe``, chapter 13), then trains two models with chapter 14's ``train_translator``
with ``TRANSLATION_TRAINING`` (``train_recipe``: the averaged model and the last one), in
two processes side by side (one PyTorch thread each):

* the shipped model: label smoothing 0.1, the average of its last checkpoints;
* the same with no label smoothing, to measure the paper's claim that smoothing hurts
  perplexity but helps BLEU.

For each it records, epoch by epoch, the training loss, the dev loss (cross-entropy per
character, no smoothing) and the dev BLEU and chrF of greedy decoding; and at the end the
translations of the 1,000 test sources by the last and by the averaged weights, greedy and
with beam search. It writes

* ``src/transformer_book/data/tatoeba_en_merges.txt``: the merges, one "left right" a line
  (``read_merges()`` reads them; chapter 13 learns the first ones again and compares);
* ``src/transformer_book/weights/tatoeba_en_zh.pt``: the averaged smoothed model, in half
  precision (``translator_state``), with its history: ``pretrained_translator()`` loads it;
* ``src/transformer_book/weights/tatoeba_en_zh_runs.json``: the settings, both runs'
  histories, test losses and test translations (chapter 14 scores and charts them), and the
  training time (the one thing ``--check`` does not compare).

It prints each run's training throughput (tokens/s, FLOP/s and MFU against a float32 peak
measured in the same process on its one thread: tools/throughput.py), not stored.

Everything is seeded and runs on the CPU with one thread per process, so a second run
writes the same files; ``--check`` proves it.

``--spread SEED ...`` trains both runs again with each other seed (about 15 minutes a seed) and
writes ``src/transformer_book/weights/tatoeba_en_zh_seeds.json``: for every seed, the shipped one
(read from the runs record) included, each run's test scores (BLEU and chrF of the last and the
averaged model, greedy and with beam search), its test loss and its dev losses by epoch. A
comparison of the two runs is then a comparison of seeds, not of one run each (chapter 14).
``--spread ... --check`` trains them again and compares.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from pathlib import Path

import torch

from notebooks import (
    DATA_DIR,
    WEIGHTS_DIR,
    check_outcome,
    differing_files,
    json_differs,
    regenerate_and_compare,
)
from transformer_book import (
    MERGES_FILE,
    PAPER_BEAM,
    TRANSLATOR_WEIGHTS,
    SubwordVocabulary,
    Transformer,
    corpus_scores,
    learn_bpe,
    load_translator,
    mean_token_loss,
    read_merges,
    tatoeba_split,
    train_recipe,
    translation,
    translator_state,
)

RUNS_FILE = "tatoeba_en_zh_runs.json"
SEEDS_FILE = "tatoeba_en_zh_seeds.json"
SMOOTHING_RUNS = {"smoothing 0.1": 0.1, "no smoothing": 0.0}
SHIPPED_RUN = "smoothing 0.1"
BEAM = PAPER_BEAM  # the paper's: beams of 4, length penalty 0.6


def train_run(name: str, smoothing: float, merges: list, device: str, seed: int | None = None) -> dict:
    """One model: train, average, translate the test set. Runs in its own process.

    ``seed`` replaces the recipe's (``TRANSLATION_TRAINING["seed"]``: the shipped model's):
    the initial weights and the order of the batches."""
    from throughput import StepMeter, encoder_decoder_step_cost

    torch.set_num_threads(1)
    started = time.perf_counter()
    train, dev, test = (tatoeba_split(split) for split in ("train", "dev", "test"))

    def on_epoch(epoch: int, translator) -> dict:
        greedy = translator.translate([english for english, _ in dev], beam_size=1)
        scores = corpus_scores(greedy, [references for _, references in dev])
        print(f"  {name}: epoch {epoch}, dev BLEU {scores['bleu']:.2f}", flush=True)
        return {
            "dev_loss": mean_token_loss(translator, dev),
            "dev_bleu": scores["bleu"],
            "dev_chrf": scores["chrf"],
        }

    changes = {"smoothing": smoothing} if seed is None else {"smoothing": smoothing, "seed": seed}
    pad_id = SubwordVocabulary.specials.index("<pad>")  # both vocabularies'
    cost = encoder_decoder_step_cost(translation.TRANSLATION_CONFIG, pad_id)
    with StepMeter(Transformer, cost, device) as meter:
        averaged, last, history = train_recipe(train, merges, device=device, on_epoch=on_epoch, **changes)
    trained_seconds = time.perf_counter() - started
    averaged.model.cpu()
    last.model.cpu()
    sources = [english for english, _ in test]
    result = {"history": history, "test": {}, "test_loss": {}}
    models = {"last": last, "averaged": averaged}
    for label, model in models.items():
        result["test_loss"][label] = mean_token_loss(model, test)
        result["test"][f"{label} greedy"] = model.translate(sources, beam_size=1)
        result["test"][f"{label} beam"] = model.translate(sources, **BEAM)
    shipped = translator_state(models["averaged"])  # half precision
    result["test_loss"]["shipped"] = mean_token_loss(load_translator(shipped), test)
    result["test"]["shipped beam"] = load_translator(shipped).translate(sources, **BEAM)
    result["shipped"] = shipped
    result["seconds"] = {
        "training": trained_seconds,
        "total": time.perf_counter() - started,
    }
    result["throughput"] = meter.result()  # printed by train_all, not recorded
    return result


def report_throughput(runs: dict) -> None:
    """Print each run's training throughput and take it out of the run (the record keeps none)."""
    for name, run in runs.items():
        print(run.pop("throughput").line(f"{name}, training steps"), flush=True)


def train_all(device: str, seed: int | None = None) -> tuple[list, dict, dict]:
    """(the merges, the shipped model's saved state, the runs' record); ``seed``: see train_run."""
    started = time.perf_counter()
    train = tatoeba_split("train")
    english = [sentence for sentence, _ in train]
    merges = learn_bpe(english, translation.TRANSLATION_TRAINING["num_merges"])
    bpe_seconds = time.perf_counter() - started
    print(f"learned {len(merges)} merges in {bpe_seconds:.0f} s", flush=True)
    jobs = [(name, smoothing, merges, device, seed) for name, smoothing in SMOOTHING_RUNS.items()]
    if device == "cpu":  # two processes, one thread each: the 2-core machine's best
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            results = pool.starmap(train_run, jobs)
    else:
        results = [train_run(*job) for job in jobs]
    runs = dict(zip(SMOOTHING_RUNS, results))
    saved = runs[SHIPPED_RUN].pop("shipped")
    saved["history"] = runs[SHIPPED_RUN]["history"]
    for run in runs.values():
        run.pop("shipped", None)
    timing = {name: run.pop("seconds") for name, run in runs.items()}
    report_throughput(runs)
    timing["merges"] = bpe_seconds
    timing["total"] = time.perf_counter() - started
    record = {
        "settings": {
            "config": translation.TRANSLATION_CONFIG,
            "training": translation.TRANSLATION_TRAINING
            if seed is None
            else {**translation.TRANSLATION_TRAINING, "seed": seed},
            "smoothing": SMOOTHING_RUNS,
            "beam": BEAM,
            "shipped": SHIPPED_RUN,
            "device": device,
            "torch": torch.__version__,
        },
        "runs": runs,
        "timing_seconds": timing,
    }
    return merges, saved, record


def write(merges: list, saved: dict, record: dict, weights_dir: Path, data_dir: Path):
    for folder in (weights_dir, data_dir):
        folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"{left} {right}\n" for left, right in merges)
    (data_dir / MERGES_FILE).write_text(lines, encoding="utf-8")
    torch.save(saved, weights_dir / TRANSLATOR_WEIGHTS)
    text = json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True)
    (weights_dir / RUNS_FILE).write_text(text + "\n", encoding="utf-8")


def run_summary(run: dict, test: list) -> dict:
    """One run of a record -> its test scores and losses (what the spread record keeps)."""
    references = [translations for _, translations in test]
    scores = {}
    for label, hypotheses in run["test"].items():
        if label != "shipped beam":
            found = corpus_scores(hypotheses, references)
            scores[label] = {name: round(value, 2) for name, value in found.items()}
    return {
        "test": scores,
        "test_loss": {label: round(loss, 4) for label, loss in run["test_loss"].items()},
        "dev_loss": [round(epoch["dev_loss"], 4) for epoch in run["history"]],
    }


def spread_record(records: dict[int, dict]) -> dict:
    """Seed -> a runs record, summarised: {"seeds": {seed: {run: summary}}, "settings"}."""
    test = tatoeba_split("test")
    shipped_seed = translation.TRANSLATION_TRAINING["seed"]
    settings = dict(records[shipped_seed]["settings"], training=translation.TRANSLATION_TRAINING)
    return {
        "settings": {key: value for key, value in settings.items() if key != "torch"},
        "seeds": {
            str(seed): {name: run_summary(run, test) for name, run in record["runs"].items()}
            for seed, record in sorted(records.items())
        },
    }


def write_spread(record: dict, weights_dir: Path):
    text = json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True)
    (weights_dir / SEEDS_FILE).write_text(text + "\n", encoding="utf-8")


def spread(seeds: list[int], device: str, check: bool) -> int:
    shipped_seed = translation.TRANSLATION_TRAINING["seed"]
    if shipped_seed in seeds:
        raise SystemExit(
            f"--spread: seed {shipped_seed} is the shipped run's, read from {RUNS_FILE}; give the other seeds"
        )
    records = {shipped_seed: json.loads((WEIGHTS_DIR / RUNS_FILE).read_text(encoding="utf-8"))}
    for seed in seeds:
        print(f"seed {seed}", flush=True)
        records[seed] = train_all(device, seed)[2]
    record = spread_record(records)
    if not check:
        write_spread(record, WEIGHTS_DIR)
        print(f"wrote {SEEDS_FILE} to {WEIGHTS_DIR}")
        return 0
    found = regenerate_and_compare(lambda folder: write_spread(record, folder), {SEEDS_FILE: WEIGHTS_DIR / SEEDS_FILE})
    return check_outcome(found, "the shipped spread record", same="identical to the shipped record")


def merges_differences(new: Path, old: Path) -> list[str]:
    return [MERGES_FILE] if read_merges(new) != read_merges(old) else []


def weights_differences(new: Path, old: Path) -> list[str]:
    """What differs between two tatoeba_en_zh.pt: each tensor, then each other entry."""
    found = []
    ours = torch.load(new, weights_only=True)
    theirs = torch.load(old, weights_only=True)
    for key in sorted(set(ours) | set(theirs)):
        if key == "state_dict":
            for name, value in theirs[key].items():
                if name not in ours[key] or not torch.equal(ours[key][name], value):
                    found.append(f"{TRANSLATOR_WEIGHTS}: tensor {name}")
        elif ours.get(key) != theirs.get(key):
            found.append(f"{TRANSLATOR_WEIGHTS}: {key}")
    return found


def runs_differences(new: Path, old: Path) -> list[str]:
    """Whether two runs records differ, the timings and torch's version aside."""
    differs = json_differs(new, old, ("timing_seconds",), ("settings", "torch"))
    return [f"{RUNS_FILE}: histories or translations"] if differs else []


COMPARE = {MERGES_FILE: merges_differences, TRANSLATOR_WEIGHTS: weights_differences, RUNS_FILE: runs_differences}


def shipped(weights_dir: Path, data_dir: Path) -> dict[str, Path]:
    """Where each of the three files is shipped."""
    return {
        MERGES_FILE: data_dir / MERGES_FILE,
        TRANSLATOR_WEIGHTS: weights_dir / TRANSLATOR_WEIGHTS,
        RUNS_FILE: weights_dir / RUNS_FILE,
    }


def differences(out_dir: Path, weights_dir: Path, data_dir: Path) -> list[str]:
    """What differs between a run written to ``out_dir`` and the shipped files,
    ignoring the timings."""
    return differing_files(out_dir, shipped(weights_dir, data_dir), COMPARE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="train again and compare")
    parser.add_argument("--device", default="cpu", help="cpu (reproducible) or cuda")
    parser.add_argument("--out", type=Path, help="write all three files here instead of the package")
    parser.add_argument("--seed", type=int, help="another seed than the shipped model's (needs --out)")
    parser.add_argument(
        "--spread", type=int, nargs="+", metavar="SEED", help=f"train these seeds too and write {SEEDS_FILE}"
    )
    args = parser.parse_args(argv)
    if args.spread:
        if args.seed is not None or args.out:
            parser.error("--spread writes its own record: no --seed or --out with it")
        return spread(args.spread, args.device, args.check)
    if args.seed is not None and (args.check or not args.out):
        parser.error(f"--seed {args.seed} trains another model than the shipped one: give --out (and no --check)")
    merges, saved, record = train_all(args.device, args.seed)
    print(json.dumps(record["timing_seconds"], indent=1))
    if not args.check:
        weights_dir, data_dir = (args.out, args.out) if args.out else (WEIGHTS_DIR, DATA_DIR)
        write(merges, saved, record, weights_dir, data_dir)
        print(f"wrote {MERGES_FILE} to {data_dir}, {TRANSLATOR_WEIGHTS} and {RUNS_FILE} to {weights_dir}")
        return 0
    found = regenerate_and_compare(
        lambda folder: write(merges, saved, record, folder, folder), shipped(WEIGHTS_DIR, DATA_DIR), COMPARE
    )
    return check_outcome(found, "the shipped files", same="identical to the shipped files (timings aside)")


if __name__ == "__main__":
    raise SystemExit(main())
