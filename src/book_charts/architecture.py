"""The architecture map: the encoder-decoder of the paper's Figure 1, with a "you are here" highlight.

``architecture()`` draws the whole model (the intro shows it); ``architecture(highlight=3)`` or
``architecture(highlight="multi_head_attention")`` emphasises the blocks chapter 3 builds. Every block
links to the chapter that builds it (Vega ``href``) and its tooltip gives its input and output shapes
and its parameter count, computed from a :class:`~book_charts.config.ModelConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping

from book_charts.config import ModelConfig, as_config, parameter_counts, shape
from book_charts.draw import EDGE, HIGHLIGHT, LINK, Arrow, Box, Note, diagram

# The chapters, in order; a block's href is its chapter's page, relative to the book's pages.
CHAPTERS = {
    1: "01_positional_encoding",
    2: "02_scaled_dot_product_attention",
    3: "03_multi_head_attention",
    4: "04_add_and_norm",
    5: "05_feed_forward",
    6: "06_masking",
    7: "07_cross_attention",
    8: "08_linear_and_softmax",
    9: "09_full_transformer",
    10: "10_decoding",
    11: "11_inside_the_model",
    12: "12_search_matters",
    13: "13_tokens_from_text",
    14: "14_translating",
    15: "15_writing_poems",
    16: "16_modern_decoder",
    17: "17_past_one_machine",
    18: "18_what_training_costs",
    19: "19_instructions_and_lora",
    20: "20_preferences_and_rewards",
}
CHAPTER_TITLES = {
    1: "embeddings and positional encoding",
    2: "scaled dot-product attention",
    3: "multi-head attention",
    4: "Add & Norm",
    5: "the feed-forward network and the encoder layer",
    6: "masking",
    7: "cross-attention and the decoder layer",
    8: "the final linear layer and softmax",
    9: "the whole Transformer",
    10: "decoding, one token at a time",
    11: "what the attention heads learned",
    12: "when search matters: greedy against beam search",
    13: "tokens from text: subwords, characters, batches",
    14: "translating English into Chinese",
    15: "from translator to GPT: writing Tang poems",
    16: "from 2017 to today's models: RMSNorm, RoPE, SwiGLU, GQA",
    17: "past one machine: the translator on several processes",
    18: "what training costs: FLOPs, the machine's peak, memory",
    19: "teaching the poet: instructions and LoRA",
    20: "preferences and a verifiable reward: DPO and GRPO",
}
ATTENTION = ("enc_attn", "dec_self_attn", "dec_cross_attn")
NORMS = ("enc_norm1", "enc_norm2", "dec_norm1", "dec_norm2", "dec_norm3")
DECODER = (
    "dec_embed",
    "dec_pos",
    "dec_self_attn",
    "dec_norm1",
    "dec_cross_attn",
    "dec_norm2",
    "dec_ffn",
    "dec_norm3",
    "decoder",
)
# The parts that can be highlighted: the blocks (and links) each one lights up.
PARTS: dict[str, tuple[str, ...]] = {
    "positional_encoding": ("enc_embed", "dec_embed", "enc_pos", "dec_pos"),
    "scaled_dot_product_attention": ATTENTION,
    "multi_head_attention": ATTENTION,
    "add_and_norm": NORMS,
    "feed_forward": ("enc_ffn", "dec_ffn", "encoder"),
    "masking": ("dec_self_attn", "enc_attn", "dec_cross_attn"),
    "cross_attention": ("dec_cross_attn", "decoder"),
    "linear_and_softmax": ("linear", "softmax"),
    "full_transformer": (),  # filled in below: everything
    "decoding": (*DECODER, "linear", "softmax", "loop"),
    "inside_the_model": ATTENTION,
    "search_matters": (*DECODER, "linear", "softmax", "loop"),
    "tokens_from_text": ("enc_embed", "dec_embed"),
    "translating": (),  # filled in below: everything
    # a GPT: the decoder without cross-attention, and the output layer
    "writing_poems": (
        "dec_embed",
        "dec_pos",
        "dec_self_attn",
        "dec_norm1",
        "dec_ffn",
        "dec_norm3",
        "decoder",
        "linear",
        "softmax",
        "loop",
    ),
    # today's decoder-only block: what changed since GPT-2 (positions, attention,
    # norms, feed-forward, the output layer)
    "modern_decoder": ("dec_pos", "dec_self_attn", "dec_norm1", "dec_ffn", "dec_norm3", "linear"),
    "past_one_machine": (),  # filled in below: everything, copied into every process
    "what_training_costs": (),  # filled in below: everything, each product a cost
    # the poet's linear layers carry the adapters; the output layer learns the instructions
    "instructions_and_lora": ("dec_self_attn", "dec_ffn", "decoder", "linear"),
    # the whole poet is trained on whole poems' log-probabilities, read at the output
    "preferences_and_rewards": ("decoder", "linear", "softmax"),
}
CHAPTER_PARTS = {number: stem.split("_", 1)[1] for number, stem in CHAPTERS.items()}


def chapter_page(number: int) -> str:
    """The built page of chapter ``number``, relative to another chapter's page."""
    return f"{CHAPTERS[number]}.html"


def resolve_highlight(highlight) -> tuple[str | None, int | None]:
    """``None``, a part name, a chapter number or a chapter's file stem -> (part, chapter number)."""
    if highlight is None:
        return None, None
    if isinstance(highlight, int) and not isinstance(highlight, bool):
        if highlight in CHAPTERS:
            return CHAPTER_PARTS[highlight], highlight
    elif isinstance(highlight, str):
        stem = highlight.removesuffix(".ipynb").removesuffix(".html").rsplit("/", 1)[-1]
        for number, chapter in CHAPTERS.items():
            if stem in (chapter, CHAPTER_PARTS[number]):
                return CHAPTER_PARTS[number], number
    raise ValueError(
        f"highlight must be None, a chapter number in {sorted(CHAPTERS)}, a chapter file stem or one of "
        f"{sorted(PARTS)}; got highlight={highlight!r}"
    )


def _fmt(count: int) -> str:
    return f"{count:,}"


def architecture(
    highlight: int | str | None = None,
    config: ModelConfig | Mapping | None = None,
    *,
    width: float | None = None,
):
    """The encoder-decoder of the paper's Figure 1, with the part of ``highlight`` emphasised.

    ``highlight``: a chapter number (``3``), a chapter stem (``"03_multi_head_attention"``), a part name
    (``"multi_head_attention"``, see ``PARTS``) or ``None`` for the whole map. ``config`` (default: the
    paper's base model) gives the shapes and parameter counts in the tooltips. ``width`` in pixels
    (default 360, which fits a phone).
    """
    part, chapter = resolve_highlight(highlight)
    config = as_config(config)
    counts = parameter_counts(config)
    n = config.num_layers
    d = config.d_model
    src = shape(config.batch, config.source_len, d)
    tgt = shape(config.batch, config.target_len, d)

    def per_layer(count: int) -> str:
        return f"{_fmt(count)} per layer (×{n} layers: {_fmt(count * n)})"

    embedding = _fmt(counts["embedding"])
    attention, norm, ffn, encoder_layer, decoder_layer = (
        per_layer(counts[key]) for key in ("attention", "layer_norm", "feed_forward", "encoder_layer", "decoder_layer")
    )
    source_ids = shape(config.batch, config.source_len) + " token ids"
    target_ids = shape(config.batch, config.target_len) + " token ids"
    logits = shape(config.batch, config.target_len, config.target_vocab)
    self_attention = (
        f"Multi-head self-attention ({config.heads} heads of scaled dot-product attention, d_k={config.d_k})"
    )
    masked = "Masked multi-head self-attention (look-ahead mask: no peeking at later positions)"
    cross = "Cross-attention: queries from the decoder, keys and values from the encoder output"
    position_wise = f"Position-wise feed-forward ({d} → {config.d_ff} → {d}, ReLU)"
    repeated = f"repeated N={n} times (independent weights)"
    linear = f"Linear: d_model → vocabulary ({d} → {config.target_vocab})"
    if config.tie_weights:  # one table for both embeddings and the final linear layer
        input_embedding = embedding + " (one table shared by both embeddings and the final linear layer)"
        output_embedding = "shared with the input embedding"
        linear_parameters = (
            f"{_fmt(counts['generator'] - config.target_vocab * d)} (bias; the weight is the tied embedding)"
        )
    else:
        input_embedding = output_embedding = embedding
        linear_parameters = _fmt(counts["generator"])
    tips = {  # block: (name, input, output, parameters, chapter)
        "enc_embed": ("Input embedding", source_ids, src, input_embedding, 1),
        "dec_embed": ("Output embedding", target_ids, tgt, output_embedding, 1),
        "enc_pos": ("Positional encoding (added)", src, src, "0 (fixed sinusoids)", 1),
        "dec_pos": ("Positional encoding (added)", tgt, tgt, "0 (fixed sinusoids)", 1),
        "enc_attn": (self_attention, f"Q = K = V: {src}", src, attention, 3),
        "enc_norm1": ("Add & Norm: LayerNorm(x + Sublayer(x))", f"x and Sublayer(x): {src}", src, norm, 4),
        "enc_ffn": (position_wise, src, src, ffn, 5),
        "enc_norm2": ("Add & Norm", f"x and Sublayer(x): {src}", src, norm, 4),
        "dec_self_attn": (masked, f"Q = K = V: {tgt}", tgt, attention, 6),
        "dec_norm1": ("Add & Norm", f"x and Sublayer(x): {tgt}", tgt, norm, 4),
        "dec_cross_attn": (cross, f"Q {tgt}; K = V {src}", tgt, attention, 7),
        "dec_norm2": ("Add & Norm", f"x and Sublayer(x): {tgt}", tgt, norm, 4),
        "dec_ffn": (position_wise, tgt, tgt, ffn, 5),
        "dec_norm3": ("Add & Norm", f"x and Sublayer(x): {tgt}", tgt, norm, 4),
        "linear": (linear, tgt, logits + " logits", linear_parameters, 8),
        "softmax": ("Softmax over the vocabulary", logits + " logits", logits + " probabilities", "0", 8),
        "encoder": (f"Encoder layer, {repeated}", src, src, encoder_layer, 5),
        "decoder": (f"Decoder layer, {repeated}", f"{tgt} and encoder output {src}", tgt, decoder_layer, 7),
    }

    # Layout, in design units (y up, like the paper's Figure 1).
    ex0, ex1, elane = 30, 166, 19  # encoder blocks and their residual lane
    dx0, dx1, dlane = 210, 346, 199  # decoder blocks and their residual lane
    ecx, dcx = (ex0 + ex1) / 2, (dx0 + dx1) / 2
    rows = {
        "encoder": (8, 94, 172, 258, "frame", ""),
        "decoder": (188, 94, 352, 332, "frame", ""),
        "enc_embed": (ex0, 24, ex1, 46, "embed", "Input embedding"),
        "enc_pos": (ex0, 58, ex1, 80, "positional", "+ Positional encoding"),
        "enc_attn": (ex0, 110, ex1, 142, "attention", "Multi-head\nattention"),
        "enc_norm1": (ex0, 152, ex1, 170, "norm", "Add & Norm"),
        "enc_ffn": (ex0, 184, ex1, 212, "ffn", "Feed forward"),
        "enc_norm2": (ex0, 222, ex1, 240, "norm", "Add & Norm"),
        "dec_embed": (dx0, 24, dx1, 46, "embed", "Output embedding"),
        "dec_pos": (dx0, 58, dx1, 80, "positional", "+ Positional encoding"),
        "dec_self_attn": (dx0, 110, dx1, 142, "attention", "Masked multi-head\nattention"),
        "dec_norm1": (dx0, 152, dx1, 170, "norm", "Add & Norm"),
        "dec_cross_attn": (dx0, 184, dx1, 216, "attention", "Cross-attention\n(multi-head)"),
        "dec_norm2": (dx0, 226, dx1, 244, "norm", "Add & Norm"),
        "dec_ffn": (dx0, 258, dx1, 286, "ffn", "Feed forward"),
        "dec_norm3": (dx0, 296, dx1, 314, "norm", "Add & Norm"),
        "linear": (dx0, 346, dx1, 366, "linear", "Linear"),
        "softmax": (dx0, 376, dx1, 396, "softmax", "Softmax"),
    }
    lit = set(PARTS[part]) if part else set()
    if part in ("full_transformer", "translating", "past_one_machine", "what_training_costs"):
        lit = {*rows, "loop"}

    def tooltip(block_id):
        name, given, produced, params, number = tips[block_id]
        return {
            "block": name,
            "input": given,
            "output": produced,
            "parameters": params,
            "chapter": f"{number}: {CHAPTER_TITLES[number]}",
        }

    def state(block_id):
        return dict(highlighted=block_id in lit, faded=bool(lit) and block_id not in lit)

    boxes = [
        Box(
            block_id,
            label,
            x0,
            y0,
            x1,
            y1,
            kind,
            tooltip(block_id),
            chapter_page(tips[block_id][4]),
            frame=kind == "frame",
            **state(block_id),
        )
        for block_id, (x0, y0, x1, y1, kind, label) in rows.items()
    ]
    # Highlighted blocks are drawn last, so their thick outline is never covered by a neighbour.
    boxes.sort(key=lambda box: (not box.frame, box.highlighted))

    def trunk(column_x, spans):
        return [Arrow([(column_x, low), (column_x, high)]) for low, high in spans]

    arrows = [
        *trunk(ecx, [(16, 24), (46, 58), (80, 110), (142, 152), (170, 184), (212, 222)]),
        *trunk(
            dcx,
            [
                (16, 24),
                (46, 58),
                (80, 110),
                (142, 152),
                (170, 184),
                (216, 226),
                (244, 258),
                (286, 296),
                (314, 346),
                (366, 376),
                (396, 406),
            ],
        ),
    ]
    residual = {"block": "Residual connection: the sub-layer's input is added to its output"}
    for lane, center, x_in, spans in (
        (elane, ecx, ex0, [(100, 161), (177, 231)]),
        (dlane, dcx, dx0, [(100, 161), (177, 235), (251, 305)]),
    ):
        for start, end in spans:
            arrows.append(Arrow([(center, start), (lane, start), (lane, end), (x_in, end)], tooltip=residual))
    memory = {"block": f"Encoder output (memory) {src}: the keys and values of every decoder layer's cross-attention"}
    arrows.append(
        Arrow(
            [(ecx, 240), (ecx, 272), (180, 272), (180, 194), (dx0, 194)],
            width=2.0,
            color=HIGHLIGHT if "dec_cross_attn" in lit and part == "cross_attention" else EDGE,
            tooltip=memory,
            href=chapter_page(7),
        )
    )
    loop = {"block": "Decoding: the chosen next token is appended to the decoder's input, one step at a time"}
    arrows.append(
        Arrow(
            [(dx1 - 22, 412), (356, 412), (356, 8), (dcx + 52, 8)],
            dashed=True,
            tooltip=loop,
            color=HIGHLIGHT if "loop" in lit else EDGE,
            href=chapter_page(10),
        )
    )

    notes = [
        Note(
            "Inputs",
            ecx,
            9,
            "center",
            10.5,
            tooltip={"block": f"Source token ids {shape(config.batch, config.source_len)}"},
        ),
        Note(
            "Outputs (shifted right)",
            dcx,
            9,
            "center",
            10.5,
            tooltip={"block": f"Target token ids {shape(config.batch, config.target_len)}, starting with <bos>"},
        ),
        Note("Output probabilities", dcx - 18, 413, "center", 10.5),
        Note(f"{n}× encoder layer", 14, 250, "left", 10, bold=True, tooltip=tooltip("encoder"), href=chapter_page(5)),
        Note(f"{n}× decoder layer", 194, 324, "left", 10, bold=True, tooltip=tooltip("decoder"), href=chapter_page(7)),
        Note("memory (K, V)", 100, 281, "left", 9.5, tooltip=memory),
    ]
    links = [
        (9, "Ch. 9: the whole model"),
        (2, "Ch. 2: attention inside each head"),
        (10, "Ch. 10: decoding (dashed loop)"),
        (11, "Ch. 11: what it learned"),
        (12, "Ch. 12: when search matters"),
        (13, "Ch. 13: tokens from real text"),
        (14, "Ch. 14: English to Chinese"),
        (15, "Ch. 15: a GPT writes poems"),
    ]
    own_pages = {
        16: "Ch. 16: today's models",
        17: "Ch. 17: past one machine",
        18: "Ch. 18: what training costs",
        19: "Ch. 19: teaching the poet",
        20: "Ch. 20: preferences and rewards",
    }
    if chapter in own_pages:  # shown on its own page (the other pages' stored maps stay as they are)
        links.append((chapter, own_pages[chapter]))
    for row, (number, text) in enumerate(links):
        notes.append(
            Note(
                text,
                10,
                392 - 15 * row,
                "left",
                10,
                color=HIGHLIGHT if number == chapter else LINK,
                bold=number == chapter,
                href=chapter_page(number),
                tooltip={"block": f"Chapter {number}: {CHAPTER_TITLES[number]}"},
            )
        )

    total = _fmt(counts["model"])
    where = f"Chapter {chapter}, {CHAPTER_TITLES[chapter]}" if chapter else "click a block to open its chapter"
    title = {
        "text": "The Transformer" + (": you are here" if chapter else ""),
        "subtitle": [where, f"Base model: {total} parameters; hover a block for shapes"],
    }
    lit_names = sorted({tips[b][0].split(" (")[0].split(":")[0] for b in lit if b in tips})
    description = (
        "Diagram: the Transformer's encoder-decoder architecture (the paper's Figure 1). On the left, input "
        "embedding plus positional encoding, then an encoder layer repeated "
        f"{n} times: multi-head self-attention and a feed-forward network, each followed by Add & Norm with a "
        "residual connection. On the right, output embedding plus positional encoding, then a decoder layer "
        f"repeated {n} times: masked multi-head self-attention, cross-attention over the encoder's output, and a "
        "feed-forward network, each followed by Add & Norm; then a linear layer and a softmax give output "
        "probabilities."
        + (f" Highlighted (you are here, chapter {chapter}): {', '.join(lit_names)}." if chapter else "")
    )
    return diagram(
        boxes, arrows, notes, design_width=360, design_height=420, description=description, title=title, width=width
    )
