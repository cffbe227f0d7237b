// The pieces both playground models are built of, written once: the encoder-decoder of
// transformer.js (dates, number words, the translator) and the GPT of gpt.js (the poet).
//
// Each function mirrors a piece of the companion package src/transformer_book/ and names the
// chapter that explains it. A matrix is {rows, cols, data}: data is row-major, data[r * cols + c],
// float64 (JavaScript numbers). Weights are params[name] = {shape, data: Float32Array}, named as
// in the package's state_dict, so a layer is found by its prefix ("decoder.layers.0.self_attn").

export function matrix(rows, cols) {
  return { rows, cols, data: new Float64Array(rows * cols) };
}

export function add(a, b) {
  const sum = matrix(a.rows, a.cols);
  for (let i = 0; i < sum.data.length; i++) sum.data[i] = a.data[i] + b.data[i];
  return sum;
}

export function appendRows(top, bottom) {
  if (!top) return bottom; // an empty cache
  const both = matrix(top.rows + bottom.rows, top.cols);
  both.data.set(top.data);
  both.data.set(bottom.data, top.data.length);
  return both;
}

// Row r of x as a (1, cols) matrix.
function rowOf(x, r) {
  const one = matrix(1, x.cols);
  one.data.set(x.data.subarray(r * x.cols, (r + 1) * x.cols));
  return one;
}

export function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

// The ids of the k largest values, largest first; of equal values the lower id first (as a
// stable sort of all of them would order them), in one pass: no sort of the whole vocabulary.
export function topIds(values, k) {
  const best = [];
  for (let id = 0; id < values.length; id++) {
    const value = values[id];
    if (best.length === k && !(value > values[best[k - 1]])) continue;
    let at = best.length;
    while (at > 0 && value > values[best[at - 1]]) at--;
    best.splice(at, 0, id);
    if (best.length > k) best.pop();
  }
  return best;
}

// --- Loading the exported weights ------------------------------------------------------------
// tools/export_playground.py and tools/export_poet_playground.py write a binary file and a JSON
// file: the configuration, the binary file's size and SHA-256, and each tensor's name, shape,
// offset and dtype (else the file's weights.dtype, else float32). Returns {meta, params};
// onProgress(bytesLoaded, bytesTotal), if given, is called as the weights arrive. Runs on a page
// or in a Web Worker (worker.js); the weights are kept with the Cache API (cachedBytes).
export async function loadWeights(jsonUrl, onProgress = null) {
  const url = new URL(jsonUrl, globalThis.document?.baseURI ?? globalThis.location.href);
  const meta = await (await fetchOk(url)).json();
  const { file, bytes, sha256 = null, dtype = "float32" } = meta.weights;
  const buffer = await cachedBytes(new URL(file, url), bytes, sha256, onProgress);
  const params = {};
  for (const tensor of meta.tensors) {
    params[tensor.name] = { shape: tensor.shape, data: tensorData(buffer, tensor, dtype) };
  }
  return { meta, params };
}

// The weights file, from the Cache API when an earlier visit stored it: a second visit asks the
// network for nothing. The cached copy is named by the file's SHA-256 (from its JSON file), so
// new weights are downloaded once and the old copy is deleted. Without the Cache API (a page
// not served over https or from localhost), or without a SHA-256, the file is fetched.
export const CACHE_NAME = "transformer-book-playground";
export async function cachedBytes(url, expected, sha256, onProgress = null) {
  const store = sha256 && globalThis.caches ? await caches.open(CACHE_NAME).catch(() => null) : null;
  if (!store) return fetchBytes(url, expected, onProgress);
  const key = new URL(url);
  key.search = `sha256=${sha256}`;
  const kept = await store.match(key.href);
  if (kept) {
    const buffer = await kept.arrayBuffer();
    if (buffer.byteLength === expected) {
      if (onProgress) onProgress(expected, expected);
      return buffer;
    }
  }
  const buffer = await fetchBytes(url, expected, onProgress);
  for (const old of await store.keys()) {
    if (new URL(old.url).pathname === key.pathname) await store.delete(old); // older weights
  }
  await store.put(key.href, new Response(buffer.slice(0))).catch(() => null); // full: no copy
  return buffer;
}

// A tensor's values as float32, as the package loads them.
function tensorData(buffer, { shape, offset, dtype, scales }, fileDtype) {
  const size = shape.reduce((a, b) => a * b, 1);
  switch (dtype ?? fileDtype) {
    case "float32": // offsets count float32 values
      return new Float32Array(buffer, 4 * offset, size);
    case "float16": // offsets count float16 values; widened exactly, as pretrained_poet() does
      return halves(new Uint16Array(buffer, 2 * offset, size));
    case "int8": {
      // 8 bits (offsets count bytes): row r is q * scale[r], rounded to float32 as PyTorch does.
      const q = new Int8Array(buffer, offset, size);
      const scale = new Float32Array(buffer, 4 * scales, shape[0]);
      const data = new Float32Array(size);
      const cols = size / shape[0];
      for (let i = 0; i < size; i++) data[i] = q[i] * scale[Math.floor(i / cols)];
      return data;
    }
    default:
      throw new Error(`tensor dtype ${dtype ?? fileDtype} is not supported`);
  }
}

// One float16 (1 sign bit, 5 exponent bits, 10 fraction bits) as a number, exactly.
export function halfToNumber(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24; // subnormal (and zero)
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

let halfTable = null; // all 65,536 float16 values, computed once
function halves(bits) {
  if (!halfTable) {
    halfTable = new Float32Array(65536);
    for (let b = 0; b < 65536; b++) halfTable[b] = halfToNumber(b);
  }
  const values = new Float32Array(bits.length); // bits: little-endian, as every browser's
  for (let i = 0; i < bits.length; i++) values[i] = halfTable[bits[i]];
  return values;
}

export async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response;
}

// The file at `url`, which must hold `expected` bytes; onProgress as for loadWeights.
export async function fetchBytes(url, expected, onProgress = null) {
  const buffer = await readAll(await fetchOk(url), expected, onProgress);
  if (buffer.byteLength !== expected) {
    throw new Error(`${url}: ${buffer.byteLength} bytes, expected ${expected}`);
  }
  return buffer;
}

// The response's bytes, reporting progress as they arrive.
async function readAll(response, expected, onProgress) {
  if (!onProgress || !response.body) return response.arrayBuffer();
  const reader = response.body.getReader();
  const chunks = [];
  let loaded = 0;
  onProgress(0, expected);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    onProgress(loaded, expected);
  }
  const whole = new Uint8Array(loaded);
  let at = 0;
  for (const chunk of chunks) {
    whole.set(chunk, at);
    at += chunk.length;
  }
  return whole.buffer;
}

// --- Chapter 01_positional_encoding: token embeddings plus positions ---------------------------
// The sinusoidal table of the paper (the encoder-decoder); the GPT learns its positions instead.
export function sinusoidalTable(maxLen, dModel, base = 10000) {
  const table = matrix(maxLen, dModel); // (max_len, d_model)
  for (let pos = 0; pos < maxLen; pos++) {
    for (let i = 0; i < dModel; i += 2) {
      const angle = pos * Math.exp(i * (-Math.log(base) / dModel)); // pos * w_i
      table.data[pos * dModel + i] = Math.fround(Math.sin(angle)); // even: sine (stored float32)
      table.data[pos * dModel + i + 1] = Math.fround(Math.cos(angle)); // odd: cosine
    }
  }
  return table;
}

// Row `pos` of x: lookup[token] * scale + positions[offset + pos]. The paper scales by
// sqrt(d_model); GPT-2 does not (scale 1). `positions` (max_len, d_model) flat, or null: none.
export function embed(lookup, tokens, dModel, { scale = 1, positions = null, offset = 0 } = {}) {
  const x = matrix(tokens.length, dModel); // (seq, d_model)
  tokens.forEach((token, pos) => {
    for (let c = 0; c < dModel; c++) {
      const position = positions ? positions[(offset + pos) * dModel + c] : 0;
      x.data[pos * dModel + c] = lookup[token * dModel + c] * scale + position;
    }
  });
  return x;
}

// --- Chapters 03, 05, 08: a linear layer, x W^T + b, as nn.Linear ------------------------------
// `prefix`.weight (out, in) and, if there is one, `prefix`.bias (out,).
export function linear(x, params, prefix) {
  const weight = params[`${prefix}.weight`]; // (out, in)
  const bias = params[`${prefix}.bias`];
  const [out, inFeatures] = weight.shape;
  const y = matrix(x.rows, out); // (rows, out)
  const [xs, ws, ys] = [x.data, weight.data, y.data];
  for (let r = 0; r < x.rows; r++) {
    for (let o = 0; o < out; o++) {
      let sum = bias ? bias.data[o] : 0;
      for (let i = 0; i < inFeatures; i++) sum += xs[r * inFeatures + i] * ws[o * inFeatures + i];
      ys[r * out + o] = sum;
    }
  }
  return y;
}

// --- Chapter 08_linear_and_softmax: softmax and its logarithm ----------------------------------
// e^(v - max) of values[0 .. length) into `into` (the max subtracted: no overflow); returns the
// max and the sum of the exponentials.
function exponentiate(values, length, into) {
  let max = -Infinity;
  for (let i = 0; i < length; i++) max = Math.max(max, values[i]);
  let total = 0;
  for (let i = 0; i < length; i++) total += into[i] = Math.exp(values[i] - max);
  return { max, total };
}

// softmax over values[0 .. length), in place. Nothing allowed (every value -inf): zeros, not NaN.
export function softmaxInPlace(values, length = values.length) {
  const { max, total } = exponentiate(values, length, values);
  if (max === -Infinity) values.fill(0, 0, length);
  else for (let i = 0; i < length; i++) values[i] /= total;
  return values;
}

// softmax(logits) as a new Float64Array.
export const softmax = (logits) => softmaxInPlace(Float64Array.from(logits));

// log_softmax: logits - log-sum-exp(logits).
export function logSoftmax(logits) {
  const { max, total } = exponentiate(logits, logits.length, new Float64Array(logits.length));
  const logSum = max + Math.log(total);
  return logits.map((value) => value - logSum);
}

// The output layer at one position (chapter 8): the scores over the vocabulary, (vocab,). A
// tied output layer (the GPT) passes the token embedding's prefix: its lookup is the weight.
export const outputScores = (params, prefix, hidden, row) =>
  linear(rowOf(hidden, row), params, prefix).data;

// --- Chapter 02_scaled_dot_product_attention, 03_multi_head_attention, 06_masking ----------------
// softmax(Q K^T * scale) V for each head on columns [h * d_k, (h + 1) * d_k), the heads side by
// side. `causal` (chapter 6's look-ahead mask), if not null, is the number of earlier positions
// held in a cache: query q is position causal + q and sees keys 0 .. causal + q only. Returns the
// merged heads (queries, d_model) and, with needWeights, each head's weights (queries, keys),
// zero where masked, and its scaled scores q·k * scale (queries, keys), -Infinity where masked.
function attend(Q, K, V, heads, scale, causal, needWeights) {
  const dModel = Q.cols;
  const dK = dModel / heads;
  const merged = matrix(Q.rows, dModel);
  const weights = [];
  const scoreMaps = [];
  const scores = new Float64Array(K.rows);
  for (let h = 0; h < heads; h++) {
    const first = h * dK;
    const map = needWeights ? matrix(Q.rows, K.rows) : null;
    const scored = needWeights ? matrix(Q.rows, K.rows) : null;
    if (scored) scored.data.fill(-Infinity);
    for (let q = 0; q < Q.rows; q++) {
      const visible = causal === null ? K.rows : causal + q + 1;
      const qRow = q * dModel + first;
      for (let k = 0; k < visible; k++) {
        const kRow = k * dModel + first;
        let score = 0;
        for (let i = 0; i < dK; i++) score += Q.data[qRow + i] * K.data[kRow + i];
        scores[k] = score * scale;
        if (scored) scored.data[q * K.rows + k] = scores[k];
      }
      softmaxInPlace(scores, visible);
      for (let k = 0; k < visible; k++) {
        const w = scores[k];
        if (map) map.data[q * K.rows + k] = w;
        const vRow = k * dModel + first;
        for (let i = 0; i < dK; i++) merged.data[qRow + i] += w * V.data[vRow + i];
      }
    }
    if (map) weights.push(map);
    if (scored) scoreMaps.push(scored);
  }
  return { merged, weights, scores: scoreMaps };
}

// Chapter 10's key/value cache of one attention layer, for decoding step by step: self-attention
// appends the new positions' projected keys and values; a `fixed` one (cross-attention) is filled
// once, from the encoder's output. A step appended replaces the matrices, never changes them, so
// a shallow copy ({...cache}) is a cheap copy (beam search).
export const newCache = (fixed = false) => ({ K: null, V: null, fixed });

// Chapter 03's multi-head attention on learned projections (`prefix`.query_proj, key_proj,
// value_proj, output_proj). Queries from `query`, keys and values from `keyValue` (the same
// matrix for self-attention). Options: heads; scale (default 1 / sqrt(d_k)); causal, as attend's;
// cache (newCache); needWeights. Returns {output (queries, d_model), weights: [head], scores:
// [head]} (attend's) and, with needWeights, values: {V, merged, output}.
export function multiHeadAttention(params, prefix, query, keyValue, options) {
  const { heads, scale = null, causal = null, cache = null, needWeights = true } = options;
  const dK = query.cols / heads;
  const Q = linear(query, params, `${prefix}.query_proj`); // (queries, d_model)
  let K, V;
  if (cache && cache.fixed && cache.K) {
    ({ K, V } = cache); // projected once
  } else {
    K = linear(keyValue, params, `${prefix}.key_proj`); // (keys, d_model)
    V = linear(keyValue, params, `${prefix}.value_proj`);
    if (cache) {
      [K, V] = [appendRows(cache.K, K), appendRows(cache.V, V)]; // the earlier steps' first
      Object.assign(cache, { K, V });
    }
  }
  const scaleBy = scale ?? 1 / Math.sqrt(dK);
  const { merged, weights, scores } = attend(Q, K, V, heads, scaleBy, causal, needWeights);
  const output = linear(merged, params, `${prefix}.output_proj`); // the heads joined by W^O
  // With needWeights, the value side too: the values (keys, d_model: head h in columns
  // h * d_k ..), the heads' outputs side by side (queries, d_model) and the joined output.
  const values = needWeights ? { V, merged, output } : null;
  return { output, weights, scores, values };
}

// --- Chapter 04_add_and_norm: layer norm and the residual sublayer connection ------------------
// gamma * (x - mean) / sqrt(variance + eps) + beta, row by row (biased variance, as PyTorch).
export function layerNorm(x, params, prefix, eps = 1e-5) {
  const gamma = params[`${prefix}.gamma`].data;
  const beta = params[`${prefix}.beta`].data;
  const y = matrix(x.rows, x.cols);
  for (let r = 0; r < x.rows; r++) {
    const row = x.data.subarray(r * x.cols, (r + 1) * x.cols);
    const mean = row.reduce((a, b) => a + b, 0) / x.cols;
    const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / x.cols;
    for (let c = 0; c < x.cols; c++) {
      y.data[r * x.cols + c] = gamma[c] * ((row[c] - mean) / Math.sqrt(variance + eps)) + beta[c];
    }
  }
  return y;
}

// post-norm (the paper): LayerNorm(x + sublayer(x)); pre-norm (GPT-2): x + sublayer(LayerNorm(x)).
// The norm is `prefix`.norm.
export function sublayerConnection(params, prefix, x, sublayer, { normFirst = false, eps } = {}) {
  const norm = (y) => layerNorm(y, params, `${prefix}.norm`, eps);
  return normFirst ? add(x, sublayer(norm(x))) : norm(add(x, sublayer(x)));
}

// --- Chapter 05_feed_forward: act(x W1 + b1) W2 + b2, position by position ----------------------
// gpt.py's ACTIVATIONS: ReLU (the paper, the encoder-decoder) and GPT-2's GELU, tanh approximation.
export const ACTIVATIONS = {
  relu: (x) => Math.max(0, x),
  gelu_tanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))),
};

export function feedForward(params, prefix, x, activation = "relu") {
  const act = ACTIVATIONS[activation];
  if (!act) throw new Error(`activation ${activation} is not supported`);
  const hidden = linear(x, params, `${prefix}.expand`); // (seq, d_ff)
  for (let i = 0; i < hidden.data.length; i++) hidden.data[i] = act(hidden.data[i]);
  return linear(hidden, params, `${prefix}.contract`); // (seq, d_model)
}

// --- Chapter 10's sampling ---------------------------------------------------------------------
// A seeded generator of uniform numbers in [0, 1) (mulberry32): the same seed, the same poem in
// every browser. It is not PyTorch's generator: a seed here writes another poem than in Python.
export function randomStream(seed) {
  let state = (Number(seed) >>> 0) ^ 0x9e3779b9;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// decoding.py's top_p_filter: -inf outside the nucleus, the smallest set of most probable
// tokens whose probabilities sum to at least topP (the most probable one is always in it).
export function topPFilter(logits, topP) {
  if (!(topP > 0 && topP <= 1)) throw new Error(`top_p must be in (0, 1]; got top_p=${topP}`);
  const p = softmax(logits);
  // Only the likelier tokens need sorting when they already hold topP of the mass: every
  // other token comes after them, so its mass before is at least topP too. (Faster: a
  // sharp distribution has a few hundred such tokens among thousands.)
  let ids = Array.from(p.keys()).filter((id) => p[id] >= 1e-6);
  if (ids.reduce((sum, id) => sum + p[id], 0) < topP) ids = Array.from(p.keys());
  const order = ids.sort((a, b) => p[b] - p[a]);
  const kept = new Float64Array(logits.length).fill(-Infinity);
  let before = 0; // the mass of the likelier tokens
  for (const id of order) {
    if (before >= topP) break;
    kept[id] = logits[id];
    before += p[id];
  }
  return kept;
}

// generator.py's sample_next_token: keep the topK highest logits (and any tied with the k-th).
export function topKFilter(logits, topK) {
  if (!(Number.isInteger(topK) && topK >= 1 && topK <= logits.length)) {
    const size = logits.length;
    throw new Error(`top_k must be between 1 and the vocabulary size ${size}; got top_k=${topK}`);
  }
  const kth = Float64Array.from(logits).sort().reverse()[topK - 1];
  return logits.map((value) => (value < kth ? -Infinity : value));
}

// One draw from softmax(logits): walk the cumulative probabilities up to a uniform number.
export function drawToken(logits, random) {
  const p = softmax(logits);
  let u = random();
  for (let id = 0; id < p.length; id++) {
    if (p[id] > 0 && (u -= p[id]) < 0) return id;
  }
  return argmax(p); // u landed in the rounding error at the very end
}

// The distribution a character is drawn from at one step, as writeSteps draws it: the allowed
// logits divided by the temperature, the top-p cut, and the softmax of what is kept (so the kept
// probabilities sum to 1). Temperature 0 is greedy: the most probable one, with probability 1.
// Returns [{id, p}], most probable first (equal ones: the lower id first).
export function distribution(logits, temperature, topP, topK = null) {
  if (!(temperature >= 0)) throw new Error(`temperature must be >= 0; got ${temperature}`);
  if (temperature === 0) return [{ id: argmax(logits), p: 1 }];
  let kept = topPFilter(logits.map((value) => value / temperature), topP);
  if (topK !== null) kept = topKFilter(kept, topK);
  const p = softmax(kept);
  const ids = [];
  for (let id = 0; id < kept.length; id++) if (kept[id] > -Infinity) ids.push(id);
  return ids.sort((a, b) => p[b] - p[a] || a - b).map((id) => ({ id, p: p[id] }));
}

