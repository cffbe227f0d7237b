// The book's Transformer, forward pass and decoding, in plain JavaScript (no framework).
//
// Each function mirrors one piece of the companion package src/transformer_book/ and names the
// chapter that explains it, so the two can be read side by side. Weights come from
// tools/export_playground.py: a binary file (float32 tensors; for the translator, 8-bit
// matrices with a float32 scale per row) plus a JSON file with the configuration (make_model's
// arguments), the vocabularies and each tensor's name, shape and offset.
// Activations are float64 (JavaScript numbers); tests/test_playground.py and
// tests/test_playground_translator.py check the logits against PyTorch's float32 model loaded
// from the same file.
"use strict";

const TransformerBook = (() => {
  // A matrix is {rows, cols, data}: data is row-major, data[r * cols + c].
  function matrix(rows, cols) {
    return { rows, cols, data: new Float64Array(rows * cols) };
  }

  // --- Loading the exported weights ------------------------------------------------------------
  // onProgress(bytesLoaded, bytesTotal), if given, is called as the weights arrive.
  async function loadModel(jsonUrl, onProgress = null) {
    const meta = await (await fetchOk(jsonUrl)).json();
    const weightsUrl = new URL(meta.weights.file, new URL(jsonUrl, document.baseURI));
    const buffer = await fetchBytes(weightsUrl, meta.weights.bytes, onProgress);
    const params = {};
    for (const { name, shape, offset, dtype = "float32", scales } of meta.tensors) {
      const size = shape.reduce((a, b) => a * b, 1);
      if (dtype === "float32") {
        params[name] = { shape, data: new Float32Array(buffer, 4 * offset, size) };
      } else {
        // 8 bits: row r is q * scale[r], rounded to float32 as PyTorch computes it.
        const q = new Int8Array(buffer, offset, size);
        const scale = new Float32Array(buffer, 4 * scales, shape[0]);
        const data = new Float32Array(size);
        const cols = size / shape[0];
        for (let i = 0; i < size; i++) data[i] = q[i] * scale[Math.floor(i / cols)];
        params[name] = { shape, data };
      }
    }
    const { d_model, max_len = 5000 } = meta.config;
    const model = { meta, params, positions: sinusoidalTable(Math.min(max_len, 512), d_model) };
    if (meta.tokenizer) model.tokenizer = TransformerBookTokenizer.fromMeta(meta); // tokenizer.js
    return model;
  }

  async function fetchOk(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response;
  }

  // The file at `url`, which must hold `expected` bytes; onProgress as for loadModel.
  async function fetchBytes(url, expected, onProgress = null) {
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

  // --- Chapter 01_positional_encoding: embeddings times sqrt(d_model), plus sinusoids ------------
  function sinusoidalTable(maxLen, dModel, base = 10000) {
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

  function embed(model, tokens, prefix, offset = 0) {
    const { d_model, positional = true } = model.meta.config;
    const lookup = model.params[`${prefix}.embeddings.lookup.weight`].data; // (vocab, d_model)
    const x = matrix(tokens.length, d_model); // (seq, d_model)
    const scale = Math.sqrt(d_model);
    tokens.forEach((token, pos) => {
      for (let c = 0; c < d_model; c++) {
        const position = positional ? model.positions.data[(offset + pos) * d_model + c] : 0;
        x.data[pos * d_model + c] = lookup[token * d_model + c] * scale + position;
      }
    });
    return x;
  }

  // --- Chapters 03, 05, 08: a linear layer, x W^T + b, as nn.Linear ------------------------------
  function linear(x, params, prefix) {
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

  // --- Chapter 02_scaled_dot_product_attention (masks: chapter 06_masking) ----------------------
  // softmax(Q K^T / sqrt(d_k)) V for one head; columns [first, first + d_k) of Q, K and V.
  // mayAttend(q, k) is the boolean mask (true = may attend); a row with nothing allowed gets zeros.
  function attendOneHead(Q, K, V, first, dK, scale, mayAttend) {
    const weights = matrix(Q.rows, K.rows); // (queries, keys)
    const output = matrix(Q.rows, dK); // (queries, d_k)
    for (let q = 0; q < Q.rows; q++) {
      let max = -Infinity;
      for (let k = 0; k < K.rows; k++) {
        let score = -Infinity; // masked: e^-inf = 0 after the softmax
        if (!mayAttend || mayAttend(q, k)) {
          score = 0;
          for (let i = 0; i < dK; i++)
            score += Q.data[q * Q.cols + first + i] * scale * K.data[k * K.cols + first + i];
        }
        weights.data[q * K.rows + k] = score;
        max = Math.max(max, score);
      }
      if (max === -Infinity) continue; // fully masked row: weights 0 and output 0, never NaN
      let total = 0;
      for (let k = 0; k < K.rows; k++) {
        const e = Math.exp(weights.data[q * K.rows + k] - max); // subtract the max: no overflow
        weights.data[q * K.rows + k] = e;
        total += e;
      }
      for (let k = 0; k < K.rows; k++) {
        const w = (weights.data[q * K.rows + k] /= total);
        for (let i = 0; i < dK; i++) output.data[q * dK + i] += w * V.data[k * V.cols + first + i];
      }
    }
    return { output, weights };
  }

  function appendRows(top, bottom) {
    if (!top) return bottom; // an empty cache
    const both = matrix(top.rows + bottom.rows, top.cols);
    both.data.set(top.data);
    both.data.set(bottom.data, top.data.length);
    return both;
  }

  // --- Chapter 03_multi_head_attention: h heads on learned projections, concatenated ----------
  // `cache` (chapter 10's step-by-step decoding) keeps the projected keys and values:
  // self-attention appends the new positions' to it; a {static: true} cache (cross-attention)
  // is filled once.
  function multiHeadAttention(model, prefix, query, keyValue, mayAttend, cache = null) {
    const { d_model, heads, attention_scale = null } = model.meta.config;
    const dK = d_model / heads;
    const scale = attention_scale === null ? 1 / Math.sqrt(dK) : attention_scale;
    const Q = linear(query, model.params, `${prefix}.query_proj`); // (queries, d_model)
    let K, V;
    if (cache && cache.static && cache.K) {
      ({ K, V } = cache); // projected once, from the encoder's output
    } else {
      K = linear(keyValue, model.params, `${prefix}.key_proj`); // (keys, d_model)
      V = linear(keyValue, model.params, `${prefix}.value_proj`); // (keys, d_model)
      // Self-attention while decoding: the earlier steps' keys and values, then this step's.
      if (cache && cache.K) [K, V] = [appendRows(cache.K, K), appendRows(cache.V, V)];
      if (cache) Object.assign(cache, { K, V }); // new matrices: a copied cache is left as it was
    }
    const merged = matrix(query.rows, d_model); // the heads side by side: (queries, d_model)
    const weights = [];
    for (let h = 0; h < heads; h++) {
      // Head h works on features h * d_k to (h + 1) * d_k - 1 of the projections.
      const head = attendOneHead(Q, K, V, h * dK, dK, scale, mayAttend);
      weights.push(head.weights);
      for (let q = 0; q < query.rows; q++) {
        for (let i = 0; i < dK; i++)
          merged.data[q * d_model + h * dK + i] = head.output.data[q * dK + i];
      }
    }
    return { output: linear(merged, model.params, `${prefix}.output_proj`), weights }; // W^O
  }

  // --- Chapter 04_add_and_norm: layer norm and the residual sublayer connection ------------------
  function layerNorm(x, params, prefix, eps = 1e-5) {
    const gamma = params[`${prefix}.gamma`].data;
    const beta = params[`${prefix}.beta`].data;
    const y = matrix(x.rows, x.cols);
    for (let r = 0; r < x.rows; r++) {
      const row = x.data.subarray(r * x.cols, (r + 1) * x.cols);
      const mean = row.reduce((a, b) => a + b, 0) / x.cols;
      const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / x.cols; // biased
      for (let c = 0; c < x.cols; c++) {
        y.data[r * x.cols + c] = gamma[c] * ((row[c] - mean) / Math.sqrt(variance + eps)) + beta[c];
      }
    }
    return y;
  }

  function add(a, b) {
    const sum = matrix(a.rows, a.cols);
    for (let i = 0; i < sum.data.length; i++) sum.data[i] = a.data[i] + b.data[i];
    return sum;
  }

  // post-norm (the paper): LayerNorm(x + sublayer(x)); pre-norm: x + sublayer(LayerNorm(x)).
  function sublayerConnection(model, prefix, x, sublayer) {
    if (model.meta.config.norm_first)
      return add(x, sublayer(layerNorm(x, model.params, `${prefix}.norm`)));
    return layerNorm(add(x, sublayer(x)), model.params, `${prefix}.norm`);
  }

  // --- Chapter 05_feed_forward: max(0, x W1 + b1) W2 + b2, position by position -----------------
  function feedForward(model, prefix, x) {
    const hidden = linear(x, model.params, `${prefix}.expand`); // (seq, d_ff)
    for (let i = 0; i < hidden.data.length; i++) hidden.data[i] = Math.max(0, hidden.data[i]);
    return linear(hidden, model.params, `${prefix}.contract`); // (seq, d_model)
  }

  function finalNorm(model, prefix, x) {
    // Chapter 09: make_model's final_norm defaults to norm_first (a pre-norm stack needs one).
    const { final_norm = null, norm_first = false } = model.meta.config;
    const wanted = final_norm === null ? norm_first : final_norm;
    return wanted ? layerNorm(x, model.params, `${prefix}.norm`) : x;
  }

  // --- Chapter 05_feed_forward: the encoder, self-attention then the FFN, num_layers times -------
  // One unpadded sentence: every source position may attend to every other, so no mask (a batch
  // of sentences of different lengths would need chapter 06's padding mask).
  function encode(model, sourceTokens) {
    let x = embed(model, sourceTokens, "source_embed"); // (source, d_model)
    const attention = [];
    for (let layer = 0; layer < model.meta.config.num_layers; layer++) {
      const prefix = `encoder.layers.${layer}`;
      x = sublayerConnection(model, `${prefix}.sublayers.0`, x, (normed) => {
        const result = multiHeadAttention(model, `${prefix}.self_attn`, normed, normed, null);
        attention.push(result.weights); // per head: (source, source)
        return result.output;
      });
      x = sublayerConnection(model, `${prefix}.sublayers.1`, x, (normed) =>
        feedForward(model, `${prefix}.feed_forward`, normed),
      );
    }
    return { memory: finalNorm(model, "encoder", x), attention }; // memory (source, d_model)
  }

  // --- Chapter 06_masking: position q may attend to positions 0..q (the look-ahead mask) ---------
  // `offset` counts the earlier positions held in a cache: query q is position offset + q.
  const subsequentMask = (offset) => (q, k) => k <= offset + q;

  // --- Chapter 07_cross_attention: the decoder: masked self-attention, cross-attention, FFN ---
  // With `caches` (from newCaches), only the new tokens go in, at positions offset, offset + 1...
  function decode(model, memory, targetTokens, caches = null, offset = 0) {
    let x = embed(model, targetTokens, "target_embed", offset); // (target, d_model)
    const selfAttention = [];
    const crossAttention = [];
    for (let layer = 0; layer < model.meta.config.num_layers; layer++) {
      const prefix = `decoder.layers.${layer}`;
      const cache = caches ? caches[layer] : { self: null, cross: null };
      x = sublayerConnection(model, `${prefix}.sublayers.0`, x, (normed) => {
        const result = multiHeadAttention(
          model,
          `${prefix}.self_attn`,
          normed,
          normed,
          subsequentMask(offset),
          cache.self,
        );
        selfAttention.push(result.weights); // per head: (target, target), zero above the diagonal
        return result.output;
      });
      x = sublayerConnection(model, `${prefix}.sublayers.1`, x, (normed) => {
        // Queries from the decoder; keys and values from the encoder's output.
        const result = multiHeadAttention(
          model,
          `${prefix}.cross_attn`,
          normed,
          memory,
          null,
          cache.cross,
        );
        crossAttention.push(result.weights); // per head: (target, source)
        return result.output;
      });
      x = sublayerConnection(model, `${prefix}.sublayers.2`, x, (normed) =>
        feedForward(model, `${prefix}.feed_forward`, normed),
      );
    }
    return { hidden: finalNorm(model, "decoder", x), selfAttention, crossAttention };
  }

  // --- Chapter 08_linear_and_softmax: scores over the vocabulary, then log_softmax ---------------
  function generator(model, hidden, row) {
    const one = matrix(1, hidden.cols);
    one.data.set(hidden.data.subarray(row * hidden.cols, (row + 1) * hidden.cols));
    const logits = linear(one, model.params, "generator.proj").data; // (vocab,)
    const max = Math.max(...logits);
    const logSum = max + Math.log(logits.reduce((a, b) => a + Math.exp(b - max), 0)); // log-sum-exp
    return { logits, logProbs: logits.map((value) => value - logSum) };
  }

  // --- Chapter 10_decoding: the key/value cache, one per decoder layer ---------------------------
  function newCaches(model) {
    return Array.from({ length: model.meta.config.num_layers }, () => ({
      self: {},
      cross: { static: true },
    }));
  }

  // A hypothesis of beam search that continues another gets its own copy of the self-attention
  // caches (cheap: the matrices are replaced, never changed, when a step is appended).
  const copyCaches = (caches) => caches.map(({ self, cross }) => ({ self: { ...self }, cross }));

  // The log-probabilities of the token after `tokens`: only the newest token goes in, the keys and
  // values of the earlier ones are cached (the package's default path, use_cache=True).
  function nextLogProbs(model, memory, tokens, caches) {
    const step = tokens.length - 1;
    const { hidden } = decode(model, memory, tokens.slice(step), caches, step);
    return generator(model, hidden, 0);
  }

  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // --- Chapter 10_decoding: greedy decoding, the most probable token at every step --------------
  function greedyDecode(model, sourceTokens, maxNewTokens) {
    const { start_id, end_id } = model.meta;
    const { memory } = encode(model, sourceTokens);
    const tokens = [start_id];
    const caches = newCaches(model);
    const steps = []; // per step: the logits and log-probabilities it chose from
    for (let step = 0; step < maxNewTokens; step++) {
      const scores = nextLogProbs(model, memory, tokens, caches);
      tokens.push(argmax(scores.logProbs));
      steps.push(scores);
      if (tokens[tokens.length - 1] === end_id) break;
    }
    return { tokens, steps };
  }

  // --- Chapter 10_decoding: beam search, the beamSize most probable prefixes at every step -------
  function beamSearch(model, sourceTokens, maxNewTokens, beamSize = 4, lengthPenalty = 0) {
    const { start_id, end_id } = model.meta;
    const { memory } = encode(model, sourceTokens);
    // One live hypothesis at first, or step 1 would pick the best token beamSize times.
    let beams = Array.from({ length: beamSize }, (_, b) => ({
      tokens: [start_id],
      score: b === 0 ? 0 : -Infinity,
      finished: false,
      length: 0,
      caches: newCaches(model),
    }));
    for (let step = 0; step < maxNewTokens; step++) {
      // The beamSize best of every hypothesis extended by every token, best first; a tie keeps
      // the earlier (hypothesis, token), as a stable sort of all of them would.
      const best = [];
      const add = (score, origin, token) => {
        if (best.length === beamSize && !(score > best[beamSize - 1].score)) return;
        let at = best.length;
        while (at > 0 && score > best[at - 1].score) at--;
        best.splice(at, 0, { score, origin, token });
        if (best.length > beamSize) best.pop();
      };
      beams.forEach((beam, origin) => {
        if (beam.score === -Infinity) return; // its candidates are all -inf: never chosen
        if (beam.finished) return add(beam.score, origin, end_id); // only the end, at no cost
        const { logProbs } = nextLogProbs(model, memory, beam.tokens, beam.caches);
        logProbs.forEach((logProb, token) => add(beam.score + logProb, origin, token));
      });
      beams = best.map(({ score, origin, token }) => {
        const from = beams[origin];
        return {
          tokens: [...from.tokens, token],
          score,
          finished: from.finished || token === end_id,
          length: from.length + (from.finished ? 0 : 1), // tokens up to and including the end
          caches: copyCaches(from.caches), // the caches follow their hypotheses
        };
      });
      if (beams.every((beam) => beam.finished)) break;
    }
    // The best: score / ((5 + length) / 6) ** lengthPenalty (Wu et al. 2016; 0 ranks by score).
    const ranking = beams.map((beam) => beam.score / ((5 + beam.length) / 6) ** lengthPenalty);
    return beams[argmax(ranking)];
  }

  // --- Chapter 09_full_transformer: one teacher-forced pass over a decoded sequence --------------
  // Every attention map of the model, and the log-probability of each token that was chosen.
  function inspect(model, sourceTokens, tokens) {
    const encoded = encode(model, sourceTokens);
    const decoded = decode(model, encoded.memory, tokens.slice(0, -1));
    const steps = tokens.slice(1).map((_, row) => generator(model, decoded.hidden, row));
    return {
      steps,
      attention: {
        "encoder self-attention": encoded.attention, // [layer][head]: (source, source)
        "decoder self-attention": decoded.selfAttention, // [layer][head]: (target, target)
        "decoder cross-attention": decoded.crossAttention, // [layer][head]: (target, source)
      },
    };
  }

  // --- The vocabularies (chapter 09's CharVocab): a token is a character, or a word --------------
  // meta.source_separator is "" (characters) or " " (words); the translator has byte-pair tokens
  // (chapter 13, tokenizer.js). Returns {ids} or {error}: the error names the tokens the model has
  // never seen, or the length limit, as the package's encode does. The translator reads an
  // unknown token as <unk> ({ids, unknown}) and refuses only text it can read none of.
  function splitText(model, text) {
    if (model.tokenizer) return model.tokenizer.tokenize(text);
    if (!model.meta.source_separator) return [...text];
    return text.split(model.meta.source_separator).filter((word) => word !== "");
  }

  function encodeText(model, text) {
    if (model.tokenizer) return model.tokenizer.encode(text);
    const { source_tokens: tokens, max_source_len: limit, source_separator } = model.meta;
    const pieces = splitText(model, text);
    const unknown = [...new Set(pieces.filter((piece) => !tokens.includes(piece)))];
    if (unknown.length) {
      const shown = unknown.map((piece) => JSON.stringify(piece)).join(", ");
      return { error: `not in the vocabulary: ${shown}` };
    }
    if (pieces.length === 0) return { error: "type something to translate" };
    if (pieces.length > limit) {
      const unit = source_separator ? "words" : "characters";
      return {
        error: `too long: ${pieces.length} ${unit}; the model was trained on at most ${limit}`,
      };
    }
    return { ids: pieces.map((piece) => tokens.indexOf(piece)) };
  }

  // Token ids -> text: stops at the end token, skips padding and the start token, as
  // CharVocab.decode does.
  function decodeTokens(model, ids) {
    const { target_tokens: tokens, pad_id, start_id, end_id, target_separator = "" } = model.meta;
    const end = ids.indexOf(end_id);
    return (end === -1 ? ids : ids.slice(0, end))
      .filter((id) => id !== pad_id && id !== start_id)
      .map((id) => tokens[id])
      .join(target_separator);
  }

  // How many tokens to decode at most: the translator allows 2 * source + 10 (Translator.translate),
  // within its positional table; the other tasks a fixed number.
  function maxNewTokens(model, sourceLength) {
    const { max_new_tokens: limit, max_new_per_source: perSource } = model.meta;
    return perSource ? Math.min(perSource[0] * sourceLength + perSource[1], limit) : limit;
  }

  return {
    matrix, appendRows, add, argmax, fetchOk, fetchBytes, // pieces gpt.js uses too
    loadModel, sinusoidalTable, embed, linear, attendOneHead, multiHeadAttention, layerNorm,
    feedForward, encode, decode, generator, greedyDecode, beamSearch, inspect, splitText,
    encodeText, decodeTokens, maxNewTokens,
  };
})();
