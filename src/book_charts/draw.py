"""Drawing primitives for the book's diagrams: boxes, arrows and notes as one layered Vega-Lite chart.

A diagram is laid out in design units (1 unit = 1 px at the default width), with y growing upwards
like the paper's figures (inputs at the bottom). Every diagram is vector (Vega renders SVG in the
book), carries a ``description`` starting with "Diagram:" (Vega makes it the chart's aria-label), has
no action menu, and uses explicit colours so it reads the same in the light and the dark theme.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import pandas as pd

# The paper's Figure 1 palette (pastels, dark text on all of them), with distinct lightness for print.
FILL = {
    "attention": "#f8c88f",
    "norm": "#f0eca0",
    "ffn": "#aed6f1",
    "embed": "#f4b9b9",
    "positional": "#ffffff",
    "linear": "#d3c4f1",
    "softmax": "#bfe5b5",
    "op": "#e3e3e3",
    "mask": "#eab8da",
    "tensor": "#ffffff",
    "frame": "#f3f3f3",
    "cache": "#cfe0f7",
    "new": "#f8c88f",
}
TEXT = "#1f1f1f"
EDGE = "#555555"
MUTED_TEXT = "#4a4a4a"
LINK = "#1a5fb4"
HIGHLIGHT = "#c2185b"
FONT_SIZE = 11
NOTE_SIZE = 9.5
DESIGN_WIDTH = 360  # fits a 390 px phone's column; wider pages get the same drawing


@dataclass
class Box:
    """A block of the diagram: ``x0..x1`` by ``y0..y1`` in design units (y up)."""

    id: str
    label: str
    x0: float
    y0: float
    x1: float
    y1: float
    kind: str = "op"
    tooltip: dict[str, str] = field(default_factory=dict)
    href: str | None = None
    dashed: bool = False
    highlighted: bool = False
    faded: bool = False
    frame: bool = False

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass
class Arrow:
    """A polyline through ``points`` with an arrowhead at its end (none with ``head=False``)."""

    points: list[tuple[float, float]]
    dashed: bool = False
    head: bool = True
    color: str = EDGE
    href: str | None = None
    tooltip: dict[str, str] = field(default_factory=dict)
    width: float = 1.4


@dataclass
class Note:
    """Free text: edge labels (shapes), captions, links."""

    text: str
    x: float
    y: float
    align: str = "left"
    size: float = NOTE_SIZE
    color: str = MUTED_TEXT
    bold: bool = False
    href: str | None = None
    tooltip: dict[str, str] = field(default_factory=dict)


def _axis(field_name: str, extent: float, channel):
    return channel(f"{field_name}:Q", scale=alt.Scale(domain=[0, extent], nice=False, zero=False), axis=None)


def _tooltip_frame(rows: list[dict], tooltip_keys: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for key in tooltip_keys:
        if key not in frame:
            frame[key] = ""
        frame[key] = frame[key].fillna("")
    return frame


def _tooltips(keys: list[str]) -> list[alt.Tooltip]:
    return [alt.Tooltip(f"{key}:N", title=key) for key in keys]


def diagram(
    boxes: list[Box],
    arrows: list[Arrow],
    notes: list[Note],
    *,
    design_width: float,
    design_height: float,
    description: str | None,
    title: str | alt.TitleParams | None = None,
    width: float | None = None,
) -> alt.LayerChart:
    """Assemble boxes, arrows and notes into one layered chart ``width`` px wide (default: design size)."""
    width = DESIGN_WIDTH if width is None else width
    if width <= 0:
        raise ValueError(f"width must be positive (pixels); got width={width}")
    height = round(design_height * width / design_width)
    tooltip_keys: list[str] = []
    for item in [*boxes, *arrows, *notes]:
        tooltip_keys += [key for key in item.tooltip if key not in tooltip_keys]

    def X(name):
        return _axis(name, design_width, alt.X)

    def Y(name):
        return _axis(name, design_height, alt.Y)

    def X2(name):
        return alt.X2(f"{name}:Q")

    def Y2(name):
        return alt.Y2(f"{name}:Q")

    span = dict(x=X("x0"), x2=X2("x1"), y=Y("y0"), y2=Y2("y1"))  # a box or a shaft, corner to corner
    tooltip = _tooltips(tooltip_keys) if tooltip_keys else alt.Undefined

    layers: list = []  # blocks and their labels
    frame_layers: list = []  # frames behind everything
    arrow_layers: list = []  # arrow shafts: over the frames, under the blocks
    top_layers: list = []  # arrowheads and notes, over everything
    box_rows = []
    for box in boxes:
        stroke = HIGHLIGHT if box.highlighted else ("#9a9a9a" if box.frame else "#6b6b6b")
        box_rows.append(
            {
                "id": box.id,
                "label": box.label,
                "x0": box.x0,
                "x1": box.x1,
                "y0": box.y0,
                "y1": box.y1,
                "cx": box.cx,
                "cy": box.cy,
                "fill": FILL.get(box.kind, box.kind),
                "stroke": stroke,
                "stroke_width": 3.0 if box.highlighted else 1.0,
                "opacity": 0.35 if box.faded else 1.0,
                "dash": "dashed" if box.dashed else "solid",
                "highlighted": box.highlighted,
                "frame": box.frame,
                "href": box.href or "",
                **box.tooltip,
            }
        )
    if box_rows:
        frame = _tooltip_frame(box_rows, tooltip_keys)
        base = alt.Chart(frame)
        encoding = dict(
            **span,
            fill=alt.Fill("fill:N", scale=None),
            stroke=alt.Stroke("stroke:N", scale=None),
            strokeWidth=alt.StrokeWidth("stroke_width:Q", scale=None),
            fillOpacity=alt.FillOpacity("opacity:Q", scale=None),
            href=alt.Href("href:N"),
            tooltip=tooltip,
        )
        cursor = "pointer" if any(box.href for box in boxes) else "default"
        # Frames under the arrows, blocks over them (an arrow never crosses a block's label).
        for is_frame, target in ((True, frame_layers), (False, layers)):
            for dash in ("solid", "dashed"):
                if any(box.frame == is_frame and box.dashed == (dash == "dashed") for box in boxes):
                    target.append(
                        base.transform_filter((alt.datum.dash == dash) & (alt.datum.frame == is_frame))
                        .mark_rect(
                            cornerRadius=4, cursor=cursor, aria=False, strokeDash=[4, 3] if dash == "dashed" else [1, 0]
                        )
                        .encode(**encoding)
                    )
        for bold in (False, True):
            labels = base.transform_filter(
                (alt.datum.label != "") & (alt.datum.highlighted if bold else ~alt.datum.highlighted)
            ).mark_text(
                lineBreak="\n",
                fontSize=FONT_SIZE,
                color=TEXT,
                baseline="middle",
                aria=False,
                fontWeight="bold" if bold else "normal",
            )
            layers.append(
                labels.encode(
                    x=X("cx"),
                    y=Y("cy"),
                    text="label:N",
                    opacity=alt.Opacity("opacity:Q", scale=None),
                    href=alt.Href("href:N"),
                    tooltip=tooltip,
                )
            )

    segments, heads = [], []
    for number, arrow in enumerate(arrows):
        common = {
            "color": arrow.color,
            "dash": "dashed" if arrow.dashed else "solid",
            "href": arrow.href or "",
            "stroke_width": arrow.width,
            "arrow": number,
            **arrow.tooltip,
        }
        for (xa, ya), (xb, yb) in zip(arrow.points, arrow.points[1:]):
            segments.append({"x0": xa, "y0": ya, "x1": xb, "y1": yb, **common})
        if arrow.head:
            (xa, ya), (xb, yb) = arrow.points[-2], arrow.points[-1]
            angle = 0 if yb > ya else 180 if yb < ya else 90 if xb > xa else 270
            back = 3.0  # the head's centre sits 3 units before the tip
            dx = (xb > xa) - (xb < xa)
            dy = (yb > ya) - (yb < ya)
            heads.append({"x": xb - back * dx, "y": yb - back * dy, "angle": angle, **common})
    if segments:
        frame = _tooltip_frame(segments, tooltip_keys)
        arrow_layers.append(
            alt.Chart(frame)
            .mark_rule(strokeCap="round", aria=False)
            .encode(
                **span,
                color=alt.Color("color:N", scale=None),
                strokeWidth=alt.StrokeWidth("stroke_width:Q", scale=None),
                strokeDash=alt.StrokeDash(
                    "dash:N", scale=alt.Scale(domain=["solid", "dashed"], range=[[1, 0], [4, 3]]), legend=None
                ),
                href=alt.Href("href:N"),
                tooltip=tooltip,
            )
        )
    if heads:
        frame = _tooltip_frame(heads, tooltip_keys)
        top_layers.append(
            alt.Chart(frame)
            .mark_point(shape="triangle-up", filled=True, size=42, opacity=1, aria=False)
            .encode(
                x=X("x"),
                y=Y("y"),
                angle=alt.Angle("angle:Q", scale=None),
                color=alt.Color("color:N", scale=None),
                href=alt.Href("href:N"),
            )
        )
    if notes:
        rows = [
            {
                "text": note.text,
                "x": note.x,
                "y": note.y,
                "align": note.align,
                "size": note.size,
                "color": note.color,
                "weight": "bold" if note.bold else "normal",
                "href": note.href or "",
                **note.tooltip,
            }
            for note in notes
        ]
        frame = _tooltip_frame(rows, tooltip_keys)
        for (align, weight), subset in frame.groupby(["align", "weight"], sort=True):
            top_layers.append(
                alt.Chart(subset)
                .mark_text(align=align, baseline="middle", lineBreak="\n", fontWeight=weight, aria=False)
                .encode(
                    x=X("x"),
                    y=Y("y"),
                    text="text:N",
                    color=alt.Color("color:N", scale=None),
                    size=alt.Size("size:Q", scale=None),
                    href=alt.Href("href:N"),
                    tooltip=tooltip,
                )
            )

    chart = alt.layer(*frame_layers, *arrow_layers, *layers, *top_layers).properties(width=width, height=height)
    if title is not None:
        chart = chart.properties(title=title)
    if description is None:  # a panel of a larger diagram: finish() the whole
        return chart
    return finish(chart, description)


def finish(chart, description: str):
    """Give a (possibly composed) diagram its text alternative, no action menu, and its styling."""
    if not description.startswith("Diagram:"):
        raise ValueError(f"a diagram's description must start with 'Diagram:'; got {description[:40]!r}")
    return (
        chart.properties(description=description, usermeta={"embedOptions": {"actions": False}})
        .configure_view(stroke=None)
        .configure_title(anchor="start", fontSize=13, subtitleFontSize=11, color=TEXT, subtitleColor=MUTED_TEXT)
        .configure_concat(spacing=12)
    )
