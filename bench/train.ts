// Training throughput: steps per second of one training step in plain eager code (forward,
// cross-entropy, backward, AdamW step, zeroGrad — examples/training.ts) for GPT-2 tiny and small
// (the full-size config at a short sequence) and ResNet tiny and ResNet-18 (32x32 images), in
// eager mode, under lazy() and through compile() (the whole step — forward, backward, AdamW's
// update — one program; the row says how many programs it compiled and in which mode it ran).
// Each row: untimed warm-up steps (they compile), then timed steps; the figure is the median
// step. Ratios are against eager in the same run. Full-size rows run 1 + 2 steps.
// Prints a table; never used by tests.
//
//   npm run bench:train            (or: npx tsx bench/train.ts [--steps 5] [--quick]
//                                   [--only "GPT-2 small,ResNet-18"] [--modes eager,compiled])

import { compile, randint, type Tensor } from "../index.ts";
import { classifierStep, createModel, imageBatch, lazyStep, lmStep } from "../examples/training.ts";
import { GPT2, fullConfig } from "../models/gpt2.ts";
import { ResNet, fullConfig as resnet18, tinyConfig as resnetTiny } from "../models/resnet.ts";
import { AdamW } from "../optim/index.ts";
import { getBackend } from "../runtime/index.ts";

const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const stepsAt = argv.indexOf("--steps");
const STEPS = stepsAt >= 0 ? Number(argv[stepsAt + 1]) : quick ? 3 : 5;
// Eager needs a few steps beyond the first (which compiles) before V8 and the op cache settle.
const WARMUP = 4;
// compile(): the first call traces and compiles, the second is the first cache hit.
const COMPILED_WARMUP = 2;

type Mode = "eager" | "lazy" | "compiled";

interface Workload {
  name: string;
  /** Full-size rows: fewer steps. */
  big?: boolean;
  /** A fresh model, optimizer and a step function per mode, all from the same init. */
  make(): {
    eager: () => number;
    lazy: () => number;
    compiled: () => number;
    stats: () => { mode: string; compiles: number };
  };
}

function lm(name: string, make: () => GPT2, batch: number, seq: number, big = false): Workload {
  return {
    name,
    big,
    make() {
      const model = make();
      const opt = new AdamW([...model.parameters()], { lr: 1e-4 });
      const vocab = model.config.vocabSize;
      const x = randint(0, vocab, [batch, seq]);
      const y = randint(0, vocab, [batch, seq]);
      const step = (a: Tensor, b: Tensor) => lmStep(model, opt, a, b);
      const cs = compile(step);
      return {
        eager: () => step(x, y).item() as number,
        lazy: () => lazyStep(model, opt, () => step(x, y)),
        compiled: () => cs(x, y).item() as number,
        stats: () => cs.stats,
      };
    },
  };
}

function classifier(name: string, make: () => ResNet, batch: number, big = false): Workload {
  return {
    name,
    big,
    make() {
      const model = make().train();
      const opt = new AdamW([...model.parameters()], { lr: 1e-4 });
      const { x, y } = imageBatch(0, batch);
      const step = (a: Tensor, b: Tensor) => classifierStep(model, opt, a, b);
      const cs = compile(step);
      return {
        eager: () => step(x, y).item() as number,
        lazy: () => lazyStep(model, opt, () => step(x, y)),
        compiled: () => cs(x, y).item() as number,
        stats: () => cs.stats,
      };
    },
  };
}

const workloads: Workload[] = [
  lm("GPT-2 tiny, batch 4 x 32", () => createModel(), 4, 32),
  classifier("ResNet tiny, batch 8 x 3x32x32", () => new ResNet(resnetTiny), 8),
];
if (!quick) {
  workloads.push(
    lm("GPT-2 small (124M), batch 1 x 64", () => new GPT2({ ...fullConfig, embdPdrop: 0, attnPdrop: 0, residPdrop: 0 }).train(), 1, 64, true),
    classifier("ResNet-18, batch 2 x 3x32x32", () => new ResNet({ ...resnet18, numClasses: 10 }), 2, true),
  );
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

// --only a,b: the workloads whose names contain one of the strings; --modes eager,compiled: the
// modes to run (the others' cells print "-").
const onlyAt = argv.indexOf("--only");
const only = onlyAt >= 0 ? argv[onlyAt + 1]!.split(",") : undefined;
const modesAt = argv.indexOf("--modes");
const modes: Mode[] = modesAt >= 0
  ? (argv[modesAt + 1]!.split(",") as Mode[])
  : ["eager", "lazy", "compiled"];
for (const m of modes) {
  if (!["eager", "lazy", "compiled"].includes(m)) throw new Error(`bench:train: unknown mode ${m}`);
}
console.log(
  `Training steps (AdamW), default backend ${getBackend().name}; ${WARMUP} warm-up ` +
    `(compiled: ${COMPILED_WARMUP}) + ${STEPS} timed steps, median`,
);
console.log("");
console.log("| workload | eager steps/s | lazy steps/s | compiled steps/s | lazy / eager | compiled / eager | compiled: mode, programs | first eager step / first compiled call |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |");
for (const w of workloads) {
  if (only && !only.some((o) => w.name.includes(o))) continue;
  const perMode: Record<Mode, number> = { eager: NaN, lazy: NaN, compiled: NaN };
  let first = 0;
  let firstCompiled = 0;
  let how = "";
  for (const m of modes) {
    const made = w.make();
    const run = made[m];
    const times: number[] = [];
    const warm = m === "compiled" ? COMPILED_WARMUP : w.big ? 1 : WARMUP;
    const steps = w.big ? 2 : STEPS;
    for (let i = 0; i < warm + steps; i++) {
      const t0 = performance.now();
      const loss = run();
      const dt = performance.now() - t0;
      if (!Number.isFinite(loss)) throw new Error(`${w.name} ${m}: loss ${loss}`);
      if (i === 0 && m === "eager") first = dt;
      if (i === 0 && m === "compiled") firstCompiled = dt;
      if (i >= warm) times.push(dt);
    }
    perMode[m] = 1000 / median(times);
    if (m === "compiled") how = `${made.stats().mode}, ${made.stats().compiles}`;
  }
  const f = (v: number) =>
    Number.isNaN(v) ? "-" : v >= 10 ? v.toFixed(1) : v >= 0.1 ? v.toFixed(2) : v.toFixed(3);
  console.log(
    `| ${w.name} | ${f(perMode.eager)} | ${f(perMode.lazy)} | ${f(perMode.compiled)} | ` +
      `${f(perMode.lazy / perMode.eager)}x | ` +
      `${f(perMode.compiled / perMode.eager)}x | ${how} | ` +
      `${(first / 1000).toFixed(1)} s / ${(firstCompiled / 1000).toFixed(1)} s |`,
  );
}
