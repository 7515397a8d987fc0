// The README's main job: compile the GPT-2-style model from models/ (tiny config, random
// weights), generate tokens with a growing sequence length, and show what Kiln did — the fused
// IR of one transformer block, every compile and recompile with its reason, eager vs compiled
// time (warm against warm: each after one untimed run), and an HTML view of the graph. Runs in
// well under a minute on 2 cores.

import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderHtml } from "../cli/html.ts";
import { cloneModule } from "../ir/clone.ts";
import type { Module } from "../ir/module.ts";
import { parseHlo } from "../ir/parse.ts";
import { printComputation } from "../ir/print.ts";
import * as gpt2 from "../models/gpt2.ts";
import { formatFusionSummary, fusionSummary, optimizationPipeline } from "../passes/index.ts";
import { compile, explain, manualSeed, ops, randn, type Tensor } from "../index.ts";

const NEW_TOKENS = 24;

manualSeed(0);
const model = gpt2.default("tiny").eval();
const [prompt] = gpt2.inputs({ batch: 1, seq: 5 });
const forward = (ids: Tensor): Tensor => model.call(ids).logits;

/** Greedy decoding without a cache: the whole sequence goes through the model each step. */
function generate(step: (ids: Tensor) => Tensor): { ids: Tensor; ms: number } {
  let ids = prompt;
  const t0 = performance.now();
  for (let i = 0; i < NEW_TOKENS; i++) {
    const logits = step(ids);
    const last = logits.narrow(1, logits.size(1) - 1, 1);
    ids = ops.cat([ids, ops.argmax(last, -1).to(ids.dtype)], 1);
  }
  return { ids, ms: performance.now() - t0 };
}

console.log(`GPT-2 (tiny: ${gpt2.tinyConfig.nLayer} layers, ${gpt2.tinyConfig.nEmbd} wide), ` +
  `prompt of ${prompt.size(1)} tokens, ${NEW_TOKENS} new tokens, sequence 5..${5 + NEW_TOKENS}\n`);

// Warm against warm: eager's first run warms up the JavaScript engine and the kernels it calls,
// as the compiled function's first run (which also compiles) does for it.
generate(forward);
const eager = generate(forward);
const fast = compile(forward); // default: dynamic "auto", pow2 buckets
const compiled = generate(fast);
const again = generate(fast);
const same = JSON.stringify(eager.ids.toArray()) === JSON.stringify(compiled.ids.toArray());
console.log(`tokens: ${JSON.stringify((compiled.ids.toArray() as number[][])[0])}`);
console.log(`compiled tokens equal eager: ${same}\n`);

console.log("== Compiles and recompiles ==\n");
const s = fast.stats;
console.log(`calls ${s.calls}, compiles ${s.compiles}, cache hits ${s.cacheHits}, ` +
  `graph breaks ${s.graphBreaks.length}`);
for (const r of s.recompiles) console.log(`  call ${r.call}: ${r.reason}`);
for (const r of s.specializations) console.log(`  call ${r.call}: ${r.reason}`);

console.log("\n== Time for the whole generation ==\n");
console.log(`eager, second run (warm)      ${eager.ms.toFixed(0).padStart(6)} ms`);
console.log(`compiled, first run           ${compiled.ms.toFixed(0).padStart(6)} ms  ` +
  `(includes tracing and compiling)`);
console.log(`compiled, second run (warm)   ${again.ms.toFixed(0).padStart(6)} ms  ` +
  `(${(eager.ms / again.ms).toFixed(1)}x eager)`);
console.log(`(each: wall-clock time of the whole ${NEW_TOKENS}-token generation, timed once ` +
  `after one untimed run of the same generation; warm eager against warm compiled)`);

// The captured graph for one length, optimized as compile() optimizes it.
const captured = parseHlo(explain(forward, prompt).program!);
const optimized = cloneModule(captured);
optimizationPipeline({ verify: false }).run(optimized);

console.log("\n== Fusion summary of the whole forward pass ==\n");
console.log(formatFusionSummary(fusionSummary(optimized)));

// One block is traced on its own (the first of model.h, with a hidden state of the prompt's
// length), so what is printed is that block and nothing else — not found by position in the
// whole forward's IR.
const h0 = [...model.h][0]!;
const hidden = randn([1, prompt.size(1), gpt2.tinyConfig.nEmbd]);
const blockIr = parseHlo(explain(h0, hidden, null).program!);
optimizationPipeline({ verify: false }).run(blockIr);
const dots = (m: Module) => m.computations.flatMap((c) => c.instructions)
  .filter((i) => i.opcode === "dot").length;
console.log(
  `\n== The fused IR of one transformer block (h.0), traced at length ${prompt.size(1)} ==\n`,
);
console.log(`(${dots(blockIr)} dot ops in this block; the whole forward, ` +
  `${gpt2.tinyConfig.nLayer} blocks and the LM head, has ${dots(optimized)})\n`);
for (const c of blockIr.computations) {
  if (c !== blockIr.entry) console.log(printComputation(c, { metadata: false }) + "\n");
}
console.log(printComputation(blockIr.entry, { metadata: false }));

const dir = join(tmpdir(), "kiln-demo");
mkdirSync(dir, { recursive: true });
const html = join(dir, "gpt2-tiny.html");
writeFileSync(html, renderHtml("gpt2 tiny forward", [
  { stage: "captured", pass: undefined, module: captured },
  { stage: "optimized", pass: undefined, module: optimized },
]));
console.log(`\nHTML view of the graph (open in a browser, no server needed): ${html}`);
