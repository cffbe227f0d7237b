"""The model configuration that the diagrams draw their shapes and parameter counts from.

Shapes in a diagram are never typed by hand: they are written from a :class:`ModelConfig`, and the
parameter counts come from the companion package's own modules, built on PyTorch's ``meta`` device
(no memory, no arithmetic), so a diagram cannot disagree with the code it draws.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the model a diagram draws; the defaults are the paper's base model.

    ``batch``, ``source_len`` and ``target_len`` are names (shown as written) or numbers (a chapter's
    real example sizes). ``tie_weights`` shares one matrix between both embeddings and the final
    linear layer, as the paper's section 3.4 does (with one shared vocabulary of about 37,000 tokens).
    """

    d_model: int = 512
    heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    source_vocab: int = 37000
    target_vocab: int = 37000
    tie_weights: bool = True
    batch: int | str = "batch"
    source_len: int | str = "src_len"
    target_len: int | str = "tgt_len"

    def __post_init__(self):
        for name in ("d_model", "heads", "d_ff", "num_layers", "source_vocab", "target_vocab"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer; got {name}={value!r}")
        for name in ("batch", "source_len", "target_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, int) and value <= 0):
                raise ValueError(
                    f"ModelConfig.{name} must be a positive integer or a name like 'batch'; got {name}={value!r}"
                )
        if self.d_model % self.heads:
            raise ValueError(
                f"d_model must be divisible by heads (d_k = d_model / heads); got d_model={self.d_model}, "
                f"heads={self.heads}"
            )
        if self.tie_weights and self.source_vocab != self.target_vocab:
            raise ValueError(
                "tie_weights needs one shared vocabulary; got "
                f"source_vocab={self.source_vocab}, target_vocab={self.target_vocab}"
            )

    @property
    def d_k(self) -> int:
        """Width of one head's queries, keys and values: d_model / heads."""
        return self.d_model // self.heads

    @classmethod
    def from_model(cls, model, **sizes) -> ModelConfig:
        """The configuration of a ``transformer_book.Transformer`` (``sizes``: batch, source_len, ...)."""
        import torch

        try:
            layer = model.encoder.layers[0]
            attention = layer.self_attn
            source_table = next(m for m in model.source_embed.modules() if isinstance(m, torch.nn.Embedding))
            target_table = next(m for m in model.target_embed.modules() if isinstance(m, torch.nn.Embedding))
            config = dict(
                d_model=attention.d_model,
                heads=attention.heads,
                d_ff=layer.feed_forward.d_ff,
                num_layers=len(model.encoder.layers),
                source_vocab=source_table.num_embeddings,
                target_vocab=target_table.num_embeddings,
                tie_weights=model.generator.proj.weight is target_table.weight,
            )
        except (AttributeError, IndexError, StopIteration) as error:
            raise TypeError(
                f"ModelConfig.from_model needs a transformer_book.Transformer; got {type(model).__name__} ({error})"
            ) from error
        return cls(**config, **sizes)


BASE = ModelConfig()


def as_config(config: ModelConfig | Mapping | None = None) -> ModelConfig:
    """``None`` -> the base model; a mapping -> ``ModelConfig(**mapping)``; a ModelConfig as it is."""
    if config is None:
        return BASE
    if isinstance(config, ModelConfig):
        return config
    if isinstance(config, Mapping):
        known = {field.name for field in dataclasses.fields(ModelConfig)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}; expected some of {sorted(known)}")
        return ModelConfig(**config)
    raise TypeError(f"config must be a ModelConfig, a mapping or None; got {type(config).__name__}")


def shape(*dims) -> str:
    """``shape("batch", 8, "src_len")`` -> ``"(batch, 8, src_len)"``."""
    return "(" + ", ".join(str(dim) for dim in dims) + ")"


@functools.lru_cache(maxsize=32)
def parameter_counts(config: ModelConfig = BASE) -> dict[str, int]:
    """Trainable parameters of each block of the model, from the sizes in ``config``.

    Keys: ``embedding`` (one token table), ``attention`` (one multi-head attention), ``layer_norm``,
    ``feed_forward``, ``encoder_layer``, ``decoder_layer``, ``generator`` (the final linear layer, its
    weight counted even when tied), ``model`` (the whole Transformer, a tied matrix counted once).
    Each is what the companion package's module of that name holds, written out so that a diagram
    builds no model.
    """
    d_model, d_ff = config.d_model, config.d_ff
    attention = 4 * (d_model * d_model + d_model)  # query, key, value, output: weight and bias
    layer_norm = 2 * d_model  # gain and bias
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    generator = d_model * config.target_vocab + config.target_vocab
    tables = config.source_vocab * d_model + (0 if config.tie_weights else 2 * config.target_vocab * d_model)
    return {
        "embedding": config.source_vocab * d_model,
        "attention": attention,
        "layer_norm": layer_norm,
        "feed_forward": feed_forward,
        "encoder_layer": encoder_layer,
        "decoder_layer": decoder_layer,
        "generator": generator,
        "model": tables + config.num_layers * (encoder_layer + decoder_layer) + config.target_vocab,
    }
