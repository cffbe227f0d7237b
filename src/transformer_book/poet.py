# This file is generated from book/15_writing_poems.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Writing poems (chapter 15): training a GPT on the poems, perplexity, the poem form,
and a Poet that samples with temperature, top-k and top-p and the key/value cache."""

from __future__ import annotations

import io
import json
import math
import random
import re
from importlib.resources import files

import torch
import torch.nn.functional as F

from transformer_book.decoding import top_p_filter
from transformer_book.generator import sample_next_token
from transformer_book.gpt import GPT, GPTConfig, causal_lm_loss, check_positive_int
from transformer_book.poems import PoemVocabulary, poem_split


def train_lm(
    model, vocab, poems, steps, batch_size=32, lr=3e-3, seed=0, device=None,
    evaluate=None, eval_every=10,
):
    """Train a GPT on the poems; return the training loss of every step.

    Train a GPT on the poems for ``steps`` seeded random batches with AdamW (the
    learning rate warmed up over the first tenth, then decayed linearly to zero);
    returns the training loss of every step. ``evaluate``, if given, is called as
    ``evaluate(step, model)`` before the first step and after every ``eval_every``
    steps and the last (nanoGPT's ``estimate_loss``); training then goes on in train
    mode, its batches and losses unchanged."""
    check_positive_int("steps", steps)
    check_positive_int("eval_every", eval_every)
    if not poems:
        raise ValueError("poems is empty: nothing to train on")
    draw = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup + 1))),
    )
    losses = []
    for step in range(steps):
        if evaluate is not None and step % eval_every == 0:
            evaluate(step, model)  # the model after `step` updates
        model.train()
        batch = vocab.batch(draw.sample(poems, min(batch_size, len(poems))), device)
        loss = causal_lm_loss(model(batch), batch, vocab.pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    if evaluate is not None:
        evaluate(steps, model)
    return losses


@torch.no_grad()
def poem_losses(model, vocab, poems, batch_size=25, device=None):
    """Score every poem, teacher-forced: (sums, counts), two tensors of shape (poems,).

    ``sums[i]``: the cross-entropy of every predicted token of poem i (each character
    and the closing <s>) added up, in float64 on the CPU; ``counts[i]``: how many
    tokens that is. The mean loss, or the perplexity, of any subset of the poems
    follows from them without running the model again. Poems of one length are
    batched together, so that little padding is computed."""
    model.eval()
    sums = torch.zeros(len(poems), dtype=torch.float64)
    counts = torch.zeros(len(poems), dtype=torch.long)
    order = sorted(range(len(poems)), key=lambda i: len(poems[i]))
    for start in range(0, len(poems), batch_size):
        chosen = order[start : start + batch_size]
        batch = vocab.batch([poems[i] for i in chosen], device)  # (batch, seq)
        logits = model(batch)[:, :-1]  # (batch, seq - 1, vocab): predicts the next
        targets = batch[:, 1:]  # (batch, seq - 1)
        losses = F.cross_entropy(
            logits.reshape(-1, logits.size(-1)),
            targets.reshape(-1),
            ignore_index=vocab.pad_id,
            reduction="none",
        ).view(targets.shape)  # (batch, seq - 1), 0 at padding
        sums[chosen] = losses.sum(dim=1).cpu().double()  # float64 on the CPU only
        counts[chosen] = (targets != vocab.pad_id).sum(dim=1).cpu()
    return sums, counts


@torch.no_grad()
def perplexity(model, vocab, poems, batch_size=100, device=None) -> float:
    """Compute the teacher-forced perplexity of the model on the poems.

    exp of the mean cross-entropy per predicted token (every character and the
    closing <s>) over the poems, teacher-forced."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(poems), batch_size):
        batch = vocab.batch(poems[start : start + batch_size], device)
        with torch.no_grad():  # scoring only: no graph for backward
            logits = model(batch)
        targets = batch[:, 1:]
        losses = F.cross_entropy(
            logits[:, :-1].transpose(1, 2),
            targets,
            ignore_index=vocab.pad_id,
            reduction="sum",
        )
        total += losses.item()
        count += int((targets != vocab.pad_id).sum())
    return math.exp(total / count)


VERSE = re.compile(r"[^，。？]*[，。？]|[^，。？]+$")


def regular_form(poem: str) -> bool:
    """Tell whether ``poem`` has the regular form of a five-character poem.

    True if every verse of ``poem`` has five characters, the verses end in turn with
    ， and 。 (or ？), and there are 4 or 8 of them."""
    verses = VERSE.findall(poem)
    return len(verses) in (4, 8) and all(
        len(verse) == 6
        and verse[-1] in ("，" if i % 2 == 0 else "。？")
        for i, verse in enumerate(verses)
    )


def acrostic_logits(logits, written, heads, vocab):
    """Edit one step's logits (vocab,) so that the verses open with ``heads``, in order.

    ``written``: the ids written so far, after the opening <s>. Where a verse begins
    (nothing written yet, or a verse just closed by a mark), every logit but the next
    head's is -inf (after the last head's verse, every logit but <s>'s: the poem ends);
    until the last head's verse is closed, <s> is -inf: no early end. New logits."""
    logits = logits.clone()  # (vocab,)
    verse_ends = {vocab.ids.get(mark) for mark in "，。？"}
    verses = sum(1 for i in written if i in verse_ends)  # the verses closed so far
    if verses < len(heads):
        logits[vocab.boundary_id] = float("-inf")  # not done yet
    if not written or written[-1] in verse_ends:  # a verse begins here
        keep = vocab.ids[heads[verses]] if verses < len(heads) else vocab.boundary_id
        logits = torch.full_like(logits, float("-inf"))
        logits[keep] = 0.0  # the only token left: sampling picks it
    return logits


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Poet:
    """A GPT with its character vocabulary, that writes poems."""

    def __init__(self, model, vocab: PoemVocabulary):
        self.model, self.vocab = model, vocab

    def _check(self, prompt, temperature, top_p, acrostic) -> None:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        if not _is_number(temperature) or not temperature >= 0:
            raise ValueError(
                f"temperature must be a number >= 0 (0 is greedy); got {temperature!r}"
            )
        if not _is_number(top_p) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1]; got top_p={top_p!r}")
        missing = self.vocab.unknown(prompt)
        if missing:
            raise ValueError(
                f"the poet does not know the characters {''.join(missing)!r} of "
                f"prompt {prompt!r}"
            )
        if acrostic and not 1 <= len(prompt) <= 8:
            raise ValueError(
                "an acrostic prompt has 1 to 8 characters, one per verse; "
                f"got {prompt!r}"
            )

    @torch.no_grad()
    def write(
        self,
        prompt: str = "",
        temperature: float = 0.8,
        top_p: float = 0.9,
        seed: int = 0,
        acrostic: bool = False,
        top_k: int | None = None,
    ) -> str:
        """Write a poem that starts with ``prompt``, sampled token by token.

        A poem that starts with ``prompt`` (e.g. a first verse), sampled with the
        key/value cache (the nucleus of ``top_p`` first, then its ``top_k`` best:
        the reverse of Hugging Face's order); with ``acrostic``, a 藏头诗 whose
        verses open with the prompt's characters, in order, one verse each
        (``acrostic_logits``)."""
        self._check(prompt, temperature, top_p, acrostic)
        vocab, model = self.vocab, self.model.eval()
        ids = [vocab.boundary_id]
        if not acrostic:
            ids += vocab.encode(prompt, boundaries=False)
        device = next(model.parameters()).device
        # drawn on the CPU: a seed draws the same random numbers on every device
        generator = torch.Generator().manual_seed(seed)
        caches, offset, feed = model.new_caches(), 0, ids
        while True:
            tokens = torch.tensor([feed], device=device)  # (1, new tokens)
            logits = model(tokens, caches, offset)[0, -1].cpu().clone()  # (vocab,)
            offset += len(feed)
            logits[[vocab.pad_id, vocab.unk_id]] = float("-inf")
            if len(ids) == 1:
                logits[vocab.boundary_id] = float("-inf")  # not an empty poem
            if acrostic:
                logits = acrostic_logits(logits, ids[1:], prompt, vocab)
            if temperature > 0:
                logits = top_p_filter(logits / temperature, top_p)
            greedy_or_drawn = 1.0 if temperature > 0 else 0
            chosen = int(sample_next_token(logits, greedy_or_drawn, top_k, generator))
            if chosen == vocab.boundary_id or offset >= model.config.max_len:
                return vocab.decode(ids)
            ids.append(chosen)
            feed = [chosen]


POET_CONFIG = dict(max_len=64, d_model=128, heads=4, layers=4)  # with the vocabulary
POET_TRAINING = dict(steps=800, batch_size=64, lr=3e-3, seed=0)
WEIGHTS_FILE = "tang_poet.pt"  # in transformer_book/weights/, by tools/train_poet.py
HISTORY_FILE = "tang_poet_history.json"


def train_poet(steps=None, batch_size=None, lr=None, seed=None, device=None):
    """Train a poet with the shipped poet's recipe; return (Poet, losses).

    The shipped poet's recipe: the vocabulary of the training poems, a GPT of
    ``POET_CONFIG`` seeded with ``seed``, ``train_lm`` with ``POET_TRAINING`` (any
    argument given replaces its value). Returns (Poet, losses)."""
    settings = dict(POET_TRAINING)
    given = dict(steps=steps, batch_size=batch_size, lr=lr, seed=seed)
    settings.update({key: value for key, value in given.items() if value is not None})
    train = poem_split("train")
    vocab = PoemVocabulary.from_poems(train)
    torch.manual_seed(settings["seed"])
    model = GPT(GPTConfig(len(vocab), **POET_CONFIG)).to(device)
    losses = train_lm(model, vocab, train, device=device, **settings)
    return Poet(model.eval(), vocab), losses


def pretrained_poet(device=None) -> Poet:
    """Load the poet that the package ships.

    The poet that tools/train_poet.py trained and the package ships (weights stored
    in half precision, computed in float32)."""
    path = files("transformer_book") / "weights" / WEIGHTS_FILE
    stored = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu")
    vocab = PoemVocabulary(stored["characters"])
    model = GPT(GPTConfig(len(vocab), **stored["config"]))
    state = {name: tensor.float() for name, tensor in stored["weights"].items()}
    model.load_state_dict(state)
    return Poet(model.to(device).eval(), vocab)


def poet_history() -> dict:
    """Load what tools/train_poet.py recorded beside the shipped poet's weights.

    What tools/train_poet.py recorded beside the weights: the training settings,
    the loss of every step, the held-out perplexity of the stored weights, and the
    poems written by them (``samples``) and by the untrained network
    (``untrained_samples``) with seeds 0 to 199 at the defaults of ``Poet.write``."""
    path = files("transformer_book") / "weights" / HISTORY_FILE
    return json.loads(path.read_text(encoding="utf-8"))
