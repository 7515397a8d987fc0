// Peak intermediate memory of each zoo model's forward graph under buffer assignment, against
// the lower bound (the largest simultaneous live set): the target is peak <= 1.2x the
// bound. The graph is captured with lazy mode (one program for the whole forward pass), run
// through the optimization pipeline, then planned by passes/buffers.ts; the plan column is the
// planner's time (the issue's budget: under 200 ms for GPT-2's full graph).
// Run: npx tsx bench/memory.ts [--full] (tiny configs by default; --full adds published sizes,
// which take a while to initialise).

import { zoo, type ConfigName } from "../models/index.ts";
import { assignBuffers, fusionSummary } from "../passes/index.ts";
import { lastLazyGraph, lazy, Tensor } from "../tensor/index.ts";
import { setGradEnabled } from "../tensor/autograd.ts";

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
