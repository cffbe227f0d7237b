// What both playground pages share (playground.js, the translator's page; poet-page.js, the
// poem page): the Web Worker that runs the models (ModelWorker), a pause in typing (debounce),
// the page's elements and messages, and the attention map, a heatmap of one head's weights.

export const here = new URL(".", import.meta.url); // .../_static/playground/

export const element = (id) => document.getElementById(id);

// A message (an error, or what the reader must change) in element `id`, hidden when empty.
export function say(id, text) {
  const message = element(id);
  message.textContent = text;
  message.hidden = !text;
}

// --- The models run in worker.js, off the page's thread ----------------------------------------
// request(op, args, onProgress) posts one job and returns the promise of its result; cancel()
// stops every job at once (the worker is ended, and the next request starts a new one, which
// loads its models again from the Cache API) and rejects their promises with a Cancelled error.
export class Cancelled extends Error {}

export class ModelWorker {
  constructor() {
    this.worker = null;
    this.jobs = new Map(); // id -> {resolve, reject, onProgress}
    this.next = 0;
  }

  get busy() {
    return this.jobs.size > 0;
  }

  request(op, args, onProgress = null) {
    if (!this.worker) this.start();
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.jobs.set(id, { resolve, reject, onProgress });
      this.worker.postMessage({ id, op, args });
    });
  }

  start() {
    this.worker = new Worker(new URL("worker.js", here), { type: "module" });
    this.worker.addEventListener("message", ({ data }) => {
      const job = this.jobs.get(data.id);
      if (!job) return; // cancelled
      if ("progress" in data) return job.onProgress?.(data.progress);
      this.jobs.delete(data.id);
      if ("error" in data) job.reject(new Error(data.error));
      else job.resolve(data.result);
    });
    this.worker.addEventListener("error", (event) => {
      event.preventDefault();
      this.fail(new Error(event.message || "the model's worker failed to start"));
    });
  }

  fail(error) {
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    this.worker?.terminate();
    this.worker = null;
    for (const job of jobs) job.reject(error);
  }

  cancel() {
    this.fail(new Cancelled("cancelled"));
  }
}

// `action` once the calls stop for `ms` milliseconds: the reader has paused.
export function debounce(action, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => action(...args), ms);
  };
}

// --- The distribution of one step, as bars -----------------------------------------------------
// `kept`: [{id, p}] most probable first (gpt.js's distribution); the first `BARS` get a bar each,
// an <li> with data-token, data-probability (the probability in the distribution the token was
// drawn or chosen from) and, on the token written, data-chosen; the same figures as text for
// screen readers. The written token, if it ranks lower, gets its bar after them (its rank
// named), and the rest are summed in one last line (data-rest: how many; data-probability:
// their sum), so that what is shown adds up to 1. `label(id)` names a token, `noun` counts
// them; `prefix` names the page's CSS classes. Options: `plain`, {id: p} at temperature 1 (a
// dashed outline over each bar, data-plain), and `force`, the step (counted from 1) whose
// token a click on a bar forces: each token is then a button (data-force, its id) that decodes
// on from that token.
export const BARS = 10;

export function barsHtml(kept, label, chosen, prefix,
  { plain = null, force = null, noun = "token" } = {}) {
  const rank = kept.findIndex(({ id }) => id === chosen);
  const shown = kept.slice(0, BARS).concat(rank >= BARS ? [kept[rank]] : []);
  const plainOf = (id) => plain?.[id] ?? 0;
  const top = Math.max(shown.length ? shown[0].p : 1, ...shown.map(({ id }) => plainOf(id)));
  const bars = shown
    .map(({ id, p }) => {
      const mark = id === chosen;
      const percent = (100 * p).toFixed(p < 0.001 ? 3 : 1);
      const name = escapeHtml(label(id));
      const token = force === null || mark
        ? `<span class="${prefix}-bar-token">${name}</span>`
        : `<button type="button" class="${prefix}-bar-token bar-force" data-force="${id}" ` +
          `aria-label="force ${name} at step ${force} and decode on">${name}</button>`;
      const ghost = plain
        ? `<span class="bar-plain" style="width:${((70 * plainOf(id)) / top).toFixed(1)}%" ` +
          `title="at temperature 1: ${(100 * plainOf(id)).toFixed(1)}%"></span>`
        : "";
      const chosenText = !mark ? "" : rank >= BARS ? ` (chosen, ${ordinal(rank + 1)})` : " (chosen)";
      return (
        `<li data-token="${name}" data-probability="${p}"` +
        (plain ? ` data-plain="${plainOf(id)}"` : "") +
        `${mark ? ` data-chosen class="${prefix}-chosen"` : ""}>${token}` +
        `<span class="bar-track">${ghost}` +
        `<span class="${prefix}-bar" style="width:${((70 * p) / top).toFixed(1)}%"></span></span>` +
        `<span class="${prefix}-bar-p">${percent}%${chosenText}</span></li>`
      );
    })
    .join("");
  const others = kept.length - shown.length;
  if (others === 0) return bars;
  const rest = kept.filter((_, i) => i >= BARS && i !== rank).reduce((sum, { p }) => sum + p, 0);
  return bars + `<li class="bars-rest" data-rest="${others}" data-probability="${rest}">` +
    `the other ${counted(others, noun)}: ${(100 * rest).toFixed(1)}% together</li>`;
}

// "1st", "2nd", "23rd", "11th": a rank, in English.
export function ordinal(number) {
  const tens = number % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[number % 10] ?? "th");
  return `${number}${suffix}`;
}

// "1 token", "2 tokens": a count and its noun, in English.
export const counted = (count, noun, plural = `${noun}s`) =>
  `${count.toLocaleString("en")} ${count === 1 ? noun : plural}`;

// A box that scrolls sideways (a wide table on a phone): keyboard users reach it with Tab and
// scroll it with the arrow keys (tabindex 0), and screen readers hear its name (`label`). Its
// caption is outside the box, above it, so it is never cut at the box's edge.
export function scrollBox(caption, inner, label) {
  return (
    `<p class="table-caption">${caption}</p>` +
    `<div class="scroll-box" tabindex="0" role="region" aria-label="${escapeHtml(label)}">` +
    `${inner}</div>`
  );
}

// The tokens of one output are one Tab stop (a roving tabindex): the arrow keys, Home and End
// move along them. `tokens(container)` after each redraw; `arrowKeys(container, selector)` once.
export function tokens(container, selector) {
  const items = [...container.querySelectorAll(selector)];
  items.forEach((item, i) => {
    item.tabIndex = i === 0 ? 0 : -1;
  });
}

export function arrowKeys(container, selector) {
  container.addEventListener("focusin", (event) => {
    const item = event.target.closest?.(selector);
    if (!item) return;
    for (const other of container.querySelectorAll(selector)) other.tabIndex = -1;
    item.tabIndex = 0;
  });
  container.addEventListener("keydown", (event) => {
    const item = event.target.closest?.(selector);
    if (!item) return;
    const items = [...container.querySelectorAll(selector)];
    const at = items.indexOf(item);
    const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1,
      Home: 0, End: items.length - 1 }[event.key];
    if (to === undefined || !items[to]) return;
    event.preventDefault();
    items[to].focus();
  });
}

// The page scrolls, if it must, so that `target` is in view (the distribution of a clicked
// token, below the fold on a phone); a target taller than the screen shows its top.
export function bringIntoView(target) {
  const box = target.getBoundingClientRect();
  if (box.top >= 0 && box.bottom <= innerHeight) return;
  target.scrollIntoView({ block: box.height > innerHeight ? "start" : "nearest" });
}

// --- Attention, unfolded: one query's scores, mask and weights ---------------------------------
// For one query position of one head: each key's scaled score q·k / sqrt(d_k) (chapter 2), the
// mask (chapter 6: look-ahead; one sentence has no padding), and the weight, the softmax of the
// scores left visible (chapter 2; the heads side by side, chapter 3). `scores` and `weights`:
// the query's row of the head's maps (scores -Infinity where masked); `keys`: their labels;
// `maskName`: what hides a key ("look-ahead"), or null for a map with no mask.
export function drillDownHtml(keys, scores, weights, { query, maskName, what }) {
  const rows = keys.map((key, k) => {
    const masked = scores[k] === -Infinity;
    const weight = weights[k];
    return (
      `<tr data-key="${k}" data-score="${scores[k]}" data-masked="${masked ? 1 : 0}" ` +
      `data-weight="${weight}"><td>${escapeHtml(key)}</td>` +
      `<td>${masked ? "—" : scores[k].toFixed(3)}</td>` +
      `<td>${masked ? "−∞" : "0"}</td>` +
      `<td><span class="drill-bar" style="width:${(40 * weight).toFixed(1)}px"></span>` +
      `${(100 * weight).toFixed(1)}%</td></tr>`
    );
  });
  const mask = maskName
    ? `chapter 6's ${maskName} mask adds −∞ to the keys it hides`
    : "no mask (one sentence: no padding to hide)";
  const caption =
    `${escapeHtml(what)}, query ${escapeHtml(query)}: score = q·k / √d_k (chapter 2), then ` +
    `${mask}, then softmax (chapter 2) gives the weights, which sum to 100%`;
  const table =
    '<table class="drill"><thead><tr><th scope="col">key</th>' +
    '<th scope="col">q·k/√d_k</th><th scope="col">+ mask</th>' +
    '<th scope="col">weight</th></tr></thead>' +
    `<tbody>${rows.join("")}</tbody></table>`;
  return scrollBox(caption, table, `scores, mask and weights of query ${query}`);
}

// --- The value side: weight × value, summed, is the head's output; W^O joins the heads ------
// For the same query and head: each key's value vector v (the head's d_k columns of V), the
// weight times it, their sum (the head's output: its d_k columns of the merged heads), and the
// attention's output, the merged heads times W^O plus its bias (chapter 3). `values`: the layer's
// {V (keys, d_model), merged (queries, d_model), output (queries, d_model)} (core.js); `q`, the
// query's row; `head`, `heads`. Figures: the first SHOWN of each vector; the whole vectors in
// data-value (per key), data-head-output and data-output (JSON).
const SHOWN = 3;
const vector = (values, digits = 2) =>
  `[${values.slice(0, SHOWN).map((v) => v.toFixed(digits)).join(", ")}${
    values.length > SHOWN ? ", …" : ""}]`;

export function valueSideHtml(keys, weights, values, { q, head, heads, query }) {
  const { V, merged, output } = values;
  const dModel = V.cols;
  const dK = dModel / heads;
  const slice = (m, row) => Array.from(m.data.subarray(row * m.cols + head * dK,
    row * m.cols + (head + 1) * dK));
  const rows = keys.map((key, k) => {
    const v = slice(V, k);
    const w = weights[k];
    return (
      `<tr data-key="${k}" data-weight="${w}" data-value="${JSON.stringify(v)}">` +
      `<td>${escapeHtml(key)}</td><td>${(100 * w).toFixed(1)}%</td>` +
      `<td title="v = ${vector(v)}">${w === 0 ? "0" : vector(v.map((x) => w * x))}</td></tr>`
    );
  });
  const headOutput = slice(merged, q);
  const joined = Array.from(output.data.subarray(q * output.cols, (q + 1) * output.cols));
  const caption =
    `The value side, head ${head}, query ${escapeHtml(query)}: each key's value vector v (the ` +
    `head's ${dK} numbers; the first ${SHOWN} shown, v itself on hover) times its weight, ` +
    "summed over the keys: the head's output (chapter 2)";
  const table =
    `<table class="drill drill-values" data-head-output="${JSON.stringify(headOutput)}" ` +
    `data-output="${JSON.stringify(joined)}"><thead><tr><th scope="col">key</th>` +
    '<th scope="col">weight</th><th scope="col">weight × v</th></tr></thead>' +
    `<tbody>${rows.join("")}</tbody><tfoot><tr><th scope="row" colspan="2">Σ: ` +
    `head ${head}'s output</th><td>${vector(headOutput)}</td></tr></tfoot></table>`;
  const join =
    `<p class="table-caption">The ${heads} heads' outputs side by side make ${dModel} numbers ` +
    `(head ${head}'s are numbers ${head * dK + 1} to ${(head + 1) * dK}); times W^O ` +
    `(${dModel} × ${dModel}) plus its bias, they give the attention's output for this query ` +
    `(chapter 3): <span class="drill-output">${vector(joined)}</span>, which the residual ` +
    "connection adds to the layer's input (chapter 4).</p>";
  return scrollBox(caption, table, `the value side of query ${query}`) + join;
}

// The rows of a (queries, keys) matrix as arrays.
export const rowOf = (m, q) => Array.from(m.data.subarray(q * m.cols, (q + 1) * m.cols));

// --- The logit lens: each layer's guess at the next token -------------------------------------
// `lens[layer][step]`: [{id, p}] (transformer.js's and gpt.js's logitLens), the last layer the
// model's own output; `steps`: each column's label; `label(id)` names a token. One row per layer,
// each cell that layer's most probable next token (data-layer, data-step, data-token,
// data-probability), marked where it already agrees with the model's own.
export function lensHtml(lens, steps, label) {
  const last = lens.length - 1;
  const head = steps.map((step) => `<th scope="col">${escapeHtml(step)}</th>`).join("");
  const rows = lens.map((layer, l) => {
    const cells = layer.map(([{ id, p }], step) => {
      const agrees = id === lens[last][step][0].id;
      return (
        `<td data-layer="${l}" data-step="${step}" data-token="${escapeHtml(label(id))}" ` +
        `data-probability="${p}"${agrees ? ' class="lens-agrees"' : ""}>` +
        `${escapeHtml(label(id))} <small>${(100 * p).toFixed(p < 0.1 ? 1 : 0)}%</small></td>`
      );
    });
    const name = l === last ? `layer ${l} (the model's output)` : `layer ${l}`;
    return `<tr><th scope="row">${name}</th>${cells.join("")}</tr>`;
  });
  const caption =
    "Each layer's output through the final norm and the output layer: its most probable " +
    "next token (highlighted where it already agrees with the model's own)";
  const table =
    '<table class="lens">' +
    `<thead><tr><th scope="col">reads →</th>${head}</tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table>`;
  return scrollBox(caption, table, "the logit lens, one column per step");
}

// --- The page's state in the URL's hash: a link opens the page in that state -----------------
// "#task=translator&text=I+love+you&beam=4": the hash as URLSearchParams (empty without one).
export const readHash = () => new URLSearchParams(location.hash.replace(/^#/, ""));

// The hash set to `state` ({name: value}; null and undefined values left out), replacing the
// history entry: the back button leaves the page, not each change of a control.
export function writeHash(state) {
  const entries = Object.entries(state).filter(([, value]) => value != null);
  const hash = `#${new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString()}`;
  if (hash !== location.hash) history.replaceState(history.state, "", hash);
}

// A promise kept in a later task: the browser paints (and handles input) in between.
export const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

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

// --- The attention map: a heatmap drawn as one SVG -------------------------------------------
// Plain SVG, not Vega: a map of a long sentence has thousands of cells, and building them as
// one string and setting it once keeps the page's thread free (a Vega chart of the same map took
// several hundred milliseconds). `rows` holds one {q, k, query, key, w} per drawn cell: the query
// and key positions (they order the axes), their labels, and the weight in percent.

// Viridis (the colour scale of the book's charts), 0 to 1, as 9 stops linearly interpolated.
const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962",
  "#addc30", "#fde725"].map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
function viridisRgb(t) {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - i;
  return VIRIDIS[i].map((c, j) => Math.round(c + f * (VIRIDIS[i + 1][j] - c)));
}
export const viridis = (t) => `rgb(${viridisRgb(t).join(",")})`;

let measurer = null; // a canvas context, to measure label widths
function textWidth(text, font) {
  measurer ??= document.createElement("canvas").getContext("2d");
  measurer.font = font;
  return measurer.measureText(text).width;
}

// A label cut to `max` pixels, with an ellipsis.
function fit(text, max, font) {
  if (textWidth(text, font) <= max) return text;
  let cut = [...text];
  while (cut.length > 1 && textWidth(`${cut.join("")}…`, font) > max) cut = cut.slice(0, -1);
  return `${cut.join("")}…`;
}

// Maps of more cells than this are drawn as one image (cellsImage), not one <rect> each.
const CELLS_AS_RECTS = 1500;

// The cells as a PNG data URL, one pixel each (query q: row q, key k: column k).
function cellsImage(rows, nq, nk) {
  const canvas = document.createElement("canvas");
  [canvas.width, canvas.height] = [nk, nq];
  const context = canvas.getContext("2d");
  const image = context.createImageData(nk, nq);
  for (const { q, k, w } of rows) {
    const rgb = viridisRgb(w / 100);
    image.data.set([...rgb, 255], 4 * (q * nk + k));
  }
  context.putImageData(image, 0, 0);
  return canvas.toDataURL();
}

// The heatmap's SVG text: options {title, description, size (the map's width in px), keyTitle,
// queryTitle}. Labels that would overlap are thinned out (every n-th is kept).
export function heatmapSvg(rows, options) {
  const { title, description = title, size, keyTitle, queryTitle } = options;
  const queries = [];
  const keys = [];
  for (const { q, k, query, key } of rows) {
    queries[q] = query;
    keys[k] = key;
  }
  const [nq, nk] = [queries.length, keys.length];
  const font = "11px sans-serif";
  const cell = Math.max(2, Math.min(28, size / Math.max(nq, nk, 1)));
  const labelMax = Math.min(160, size * 0.45);
  const queryLabels = queries.map((label) => fit(label ?? "", labelMax, font));
  const keyLabels = keys.map((label) => fit(label ?? "", labelMax, font));
  const left = 18 + Math.ceil(Math.max(0, ...queryLabels.map((l) => textWidth(l, font)))) + 6;
  const below = Math.ceil(Math.max(0, ...keyLabels.map((l) => textWidth(l, font)))) + 6;
  const top = 22;
  const [width, height] = [nk * cell, nq * cell];
  const legendY = top + height + below + 20;
  const legendText = "weight (%)";
  const legendWidth = 168 + Math.ceil(textWidth(legendText, font)) + 4;
  const total = { w: Math.max(left + width + 4, left + legendWidth), h: legendY + 34 };
  const every = Math.ceil(12 / cell); // a label per 12 px at most
  const parts = [];
  if (rows.length <= CELLS_AS_RECTS) {
    // One rectangle per cell, each with its tooltip.
    for (const { q, k, query, key, w } of rows) {
      parts.push(
        `<rect x="${left + k * cell}" y="${top + q * cell}" width="${cell}" height="${cell}" ` +
          `fill="${viridis(w / 100)}"><title>${escapeHtml(`${query} → ${key}: ${w}%`)}` +
          "</title></rect>",
      );
    }
  } else {
    // A long input's map (thousands of cells): one pixel per cell on a canvas, shown as one
    // image scaled up without smoothing. Parsing thousands of <rect>s held the page's thread
    // for 200 ms; the image takes a few.
    parts.push(
      `<image x="${left}" y="${top}" width="${width}" height="${height}" ` +
        `preserveAspectRatio="none" style="image-rendering:pixelated" ` +
        `href="${cellsImage(rows, nq, nk)}"/>`,
    );
  }
  queryLabels.forEach((label, q) => {
    if (q % every) return;
    const y = top + (q + 0.5) * cell;
    parts.push(`<text x="${left - 4}" y="${y}" text-anchor="end" dominant-baseline="middle">` +
      `${escapeHtml(label)}</text>`);
  });
  keyLabels.forEach((label, k) => {
    if (k % every) return;
    const x = left + (k + 0.5) * cell;
    const y = top + height + 4;
    parts.push(`<text transform="translate(${x},${y}) rotate(-90)" text-anchor="end" ` +
      `dominant-baseline="middle">${escapeHtml(label)}</text>`);
  });
  const stops = VIRIDIS.map((_, i) => {
    const t = i / (VIRIDIS.length - 1);
    return `<stop offset="${t}" stop-color="${viridis(t)}"/>`;
  }).join("");
  parts.push(
    `<text x="0" y="14" font-weight="bold">${escapeHtml(title)}</text>`,
    `<text transform="translate(10,${top + height / 2}) rotate(-90)" text-anchor="middle">` +
      `${escapeHtml(queryTitle)}</text>`,
    `<text x="${left + width / 2}" y="${legendY - 6}" text-anchor="middle">` +
      `${escapeHtml(keyTitle)}</text>`,
    `<defs><linearGradient id="viridis-legend">${stops}</linearGradient></defs>`,
    `<rect x="${left}" y="${legendY + 4}" width="160" height="10" fill="url(#viridis-legend)"/>`,
    `<text x="${left}" y="${legendY + 28}">0</text>`,
    `<text x="${left + 160}" y="${legendY + 28}" text-anchor="end">100</text>`,
    `<text x="${left + 168}" y="${legendY + 13}">${legendText}</text>`,
  );
  return (
    `<svg class="marks" xmlns="http://www.w3.org/2000/svg" role="img" ` +
    `aria-label="${escapeHtml(description)}" width="${total.w}" height="${total.h}" ` +
    `viewBox="0 0 ${total.w} ${total.h}" font-family="sans-serif" font-size="11" ` +
    `fill="currentColor" style="max-width:100%;height:auto">${parts.join("")}</svg>`
  );
}

// Draws the attention map (heatmapSvg's rows and options) in `container`, replacing the one
// drawn before. Once drawn, `marks(number)` (the drawing's number) is written into the
// container's data attributes (the browser tests wait on them). A promise, as drawing may one
// day be asynchronous again.
const drawings = new WeakMap(); // container -> the number of its latest drawing
export function drawAttentionMap(container, rows, options, marks) {
  const drawing = (drawings.get(container) ?? 0) + 1;
  drawings.set(container, drawing);
  container.innerHTML = heatmapSvg(rows, options);
  Object.assign(container.dataset, marks(drawing));
  return Promise.resolve();
}
