// The attention map both playground pages draw: a Vega-Lite heatmap of one head's weights.
// `rows` holds one {q, k, query, key, w} per drawn cell: the query and key positions (they order
// the axes), their labels, and the weight in percent.
"use strict";

const AttentionMap = (() => {
  function spec(rows, { title, size, keyTitle, queryTitle, description, verticalKeys = false }) {
    return {
      title,
      ...(description ? { description } : {}),
      data: { values: rows },
      mark: "rect",
      encoding: {
        x: {
          field: "key", type: "nominal", sort: { field: "k", op: "min" }, title: keyTitle,
          axis: { labelOverlap: "greedy", ...(verticalKeys ? { labelAngle: -90 } : {}) },
        },
        y: {
          field: "query", type: "nominal", sort: { field: "q", op: "min" }, title: queryTitle,
          axis: { labelOverlap: "greedy" },
        },
        color: {
          field: "w", type: "quantitative", title: "weight (%)",
          scale: { scheme: "viridis", domain: [0, 100] },
        },
        tooltip: [
          { field: "query", type: "nominal" },
          { field: "key", type: "nominal" },
          { field: "w", type: "quantitative", title: "weight (%)", format: ".1f" },
        ],
      },
      width: size,
      height: size,
      config: { legend: { orient: "bottom", gradientLength: Math.min(size, 200) } },
    };
  }

  return { spec };
})();
