// The PyTorch reference runs (scripts/fixtures/gen_train.py → test/fixtures/train/), the same
// runs in Kiln (plain eager steps from examples/training.ts, optionally each under lazy()), and
// the agreement the training tests ask of Kiln's per-step losses: within 1e-4 relative for each
// of the first 50 steps, within 1% at the last step. scripts/validate_train.ts prints the same.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  classifierStep,
  createModel,
  imageBatch,
  lazyStep,
  lmStep,
  readCorpus,
  trainConfig,
  windows,
} from "../../examples/training.ts";
import { compile, loadSafetensors, type Tensor } from "../../index.ts";
import { ResNet, tinyConfig as resnetTiny } from "../../models/resnet.ts";
import { AdamW } from "../../optim/index.ts";

const DIR = join(import.meta.dirname, "..", "fixtures", "train");

export interface Reference {
  config: Record<string, unknown>;
  optimizer: { name: string; lr: number; weightDecay: number };
  steps: number;
  losses: number[];
  /** GPT-2: the window offsets of each step's batch rows. */
  offsets?: number[][];
  /** ResNet: each step's labels and the sum of its pixels (a check on the image formula). */
  labels?: number[][];
  pixelSums?: number[];
}

export function reference(name: "gpt2_tiny" | "resnet_tiny"): Reference {
  return JSON.parse(readFileSync(join(DIR, `${name}_losses.json`), "utf8")) as Reference;
}

export const initWeights = (name: "gpt2_tiny" | "resnet_tiny") =>
  join(DIR, `${name}_init.safetensors`);

/** Relative differences |kiln - torch| / |torch|, step by step. */
export function relDiffs(kiln: readonly number[], torch: readonly number[]): number[] {
  return kiln.map((v, i) => Math.abs(v - torch[i]!) / Math.abs(torch[i]!));
}

export interface Agreement {
  /** The largest relative difference over steps 1..min(50, steps). */
  maxRel50: number;
  /** The relative difference at the last step. */
  relLast: number;
  steps: number;
}

export function agreement(kiln: readonly number[], torch: readonly number[]): Agreement {
  const rel = relDiffs(kiln, torch);
  return {
    maxRel50: Math.max(...rel.slice(0, 50)),
    relLast: rel[rel.length - 1]!,
    steps: rel.length,
  };
}

// ---- The runs (shared by the tests and scripts/validate_train.ts) ---------------------------

export interface Run {
  losses: number[];
  /** Wall time of the first step (compiles included), ms. */
  firstStepMs: number;
  /** Steps per second over the steps after the first. */
  stepsPerSecond: number;
}

function timed(steps: number, step: (s: number) => number): Run {
  const losses: number[] = [];
  const t0 = performance.now();
  let t1 = t0;
  for (let s = 0; s < steps; s++) {
    losses.push(step(s));
    if (s === 0) t1 = performance.now();
  }
  const rest = (performance.now() - t1) / 1000;
  return { losses, firstStepMs: t1 - t0, stepsPerSecond: (steps - 1) / rest };
}

/** PyTorch's GPT-2 run again in Kiln: its init weights, batches and optimizer. */
/** How a run takes its steps: plain eager code, each step under lazy(), or compile(step). */
export type TrainMode = "eager" | "lazy" | "compiled";

export function trainGPT2(mode: TrainMode, steps?: number): Run & { programs: number } {
  const ref = reference("gpt2_tiny");
  const ids = readCorpus();
  const model = createModel(initWeights("gpt2_tiny"));
  const opt = new AdamW(model.parameters(), {
    lr: ref.optimizer.lr,
    weightDecay: ref.optimizer.weightDecay,
  });
  const seq = trainConfig.nPositions;
  const compiled = compile((a: Tensor, b: Tensor) => lmStep(model, opt, a, b));
  const run = timed(steps ?? ref.steps, (s) => {
    const { x, y } = windows(ids, ref.offsets![s]!, seq);
    if (mode === "compiled") return compiled(x, y).item() as number;
    const step = () => lmStep(model, opt, x, y);
    return mode === "lazy" ? lazyStep(model, opt, step) : (step().item() as number);
  });
  return { ...run, programs: compiled.stats.compiles };
}

/** PyTorch's ResNet run again in Kiln; also checks that no buffer requires grad after it. */
export function trainResNet(
  mode: TrainMode,
  steps?: number,
): Run & { buffersClean: boolean; programs: number } {
  const ref = reference("resnet_tiny");
  const model = new ResNet(resnetTiny);
  model.loadStateDict(loadSafetensors(initWeights("resnet_tiny")));
  model.train();
  const opt = new AdamW(model.parameters(), {
    lr: ref.optimizer.lr,
    weightDecay: ref.optimizer.weightDecay,
  });
  const compiled = compile((a: Tensor, b: Tensor) => classifierStep(model, opt, a, b));
  const run = timed(steps ?? ref.steps, (s) => {
    const { x, y } = imageBatch(s);
    if (mode === "compiled") return compiled(x, y).item() as number;
    const step = () => classifierStep(model, opt, x, y);
    return mode === "lazy" ? lazyStep(model, opt, step) : (step().item() as number);
  });
  return {
    ...run,
    buffersClean: model.buffers().every((b) => !b.requiresGrad),
    programs: compiled.stats.compiles,
  };
}
