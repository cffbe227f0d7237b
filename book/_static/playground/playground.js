// The playground page (book/playground.md): reads the reader's input, has the model of
// transformer.js run it in the page's Web Worker (worker.js), and shows the decoded outputs, the
// probabilities of each step and every attention map (page.js draws it).
import { topIds } from "./core.js";
import { distribution } from "./gpt.js";
import {
  Cancelled, ModelWorker, barsHtml, debounce, drillDownHtml, lensHtml, nextTask, readHash,
  rowOf, writeHash, drawAttentionMap, element, escapeHtml, here, megabytes,
  numberOptions, say as sayIn,
} from "./page.js";

const PAUSE_MS = 300; // typing: the model runs once the reader pauses this long
const TOP_TOKENS = 3;
const KINDS = ["encoder self-attention", "decoder self-attention", "decoder cross-attention"];
const KIND_NAMES = ["encoder", "decoder", "cross"]; // the attention map, as the hash names it
let pending = null; // a state read from the hash, applied once its task's model is loaded
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
    const cells = topIds(step.logProbs, TOP_TOKENS).map((id) => {
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
    { length: TOP_TOKENS },
    (_, i) => `<th scope="col">#${i + 1}</th>`,
  ).join("");
  return (
    `<table class="pg-steps"><thead><tr><th scope="col">step</th>${head}</tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table>`
  );
}

// --- The distribution of any step ----------------------------------------------------------
// Each output token (greedy's and beam's, the end token too) is a button with its step
// (0-based); clicking or tabbing to it opens the step's distribution: the softmax of its logits,
// the one greedy decoding and beam search chose from (temperature 1, no cut), and, with the
// panel's temperature and top-p, how sampling would reshape it (gpt.js's distribution).
const BARS = 10; // the most probable tokens shown; the rest are summed in one line
const outputs = {}; // "pg-greedy" / "pg-beam" -> {loaded, tokens, steps}
let open = null; // the open step: {output, step}

function tokenButtons(id, loaded, tokens) {
  const target = loaded.meta.target_tokens;
  return tokens
    .slice(1)
    .map((token, step) =>
      `<button type="button" class="pg-token" data-output="${id}" data-step="${step}" ` +
      `aria-label="step ${step}: ${escapeHtml(target[token])}">` +
      `${escapeHtml(shown(target[token]))}</button>`,
    )
    .join("");
}

function showDistribution(output, step) {
  const shownOutput = outputs[output];
  if (!shownOutput || !(step >= 0 && step < shownOutput.steps.length)) return;
  open = { output, step };
  const { loaded, tokens, steps } = shownOutput;
  const target = loaded.meta.target_tokens;
  const chosen = tokens[step + 1];
  const temperature = Number(element("pg-temperature").value);
  const topP = Number(element("pg-top-p").value);
  element("pg-distribution").hidden = false;
  for (const button of document.querySelectorAll(".pg-token")) {
    const isOpen = button.dataset.output === output && button.dataset.step === String(step);
    button.classList.toggle("pg-open", isOpen);
  }
  const which = output === "pg-greedy" ? "greedy decoding" : "beam search";
  element("pg-dist-title").textContent =
    `Step ${step} of ${which}: the distribution ${shown(target[chosen])} was chosen from`;
  const bars = element("pg-bars");
  if (!(temperature >= 0 && temperature <= 2) || !(topP > 0 && topP <= 1)) {
    bars.innerHTML = "";
    element("pg-dist-note").textContent = "Set a temperature from 0 to 2 and a top-p in (0, 1].";
    return;
  }
  const kept = distribution(steps[step].logits, temperature, topP);
  const rest = kept.slice(BARS).reduce((sum, { p }) => sum + p, 0);
  bars.innerHTML =
    barsHtml(kept.slice(0, BARS), (id) => shown(target[id]), chosen, "pg") +
    (kept.length > BARS
      ? `<li class="pg-rest">the other ${(kept.length - BARS).toLocaleString("en")} tokens: ` +
        `${(100 * rest).toFixed(1)}% together</li>`
      : "");
  bars.dataset.kept = String(kept.length);
  const plain = temperature === 1 && topP === 1;
  element("pg-dist-note").textContent =
    (plain
      ? `softmax(logits) over all ${kept.length.toLocaleString("en")} tokens: what ${which} ` +
        "chose from (it takes the most probable; beam search keeps the best sums of " +
        "log-probabilities). Change the temperature or top-p to see how sampling would " +
        "reshape it."
      : temperature === 0
        ? "Temperature 0: the most probable token, always (greedy)."
        : `Logits ÷ ${temperature}, softmax, then top-p ${topP} keeps ` +
          `${kept.length.toLocaleString("en")} tokens, renormalised to sum to 1: what ` +
          "sampling would draw from.") +
    (kept.some(({ id }) => id === chosen) ? "" : ` ${shown(target[chosen])} is not among them.`);
}

// One output (greedy or beam: the worker's {tokens, text, steps}) with its probabilities.
function showOutput(id, loaded, { tokens, text, steps }, score) {
  outputs[id] = { loaded, tokens, steps };
  element(`${id}-tokens`).innerHTML = tokenButtons(id, loaded, tokens);
  const total = steps.reduce((sum, step, index) => sum + step.logProbs[tokens[index + 1]], 0);
  element(`${id}-text`).textContent = text || "(empty)";
  element(`${id}-score`).textContent =
    `log-probability ${(score ?? total).toFixed(3)} ` +
    `(p = ${(100 * Math.exp(score ?? total)).toFixed(1)}%)`;
  element(`${id}-steps`).innerHTML = stepsTable(loaded, tokens, steps);
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
function attentionRows(loaded, sourcePieces, tokens, attention, scores) {
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
  const drill = { queries, keys, weights, scores: scores[kind][layer][head], kind, title };
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
    select.value = String(select.dataset.touched && keep <= last ? keep : last);
  }
  const q = Number(select.value);
  const maskName = drill.kind === KINDS[1] ? "look-ahead" : null;
  element("pg-drill").innerHTML = drillDownHtml(
    drill.keys, rowOf(drill.scores, q), rowOf(drill.weights, q),
    { query: drill.queries[q], maskName, what: drill.title },
  );
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

async function update() {
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
  saveState();
  const text = element("pg-input").value;
  const app = element("pg-app");
  app.dataset.translations = String(Number(app.dataset.translations || 0) + 1);
  busy(true);
  let result;
  try {
    result = await worker.request("translate", {
      url: modelUrl(element("pg-task").value), text, beamSize: beamSize(),
    });
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
  element("pg-distribution").hidden = true;
  open = null;
  showOutput("pg-greedy", loaded, result.greedy, null);
  showOutput("pg-beam", loaded, result.beam, result.beam.score);
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
  };
  fillControls(loaded);
  const target = loaded.meta.target_tokens;
  const reads = result.greedy.tokens.slice(0, -1).map((id, i) => `${i}: ${shown(target[id])}`);
  element("pg-lens").innerHTML = lensHtml(result.greedy.lens, reads, (id) => shown(target[id]));
  element("pg-lens").dataset.input = text;
  await nextTask(); // the outputs show before the chart is drawn, in a task of its own
  if (number !== running) return;
  drawAttention(attentionRows(loaded, last.sourcePieces, last.tokens, last.attention, last.scores), text);
}

const beamSize = () => Number(element("pg-beam-size").value);

// The page's state, written into the hash (a link to the page opens it so): the task, the
// input, the beam size and the attention map shown.
function saveState() {
  writeHash({
    task: element("pg-task").value,
    text: element("pg-input").value,
    beam: beamSize(),
    attn: KIND_NAMES[Number(element("pg-kind").value)],
    layer: element("pg-layer").value || null,
    head: element("pg-head").value || null,
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

function applyState(loaded, state) {
  if (state.has("text")) element("pg-input").value = state.get("text");
  setIfValid("pg-beam-size", state.get("beam"));
  const kind = KIND_NAMES.indexOf(state.get("attn"));
  if (kind !== -1) setIfValid("pg-kind", String(kind));
  fillControls(loaded);
  setIfValid("pg-layer", state.get("layer"));
  setIfValid("pg-head", state.get("head"));
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
      attentionRows(last.loaded, last.sourcePieces, last.tokens, last.attention, last.scores),
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
  element("pg-task").addEventListener("change", chooseTask);
  for (const id of ["pg-kind", "pg-layer", "pg-head"]) {
    element(id).addEventListener("change", () => {
      element(id).dataset.touched = "1";
      saveState();
      redrawAttention();
    });
  }
  for (const id of ["pg-greedy-tokens", "pg-beam-tokens"]) {
    const opened = (event) => {
      const button = event.target.closest?.(".pg-token");
      if (button) showDistribution(button.dataset.output, Number(button.dataset.step));
    };
    element(id).addEventListener("click", opened);
    element(id).addEventListener("focusin", opened);
  }
  element("pg-query").addEventListener("change", () => {
    element("pg-query").dataset.touched = "1";
    if (drilled) showDrill(drilled);
  });
  for (const id of ["pg-temperature", "pg-top-p"]) {
    element(id).addEventListener("input", () => open && showDistribution(open.output, open.step));
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
