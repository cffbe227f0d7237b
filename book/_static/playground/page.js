// What both playground pages share (playground.js, the translator's page; poet-page.js, the
// poem page): the page's elements and messages, and the attention map, a Vega-Lite heatmap of
// one head's weights drawn with the Vega-Embed the book vendors (book/_static/vendor).

export const here = new URL(".", import.meta.url); // .../_static/playground/

export const element = (id) => document.getElementById(id);

// A message (an error, or what the reader must change) in element `id`, hidden when empty.
export function say(id, text) {
  const message = element(id);
  message.textContent = text;
  message.hidden = !text;
}

export const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

export function escapeHtml(text) {
  return text.replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c],
  );
}

// <option>s 0 .. count - 1, for the layer and head menus.
export const numberOptions = (count) =>
  Array.from({ length: count }, (_, i) => `<option value="${i}">${i}</option>`).join("");

// The heatmap's Vega-Lite spec. `rows` holds one {q, k, query, key, w} per drawn cell: the query
// and key positions (they order the axes), their labels, and the weight in percent.
export function attentionSpec(rows, options) {
  const { title, size, keyTitle, queryTitle, description, verticalKeys = false } = options;
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

// Draws the attention map (attentionSpec's rows and options) in `container`, replacing the one
// drawn before; a drawing overtaken by a newer one is dropped. Once drawn, `marks(number)` (the
// drawing's number) is written into the container's data attributes (the browser tests wait on
// them). A promise, rejected if Vega-Embed fails.
const charts = new WeakMap(); // container -> {latest: the newest drawing's number, view}
export function drawAttentionMap(container, rows, options, marks) {
  if (!charts.has(container)) charts.set(container, { latest: 0, view: null });
  const chart = charts.get(container);
  const drawing = ++chart.latest;
  const spec = attentionSpec(rows, options);
  return vegaEmbed(container, spec, { mode: "vega-lite", actions: false, renderer: "svg" }).then(
    (result) => {
      if (drawing !== chart.latest) return result.view.finalize(); // a newer drawing has started
      if (chart.view) chart.view.finalize();
      chart.view = result.view;
      Object.assign(container.dataset, marks(drawing));
    },
  );
}
