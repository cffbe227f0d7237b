// The playground page (book/playground.md): reads the reader's input, runs the model of
// transformer.js, and shows the decoded outputs, the probabilities of each step and every
// attention map (page.js draws it).
import * as TransformerBook from "./transformer.js";
import {
  drawAttentionMap, element, escapeHtml, here, megabytes, numberOptions, say as sayIn,
} from "./page.js";

const BEAM_SIZE = 4;
const TOP_TOKENS = 3;
const KINDS = ["encoder self-attention", "decoder self-attention", "decoder cross-attention"];
const models = {}; // task name -> the promise of its loaded model
const sizes = {}; // task name -> bytes downloaded when it is chosen (weights and JSON)

const shown = (token) => (token === " " ? "␣" : token); // a visible space

// A message instead of the results, or (text "") the results.
function say(text) {
  sayIn("pg-message", text);
  element("pg-results").hidden = Boolean(text);
}

// A task's model, loaded the first time it is chosen, with its progress on the page.
function model() {
  const name = element("pg-task").value;
  if (!models[name]) {
    const loading = element("pg-loading");
    const progress = (loaded, total) => {
      loading.hidden = false;
      loading.textContent =
        `Loading the model's weights: ${megabytes(loaded)} of ${megabytes(total)}…`;
    };
    models[name] = TransformerBook.loadModel(new URL(`${name}.json`, here).href, progress)
      .finally(() => {
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
    const order = Array.from(step.logProbs.keys()).sort(
      (a, b) => step.logProbs[b] - step.logProbs[a],
    );
    const cells = order.slice(0, TOP_TOKENS).map((id) => {
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

// Tokens up to and including the first end token (a finished beam is padded with it).
function untilEnd(tokens, endId) {
  const end = tokens.indexOf(endId, 1);
  return end === -1 ? tokens : tokens.slice(0, end + 1);
}

function showOutput(id, loaded, tokens, steps, score) {
  const total = steps.reduce((sum, step, index) => sum + step.logProbs[tokens[index + 1]], 0);
  element(`${id}-text`).textContent = TransformerBook.decodeTokens(loaded, tokens) || "(empty)";
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
  note.textContent =
    `${label}: ${answers.join(" / ")}. ${said[0].toUpperCase()}${said.slice(1)}.` +
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
function attentionRows(loaded, sourceText, tokens, attention) {
  const kind = KINDS[Number(element("pg-kind").value)];
  const layer = Number(element("pg-layer").value);
  const head = Number(element("pg-head").value);
  const weights = attention[kind][layer][head]; // (queries, keys)
  const target = loaded.meta.target_tokens;
  const sourceLabels = TransformerBook.splitText(loaded, sourceText).map(
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
  return { rows, title: `${kind}, layer ${layer}, head ${head}` };
}

function drawAttention({ rows, title }, text) {
  const container = element("pg-attention");
  const size = Math.max(140, Math.min(340, container.clientWidth - 110));
  const options = { title, size, keyTitle: "key (attended to)", queryTitle: "query (attending)" };
  const marks = (drawing) => ({ drawn: String(drawing), input: text }); // input: what it shows
  drawAttentionMap(container, rows, options, marks).catch((error) =>
    say(`could not draw the attention map: ${error.message}`),
  );
}

let last = null; // the latest decoding, redrawn when only the attention controls change

async function update() {
  let loaded;
  try {
    loaded = await model();
  } catch (error) {
    say(`could not load the model (${error.message}); serve the book over http`);
    return;
  }
  const text = element("pg-input").value;
  const encoded = TransformerBook.encodeText(loaded, text);
  if (encoded.error) {
    say(encoded.error);
    return;
  }
  say("");
  const notice = element("pg-notice");
  notice.hidden = !encoded.unknown?.length;
  if (encoded.unknown?.length) {
    const pieces = encoded.unknown.map((piece) => JSON.stringify(piece)).join(", ");
    notice.textContent = `Read as <unk>, unknown to the English vocabulary: ${pieces}.`;
  }
  const limit = TransformerBook.maxNewTokens(loaded, encoded.ids.length);
  const alpha = loaded.meta.length_penalty ?? 0;
  let started = performance.now();
  const greedy = TransformerBook.greedyDecode(loaded, encoded.ids, limit);
  const decodeMs = performance.now() - started;
  started = performance.now();
  const beam = TransformerBook.beamSearch(loaded, encoded.ids, limit, BEAM_SIZE, alpha);
  const beamMs = performance.now() - started;
  const beamTokens = untilEnd(beam.tokens, loaded.meta.end_id);
  const beamSteps = TransformerBook.inspect(loaded, encoded.ids, beamTokens).steps;
  showOutput("pg-greedy", loaded, greedy.tokens, greedy.steps, null);
  showOutput("pg-beam", loaded, beamTokens, beamSteps, beam.score);
  showAnswer(loaded, text, [
    ["greedy decoding", TransformerBook.decodeTokens(loaded, greedy.tokens)],
    ["beam search", TransformerBook.decodeTokens(loaded, beamTokens)],
  ]);
  element("pg-timing").textContent =
    `In this browser, greedy decoding took ${decodeMs.toFixed(1)} ms and beam search ` +
    `${beamMs.toFixed(1)} ms.`;
  last = {
    loaded,
    text,
    tokens: greedy.tokens,
    ...TransformerBook.inspect(loaded, encoded.ids, greedy.tokens),
  };
  fillControls(loaded);
  drawAttention(attentionRows(loaded, text, last.tokens, last.attention), text);
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
      attentionRows(last.loaded, last.text, last.tokens, last.attention),
      last.text,
    );
  }
}

async function chooseTask() {
  try {
    const loaded = await model();
    const examples = loaded.meta.examples;
    element("pg-input").value = examples[0];
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
    element("pg-beam-title").textContent =
      `Beam search (${BEAM_SIZE} beams` +
      (meta.length_penalty ? `, length penalty α = ${meta.length_penalty})` : ")");
    element("pg-about").textContent = describe(loaded);
  } catch (error) {
    say(`could not load the model (${error.message}); serve the book over http`);
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
  let timer = null;
  element("pg-input").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(update, 40); // redraw as the reader types, once per pause
  });
  element("pg-task").addEventListener("change", chooseTask);
  for (const id of ["pg-kind", "pg-layer", "pg-head"]) {
    element(id).addEventListener("change", () => {
      element(id).dataset.touched = "1";
      redrawAttention();
    });
  }
  element("pg-examples").addEventListener("click", (event) => {
    if (event.target.classList.contains("pg-example")) {
      element("pg-input").value = event.target.textContent;
      update();
    }
  });
  window.addEventListener("resize", () => {
    clearTimeout(timer);
    timer = setTimeout(redrawAttention, 150);
  });
  await chooseTask();
}

start(); // a module runs once the page is parsed
