"""The playground's translator (chapter 14): the shipped model in 8 bits, and its BLEU record.

``pretrained_translator()`` (1.9 million parameters) is exported with every matrix in 8 bits
(``playground_files.export_quantized``); its JSON holds the English byte-pair merges too, for the
page's tokenizer (book/_static/playground/tokenizer.js). ``translator_bleu.json`` records the
test-set BLEU of the quantized weights beside the full model's, and the quantized translations it
scored. Run by tools/export_playground.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from playground_files import OUT_DIR, export_quantized, load_model, quantized_state
from transformer_book import PAPER_BEAM, make_model

TRANSLATOR = "translator"
# Test sentences (never trained on) for the page's buttons: three that the 8-bit model
# translates exactly as Tatoeba does, and one it gets plainly wrong, with what is wrong.
TRANSLATOR_EXAMPLES = (
    "I gave Mary a book.",
    "She studies English every day.",
    "I need more time.",
    "The green team lost.",
)
TRANSLATOR_WRONG = {  # sentence: (the 8-bit model's beam output, what is wrong with it)
    "The green team lost.": (
        "绿灯变成了。",
        "it says the green light (绿灯) changed, not that the green team (绿队) lost",
    ),
}
TRANSLATOR_MAX_BYTES = 4_000_000  # weights and JSON: all the page downloads for the task
BLEU_FILE = "translator_bleu.json"
BLEU_LIMIT = 0.5  # the 8-bit weights' test BLEU is within this of the full model's


def translator_meta(translator) -> dict:
    """The page's metadata for a ``Translator``: vocabularies, merges, limits."""
    source, target = translator.source_vocab, translator.target_vocab
    return {
        "title": "English → 中文",
        "config": {"source_vocab": len(source), "target_vocab": len(target), **translator.config},
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
        "length_penalty": PAPER_BEAM["length_penalty"],
        "answer_label": "Tatoeba's translation",
    }


def translate_all(translator, sentences, beam_size: int) -> list[str]:
    """One sentence at a time, as the page decodes (no padding), with the paper's length penalty."""
    return translator.translate(sentences, beam_size, PAPER_BEAM["length_penalty"], batch_size=1)


def export_translator(out_dir: Path = OUT_DIR) -> dict:
    """The shipped translator in 8 bits, and the BLEU record of those weights."""
    from transformer_book import (
        Translator,
        corpus_scores,
        pretrained_translator,
        tatoeba_split,
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
    examples = [quantized.translate([text], **PAPER_BEAM, batch_size=1)[0] for text in TRANSLATOR_EXAMPLES]
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
        "example_notes": [TRANSLATOR_WRONG.get(text, (None, None))[1] for text in TRANSLATOR_EXAMPLES],
    }
    outputs = {
        "full beam": translate_all(full, sources, PAPER_BEAM["beam_size"]),
        "8-bit beam": translate_all(quantized, sources, PAPER_BEAM["beam_size"]),
        "full greedy": translate_all(full, sources, 1),
        "8-bit greedy": translate_all(quantized, sources, 1),
    }
    scores = {name: corpus_scores(texts, references) for name, texts in outputs.items()}
    scores = {name: {key: round(value, 4) for key, value in score.items()} for name, score in scores.items()}
    meta["test_scores"] = {"sentences": len(test), **scores}
    json_path, bin_path = export_quantized(full.model, meta, TRANSLATOR, out_dir, max_bytes=TRANSLATOR_MAX_BYTES)
    total = bin_path.stat().st_size + json_path.stat().st_size
    if total > TRANSLATOR_MAX_BYTES:
        raise ValueError(f"the translator's files are {total:,} bytes; the limit is {TRANSLATOR_MAX_BYTES:,}")
    loaded, _ = load_model(json_path)
    for name, value in quantized_model.state_dict().items():
        if not torch.equal(loaded.state_dict()[name], value):
            raise AssertionError(f"{json_path}: {name} does not load back")
    gap = scores["full beam"]["bleu"] - scores["8-bit beam"]["bleu"]
    record = {
        "weights_sha256": json.loads(json_path.read_text("utf-8"))["weights"]["sha256"],
        "test_sentences": len(test),
        "decoding": {**PAPER_BEAM, "batch_size": 1},
        "bleu": "sacrebleu corpus BLEU, tokenize='zh', every reference (corpus_scores)",
        "scores": scores,
        "bleu_gap": round(gap, 4),
        "translations": outputs,
    }
    (out_dir / BLEU_FILE).write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if abs(gap) > BLEU_LIMIT:
        raise AssertionError(f"8-bit beam BLEU is {gap:.2f} below the full model's")
    print(
        f"translator: {bin_path.stat().st_size:,} + {json_path.stat().st_size:,} bytes; "
        f"test BLEU beam {scores['8-bit beam']['bleu']:.2f} (full "
        f"{scores['full beam']['bleu']:.2f}), greedy {scores['8-bit greedy']['bleu']:.2f} "
        f"(full {scores['full greedy']['bleu']:.2f})"
    )
    return record
