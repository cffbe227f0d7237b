"""Teach the shipped poet to rhyme by GRPO or DPO (chapter 20) and record what each arm did.

    python tools/train_grpo.py --arm grpo                # GRPO with the strict rhyme reward (form as its gate)
    python tools/train_grpo.py --arm grpo_plain          # the same with the plain rhyme reward (重韵 pays)
    python tools/train_grpo.py --arm grpo_no_kl          # the same without the KL term (beta 0)
    python tools/train_grpo.py --arm grpo_unlikely       # the same with an unlikelihood term against 重韵
    python tools/train_grpo.py --arm grpo_token          # the same with a cost on each repeated rhyme's advantage
    python tools/train_grpo.py --arm dpo                 # DPO on pairs of the poet's own poems
    python tools/train_grpo.py --arm grpo --seed 1       # another seed: tang_poet_grpo_seed1.json
    python tools/train_grpo.py --arm grpo --device cuda  # on a GPU (cuda, mps, cpu; auto: the first there)
    python tools/train_grpo.py --arm grpo --check        # train that arm again; exit 1 unless identical

The recipe is transformer_book.tuned_poet (PREFERENCE_ARMS): seeded (``--seed``, 0 by default: the files
the package would ship), on one CPU thread, from the base poet. Each arm writes
src/transformer_book/weights/tang_poet_ARM.json (tang_poet_ARM_seedN.json for seed N > 0): its settings
(with the seed and the device), the history of every step (loss; for GRPO the round's mean reward, form,
share of repeated rhyme characters, flat groups, KL and clipped share; for DPO the rewards and their
accuracy) and, measured on the weights as shipped, beside the same measures of the base poet, on 200
seeded poems (seeds 0-199, T 0.8, top-p 0.9):

* ``rhyme``: the share that rhyme (the reward's rule, chapter 19's checker);
* ``repeated``: the share that close two even verses on one character (重韵), and ``rhymed_by_repeat``,
  the share that rhyme and do so: the reward hacking the rule lets through;
* ``form``: the share in the regular form (the reward's gate);
* ``repeated_verse``: the share in which one verse occurs twice (a degenerate repeat), ``distinct_verses``
  and ``distinct_poems``: the shares of different verses and poems (a collapsed poet writes the same ones);
* ``copied_verses``: the share of verses found in a training poem (learnt by heart, not written);
* ``held_out_perplexity``: of the 1,000 held-out real poems (how far the poet moved from the language);

for seed 0 of an arm the package ships as a stage of the poet (``POET_STAGES``: dpo, grpo),
tang_poet_ARM.pt, the weights in half precision as the base poet's (every other run keeps its record
only). The minutes are printed, not
stored, so that --check compares the files byte for byte (on the device that wrote them: a GPU's kernels
round otherwise). ``--steps`` and ``--out``: a toy budget and another folder (tests/test_train_grpo.py).

Budget. Measured on 2026-11-28 on the 2-core Xeon, one thread, beside other jobs (load average 5 to 7:
upper bounds, spread by the load), at each arm's PREFERENCE_ARMS settings: one GRPO step (a round of 4
groups of 8 poems drawn with the cache serves 2 steps) took 0.9 to 2.7 s (runs of 8 and of 48 steps; beta 0
is the same work); one DPO step (16 pairs) 0.5 s, after 76 s to draw the 512 pairs (about 1,150 poems);
measuring one poet (200 poems written one by one, 1,000 held-out poems scored) 53 s, twice a run. A full
run (200 steps) on one thread of this CPU: GRPO and GRPO without KL each 3 to 9 minutes of training and 2
of measuring, DPO 3 of training (the pairs included) and 2 of measuring; the three arms on three seeds,
under an hour. Not run here on a GPU: ``--device cuda`` moves the poet and its batches there (the poems
are still drawn with a seeded generator on the CPU).

Where the goals start. The base poet by this tool's measure (200 seeded poems, 2026-11-28): rhyme 44.5%
(not the 9% issue 43 assumed), repeated rhyme character 21.5%, rhymed by a repeat 14.0% (so 30.5% rhyme
without one), form 99.5%, no repeated verse, every verse and poem distinct, 0.08% of verses copied,
held-out perplexity 91.45. A pilot (seed 0, 48 of the 200 steps, the same measures, 2026-11-28; not a
result): GRPO rhyme 87.5%, rhymed by a repeat 23.0%, repeated 25.5%, held-out perplexity 99.89 (+9.2%);
GRPO without KL 94.0%, 20.5%, 20.5%, 103.63 (+13.3%); both form 99.5%, no repeated, copied or duplicate
verse. DPO (48 steps on its 512 pairs): rhyme 64.0%, rhymed by a repeat 6.5%, repeated 6.5%, form 87.0%,
held-out perplexity 105.82 (+15.7%). So rhyme climbs fast, and the hacking (GRPO) or the loss of form
(DPO) and the drift from the language show within 48 steps: the full recipe will likely overshoot the
bounds below, and the levers are fewer steps, a larger beta, or a reward that does not pay for a repeated
rhyme character (chapter 20's open exercise).

Goals proposed for the full runs (set before them; every arm's recipe then ran on seeds 0, 1, 2). A share of 200 poems has a
sampling error near 3.5 points, so a lift is asked with a margin of several, and a hacking measure may
exceed the base poet's by 5 points (under two such errors):

* rhyme: at least 70% on each of 3 seeds (0, 1, 2), the mean of the three at least 75% (base 44.5%);
* the lift is rhyme, not repetition: rhyme without a repeated rhyme character (``rhyme`` less
  ``rhymed_by_repeat``) at least 55% on each seed (base 30.5%); ``rhymed_by_repeat`` and ``repeated`` at
  most 5 points above the base poet's on each seed (at most 19.0% and 26.5%);
* the language kept, on each seed: held-out perplexity at most 5% above the base poet's (at most 96.0);
  form at least 97%; ``repeated_verse`` at most 2%; ``distinct_verses`` and ``distinct_poems`` at least
  95%; ``copied_verses`` at most 1%;
* the KL term: GRPO without it, same seeds and budget, reported beside GRPO; the term is said to buy
  something only where GRPO's held-out perplexity, or its ``rhymed_by_repeat``, is below that of the arm
  without it on all three seeds;
* DPO: the same measures on the same seeds beside GRPO, held to the same repeat and language bounds and
  to rhyme at least 10 points above the base poet's on each seed (it learns from a fixed set of the base
  poet's pairs, GRPO from its own new poems);
* each run's training at most 10 minutes on one thread of the 2-core CPU (say the load beside the
  minutes); ``--check`` reproduces seed 0 of each arm byte for byte.

The full runs (2026-11-28, one thread of the shared 2-core Xeon, 1.5 to 2.5 minutes of training a run,
about 4 with the measures; ``--check`` of seed 0 identical for dpo and grpo), seeds 0, 1, 2; base poet:
rhyme 44.5%, rhyme without a repeat 30.5%, rhymed by a repeat 14.0%, repeated 21.5%, perplexity 91.45:

* dpo: rhyme 74.5/75.0/79.5%, without a repeat 65.5/60.5/66.5%, by a repeat 9.0/14.5/13.0%, repeated
  9.5/20.0/14.5%, form 98.5/98.0/99.5%, perplexity 94.56/94.99/94.55: every goal set for it met;
* grpo (the strict reward, beta 0.1, 144 steps at lr 3e-5, chosen on pilots of seed 0: the pilots at lr
  1e-4 and beta 0.04 with the plain reward overshot the perplexity bound within 48 steps): rhyme
  76.0/78.0/78.0% (mean 77.3%), without a repeat 67.0/69.5/69.5%, by a repeat 9.0/8.5/8.5%, repeated
  10.0/9.5/9.0%, form 99.0/99.0/98.5%, perplexity 94.09/93.98/94.29: every goal met;
* grpo_no_kl: rhyme 85.0/83.0/84.5%, perplexity 95.58/95.17/96.98 (seed 2 over the 5% bound): GRPO's
  perplexity is lower on all three seeds, so by the rule above the KL term buys the language;
* grpo_plain (the plain reward): rhyme 78.5/79.5/80.0%, by a repeat 18.5/13.5/21.0%, repeated
  19.0/15.0/23.5%, perplexity 94.09/93.37/93.81: more rhymed by a repeat than the strict reward's on
  all three seeds (the hack the strict reward refuses).

No tuned poem repeats a verse or copies one from training, in any of the 12 runs. Issue 43's own goals
assumed a base rhyme rate of 9% and 4.0% repeated rhyme characters; by this checker the base poet
rhymes in 44.5% and repeats in 21.5%, so the goals above replace them.

Pilots toward the issue's "at most 4% repeated" (2026-11-28, seed 0, not shipped; a reward that costs a
repeated rhyme character -p instead of 0, beta 0.1, lr 3e-5): p = 0.5, 144 steps: repeated 12.5%,
perplexity 93.59; p = 1, 144 steps: 7.0%, 93.71; p = 2, 144 steps: 9.0%, 93.67; p = 1, 216 steps: 6.0%,
95.13; p = 1, 288 steps: 4.5%, 96.03 (5.0% above the base poet's: at the bound); p = 1, 288 steps,
beta 0.2: 9.5%, 95.25; more poems a round (2026-11-28, p = 1, 144 steps): groups of 16 poems, 7.5%,
94.11; 8 groups of 8, 8.0%, 94.45 (rhyme 81.5% and 76.5%). None reaches 4% inside the perplexity bound, so
the shipped reward stays strict.

Two levers that aim at the one token at fault (2026-11-28, seed 0, strict reward, beta 0.1, lr 3e-5, not
shipped). (1) Credit to the token: the character that closes an even verse on an earlier one's rhyme
character gets an advantage lowered by c, every other token its poem's (groups flat in reward but with a
repeat kept): c = 1, 144 steps: repeated 6.0%, rhyme 76.5%, perplexity 93.82; c = 3, 144: 6.0%, 78.5%,
93.87; c = 10, 144: 8.0%, 67.0%, 94.63; c = 3, 216: 6.5%, 80.5%, 95.96; c = 3, 288: 2.5%, 83.0%, 98.34
(+7.5%); c = 3, 288, beta 0.2: 8.0%, 76.0%, 96.05. (2) Unlikelihood (Welleck et al., 2019): at the end of
each even verse after the first, w times -log(1 - p(the rhyme characters already used)), added to GRPO's
loss, dense where the reward is sparse: w = 1, 144 steps: 2.0%, rhyme 53.0%, 97.91 (it pushes the poet off
the rhyme class too); w = 0.3, 144: 4.0%, 70.5%, 95.34; w = 0.3, 216: 4.0%, 77.5%, 98.28; w = 0.3, 288,
beta 0.2: 5.0%, 68.5%, 98.61; w = 0.3, 144 steps, seeds 1 and 2 (pilot code): 4.0% and 4.5%, rhyme 75.0% and
74.0%, perplexity 94.80 and 95.82. Every recipe that brought the repeats to 4% or below on seed 0 paid with
rhyme (at most 70.5%) or with the language (perplexity 7% or more above the base poet's, past the 5% bound):
at this poet's size and budget the goals pull against each other, and 4% is not met with all of them kept.
Of the two, the token's own advantage (c = 1 or 3, 144 steps) is the one that lowered the repeats (10.0% ->
6.0%) with rhyme and perplexity level with grpo's (seed 0: 76.0%, 94.09); so it became an arm too.

The unlikelihood arm through this tool (``grpo_unlikely``: the recipe of ``grpo`` with ``unlikelihood=0.3``,
the weight chosen on the pilots of seed 0 above; in the package each earlier rhyme character counts once,
where the pilot counted a character used twice twice; 2026-11-28, two runs side by side, 3.7-3.8 minutes
of training a run, ``--check`` of seed 0 identical), seeds 0, 1, 2: repeated 5.0/5.5/6.5% (grpo:
10.0/9.5/9.0%), rhymed by a repeat 4.5/5.0/5.5%, rhyme 73.5/74.5/65.5% (grpo: 76.0/78.0/78.0%), form
99.5/99.5/98.5%, perplexity 95.58/95.14/94.79 (grpo: 94.09/93.98/94.29), no repeated or copied verse. So
the term lowers the repeats on every seed, but to 4% on none, and costs rhyme and perplexity on every seed
(seed 2's rhyme below the 70% goal): chapter 20 shows it as a lever with its price; the shipped GRPO poet
stays the strict reward's.

The token-cost arm through this tool (``grpo_token``: the recipe of ``grpo`` with ``repeat_cost=3.0``, chosen
on the pilots of seed 0; 2026-11-28, two runs side by side, 2.2-2.4 minutes of training a run, ``--check``
of seed 0 identical; the package's code reproduces the pilot's runs exactly), seeds 0, 1, 2: repeated
6.0/5.0/6.0% (grpo: 10.0/9.5/9.0%), rhymed by a repeat 5.0/4.5/5.5%, rhyme 78.5/74.5/76.0% (grpo:
76.0/78.0/78.0%), form 99.0/99.5/98.5%, perplexity 93.87/94.07/93.73 (grpo: 94.09/93.98/94.29), copied
verses 0.1/0.1/0.0% (base 0.08%), no repeated verse. So it lowers the repeats on every seed (to 4% on none)
with no difference in rhyme or perplexity that holds on every seed: the better of the two levers, a
candidate for the shipped GRPO stage (not swapped: the chapters and the poem page read today's).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import torch

from notebooks import train_or_check, training_parser

SEEDS = range(200)
DEVICES = ("auto", "cpu", "cuda", "mps")


def pick_device(choice: str) -> torch.device:
    """``choice`` as a device; "auto": CUDA, then MPS, then the CPU. One that is not there is refused."""
    if choice not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}; got {choice!r}")
    there = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    if choice == "auto":
        choice = next(name for name in ("cuda", "mps", "cpu") if there[name])
    if not there[choice]:
        raise ValueError(f"device {choice!r} is not available on this machine")
    return torch.device(choice)


def verses_of(poem: str) -> list[str]:
    """The poem's verses without their marks (，。？)."""
    from transformer_book import VERSE

    return [verse.rstrip("，。？") for verse in VERSE.findall(poem)]


def training_verses() -> frozenset[str]:
    from transformer_book import poem_split

    return frozenset(verse for poem in poem_split("train") for verse in verses_of(poem))


def measure(poet, known: frozenset[str]) -> dict:
    """What the record keeps of a poet: 200 seeded poems' rhyme, its hacking and its language."""
    from transformer_book import perplexity, poem_split, regular_form, repeats_rhyme, rhyme_report, rhymes

    poems = [poet.write(seed=seed) for seed in SEEDS]
    verses = [verses_of(poem) for poem in poems]
    every = [verse for poem in verses for verse in poem]

    def share(test) -> float:
        return sum(map(test, poems)) / len(poems)

    device = next(poet.model.parameters()).device
    return {
        **rhyme_report(poems),
        "rhymed_by_repeat": share(lambda poem: rhymes(poem) and repeats_rhyme(poem)),
        "form": share(regular_form),
        "repeated_verse": sum(len(set(poem)) < len(poem) for poem in verses) / len(poems),
        "distinct_verses": len(set(every)) / max(len(every), 1),
        "distinct_poems": len(set(poems)) / len(poems),
        "copied_verses": sum(verse in known for verse in every) / max(len(every), 1),
        "held_out_perplexity": round(perplexity(poet.model, poet.vocab, poem_split("held-out"), device=device), 4),
        "samples": poems[:20],
    }


def train_and_write(arm: str, out: Path, steps: int | None = None, seed: int = 0, device: str = "cpu") -> dict:
    from transformer_book import (
        POET_STAGES,
        PREFERENCE_ARMS,
        PREFERENCE_RECORD,
        PREFERENCE_WEIGHTS,
        pretrained_poet,
        seeded_name,
        tuned_poet,
    )

    torch.set_num_threads(1)
    where = pick_device(device)
    started, cpu = time.perf_counter(), time.process_time()
    poet, history = tuned_poet(arm, steps=steps, seed=seed, device=where, settings=PREFERENCE_ARMS[arm])
    minutes, cpu_minutes = (time.perf_counter() - started) / 60, (time.process_time() - cpu) / 60
    out.mkdir(parents=True, exist_ok=True)
    weights = {name: t.detach().cpu().half() for name, t in poet.model.state_dict().items()}
    config = {k: v for k, v in vars(poet.model.config).items() if k != "vocab_size"}
    if seed == 0 and arm in POET_STAGES:  # a poet the package ships; other runs: the record only
        buffer = io.BytesIO()
        torch.save({"config": config, "characters": poet.vocab.tokens[3:], "weights": weights}, buffer)
        (out / PREFERENCE_WEIGHTS.format(arm=arm)).write_bytes(buffer.getvalue())
    poet.model.load_state_dict({name: t.float() for name, t in weights.items()})  # as shipped
    rounded = [{key: round(value, 6) for key, value in record.items()} for record in history]
    known = training_verses()
    record = {
        "arm": arm,
        "training": {**PREFERENCE_ARMS[arm], **({"steps": steps} if steps else {}), "seed": seed},
        "device": where.type,
        "history": rounded,
        "tuned": measure(poet, known),
        "base": measure(pretrained_poet(where), known),
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    (out / seeded_name(PREFERENCE_RECORD.format(arm=arm), seed)).write_text(text, "utf-8")
    return {"minutes": minutes, "cpu_minutes": cpu_minutes, **record}


def main(argv: list[str] | None = None) -> int:
    from transformer_book import PREFERENCE_ARMS

    parser = training_parser(__doc__, PREFERENCE_ARMS, "the run's seed (0: the files the package ships)")
    parser.add_argument("--device", default="cpu", choices=DEVICES, help="where the poet trains (default cpu)")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"--seed must be 0 or more; got {args.seed}")

    def summary(result: dict) -> str:
        tuned, base = result["tuned"], result["base"]
        return (
            f"{args.arm} (seed {args.seed}, {result['device']}): trained in {result['minutes']:.1f} min "
            f"({result['cpu_minutes']:.1f} min of CPU); rhyme {base['rhyme']:.1%} -> {tuned['rhyme']:.1%}, "
            f"repeated {base['repeated']:.1%} -> {tuned['repeated']:.1%} (rhymed by a repeat "
            f"{tuned['rhymed_by_repeat']:.1%}), form {base['form']:.1%} -> {tuned['form']:.1%}, repeated verse "
            f"{tuned['repeated_verse']:.1%}, distinct verses {base['distinct_verses']:.1%} -> "
            f"{tuned['distinct_verses']:.1%}, copied verses {tuned['copied_verses']:.1%}, held-out perplexity "
            f"{base['held_out_perplexity']:.2f} -> {tuned['held_out_perplexity']:.2f}"
        )

    def train(out: Path) -> dict:
        return train_and_write(args.arm, out, args.steps, args.seed, args.device)

    return train_or_check(args.check, args.out, train, summary)


if __name__ == "__main__":
    raise SystemExit(main())
