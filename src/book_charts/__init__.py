"""Chart helpers shared by the book's chapters (Altair + pandas). Never imported by the model code.

Conventions: tidy (long) frames, rounded floats so stored notebook outputs stay small and stable,
titled axes, tooltips on every mark, and colour schemes that still read in greyscale print.

Diagrams (vector, drawn by Vega, each with a "Diagram: ..." text alternative) live in
``book_charts.architecture`` (the map of the whole model) and ``book_charts.mechanisms`` (one
computation diagram per mechanism); their shapes come from a ``ModelConfig``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from book_charts.architecture import CHAPTERS, PARTS, architecture
from book_charts.config import BASE, ModelConfig, parameter_counts
from book_charts.mechanisms import (
    add_and_norm_diagram,
    attention_diagram,
    cross_attention_diagram,
    feed_forward_diagram,
    kv_cache_diagram,
    masks_diagram,
    multi_head_diagram,
    output_layer_diagram,
)

# Perceptually uniform schemes that keep their order in greyscale: sequential for magnitudes
# (weights, probabilities), diverging for signed values centred on zero (encodings, differences).
SEQUENTIAL = "viridis"
DIVERGING = "purpleorange"

__all__ = [
    "BASE",
    "CHAPTERS",
    "DIVERGING",
    "PARTS",
    "SEQUENTIAL",
    "ModelConfig",
    "add_and_norm_diagram",
    "architecture",
    "attention_diagram",
    "cross_attention_diagram",
    "feed_forward_diagram",
    "heatmap",
    "js_list",
    "kv_cache_diagram",
    "masks_diagram",
    "multi_head_diagram",
    "output_layer_diagram",
    "parameter_counts",
    "tidy",
]


def js_list(values) -> str:
    """Write a Python list (of lists) as a Vega expression array literal.

    A Python list (of lists) as a Vega expression array literal, for a chart that looks up
    labels by index in a calculate transform (``f"{js_list(labels)}[datum.s][datum.q]"``)."""
    return json.dumps(values, ensure_ascii=False)


def tidy(matrix, row: str, column: str, value: str, decimals: int = 3) -> pd.DataFrame:
    """A 2-D tensor or array as a long frame with one row per cell: ``row``, ``column``, ``value``.

    Values are rounded to ``decimals`` places so that a chart's embedded data is small and does not
    change with the last bits of floating point arithmetic on another machine.
    """
    if hasattr(matrix, "detach"):
        # float64 before rounding: a rounded float32 prints as 0.8399999737739563 in the chart's JSON
        matrix = matrix.detach().cpu().double().numpy()
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"tidy() needs a 2-D matrix; got shape {matrix.shape}")
    frame = pd.DataFrame(matrix).reset_index(names=row).melt(id_vars=row, var_name=column, value_name=value)
    frame[column] = frame[column].astype(int)
    frame[value] = frame[value].round(decimals)
    return frame


def heatmap(
    frame: pd.DataFrame,
    x: str,
    y: str,
    color: str,
    *,
    title: str,
    x_title: str | None = None,
    y_title: str | None = None,
    color_title: str | None = None,
    diverging: bool = False,
    domain: Sequence[float] | None = None,
    width: int = 400,
    height: int = 300,
    extra_tooltip: Sequence[str] = (),
) -> alt.Chart:
    """A rect heatmap of a tidy frame with a tooltip on every cell.

    ``diverging=True`` centres a diverging scheme on zero, for signed values.
    """
    scale_options = {"scheme": DIVERGING if diverging else SEQUENTIAL}
    if domain is not None:
        scale_options["domain"] = list(domain)
    elif diverging:
        scale_options["domainMid"] = 0
    scale = alt.Scale(**scale_options)
    return (
        alt.Chart(frame, title=title)
        .mark_rect()
        .encode(
            x=alt.X(f"{x}:O", title=x_title or x, axis=alt.Axis(labelOverlap="greedy")),
            y=alt.Y(f"{y}:O", title=y_title or y, axis=alt.Axis(labelOverlap="greedy")),
            color=alt.Color(f"{color}:Q", title=color_title or color, scale=scale),
            tooltip=[f"{y}:O", f"{x}:O", alt.Tooltip(f"{color}:Q", format=".3f"), *extra_tooltip],
        )
        .properties(width=width, height=height)
    )
