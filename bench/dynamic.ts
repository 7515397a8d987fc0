// Bounded dynamism's figures (issue 6): sequence lengths 1..N through a BERT-style encoder and a
// GPT-2-style decoder (forward without a cache; tiny widths, a position table of N) compiled with
// a dynamic sequence dim, for each bucket policy: how many programs were compiled, the total time
// spent in calls that compiled, and the time per call of the bucketed program against a program
// compiled with `dynamic: false` for exactly that length (the padding overhead: the bucket's top
// is computed, the real length returned). Lengths are sampled (--quick: fewer, and always the
// bottom and top of every pow2 bucket, where the overhead is worst and best), and each time is
// the fastest of --reps (and at least 20 ms of) warm calls, static and bucketed alternated.
//
//   npm run bench:dynamic    (or: npx tsx bench/dynamic.ts [--quick] [--max 1024] [--only gpt2])

import { compile } from "../compiler/index.ts";
import type { BucketPolicy } from "../compiler/dynamic.ts";
import type { Tensor } from "../index.ts";
import { BertModel, inputs as bertInputs, tinyConfig as bertTiny } from "../models/bert.ts";
import { GPT2, inputs as gpt2Inputs, tinyConfig as gpt2Tiny } from "../models/gpt2.ts";
import { ProgramCache, setDefaultProgramCache } from "../runtime/index.ts";

const argv = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const quick = argv.includes("--quick");
const max = flag("max", quick ? 256 : 1024);
const reps = flag("reps", quick ? 5 : 7);
const onlyAt = argv.indexOf("--only");
const only = onlyAt >= 0 ? argv[onlyAt + 1]!.split(",") : ["bert", "gpt2"];

setDefaultProgramCache(new ProgramCache({ disk: false }));

// The sample: every pow2 bucket's bottom and top (the worst and best padding), plus evenly
// spaced lengths (full mode: about 96 of them).
function sampleLengths(): number[] {
  const set = new Set<number>([1, 2, max]);
  for (let p = 2; p < max; p *= 2) {
    set.add(p);
    if (p + 1 <= max) set.add(p + 1);
  }
  const step = Math.max(1, Math.floor(max / (quick ? 8 : 96)));
  for (let n = step; n <= max; n += step) set.add(n);
  return [...set].sort((a, b) => a - b);
}
const lengths = sampleLengths();

// The fastest of at least --reps calls and 20 ms of calls of each of `a` and `b`, alternated
// call by call: sub-millisecond calls on a shared machine are dominated by interference, which
// only ever adds time, and alternating keeps a burst of load from landing on one side.
function timePair(a: () => unknown, b: () => unknown): [number, number] {
  let bestA = Infinity;
  let bestB = Infinity;
  let spent = 0;
  for (let r = 0; r < reps || spent < 40; r++) {
    const t0 = performance.now();
    a();
    const t1 = performance.now();
    b();
    const t2 = performance.now();
    spent += t2 - t0;
    bestA = Math.min(bestA, t1 - t0);
    bestB = Math.min(bestB, t2 - t1);
  }
  return [bestA, bestB];
}

type Fn = (...args: unknown[]) => unknown;
interface Subject {
  title: string;
  model: object;
  args(n: number): unknown[];
  dynamic: Record<string, Record<number, { max: number }>>;
}

const policies: [string, BucketPolicy][] = [
  ["pow2", "pow2"],
  ["multiple 128", { multiple: 128 }],
  ["none", "none"],
];

function bench(s: Subject): void {
  const asFn = (f: unknown): Fn => f as Fn;
  // Static reference: a program for exactly this length (dynamic off), compiled when it is
  // needed and dropped after, timed warm beside the bucketed one; each policy starts from an
  // empty program cache, so no run carries the programs of the runs before it.
  console.log(`\n${s.title}, lengths 1..${max} (${lengths.length} sampled), best of ${reps}+`);
  console.log("policy        compiles  compile s  overhead avg  overhead worst (at length)");
  for (const [label, buckets] of policies) {
    setDefaultProgramCache(new ProgramCache({ disk: false }));
    const fast = compile(s.model as never, { dynamic: s.dynamic, buckets });
    const call = asFn(fast);
    let compileMs = 0;
    const ratios: [number, number][] = [];
    for (const n of lengths) {
      const a = s.args(n);
      const before = fast.stats.compiles;
      const t0 = performance.now();
      call(...a);
      if (fast.stats.compiles > before) compileMs += performance.now() - t0;
      const f = asFn(compile(s.model as never, { dynamic: false }));
      f(...a);
      const [staticMs, bucketMs] = timePair(() => f(...a), () => call(...a));
      ratios.push([n, bucketMs / staticMs]);
    }
    const avg = ratios.reduce((acc, [, r]) => acc + r, 0) / ratios.length;
    const worst = ratios.reduce((x, y) => (y[1] > x[1] ? y : x));
    console.log(
      `${label.padEnd(13)} ${String(fast.stats.compiles).padStart(8)}  ` +
        `${(compileMs / 1000).toFixed(2).padStart(9)}  ${avg.toFixed(2).padStart(11)}x  ` +
        `${worst[1].toFixed(2).padStart(13)}x (${worst[0]})`,
    );
  }
}

const bertConfig = { ...bertTiny, maxPositionEmbeddings: max };
if (only.includes("bert")) bench({
  title: `BERT-style encoder (hidden ${bertConfig.hiddenSize}, ` +
    `${bertConfig.numHiddenLayers} layers)`,
  model: new BertModel(bertConfig).eval(),
  args: (n) => bertInputs({ batch: 1, seq: n }, bertConfig),
  dynamic: { inputIds: { 1: { max } }, "options.attentionMask": { 1: { max } } },
});

const gpt2Config = { ...gpt2Tiny, nPositions: max };
if (only.includes("gpt2")) bench({
  title: `GPT-2-style decoder, no cache (embd ${gpt2Config.nEmbd}, ${gpt2Config.nLayer} layers)`,
  model: new GPT2(gpt2Config).eval(),
  args: (n): Tensor[] => gpt2Inputs({ batch: 1, seq: n }, gpt2Config),
  dynamic: { inputIds: { 1: { max } } },
});
