// Bounded dynamism's figures: sequence lengths 1..N through a BERT-style encoder (tiny widths,
// a position table of N) compiled with a dynamic sequence dim, for each bucket policy: how many
// programs were compiled, the total time spent in calls that compiled, and the time per call of
// the bucketed program against a program compiled for exactly that length (the padding
// overhead: the bucket's top is computed, the real length returned). Lengths are sampled
// (--quick: fewer), and each figure is the median of --reps calls.
//
//   npm run bench:dynamic            (or: npx tsx bench/dynamic.ts [--quick] [--max 1024])

import { compile } from "../compiler/index.ts";
import type { BucketPolicy } from "../compiler/dynamic.ts";
import { BertModel, inputs, tinyConfig } from "../models/bert.ts";
import { ProgramCache, setDefaultProgramCache } from "../runtime/index.ts";

const argv = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const quick = argv.includes("--quick");
const max = flag("max", quick ? 256 : 1024);
const reps = flag("reps", 3);

setDefaultProgramCache(new ProgramCache({ disk: false }));
const config = { ...tinyConfig, maxPositionEmbeddings: max };
const model = new BertModel(config).eval();

const step = quick ? Math.max(1, Math.floor(max / 24)) : Math.max(1, Math.floor(max / 96));
const lengths: number[] = [];
for (let n = 1; n <= max; n += step) lengths.push(n);
if (lengths.at(-1) !== max) lengths.push(max);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timeCall(f: () => unknown): number {
  const ts: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    f();
    ts.push(performance.now() - t0);
  }
  return median(ts);
}

const policies: [string, BucketPolicy][] = [
  ["pow2", "pow2"],
  ["multiple 128", { multiple: 128 }],
  ["none", "none"],
];

// Static reference: one program per length (dynamic off), timed warm.
const staticMs = new Map<number, number>();
for (const n of lengths) {
  const [ids, o] = inputs({ batch: 1, seq: n }, config);
  const f = compile(model, { dynamic: false });
  f(ids, o);
  staticMs.set(n, timeCall(() => f(ids, o)));
}

console.log(`BERT-style encoder (hidden ${config.hiddenSize}, ${config.numHiddenLayers} layers), ` +
  `lengths 1..${max} (${lengths.length} sampled), median of ${reps}`);
console.log(
  "policy        compiles  compile s  overhead avg  overhead worst (at length)",
);
for (const [label, buckets] of policies) {
  const fast = compile(model, {
    dynamic: { inputIds: { 1: { max } }, "options.attentionMask": { 1: { max } } },
    buckets,
  });
  let compileMs = 0;
  const ratios: [number, number][] = [];
  for (const n of lengths) {
    const [ids, o] = inputs({ batch: 1, seq: n }, config);
    const before = fast.stats.compiles;
    const t0 = performance.now();
    fast(ids, o);
    if (fast.stats.compiles > before) compileMs += performance.now() - t0;
    ratios.push([n, timeCall(() => fast(ids, o)) / staticMs.get(n)!]);
  }
  const avg = ratios.reduce((a, [, r]) => a + r, 0) / ratios.length;
  const worst = ratios.reduce((a, b) => (b[1] > a[1] ? b : a));
  console.log(
    `${label.padEnd(13)} ${String(fast.stats.compiles).padStart(8)}  ` +
      `${(compileMs / 1000).toFixed(2).padStart(9)}  ${avg.toFixed(2).padStart(11)}x  ` +
      `${worst[1].toFixed(2).padStart(13)}x (${worst[0]})`,
  );
}
