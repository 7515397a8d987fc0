// The README's main job: compile the GPT-2-style model from models/ (tiny config, random
// weights), generate tokens with a growing sequence length, and show what Kiln did — the fused
// IR of one transformer block, every compile and recompile with its reason, eager vs compiled
// time, and an HTML view of the graph. Runs in well under a minute on 2 cores.

import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderHtml } from "../cli/html.ts";
import { cloneModule } from "../ir/clone.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import { parseHlo } from "../ir/parse.ts";
import { printComputation, printInstruction } from "../ir/print.ts";
import * as gpt2 from "../models/gpt2.ts";
import { formatFusionSummary, fusionSummary, optimizationPipeline } from "../passes/index.ts";
import { compile, explain, manualSeed, ops, type Tensor } from "../index.ts";

const NEW_TOKENS = 24;
const BLOCK_SOURCE = "models/gpt2.ts";

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
console.log(`eager                     ${eager.ms.toFixed(0).padStart(6)} ms`);
console.log(`compiled, first run       ${compiled.ms.toFixed(0).padStart(6)} ms  (includes compiles)`);
console.log(`compiled, second run      ${again.ms.toFixed(0).padStart(6)} ms  ` +
  `(${(eager.ms / again.ms).toFixed(1)}x eager)`);

// The captured graph for one length, optimized as compile() optimizes it.
const captured = parseHlo(explain(forward, prompt).program!);
const optimized = cloneModule(captured);
optimizationPipeline({ verify: false }).run(optimized);

console.log("\n== Fusion summary of the whole forward pass ==\n");
console.log(formatFusionSummary(fusionSummary(optimized)));

console.log(
  `\n== The fused IR of one transformer block (h.0), traced at length ${prompt.size(1)} ==\n`,
);
const block = firstBlock(optimized);
const callees = new Set<Computation>();
for (const i of block) for (const c of i.called) callees.add(c);
for (const c of callees) console.log(printComputation(c, { metadata: false }) + "\n");
for (const i of block) console.log(printInstruction(i, { metadata: false }));

const dir = join(tmpdir(), "kiln-demo");
mkdirSync(dir, { recursive: true });
const html = join(dir, "gpt2-tiny.html");
writeFileSync(html, renderHtml("gpt2 tiny forward", [
  { stage: "captured", pass: undefined, module: captured },
  { stage: "optimized", pass: undefined, module: optimized },
]));
console.log(`\nHTML view of the graph (open in a browser, no server needed): ${html}`);

/** Entry instructions of the first block: from its first op to the block's residual add. */
function firstBlock(m: Module): Instruction[] {
  const inBlock = (i: Instruction) =>
    i.metadata.sourceFile === BLOCK_SOURCE && (i.metadata.sourceLine ?? 0) < 189;
  const list = m.entry.instructions.filter((i) => i.opcode !== "parameter");
  const start = list.findIndex(inBlock);
  const out: Instruction[] = [];
  for (const i of list.slice(start)) {
    out.push(i);
    // The block's last op is its second residual add (models/gpt2.ts GPT2Block.forward).
    if (i.metadata.sourceLine === 164 && out.length > 3) break;
  }
  return out;
}
