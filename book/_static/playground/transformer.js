// The book's Transformer, forward pass and decoding, in plain JavaScript (no framework).
//
// Each function mirrors one piece of the companion package src/transformer_book/ and names the
// chapter that explains it, so the two can be read side by side; the pieces it shares with the
// GPT of gpt.js (linear layers, attention, layer norm, the feed-forward network, the caches)
// are in core.js. Weights come from tools/export_playground.py: a binary file (float32 tensors;
// for the translator, 8-bit matrices with a float32 scale per row) plus a JSON file with the
// configuration (make_model's arguments), the vocabularies and each tensor's name, shape and
// offset. Activations are float64 (JavaScript numbers); tests/test_playground.py and
// tests/test_playground_translator.py check the logits against PyTorch's float32 model loaded
// from the same file.
import {
  argmax, drawToken, embed, feedForward, layerNorm, loadWeights, logSoftmax, multiHeadAttention,
  newCache, outputScores, randomStream, sinusoidalTable, sublayerConnection, topIds, topKFilter,
  topPFilter,
} from "./core.js";
import { fromMeta } from "./tokenizer.js";

// --- Loading the exported weights ------------------------------------------------------------
// {meta, params, positions, tokenizer}; onProgress(bytesLoaded, bytesTotal), if given, is called
// as the weights arrive.
export async function loadModel(jsonUrl, onProgress = null) {
  const { meta, params } = await loadWeights(jsonUrl, onProgress);
  const { d_model, max_len = 5000 } = meta.config;
  const model = { meta, params, positions: sinusoidalTable(Math.min(max_len, 512), d_model) };
  if (meta.tokenizer) model.tokenizer = fromMeta(meta); // chapter 13's byte pairs
  return model;
}

// --- Chapter 01_positional_encoding: embeddings times sqrt(d_model), plus sinusoids ------------
function embedTokens(model, tokens, prefix, offset = 0) {
  const { d_model, positional = true } = model.meta.config;
  return embed(model.params[`${prefix}.embeddings.lookup.weight`].data, tokens, d_model, {
    scale: Math.sqrt(d_model),
    positions: positional ? model.positions.data : null,
    offset,
  });
}

// The pieces of core.js with this model's configuration: chapter 3's attention (scale: 1 /
// sqrt(d_k) unless the configuration names one), chapter 4's post-norm (the paper) or pre-norm
// sublayers, chapter 5's ReLU feed-forward network.
function attention(model, prefix, query, keyValue, options = {}) {
  const { heads, attention_scale: scale = null } = model.meta.config;
  return multiHeadAttention(model.params, prefix, query, keyValue, { heads, scale, ...options });
}

function sublayer(model, prefix, x, inner) {
  const { norm_first: normFirst = false } = model.meta.config;
  return sublayerConnection(model.params, prefix, x, inner, { normFirst });
}

const ffn = (model, prefix, x) =>
  feedForward(model.params, prefix, x, model.meta.config.activation ?? "relu");

function finalNorm(model, prefix, x) {
  // Chapter 09: make_model's final_norm defaults to norm_first (a pre-norm stack needs one).
  const { final_norm = null, norm_first = false } = model.meta.config;
  const wanted = final_norm === null ? norm_first : final_norm;
  return wanted ? layerNorm(x, model.params, `${prefix}.norm`) : x;
}

// --- Chapter 05_feed_forward: the encoder, self-attention then the FFN, num_layers times -------
// One unpadded sentence: every source position may attend to every other, so no mask (a batch
// of sentences of different lengths would need chapter 06's padding mask).
export function encode(model, sourceTokens) {
  let x = embedTokens(model, sourceTokens, "source_embed"); // (source, d_model)
  const maps = [];
  const scores = [];
  const values = []; // per layer: the value side (core.js's multiHeadAttention)
  for (let layer = 0; layer < model.meta.config.num_layers; layer++) {
    const prefix = `encoder.layers.${layer}`;
    x = sublayer(model, `${prefix}.sublayers.0`, x, (normed) => {
      const result = attention(model, `${prefix}.self_attn`, normed, normed);
      maps.push(result.weights); // per head: (source, source)
      scores.push(result.scores); // per head: the scaled scores q·k / sqrt(d_k)
      values.push(result.values);
      return result.output;
    });
    x = sublayer(model, `${prefix}.sublayers.1`, x, (normed) =>
      ffn(model, `${prefix}.feed_forward`, normed),
    );
  }
  // memory (source, d_model)
  return { memory: finalNorm(model, "encoder", x), attention: maps, scores, values };
}

// --- Chapter 07_cross_attention: the decoder: masked self-attention, cross-attention, FFN ---
// Chapter 06's look-ahead mask: target position i attends to positions 0..i. With `caches`
// (from newCaches), only the new tokens go in, at positions offset, offset + 1...
export function decode(model, memory, targetTokens, caches = null, offset = 0) {
  let x = embedTokens(model, targetTokens, "target_embed", offset); // (target, d_model)
  const selfAttention = [];
  const crossAttention = [];
  const selfScores = [];
  const crossScores = [];
  const selfValues = [];
  const crossValues = [];
  const layerOutputs = []; // each layer's output (target, d_model), for the logit lens
  for (let layer = 0; layer < model.meta.config.num_layers; layer++) {
    const prefix = `decoder.layers.${layer}`;
    const cache = caches ? caches[layer] : { self: null, cross: null };
    x = sublayer(model, `${prefix}.sublayers.0`, x, (normed) => {
      const options = { causal: offset, cache: cache.self };
      const result = attention(model, `${prefix}.self_attn`, normed, normed, options);
      selfAttention.push(result.weights); // per head: (target, target), zero above the diagonal
      selfScores.push(result.scores); // -Infinity above the diagonal
      selfValues.push(result.values);
      return result.output;
    });
    x = sublayer(model, `${prefix}.sublayers.1`, x, (normed) => {
      // Queries from the decoder; keys and values from the encoder's output.
      const options = { cache: cache.cross };
      const result = attention(model, `${prefix}.cross_attn`, normed, memory, options);
      crossAttention.push(result.weights); // per head: (target, source)
      crossScores.push(result.scores);
      crossValues.push(result.values);
      return result.output;
    });
    x = sublayer(model, `${prefix}.sublayers.2`, x, (normed) =>
      ffn(model, `${prefix}.feed_forward`, normed),
    );
    layerOutputs.push(x);
  }
  return {
    layerOutputs,
    hidden: finalNorm(model, "decoder", x), selfAttention, crossAttention, selfScores, crossScores,
    selfValues, crossValues,
  };
}

// --- Chapter 08_linear_and_softmax: scores over the vocabulary, then log_softmax ---------------
export function generator(model, hidden, row) {
  const logits = outputScores(model.params, "generator.proj", hidden, row); // (vocab,)
  return { logits, logProbs: logSoftmax(logits) };
}

// --- Chapter 10_decoding: the key/value caches, two per decoder layer --------------------------
// Self-attention's grows a step at a time; cross-attention's holds the encoder's keys and values.
function newCaches(model) {
  return Array.from({ length: model.meta.config.num_layers }, () => ({
    self: newCache(),
    cross: newCache(true),
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

// --- Chapter 10_decoding: greedy decoding, the most probable token at every step --------------
// `prefix`: tokens forced at the first steps (the page's "what if"; empty: plain greedy
// decoding); decoding goes on from them. Every step keeps the logits it chose from.
export function greedyDecode(model, sourceTokens, maxNewTokens, prefix = []) {
  return decodeSteps(model, sourceTokens, maxNewTokens, (scores) => argmax(scores.logProbs),
    prefix);
}

// One token per step, `pick(scores)` choosing it (after the forced `prefix`), until the end token.
function decodeSteps(model, sourceTokens, maxNewTokens, pick, prefix = []) {
  const { start_id, end_id } = model.meta;
  const { memory } = encode(model, sourceTokens);
  const tokens = [start_id];
  const caches = newCaches(model);
  const steps = []; // per step: the logits and log-probabilities it chose from
  for (let step = 0; step < maxNewTokens; step++) {
    const scores = nextLogProbs(model, memory, tokens, caches);
    const picked = pick(scores); // drawn even where forced: the draws stay in step
    tokens.push(step < prefix.length ? prefix[step] : picked);
    steps.push(scores);
    if (tokens[tokens.length - 1] === end_id) break;
  }
  return { tokens, steps };
}

// --- Chapter 10_decoding: sampling, each token drawn from the reshaped distribution ------------
// decoding.py's sample_decode: log-probabilities ÷ temperature (0: greedy), the top-p nucleus,
// then the top-k (core.js), one draw; the page's seeded random numbers (not PyTorch's).
export function sampleDecode(model, sourceTokens, maxNewTokens, options = {}, prefix = []) {
  const { temperature = 1, topK = null, topP = 1, seed = 0 } = options;
  if (!(temperature >= 0)) throw new Error(`temperature must be >= 0; got ${temperature}`);
  const random = randomStream(seed);
  return decodeSteps(model, sourceTokens, maxNewTokens, ({ logProbs }) => {
    if (temperature === 0) return argmax(logProbs);
    let scaled = topPFilter(logProbs.map((value) => value / temperature), topP);
    if (topK !== null) scaled = topKFilter(scaled, topK);
    return drawToken(scaled, random);
  }, prefix);
}

// --- Chapter 10_decoding: beam search, the beamSize most probable prefixes at every step -------
// `prefix`: tokens forced at the first steps (the page's "what if"; empty: plain beam search);
// every hypothesis starts from them, with their log-probabilities as its score.
export function beamSearch(model, sourceTokens, maxNewTokens, beamSize = 4, lengthPenalty = 0,
  prefix = []) {
  const { start_id, end_id } = model.meta;
  const { memory } = encode(model, sourceTokens);
  const first = { tokens: [start_id], score: 0, finished: false, length: 0,
    caches: newCaches(model) };
  for (const token of prefix.slice(0, maxNewTokens)) {
    if (first.finished) break;
    const { logProbs } = nextLogProbs(model, memory, first.tokens, first.caches);
    first.score += logProbs[token];
    first.tokens = [...first.tokens, token];
    first.length++;
    first.finished = token === end_id;
  }
  // One live hypothesis at first, or step 1 would pick the best token beamSize times.
  let beams = Array.from({ length: beamSize }, (_, b) => (b === 0 ? first : {
    tokens: first.tokens,
    score: -Infinity,
    finished: first.finished,
    length: first.length,
    caches: newCaches(model),
  }));
  if (first.finished) return first;
  for (let step = first.length; step < maxNewTokens; step++) {
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
export function inspect(model, sourceTokens, tokens) {
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
    scores: { // the same maps before the softmax: q·k / sqrt(d_k), -Infinity where masked
      "encoder self-attention": encoded.scores,
      "decoder self-attention": decoded.selfScores,
      "decoder cross-attention": decoded.crossScores,
    },
    values: { // [layer]: {V, merged, output}, the value side of each attention
      "encoder self-attention": encoded.values,
      "decoder self-attention": decoded.selfValues,
      "decoder cross-attention": decoded.crossValues,
    },
  };
}

// --- The logit lens: what each decoder layer would say if it were the last --------------------
// Each decoder layer's output through the decoder's final norm (if it has one) and the output
// layer, over a decoded sequence: per layer, per step, the `top` most probable next tokens
// [{id, p}]. The last layer's lens is the model's own output.
export function logitLens(model, sourceTokens, tokens, top = 3) {
  const { memory } = encode(model, sourceTokens);
  const { layerOutputs } = decode(model, memory, tokens.slice(0, -1));
  return layerOutputs.map((x) => {
    const hidden = finalNorm(model, "decoder", x);
    return tokens.slice(1).map((_, row) => {
      const { logProbs } = generator(model, hidden, row);
      return topIds(logProbs, top).map((id) => ({ id, p: Math.exp(logProbs[id]) }));
    });
  });
}

// --- The vocabularies (chapter 09's Vocabulary): a token is a character, or a word ------------
// meta.source_separator is "" (characters) or " " (words); the translator has byte-pair tokens
// (chapter 13, tokenizer.js). Returns {ids} or {error}: the error names the tokens the model has
// never seen, or the length limit, as the package's encode does. The translator reads an
// unknown token as <unk> ({ids, unknown}) and refuses only text it can read none of.
export function splitText(model, text) {
  if (model.tokenizer) return model.tokenizer.tokenize(text);
  if (!model.meta.source_separator) return [...text];
  return text.split(model.meta.source_separator).filter((word) => word !== "");
}

export function encodeText(model, text) {
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
// Vocabulary.decode does.
export function decodeTokens(model, ids) {
  const { target_tokens: tokens, pad_id, start_id, end_id, target_separator = "" } = model.meta;
  const end = ids.indexOf(end_id);
  return (end === -1 ? ids : ids.slice(0, end))
    .filter((id) => id !== pad_id && id !== start_id)
    .map((id) => tokens[id])
    .join(target_separator);
}

// How many tokens to decode at most: the translator allows 2 * source + 10 (Translator.translate),
// within its positional table; the other tasks a fixed number.
export function maxNewTokens(model, sourceLength) {
  const { max_new_tokens: limit, max_new_per_source: perSource } = model.meta;
  return perSource ? Math.min(perSource[0] * sourceLength + perSource[1], limit) : limit;
}

