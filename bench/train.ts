// Training throughput: steps per second of one training step in plain eager code (forward,
// cross-entropy, backward, AdamW step, zeroGrad — examples/training.ts) for GPT-2 tiny and small
// (the full-size config at a short sequence) and ResNet tiny and ResNet-18 (32x32 images), in
// eager mode, under lazy() and through compile() (the whole step — forward, backward, AdamW's
// update — one program; the row says how many programs it compiled and in which mode it ran).
// Each row: untimed warm-up steps (they compile), then timed steps; the figure is the median
// step. Ratios are against eager in the same run. Full-size rows run 1 + 2 steps.
// Prints a table; never used by tests.
//
// Then the peer rows, beside Kiln compiled: tfjs (cpu and wasm backends; `tf.variableGrads` and
// tf.train.adam) and jax-js (wasm; `valueAndGrad` + AdamW in one `jit`) train the same model
// from the same weights on the same batch — the loss graph Kiln captures (forward +
// cross-entropy) translated into each peer's ops by bench/peers' translators, each peer's own
// autodiff for the backward — each in a child process (bench/peers/train_peer.ts). A peer whose
// first-step loss disagrees with Kiln's is reported, not timed. They need the peers' packages
// (`npm --prefix bench/peers ci`); without them the rows say so.
//
//   npm run bench:train            (or: npx tsx bench/train.ts [--steps 5] [--quick]
//                                   [--only "GPT-2 small,ResNet-18"] [--modes eager,compiled]
//                                   [--peers tfjs-cpu,tfjs-wasm,jax | --peers none])

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { compile, manualSeed, nn, randint, type Tensor } from "../index.ts";
import { classifierStep, createModel, imageBatch, lazyStep, lmStep } from "../examples/training.ts";
import {
  captureGraph,
  lossAgrees,
  PEER_HEADER,
  type AdamWHyper,
  type PeerTrainResult,
  peerRowCells,
  TRAIN_RESULT_MARK,
  trainableSlots,
  writeTrainGraph,
} from "./peers/train_graph.ts";
import { GPT2, fullConfig } from "../models/gpt2.ts";
import { ResNet, fullConfig as resnet18, tinyConfig as resnetTiny } from "../models/resnet.ts";
import { AdamW } from "../optim/index.ts";
import { toElementType } from "../tensor/dtype.ts";
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

/** AdamW as every row runs it (Kiln's defaults, stated so the peers get the same). */
const HYPER: AdamWHyper = { lr: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 1e-2 };
const ADAMW = {
  lr: HYPER.lr,
  betas: [HYPER.beta1, HYPER.beta2] as const,
  eps: HYPER.eps,
  weightDecay: HYPER.weightDecay,
};

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
    /** The step's loss alone (forward + cross-entropy), for the peers' capture. */
    loss: () => Tensor;
    params: Tensor[];
  };
}

function lm(name: string, make: () => GPT2, batch: number, seq: number, big = false): Workload {
  return {
    name,
    big,
    make() {
      const model = make();
      const opt = new AdamW([...model.parameters()], ADAMW);
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
        loss: () => {
          const { logits } = model.call(x);
          return nn.functional.crossEntropy(logits.reshape(-1, vocab), y.reshape(-1));
        },
        params: [...model.parameters()],
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
      const opt = new AdamW([...model.parameters()], ADAMW);
      const { x, y } = imageBatch(0, batch);
      const step = (a: Tensor, b: Tensor) => classifierStep(model, opt, a, b);
      const cs = compile(step);
      return {
        eager: () => step(x, y).item() as number,
        lazy: () => lazyStep(model, opt, () => step(x, y)),
        compiled: () => cs(x, y).item() as number,
        stats: () => cs.stats,
        loss: () => nn.functional.crossEntropy(model.call(x), y),
        params: [...model.parameters()],
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
// --peers a,b: the peer rows to run (tfjs-cpu, tfjs-wasm, jax), or none.
const PEER_NAMES = ["tfjs-cpu", "tfjs-wasm", "jax"];
const peersAt = argv.indexOf("--peers");
const PEERS = peersAt >= 0
  ? argv[peersAt + 1] === "none" ? [] : argv[peersAt + 1]!.split(",")
  : PEER_NAMES;
for (const p of PEERS) {
  if (!PEER_NAMES.includes(p)) throw new Error(`bench:train: unknown peer ${p}`);
}
/** The most time a peer row's timed steps may take (a row slower than that runs fewer). */
const PEER_BUDGET_MS = 120_000;
/** A peer child that runs longer is stopped and its row says so. */
const PEER_TIMEOUT_MS = (quick ? 5 : 15) * 60_000;
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "..");
const PEER_SCRIPT = join(HERE, "peers", "train_peer.ts");
const PEERS_INSTALLED = existsSync(join(HERE, "peers", "node_modules", "@tensorflow", "tfjs-core"));
/** The seed of the default generator before the peers' model is built (and Kiln's reference). */
const PEER_SEED = 0;
const peerRows: string[][] = [];

/** Runs one peer child; its result, or a row saying why there is none. */
function runPeerChild(runtime: string, dir: string): Promise<PeerTrainResult> {
  return new Promise((done) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", PEER_SCRIPT, "--runtime", runtime, "--dir", dir],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let errTail = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      errTail = (errTail + d).slice(-2000);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, PEER_TIMEOUT_MS);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split("\n").find((l) => l.startsWith(TRAIN_RESULT_MARK));
      if (line !== undefined) {
        done(JSON.parse(line.slice(TRAIN_RESULT_MARK.length)) as PeerTrainResult);
        return;
      }
      const last = errTail.trim().split("\n").filter((l) => l.trim() !== "").pop() ?? "";
      done({
        runtime,
        note: timedOut
          ? `stopped after ${PEER_TIMEOUT_MS / 1000} s`
          : `exited with ${code ?? signal} and no result${last ? `: ${last.trim()}` : ""}`,
      });
    });
  });
}

/**
 * The peer rows of one workload: the loss graph captured from a model built from PEER_SEED,
 * Kiln's first two eager losses from another built from the same seed (the reference), then a
 * child per peer.
 */
async function runPeers(w: Workload, kilnCompiled: number): Promise<string[][]> {
  if (!PEERS_INSTALLED) {
    return PEERS.map((p) => [w.name, p, "-", "-", "-", "-", "not installed: npm --prefix bench/peers ci"]);
  }
  manualSeed(PEER_SEED);
  const forCapture = w.make();
  const g = captureGraph(forCapture.loss);
  let trainable: number[];
  try {
    trainable = trainableSlots(
      g.params,
      forCapture.params.map((p) => ({ type: toElementType(p.dtype), dims: p.shape, data: p.data() })),
    );
  } catch (e) {
    const why = `loss graph: ${e instanceof Error ? e.message : String(e)}`;
    return PEERS.map((p) => [w.name, p, "-", "-", "-", "-", why]);
  }
  manualSeed(PEER_SEED);
  const ref = w.make();
  const kilnLosses: [number, number] = [ref.eager(), ref.eager()];
  const dir = mkdtempSync(join(tmpdir(), "kiln-train-peers-"));
  try {
    writeTrainGraph(dir, g, {
      name: w.name,
      trainable,
      hyper: HYPER,
      kilnLosses,
      steps: w.big ? 2 : STEPS,
      budgetMs: PEER_BUDGET_MS,
    });
    const rows: string[][] = [];
    for (const p of PEERS) {
      const r = await runPeerChild(p, dir);
      if (r.losses && r.losses.length > 0 && !lossAgrees(r.losses[0]!, kilnLosses[0])) {
        delete r.times;
      }
      rows.push(peerRowCells(w.name, r, kilnLosses, kilnCompiled));
      process.stderr.write(`  ${w.name}: ${rows.at(-1)!.slice(1).join(" | ")}\n`);
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
  if (PEERS.length > 0) peerRows.push(...(await runPeers(w, perMode.compiled)));
}

if (PEERS.length > 0) {
  console.log("");
  console.log(
    `Peers: the same loss graph (translated), weights and batch; AdamW with the same ` +
      `hyperparameters; step 1 (compile) apart, then 1 warm-up + up to ${STEPS} timed steps ` +
      `(full-size: 2, and no more than ${PEER_BUDGET_MS / 1000} s of them), median. ` +
      `x Kiln compiled = peer step time / Kiln compiled step time.`,
  );
  console.log("");
  console.log(`| ${PEER_HEADER.join(" | ")} |`);
  console.log(`| ${PEER_HEADER.map((_, i) => (i < 2 || i >= 5 ? "---" : "---:")).join(" | ")} |`);
  for (const r of peerRows) console.log(`| ${r.map((c) => c.replaceAll("|", "\\|")).join(" | ")} |`);
  const [l1, l5, l15] = loadavg();
  console.log("");
  console.log(`load average at the end: ${l1!.toFixed(2)}, ${l5!.toFixed(2)}, ${l15!.toFixed(2)}`);
}
