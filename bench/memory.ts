// Peak intermediate memory of each zoo model's forward graph under buffer assignment, against
// the lower bound (the largest simultaneous live set): the target is peak <= 1.2x the
// bound. The graph is captured with lazy mode (one program for the whole forward pass), run
// through the optimization pipeline, then planned by passes/buffers.ts; the plan column is the
// planner's time (the issue's budget: under 200 ms for GPT-2's full graph).
// Run: npx tsx bench/memory.ts [--full] (tiny configs by default; --full adds published sizes,
// which take a while to initialise).

import { zoo, type ConfigName } from "../models/index.ts";
import { assignBuffers, fusionSummary, optimizationPipeline } from "../passes/index.ts";
import { lastLazyGraph, lazy, randint, Tensor } from "../tensor/index.ts";
import { setGradEnabled } from "../tensor/autograd.ts";
import { compile } from "../compiler/index.ts";
import { INTERNALS, type Internals } from "../compiler/compile.ts";
import { cloneModule } from "../ir/clone.ts";
import { createModel, lmStep } from "../examples/training.ts";
import { GPT2, fullConfig as gpt2Full } from "../models/gpt2.ts";
import { AdamW } from "../optim/index.ts";

// Inference only: no autograd recording (as PyTorch benchmarks run under no_grad), so
// parameters that require grad do not keep every activation of a forward alive.
setGradEnabled(false);


const full = process.argv.includes("--full");
const configs: ConfigName[] = full ? ["tiny", "full"] : ["tiny"];
const specs: Record<string, Record<string, number>> = {
  mlp: { batch: 64 },
  resnet: { batch: 2 },
  bert: { batch: 1, seq: 128 },
  gpt2: { batch: 1, seq: 128 },
  vit: { batch: 1 },
  whisper: { batch: 1 },
};

const mb = (n: number) => `${(n / 2 ** 20).toFixed(2)} MiB`;
const rows: string[][] = [["model", "config", "kernels", "peak", "lower bound", "ratio", "plan"]];
let worst = 0;
let slowest = 0;
for (const entry of Object.values(zoo)) {
  for (const config of configs) {
    const model = entry.create(config);
    model.eval();
    const spec = { ...specs[entry.name] };
    // Tiny configs have short position tables; full ones take the published lengths.
    if (config === "tiny" && "seq" in spec) spec["seq"] = 32;
    const args = entry.inputs(spec, config);
    const out = lazy(() => (model.call as (...a: unknown[]) => unknown)(...args), {
      maxDepth: 1_000_000,
      cutRepeats: false,
    });
    const first = (v: unknown): Tensor =>
      v instanceof Tensor ? v : first(Array.isArray(v) ? v[0] : Object.values(v as object)[0]);
    first(out).data();
    const graph = lastLazyGraph();
    if (!graph) throw new Error(`${entry.name}: no lazy graph ran`);
    // Plan time: the fastest of three runs, so it does not count the planner's JIT warm-up.
    let plan = assignBuffers(graph.module);
    let planMs = Infinity;
    for (let k = 0; k < 3; k++) {
      const t0 = performance.now();
      plan = assignBuffers(graph.module);
      planMs = Math.min(planMs, performance.now() - t0);
    }
    slowest = Math.max(slowest, planMs);
    const ratio = plan.lowerBoundBytes === 0 ? 1 : plan.peakBytes / plan.lowerBoundBytes;
    worst = Math.max(worst, ratio);
    rows.push([entry.name, config, String(fusionSummary(graph.module).kernels),
      mb(plan.peakBytes), mb(plan.lowerBoundBytes), ratio.toFixed(3), `${planMs.toFixed(2)} ms`]);
  }
}
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join("  "));
console.log(`\nworst peak / lower bound: ${worst.toFixed(3)} (target <= 1.2)`);
console.log(`slowest plan: ${slowest.toFixed(2)} ms (target < 200 ms)`);

// A compiled training step (issue #16): compile() of examples/training.ts's lmStep (forward,
// cross-entropy, backward, AdamW, zeroGrad) is ONE program, the joint forward + backward graph
// and the update; its intermediates planned the same way (target: peak <= 1.3x the bound).
setGradEnabled(true);
const trainRows: string[][] = [["train step", "kernels", "peak", "lower bound", "ratio", "plan"]];
let trainWorst = 0;
const steps: [string, () => GPT2, number, number][] = [["GPT-2 tiny, 4 x 32", () => createModel(), 4, 32]];
if (full) {
  const noDrop = { ...gpt2Full, embdPdrop: 0, attnPdrop: 0, residPdrop: 0 };
  steps.push(["GPT-2 small (124M), 1 x 64", () => new GPT2(noDrop).train(), 1, 64]);
}
for (const [name, make, batch, seq] of steps) {
  const model = make();
  const opt = new AdamW([...model.parameters()], { lr: 1e-4 });
  const vocab = model.config.vocabSize;
  const x = randint(0, vocab, [batch, seq]);
  const y = randint(0, vocab, [batch, seq]);
  const step = compile((a: Tensor, b: Tensor) => lmStep(model, opt, a, b));
  step(x, y);
  const internals = (step as unknown as Record<symbol, Internals>)[INTERNALS]!;
  const captured = internals.lastTrace()?.module;
  if (step.stats.mode !== "graph" || !captured) throw new Error(`${name}: not one program`);
  const module = cloneModule(captured);
  optimizationPipeline().run(module);
  const t0 = performance.now();
  const plan = assignBuffers(module);
  const planMs = performance.now() - t0;
  const ratio = plan.lowerBoundBytes === 0 ? 1 : plan.peakBytes / plan.lowerBoundBytes;
  trainWorst = Math.max(trainWorst, ratio);
  trainRows.push([name, String(fusionSummary(module).kernels), mb(plan.peakBytes),
    mb(plan.lowerBoundBytes), ratio.toFixed(3), `${planMs.toFixed(2)} ms`]);
}
console.log("");
const tw = trainRows[0]!.map((_, i) => Math.max(...trainRows.map((r) => r[i]!.length)));
for (const r of trainRows) console.log(r.map((c, i) => c.padEnd(tw[i]!)).join("  "));
console.log(`\ntrain step peak / lower bound: ${trainWorst.toFixed(3)} (target <= 1.3)`);
