# This file is generated from book/01_positional_encoding.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Argument checks shared by every module of the package.

Written in chapter 1, "Positional encoding". Each check names the argument, the value
it got and what was expected. A value of the wrong Python type raises TypeError; a
tensor of the wrong dtype or with values out of range raises ValueError.
"""

from __future__ import annotations

import math

import torch


def check_tensor(
    name: str,
    value: object,
    floating: bool = False,
    dtype: torch.dtype | None = None,
    like: str = "the module's parameters",
) -> None:
    """Check that ``value`` is a tensor of the expected kind and dtype.

    Refuse a non-tensor; with ``floating``, an integer or boolean tensor; with
    ``dtype``, another dtype.

    ``dtype`` is usually that of the module's parameters (``like`` says whose):
    PyTorch would refuse the mix deep inside a matrix product.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    if floating and not value.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor; got dtype {value.dtype}"
        )
    if dtype is not None and value.dtype != dtype:
        raise ValueError(
            f"{name} has dtype {value.dtype}, not {dtype} like {like}; "
            f"convert one of them, e.g. {name}.to({dtype})"
        )


def check_token_ids(name: str, tokens: object, vocab_size: int) -> None:
    """Refuse anything but an integer tensor of ids in [0, vocab_size)."""
    check_tensor(name, tokens)
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise ValueError(f"{name} must be integer token ids; got dtype {tokens.dtype}")
    if tokens.device.type == "meta" or not tokens.numel():  # no values to check
        return
    if tokens.min() < 0 or tokens.max() >= vocab_size:
        raise ValueError(
            f"{name} must be token ids in [0, vocab_size={vocab_size}); "
            f"got values from {tokens.min().item()} to {tokens.max().item()}"
        )


def check_dropout(dropout: object, name: str = "dropout") -> None:
    """Refuse a dropout probability outside [0, 1).

    1 would zero everything, and 10 is not 10%.
    """
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
        raise TypeError(
            f"{name} must be a number in [0, 1); got {type(dropout).__name__} "
            f"{dropout!r}"
        )
    if math.isnan(dropout) or not 0 <= dropout < 1:
        raise ValueError(
            f"{name} must be a probability in [0, 1); got {name}={dropout!r}"
        )


def check_positive(**sizes: int) -> None:
    """Refuse sizes that are not all positive, naming each size and its value.

    ``check_positive(d_model=512, d_ff=0)`` raises "d_model and d_ff must be positive;
    got d_model=512, d_ff=0".
    """
    if any(size <= 0 for size in sizes.values()):
        *others, last = sizes
        names = f"{', '.join(others)} and {last}" if others else last
        got = ", ".join(f"{name}={size}" for name, size in sizes.items())
        raise ValueError(f"{names} must be positive; got {got}")


def check_features(
    name: str,
    value: object,
    d_model: int,
    dtype: torch.dtype,
    expected: str | None = None,
) -> None:
    """Refuse anything but a floating tensor of ``dtype`` whose last axis is d_model.

    Every layer of the model reads (..., d_model). ``expected`` says what in the error
    (by default "a last dimension of d_model=...").
    """
    check_tensor(name, value, floating=True, dtype=dtype)
    if value.dim() == 0 or value.size(-1) != d_model:
        expected = expected or f"a last dimension of d_model={d_model}"
        raise ValueError(f"expected {expected}; got shape {tuple(value.shape)}")
