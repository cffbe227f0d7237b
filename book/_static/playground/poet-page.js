// The poem page (book/playground_poems.md): loads the poet when the reader asks, has gpt.js
// write a poem one character at a time in the page's Web Worker (worker.js), and draws the
// attention map of the layer and head chosen over the written poem (page.js draws it).
import * as PoetGPT from "./gpt.js";
import {
  Cancelled, ModelWorker, barsHtml, debounce, drawAttentionMap, drillDownHtml, element,
  escapeHtml, here, lensHtml, megabytes, numberOptions, readHash, rowOf, say as sayIn, writeHash,
} from "./page.js";

const DELAY_MS = 40; // between two characters on the screen (the model is faster)
const worker = new ModelWorker();
const poetUrl = new URL("poet.json", here).href;
let model = null; // {meta, ids}: what the page needs of the poet (the weights are in the worker)
let loading = null;
let writing = 0; // the number of the latest poem: an older one stops when a new one starts
let stopped = 0; // the number of the poem the reader stopped
let last = null; // the latest finished poem's ids, for the attention controls

const say = (text) => sayIn("poet-message", text);

async function load() {
  if (loading) return loading;
  const button = element("poet-load");
  const progress = element("poet-progress");
  const status = element("poet-status");
  button.disabled = true;
  progress.hidden = false;
  status.textContent = "loading…";
  const shown = ({ loaded: received, total }) => {
    progress.value = received / total;
    status.textContent = `${megabytes(received)} of ${megabytes(total)}`;
  };
  loading = worker
    .request("loadPoet", { url: poetUrl }, shown)
    .then(({ meta }) => {
      const loaded = { meta, ids: new Map(meta.tokens.map((token, id) => [token, id])) };
      model = loaded;
      const { bytes } = loaded.meta.weights;
      const characters = (loaded.meta.tokens.length - 3).toLocaleString("en");
      status.textContent =
        `loaded: ${megabytes(bytes)} of float16 weights, ${characters} characters`;
      progress.hidden = true;
      describe(loaded.meta);
      fillControls(loaded.meta);
      applyLayerAndHead();
      element("poet-form").hidden = false;
      return loaded;
    })
    .catch((error) => {
      loading = null;
      button.disabled = false;
      progress.hidden = true;
      status.textContent = "";
      say(`could not load the poet (${error.message}); serve the book over http`);
    });
  return loading;
}

function describe(meta) {
  const { steps, batch_size, held_out_perplexity } = meta.training;
  element("poet-about").textContent =
    `This poet was trained for ${steps} steps of ${batch_size} poems ` +
    `(${meta.config.layers} layers, d_model ${meta.config.d_model}, ` +
    `${meta.config.heads} heads); its held-out perplexity is ${held_out_perplexity.toFixed(1)}.`;
}

function fillControls(meta) {
  element("poet-layer").innerHTML = numberOptions(meta.config.layers);
  element("poet-head").innerHTML = numberOptions(meta.config.heads);
  element("poet-layer").value = String(meta.config.layers - 1);
  element("poet-examples").innerHTML = meta.examples
    .map(
      ({ prompt, acrostic }) =>
        `<button type="button" class="poet-example" data-acrostic="${acrostic}">` +
        `${prompt}</button>`,
    )
    .join(" ");
}

// The page's state in the hash (a link opens the page so, loads the poet and writes): the mode,
// the characters, temperature, top-p, seed, and the attention map's layer and head.
let pending = null; // a state from the hash whose layer and head wait for the poet
const FIELDS = { prompt: "poet-prompt", temperature: "poet-temperature", top_p: "poet-top-p",
  seed: "poet-seed" };

function saveState() {
  const state = { mode: element("poet-acrostic").checked ? "acrostic" : "continue" };
  for (const [name, id] of Object.entries(FIELDS)) state[name] = element(id).value;
  if (model) Object.assign(state, { layer: element("poet-layer").value,
    head: element("poet-head").value });
  writeHash(state);
}

function applyState(state) {
  const mode = state.get("mode");
  if (mode === "acrostic" || mode === "continue") {
    element(mode === "acrostic" ? "poet-acrostic" : "poet-continue").checked = true;
  }
  for (const [name, id] of Object.entries(FIELDS)) {
    if (state.has(name)) element(id).value = state.get(name);
  }
  pending = state;
  if (model) applyLayerAndHead();
}

function applyLayerAndHead() {
  for (const name of ["layer", "head"]) {
    const select = element(`poet-${name}`);
    const value = pending?.get(name);
    if ([...select.options].some((option) => option.value === value)) select.value = value;
  }
  pending = null;
}

// Opens the state in the hash, if there is one: the poet loads and writes.
function openState() {
  const state = readHash();
  if (![...state.keys()].length) return;
  applyState(state);
  load().then(write);
}

function settings() {
  const number = (id) => Number(element(id).value);
  return {
    prompt: element("poet-prompt").value,
    acrostic: element("poet-acrostic").checked,
    temperature: number("poet-temperature"),
    topP: number("poet-top-p"),
    seed: Math.trunc(number("poet-seed")),
  };
}

// What the reader set, checked: a message naming the problem, or null.
function problem(chosen) {
  const { temperature, topP, seed } = chosen;
  if (!(temperature >= 0 && temperature <= 2)) return "The temperature goes from 0 to 2.";
  if (!(topP > 0 && topP <= 1)) return "top-p is more than 0 and at most 1.";
  if (!(Number.isInteger(seed) && seed >= 0)) return "The seed is a whole number, 0 or more.";
  return PoetGPT.checkPrompt(model, chosen.prompt, chosen.acrostic).error ?? null;
}

// The poem as couplets: a line break after each 。 or ？.
const asLines = (text) => text.replace(/([。？])/g, "$1\n").trim();

// --- The distribution of any step ----------------------------------------------------------
// The written poem as asLines lays it out, each written character an element with its step
// (0-based; the characters of a first verse given to continue are not steps), which opens the
// step's distribution when clicked or tabbed to.
let steps = null; // the latest poem: {ids, logits: per step, first: the index of step 0 in ids}
let openStep = null;

function poemTokens(ids, first) {
  const parts = [];
  for (let i = 1; i < ids.length; i++) {
    const character = escapeHtml(model.meta.tokens[ids[i]]);
    parts.push(
      i >= first
        ? `<span class="poet-token" data-step="${i - first}" tabindex="0" role="button" ` +
            `aria-label="step ${i - first}: ${character}">${character}</span>`
        : character,
    );
    if ("。？".includes(model.meta.tokens[ids[i]]) && i < ids.length - 1) parts.push("\n");
  }
  return parts.join("");
}

function closeDistribution() {
  openStep = null;
  element("poet-distribution").hidden = true;
}

// The bars of step `step`: the allowed logits, divided by the temperature now set, cut to top-p
// and renormalised (gpt.js's distribution), the written character marked. Redrawn when the
// temperature or top-p changes, without running the model again.
function showDistribution(step) {
  if (!steps || !(step >= 0 && step < steps.logits.length)) return;
  openStep = step;
  const { temperature, topP } = settings();
  const panel = element("poet-distribution");
  panel.hidden = false;
  const written = steps.ids[steps.first + step];
  const tokens = model.meta.tokens;
  element("poet-dist-title").textContent =
    `Step ${step}: the distribution ${tokens[written]} was drawn from`;
  for (const token of document.querySelectorAll(".poet-token")) {
    token.classList.toggle("poet-open", token.dataset.step === String(step));
  }
  const bars = element("poet-bars");
  if (!(temperature >= 0 && temperature <= 2) || !(topP > 0 && topP <= 1)) {
    bars.innerHTML = "";
    element("poet-dist-note").textContent = "Set a temperature from 0 to 2 and a top-p in (0, 1].";
    return;
  }
  const kept = PoetGPT.distribution(steps.logits[step], temperature, topP);
  // Every kept character has its bar (top-p at a high temperature keeps over a thousand: the
  // list scrolls), so the bars' probabilities add up to 1.
  bars.innerHTML = barsHtml(kept, (id) => tokens[id], written, "poet");
  bars.dataset.kept = String(kept.length);
  bars.dataset.temperature = String(temperature);
  bars.dataset.topP = String(topP);
  const outside = kept.some(({ id }) => id === written)
    ? ""
    : ` ${tokens[written]}, written with other settings, is not among them.`;
  const allowed = steps.logits[step].filter((value) => value > -Infinity).length;
  element("poet-dist-note").textContent = allowed === 1
    ? `Here the 藏头诗 allows only ${tokens[written]}: every other logit is set to −∞.`
    : (temperature === 0
      ? "Temperature 0: the most probable character, always (greedy)."
      : `Logits ÷ ${temperature}, softmax, then top-p ${topP} keeps ${kept.length} ` +
        `character${kept.length === 1 ? "" : "s"} (their probabilities renormalised to sum ` +
        "to 1); the draw picks one of them.") + outside;
}

function pythonCall({ prompt, acrostic, temperature, topP, seed }) {
  const args = [JSON.stringify(prompt.trim()), `temperature=${temperature}`, `top_p=${topP}`];
  args.push(`seed=${seed}`);
  if (acrostic) args.push("acrostic=True");
  return `pretrained_poet().write(${args.join(", ")})`;
}

async function write() {
  await load();
  if (!model) return;
  const chosen = settings();
  const wrong = problem(chosen);
  const poem = element("poet-poem");
  if (wrong) {
    ++writing; // a poem being written stops
    say(wrong);
    element("poet-output").hidden = true;
    poem.dataset.done = "";
    return;
  }
  say("");
  saveState();
  element("poet-output").hidden = false;
  const number = ++writing;
  poem.dataset.number = String(number);
  poem.dataset.done = "";
  poem.textContent = "";
  element("poet-timing").textContent = "";
  // The worker writes the poem; its characters are shown one every DELAY_MS as they come.
  const queue = [];
  const stepLogits = []; // per step: the allowed logits the character was drawn from
  closeDistribution();
  const options = { temperature: chosen.temperature, topP: chosen.topP, seed: chosen.seed,
    acrostic: chosen.acrostic };
  if (worker.busy) worker.cancel(); // an older poem still being written
  element("poet-stop").hidden = false;
  const job = worker.request("write", { url: poetUrl, prompt: chosen.prompt, options },
    ({ ids, logits }) => {
      queue.push(ids);
      stepLogits.push(logits);
    });
  let finished = null;
  job.then((result) => (finished = result), (error) => (finished = { stopped: true, error }));
  let written = 0;
  while (finished === null || queue.length) {
    if (queue.length) {
      written++;
      poem.textContent = asLines(PoetGPT.decode(model, queue.shift()));
    }
    await new Promise((resolve) => setTimeout(resolve, DELAY_MS));
    if (number !== writing) return; // a newer poem has started
    if (stopped === number) {
      finished = { stopped: true };
      break;
    }
  }
  element("poet-stop").hidden = true;
  if (finished.stopped) {
    if (finished.error && !(finished.error instanceof Cancelled)) {
      say(`the poet failed: ${finished.error.message}`);
    }
    poem.dataset.done = "stopped";
    element("poet-timing").textContent = `Stopped after ${written} characters.`;
    return;
  }
  const { ids, computingMs: computing } = finished;
  const text = PoetGPT.decode(model, ids);
  poem.innerHTML = poemTokens(ids, ids.length - stepLogits.length);
  steps = { ids, logits: stepLogits, first: ids.length - stepLogits.length };
  poem.dataset.text = text;
  poem.dataset.done = "1";
  const rate = written / (computing / 1000);
  element("poet-timing").textContent =
    `${written} characters written in ${(computing / 1000).toFixed(2)} s of computing ` +
    `(${rate.toFixed(0)} characters/s in this browser), shown one every ${DELAY_MS} ms.`;
  element("poet-call").textContent = pythonCall(chosen);
  element("poet-same").textContent =
    chosen.temperature === 0
      ? "At temperature 0 Python writes this very poem (greedy decoding)."
      : "Python samples with PyTorch's random numbers, not this page's: " +
        "the same seed there writes another poem.";
  last = ids;
  drawAttention();
}

// Every attention map over the written poem (one pass without the cache, in the worker), kept
// for the poem; then the one chosen is drawn.
let maps = null; // {ids, attention: [layer][head] (queries, keys)}
async function drawAttention() {
  if (!last || !model) return;
  const ids = last;
  if (maps?.ids !== ids) {
    let attention;
    let scores;
    let lens;
    try {
      ({ attention, scores, lens } = await worker.request("poemAttention", { url: poetUrl, ids }));
    } catch (error) {
      if (!(error instanceof Cancelled)) say(`could not compute the attention: ${error.message}`);
      return;
    }
    if (last !== ids) return; // a newer poem
    maps = { ids, attention, scores };
    const tokens = model.meta.tokens;
    element("poet-lens").innerHTML = lensHtml(lens, ids.map((id, i) => `${i}: ${tokens[id]}`),
      (id) => tokens[id]);
    element("poet-lens").dataset.poem = ids.join(",");
  }
  const layer = Number(element("poet-layer").value);
  const head = Number(element("poet-head").value);
  const weights = maps.attention[layer][head]; // (queries, keys)
  const tokens = model.meta.tokens;
  const labels = last.map((id, i) => `${i}: ${tokens[id]}`);
  const rows = [];
  for (let q = 0; q < weights.rows; q++) {
    for (let k = 0; k <= q; k++) {
      const w = Math.round(1000 * weights.data[q * weights.cols + k]) / 10;
      rows.push({ q, k, query: labels[q], key: labels[k], w });
    }
  }
  const container = element("poet-attention");
  const size = Math.max(160, Math.min(420, container.clientWidth - 100));
  const options = {
    title: `layer ${layer}, head ${head}`,
    description: `Attention weights of layer ${layer}, head ${head} over the written poem`,
    size,
    keyTitle: "key (read)",
    queryTitle: "query (writing the next character)",
  };
  const key = `${last.join(",")}|${layer}|${head}`; // the browser test waits on it
  drawAttentionMap(container, rows, options, () => ({ drawn: key }))
    .catch((error) => say(`could not draw the attention map: ${error.message}`));
  showDrill(labels, weights, maps.scores[layer][head], options.title);
}

// The map unfolded for the query chosen: its scores, the look-ahead mask, the weights (page.js).
function showDrill(labels, weights, scores, title) {
  const select = element("poet-query");
  if (select.options.length !== labels.length || select.dataset.poem !== String(writing)) {
    select.innerHTML = labels
      .map((label, q) => `<option value="${q}">${escapeHtml(label)}</option>`)
      .join("");
    select.value = String(labels.length - 1);
    select.dataset.poem = String(writing);
  }
  const q = Number(select.value);
  element("poet-drill").innerHTML = drillDownHtml(labels, rowOf(scores, q), rowOf(weights, q),
    { query: labels[q], maskName: "look-ahead", what: title });
  element("poet-drill").dataset.drawn = `${title}|${q}`;
}

function start() {
  element("poet-load").addEventListener("click", () => load().then(write));
  element("poet-form").addEventListener("submit", (event) => {
    event.preventDefault();
    write();
  });
  element("poet-next-seed").addEventListener("click", () => {
    element("poet-seed").value = String(Math.trunc(Number(element("poet-seed").value) || 0) + 1);
    write();
  });
  element("poet-examples").addEventListener("click", (event) => {
    const button = event.target.closest(".poet-example");
    if (!button) return;
    element("poet-prompt").value = button.textContent;
    const acrostic = button.dataset.acrostic === "true";
    element(acrostic ? "poet-acrostic" : "poet-continue").checked = true;
    write();
  });
  element("poet-query").addEventListener("change", drawAttention);
  for (const id of ["poet-layer", "poet-head"]) {
    element(id).addEventListener("change", () => {
      saveState();
      drawAttention();
    });
  }
  // Any control changed: the hash follows at once, and the open step's bars are redrawn.
  element("poet-form").addEventListener("input", () => {
    saveState();
    if (openStep !== null) showDistribution(openStep);
  });
  const poem = element("poet-poem");
  const open = (event) => {
    const token = event.target.closest?.(".poet-token");
    if (token) showDistribution(Number(token.dataset.step));
  };
  poem.addEventListener("click", open);
  poem.addEventListener("focusin", open);
  element("poet-form").addEventListener("change", saveState);
  window.addEventListener("hashchange", openState);
  window.addEventListener("resize", debounce(drawAttention, 150));
  element("poet-stop").addEventListener("click", () => {
    stopped = writing;
    worker.cancel();
  });
  openState();
}

start(); // a module runs once the page is parsed
