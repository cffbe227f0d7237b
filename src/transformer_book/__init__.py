"""The Transformer, from scratch: the model code written in the book's chapters.

Every module except this one is generated from the chapter that explains it (tools/export_package.py);
read the chapter to see why the code is the way it is. This package holds model code only: it imports
torch and nothing from plotting or notebooks.

Each class is written in one module, top to bottom, and importing the package changes none of
them. The key/value cache that chapter 10 explains is part of the classes it concerns, as optional
arguments that default to no cache: ``cache`` in ``MultiHeadAttention`` (multihead.py, with
``cached_keys_and_values``) and ``DecoderLayer``, ``caches`` in ``Decoder`` (decoder.py), the position
``offset`` in ``PositionalEncoding`` (positional.py) and ``EmbeddingWithPositions``, and ``caches``,
``offset`` and ``new_caches`` in ``Transformer`` (model.py).

Chapters 13 and 14 work on real sentences: the Tatoeba English-Chinese pairs shipped in
``data/`` (``tatoeba_split``), byte-pair encoding (``BytePairEncoding``, ``read_merges``),
length batches (``length_batches``), and a trained translator shipped in ``weights/``::

    from transformer_book import pretrained_translator
    translator, history = pretrained_translator()
    translator.translate(["Tom is here."])  # beam search; beam_size=1 is greedy

Chapter 15 builds a decoder-only model (``GPT``, ``GPTConfig``), checked against Hugging
Face's GPT-2 (``gpt_from_hf``), and trains it on the Tang poems shipped in ``data/``
(``poem_split``, ``PoemVocabulary``, ``train_lm``, ``Poet``). The poet the package ships was
trained by ``tools/train_poet.py`` with ``train_poet`` (``POET_CONFIG``, ``POET_TRAINING``);
``poet_history`` gives what the tool recorded::

    from transformer_book import pretrained_poet
    pretrained_poet().write("春花秋月", acrostic=True)  # a 藏头诗

Chapter 16 brings the block up to today's models (modern.py): ``RMSNorm``, rotary positions
(``rotary_table``, ``apply_rotary``), ``SwiGLU`` and ``GroupedQueryAttention``, assembled in
``ModernDecoder`` (``ModernConfig``) and checked against Hugging Face's Llama
(``llama_from_hf``). ``ModernConfig``'s options undo one of Llama's choices at a time
(``positions``: also ALiBi, ``alibi_mask``, a learned table, the sinusoids or none; ``norm``;
``feed_forward``) for tools/train_modern_sweep.py and tools/train_length_sweep.py, whose records
``sweep_record`` loads.

Chapter 17 trains chapter 14's translator on several processes with ``torch.distributed``
(distributed.py): one stream of length batches dealt out (``batch_stream``,
``micro_batch_index``), the loss normalised by the step's token count over every process
(``scaled_loss``), ``train_steps`` under DDP or FSDP2, bf16 autocast, exact checkpoints, and
``train_distributed``, the body of ``tools/train_distributed.py``, which ``launch`` runs under
torchrun.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("transformer-book")  # pyproject.toml's version, set only there
except _metadata.PackageNotFoundError:  # imported from src/ without being installed
    __version__ = "0+unknown"

from transformer_book.attention import check_mask, scaled_dot_product_attention
from transformer_book.batching import length_batches, pad_rows, padding_share
from transformer_book.decoder import Decoder, DecoderLayer, load_torch_decoder_layer
from transformer_book.decoding import (
    beam_search,
    greedy_decode,
    length_penalized,
    sample_decode,
    sequence_log_prob,
    top_p_filter,
)
from transformer_book.distributed import (
    TranslationLoss,
    batch_stream,
    launch,
    micro_batch_index,
    scaled_loss,
    train_distributed,
    train_steps,
)
from transformer_book.encoder import Encoder, EncoderLayer, load_torch_encoder_layer
from transformer_book.feed_forward import PositionwiseFeedForward
from transformer_book.generator import LabelSmoothingLoss, OutputLayer, sample_next_token
from transformer_book.gpt import (
    GPT,
    GPTConfig,
    causal_lm_loss,
    causal_mask,
    gpt_from_hf,
    hf_parameter_pairs,
)
from transformer_book.masking import padding_mask, subsequent_mask, target_mask
from transformer_book.model import (
    EmbeddingWithPositions,
    Transformer,
    load_torch_transformer,
    make_model,
    sequence_loss,
    warmup_rate,
)
from transformer_book.modern import (
    GroupedQueryAttention,
    ModernConfig,
    ModernDecoder,
    ModernLayer,
    RMSNorm,
    SwiGLU,
    alibi_mask,
    alibi_slopes,
    apply_rotary,
    llama_from_hf,
    llama_parameter_pairs,
    rotary_table,
    rotate_half,
    sweep_record,
    swiglu_hidden,
)
from transformer_book.multihead import MultiHeadAttention, check_attention_mask, load_torch_attention
from transformer_book.normalization import LayerNorm, SublayerConnection
from transformer_book.numerals import (
    NUMBERS_CONFIG,
    NUMBERS_TRAINING,
    chinese_numeral,
    english_words,
    numbers_task,
    pretrained_numbers_model,
)
from transformer_book.poems import PoemVocabulary, poem_split, read_poems, twin_poems
from transformer_book.poet import (
    POET_CONFIG,
    POET_TRAINING,
    Poet,
    acrostic_logits,
    perplexity,
    poem_losses,
    poet_history,
    pretrained_poet,
    regular_form,
    train_lm,
    train_poet,
)
from transformer_book.positional import Embeddings, PositionalEncoding, sinusoidal_table
from transformer_book.subwords import (
    BytePairEncoding,
    SubwordVocabulary,
    chinese_vocabulary,
    english_vocabulary,
    learn_bpe,
    read_merges,
)
from transformer_book.tasks import Vocabulary
from transformer_book.tatoeba import english_keys, read_pairs, tatoeba_split, twin_groups
from transformer_book.training import (
    DATES_CONFIG,
    DATES_TRAINING,
    exact_match_accuracy,
    paper_optimizer,
    pretrained_dates_model,
    train_model,
    training_spread,
)
from transformer_book.translation import (
    TRANSLATION_CONFIG,
    TRANSLATION_TRAINING,
    Translator,
    corpus_scores,
    pretrained_translator,
    train_recipe,
    train_translator,
)

Generator = OutputLayer  # The Annotated Transformer's name for chapter 8's OutputLayer, an alias

__all__ = [
    "DATES_CONFIG",
    "DATES_TRAINING",
    "GPT",
    "NUMBERS_CONFIG",
    "NUMBERS_TRAINING",
    "POET_CONFIG",
    "POET_TRAINING",
    "TRANSLATION_CONFIG",
    "TRANSLATION_TRAINING",
    "BytePairEncoding",
    "Decoder",
    "DecoderLayer",
    "EmbeddingWithPositions",
    "Embeddings",
    "Encoder",
    "EncoderLayer",
    "GPTConfig",
    "Generator",
    "GroupedQueryAttention",
    "LabelSmoothingLoss",
    "LayerNorm",
    "ModernConfig",
    "ModernDecoder",
    "ModernLayer",
    "MultiHeadAttention",
    "OutputLayer",
    "PoemVocabulary",
    "Poet",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "RMSNorm",
    "SublayerConnection",
    "SubwordVocabulary",
    "SwiGLU",
    "Transformer",
    "TranslationLoss",
    "Translator",
    "Vocabulary",
    "acrostic_logits",
    "alibi_mask",
    "alibi_slopes",
    "apply_rotary",
    "batch_stream",
    "beam_search",
    "causal_lm_loss",
    "causal_mask",
    "check_attention_mask",
    "check_mask",
    "chinese_numeral",
    "chinese_vocabulary",
    "corpus_scores",
    "english_keys",
    "english_vocabulary",
    "english_words",
    "exact_match_accuracy",
    "gpt_from_hf",
    "greedy_decode",
    "hf_parameter_pairs",
    "launch",
    "learn_bpe",
    "length_batches",
    "length_penalized",
    "llama_from_hf",
    "llama_parameter_pairs",
    "load_torch_attention",
    "load_torch_decoder_layer",
    "load_torch_encoder_layer",
    "load_torch_transformer",
    "make_model",
    "micro_batch_index",
    "numbers_task",
    "pad_rows",
    "padding_mask",
    "padding_share",
    "paper_optimizer",
    "perplexity",
    "poem_losses",
    "poem_split",
    "poet_history",
    "pretrained_dates_model",
    "pretrained_numbers_model",
    "pretrained_poet",
    "pretrained_translator",
    "read_merges",
    "read_pairs",
    "read_poems",
    "regular_form",
    "rotary_table",
    "rotate_half",
    "sample_decode",
    "sample_next_token",
    "scaled_dot_product_attention",
    "scaled_loss",
    "sequence_log_prob",
    "sequence_loss",
    "sinusoidal_table",
    "subsequent_mask",
    "sweep_record",
    "swiglu_hidden",
    "target_mask",
    "tatoeba_split",
    "top_p_filter",
    "train_distributed",
    "train_lm",
    "train_model",
    "train_poet",
    "train_recipe",
    "train_steps",
    "train_translator",
    "training_spread",
    "twin_groups",
    "twin_poems",
    "warmup_rate",
]
