// The poet of chapter 15 in plain JavaScript: a decoder-only GPT with its key/value cache, and
// the way Poet.write samples a poem (greedy, temperature, top-k, top-p, 藏头 by logit masking).
//
// Each function mirrors a piece of src/transformer_book/gpt.py and poet.py. Weights come from
// tools/export_poet_playground.py: poet.bin holds the shipped float16 tensors one after the other,
// poet.json the configuration, the characters and each tensor's name, shape and offset. Every
// weight is widened to float32 exactly as the package's pretrained_poet() does; activations are
// float64 (JavaScript numbers). tests/test_playground_poet.py checks the logits, the attention
// maps and the greedy poems against PyTorch loaded from the same file.
"use strict";

const PoetGPT = (() => {
  // --- Loading: float16 bytes -> float32 weights ------------------------------------------------
  // One float16 (1 sign bit, 5 exponent bits, 10 fraction bits) as a number, exactly.
  function halfToNumber(bits) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >> 10) & 0x1f;
    const fraction = bits & 0x3ff;
    if (exponent === 0) return sign * fraction * 2 ** -24; // subnormal (and zero)
    if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
    return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }

  let halfTable = null; // all 65,536 float16 values, computed once
  function halves(buffer) {
    if (!halfTable) {
      halfTable = new Float32Array(65536);
      for (let bits = 0; bits < 65536; bits++) halfTable[bits] = halfToNumber(bits);
    }
    const bits = new Uint16Array(buffer); // little-endian, as every browser's typed arrays
    const values = new Float32Array(bits.length);
    for (let i = 0; i < bits.length; i++) values[i] = halfTable[bits[i]];
    return values;
  }

  // {meta, params, ids}: params[name] = {shape, data: Float32Array}; ids: character -> id.
  async function loadPoet(jsonUrl, onProgress = null) {
    const url = new URL(jsonUrl, document.baseURI);
    const meta = await (await TransformerBook.fetchOk(url)).json();
    const { file, bytes } = meta.weights;
    const buffer = await TransformerBook.fetchBytes(new URL(file, url), bytes, onProgress); // (transformer.js)
    const values = halves(buffer);
    const params = {};
    for (const { name, shape, offset } of meta.tensors) {
      const size = shape.reduce((a, b) => a * b, 1);
      params[name] = { shape, data: values.subarray(offset, offset + size) };
    }
    const { activation } = meta.config;
    if (!(activation in ACTIVATIONS)) throw new Error(`activation ${activation} is not supported`);
    const ids = new Map(meta.tokens.map((token, id) => [token, id]));
    return { meta, params, ids };
  }

  // --- The pieces (chapters 3 to 5), on rows of float64: x is {rows, cols, data} ----------------
  // matrix, linear (as nn.Linear), layerNorm (chapter 4: biased variance, eps inside the square
  // root), appendRows, add and argmax are the encoder-decoder's own (transformer.js, loaded first).
  const { matrix, linear, layerNorm, appendRows, add, argmax } = TransformerBook;

  // gpt.py's ACTIVATIONS: ReLU (2017) and GPT-2's GELU with the tanh approximation.
  const ACTIVATIONS = {
    relu: (x) => Math.max(0, x),
    gelu_tanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))),
  };

  function feedForward(model, prefix, x) {
    const hidden = linear(x, model.params, `${prefix}.expand`); // (seq, d_ff)
    const act = ACTIVATIONS[model.meta.config.activation];
    for (let i = 0; i < hidden.data.length; i++) hidden.data[i] = act(hidden.data[i]);
    return linear(hidden, model.params, `${prefix}.contract`); // (seq, d_model)
  }

  // Chapter 3's multi-head self-attention with chapter 6's causal mask and chapter 10's cache:
  // the new positions (offset, offset + 1, ...) attend to every cached position and to themselves
  // and the ones before. Returns the output and, if asked, each head's weights (queries, keys).
  function selfAttention(model, prefix, x, cache, offset, needWeights) {
    const { d_model, heads } = model.meta.config;
    const dK = d_model / heads;
    const scale = 1 / Math.sqrt(dK);
    const Q = linear(x, model.params, `${prefix}.query_proj`); // (new, d_model)
    let K = linear(x, model.params, `${prefix}.key_proj`); // (new, d_model)
    let V = linear(x, model.params, `${prefix}.value_proj`);
    if (cache) {
      [K, V] = [appendRows(cache.K, K), appendRows(cache.V, V)]; // (offset + new, d_model)
      Object.assign(cache, { K, V });
    }
    const merged = matrix(x.rows, d_model); // the heads side by side
    const weights = [];
    const scores = new Float64Array(K.rows);
    for (let h = 0; h < heads; h++) {
      const first = h * dK; // head h: features first .. first + d_k - 1
      const map = needWeights ? matrix(x.rows, K.rows) : null;
      for (let q = 0; q < x.rows; q++) {
        const visible = offset + q + 1; // keys 0 .. offset + q: the causal mask
        let max = -Infinity;
        for (let k = 0; k < visible; k++) {
          let score = 0;
          const [qRow, kRow] = [q * d_model + first, k * d_model + first];
          for (let i = 0; i < dK; i++) score += Q.data[qRow + i] * K.data[kRow + i];
          scores[k] = score * scale;
          max = Math.max(max, scores[k]);
        }
        let total = 0;
        for (let k = 0; k < visible; k++) total += scores[k] = Math.exp(scores[k] - max);
        for (let k = 0; k < visible; k++) {
          const w = scores[k] / total;
          if (map) map.data[q * K.rows + k] = w; // masked keys stay 0
          const [out, vRow] = [q * d_model + first, k * d_model + first];
          for (let i = 0; i < dK; i++) merged.data[out + i] += w * V.data[vRow + i];
        }
      }
      if (map) weights.push(map);
    }
    return { output: linear(merged, model.params, `${prefix}.output_proj`), weights };
  }

  // --- gpt.py's GPT.forward: token ids -> the final hidden states ------------------------------
  function newCaches(model) {
    return Array.from({ length: model.meta.config.layers }, () => ({ K: null, V: null }));
  }

  // tokens at positions offset, offset + 1, ...; with caches, the earlier positions' keys and
  // values are reused. Returns {hidden (seq, d_model), attention: [layer][head] (seq, keys)}.
  function forward(model, tokens, caches = null, offset = 0, needWeights = false) {
    const { d_model, max_len, layers, eps, norm_first, learned_positions, tie_embeddings } =
      model.meta.config;
    if (!norm_first || !learned_positions || !tie_embeddings) {
      throw new Error("only the GPT-2 choices of chapter 15: pre-norm, learned positions, tied");
    }
    if (offset + tokens.length > max_len) {
      const last = offset + tokens.length - 1;
      throw new Error(`positions ${offset}..${last} do not fit max_len=${max_len}`);
    }
    const lookup = model.params["tokens.lookup.weight"].data; // (vocab, d_model)
    const positions = model.params["positions.weight"].data; // (max_len, d_model)
    let x = matrix(tokens.length, d_model); // GPT-2: no sqrt(d_model) scaling
    tokens.forEach((token, row) => {
      for (let c = 0; c < d_model; c++) {
        const position = positions[(offset + row) * d_model + c];
        x.data[row * d_model + c] = lookup[token * d_model + c] + position;
      }
    });
    const attention = [];
    for (let layer = 0; layer < layers; layer++) {
      const prefix = `layers.${layer}`;
      // pre-norm: x + sublayer(LayerNorm(x)), twice
      const attended = selfAttention(
        model, `${prefix}.self_attn`, layerNorm(x, model.params, `${prefix}.sublayers.0.norm`, eps),
        caches ? caches[layer] : null, offset, needWeights,
      );
      attention.push(attended.weights);
      x = add(x, attended.output);
      const normed = layerNorm(x, model.params, `${prefix}.sublayers.1.norm`, eps);
      x = add(x, feedForward(model, `${prefix}.feed_forward`, normed));
    }
    return { hidden: layerNorm(x, model.params, "final_norm", eps), attention };
  }

  // The tied output layer: the hidden state times every token's embedding. (vocab,)
  function logitsAt(model, hidden, row) {
    const { d_model, vocab_size } = model.meta.config;
    const lookup = model.params["tokens.lookup.weight"].data;
    const logits = new Float64Array(vocab_size);
    const h = hidden.data.subarray(row * d_model, (row + 1) * d_model);
    for (let v = 0; v < vocab_size; v++) {
      let sum = 0;
      for (let c = 0; c < d_model; c++) sum += h[c] * lookup[v * d_model + c];
      logits[v] = sum;
    }
    return logits;
  }

  // --- Chapter 10's sampling ---------------------------------------------------------------------
  // A seeded generator of uniform numbers in [0, 1) (mulberry32): the same seed, the same poem in
  // every browser. It is not PyTorch's generator: a seed here writes another poem than in Python.
  function randomStream(seed) {
    let state = (Number(seed) >>> 0) ^ 0x9e3779b9;
    return () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function softmax(logits) {
    let max = -Infinity;
    for (const value of logits) max = Math.max(max, value);
    const p = Float64Array.from(logits, (value) => Math.exp(value - max));
    const total = p.reduce((a, b) => a + b, 0);
    for (let i = 0; i < p.length; i++) p[i] /= total;
    return p;
  }

  // decoding.py's top_p_filter: -inf outside the nucleus, the smallest set of most probable
  // tokens whose probabilities sum to at least topP (the most probable one is always in it).
  function topPFilter(logits, topP) {
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
  function topKFilter(logits, topK) {
    if (!(Number.isInteger(topK) && topK >= 1 && topK <= logits.length)) {
      const size = logits.length;
      throw new Error(`top_k must be between 1 and the vocabulary size ${size}; got top_k=${topK}`);
    }
    const kth = Float64Array.from(logits).sort().reverse()[topK - 1];
    return logits.map((value) => (value < kth ? -Infinity : value));
  }

  // One draw from softmax(logits): walk the cumulative probabilities up to a uniform number.
  function drawToken(logits, random) {
    const p = softmax(logits);
    let u = random();
    for (let id = 0; id < p.length; id++) {
      if (p[id] > 0 && (u -= p[id]) < 0) return id;
    }
    return argmax(p); // u landed in the rounding error at the very end
  }

  // --- The poet's vocabulary: which characters of a prompt it knows -----------------------------
  // Returns {ids} or {error}; the error names every character the poet never saw, once each.
  function checkPrompt(model, prompt, acrostic) {
    const { acrostic_max, prompt_max } = model.meta;
    const characters = [...prompt.trim()]; // code points, as Python iterates a str
    const known = (c) => model.ids.has(c) && model.ids.get(c) > 2; // not <pad>, <s>, <unk>
    const unknown = [...new Set(characters.filter((c) => !known(c)))];
    if (unknown.length) {
      const named = unknown.map((c) => JSON.stringify(c)).join(", ");
      const count = (model.meta.tokens.length - 3).toLocaleString("en");
      const which = unknown.length === 1 ? "this character" : "these characters";
      return {
        error:
          `The poet does not know ${which}: ${named} (它没学过). ` +
          `It learned ${count} characters from the Tang poems.`,
      };
    }
    if (acrostic && (characters.length < 1 || characters.length > acrostic_max)) {
      const got = characters.length;
      return { error: `A 藏头诗 needs 1 to ${acrostic_max} characters, one per verse; got ${got}.` };
    }
    if (!acrostic && characters.length > prompt_max) {
      const got = characters.length;
      return { error: `A first verse has at most ${prompt_max} characters here; got ${got}.` };
    }
    return { ids: characters.map((c) => model.ids.get(c)), characters };
  }

  // --- poet.py's Poet.write, one character at a time -------------------------------------------
  // A generator: yields {id, ids} after each chosen character; returns the whole poem's ids
  // (starting with <s>). `options.keepLogits` also keeps the model's logits of every step (before
  // any masking) in `options.steps`.
  function* writeSteps(model, prompt, options = {}) {
    const { temperature = 0.8, topP = 0.9, topK = null, seed = 0, acrostic = false } = options;
    if (!(temperature >= 0)) throw new Error(`temperature must be >= 0; got ${temperature}`);
    const checked = checkPrompt(model, prompt, acrostic);
    if (checked.error) throw new Error(checked.error);
    const { pad_id, boundary_id, unknown_id, verse_ends, config } = model.meta;
    const heads = acrostic ? checked.ids : [];
    const ids = [boundary_id, ...(acrostic ? [] : checked.ids)];
    const ends = new Set([...verse_ends].map((mark) => model.ids.get(mark)));
    const random = randomStream(seed);
    const caches = newCaches(model);
    let offset = 0;
    let feed = ids.slice();
    for (;;) {
      const { hidden } = forward(model, feed, caches, offset);
      let logits = logitsAt(model, hidden, feed.length - 1); // (vocab,)
      if (options.keepLogits) (options.steps ??= []).push(Float64Array.from(logits));
      offset += feed.length;
      logits[pad_id] = -Infinity;
      logits[unknown_id] = -Infinity;
      const written = ids.length - 1;
      const last = ids[ids.length - 1];
      const verseStart = written === 0 || ends.has(last);
      let verses = 0;
      for (let i = 1; i < ids.length; i++) if (ends.has(ids[i])) verses++;
      if (written === 0) logits[boundary_id] = -Infinity; // not an empty poem
      if (heads.length && verses < heads.length) logits[boundary_id] = -Infinity; // not done yet
      if (heads.length && verseStart) {
        // 藏头: where a verse starts, only its given character (or, after the last, the end)
        const keep = verses < heads.length ? heads[verses] : boundary_id;
        logits = logits.map((_, id) => (id === keep ? 0 : -Infinity));
      }
      let chosen;
      if (temperature > 0) {
        let scaled = topPFilter(logits.map((value) => value / temperature), topP);
        if (topK !== null) scaled = topKFilter(scaled, topK);
        chosen = drawToken(scaled, random);
      } else {
        chosen = argmax(logits);
      }
      if (chosen === boundary_id || offset >= config.max_len) break;
      ids.push(chosen);
      feed = [chosen];
      yield { id: chosen, ids };
    }
    return ids;
  }

  function write(model, prompt, options = {}) {
    const steps = writeSteps(model, prompt, options);
    for (;;) {
      const { done, value } = steps.next();
      if (done) return { ids: value, text: decode(model, value) };
    }
  }

  // Ids -> text, the special tokens (<pad>, <s>, <unk>) left out, as CharVocabulary.decode.
  function decode(model, ids) {
    return ids.filter((id) => id > 2).map((id) => model.meta.tokens[id]).join("");
  }

  return {
    loadPoet, halfToNumber, forward, newCaches, logitsAt, randomStream, softmax, topPFilter,
    topKFilter, drawToken, checkPrompt, writeSteps, write, decode,
  };
})();
