# This file is generated from book/14_translating.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""English -> Chinese with the book's Transformer: sentences as token ids, training on
length batches, translating with greedy or beam search (chapter 14)."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

import torch

from transformer_book.batching import length_batches, pad_rows
from transformer_book.decoding import beam_search, greedy_decode
from transformer_book.generator import LabelSmoothingLoss
from transformer_book.masking import padding_mask
from transformer_book.model import Transformer, make_model, sequence_loss
from transformer_book.subwords import (
    BytePairEncoding,
    SubwordVocabulary,
    chinese_vocabulary,
    english_vocabulary,
)
from transformer_book.training import paper_optimizer

# make_model keyword arguments of the shipped model: about 1.9 million parameters.
TRANSLATION_CONFIG = dict(
    num_layers=2, d_model=128, d_ff=512, heads=4, dropout=0.1, max_len=128
)
# How tools/train_translator.py trains it: learn_bpe(train English, num_merges), then
# train_translator(..., **the rest), averaging the last keep_last epochs' weights.
TRANSLATION_TRAINING = dict(
    num_merges=2000, epochs=16, max_tokens=1500, warmup_steps=1000, smoothing=0.1,
    seed=0, keep_last=5,
)


class Translator:
    """A Transformer with its tokenizers: English sentences in, Chinese sentences out.

    English is split into byte-pair tokens (``merges``), Chinese into characters.
    """

    def __init__(
        self,
        model: Transformer,
        merges: Sequence[tuple[str, str]],
        source_vocab: SubwordVocabulary,
        target_vocab: SubwordVocabulary,
        config: dict,
    ):
        self.model = model
        self.config = dict(config)  # make_model's keyword arguments
        self.bpe = BytePairEncoding(merges)
        self.source_vocab = source_vocab
        self.target_vocab = target_vocab

    @classmethod
    def untrained(
        cls, pairs: Sequence[tuple], merges, config: dict | None = None
    ) -> Translator:
        """Make an untrained translator with vocabularies from ``pairs``.

        A fresh model (``TRANSLATION_CONFIG`` by default), with vocabularies read
        off the training ``pairs``. Seed torch first: the initial weights are random."""
        source_vocab = english_vocabulary([english for english, _ in pairs], merges)
        target_vocab = chinese_vocabulary(
            chinese for _, references in pairs for chinese in references
        )
        settings = TRANSLATION_CONFIG if config is None else config
        model = make_model(len(source_vocab), len(target_vocab), **settings)
        return cls(model, merges, source_vocab, target_vocab, settings)

    @property
    def max_tokens(self) -> int:
        """The longest sequence the positional table holds."""
        return self.config.get("max_len", 5000)

    def source_ids(self, sentence: str) -> list[int]:
        """Encode an English sentence as token ids, or explain why not.

        An English sentence's token ids, or a ValueError saying why it cannot be
        translated."""
        if not isinstance(sentence, str):
            raise TypeError(f"a sentence is a str; got {type(sentence).__name__}")
        # Full-width letters, ligatures and the like become their plain forms, as
        # in the training sentences: "Ｔｏｍ" reads as "Tom", "ﬁne" as "fine".
        sentence = unicodedata.normalize("NFKC", sentence)
        ids = self.source_vocab.encode(self.bpe.tokenize(sentence))
        if not ids:
            raise ValueError(f"nothing to translate in {sentence!r}: no English words")
        if all(index == self.source_vocab.unk_id for index in ids):
            raise ValueError(
                f"nothing to translate in {sentence!r}: every character is unknown "
                "to the English vocabulary"
            )
        if len(ids) > self.max_tokens:
            raise ValueError(
                f"{sentence[:40]!r}... has {len(ids)} tokens; the model reads at most "
                f"{self.max_tokens} (its positional table): split it into sentences"
            )
        return ids

    def target_ids(self, sentence: str) -> list[int]:
        """"<s>", a Chinese sentence's characters, "</s>"."""
        vocab = self.target_vocab
        return [vocab.start_id, *vocab.encode(sentence), vocab.end_id]

    def examples(self, pairs: Sequence[tuple[str, list[str]]]) -> list[tuple]:
        """(source ids, target ids): one example per translation of each sentence."""
        return [
            (self.source_ids(english), self.target_ids(chinese))
            for english, references in pairs
            for chinese in references
        ]

    @torch.no_grad()
    def translate(
        self,
        sentences: Sequence[str],
        beam_size: int = 4,
        alpha: float = 0.6,
        batch_size: int = 100,
    ) -> list[str]:
        """Translate English sentences into Chinese.

        Chinese translations: beam search (``beam_size``, length penalty ``alpha``),
        or greedy decoding when ``beam_size`` is 1."""
        if isinstance(sentences, str):
            raise TypeError("translate takes a list of sentences; got one string")
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1; got {beam_size}")
        rows = [self.source_ids(sentence) for sentence in sentences]
        self.model.eval()
        device = next(self.model.parameters()).device
        vocab = self.target_vocab
        translations = []
        for first in range(0, len(rows), batch_size):
            chunk = rows[first : first + batch_size]
            # (batch, source)
            source = pad_rows(chunk, self.source_vocab.pad_id, device)
            source_mask = padding_mask(source, self.source_vocab.pad_id)
            # room for a translation twice as long as its source, within the table
            max_new = min(2 * source.size(1) + 10, self.max_tokens - 1)
            if beam_size == 1:
                tokens = greedy_decode(
                    self.model, source, source_mask, vocab.start_id, max_new,
                    vocab.end_id,
                )
            else:
                tokens, _ = beam_search(
                    self.model, source, source_mask, vocab.start_id, max_new,
                    beam_size, vocab.end_id, alpha,
                )
            translations += ["".join(vocab.decode(row)) for row in tokens.cpu()]
        return translations


def train_translator(
    translator: Translator,
    pairs: Sequence[tuple[str, list[str]]],
    epochs: int,
    *,
    max_tokens: int = 1500,
    warmup_steps: int = 1000,
    factor: float = 1.0,
    smoothing: float = 0.1,
    seed: int = 0,
    keep_last: int = 0,
    max_steps: int | None = None,
    device="cpu",
    on_epoch: Callable[[int, Translator], dict] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Train ``translator.model`` in place on length batches of ``pairs``.

    Train ``translator.model`` in place on length batches of ``pairs``: chapter 9's
    loss, optimiser and learning-rate schedule, a fresh shuffle of the batches every
    epoch. Returns (history, checkpoints).

    ``history`` has one dict an epoch (training loss per target token, steps, rate),
    updated with what ``on_epoch(epoch, translator)`` returns (dev scores, say);
    ``checkpoints`` holds the weights after each of the last ``keep_last`` epochs (on
    the CPU), to average. ``max_steps`` stops early, within an epoch.
    """
    if epochs < 1 or max_tokens < 1 or keep_last < 0:
        raise ValueError(
            "epochs and max_tokens must be >= 1 and keep_last >= 0; got "
            f"epochs={epochs}, max_tokens={max_tokens}, keep_last={keep_last}"
        )
    examples = translator.examples(pairs)
    lengths = [max(len(source), len(target)) for source, target in examples]
    pad_id = translator.target_vocab.pad_id
    model = translator.model.to(device).train()
    loss_fn = LabelSmoothingLoss(len(translator.target_vocab), pad_id, smoothing)
    optimizer, schedule = paper_optimizer(
        model, translator.config["d_model"], warmup_steps, factor
    )
    torch.manual_seed(seed)  # dropout
    history, checkpoints, step = [], [], 0
    for epoch in range(1, epochs + 1):
        loss_sum, token_count = 0.0, 0
        for batch in length_batches(lengths, max_tokens, seed=seed * 1000 + epoch):
            # (batch, source) and (batch, target + 2)
            source = pad_rows([examples[i][0] for i in batch], pad_id, device)
            target = pad_rows([examples[i][1] for i in batch], pad_id, device)
            loss = sequence_loss(model, source, target, pad_id, loss_fn)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            tokens = int((target[:, 1:] != pad_id).sum())
            loss_sum += loss.item() * tokens
            token_count += tokens
            if max_steps is not None and step >= max_steps:
                break
        record = {"epoch": epoch, "step": step, "loss": loss_sum / token_count}
        record["lr"] = schedule.get_last_lr()[0]
        if epoch > epochs - keep_last:
            checkpoints.append(
                {name: value.detach().cpu().clone() for name, value in
                 model.state_dict().items()}
            )
        if on_epoch is not None:
            record |= on_epoch(epoch, translator)
            model.train()
        history.append(record)
        if max_steps is not None and step >= max_steps:
            break
    model.eval()
    return history, checkpoints


def average_checkpoints(checkpoints: Sequence[dict]) -> dict:
    """The element-wise mean of state dicts (the paper averaged its last 5)."""
    if not checkpoints:
        raise ValueError("average_checkpoints needs at least one checkpoint; got none")
    return {
        name: sum(checkpoint[name] for checkpoint in checkpoints) / len(checkpoints)
        for name in checkpoints[0]
    }


@torch.no_grad()
def mean_token_loss(
    translator: Translator,
    pairs: Sequence[tuple[str, list[str]]],
    max_tokens: int = 4000,
) -> float:
    """Compute the mean cross-entropy per target token over ``pairs``.

    Cross-entropy per target token, teacher-forced and without smoothing, over
    every translation in ``pairs`` (exp of it is the perplexity)."""
    examples = translator.examples(pairs)
    lengths = [max(len(source), len(target)) for source, target in examples]
    pad_id = translator.target_vocab.pad_id
    model = translator.model
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss_fn = torch.nn.NLLLoss(ignore_index=pad_id, reduction="sum")
    total, count = 0.0, 0
    for batch in length_batches(lengths, max_tokens, seed=None):
        source = pad_rows([examples[i][0] for i in batch], pad_id, device)
        target = pad_rows([examples[i][1] for i in batch], pad_id, device)
        total += sequence_loss(model, source, target, pad_id, loss_fn).item()
        count += int((target[:, 1:] != pad_id).sum())
    model.train(was_training)
    return total / count


def corpus_scores(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Score ``hypotheses`` against the references with BLEU and chrF.

    sacrebleu's BLEU (over characters: ``tokenize="zh"``) and chrF of
    ``hypotheses`` against every reference of each sentence."""
    import sacrebleu  # only scoring needs it, not the model

    if len(hypotheses) != len(references) or not references:
        raise ValueError(
            "corpus_scores needs one list of references per hypothesis; got "
            f"{len(hypotheses)} hypotheses and {len(references)} reference lists"
        )
    most = max(len(options) for options in references)
    # sacrebleu reads one stream per reference number, None where a sentence has fewer
    streams = [
        [options[k] if k < len(options) else None for options in references]
        for k in range(most)
    ]
    return {
        "bleu": sacrebleu.corpus_bleu(hypotheses, streams, tokenize="zh").score,
        "chrf": sacrebleu.corpus_chrf(hypotheses, streams).score,
    }


WEIGHTS_FILE = "tatoeba_en_zh.pt"  # in transformer_book/weights/


def translator_state(translator: Translator, dtype=torch.float16) -> dict:
    """Collect what it takes to rebuild ``translator``.

    What it takes to rebuild ``translator``: its configuration, merges, vocabularies
    and weights (stored as ``dtype``: half precision halves the file)."""
    model = translator.model
    return {
        "config": translator.config,
        "merges": [list(pair) for pair in translator.bpe.merges],
        "source_tokens": translator.source_vocab.tokens[4:],
        "target_tokens": translator.target_vocab.tokens[4:],
        "state_dict": {
            name: value.detach().cpu().to(dtype) if value.is_floating_point() else
            value.detach().cpu() for name, value in model.state_dict().items()
        },
    }


def load_translator(saved: dict, device="cpu") -> Translator:
    """The ``Translator`` that ``translator_state`` saved, in float32 and eval mode."""
    source_vocab = SubwordVocabulary(saved["source_tokens"])
    target_vocab = SubwordVocabulary(saved["target_tokens"])
    model = make_model(len(source_vocab), len(target_vocab), **saved["config"])
    weights = {name: value.float() for name, value in saved["state_dict"].items()}
    model.load_state_dict(weights)
    merges = [tuple(pair) for pair in saved["merges"]]
    return Translator(
        model.to(device).eval(), merges, source_vocab, target_vocab, saved["config"]
    )


def pretrained_translator(device="cpu") -> tuple[Translator, list[dict]]:
    """Load the translator that the package ships, and its history.

    (translator, history) of the model the package ships, trained on the Tatoeba
    training split by tools/train_translator.py: ``translate(sentences)``."""
    from importlib.resources import files

    with (files("transformer_book") / "weights" / WEIGHTS_FILE).open("rb") as handle:
        saved = torch.load(handle, map_location="cpu", weights_only=True)
    return load_translator(saved, device), saved["history"]


def train_recipe(
    pairs: Sequence[tuple[str, list[str]]],
    merges: Sequence[tuple[str, str]],
    *,
    device="cpu",
    on_epoch: Callable[[int, Translator], dict] | None = None,
    **changes,
) -> tuple[Translator, Translator, list[dict]]:
    """Train a translator as the shipped one was.

    Train a translator as the shipped one was: a seeded ``TRANSLATION_CONFIG``
    model, ``train_translator`` with ``TRANSLATION_TRAINING`` (entries replaced by
    ``changes``, e.g. ``smoothing=0.0``), then the last checkpoints averaged.

    Returns (averaged, last, history): the averaged translator in eval mode on
    ``device``, the translator as training left it, and the history per epoch.
    """
    unknown = set(changes) - set(TRANSLATION_TRAINING) - {"max_steps"}
    if unknown:
        raise TypeError(
            f"train_recipe got {sorted(unknown)}; it changes entries of "
            f"TRANSLATION_TRAINING ({', '.join(TRANSLATION_TRAINING)}) or max_steps"
        )
    recipe = {**TRANSLATION_TRAINING, **changes}
    recipe.pop("num_merges")  # the merges are learned before, by learn_bpe
    epochs = recipe.pop("epochs")
    torch.manual_seed(recipe["seed"])  # the initial weights
    last = Translator.untrained(pairs, merges)
    history, checkpoints = train_translator(
        last, pairs, epochs, device=device, on_epoch=on_epoch, **recipe
    )
    averaged = translator_state(last, dtype=torch.float32)
    averaged["state_dict"] = average_checkpoints(checkpoints)
    return load_translator(averaged, device), last, history
