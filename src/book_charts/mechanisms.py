"""One computation diagram per mechanism, drawn from a ModelConfig (shapes are never typed by hand).

Each function returns an Altair chart whose ``description`` starts with "Diagram:". Data flows upwards,
as in the paper's figures; edge labels give the tensor shapes for ``config`` (default: the base model).
"""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from book_charts.config import ModelConfig, as_config, parameter_counts, shape
from book_charts.draw import HIGHLIGHT, TEXT, Arrow, Box, Note, diagram, finish

Config = ModelConfig | Mapping | None


def _up(x, y0, y1, **kwargs):
    return Arrow([(x, y0), (x, y1)], **kwargs)


def _column(x, boxes: list[Box], start: float | None = None, end: float | None = None) -> list[Arrow]:
    """Arrows up the column at ``x`` through ``boxes`` (bottom to top): from ``start`` (if given) into
    the first box, from each box into the next, and from the last one up to ``end`` (if given)."""
    stops = [y for box in boxes for y in (box.y0, box.y1)]
    stops = [start, *stops] if start is not None else stops[1:]
    stops = [*stops, end] if end is not None else stops[:-1]
    return [_up(x, low, high) for low, high in zip(stops[::2], stops[1::2])]


def attention_diagram(config: Config = None, *, masked: bool = True, width: float | None = None):
    """Scaled dot-product attention (the paper's Figure 2, left): MatMul, Scale, Mask, Softmax, MatMul."""
    c = as_config(config)
    q_len, k_len = c.target_len, c.source_len
    qs = shape(c.batch, c.heads, q_len, c.d_k)
    ks = shape(c.batch, c.heads, k_len, c.d_k)
    scores = shape(c.batch, c.heads, q_len, k_len)
    boxes = [
        Box("matmul1", "MatMul  Q·Kᵀ", 40, 52, 200, 74, "op", {"step": "scores = Q Kᵀ", "shape": scores}),
        Box(
            "scale",
            f"Scale  ÷ √d_k = ÷ {c.d_k**0.5:g}",
            40,
            98,
            200,
            120,
            "op",
            {"step": f"divide by √d_k = √{c.d_k}: keeps the softmax out of saturation", "shape": scores},
        ),
        Box(
            "mask",
            "Mask (optional)",
            40,
            144,
            200,
            166,
            "mask",
            {"step": "blocked positions get -inf (padding, or the future in the decoder)", "shape": scores},
            dashed=True,
        ),
        Box(
            "softmax",
            "Softmax (over keys)",
            40,
            190,
            200,
            212,
            "softmax",
            {"step": "each row becomes weights that sum to 1", "shape": scores},
        ),
        Box("matmul2", "MatMul  weights·V", 40, 236, 290, 258, "op", {"step": "output = weights · V", "shape": qs}),
    ]
    if not masked:
        boxes.pop(2)
    notes = [
        Note("Q", 70, 12, "center", 11, TEXT, True),
        Note("K", 170, 12, "center", 11, TEXT, True),
        Note("V", 290, 12, "center", 11, TEXT, True),
        Note(f"Q {qs}, K {ks}", 180, 2, "center", 9),
        Note(scores, 126, 86, "left"),
        Note(qs + " output", 165, 282, "center", 10, TEXT),
    ]
    arrows = [_up(70, 22, 52), _up(170, 22, 52), Arrow([(290, 22), (290, 236)]), *_column(120, boxes)]
    arrows.append(_up(165, 258, 274))
    description = (
        "Diagram: scaled dot-product attention, bottom to top. Q and K are multiplied (MatMul, Q times K "
        f"transposed) into scores of shape {scores}; the scores are divided by the square root of d_k "
        f"({c.d_k}); {'an optional mask sets blocked positions to minus infinity; ' if masked else ''}a softmax "
        f"over the keys turns each row into weights; a second MatMul with V gives the output, shape {qs}."
    )
    return diagram(
        boxes,
        arrows,
        notes,
        design_width=360,
        design_height=290,
        description=description,
        title={"text": "Scaled dot-product attention", "subtitle": "softmax(QKᵀ/√d_k)·V"},
        width=width,
    )


def multi_head_diagram(config: Config = None, *, width: float | None = None):
    """Multi-head attention: project, split into heads, attend per head, concatenate, project."""
    c = as_config(config)
    counts = parameter_counts(c)
    seq = shape(c.batch, "seq", c.d_model)
    heads = shape(c.batch, c.heads, "seq", c.d_k)
    proj = f"{c.d_model}×{c.d_model} + bias: {c.d_model * c.d_model + c.d_model:,} parameters"
    boxes = []
    for x, name in ((20, "Q"), (130, "K"), (240, "V")):
        boxes.append(
            Box(
                f"w{name}",
                f"Linear W{name}",
                x,
                36,
                x + 100,
                58,
                "linear",
                {
                    "step": f"project {name}: {c.d_model} → {c.d_model} (all heads at once)",
                    "shape": seq,
                    "parameters": proj,
                },
            )
        )
        boxes.append(
            Box(
                f"split{name}",
                f"split: {c.heads} heads",
                x,
                82,
                x + 100,
                104,
                "op",
                {
                    "step": f"view as {c.heads} heads of d_k = {c.d_model} / {c.heads} = {c.d_k}",
                    "shape": heads,
                    "parameters": "0",
                },
            )
        )
    for offset in (8, 4, 0):  # a stack of h attention blocks
        boxes.append(
            Box(
                f"attend{offset}",
                "" if offset else f"Scaled dot-product attention ×{c.heads}",
                20 + offset,
                128 + offset,
                340 + offset - 8,
                154 + offset,
                "attention",
                {
                    "step": f"{c.heads} heads attend in parallel, each in its own {c.d_k}-dimensional subspace",
                    "shape": heads,
                    "parameters": "0",
                },
            )
        )
    boxes += [
        Box(
            "concat",
            "Concat heads",
            110,
            184,
            250,
            206,
            "op",
            {"step": f"{c.heads} × {c.d_k} = {c.d_model}: heads side by side", "shape": seq, "parameters": "0"},
        ),
        Box(
            "wo",
            "Linear W^O",
            110,
            228,
            250,
            250,
            "linear",
            {"step": "mix the heads back together", "shape": seq, "parameters": proj},
        ),
    ]
    arrows = []
    for x in (70, 180, 290):
        arrows += [_up(x, 18, 36), _up(x, 58, 82), _up(x, 104, 128)]
    arrows += [_up(180, 162, 184), _up(180, 206, 228), _up(180, 250, 266)]
    notes = [
        Note("Q", 70, 10, "center", 11, TEXT, True),
        Note("K", 180, 10, "center", 11, TEXT, True),
        Note("V", 290, 10, "center", 11, TEXT, True),
        Note(seq, 125, 10, "center", 9),
        Note(heads, 186, 116, "left"),
        Note(seq, 186, 217, "left"),
        Note(f"output {seq}", 180, 276, "center", 10, TEXT),
        Note(f"{counts['attention']:,} parameters", 354, 239, "right"),
    ]
    description = (
        f"Diagram: multi-head attention with {c.heads} heads. Q, K and V, each {seq}, go through their own linear "
        f"projection, are split into {c.heads} heads of width d_k = {c.d_k} ({heads}), each head runs scaled "
        f"dot-product attention in parallel, the heads are concatenated back to {c.d_model} features and a final "
        f"linear projection W^O mixes them; {counts['attention']:,} parameters in all."
    )
    return diagram(
        boxes,
        arrows,
        notes,
        design_width=360,
        design_height=284,
        description=description,
        title={"text": "Multi-head attention", "subtitle": f"h = {c.heads} heads, d_k = {c.d_k}"},
        width=width,
    )


def _add_norm_panel(pre_norm: bool, c: ModelConfig, panel_width: float):
    seq = shape(c.batch, "seq", c.d_model)
    x0, x1, cx, lane = 34, 150, 92, 14
    if pre_norm:
        boxes = [
            Box("norm", "LayerNorm", x0, 40, x1, 62, "norm", {"step": "normalise the sub-layer's input", "shape": seq}),
            Box("sub", "Sub-layer", x0, 84, x1, 110, "attention", {"step": "attention or feed-forward", "shape": seq}),
            Box("drop", "Dropout", x0, 130, x1, 150, "op", {"step": "dropout on the update", "shape": seq}),
            Box("add", "+  add", 62, 172, 122, 192, "op", {"step": "x + update: the residual stream", "shape": seq}),
        ]
        formula, note, joins = "x + Sublayer(LayerNorm(x))", "the stack needs a final LayerNorm", 182
    else:
        boxes = [
            Box("sub", "Sub-layer", x0, 40, x1, 66, "attention", {"step": "attention or feed-forward", "shape": seq}),
            Box("drop", "Dropout", x0, 86, x1, 106, "op", {"step": "dropout on the update", "shape": seq}),
            Box("add", "+  add", 62, 128, 122, 148, "op", {"step": "x + Sublayer(x)", "shape": seq}),
            Box("norm", "LayerNorm", x0, 170, x1, 192, "norm", {"step": "normalise the sum", "shape": seq}),
        ]
        formula, note, joins = "LayerNorm(x + Sublayer(x))", "the paper's order", 138
    residual = Arrow([(cx, 26), (lane, 26), (lane, joins), (62, joins)], color=HIGHLIGHT)  # into the add
    arrows = [*_column(cx, boxes, start=14, end=226), residual]
    notes = [
        Note("x", cx, 7, "center", 11, TEXT, True),
        Note("residual", lane + 3, 118 if pre_norm else 96, "left", 9, HIGHLIGHT),
        Note(formula, 0, 236, "left", 10, TEXT, True),
        Note(note, 0, 249, "left", 9.5),
    ]
    return diagram(
        boxes,
        arrows,
        notes,
        design_width=170,
        design_height=256,
        description=None,
        title={"text": "Pre-norm" if pre_norm else "Post-norm (paper)", "fontSize": 12},
        width=panel_width,
    )


def add_and_norm_diagram(config: Config = None, *, width: float | None = None):
    """Add & Norm: post-norm (the paper) and pre-norm side by side, the residual path highlighted."""
    c = as_config(config)
    panel = (360 if width is None else width) / 2 - 8
    chart = alt.hconcat(_add_norm_panel(False, c, panel), _add_norm_panel(True, c, panel)).properties(
        title={"text": "Add & Norm: two orders", "subtitle": f"every tensor is {shape(c.batch, 'seq', c.d_model)}"}
    )
    description = (
        "Diagram: Add & Norm, two variants side by side. Left, post-norm as in the paper: the sub-layer's output "
        "goes through dropout, is added to the input x carried by the residual path, and the sum is layer-"
        "normalised: LayerNorm(x + Sublayer(x)). Right, pre-norm: x is layer-normalised first, the sub-layer and "
        "dropout follow, and the result is added to the untouched x: x + Sublayer(LayerNorm(x)). Every tensor "
        f"keeps the shape {shape(c.batch, 'seq', c.d_model)}."
    )
    return finish(chart, description)


def feed_forward_diagram(config: Config = None, *, width: float | None = None):
    """The position-wise FFN: expand d_model -> d_ff, ReLU, project back; box widths follow the sizes."""
    c = as_config(config)
    counts = parameter_counts(c)
    wide = 330
    narrow = wide * c.d_model / max(c.d_ff, c.d_model)
    centre = 180

    inner = shape(c.batch, "seq", c.d_ff)
    outer = shape(c.batch, "seq", c.d_model)
    first = c.d_model * c.d_ff + c.d_ff
    second = c.d_ff * c.d_model + c.d_model
    stack = [  # bottom to top: id, label, width, y0, y1, kind, step, shape, parameters
        ("x", f"x  ({c.d_model})", narrow, 26, 46, "tensor", "one position's vector (every position alike)", outer, 0),
        ("w1", f"Linear W1: {c.d_model} → {c.d_ff}", wide, 72, 94, "linear", "expand", inner, first),
        ("relu", "ReLU  max(0, ·)", wide, 116, 136, "op", "keep the positive part", inner, 0),
        ("w2", f"Linear W2: {c.d_ff} → {c.d_model}", wide, 160, 182, "linear", "project back", outer, second),
        ("y", f"output  ({c.d_model})", narrow, 208, 228, "tensor", "same shape as the input", outer, 0),
    ]
    boxes = [
        Box(
            box_id,
            label,
            centre - w / 2,
            y0,
            centre + w / 2,
            y1,
            kind,
            {"step": step, "shape": out, "parameters": f"{count:,}"},
        )
        for box_id, label, w, y0, y1, kind, step, out, count in stack
    ]
    arrows = _column(centre, boxes, start=8)
    notes = [
        Note(inner, centre + 4, 105, "left"),
        Note(inner, centre + 4, 148, "left"),
        Note(outer, centre + 4, 60, "left"),
        Note(outer, centre + 4, 196, "left"),
        Note(f"{counts['feed_forward']:,} parameters", 354, 240, "right"),
    ]
    description = (
        f"Diagram: the position-wise feed-forward network. Each position's vector of {c.d_model} features is "
        f"expanded by a linear layer to {c.d_ff} features ({inner}), passed through ReLU, and projected back to "
        f"{c.d_model} ({outer}) by a second linear layer; {counts['feed_forward']:,} parameters. Box widths are "
        "proportional to the number of features."
    )
    return diagram(
        boxes,
        arrows,
        notes,
        design_width=360,
        design_height=248,
        description=description,
        title={"text": "Position-wise feed-forward network", "subtitle": "FFN(x) = max(0, xW1 + b1)W2 + b2"},
        width=width,
    )


def masks_diagram(length: int = 6, padding: int = 2, *, cell: float = 14):
    """Padding, look-ahead and combined masks as grids, computed by transformer_book.masking."""
    import torch

    from transformer_book import padding_mask, subsequent_mask

    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise ValueError(f"length must be an integer >= 2; got length={length!r}")
    if isinstance(padding, bool) or not isinstance(padding, int) or not 0 <= padding < length:
        raise ValueError(f"padding must be an integer in [0, length); got padding={padding!r}, length={length}")
    pad_id = 0
    tokens = torch.tensor([[1] * (length - padding) + [pad_id] * padding])
    masks = {
        "Padding": padding_mask(tokens, pad_id).expand(1, length, length)[0],
        "Look-ahead": subsequent_mask(length)[0],
    }
    masks["Combined"] = masks["Padding"] & masks["Look-ahead"]
    rows = []
    for name, mask in masks.items():
        for query in range(length):
            for key in range(length):
                allowed = bool(mask[query, key])
                rows.append(
                    {
                        "mask": name,
                        "query": query,
                        "key": key,
                        "may attend": "yes" if allowed else "no",
                        "key token": "<pad>" if key >= length - padding else f"token {key}",
                    }
                )
    frame = pd.DataFrame(rows)
    panels = []
    for name in masks:
        panels.append(
            alt.Chart(frame[frame["mask"] == name], title=alt.Title(name, fontSize=12))
            .mark_rect(stroke="#ffffff", strokeWidth=1)
            .encode(
                x=alt.X("key:O", title="key", axis=alt.Axis(labelAngle=0)),
                y=alt.Y("query:O", title="query" if name == "Padding" else None),
                color=alt.Color(
                    "may attend:N",
                    scale=alt.Scale(domain=["yes", "no"], range=["#3b6fb6", "#e6e6e6"]),
                    legend=alt.Legend(orient="bottom", title="may attend"),
                ),
                tooltip=["mask:N", "query:O", "key:O", "key token:N", "may attend:N"],
            )
            .properties(width=cell * length, height=cell * length)
        )
    chart = alt.hconcat(*panels).properties(
        title={
            "text": "Masks: which keys each query may attend to",
            "subtitle": f"{length} positions, the last {padding} are padding",
        }
    )
    description = (
        f"Diagram: three attention masks as {length} by {length} grids, queries down, keys across. Padding: every "
        f"query may attend to the first {length - padding} keys, none may attend to the {padding} padding keys. "
        "Look-ahead: query i may attend to keys 0 to i only (a lower triangle). Combined: both rules at once, "
        "the lower triangle without the padding columns."
    )
    return finish(chart, description).configure_axis(labelFontSize=10, titleFontSize=10)


def cross_attention_diagram(config: Config = None, *, width: float | None = None):
    """Cross-attention: queries from the decoder, keys and values from the encoder's output."""
    c = as_config(config)
    mem = shape(c.batch, c.source_len, c.d_model)
    dec = shape(c.batch, c.target_len, c.d_model)
    weights = shape(c.batch, c.heads, c.target_len, c.source_len)
    boxes = [
        Box(
            "memory",
            "Encoder output\n(memory)",
            12,
            18,
            160,
            50,
            "frame",
            {"step": "the last encoder layer's output, computed once", "shape": mem},
        ),
        Box(
            "state",
            "Decoder state\n(after masked self-attn)",
            200,
            18,
            348,
            50,
            "norm",
            {"step": "the decoder's running representation", "shape": dec},
        ),
        Box("wk", "W^K", 12, 84, 80, 106, "linear", {"step": "keys from the encoder", "shape": mem}),
        Box("wv", "W^V", 92, 84, 160, 106, "linear", {"step": "values from the encoder", "shape": mem}),
        Box("wq", "W^Q", 240, 84, 308, 106, "linear", {"step": "queries from the decoder", "shape": dec}),
        Box(
            "attend",
            "Multi-head attention\nsoftmax(QKᵀ/√d_k)·V",
            60,
            140,
            300,
            176,
            "attention",
            {"step": "each target position looks over every source position", "shape": weights + " weights"},
        ),
        Box("out", "W^O", 145, 200, 215, 220, "linear", {"step": "project back", "shape": dec}),
    ]
    arrows = [
        Arrow([(86, 50), (86, 66), (46, 66), (46, 84)]),
        Arrow([(86, 50), (86, 66), (126, 66), (126, 84)]),
        _up(274, 50, 84),
        _up(46, 106, 140),
        _up(126, 106, 140),
        _up(274, 106, 140),
        _up(180, 176, 200),
        _up(180, 220, 240),
    ]
    notes = [
        Note("K", 40, 123, "right", 10.5, TEXT, True),
        Note("V", 120, 123, "right", 10.5, TEXT, True),
        Note("Q", 268, 123, "right", 10.5, TEXT, True),
        Note(mem, 86, 8, "center"),
        Note(dec, 274, 8, "center"),
        Note(f"weights {weights}", 180, 186, "center", 9),
        Note(f"output {dec}", 180, 248, "center", 10, TEXT),
    ]
    description = (
        f"Diagram: cross-attention. The encoder's output (memory, {mem}) is projected into keys and values; the "
        f"decoder's state ({dec}) is projected into queries. Multi-head attention gives weights of shape {weights}, "
        f"one row per target position over every source position, and an output of shape {dec}."
    )
    return diagram(
        boxes,
        arrows,
        notes,
        design_width=360,
        design_height=256,
        description=description,
        title={"text": "Cross-attention", "subtitle": "queries from the decoder, keys and values from the encoder"},
        width=width,
    )


def output_layer_diagram(config: Config = None, *, width: float | None = None):
    """Hidden state -> logits -> probabilities, with the weight tied to the embedding table."""
    c = as_config(config)
    hidden = shape(c.batch, c.target_len, c.d_model)
    logits = shape(c.batch, c.target_len, c.target_vocab)
    table = shape(c.target_vocab, c.d_model)
    boxes = [
        Box(
            "hidden",
            "Decoder output",
            40,
            16,
            200,
            38,
            "norm",
            {"step": "one vector per target position", "shape": hidden},
        ),
        Box(
            "linear",
            "Linear: xWᵀ + b",
            40,
            66,
            200,
            88,
            "linear",
            {"step": f"a score (logit) for each of {c.target_vocab:,} tokens", "shape": logits},
        ),
        Box(
            "softmax",
            "Softmax",
            40,
            118,
            200,
            140,
            "softmax",
            {"step": "scores to probabilities (log_softmax in the code)", "shape": logits},
        ),
        Box(
            "embed",
            f"Embedding table E\n{table}",
            226,
            60,
            350,
            94,
            "embed",
            {"step": "the same matrix as the embeddings when weights are tied", "shape": table},
        ),
    ]
    arrows = [
        _up(120, 38, 66),
        _up(120, 88, 118),
        _up(120, 140, 162),
        Arrow([(226, 77), (200, 77)], dashed=True, color=HIGHLIGHT, head=True),
    ]
    notes = [
        Note(hidden, 120, 6, "center"),
        Note(logits + " logits", 126, 103, "left"),
        Note(logits + " probabilities, each row sums to 1", 120, 172, "center", 9.5, TEXT),
        Note("tied: W = E" if c.tie_weights else "not tied here", 288, 106, "center", 9.5, HIGHLIGHT, True),
    ]
    description = (
        f"Diagram: the output layer. The decoder's output ({hidden}) goes through a linear layer that gives one "
        f"score (logit) per vocabulary token ({logits}); a softmax turns each position's scores into probabilities "
        f"that sum to 1. The linear layer's weight {table} is "
        + (
            "tied to (the same matrix as) the embedding table."
            if c.tie_weights
            else "separate from the embedding table."
        )
    )
    return diagram(
        boxes,
        arrows,
        notes,
        design_width=360,
        design_height=180,
        description=description,
        title={"text": "Output layer", "subtitle": "hidden state → logits → probabilities"},
        width=width,
    )


def kv_cache_diagram(config: Config = None, *, step: int = 4, source_len: int = 5, cell: float = 22):
    """The key/value cache at decoding step ``step``: what is cached, what each step appends."""
    c = as_config(config)
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= 12:
        raise ValueError(f"step must be an integer from 1 to 12; got step={step!r}")
    rows = []
    for row, (name, length, kind) in enumerate(
        [
            ("self-attn keys", step, "grow"),
            ("self-attn values", step, "grow"),
            ("cross-attn keys", source_len, "fixed"),
            ("cross-attn values", source_len, "fixed"),
        ]
    ):
        for position in range(max(step, source_len)):
            if position >= length:
                continue
            if kind == "fixed":
                status = "cached once (from the encoder)"
            elif position == step - 1:
                status = "appended at this step"
            else:
                status = "cached (earlier steps)"
            rows.append(
                {
                    "tensor": name,
                    "position": position,
                    "status": status,
                    "shape per layer": shape(c.batch, c.heads, length, c.d_k),
                }
            )
    frame = pd.DataFrame(rows)
    order = ["self-attn keys", "self-attn values", "cross-attn keys", "cross-attn values"]
    statuses = ["cached (earlier steps)", "appended at this step", "cached once (from the encoder)"]
    grid = (
        alt.Chart(frame)
        .mark_rect(stroke="#ffffff", strokeWidth=2, cornerRadius=2)
        .encode(
            x=alt.X("position:O", title="position", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("tensor:N", sort=order, title=None),
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=statuses, range=["#9ec5f0", "#e8590c", "#c9c9c9"]),
                legend=alt.Legend(orient="bottom", direction="vertical", title=None),
            ),
            tooltip=["tensor:N", "position:O", "status:N", "shape per layer:N"],
        )
        .properties(width=cell * max(step, source_len), height=cell * 4)
    )
    per_token = 2 * c.num_layers * c.d_model
    chart = grid.properties(
        title={
            "text": f"Key/value cache at decoding step {step}",
            "subtitle": [
                f"the new token's query attends to {step} cached keys; per layer, per head d_k = {c.d_k}",
                (
                    f"self-attention cache grows by 2 × {c.num_layers} layers × {c.d_model} = "
                    f"{per_token:,} numbers per token"
                ),
            ],
        }
    )
    description = (
        f"Diagram: the key/value cache during decoding, at step {step}. For each decoder layer, the self-attention "
        f"keys and values of the {step - 1} earlier positions are cached and the new position's key and value are "
        f"appended, so the new query attends to {step} keys without recomputing the past; the cross-attention keys "
        f"and values of the {source_len} source positions are computed once from the encoder's output and reused "
        f"at every step. Each cache holds {shape(c.batch, c.heads, 'length', c.d_k)} per layer."
    )
    return (
        finish(chart, description).configure_axis(labelFontSize=10, titleFontSize=10).configure_legend(labelFontSize=10)
    )
