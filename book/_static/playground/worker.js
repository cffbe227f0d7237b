// The playground's models in a Web Worker (a module worker, started by page.js's ModelWorker):
// the page's own thread only draws, so a long sentence or a long poem never freezes it.
//
// The page posts {id, op, args}; the worker answers {id, progress} any number of times (the
// download, the characters of a poem so far), then {id, result} or {id, error}. Each op is a
// function of OPS below. Models are loaded once per worker (their weights from the Cache API
// after the first visit: core.js's cachedBytes) and kept by URL.
import * as TransformerBook from "./transformer.js";
import * as PoetGPT from "./gpt.js";
import { distribution, softmax, topIds } from "./core.js";

const TOP_TOKENS = 3; // per step, the most probable tokens the steps' tables list

const models = new Map(); // URL of the JSON file -> the promise of its loaded model

function model(url, load, progress) {
  if (!models.has(url)) {
    const loading = load(url, (loaded, total) => progress({ loaded, total }));
    models.set(url, loading);
    loading.catch(() => models.delete(url)); // asked again, it tries again
  }
  return models.get(url);
}

const translatorModel = (url, progress = () => {}) =>
  model(url, TransformerBook.loadModel, progress);
const poetModel = (url, progress = () => {}) => model(url, PoetGPT.loadPoet, progress);

// Each step's scores with its TOP_TOKENS most probable tokens (top: [id]).
const withTop = (steps) =>
  steps.map((step) => ({ ...step, top: topIds(step.logProbs, TOP_TOKENS) }));

// Tokens up to and including the first end token (a finished beam is padded with it).
function untilEnd(tokens, endId) {
  const end = tokens.indexOf(endId, 1);
  return end === -1 ? tokens : tokens.slice(0, end + 1);
}

const OPS = {
  // An encoder-decoder task (dates, number words, the translator): its metadata.
  async loadTask({ url }, progress) {
    return { meta: (await translatorModel(url, progress)).meta };
  },

  // Chapter 10's greedy decoding and beam search of `text`, and one teacher-forced pass over
  // each output (chapter 9): the steps' logits and log-probabilities, every attention map.
  // `forced`: {output: "greedy" or "beam", prefix: the tokens forced at its first steps}, the
  // page's "what if": that output decoded again from them (the one without forcing kept too).
  async translate({ url, text, beamSize, forced = null }) {
    const loaded = await translatorModel(url);
    const encoded = TransformerBook.encodeText(loaded, text);
    if (encoded.error) return { error: encoded.error };
    const limit = TransformerBook.maxNewTokens(loaded, encoded.ids.length);
    const alpha = loaded.meta.length_penalty ?? 0;
    const { end_id: endId } = loaded.meta;
    const greedyOf = (prefix = []) => {
      const decoded = TransformerBook.greedyDecode(loaded, encoded.ids, limit, prefix);
      return { ...decoded, steps: withTop(decoded.steps) };
    };
    const beamOf = (prefix = []) => {
      const beam = TransformerBook.beamSearch(loaded, encoded.ids, limit, beamSize, alpha, prefix);
      const tokens = untilEnd(beam.tokens, endId);
      const seen = TransformerBook.inspect(loaded, encoded.ids, tokens);
      return { tokens, score: beam.score, steps: withTop(seen.steps), attention: seen.attention };
    };
    let started = performance.now();
    const greedy = greedyOf();
    const greedyMs = performance.now() - started;
    started = performance.now();
    const beam = beamOf();
    const beamMs = performance.now() - started;
    const greedySeen = TransformerBook.inspect(loaded, encoded.ids, greedy.tokens);
    const text_ = (tokens) => TransformerBook.decodeTokens(loaded, tokens);
    let forcedOutput = null;
    if (forced && forced.prefix?.length) {
      const output = forced.output === "beam" ? beamOf(forced.prefix) : greedyOf(forced.prefix);
      forcedOutput = { ...output, output: forced.output, text: text_(output.tokens) };
    }
    return {
      ids: encoded.ids,
      unknown: encoded.unknown ?? [],
      sourcePieces: TransformerBook.splitText(loaded, text),
      greedy: {
        tokens: greedy.tokens,
        text: text_(greedy.tokens),
        steps: greedy.steps,
        attention: greedySeen.attention,
        scores: greedySeen.scores,
        values: greedySeen.values,
        lens: TransformerBook.logitLens(loaded, encoded.ids, greedy.tokens),
      },
      beam: { ...beam, text: text_(beam.tokens) },
      forced: forcedOutput,
      greedyMs,
      beamMs,
    };
  },

  // Sampling (chapter 10's sample_decode) with the page's seeded random numbers: `options`
  // {temperature, topK, topP, seed}; `prefix`: tokens forced at the first steps.
  async sample({ url, text, options, prefix = [] }) {
    const loaded = await translatorModel(url);
    const encoded = TransformerBook.encodeText(loaded, text);
    if (encoded.error) return { error: encoded.error };
    const limit = TransformerBook.maxNewTokens(loaded, encoded.ids.length);
    const decoded = TransformerBook.sampleDecode(loaded, encoded.ids, limit, options, prefix);
    return {
      tokens: decoded.tokens,
      steps: withTop(decoded.steps),
      text: TransformerBook.decodeTokens(loaded, decoded.tokens),
    };
  },

  // The distribution one step draws from (core.js's distribution: ÷ temperature, top-p, top-k,
  // renormalised), most probable first, and each kept token's probability at temperature 1.
  async distribution({ logits, temperature, topP, topK = null }) {
    const kept = distribution(logits, temperature, topP, topK);
    const p = softmax(logits);
    const plain = {};
    for (const { id } of kept) plain[id] = p[id];
    return { kept, plain };
  },

  // The poet (chapter 15): its metadata.
  async loadPoet({ url }, progress) {
    return { meta: (await poetModel(url, progress)).meta };
  },

  // A poem, one character at a time: each step's ids, and the logits the character was drawn
  // from, go to the page as they are chosen.
  async write({ url, prompt, options }, progress) {
    const loaded = await poetModel(url);
    const steps = PoetGPT.writeSteps(loaded, prompt, options);
    let computing = 0;
    for (;;) {
      const started = performance.now();
      const { done, value } = steps.next();
      computing += performance.now() - started;
      if (done) return { ids: value, text: PoetGPT.decode(loaded, value), computingMs: computing };
      progress({ ids: value.ids.slice(), text: PoetGPT.decode(loaded, value.ids),
        logits: value.logits });
    }
  },

  // Every attention map over a written poem (one pass without the cache), and its logit lens.
  async poemAttention({ url, ids }) {
    const loaded = await poetModel(url);
    const { attention, scores, values } = PoetGPT.forward(loaded, ids, null, 0, true);
    return { attention, scores, values, lens: PoetGPT.logitLens(loaded, ids) };
  },
};

self.addEventListener("message", async ({ data: { id, op, args } }) => {
  try {
    const result = await OPS[op](args, (progress) => self.postMessage({ id, progress }));
    self.postMessage({ id, result });
  } catch (error) {
    self.postMessage({ id, error: error.message });
  }
});
