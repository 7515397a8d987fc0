// The example page's script: Kiln's browser bundle (dist/browser/kiln.js, served as ./kiln.js
// by serve.ts), GPT-2 tiny from the safetensors file next to the page, greedy decoding through
// compile() on wasm with a static KV cache (two programs: the prompt's and one step's, whatever
// the number of tokens), and what compile() did. Everything is also left on
// `window.kilnResult` (or `window.kilnError`) for test/browser/browser.test.ts.

import * as kiln from "./kiln.js";

const $ = (id) => document.getElementById(id);

function fact(name, value) {
  const row = document.createElement("tr");
  for (const text of [name, String(value)]) {
    const cell = document.createElement("td");
    cell.textContent = text;
    row.append(cell);
  }
  $("facts").append(row);
}

/** Positive integers from a query parameter like "5,17,42,8"; a clear error otherwise. */
function idsParam(params, name, fallback, vocab) {
  const text = params.get(name) ?? fallback;
  const ids = text.split(",").map((s) => Number(s.trim()));
  if (ids.length === 0 || !ids.every((n) => Number.isInteger(n) && n >= 0 && n < vocab)) {
    throw new Error(`?${name}= must be token ids 0..${vocab - 1}, comma-separated; got "${text}"`);
  }
  return ids;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)];
}

async function main() {
  const params = new URLSearchParams(location.search);
  $("status").textContent = "fetching gpt2-tiny.safetensors…";
  const response = await fetch("./gpt2-tiny.safetensors");
  if (!response.ok) {
    throw new Error(`gpt2-tiny.safetensors: HTTP ${response.status} (write it with ` +
      "`npx tsx examples/browser/make_weights.ts`)");
  }
  const bytes = new Uint8Array(await response.arrayBuffer());
  const { tensors, metadata } = kiln.readSafetensors(bytes);
  if (metadata?.["kiln.config"] === undefined) {
    throw new Error("gpt2-tiny.safetensors has no kiln.config metadata (made by make_weights.ts?)");
  }
  const config = JSON.parse(metadata["kiln.config"]);
  const prompt = idsParam(params, "prompt", "5,17,42,8", config.vocabSize);
  const maxNewTokens = Number(params.get("tokens") ?? 16);
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1 ||
      prompt.length + maxNewTokens - 1 > config.nPositions) {
    throw new Error(`?tokens= must be an integer >= 1 with prompt + tokens - 1 <= ` +
      `${config.nPositions} positions; got ${params.get("tokens")}`);
  }

  const model = new kiln.models.gpt2.GPT2(config).eval();
  model.loadStateDict(tensors);
  const fast = kiln.compile(model, { backend: "wasm" });
  const stepMs = [];
  const forward = (ids, options) => {
    const t0 = performance.now();
    const out = fast(ids, options);
    stepMs.push(performance.now() - t0);
    return out;
  };
  $("status").textContent = "generating…";
  const t0 = performance.now();
  const ids = model.generate(kiln.tensor([prompt.map(BigInt)]), {
    maxNewTokens, staticCache: true, forward,
  });
  const totalMs = performance.now() - t0;
  const tokens = ids.toArray()[0].map(Number);

  const stats = fast.stats;
  // The wasm backend runs on this page's thread: this build has no wasm worker pool yet.
  const threads = 1;
  const result = {
    tokens,
    prompt,
    newTokens: tokens.slice(prompt.length),
    mode: stats.mode,
    calls: stats.calls,
    compiles: stats.compiles,
    cacheHits: stats.cacheHits,
    recompiles: stats.recompiles.map((r) => ({ call: r.call, reason: r.reason })),
    replayReasons: stats.replayReasons.map((r) => r.reason),
    // The backends compile()'s programs were compiled for (the cache keys name them).
    backend: [...new Set(kiln.cacheStats().entries
      .filter((e) => e.kind === "compiled")
      .map((e) => JSON.parse(e.key).backend))].join(", "),
    firstStepMs: stepMs[0],
    msPerToken: median(stepMs.slice(1)),
    totalMs,
    threads,
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    sharedArrayBuffer: typeof SharedArrayBuffer === "function",
    analysis: kiln.analysisHost(),
  };

  $("tokens").textContent = `prompt ${prompt.join(" ")}\n` +
    `generated ${result.newTokens.join(" ")}`;
  fact("backend", result.backend);
  fact("mode", result.mode);
  fact("calls / compiles / cache hits", `${result.calls} / ${result.compiles} / ${result.cacheHits}`);
  fact("first step (prompt; traces and compiles)", `${result.firstStepMs.toFixed(1)} ms`);
  fact("ms/token after it (median)", result.msPerToken.toFixed(2));
  fact("total", `${result.totalMs.toFixed(0)} ms for ${maxNewTokens} tokens`);
  fact("threads", result.threads);
  fact("crossOriginIsolated", result.crossOriginIsolated);
  fact("source analysis", result.analysis);
  $("recompiles").textContent = [
    `${result.compiles} compiles`,
    ...result.recompiles.map((r) => `recompiled at call ${r.call}: ${r.reason}`),
    ...result.replayReasons.map((r) => `replay mode: ${r}`),
  ].join("\n");
  $("status").textContent = "done";
  window.kilnResult = result;
}

main().catch((e) => {
  const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  window.kilnError = text;
  $("status").className = "error";
  $("status").textContent = text;
});
