// The playground page (book/playground.md): reads the reader's input, has the model of
// transformer.js run it in the page's Web Worker (worker.js), and shows the decoded outputs, the
// probabilities of each step and every attention map (page.js draws it).
// The page imports no model code (core.js, transformer.js): the worker alone loads it, so each
// file is fetched once; the distributions of the steps are computed there too.
import {
  Cancelled, ModelWorker, arrowKeys, barsHtml, bringIntoView, counted, debounce, drillDownHtml,
  lensHtml, tokens as rovingTokens,
  nextTask, readHash, rowOf, writeHash, drawAttentionMap, element, escapeHtml, here, megabytes,
  numberOptions, say as sayIn, valueSideHtml,
} from "./page.js";

const PAUSE_MS = 300; // typing: the model runs once the reader pauses this long
const KINDS = ["encoder self-attention", "decoder self-attention", "decoder cross-attention"];
const KIND_NAMES = ["encoder", "decoder", "cross"]; // the attention map, as the hash names it
let pending = null; // a state read from the hash, applied once its task's model is loaded
let pendingQuery = null; // a query to unfold once the map is drawn
const worker = new ModelWorker();
const models = {}; // task name -> the promise of its loaded model's {meta}
const sizes = {}; // task name -> bytes downloaded when it is chosen (weights and JSON)

const shown = (token) => (token === " " ? "␣" : token); // a visible space

// A message instead of the results, or (text "") the results.
function say(text) {
  sayIn("pg-message", text);
  element("pg-results").hidden = Boolean(text);
}

const modelUrl = (name) => new URL(`${name}.json`, here).href;

// A task's model, loaded in the worker the first time it is chosen, with its progress on the
// page; {meta}.
function model() {
  const name = element("pg-task").value;
  if (!models[name]) {
    const loading = element("pg-loading");
    const progress = ({ loaded, total }) => {
      loading.hidden = false;
      loading.textContent =
        `Loading the model's weights: ${megabytes(loaded)} of ${megabytes(total)}…`;
    };
    loadingTasks++;
    models[name] = worker
      .request("loadTask", { url: modelUrl(name) }, progress)
      .finally(() => {
        loadingTasks--;
        loading.hidden = true;
      })
      .catch((error) => {
        delete models[name]; // choosing the task again tries again
        throw error;
      });
  }
  return models[name];
}

// Per step: the token chosen and the TOP_TOKENS most probable, with their probabilities.
function stepsTable(loaded, tokens, steps) {
  const rows = steps.map((step, index) => {
    const cells = step.top.map((id) => {
      const percent = 100 * Math.exp(step.logProbs[id]);
      const chosen = id === tokens[index + 1] ? " pg-chosen" : "";
      return (
        `<td class="pg-cell${chosen}" title="p = ${percent.toFixed(2)}%">` +
        `<code>${escapeHtml(shown(loaded.meta.target_tokens[id]))}</code> ` +
        `<span class="pg-bar" style="width:${(percent * 0.25).toFixed(1)}px"></span>` +
        `${percent < 99.95 ? percent.toFixed(1) : "100"}%</td>`
      );
    });
    return `<tr><th scope="row">${index + 1}</th>${cells.join("")}</tr>`;
  });
  const head = Array.from(
    { length: steps[0]?.top.length ?? 3 },
    (_, i) => `<th scope="col">#${i + 1}</th>`,
  ).join("");
  return (
    `<table class="pg-steps"><thead><tr><th scope="col">step</th>${head}</tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table>`
  );
}

// --- The distribution of any step ----------------------------------------------------------
// Each output token (greedy's, beam's and the sample's, the end token too) is a button with its
// step (data-step, counted from 0 as the arrays are; the reader sees steps counted from 1);
// clicking or tabbing to it opens the step's distribution below its output: reshaped by the
// sampling controls (temperature, top-k, top-p: what sampling draws from), with the softmax at
// temperature 1 (what greedy decoding and beam search chose from) as dashed outlines. Clicking a
// bar forces that token at that step and decodes on ("what if").
const OUTPUTS = { "pg-greedy": "greedy", "pg-beam": "beam", "pg-sample": "sample" };
const outputs = {}; // "pg-greedy" / "pg-beam" / "pg-sample" -> {loaded, tokens, steps}
let open = null; // the open step: {output, step}
// The "what if": {output: "greedy" / "beam" / "sample", prefix: [ids], marks: steps forced
// (from 0), text: the input it was forced on}, or null.
let force = null;
let refocus = false; // after forcing, the focus goes to the forced token

function tokenButtons(id, loaded, tokens, marks = []) {
  const target = loaded.meta.target_tokens;
  return tokens
    .slice(1)
    .map((token, step) => {
      const forced = marks.includes(step);
      return (
        `<button type="button" class="pg-token${forced ? " forced" : ""}" data-output="${id}" ` +
        `data-step="${step}" data-id="${token}"${forced ? " data-forced" : ""} ` +
        `aria-label="step ${step + 1}${forced ? " (forced)" : ""}: ` +
        `${escapeHtml(target[token])}">${escapeHtml(shown(target[token]))}</button>`
      );
    })
    .join("");
}

const WHICH = { "pg-greedy": "greedy decoding", "pg-beam": "beam search", "pg-sample": "sampling" };

// The sampling controls, checked: {temperature, topK, topP, seed} or {error}.
function sampling() {
  const temperature = Number(element("pg-temperature").value);
  const topP = Number(element("pg-top-p").value);
  const k = element("pg-top-k").value.trim();
  const topK = k === "" || k === "0" ? null : Number(k);
  const seed = Number(element("pg-seed").value);
  if (!(temperature >= 0 && temperature <= 2) || !(topP > 0 && topP <= 1)) {
    return { error: "Set a temperature from 0 to 2 and a top-p in (0, 1]." };
  }
  if (topK !== null && !(Number.isInteger(topK) && topK >= 1)) {
    return { error: "top-k is a whole number, 1 or more (empty: no top-k)." };
  }
  if (!(Number.isInteger(seed) && seed >= 0)) {
    return { error: "The seed is a whole number, 0 or more." };
  }
  return { temperature, topK, topP, seed };
}

let drawing = 0; // the number of the latest distribution asked of the worker
async function showDistribution(output, step, { scroll = true } = {}) {
  const shownOutput = outputs[output];
  if (!shownOutput || !(step >= 0 && step < shownOutput.steps.length)) return;
  open = { output, step };
  const { loaded, tokens, steps } = shownOutput;
  const target = loaded.meta.target_tokens;
  const chosen = tokens[step + 1];
  const panel = element("pg-distribution");
  // The panel opens right under the output whose token was chosen, and comes into view.
  const section = element(`${output}-score`);
  if (panel.previousElementSibling !== section) section.after(panel);
  panel.hidden = false;
  for (const button of document.querySelectorAll(".pg-token")) {
    const isOpen = button.dataset.output === output && button.dataset.step === String(step);
    button.classList.toggle("pg-open", isOpen);
  }
  const forcedHere = force?.output === OUTPUTS[output] && force.marks.includes(step);
  element("pg-dist-title").textContent =
    `Step ${step + 1} of ${WHICH[output]}${forcedHere ? " (forced)" : ""}: the distribution ` +
    `${shown(target[chosen])} was ${forcedHere ? "forced into" : "chosen from"}`;
  if (scroll) bringIntoView(panel);
  saveState();
  const bars = element("pg-bars");
  const settings = sampling();
  if (settings.error) {
    bars.innerHTML = "";
    element("pg-dist-note").textContent = settings.error;
    return;
  }
  const { temperature, topP, topK } = settings;
  const number = ++drawing;
  let kept;
  let plain;
  try {
    ({ kept, plain } = await worker.request("distribution",
      { logits: steps[step].logits, temperature, topP, topK }));
  } catch (error) {
    if (!(error instanceof Cancelled)) say(`the model failed: ${error.message}`);
    return;
  }
  if (number !== drawing) return; // another step, or other settings, since
  const reshaped = !(temperature === 1 && topP === 1 && topK === null);
  bars.innerHTML = barsHtml(kept, (id) => shown(target[id]), chosen, "pg",
    { plain: reshaped ? plain : null, force: step + 1 });
  bars.dataset.kept = String(kept.length);
  bars.dataset.drawn = `${output}|${step}|${temperature}|${topP}|${topK}`;
  const cuts = [...(topP < 1 ? [`top-p ${topP}`] : []),
    ...(topK === null ? [] : [`top-k ${topK}`])];
  element("pg-dist-note").textContent =
    (!reshaped
      ? `softmax(logits) over all ${counted(kept.length, "token")}: what greedy decoding and ` +
        "beam search chose from (greedy takes the most probable; beam search keeps the best " +
        "sums of log-probabilities), and what sampling draws from at temperature 1."
      : temperature === 0
        ? "Temperature 0: the most probable token, always (greedy)."
        : `Logits ÷ ${temperature}, softmax` +
          (cuts.length
            ? `, then ${cuts.join(", then ")} keeps ${counted(kept.length, "token")}, ` +
              "renormalised to sum to 1"
            : ` over all ${counted(kept.length, "token")}`) +
          ": what sampling draws from (the dashed outlines: temperature 1, what greedy decoding " +
          "and beam search chose from).") +
    (kept.some(({ id }) => id === chosen) ? "" : ` ${shown(target[chosen])} is not among them.`) +
    " Click a token to force it here and decode on.";
  if (scroll) bringIntoView(panel); // now at its full height
}

// "What if": the token `id` forced at `step` of the open output; the output is decoded again
// from it (the tokens before it kept), and the one before forcing stays beside it.
function forceToken(id) {
  if (!open) return;
  const { output, step } = open;
  const name = OUTPUTS[output];
  const { tokens } = outputs[output];
  const marks = force?.output === name ? force.marks.filter((s) => s < step) : [];
  force = { output: name, prefix: [...tokens.slice(1, step + 1), id], marks: [...marks, step],
    text: last.text };
  open = { output, step };
  refocus = true;
  update({ keepOpen: true });
}

function clearForce() {
  force = null;
  refocus = open !== null; // the "Undo" button hides: the focus goes to the open token
  update({ keepOpen: true });
}

// One output (greedy, beam or the sample: the worker's {tokens, text, steps}) with its
// probabilities; `original`: the text before forcing, shown beside it.
function showOutput(id, loaded, { tokens, text, steps }, score, original = null, marks = []) {
  outputs[id] = { loaded, tokens, steps };
  element(`${id}-tokens`).innerHTML = tokenButtons(id, loaded, tokens, marks);
  rovingTokens(element(`${id}-tokens`), ".pg-token");
  const total = steps.reduce((sum, step, index) => sum + step.logProbs[tokens[index + 1]], 0);
  element(`${id}-text`).textContent = text || "(empty)";
  element(`${id}-score`).textContent =
    `log-probability ${(score ?? total).toFixed(3)} ` +
    `(p = ${(100 * Math.exp(score ?? total)).toFixed(1)}%)`;
  const steps_ = element(`${id}-steps`);
  if (steps_) steps_.innerHTML = stepsTable(loaded, tokens, steps);
  const before = element(`${id}-original`);
  before.hidden = original === null;
  if (original !== null) {
    const at = marks.map((step) => step + 1).join(", ");
    element(`${id}-original-text`).textContent =
      `Step${marks.length === 1 ? "" : "s"} ${at} forced (marked). Without forcing: ` +
      `${original || "(empty)"}`;
  }
}

// For an example: its held-out answer (the translator: the test set's translations), which
// decoding wrote it, and what is wrong when the model gets it wrong (said plainly).
function showAnswer(loaded, text, outputs) {
  const { meta } = loaded;
  const note = element("pg-answer");
  const index = meta.examples.indexOf(text);
  const answer = index === -1 ? null : meta.example_answers?.[index];
  note.hidden = answer == null;
  if (answer == null) return;
  const answers = [].concat(answer);
  const right = outputs.map(([, output]) => answers.includes(output));
  const verdicts = outputs.map(
    ([name, output], i) => `${name} ${right[i] ? "writes exactly that" : `writes ${output}`}`,
  );
  const said = verdicts.join("; ");
  const label = meta.answer_label ?? "The right answer";
  const wrong = meta.example_notes?.[index];
  const ended = (text) => (/[.?!。？！]$/.test(text) ? text : `${text}.`); // no "。."
  note.textContent =
    `${ended(`${label}: ${answers.join(" / ")}`)} ${ended(said[0].toUpperCase() + said.slice(1))}` +
    (wrong
      ? ` The model gets this one wrong: ${wrong}.`
      : right.includes(false)
        ? " The model gets this one wrong."
        : "");
  note.classList.toggle("pg-wrong", Boolean(wrong) || right.includes(false));
}

// What the page says about the model: its training and its held-out score.
function describe(loaded) {
  const { training, test_scores: scores } = loaded.meta;
  if (scores) {
    const bleu = (name) => scores[name].bleu.toFixed(2);
    return (
      `Chapter 14's translator, its weights in 8 bits: on the ${scores.sentences.toLocaleString(
        "en",
      )} test sentences (never trained on) it scores BLEU ${bleu("8-bit beam")} with beam ` +
      `search and ${bleu("8-bit greedy")} greedily (the full model: ${bleu("full beam")} and ` +
      `${bleu("full greedy")}).`
    );
  }
  if (!training) return "";
  const percent = (100 * training.held_out_exact_match).toFixed(1);
  const pairs = training.held_out_pairs.toLocaleString("en");
  return (
    `This model was trained for ${training.steps.toLocaleString("en")} steps; greedy ` +
    `decoding gets ${percent}% of ${pairs} held-out inputs (never trained on) exactly right.`
  );
}

// The attention map picked with the controls, as a tidy table: one row per (query, key) cell.
function attentionRows(loaded, sourcePieces, tokens, attention, scores, values) {
  const kind = KINDS[Number(element("pg-kind").value)];
  const layer = Number(element("pg-layer").value);
  const head = Number(element("pg-head").value);
  const weights = attention[kind][layer][head]; // (queries, keys)
  const target = loaded.meta.target_tokens;
  const sourceLabels = sourcePieces.map(
    (piece, i) => `${i}: ${shown(piece)}`,
  );
  // Decoder position i reads tokens[i] and predicts tokens[i + 1].
  const decoderLabels = tokens
    .slice(0, -1)
    .map((id, i) => `${i}: ${shown(target[id])} → ${shown(target[tokens[i + 1]])}`);
  const queries = kind === KINDS[0] ? sourceLabels : decoderLabels;
  const keys = kind === KINDS[1] ? decoderLabels : sourceLabels;
  const rows = [];
  for (let q = 0; q < weights.rows; q++) {
    for (let k = 0; k < weights.cols; k++) {
      rows.push({
        q,
        k,
        query: queries[q],
        key: keys[k],
        w: Math.round(1000 * weights.data[q * weights.cols + k]) / 10,
      });
    }
  }
  const title = `${kind}, layer ${layer}, head ${head}`;
  const drill = { queries, keys, weights, scores: scores[kind][layer][head], kind, title,
    values: values[kind][layer], head, heads: attention[kind][layer].length };
  return { rows, title, drill };
}

// The map unfolded for the query chosen: its scores, mask and weights (page.js).
let drilled = null;
function showDrill(drill) {
  drilled = drill;
  const select = element("pg-query");
  if (select.options.length !== drill.queries.length) {
    const keep = Number(select.value);
    select.innerHTML = drill.queries
      .map((label, q) => `<option value="${q}">${escapeHtml(label)}</option>`)
      .join("");
    const last = drill.queries.length - 1;
    const asked = pendingQuery === null ? NaN : Number(pendingQuery);
    if (Number.isInteger(asked) && asked >= 0 && asked <= last) {
      select.value = String(asked);
      select.dataset.touched = "1";
    } else {
      select.value = String(select.dataset.touched && keep <= last ? keep : last);
    }
    pendingQuery = null;
  }
  const q = Number(select.value);
  const maskName = drill.kind === KINDS[1] ? "look-ahead" : null;
  const weights = rowOf(drill.weights, q);
  element("pg-drill").innerHTML = drillDownHtml(
    drill.keys, rowOf(drill.scores, q), weights,
    { query: drill.queries[q], maskName, what: drill.title },
  ) + valueSideHtml(drill.keys, weights, drill.values,
    { q, head: drill.head, heads: drill.heads, query: drill.queries[q] });
  element("pg-drill").dataset.drawn = `${drill.title}|${q}`;
}

function drawAttention({ rows, title, drill }, text) {
  showDrill(drill);
  const container = element("pg-attention");
  const size = Math.max(140, Math.min(340, container.clientWidth - 110));
  const options = { title, size, keyTitle: "key (attended to)", queryTitle: "query (attending)" };
  const marks = (drawing) => ({ drawn: String(drawing), input: text }); // input: what it shows
  drawAttentionMap(container, rows, options, marks).catch((error) =>
    say(`could not draw the attention map: ${error.message}`),
  );
}

let last = null; // the latest decoding, redrawn when only the attention controls change
let running = 0; // the number of the latest translation: an older one's result is dropped
let translating = false; // a translation is in the worker
let loadingTasks = 0; // models being loaded in the worker (never cancelled by typing)

// Shows that a translation is running (and can be stopped), or not; or what stopped it.
function busy(on, said = "") {
  translating = on;
  element("pg-stop").hidden = !on;
  sayIn("pg-working", on ? "Translating…" : said);
}

async function update({ keepOpen = false } = {}) {
  const number = ++running;
  // An older translation is stopped, not waited for (unless a model is loading beside it).
  if (translating && !loadingTasks) worker.cancel();
  let loaded;
  try {
    loaded = await model();
  } catch (error) {
    if (!(error instanceof Cancelled)) {
      say(`could not load the model (${error.message}); serve the book over http`);
    }
    return;
  }
  if (number !== running) return;
  const text = element("pg-input").value;
  if (force && force.text !== text) force = null; // a new input: nothing forced
  if (!keepOpen) open = null;
  saveState();
  const app = element("pg-app");
  app.dataset.translations = String(Number(app.dataset.translations || 0) + 1);
  busy(true);
  let result;
  let sampled;
  const url = modelUrl(element("pg-task").value);
  const settings = sampling();
  try {
    const forced = force && force.output !== "sample" ? force : null;
    result = await worker.request("translate", { url, text, beamSize: beamSize(), forced });
    sampled = result.error || settings.error ? null : await drawSamples(url, text, settings);
  } catch (error) {
    if (number === running) {
      busy(false);
      if (!(error instanceof Cancelled)) say(`the model failed: ${error.message}`);
    }
    return;
  }
  if (number !== running) return; // the reader has typed on
  busy(false);
  if (result.error) {
    say(result.error);
    return;
  }
  say("");
  const notice = element("pg-notice");
  notice.hidden = !result.unknown.length;
  if (result.unknown.length) {
    const pieces = result.unknown.map((piece) => JSON.stringify(piece)).join(", ");
    notice.textContent = `Read as <unk>, unknown to the English vocabulary: ${pieces}.`;
  }
  const keep = keepOpen ? open : null;
  element("pg-distribution").hidden = true;
  open = null;
  const marks = (name) => (force?.output === name ? force.marks : []);
  const greedy = force?.output === "greedy" && result.forced ? result.forced : result.greedy;
  const beam = force?.output === "beam" && result.forced ? result.forced : result.beam;
  showOutput("pg-greedy", loaded, greedy, null, greedy === result.greedy ? null :
    result.greedy.text, marks("greedy"));
  showOutput("pg-beam", loaded, beam, beam.score, beam === result.beam ? null : result.beam.text,
    marks("beam"));
  showSample(loaded, sampled, settings.error);
  showAnswer(loaded, text, [
    ["greedy decoding", result.greedy.text],
    ["beam search", result.beam.text],
  ]);
  element("pg-timing").textContent =
    `In this browser, greedy decoding took ${result.greedyMs.toFixed(1)} ms and beam search ` +
    `${result.beamMs.toFixed(1)} ms.`;
  last = {
    loaded,
    text,
    sourcePieces: result.sourcePieces,
    tokens: result.greedy.tokens,
    attention: result.greedy.attention,
    scores: result.greedy.scores,
    values: result.greedy.values,
  };
  fillControls(loaded);
  const target = loaded.meta.target_tokens;
  const reads = result.greedy.tokens.slice(0, -1).map((id, i) => `${i}: ${shown(target[id])}`);
  element("pg-lens").innerHTML = lensHtml(result.greedy.lens, reads, (id) => shown(target[id]));
  element("pg-lens").dataset.input = text;
  const step = keep ?? pendingStep;
  pendingStep = null;
  if (step) showDistribution(step.output, step.step, { scroll: Boolean(keep) });
  if (keep && refocus) {
    // The bar that was clicked is gone: the focus goes to the token it forced.
    refocus = false;
    document.querySelector(`.pg-token[data-output="${keep.output}"][data-step="${keep.step}"]`)
      ?.focus({ preventScroll: true });
  }
  await nextTask(); // the outputs show before the chart is drawn, in a task of its own
  if (number !== running) return;
  drawAttention(attentionRows(loaded, last.sourcePieces, last.tokens, last.attention, last.scores,
    last.values), text);
}

// The sample (and, when the sample is forced, the one without forcing).
async function drawSamples(url, text, settings) {
  const options = { temperature: settings.temperature, topK: settings.topK,
    topP: settings.topP, seed: settings.seed };
  const plain = await worker.request("sample", { url, text, options });
  if (force?.output !== "sample") return { sample: plain, original: null };
  const forced = await worker.request("sample", { url, text, options, prefix: force.prefix });
  return { sample: forced, original: plain };
}

function showSample(loaded, sampled, error) {
  element("pg-sample-message").textContent = error ?? "";
  element("pg-sample-message").hidden = !error;
  if (!sampled) return;
  const { sample, original } = sampled;
  showOutput("pg-sample", loaded, sample, null, original?.text ?? null,
    force?.output === "sample" ? force.marks : []);
}

// Only the sample again (its controls changed): greedy decoding and beam search stay.
async function resample() {
  if (!last) return;
  const settings = sampling();
  saveState();
  if (settings.error) {
    showSample(last.loaded, null, settings.error);
    if (open) showDistribution(open.output, open.step, { scroll: false });
    return;
  }
  const number = ++running;
  let sampled;
  try {
    sampled = await drawSamples(modelUrl(element("pg-task").value), last.text, settings);
  } catch (error) {
    if (!(error instanceof Cancelled)) say(`the model failed: ${error.message}`);
    return;
  }
  if (number !== running) return;
  showSample(last.loaded, sampled, null);
  saveState();
  if (open) showDistribution(open.output, open.step, { scroll: false });
}

const beamSize = () => Number(element("pg-beam-size").value);

// The page's state, written into the hash (a link to the page opens it so): the task, the
// input, the beam size, the sampling controls, a forced path, the open step, the attention map
// shown and its query. Steps are counted from 1, as the page shows them.
function saveState() {
  writeHash({
    task: element("pg-task").value,
    text: element("pg-input").value,
    beam: beamSize(),
    // the sampling controls, where they differ from their defaults
    ...Object.fromEntries(Object.entries(SAMPLING).map(([name, [id, plain]]) => {
      const value = element(id).value.trim();
      return [name, value === plain || (name === "top_k" && value === "0") ? null : value];
    })),
    force: force ? [force.output, ...force.prefix.map((id, step) =>
      `${id}${force.marks.includes(step) ? "*" : ""}`)].join(".") : null,
    step: open ? `${OUTPUTS[open.output]}.${open.step + 1}` : null,
    attn: KIND_NAMES[Number(element("pg-kind").value)],
    layer: element("pg-layer").value || null,
    head: element("pg-head").value || null,
    // a query the link asked for stays in it until the drill-down opens on it
    query: element("pg-query").dataset.touched ? element("pg-query").value : pendingQuery,
  });
}

// A state read from the hash, for the controls it names (a value out of range is ignored).
function setIfValid(id, value) {
  const select = element(id);
  if (value != null && [...select.options].some((option) => option.value === value)) {
    select.value = value;
    select.dataset.touched = "1";
  }
}

// The sampling controls in the hash: name -> [the control, its default value].
const SAMPLING = { temperature: ["pg-temperature", "1"], top_k: ["pg-top-k", ""],
  top_p: ["pg-top-p", "1"], seed: ["pg-seed", "0"] };
let pendingStep = null; // a step to open once the outputs are shown

function applyState(loaded, state) {
  if (state.has("text")) element("pg-input").value = state.get("text");
  setIfValid("pg-beam-size", state.get("beam"));
  const kind = KIND_NAMES.indexOf(state.get("attn"));
  if (kind !== -1) setIfValid("pg-kind", String(kind));
  fillControls(loaded);
  setIfValid("pg-layer", state.get("layer"));
  setIfValid("pg-head", state.get("head"));
  for (const [name, [id, plain]] of Object.entries(SAMPLING)) {
    element(id).value = state.get(name) ?? plain;
  }
  force = null;
  const forced = (state.get("force") ?? "").split(".");
  const vocabulary = loaded.meta.target_tokens.length;
  if (Object.values(OUTPUTS).includes(forced[0]) && forced.length > 1) {
    const prefix = forced.slice(1).map((piece) => Number(piece.replace("*", "")));
    const marks = forced.slice(1).flatMap((piece, step) => (piece.endsWith("*") ? [step] : []));
    if (prefix.every((id) => Number.isInteger(id) && id >= 0 && id < vocabulary) && marks.length) {
      force = { output: forced[0], prefix, marks, text: element("pg-input").value };
    }
  }
  const [output, step] = (state.get("step") ?? "").split(".");
  const id = Object.keys(OUTPUTS).find((key) => OUTPUTS[key] === output);
  pendingStep = id && Number(step) >= 1 ? { output: id, step: Number(step) - 1 } : null;
  pendingQuery = state.get("query");
}

function fillControls(loaded) {
  const { num_layers, heads } = loaded.meta.config;
  for (const [id, count] of [
    ["pg-layer", num_layers],
    ["pg-head", heads],
  ]) {
    const select = element(id);
    if (select.options.length === count) continue;
    const keep = Math.min(Number(select.value) || 0, count - 1);
    select.innerHTML = numberOptions(count);
    select.value = String(id === "pg-layer" && !select.dataset.touched ? count - 1 : keep);
  }
}

function redrawAttention() {
  if (last && !element("pg-results").hidden) {
    drawAttention(
      attentionRows(last.loaded, last.sourcePieces, last.tokens, last.attention, last.scores,
        last.values),
      last.text,
    );
  }
}

function updateBeamTitle(meta) {
  element("pg-beam-title").textContent =
    `Beam search (${beamSize()} beams` +
    (meta.length_penalty ? `, length penalty α = ${meta.length_penalty})` : ")");
}

async function chooseTask() {
  const task = element("pg-task").value;
  try {
    const loaded = await model();
    if (element("pg-task").value !== task) return; // another task was chosen meanwhile
    const examples = loaded.meta.examples;
    element("pg-input").value = examples[0];
    if (pending) applyState(loaded, pending);
    pending = null;
    // Input longer than max_source_len is refused with a message naming the limit; the box
    // only stops a runaway paste.
    element("pg-input").maxLength = 4000;
    element("pg-examples").innerHTML = examples
      .map(
        (example) => `<button type="button" class="pg-example">${escapeHtml(example)}</button>`,
      )
      .join(" ");
    // Characters run together; words are listed with spaces (the specials <pad>, <s>, </s>
    // are left out).
    const { meta } = loaded;
    const separator = meta.source_separator || "";
    const known = element("pg-known");
    if (meta.tokenizer) {
      // Thousands of tokens: counted, not listed.
      known.textContent =
        `${(meta.source_tokens.length - 4).toLocaleString("en")} English tokens (chapter ` +
        `13's byte-pair encoding; </w> ends a word) in, ` +
        `${(meta.target_tokens.length - 4).toLocaleString("en")} Chinese characters out`;
    } else {
      known.innerHTML = 'Tokens it knows: <code id="pg-vocabulary"></code>';
      element("pg-vocabulary").textContent = meta.source_tokens
        .slice(3)
        .map(shown)
        .join(separator);
    }
    element("pg-unit").textContent = meta.tokenizer ? "tokens" : separator ? "words" : "characters";
    element("pg-limit").textContent = String(meta.max_source_len);

    element("pg-about").textContent = describe(loaded);
    updateBeamTitle(meta);
  } catch (error) {
    if (!(error instanceof Cancelled)) {
      say(`could not load the model (${error.message}); serve the book over http`);
    }
    return;
  }
  await update();
}

async function start() {
  let manifest;
  try {
    manifest = await (await fetch(new URL("manifest.json", here))).json();
  } catch (error) {
    say(`could not load the playground's models (${error.message}); serve the book over http`);
    return;
  }
  // Each task with what choosing it downloads: its weights and its JSON file.
  element("pg-task").innerHTML = manifest.tasks
    .map((task) => {
      sizes[task.name] = task.bytes + (task.json_bytes ?? 0);
      const title = `${task.title} (${megabytes(sizes[task.name])})`;
      return `<option value="${task.name}">${escapeHtml(title)}</option>`;
    })
    .join("");
  element("pg-input").addEventListener("input", debounce(update, PAUSE_MS));
  element("pg-stop").addEventListener("click", () => {
    running++; // what the stopped translation would have shown is dropped
    worker.cancel();
    busy(false, "Stopped: change the input to translate again.");
  });
  element("pg-task").addEventListener("change", () => {
    force = null;
    chooseTask();
  });
  // The translator first: the page's main model (a hash may choose another task).
  if (manifest.tasks.some((task) => task.name === "translator")) {
    element("pg-task").value = "translator";
  }
  for (const id of ["pg-kind", "pg-layer", "pg-head"]) {
    element(id).addEventListener("change", () => {
      element(id).dataset.touched = "1";
      saveState();
      redrawAttention();
    });
  }
  for (const id of ["pg-greedy-tokens", "pg-beam-tokens", "pg-sample-tokens"]) {
    const opened = (event) => {
      const button = event.target.closest?.(".pg-token");
      if (button) showDistribution(button.dataset.output, Number(button.dataset.step));
    };
    element(id).addEventListener("click", opened);
    element(id).addEventListener("focusin", opened);
    arrowKeys(element(id), ".pg-token");
  }
  element("pg-query").addEventListener("change", () => {
    element("pg-query").dataset.touched = "1";
    saveState();
    if (drilled) showDrill(drilled);
  });
  // The sampling controls: the sample is drawn again (and the open step's bars redrawn).
  const resampleSoon = debounce(resample, PAUSE_MS);
  for (const id of ["pg-temperature", "pg-top-p", "pg-top-k", "pg-seed"]) {
    element(id).addEventListener("input", resampleSoon);
  }
  element("pg-draw-again").addEventListener("click", () => {
    element("pg-seed").value = String(Math.trunc(Number(element("pg-seed").value) || 0) + 1);
    resample();
  });
  element("pg-bars").addEventListener("click", (event) => {
    const bar = event.target.closest?.("[data-force]");
    if (bar) forceToken(Number(bar.dataset.force));
  });
  for (const id of Object.keys(OUTPUTS)) {
    element(`${id}-unforce`).addEventListener("click", clearForce);
  }
  element("pg-beam-size").addEventListener("change", async () => {
    updateBeamTitle((await model()).meta);
    update();
  });
  // A link to another state of the page (the hash changed): that state, as on opening.
  window.addEventListener("hashchange", () => openState(readHash()));
  element("pg-examples").addEventListener("click", (event) => {
    if (event.target.classList.contains("pg-example")) {
      element("pg-input").value = event.target.textContent;
      update();
    }
  });
  window.addEventListener("resize", debounce(redrawAttention, 150));
  await openState(readHash());
}

// Opens a state (the hash's): its task, then (once loaded) its input and controls.
function openState(state) {
  pending = state;
  setIfValid("pg-task", state.get("task"));
  return chooseTask();
}

start(); // a module runs once the page is parsed
