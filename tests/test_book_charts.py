"""Unit tests of the chart helpers in book_charts."""

import numpy as np
import pytest
import torch

from book_charts import heatmap, tidy


def test_tidy_is_long_and_rounded():
    frame = tidy(
        torch.tensor([[0.123456, 1.0], [2.0, -0.987654]]), row="query", column="key", value="weight", decimals=2
    )
    assert list(frame.columns) == ["query", "key", "weight"]
    assert len(frame) == 4
    assert frame.loc[(frame["query"] == 0) & (frame["key"] == 0), "weight"].item() == 0.12
    assert frame.loc[(frame["query"] == 1) & (frame["key"] == 1), "weight"].item() == -0.99


def test_tidy_rounds_float32_without_float_noise():
    frame = tidy(torch.tensor([[0.84]], dtype=torch.float32), row="r", column="c", value="v", decimals=2)
    assert repr(frame["v"].item()) == "0.84"


def test_tidy_accepts_numpy_and_refuses_other_ranks():
    assert len(tidy(np.zeros((2, 3)), row="r", column="c", value="v")) == 6
    with pytest.raises(ValueError, match=r"\(2, 2, 2\)"):
        tidy(np.zeros((2, 2, 2)), row="r", column="c", value="v")


def test_heatmap_has_titles_and_tooltips():
    frame = tidy(np.eye(3), row="query", column="key", value="weight")
    spec = heatmap(frame, x="key", y="query", color="weight", title="Weights", x_title="key position").to_dict()
    assert spec["title"] == "Weights"
    assert spec["encoding"]["x"]["title"] == "key position"
    assert {tip["field"] for tip in spec["encoding"]["tooltip"]} == {"query", "key", "weight"}
    assert spec["encoding"]["color"]["scale"]["scheme"] == "viridis"


def test_diverging_heatmap_is_centred_on_zero():
    frame = tidy(np.array([[-1.0, 2.0]]), row="r", column="c", value="v")
    spec = heatmap(frame, x="c", y="r", color="v", title="t", diverging=True).to_dict()
    assert spec["encoding"]["color"]["scale"]["domainMid"] == 0


def test_js_list_is_a_vega_array_literal_that_keeps_chinese():
    from book_charts import js_list

    assert js_list([["0: Tom</w>", "1: 汤"], []]) == '[["0: Tom</w>", "1: 汤"], []]'
    assert js_list([]) == "[]"
