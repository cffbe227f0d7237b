// The poet of chapter 15 in plain JavaScript: a decoder-only GPT with its key/value cache, and
// the way Poet.write samples a poem (greedy, temperature, top-k, top-p, 藏头 by logit masking).
//
// Each function mirrors a piece of src/transformer_book/gpt.py and poet.py; the pieces it shares
// with the encoder-decoder of transformer.js (linear layers, attention, layer norm, the
// feed-forward network, the caches, softmax) are in core.js. Weights come from
// tools/export_poet_playground.py: poet.bin holds the shipped float16 tensors one after the other,
// poet.json the configuration, the characters and each tensor's name, shape and offset. Every
// weight is widened to float32 exactly as the package's pretrained_poet() does; activations are
// float64 (JavaScript numbers). tests/test_playground_poet.py checks the logits, the attention
// maps and the greedy poems against PyTorch loaded from the same file.
import {
  ACTIVATIONS, argmax, drawToken, embed, feedForward, layerNorm, loadWeights, multiHeadAttention,
  newCache, outputScores, randomStream, softmax, sublayerConnection, topIds, topKFilter,
  topPFilter,
} from "./core.js";

export {
  distribution, drawToken, halfToNumber, randomStream, softmax, topKFilter, topPFilter,
} from "./core.js";

// --- Loading: float16 bytes -> float32 weights (core.js) --------------------------------------
// {meta, params, ids}: params[name] = {shape, data: Float32Array}; ids: character -> id.
export async function loadPoet(jsonUrl, onProgress = null) {
  const { meta, params } = await loadWeights(jsonUrl, onProgress);
  const { activation } = meta.config;
  if (!(activation in ACTIVATIONS)) throw new Error(`activation ${activation} is not supported`);
  const ids = new Map(meta.tokens.map((token, id) => [token, id]));
  return { meta, params, ids };
}

// --- gpt.py's GPT.forward: token ids -> the final hidden states ------------------------------
// One cache per layer (chapter 10): each step appends its keys and values.
export function newCaches(model) {
  return Array.from({ length: model.meta.config.layers }, () => newCache());
}

// tokens at positions offset, offset + 1, ...; with caches, the earlier positions' keys and
// values are reused. Returns {hidden (seq, d_model), attention: [layer][head] (seq, keys),
// scores: the same before the softmax}.
export function forward(model, tokens, caches = null, offset = 0, needWeights = false) {
  const { d_model, max_len, layers, heads, eps, activation, norm_first, learned_positions,
    tie_embeddings } = model.meta.config;
  if (!norm_first || !learned_positions || !tie_embeddings) {
    throw new Error("only the GPT-2 choices of chapter 15: pre-norm, learned positions, tied");
  }
  if (offset + tokens.length > max_len) {
    const last = offset + tokens.length - 1;
    throw new Error(`positions ${offset}..${last} do not fit max_len=${max_len}`);
  }
  const { params } = model;
  const positions = params["positions.weight"].data; // (max_len, d_model), learned
  // GPT-2: no sqrt(d_model) scaling
  let x = embed(params["tokens.lookup.weight"].data, tokens, d_model, { positions, offset });
  const attention = [];
  const scores = []; // [layer][head]: q·k / sqrt(d_k), -Infinity where masked
  const layerOutputs = []; // each layer's output (seq, d_model), for the logit lens
  const values = []; // [layer]: the value side, {V, merged, output} (with needWeights)
  const preNorm = { normFirst: true, eps }; // x + sublayer(LayerNorm(x)), twice
  for (let layer = 0; layer < layers; layer++) {
    const prefix = `layers.${layer}`;
    // Chapter 3's self-attention with chapter 6's causal mask: the new positions attend to
    // every cached position, to themselves and to the new ones before them.
    x = sublayerConnection(params, `${prefix}.sublayers.0`, x, (normed) => {
      const cache = caches ? caches[layer] : null;
      const options = { heads, causal: offset, cache, needWeights };
      const attended = multiHeadAttention(params, `${prefix}.self_attn`, normed, normed, options);
      attention.push(attended.weights);
      scores.push(attended.scores);
      values.push(attended.values);
      return attended.output;
    }, preNorm);
    x = sublayerConnection(params, `${prefix}.sublayers.1`, x, (normed) =>
      feedForward(params, `${prefix}.feed_forward`, normed, activation), preNorm);
    layerOutputs.push(x);
  }
  return { hidden: layerNorm(x, params, "final_norm", eps), attention, scores, layerOutputs,
    values };
}

// The tied output layer: the hidden state times every token's embedding. (vocab,)
export const logitsAt = (model, hidden, row) =>
  outputScores(model.params, "tokens.lookup", hidden, row);

// --- The logit lens: what each layer would say if it were the last ---------------------------
// Each layer's output through the final norm and the tied output layer: per layer, per position,
// the `top` most probable next tokens [{id, p}]. The last layer's lens is the model's own output.
export function logitLens(model, ids, top = 3) {
  const { layerOutputs } = forward(model, ids);
  const { eps } = model.meta.config;
  return layerOutputs.map((x) => {
    const hidden = layerNorm(x, model.params, "final_norm", eps);
    return ids.map((_, row) => {
      const p = softmax(logitsAt(model, hidden, row));
      return topIds(p, top).map((id) => ({ id, p: p[id] }));
    });
  });
}

// --- Chapter 10's sampling ---------------------------------------------------------------------
// The seeded random numbers, the top-p and top-k filters, one draw and the distribution a
// token is drawn from are in core.js (the translator samples with them too).

// --- The poet's vocabulary: which characters of a prompt it knows -----------------------------
// Returns {ids} or {error}; the error names every character the poet never saw, once each.
export function checkPrompt(model, prompt, acrostic) {
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
        `The poet does not know ${which}: ${named} （模型没学过）. ` +
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
// A generator: yields {id, ids, logits} after each chosen character (logits: the scores it was
// drawn from, with the masks applied, before the temperature); returns the whole poem's ids
// (starting with <s>). `options.prefix`: characters forced at the first steps, the poem goes on
// from them. `options.keepLogits` also keeps the model's logits of every step (before
// any masking) in `options.steps`.
export function* writeSteps(model, prompt, options = {}) {
  const { temperature = 0.8, topP = 0.9, topK = null, seed = 0, acrostic = false } = options;
  if (!(temperature >= 0)) throw new Error(`temperature must be >= 0; got ${temperature}`);
  const checked = checkPrompt(model, prompt, acrostic);
  if (checked.error) throw new Error(checked.error);
  const { pad_id, boundary_id, unknown_id, verse_ends, config } = model.meta;
  const heads = acrostic ? checked.ids : [];
  const ids = [boundary_id, ...(acrostic ? [] : checked.ids)];
  const promptLength = ids.length - 1; // the characters given to continue
  const prefix = options.prefix ?? []; // characters forced after them
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
    const allowed = logits;
    let chosen;
    if (temperature > 0) {
      let scaled = topPFilter(logits.map((value) => value / temperature), topP);
      if (topK !== null) scaled = topKFilter(scaled, topK);
      chosen = drawToken(scaled, random);
    } else {
      chosen = argmax(logits);
    }
    // A forced character (the page's "what if") replaces the one chosen; the draw was made all
    // the same, so the later draws use the same random numbers as without forcing.
    if (written - promptLength < prefix.length) chosen = prefix[written - promptLength];
    if (chosen === boundary_id || offset >= config.max_len) break;
    ids.push(chosen);
    feed = [chosen];
    yield { id: chosen, ids, logits: allowed };
  }
  return ids;
}

export function write(model, prompt, options = {}) {
  const steps = writeSteps(model, prompt, options);
  for (;;) {
    const { done, value } = steps.next();
    if (done) return { ids: value, text: decode(model, value) };
  }
}

// Ids -> text, the special tokens (<pad>, <s>, <unk>) left out, as PoemVocabulary.decode.
export function decode(model, ids) {
  return ids.filter((id) => id > 2).map((id) => model.meta.tokens[id]).join("");
}
