// The playground page (book/playground.md): reads the reader's input, runs the model of
// transformer.js, and shows the decoded outputs, the probabilities of each step and every
// attention map, drawn with the Vega-Lite and Vega-Embed the book vendors (book/_static/vendor).
"use strict";

(() => {
  const here = new URL(".", document.currentScript.src); // .../_static/playground/
  const BEAM_SIZE = 4;
  const TOP_TOKENS = 3;
  const KINDS = ["encoder self-attention", "decoder self-attention", "decoder cross-attention"];
  const models = {}; // task name -> the promise of its loaded model
  let view = null; // the Vega view on the page
  let pending = 0;

  const element = (id) => document.getElementById(id);
  const shown = (token) => (token === " " ? "␣" : token); // a visible space

  function say(text) {
    const message = element("pg-message");
    message.textContent = text;
    message.hidden = !text;
    element("pg-results").hidden = Boolean(text);
  }

  function model() {
    const name = element("pg-task").value;
    if (!models[name]) models[name] = TransformerBook.loadModel(new URL(`${name}.json`, here).href);
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

  function escapeHtml(text) {
    return text.replace(
      /[&<>"]/g,
      (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c],
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

  // For an example: its held-out answer, and which decoding found it (said plainly when wrong).
  function showAnswer(loaded, text, outputs) {
    const note = element("pg-answer");
    const index = loaded.meta.examples.indexOf(text);
    const answer = index === -1 ? null : loaded.meta.example_answers?.[index];
    note.hidden = answer == null;
    if (answer == null) return;
    const verdicts = outputs.map(
      ([name, output]) => `${name} gets it ${output === answer ? "right" : "wrong"}`,
    );
    const said = verdicts.join("; ");
    note.textContent = `The right answer is ${answer}. ${said[0].toUpperCase()}${said.slice(1)}.`;
    note.classList.toggle("pg-wrong", outputs.some(([, output]) => output !== answer));
  }

  // What the page says about the model: its training and its held-out score.
  function describe(loaded) {
    const training = loaded.meta.training;
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
    const spec = {
      title,
      data: { values: rows },
      mark: "rect",
      encoding: {
        x: {
          field: "key",
          type: "nominal",
          sort: { field: "k", op: "min" },
          title: "key (attended to)",
          axis: { labelOverlap: "greedy" },
        },
        y: {
          field: "query",
          type: "nominal",
          sort: { field: "q", op: "min" },
          title: "query (attending)",
          axis: { labelOverlap: "greedy" },
        },
        color: {
          field: "w",
          type: "quantitative",
          title: "weight (%)",
          scale: { scheme: "viridis", domain: [0, 100] },
        },
        tooltip: [
          { field: "query", type: "nominal" },
          { field: "key", type: "nominal" },
          { field: "w", type: "quantitative", title: "weight (%)", format: ".1f" },
        ],
      },
      width: size,
      height: size,
      config: { legend: { orient: "bottom", gradientLength: Math.min(size, 200) } },
    };
    const drawing = ++pending;
    vegaEmbed(container, spec, { mode: "vega-lite", actions: false, renderer: "svg" })
      .then((result) => {
        if (drawing !== pending) return result.view.finalize(); // a newer drawing has started
        if (view) view.finalize();
        view = result.view;
        container.dataset.drawn = String(drawing);
        container.dataset.input = text; // the input it was drawn for (the browser test waits on it)
      })
      .catch((error) => say(`could not draw the attention map: ${error.message}`));
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
    const limit = loaded.meta.max_new_tokens;
    const started = performance.now();
    const greedy = TransformerBook.greedyDecode(loaded, encoded.ids, limit);
    const decodeMs = performance.now() - started;
    const beam = TransformerBook.beamSearch(loaded, encoded.ids, limit, BEAM_SIZE);
    const beamTokens = untilEnd(beam.tokens, loaded.meta.end_id);
    const beamSteps = TransformerBook.inspect(loaded, encoded.ids, beamTokens).steps;
    showOutput("pg-greedy", loaded, greedy.tokens, greedy.steps, null);
    showOutput("pg-beam", loaded, beamTokens, beamSteps, beam.score);
    showAnswer(loaded, text, [
      ["greedy decoding", TransformerBook.decodeTokens(loaded, greedy.tokens)],
      ["beam search", TransformerBook.decodeTokens(loaded, beamTokens)],
    ]);
    element("pg-timing").textContent =
      `greedy decoding took ${decodeMs.toFixed(1)} ms in this browser`;
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
      select.innerHTML = Array.from(
        { length: count },
        (_, i) => `<option value="${i}">${i}</option>`,
      ).join("");
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
      element("pg-input").maxLength = 400;
      element("pg-examples").innerHTML = examples
        .map(
          (example) => `<button type="button" class="pg-example">${escapeHtml(example)}</button>`,
        )
        .join(" ");
      // Characters run together; words are listed with spaces (the specials <pad>, <s>, </s>
      // are left out).
      const separator = loaded.meta.source_separator || "";
      element("pg-vocabulary").textContent = loaded.meta.source_tokens
        .slice(3)
        .map(shown)
        .join(separator);
      element("pg-unit").textContent = separator ? "words" : "characters";
      element("pg-limit").textContent = String(loaded.meta.max_source_len);
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
    element("pg-task").innerHTML = manifest.tasks
      .map((task) => `<option value="${task.name}">${escapeHtml(task.title)}</option>`)
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

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
