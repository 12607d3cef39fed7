// The page of `transformer serve`: calls the JSON API of the same server and draws the attention
// as SVG (so the view exports as SVG, as PNG through a canvas, and as one standalone HTML file).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const HEAD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
const state = { models: [], attention: null, title: "" };

async function api(path, body) {
  const headers = { "content-type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) headers["authorization"] = "Bearer " + key;
  const response = await fetch(path, body === undefined ? { headers } :
    { method: "POST", headers, body: JSON.stringify(body) });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function setStatus(id, text, isError) {
  $(id).textContent = text;
  $(id).classList.toggle("error", Boolean(isError));
}

function fillSelect(select, values, labels) {
  select.replaceChildren(...values.map((v, i) => {
    const o = document.createElement("option");
    o.value = v; o.textContent = labels ? labels[i] : v; return o;
  }));
}

async function loadModels() {
  let data;
  try {
    data = await api("/v1/models");
  } catch (err) { setStatus("translate-status", err.message, true); return; }
  state.models = data.models;
  showLimits(data.limits);
  const names = (task) => state.models.filter((m) => m.task === task).map((m) => m.name);
  fillSelect($("translate-model"), names("translation"));
  fillSelect($("attention-model"), state.models.map((m) => m.name));
  fillSelect($("classify-model"), names("classification"));
  $("translate-box").hidden = !names("translation").length;
  $("classify-box").hidden = !names("classification").length;
}

// What the server lets one request ask for (serve --max-texts and so on), shown under the title
// and applied to the beam and n-best fields.
function showLimits(limits) {
  if (!limits) return;
  $("limits").textContent = `limits: ${limits.max_texts} texts a request, ` +
    `${limits.max_chars} characters a text, beam ${limits.max_beam}, ` +
    `${limits.max_output_tokens} output tokens a sentence, ${limits.timeout_s} s in the queue`;
  $("beam").max = limits.max_beam;
  $("nbest").max = limits.max_beam;
}

// --- translate ------------------------------------------------------------------------------

// The glossary box: one "source term = target term" a line (a tab works as well as " = ").
function glossaryPairs() {
  const pairs = [];
  $("glossary").value.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    const cut = line.includes("\t") ? line.split("\t") : line.split("=");
    const [src, tgt] = [cut[0].trim(), cut.slice(1).join("=").trim()];
    if (!src || !tgt) throw new Error(`glossary line ${i + 1}: write "source term = target term"`);
    pairs.push([src, tgt]);
  });
  return pairs;
}

// A text as spans of its whitespace-separated words (the words the server's alignments count),
// the spaces between them kept as text.
function wordSpans(text, attr) {
  const out = [];
  let n = 0;
  for (const part of text.split(/(\s+)/)) {
    if (!part) continue;
    if (/^\s+$/.test(part)) { out.push(document.createTextNode(part)); continue; }
    const span = document.createElement("span");
    span.className = "w"; span.textContent = part; span.setAttribute(attr, n++);
    out.push(span);
  }
  return out;
}

// Point at a word: it and the words aligned to it (pairs [source word, target word]) light up.
function linkWords(tr, pairs) {
  const bySource = new Map(), byTarget = new Map();
  for (const [i, j] of pairs) {
    bySource.set(i, [...(bySource.get(i) || []), j]);
    byTarget.set(j, [...(byTarget.get(j) || []), i]);
  }
  const clear = () => tr.querySelectorAll(".w").forEach((w) => w.classList.remove("aligned", "pointed"));
  tr.addEventListener("mouseover", (e) => {
    const word = e.target.closest(".w"); if (!word) return;
    clear();
    word.classList.add("pointed");
    const j = word.getAttribute("data-j"), i = word.getAttribute("data-i");
    const [others, attr] = j !== null ? [byTarget.get(Number(j)), "data-i"] : [bySource.get(Number(i)), "data-j"];
    for (const k of others || []) tr.querySelector(`.w[${attr}="${k}"]`)?.classList.add("aligned");
  });
  tr.addEventListener("mouseleave", clear);
}

// Each call numbered: an answer that arrives after a newer request was sent is dropped, so the
// completion shown is always the one of the prefix as it is now.
let translateCalls = 0;

// One row of the translations table: a source text and its translation (a /v1/translate
// translation; `partial`: the sentences streamed so far, scores to come).
function translationRow(source, t, partial) {
  const tr = document.createElement("tr");
  const src = document.createElement("td"); src.className = "source"; src.append(...wordSpans(source, "data-i"));
  const out = document.createElement("td"); out.className = partial ? "translation partial" : "translation";
  const top = document.createElement("div"); top.className = "text"; top.append(...wordSpans(t.text, "data-j"));
  out.append(top);
  for (const alt of (t.nbest || []).slice(1)) {
    const d = document.createElement("div"); d.className = "nbest";
    d.textContent = `${alt.text} (${alt.score.toFixed(3)})`; out.append(d);
  }
  const score = document.createElement("td"); score.className = "score";
  score.textContent = partial ? "..." : t.score === null ? "greedy" : t.score.toFixed(3);
  if (!partial && t.log_prob !== null && t.log_prob_per_token !== null)
    score.title = `log-probability ${t.log_prob.toFixed(3)}, ${t.log_prob_per_token.toFixed(3)} a token`;
  tr.append(src, out, score);
  if (!partial) linkWords(tr, t.alignments || []);
  return tr;
}

// POST /v1/translate/stream: calls onEvent(kind, data) for each server-sent event as it arrives.
// A refusal before the first event is an ordinary JSON error; an error event after it throws.
async function stream(path, body, onEvent) {
  const headers = { "content-type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) headers["authorization"] = "Bearer " + key;
  const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    throw new Error(data.error || response.statusText);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
      let kind = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      const parsed = JSON.parse(data);
      if (kind === "error") throw new Error(parsed.error);
      if (onEvent(kind, parsed) === false) { reader.cancel(); return; }
    }
  }
}

// What the last translation streamed showed, event by event (the browser test reads it).
window.streamLog = [];

async function translate() {
  const call = ++translateCalls;
  const texts = $("source").value.split("\n").map((t) => t.trim()).filter((t) => t);
  if (!texts.length) { setStatus("translate-status", "type a sentence first", true); return; }
  const beam = Number($("beam").value), nbest = Number($("nbest").value);
  const body = { model: $("translate-model").value, texts, beam, alignments: true };
  if (nbest > 1) body.nbest = nbest;
  const prefix = $("target-prefix").value.trim();
  if (prefix) body.target_prefix = prefix;
  try {
    const glossary = glossaryPairs();
    if (glossary.length) body.glossary = glossary;
  } catch (err) { setStatus("translate-status", err.message, true); return; }
  setStatus("translate-status", "translating...");
  const log = window.streamLog = [];
  const shown = texts.map(() => []);  // each text's sentences so far
  const glue = (parts) => parts.filter((p) => p).join(" ");
  try {
    await stream("/v1/translate/stream", body, (kind, data) => {
      if (call !== translateCalls) return false;  // a newer request replaces this one
      if (kind === "token") {  // one sentence greedy or sampled: the translation so far
        $("translations").replaceChildren(...texts.map((source, i) =>
          translationRow(source, { text: i === data.text_index ? data.text : "" }, true)));
        const row = $("translations").rows[data.text_index];
        log.push({ step: data.step, shown: row.querySelector("td.translation .text").textContent, done: false });
      } else if (kind === "sentence") {
        shown[data.text_index].push(data.text);
        $("translations").replaceChildren(...texts.map((source, i) =>
          translationRow(source, { text: glue(shown[i]) }, true)));
        const row = $("translations").rows[data.text_index];  // what the page shows now
        log.push({ index: data.index, shown: row.querySelector("td.translation .text").textContent, done: false });
      } else if (kind === "done") {
        $("translations").replaceChildren(...data.translations.map((t, i) => translationRow(texts[i], t, false)));
        log.push({ done: true });
        setStatus("translate-status", `${data.timing.total_ms.toFixed(0)} ms`);
      }
    });
  } catch (err) {
    if (call === translateCalls) setStatus("translate-status", err.message, true);
  }
}

// The prefix box completes as the user types: a translation a short pause after the last key.
let prefixTimer = null;
function completeAsTyped() {
  clearTimeout(prefixTimer);
  prefixTimer = setTimeout(() => { if ($("source").value.trim()) translate(); }, 250);
}

// --- attention ------------------------------------------------------------------------------

// a text of several sentences is shown one sentence at a time (number: from 1)
async function showAttention(number = 1) {
  const text = $("attention-text").value.trim();
  if (!text) { setStatus("attention-status", "type a sentence first", true); return; }
  const body = { model: $("attention-model").value, text, sentence: number };
  const target = $("attention-target").value.trim();
  if (target) body.target = target;
  setStatus("attention-status", "reading the attention...");
  try {
    state.attention = await api("/v1/attention", body);
  } catch (err) { setStatus("attention-status", err.message, true); return; }
  const a = state.attention;
  const several = (a.sentences || []).length > 1;
  $("att-sentence-box").hidden = !several;
  if (several) {
    fillSelect($("att-sentence"), a.sentences.map((_, i) => i + 1),
      a.sentences.map((s, i) => `${i + 1}: ${s.length > 40 ? s.slice(0, 39) + "…" : s}`));
    $("att-sentence").value = a.sentence;
  }
  $("attention-output").textContent = (a.task === "translation" ? "translation: " : "label: ") + a.output;
  const kinds = a.task === "translation" ? ["cross", "encoder", "decoder"] : ["encoder"];
  for (const o of $("att-kind").options) o.disabled = !kinds.includes(o.value);
  if (!kinds.includes($("att-kind").value)) $("att-kind").value = kinds[0];
  setStatus("attention-status", "");
  refreshLayers();
}

function refreshLayers() {
  const a = state.attention; if (!a) return;
  const maps = a.attention[$("att-kind").value];
  const layer = Math.min(Number($("layer").value || maps.length), maps.length);
  fillSelect($("layer"), maps.map((_, i) => i + 1));
  $("layer").value = layer;
  const heads = maps[0].length, head = $("head").value || "avg";
  fillSelect($("head"), ["avg", "all", ...Array.from({ length: heads }, (_, h) => h)],
    ["average", "all (head view)", ...Array.from({ length: heads }, (_, h) => `head ${h + 1}`)]);
  $("head").value = [...$("head").options].some((o) => o.value === head) ? head : "avg";
  draw();
}

// (queries, keys) tokens of one kind of attention
function axes(a, kind) {
  if (kind === "cross") return [a.target_tokens, a.source_tokens];
  if (kind === "decoder") return [a.decoder_input_tokens, a.decoder_input_tokens];
  return [a.source_tokens, a.source_tokens];
}

function averageHeads(heads) {
  return heads[0].map((row, i) => row.map((_, j) => heads.reduce((s, h) => s + h[i][j], 0) / heads.length));
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function draw() {
  const a = state.attention; if (!a) return;
  const kind = $("att-kind").value, layer = Number($("layer").value), head = $("head").value;
  const heads = a.attention[kind][layer - 1];
  const [queries, keys] = axes(a, kind);
  const names = { cross: "encoder-decoder", encoder: "encoder self", decoder: "decoder self" };
  const headName = head === "avg" ? "heads averaged" : head === "all" ? "all heads" : `head ${Number(head) + 1}`;
  state.title = `${names[kind]} attention, layer ${layer}, ${headName}: "${a.output}"`;
  const svg = $("view-kind").value === "heads" || head === "all"
    ? headView(heads, head, queries, keys) : heatMap(head === "avg" ? averageHeads(heads) : heads[Number(head)], queries, keys);
  svg.setAttribute("id", "view");
  svg.setAttribute("data-kind", kind);
  svg.prepend(el("title", {}, state.title));
  $("view-holder").replaceChildren(svg);
}

// rows = queries (for cross-attention: the target pieces), columns = keys (the source pieces)
function heatMap(weights, queries, keys) {
  const cell = 26, left = 12 + 7 * Math.max(...queries.map((t) => t.length)), top = 12 + 7 * Math.max(...keys.map((t) => t.length));
  const width = left + cell * keys.length + 10, height = top + cell * queries.length + 10;
  const svg = el("svg", { xmlns: SVG_NS, width, height, viewBox: `0 0 ${width} ${height}`, class: "heatmap",
    "data-rows": queries.length, "data-cols": keys.length, "font-family": "sans-serif", "font-size": 12 });
  svg.append(el("rect", { x: 0, y: 0, width, height, fill: "#fff" }));
  keys.forEach((t, j) => svg.append(el("text", { x: left + j * cell + cell / 2 + 4, y: top - 6, class: "col-label", "data-col": j,
    transform: `rotate(-60 ${left + j * cell + cell / 2 + 4} ${top - 6})` }, t)));
  queries.forEach((t, i) => svg.append(el("text", { x: left - 6, y: top + i * cell + cell / 2 + 4, "text-anchor": "end",
    class: "row-label", "data-row": i }, t)));
  weights.forEach((row, i) => row.forEach((w, j) => {
    const v = Math.sqrt(w);  // a square-root ramp keeps weak links visible beside strong ones
    const fill = `rgb(${Math.round(255 - 230 * v)},${Math.round(255 - 170 * v)},${Math.round(255 - 60 * v)})`;
    const rect = el("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1, class: "cell",
      "data-row": i, "data-col": j, fill });
    rect.append(el("title", {}, `${queries[i]} -> ${keys[j]}: ${w.toFixed(3)}`));
    svg.append(rect);
  }));
  // hover a token: its row (or column) stays, the rest fades
  svg.addEventListener("mouseover", (e) => {
    const row = e.target.getAttribute("data-row"), col = e.target.getAttribute("data-col");
    if (row === null && col === null) return;
    for (const c of svg.querySelectorAll(".cell")) {
      const on = (row !== null && c.getAttribute("data-row") === row) || (col !== null && c.getAttribute("data-col") === col);
      c.setAttribute("opacity", on ? 1 : 0.25);
    }
  });
  svg.addEventListener("mouseleave", () => svg.querySelectorAll(".cell").forEach((c) => c.removeAttribute("opacity")));
  return svg;
}

// bertviz's head view: queries on the left, keys on the right, a line per link weighted by attention
function headView(heads, head, queries, keys) {
  const rowH = 22, colW = 7 * Math.max(...queries.map((t) => t.length), ...keys.map((t) => t.length)) + 16, gap = 160;
  const width = 2 * colW + gap, height = rowH * Math.max(queries.length, keys.length) + 30;
  const svg = el("svg", { xmlns: SVG_NS, width, height, viewBox: `0 0 ${width} ${height}`, class: "headview",
    "data-rows": queries.length, "data-cols": keys.length, "font-family": "sans-serif", "font-size": 12 });
  svg.append(el("rect", { x: 0, y: 0, width, height, fill: "#fff" }));
  const chosen = head === "all" ? heads.map((h, k) => [h, k]) : head === "avg" ? [[averageHeads(heads), 0]] : [[heads[Number(head)], Number(head)]];
  const links = el("g", { class: "links" });
  for (const [w, k] of chosen) {
    w.forEach((row, i) => row.forEach((v, j) => {
      if (v < 0.02) return;
      links.append(el("line", { x1: colW, y1: 14 + i * rowH, x2: colW + gap, y2: 14 + j * rowH, stroke: HEAD_COLOURS[k % HEAD_COLOURS.length],
        "stroke-width": 1 + 3 * v, "stroke-opacity": (v * 0.9 / Math.sqrt(chosen.length)).toFixed(3), "data-row": i, "data-col": j, class: "link" }));
    }));
  }
  svg.append(links);
  queries.forEach((t, i) => svg.append(el("text", { x: colW - 6, y: 18 + i * rowH, "text-anchor": "end", class: "row-label", "data-row": i }, t)));
  keys.forEach((t, j) => svg.append(el("text", { x: colW + gap + 6, y: 18 + j * rowH, class: "col-label", "data-col": j }, t)));
  svg.addEventListener("mouseover", (e) => {
    const row = e.target.getAttribute("data-row"), col = e.target.getAttribute("data-col");
    if (!e.target.classList.contains("row-label") && !e.target.classList.contains("col-label")) return;
    for (const l of svg.querySelectorAll(".link")) {
      const on = (row !== null && l.getAttribute("data-row") === row) || (col !== null && l.getAttribute("data-col") === col);
      l.setAttribute("display", on ? "inline" : "none");
    }
  });
  svg.addEventListener("mouseleave", () => svg.querySelectorAll(".link").forEach((l) => l.removeAttribute("display")));
  return svg;
}

// --- export ---------------------------------------------------------------------------------

function currentSvgText() {
  const svg = $("view");
  if (!svg) throw new Error("show an attention view first");
  return new XMLSerializer().serializeToString(svg);
}

function download(name, url) {
  const a = document.createElement("a");
  a.href = url; a.download = name; document.body.append(a); a.click(); a.remove();
}

function exportSvg() {
  const text = currentSvgText();
  window.lastExport = { format: "svg", length: text.length };
  download("attention.svg", URL.createObjectURL(new Blob([text], { type: "image/svg+xml" })));
}

function exportPng() {
  const svg = $("view"), text = currentSvgText();
  const img = new Image(), scale = 2;
  img.onload = () => {
    const canvas = document.createElement("canvas");
    canvas.width = svg.width.baseVal.value * scale; canvas.height = svg.height.baseVal.value * scale;
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale); ctx.drawImage(img, 0, 0);
    const url = canvas.toDataURL("image/png");
    window.lastExport = { format: "png", dataUrl: url, width: canvas.width, height: canvas.height };
    download("attention.png", url);
  };
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
}

function exportHtml() {
  const escape = (s) => s.replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
  const html = `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escape(state.title)}</title>` +
    `<style>body{font:14px sans-serif;margin:1.5em;color:#1d2430}</style></head><body>` +
    `<h1 style="font-size:1.1em">${escape(state.title)}</h1><p>source: ${escape(state.attention.source_tokens.join(" "))}</p>` +
    `${currentSvgText()}</body></html>\n`;
  window.lastExport = { format: "html", length: html.length };
  download("attention.html", URL.createObjectURL(new Blob([html], { type: "text/html" })));
}

function guarded(fn) {
  return () => { try { fn(); } catch (err) { setStatus("attention-status", err.message, true); } };
}

// --- classify -------------------------------------------------------------------------------

async function classify() {
  const text = $("classify-text").value.trim();
  if (!text) { setStatus("classify-status", "type a text first", true); return; }
  try {
    const data = await api("/v1/classify", { model: $("classify-model").value, texts: [text] });
    const result = data.results[0], chosen = new Set(result.labels.map((l) => l.label));
    $("bars").replaceChildren(...Object.entries(result.probabilities).map(([label, p]) => {
      const bar = document.createElement("div");
      bar.className = "bar" + (chosen.has(label) ? " chosen" : "");
      const name = document.createElement("span"); name.textContent = label;
      const track = document.createElement("div"), fill = document.createElement("div");
      fill.className = "fill"; fill.style.width = `${(100 * p).toFixed(1)}%`; track.append(fill);
      const value = document.createElement("span"); value.className = "p";
      const t = data.thresholds ? ` / ${data.thresholds[label]}` : "";
      value.textContent = p.toFixed(3) + t;
      bar.append(name, track, value); return bar;
    }));
    setStatus("classify-status", data.multi_label ? "labels at or over their threshold" : "the most probable label");
  } catch (err) { setStatus("classify-status", err.message, true); }
}

// --- wiring ---------------------------------------------------------------------------------

$("translate").addEventListener("click", translate);
$("target-prefix").addEventListener("input", completeAsTyped);
$("explore").addEventListener("click", () => {
  $("attention-text").value = $("source").value.split("\n").find((t) => t.trim()) || "";
  $("attention-model").value = $("translate-model").value;
  showAttention(1);
});
$("attention").addEventListener("click", () => showAttention(1));
$("att-sentence").addEventListener("change", () => showAttention(Number($("att-sentence").value)));
$("classify").addEventListener("click", classify);
$("att-kind").addEventListener("change", refreshLayers);
for (const id of ["view-kind", "layer", "head"]) $(id).addEventListener("change", draw);
$("export-png").addEventListener("click", guarded(exportPng));
$("export-svg").addEventListener("click", guarded(exportSvg));
$("export-html").addEventListener("click", guarded(exportHtml));
loadModels();
