#include "server/web_page.h"

namespace ts::server {

std::string_view web_page_html() {
  return R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tokensieve</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
  header { background: #1d2330; color: #fff; padding: 10px 20px; }
  header span { color: #9aa4b8; margin-left: 12px; }
  main { display: grid; grid-template-columns: minmax(320px, 420px) 1fr; gap: 16px; padding: 16px 20px; }
  section { background: #fff; border: 1px solid #d9dde5; border-radius: 6px; padding: 12px; }
  h2 { font-size: 14px; margin: 0 0 8px; }
  textarea { width: 100%; box-sizing: border-box; height: 110px; font: inherit; }
  label { display: block; margin: 8px 0 2px; color: #4a5468; }
  input[type=number] { width: 90px; }
  .row { display: flex; gap: 12px; flex-wrap: wrap; align-items: end; }
  .policy { display: flex; gap: 6px; margin: 4px 0; }
  .policy input { flex: 1; font-family: ui-monospace, monospace; }
  .help { color: #6b7385; font-size: 12px; margin: 2px 0 6px; }
  button { font: inherit; padding: 5px 12px; cursor: pointer; }
  #output { white-space: pre-wrap; font-family: ui-monospace, monospace; min-height: 120px; margin: 0; }
  #output .prompt { color: #6b7385; }
  #status, #summary { color: #4a5468; margin: 6px 0; }
  #heatmap-wrap { overflow-x: auto; }
  #heatmap { image-rendering: pixelated; border: 1px solid #d9dde5; }
  .legend span { display: inline-block; margin-right: 12px; }
  .legend i { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin-right: 4px; border: 1px solid #aaa; }
  #tip { position: fixed; pointer-events: none; background: #1d2330; color: #fff; padding: 4px 8px; border-radius: 4px;
         font: 12px ui-monospace, monospace; display: none; white-space: pre; }
</style>
</head>
<body>
<header><b>tokensieve</b><span id="model">…</span></header>
<main>
  <section>
    <h2>Request</h2>
    <label for="prompt">Prompt</label>
    <textarea id="prompt">Once upon a time</textarea>
    <div class="row">
      <div><label for="mode">Endpoint</label>
        <select id="mode"><option value="completions">completion</option><option value="chat">chat</option></select></div>
      <div><label for="max_tokens">Max tokens</label><input id="max_tokens" type="number" value="48" min="1"></div>
      <div><label for="temperature">Temperature</label><input id="temperature" type="number" value="0" min="0" max="2" step="0.1"></div>
    </div>
    <label>Policies (applied in order; none = dense)</label>
    <div id="policies"></div>
    <button id="add-policy" type="button">+ policy</button>
    <div style="margin-top: 12px"><button id="run" type="button">Generate</button> <button id="stop" type="button" disabled>Stop</button></div>
    <div id="status"></div>
  </section>
  <section>
    <h2>Output</h2>
    <pre id="output"></pre>
  </section>
  <section style="grid-column: 1 / -1">
    <h2>What the policies decided (last request): tokens × layers</h2>
    <div id="summary">No request yet.</div>
    <label for="view">Show</label>
    <select id="view">
      <option value="flags">what ran (per token and layer)</option>
      <option value="scores">policy scores (OrthoRank orthogonality, TokenButler importance, ...)</option>
      <option value="keys_attended">keys attended, mean over heads (key selection)</option>
    </select>
    <div class="legend" id="legend"></div>
    <div id="heatmap-wrap"><canvas id="heatmap" width="0" height="0"></canvas></div>
  </section>
</main>
<div id="tip"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let policyList = [];
let controller = null;

// Cell categories from the TokenFlag bits (decision_log.h) of one token at one layer.
const BITS = { attn: 1, ffn: 2, kv: 4, full: 8, low: 16, evicted: 32 };
const CATEGORIES = [
  { name: "K/V kept at full precision", color: "#27ae60", test: (f) => (f & BITS.full) !== 0 },
  { name: "ran the layer (dense)", color: "#dfe4ec", test: (f) => (f & 3) === 3 && (f & BITS.kv) && !(f & BITS.evicted) },
  { name: "skipped the layer", color: "#c0392b", test: (f) => (f & 3) === 0 },
  { name: "skipped attention", color: "#e67e22", test: (f) => (f & 3) === BITS.ffn },
  { name: "skipped FFN", color: "#f1c40f", test: (f) => (f & 3) === BITS.attn },
  { name: "K/V not cached", color: "#2e86de", test: (f) => !(f & BITS.kv) },
  { name: "evicted later", color: "#8e44ad", test: (f) => (f & BITS.evicted) !== 0 },
];
function category(f) { return CATEGORIES.find((c) => c.test(f)) || CATEGORIES[0]; }

function addPolicyRow(name, options) {
  const row = document.createElement("div");
  row.className = "policy";
  const select = document.createElement("select");
  for (const p of policyList) select.add(new Option(p.name, p.name));
  const input = document.createElement("input");
  const help = document.createElement("div");
  help.className = "help";
  const describe = () => {
    const p = policyList.find((x) => x.name === select.value);
    input.placeholder = p ? p.options : "";
    help.textContent = p ? p.description : "";
  };
  select.onchange = describe;
  if (name) select.value = name;
  input.value = options || "";
  const remove = document.createElement("button");
  remove.textContent = "×";
  remove.type = "button";
  remove.onclick = () => { row.remove(); help.remove(); };
  row.append(select, input, remove);
  $("policies").append(row, help);
  describe();
}

function policySpecs() {
  return [...document.querySelectorAll("#policies .policy")].map((row) => {
    const name = row.querySelector("select").value, opts = row.querySelector("input").value.trim();
    return opts ? name + ":" + opts : name;
  });
}

async function init() {
  try {
    const models = await (await fetch("/v1/models")).json();
    $("model").textContent = models.data[0].id + " · context " + models.data[0].max_model_len;
    const policies = await (await fetch("/v1/policies")).json();
    policyList = policies.data;
    for (const spec of policies.default) {
      const [name, ...rest] = spec.split(":");
      addPolicyRow(name, rest.join(":"));
    }
  } catch (e) {
    $("status").textContent = "cannot reach the server: " + e;
  }
}

// Reads a server-sent-event stream, calling onEvent with each parsed data object.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of block.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data !== "[DONE]") onEvent(JSON.parse(data));
      }
    }
  }
}

async function run() {
  const chat = $("mode").value === "chat";
  const body = {
    max_tokens: Number($("max_tokens").value),
    temperature: Number($("temperature").value),
    stream: true,
    policy: policySpecs(),
  };
  if (chat) body.messages = [{ role: "user", content: $("prompt").value }];
  else body.prompt = $("prompt").value;
  $("output").textContent = "";
  if (!chat) {
    const p = document.createElement("span");
    p.className = "prompt";
    p.textContent = $("prompt").value;
    $("output").append(p);
  }
  const text = document.createTextNode("");
  $("output").append(text);
  $("status").textContent = "generating…";
  $("run").disabled = true;
  $("stop").disabled = false;
  controller = new AbortController();
  const started = performance.now();
  let tokens = 0;
  try {
    const response = await fetch(chat ? "/v1/chat/completions" : "/v1/completions", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error((await response.json()).error.message);
    let finish = "";
    await readEvents(response, (event) => {
      if (event.error) throw new Error(event.error.message);
      const choice = event.choices[0];
      const piece = chat ? (choice.delta.content || "") : choice.text;
      if (piece) { text.data += piece; tokens++; }
      if (choice.finish_reason) finish = choice.finish_reason;
    });
    const seconds = (performance.now() - started) / 1000;
    $("status").textContent = `done (${finish}), ${tokens} chunks in ${seconds.toFixed(2)} s`;
  } catch (e) {
    $("status").textContent = e.name === "AbortError" ? "stopped" : "error: " + e.message;
  } finally {
    $("run").disabled = false;
    $("stop").disabled = true;
  }
  await showDecisions();
}

async function showDecisions() {
  const response = await fetch("/v1/decisions/last");
  if (!response.ok) return;
  $("heatmap").decisions = await response.json();
  draw();
}

// Light to dark blue for a value in [0, 1].
function shade(x) {
  const c = (a, b) => Math.round(a + (b - a) * x);
  return `rgb(${c(232, 20)}, ${c(240, 60)}, ${c(250, 140)})`;
}

// "· local (sliding-window) layers: 0-4, 6-10 (window 512)", or nothing on a model without windows.
function localLayers(d) {
  const local = d.layer_windows.map((w, l) => (w ? l : -1)).filter((l) => l >= 0);
  if (!local.length) return "";
  const runs = [];
  for (const l of local) {
    const last = runs[runs.length - 1];
    if (last && last[1] === l - 1) last[1] = l; else runs.push([l, l]);
  }
  const text = runs.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(", ");
  return ` · local (sliding-window) layers: ${text} (window ${Math.max(...d.layer_windows)})`;
}

function draw() {
  const canvas = $("heatmap"), d = canvas.decisions;
  if (!d) return;
  const view = $("view").value;
  const cell = Math.max(4, Math.min(14, Math.floor(1400 / Math.max(1, d.tokens.length))));
  canvas.width = d.tokens.length * cell;
  canvas.height = d.n_layers * cell;
  canvas.dataset.cell = cell;
  const ctx = canvas.getContext("2d");
  const counts = new Map();
  const gap = cell > 5 ? 1 : 0;
  for (let layer = 0; layer < d.n_layers; layer++) {
    const values = view === "flags" ? null : d[view][layer];
    let lo = Infinity, hi = -Infinity;
    if (values) for (const v of values) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    for (let t = 0; t < d.tokens.length; t++) {
      if (view === "flags") {
        const c = category(d.flags[layer][t]);
        counts.set(c.name, (counts.get(c.name) || 0) + 1);
        ctx.fillStyle = c.color;
      } else if (!values || values[t] === null) {
        ctx.fillStyle = "#f2f2f2";  // no policy reported this layer
      } else {
        ctx.fillStyle = shade(hi > lo ? (values[t] - lo) / (hi - lo) : 0.5);
      }
      ctx.fillRect(t * cell, layer * cell, cell - gap, cell - gap);
    }
  }
  $("legend").innerHTML = "";
  if (view === "flags") {
    for (const c of CATEGORIES) {
      const s = document.createElement("span");
      s.innerHTML = `<i style="background:${c.color}"></i>`;
      s.append(`${c.name} (${counts.get(c.name) || 0})`);
      $("legend").append(s);
    }
  } else {
    const reported = d[view].filter((row) => row !== null).length;
    $("legend").textContent = reported ? `per layer: light = lowest, dark = highest (${reported} layers reported)`
                                       : "no policy reported these for the last request";
  }
  const policies = d.policies.length ? d.policies.join(" + ") : "none (dense)";
  $("summary").textContent = `policies: ${policies} · ${d.tokens.length} tokens × ${d.n_layers} layers · ` +
    `FFN ran for ${(100 * d.ffn_fraction).toFixed(1)}% of (token, layer) pairs · rows: layers 0 (top) to ${d.n_layers - 1}` +
    localLayers(d);
}

$("heatmap").addEventListener("mousemove", (e) => {
  const canvas = $("heatmap"), d = canvas.decisions, tip = $("tip");
  if (!d) return;
  const cell = Number(canvas.dataset.cell), rect = canvas.getBoundingClientRect();
  const t = Math.floor((e.clientX - rect.left) / cell), layer = Math.floor((e.clientY - rect.top) / cell);
  if (t < 0 || t >= d.tokens.length || layer < 0 || layer >= d.n_layers) { tip.style.display = "none"; return; }
  const f = d.flags[layer][t], score = d.scores[layer] ? d.scores[layer][t] : null;
  const keys = d.keys_attended[layer] ? d.keys_attended[layer][t] : null;
  const window = d.layer_windows[layer];
  tip.textContent = `token ${t} ${JSON.stringify(d.tokens[t])}, layer ${layer}` +
    (window ? ` (local: sliding window of ${window})` : "") + `\n${category(f).name}` +
    (score !== null ? `\nscore ${score.toFixed(4)}` : "") + (keys !== null ? `\nkeys attended ${keys.toFixed(1)}` : "");
  tip.style.left = e.clientX + 12 + "px";
  tip.style.top = e.clientY + 12 + "px";
  tip.style.display = "block";
});
$("heatmap").addEventListener("mouseleave", () => { $("tip").style.display = "none"; });
$("add-policy").onclick = () => addPolicyRow(policyList.length ? policyList[0].name : "", "");
$("run").onclick = run;
$("view").onchange = draw;
$("stop").onclick = () => controller && controller.abort();
init();
</script>
</body>
</html>
)html";
}

}  // namespace ts::server
