"""The Transformer, from scratch: the model code written in the book's chapters.

Every module except this one is generated from the chapter that explains it (tools/export_package.py);
read the chapter to see why the code is the way it is. This package holds model code only: it imports
torch and nothing from plotting or notebooks.

Chapter 10 adds the key/value cache to classes of chapters 1, 3, 7 and 9 (``cache=``, ``caches=``,
``offset=``, ``Transformer.new_caches``) in ``transformer_book.kv_cache``, which
``transformer_book.decoding`` imports; importing the package imports both, so the classes below
always have the cache.
"""

from transformer_book.attention import check_mask, scaled_dot_product_attention
from transformer_book.decoder import Decoder, DecoderLayer, load_torch_decoder_layer
from transformer_book.encoder import Encoder, EncoderLayer, load_torch_encoder_layer
from transformer_book.feed_forward import PositionwiseFeedForward
from transformer_book.generator import Generator, LabelSmoothingLoss, sample_next_token
from transformer_book.masking import check_attention_mask, padding_mask, subsequent_mask, target_mask
from transformer_book.decoding import (
    beam_search,
    greedy_decode,
    length_penalized,
    sample_decode,
    sequence_log_prob,
    top_p_filter,
)
from transformer_book.model import (
    EmbeddingWithPositions,
    Transformer,
    load_torch_transformer,
    make_model,
    sequence_loss,
    warmup_rate,
)
from transformer_book.multihead import MultiHeadAttention, load_torch_attention
from transformer_book.numerals import (
    NUMBERS_CONFIG,
    NUMBERS_TRAINING,
    chinese_numeral,
    english_words,
    numbers_task,
)
from transformer_book.normalization import LayerNorm, SublayerConnection
from transformer_book.positional import Embeddings, PositionalEncoding, sinusoidal_table
from transformer_book.training import (
    DATES_CONFIG,
    DATES_TRAINING,
    exact_match_accuracy,
    train_model,
    trained_dates_model,
)

__all__ = [
    "DATES_CONFIG",
    "DATES_TRAINING",
    "Decoder",
    "DecoderLayer",
    "EmbeddingWithPositions",
    "Embeddings",
    "Encoder",
    "EncoderLayer",
    "Generator",
    "LabelSmoothingLoss",
    "LayerNorm",
    "NUMBERS_CONFIG",
    "NUMBERS_TRAINING",
    "MultiHeadAttention",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "SublayerConnection",
    "Transformer",
    "beam_search",
    "check_attention_mask",
    "check_mask",
    "exact_match_accuracy",
    "chinese_numeral",
    "english_words",
    "greedy_decode",
    "length_penalized",
    "load_torch_attention",
    "load_torch_decoder_layer",
    "load_torch_encoder_layer",
    "load_torch_transformer",
    "make_model",
    "numbers_task",
    "padding_mask",
    "sample_decode",
    "sample_next_token",
    "scaled_dot_product_attention",
    "sequence_log_prob",
    "sequence_loss",
    "sinusoidal_table",
    "subsequent_mask",
    "target_mask",
    "train_model",
    "trained_dates_model",
    "top_p_filter",
    "warmup_rate",
]
