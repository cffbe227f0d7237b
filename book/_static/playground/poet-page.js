// The poem page (book/playground_poems.md): shows a prepared poem at once, loads the poet (from
// the browser's cache after the first visit), has gpt.js write a poem one character at a time in
// the page's Web Worker (worker.js), and draws the attention map of the layer and head chosen over
// the written poem (page.js draws it). The page imports no model code: the worker alone loads it.
// Two poets share the vocabulary and the configuration: chapter 15's (poet.json) and the one
// chapter 20 taught to rhyme by DPO (poet_dpo.json), downloaded only when the reader picks it. The
// written poem's rhyme characters are marked and judged by chapter 19's rule (poet-rhyme.js).
import {
  Cancelled, ModelWorker, arrowKeys, barsHtml, bringIntoView, counted, debounce, drawAttentionMap,
  drillDownHtml, element, escapeHtml, here, lensHtml, megabytes, numberOptions, readHash, rowOf,
  say as sayIn, tokens as rovingTokens, valueSideHtml, writeHash,
} from "./page.js";
import { checkRhyme, rhymeTable } from "./poet-rhyme.js";

const DELAY_MS = 40; // between two characters on the screen (the model is faster)
// A reader whose system asks for less motion gets each poem whole, at once.
const lessMotion = window.matchMedia?.("(prefers-reduced-motion: reduce)");
const worker = new ModelWorker();
const POETS = { base: "poet.json", dpo: "poet_dpo.json" }; // tools/export_poet_playground.py
const poetUrl = (stage) => new URL(POETS[stage], here).href;
// {meta, rhyme}: what the page needs of the latest poet loaded (the weights are in the worker);
// the two poets' vocabularies and configurations are the same.
let model = null;
const loadings = new Map(); // stage -> the promise of its {meta, rhyme}, or of null if it failed
let writing = 0; // the number of the latest poem: an older one stops when a new one starts
let stopped = 0; // the number of the poem the reader stopped
let last = null; // the latest finished poem's ids, for the attention controls

const say = (text) => sayIn("poet-message", text);

// A poet ("base" or "dpo"), loaded in the worker when it is first asked for: the base poet as
// the page opens, the other when the reader picks it (from the Cache API after the first visit).
const chosenStage = () => (element("poet-stage-dpo").checked ? "dpo" : "base");
const poetName = (stage) => (stage === "dpo" ? "the poet taught to rhyme" : "the poet");

function load(stage = chosenStage()) {
  if (loadings.has(stage)) return loadings.get(stage);
  const progress = element("poet-progress");
  const status = element("poet-status");
  const name = poetName(stage);
  progress.hidden = false;
  status.textContent = `loading ${name}…`;
  const shown = ({ loaded: received, total }) => {
    progress.value = received / total;
    status.textContent = `loading ${name}: ${megabytes(received)} of ${megabytes(total)}`;
  };
  const loading = worker
    .request("loadPoet", { url: poetUrl(stage) }, shown)
    .then(({ meta }) => {
      const loaded = { meta, rhyme: rhymeTable(meta.rhyme) };
      const first = model === null;
      if (first) model = loaded; // the controls need a poet; write() sets the poem's own
      const { bytes } = meta.weights;
      const characters = (meta.tokens.length - 3).toLocaleString("en");
      status.textContent =
        `${name}: ${megabytes(bytes)} of float16 weights, ${characters} characters`;
      progress.hidden = true;
      if (first) {
        fillControls(meta);
        describeRates(meta.measured);
        applyLayerAndHead();
      }
      return loaded;
    })
    .catch((error) => {
      loadings.delete(stage);
      progress.hidden = true;
      status.textContent = "";
      say(`could not load ${name} (${error.message}); serve the book over http`);
      return null;
    });
  loadings.set(stage, loading);
  return loading;
}

const percent = (share) => `${(100 * share).toFixed(1)}%`;

function describe(meta) {
  const { steps, batch_size, held_out_perplexity } = meta.training;
  const shape = `(${meta.config.layers} layers, d_model ${meta.config.d_model}, ` +
    `${meta.config.heads} heads)`;
  element("poet-about").textContent = meta.stage === "dpo"
    ? `This poet is chapter 15's ${shape}, then taught by DPO (chapter 20) for ${steps} steps ` +
      `of ${batch_size} preference pairs (${meta.training.pairs} pairs, ` +
      `β ${meta.training.beta}); ` +
      `its held-out perplexity is ${held_out_perplexity.toFixed(1)} (the base poet's: ` +
      `${meta.measured.base.held_out_perplexity.toFixed(1)}).`
    : `This poet was trained for ${steps} steps of ${batch_size} poems ${shape}; its held-out ` +
      `perplexity is ${held_out_perplexity.toFixed(1)}.`;
}

// The two poets' rates, as chapter 20's tool recorded them (tools/export_poet_playground.py
// copies them into the JSON files), with their scope.
function describeRates(measured) {
  const { base, dpo, seeds, temperature, top_p: topP } = measured;
  for (const [stage, rate] of Object.entries({ base, dpo })) {
    element(`poet-rate-${stage}`).textContent =
      `: rhymes in ${percent(rate.rhyme)} of its poems`;
  }
  element("poet-measured").textContent =
    `Measured on ${base.poems} poems each (seeds ${seeds[0]} to ${seeds[1]}, temperature ` +
    `${temperature}, top-p ${topP}, no prompt): the base poet rhymes in ${percent(base.rhyme)} ` +
    `of its poems and repeats a rhyme character in ${percent(base.repeated)}; the poet DPO ` +
    `taught, ${percent(dpo.rhyme)} and ${percent(dpo.repeated)}. A poem of this page is one ` +
    "draw: either poet can miss.";
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

// The page's state in the hash (a link opens the page so, loads the poet and writes): the
// poem's settings (mode, characters, temperature, top-p, seed, as it was written: editing the
// controls changes the link only once a poem is written with them), the forced characters, the
// open step, and the attention map's layer, head and query.
let pending = null; // a state from the hash whose layer, head, query and step wait for the poem
const FIELDS = { prompt: "poet-prompt", temperature: "poet-temperature", top_p: "poet-top-p",
  seed: "poet-seed" };
const setStage = (stage) => {
  element(stage === "dpo" ? "poet-stage-dpo" : "poet-stage-base").checked = true;
};
let written = null; // the settings of the poem on the page (settings())
let force = null; // the "what if": {prefix: ids written after the prompt, marks: forced steps}

function saveState() {
  if (!written) return;
  const state = { mode: written.acrostic ? "acrostic" : "continue", prompt: written.prompt,
    temperature: written.temperature, top_p: written.topP, seed: written.seed };
  if (written.stage !== "base") state.poet = written.stage;
  if (force) {
    state.force = force.prefix.map((id, i) => `${id}${force.marks.includes(i) ? "*" : ""}`)
      .join(".");
  }
  if (openStep !== null) state.step = openStep + 1;
  if (model) {
    Object.assign(state, { layer: element("poet-layer").value, head: element("poet-head").value });
    if (element("poet-query").dataset.touched) state.query = element("poet-query").value;
  }
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
  setStage(state.get("poet") === "dpo" ? "dpo" : "base");
  force = null;
  const pieces = (state.get("force") ?? "").split(".").filter(Boolean);
  const prefix = pieces.map((piece) => Number(piece.replace("*", "")));
  const marks = pieces.flatMap((piece, i) => (piece.endsWith("*") ? [i] : []));
  if (prefix.length && prefix.every((id) => Number.isInteger(id) && id > 2) && marks.length) {
    force = { prefix, marks };
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
}

// Opens the state in the hash, or the prepared poem: the poet loads and writes.
function openState() {
  const state = readHash();
  if ([...state.keys()].length) {
    applyState(state);
    element("poet-poem").removeAttribute("data-prepared");
  }
  load().then(() => write({ animate: !element("poet-poem").hasAttribute("data-prepared"),
    keepForce: true }));
}

function settings() {
  const number = (id) => Number(element(id).value);
  return {
    prompt: element("poet-prompt").value,
    acrostic: element("poet-acrostic").checked,
    temperature: number("poet-temperature"),
    topP: number("poet-top-p"),
    seed: Math.trunc(number("poet-seed")),
    stage: chosenStage(),
  };
}

// What the reader set, checked: a message naming the problem, or null.
function problem(chosen) {
  const { temperature, topP, seed } = chosen;
  if (!(temperature >= 0 && temperature <= 2)) return "The temperature goes from 0 to 2.";
  if (!(topP > 0 && topP <= 1)) return "top-p is more than 0 and at most 1.";
  if (!(Number.isInteger(seed) && seed >= 0)) return "The seed is a whole number, 0 or more.";
  return null; // the characters are checked by the worker (gpt.js's checkPrompt)
}

// The poem as couplets: a line break after each 。 or ？.
const asLines = (text) => text.replace(/([。？])/g, "$1\n").trim();

// --- The distribution of any step ----------------------------------------------------------
// The written poem as asLines lays it out, each written character an element with its step
// (data-step counts from 0; the reader sees steps counted from 1; the characters of a first
// verse given to continue are not steps), which opens the step's distribution when clicked or
// tabbed to. Its bars can be reshaped with their own temperature and top-p (exploring: the link
// keeps the poem's), and a click on a bar forces that character and writes on ("what if").
let steps = null; // the latest poem: {ids, logits: per step, first: the index of step 0 in ids}
let openStep = null;

// `rhymed`: {position in the text (ids[position + 1]): its rhyme class}, the rhyme characters
// (checkRhyme), marked whether the poet wrote them or they were given.
function poemTokens(ids, first, marks = [], rhymed = new Map()) {
  const parts = [];
  for (let i = 1; i < ids.length; i++) {
    const character = escapeHtml(model.meta.tokens[ids[i]]);
    const step = i - first;
    const forced = marks.includes(step);
    const rhyme = rhymed.has(i - 1);
    const rhymeNote = rhyme ? `, rhyme character (${rhymed.get(i - 1) ?? "no class"})` : "";
    const classes = `poet-token${forced ? " forced" : ""}${rhyme ? " poet-rhyme" : ""}`;
    parts.push(
      i >= first
        ? `<span class="${classes}" data-step="${step}" ` +
            `data-id="${ids[i]}" tabindex="0" ` +
            `role="button"${forced ? " data-forced" : ""}${rhyme ? " data-rhyme" : ""} ` +
            `aria-label="step ${step + 1}${forced ? " (forced)" : ""}: ${character}` +
            `${rhymeNote}">${character}</span>`
        : rhyme
          ? `<span class="poet-rhyme" data-rhyme title="rhyme character">${character}</span>`
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

// The bars of step `step`: the allowed logits, divided by the panel's temperature, cut to its
// top-p and renormalised (core.js's distribution, in the worker), the written character marked,
// its probability at temperature 1 as a dashed outline. Redrawn when they change, without running
// the model again.
let drawingBars = 0;
async function showDistribution(step, { scroll = true } = {}) {
  if (!steps || !(step >= 0 && step < steps.logits.length)) return;
  openStep = step;
  saveState();
  const temperature = Number(element("poet-bars-temperature").value);
  const topP = Number(element("poet-bars-top-p").value);
  const panel = element("poet-distribution");
  panel.hidden = false;
  const written_ = steps.ids[steps.first + step];
  const tokens = model.meta.tokens;
  const forcedHere = force?.marks.includes(step);
  element("poet-dist-title").textContent =
    `Step ${step + 1}${forcedHere ? " (forced)" : ""}: the distribution ${tokens[written_]} ` +
    `was ${forcedHere ? "forced into" : "drawn from"}`;
  for (const token of document.querySelectorAll(".poet-token")) {
    token.classList.toggle("poet-open", token.dataset.step === String(step));
  }
  if (scroll) bringIntoView(panel);
  const bars = element("poet-bars");
  if (!(temperature >= 0 && temperature <= 2) || !(topP > 0 && topP <= 1)) {
    bars.innerHTML = "";
    element("poet-dist-note").textContent = "Set a temperature from 0 to 2 and a top-p in (0, 1].";
    return;
  }
  const number = ++drawingBars;
  let kept;
  let plain;
  try {
    ({ kept, plain } = await worker.request("distribution",
      { logits: steps.logits[step], temperature, topP }));
  } catch (error) {
    if (!(error instanceof Cancelled)) say(`the poet failed: ${error.message}`);
    return;
  }
  if (number !== drawingBars) return;
  // The most probable characters, the written one, and the rest in one line (top-p at a high
  // temperature keeps thousands).
  bars.innerHTML = barsHtml(kept, (id) => tokens[id], written_, "poet",
    { plain: temperature === 1 && topP === 1 ? null : plain, force: step + 1,
      noun: "character" });
  bars.dataset.kept = String(kept.length);
  bars.dataset.temperature = String(temperature);
  bars.dataset.topP = String(topP);
  const outside = kept.some(({ id }) => id === written_)
    ? ""
    : ` ${tokens[written_]}, written with other settings, is not among them.`;
  const allowed = steps.logits[step].filter((value) => value > -Infinity).length;
  element("poet-dist-note").textContent = (allowed === 1
    ? `Here the 藏头诗 allows only ${tokens[written_]}: every other logit is set to −∞.`
    : (temperature === 0
      ? "Temperature 0: the most probable character, always (greedy)."
      : `Logits ÷ ${temperature}, softmax, then top-p ${topP} keeps ` +
        `${counted(kept.length, "character")} (their probabilities renormalised to sum ` +
        "to 1); the draw picks one of them" +
        (temperature === 1 && topP === 1 ? "." : " (the dashed outlines: temperature 1).")) +
      outside) +
    (allowed === 1 ? "" : " Click a character to force it here and write on.");
  if (scroll) bringIntoView(panel);
}

// "What if": the character `id` forced at the open step; the poem is written again from it
// (the characters before it kept, the same random numbers after it).
function forceCharacter(id) {
  if (openStep === null || !steps) return;
  const step = openStep;
  const before = steps.ids.slice(steps.first, steps.first + step);
  const marks = force ? force.marks.filter((s) => s < step) : [];
  force = { prefix: [...before, id], marks: [...marks, step] };
  restoreSettings();
  write({ animate: true, keepStep: step });
}

// The controls set back to the poem's own settings (a forced poem goes on with them).
function restoreSettings() {
  if (!written) return;
  setStage(written.stage);
  element(written.acrostic ? "poet-acrostic" : "poet-continue").checked = true;
  element("poet-prompt").value = written.prompt;
  element("poet-temperature").value = String(written.temperature);
  element("poet-top-p").value = String(written.topP);
  element("poet-seed").value = String(written.seed);
}

function pythonCall({ prompt, acrostic, temperature, topP, seed, stage }) {
  const args = [JSON.stringify(prompt.trim()), `temperature=${temperature}`, `top_p=${topP}`];
  args.push(`seed=${seed}`);
  if (acrostic) args.push("acrostic=True");
  const loader = stage === "base" ? "pretrained_poet()" : `pretrained_poet(stage="${stage}")`;
  return `${loader}.write(${args.join(", ")})`;
}

// Chapter 19's verdict on the written poem, in words (and in data-* for the browser test).
function showVerdict(text) {
  const verdict = checkRhyme(model.rhyme, text);
  const { ends, classes, rhymes, repeated } = verdict;
  const finals = model.meta.rhyme.finals;
  const named = ends.map(({ character }, i) => `${character} (${classes[i] ?? "no class"})`);
  let words;
  if (ends.length < 2) {
    words = "It does not rhyme: fewer than two even verses, nothing to rhyme.";
  } else if (rhymes) {
    const [name] = classes;
    words = `It rhymes by chapter 19's rule: the rhyme characters (underlined: the last of ` +
      `each even verse) ${ends.map(({ character }) => character).join(" ")} all fall in ${name} ` +
      `(${finals[name].join(", ")}).`;
  } else {
    words = `It does not rhyme by chapter 19's rule: the rhyme characters (underlined: the ` +
      `last of each even verse) fall in more than one class: ${named.join(", ")}.`;
  }
  if (ends.length >= 2) {
    words += repeated.length
      ? ` 重韵: ${repeated.join(", ")} closes more than one even verse.`
      : " No rhyme character repeats.";
  }
  const box = element("poet-verdict");
  box.textContent = words;
  box.dataset.rhymes = String(rhymes);
  box.dataset.repeats = String(verdict.repeats);
  box.dataset.ends = ends.map(({ character }) => character).join("");
  return new Map(ends.map(({ at }, i) => [at, classes[i]]));
}

// A poem written in the worker: {ids, text, logits (per step), computingMs} or {stopped, error};
// `onCharacter(text)` as each character comes.
function writeInWorker(chosen, prefix, onCharacter = null) {
  const options = { temperature: chosen.temperature, topP: chosen.topP, seed: chosen.seed,
    acrostic: chosen.acrostic, prefix };
  const logits = [];
  return worker.request("write", { url: poetUrl(chosen.stage), prompt: chosen.prompt, options },
    ({ text, logits: stepLogits }) => {
      logits.push(stepLogits);
      onCharacter?.(text);
    }).then((result) => ({ ...result, logits }), (error) => ({ stopped: true, error }));
}

// Writes a poem with the controls' settings (and the forced characters, if any): `animate`
// shows it one character every DELAY_MS (unless the reader asks for less motion); `keepForce`
// keeps the forced characters (a new poem drops them); `keepStep`, a step to open once it is
// written.
async function write({ animate = true, keepForce = false, keepStep = null } = {}) {
  animate = animate && !lessMotion?.matches;
  if (!keepForce && keepStep === null) force = null;
  const number = ++writing; // an older poem, or an older load, stops here
  element("poet-poem").dataset.done = "";
  const stage = chosenStage();
  const loaded = await load(stage); // downloaded the first time it is picked
  if (!loaded || number !== writing) return;
  model = loaded;
  const chosen = { ...settings(), stage };
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
  element("poet-output").hidden = false;
  poem.dataset.number = String(number);
  poem.dataset.done = "";
  const prepared = poem.hasAttribute("data-prepared");
  if (animate && !prepared) poem.textContent = "";
  element("poet-timing").textContent = "";
  element("poet-other").hidden = true;
  closeDistribution();
  if (worker.busy) worker.cancel(); // an older poem still being written
  element("poet-stop").hidden = false;
  // With forced characters, the poem without them first (shown beside), then with them.
  const original = force ? await writeInWorker(chosen, []) : null;
  if (number !== writing) return;
  const queue = [];
  let finished = null;
  writeInWorker(chosen, force?.prefix ?? [], animate ? (text) => queue.push(text) : null)
    .then((result) => (finished = result));
  let shownCount = 0;
  while (finished === null || queue.length) {
    if (queue.length) {
      shownCount++;
      poem.textContent = asLines(queue.shift());
    }
    await new Promise((resolve) => setTimeout(resolve, animate ? DELAY_MS : 5));
    if (number !== writing) return; // a newer poem has started
    if (stopped === number) {
      finished = { stopped: true };
      break;
    }
  }
  element("poet-stop").hidden = true;
  const failed = finished.stopped ? finished : original?.stopped ? original : null;
  if (failed) {
    poem.removeAttribute("data-prepared");
    if (failed.error && !(failed.error instanceof Cancelled)) {
      // The worker names what is wrong (a character the poet never saw, a 藏头诗 too long).
      say(failed.error.message);
      element("poet-output").hidden = true;
      poem.dataset.done = "";
      return;
    }
    poem.dataset.done = "stopped";
    element("poet-timing").textContent = `Stopped after ${shownCount} characters.`;
    return;
  }
  const { ids, text, logits: stepLogits, computingMs: computing } = finished;
  const first = ids.length - stepLogits.length;
  poem.removeAttribute("data-prepared");
  poem.innerHTML = poemTokens(ids, first, force?.marks ?? [], showVerdict(text));
  describe(loaded.meta);
  rovingTokens(poem, ".poet-token");
  steps = { ids, logits: stepLogits, first };
  poem.dataset.text = text;
  poem.dataset.done = "1";
  written = chosen;
  element("poet-bars-temperature").value = String(chosen.temperature);
  element("poet-bars-top-p").value = String(chosen.topP);
  const before = element("poet-original");
  before.hidden = !force;
  if (force) {
    const at = force.marks.map((step) => step + 1).join(", ");
    element("poet-original-text").textContent =
      `Step${force.marks.length === 1 ? "" : "s"} ${at} forced (marked); the same settings ` +
      `and random numbers without forcing: ${original.text}`;
  }
  const count = ids.length - first;
  const rate = count / (computing / 1000);
  element("poet-timing").textContent =
    `${counted(count, "character")} written in ${(computing / 1000).toFixed(2)} s of computing ` +
    `(${rate.toFixed(0)} characters/s in this browser)` +
    (animate ? `, shown one every ${DELAY_MS} ms.` : ".");
  element("poet-call").textContent = pythonCall(chosen);
  element("poet-same").textContent =
    chosen.temperature === 0
      ? "At temperature 0 Python writes this very poem (greedy decoding)."
      : "Python samples with PyTorch's random numbers, not this page's: " +
        "the same seed there writes another poem.";
  last = ids;
  const asked = keepStep ?? (pending?.has("step") ? Number(pending.get("step")) - 1 : null);
  saveState();
  await drawAttention();
  if (asked !== null && Number.isInteger(asked)) {
    showDistribution(asked, { scroll: keepStep !== null });
  }
  if (keepStep !== null) {
    // The bar that was clicked is gone: the focus goes to the character it forced.
    poem.querySelector(`.poet-token[data-step="${keepStep}"]`)?.focus({ preventScroll: true });
  }
  pending = null;
  await showOther(chosen, number);
}

// The other poet's poem with the same settings, once the reader has picked that poet before
// (nothing is downloaded for it): the two poems side by side, their rhyme characters marked.
async function showOther(chosen, number) {
  const box = element("poet-other");
  const other = chosen.stage === "dpo" ? "base" : "dpo";
  const loaded = loadings.has(other) ? await loadings.get(other) : null;
  if (force || !loaded || number !== writing) {
    if (number === writing) box.hidden = true;
    return;
  }
  const result = await writeInWorker({ ...chosen, stage: other }, []);
  if (number !== writing) return;
  if (result.stopped) {
    box.hidden = true;
    return;
  }
  const verdict = checkRhyme(loaded.rhyme, result.text);
  const marked = new Set(verdict.ends.map(({ at }) => at));
  const poemHtml = [...result.text]
    .map((c, i) => (marked.has(i) ? `<span class="poet-rhyme">${escapeHtml(c)}</span>`
      : escapeHtml(c)))
    .join("");
  const label = loaded.meta.poets[other].label;
  box.innerHTML = `${escapeHtml(label[0].toUpperCase() + label.slice(1))}, the same settings: ` +
    `<span lang="zh">${poemHtml}</span> (it ${verdict.rhymes ? "rhymes" : "does not rhyme"}` +
    `${verdict.repeats ? `; 重韵: ${escapeHtml(verdict.repeated.join(", "))}` : ""}).`;
  box.dataset.text = result.text;
  box.dataset.rhymes = String(verdict.rhymes);
  box.hidden = false;
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
    let values;
    let lens;
    try {
      ({ attention, scores, values, lens } = await worker.request("poemAttention",
        { url: poetUrl(written.stage), ids }));
    } catch (error) {
      if (!(error instanceof Cancelled)) say(`could not compute the attention: ${error.message}`);
      return;
    }
    if (last !== ids) return; // a newer poem
    maps = { ids, attention, scores, values };
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
  showDrill(labels, weights, maps.scores[layer][head], options.title,
    { values: maps.values[layer], head, heads: maps.attention[layer].length });
}

// The map unfolded for the query chosen: its scores, the look-ahead mask, the weights (page.js).
function showDrill(labels, weights, scores, title, side) {
  const select = element("poet-query");
  if (select.options.length !== labels.length || select.dataset.poem !== String(writing)) {
    select.innerHTML = labels
      .map((label, q) => `<option value="${q}">${escapeHtml(label)}</option>`)
      .join("");
    const asked = Number(pending?.get("query") ?? NaN);
    const wanted = Number.isInteger(asked) && asked >= 0 && asked < labels.length;
    select.value = String(wanted ? asked : labels.length - 1);
    if (wanted) select.dataset.touched = "1";
    else delete select.dataset.touched;
    select.dataset.poem = String(writing);
  }
  const q = Number(select.value);
  const row = rowOf(weights, q);
  element("poet-drill").innerHTML =
    drillDownHtml(labels, rowOf(scores, q), row,
      { query: labels[q], maskName: "look-ahead", what: title }) +
    valueSideHtml(labels, row, side.values, { q, ...side, query: labels[q] });
  element("poet-drill").dataset.drawn = `${title}|${q}`;
}

function start() {
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
  // Another poet writes with the same settings (it is downloaded the first time).
  for (const id of ["poet-stage-base", "poet-stage-dpo"]) {
    element(id).addEventListener("change", () => write());
  }
  element("poet-query").addEventListener("change", () => {
    element("poet-query").dataset.touched = "1";
    saveState();
    drawAttention();
  });
  for (const id of ["poet-layer", "poet-head"]) {
    element(id).addEventListener("change", () => {
      saveState();
      drawAttention();
    });
  }
  // The bars' own temperature and top-p: the open step's bars are redrawn (the link keeps the
  // poem's settings: exploring does not change it).
  for (const id of ["poet-bars-temperature", "poet-bars-top-p"]) {
    element(id).addEventListener("input", () => {
      if (openStep !== null) showDistribution(openStep, { scroll: false });
    });
  }
  element("poet-bars").addEventListener("click", (event) => {
    const bar = event.target.closest?.("[data-force]");
    if (bar) forceCharacter(Number(bar.dataset.force));
  });
  element("poet-unforce").addEventListener("click", () => {
    force = null;
    restoreSettings();
    // The "Undo" button hides: the open step stays open, and takes the focus.
    write({ animate: false, keepStep: openStep });
  });
  const poem = element("poet-poem");
  const open = (event) => {
    const token = event.target.closest?.(".poet-token");
    if (token) showDistribution(Number(token.dataset.step));
  };
  poem.addEventListener("click", open);
  poem.addEventListener("focusin", open);
  arrowKeys(poem, ".poet-token");
  window.addEventListener("hashchange", openState);
  window.addEventListener("resize", debounce(drawAttention, 150));
  element("poet-stop").addEventListener("click", () => {
    stopped = writing;
    worker.cancel();
  });
  openState();
}

start(); // a module runs once the page is parsed
