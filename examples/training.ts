// What examples/train.ts (`npm run train`) and the training tests (test/train/) share: the
// corpus and its batches, the synthetic image batches, one training step in plain eager code
// (forward, loss, backward, optimizer step, zeroGrad), the same step under lazy(), checkpoints
// (weights and optimizer state in one safetensors file) and sampling text from the model.
// docs/training.md ("Training a model") describes it.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  Generator,
  lazy,
  loadSafetensors,
  nn,
  noGrad,
  ones,
  randn,
  readSafetensors,
  saveSafetensorsFile,
  type Tensor,
  tensor,
  zeros,
} from "../index.ts";
import { GPT2, type GPT2Config, tinyConfig } from "../models/gpt2.ts";
import type { Optimizer, OptimizerStateDict, ParamState } from "../optim/optimizer.ts";
import { decode, encode } from "./chars.ts";

export const ROOT = join(import.meta.dirname, "..");
export const CORPUS = join(ROOT, "data", "tinyshakespeare.txt");

/** GPT-2 tiny (models/gpt2.ts) without dropout: the model the training runs train. */
export const trainConfig: GPT2Config = {
  ...tinyConfig,
  embdPdrop: 0,
  attnPdrop: 0,
  residPdrop: 0,
};

/** The corpus' token ids (examples/chars.ts), one per character. */
export function readCorpus(path: string = CORPUS): Int32Array {
  return encode(readFileSync(path, "utf8"));
}

/**
 * A language-model batch: row r holds ids[o_r .. o_r + seq) as input and the same window
 * shifted by one as target, both int64 [offsets.length, seq].
 */
export function windows(
  ids: Int32Array,
  offsets: readonly number[],
  seq: number,
): { x: Tensor; y: Tensor } {
  const x = new BigInt64Array(offsets.length * seq);
  const y = new BigInt64Array(offsets.length * seq);
  offsets.forEach((o, r) => {
    if (!(Number.isInteger(o) && o >= 0 && o + seq < ids.length)) {
      throw new Error(`windows: offset ${o} does not leave ${seq + 1} ids in the corpus`);
    }
    for (let t = 0; t < seq; t++) {
      x[r * seq + t] = BigInt(ids[o + t]!);
      y[r * seq + t] = BigInt(ids[o + t + 1]!);
    }
  });
  return { x: tensor(x).reshape(offsets.length, seq), y: tensor(y).reshape(offsets.length, seq) };
}

/** A 32-bit integer hash (murmur3's finalizer); scripts/fixtures/gen_train.py has the same. */
export function hash32(n: number): number {
  let h = n >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The window offsets of training step `step` (0-based): a function of the step and the seed
 * alone, so a run resumed at step k draws the batches the uninterrupted run draws.
 */
export function stepOffsets(
  step: number,
  options: { batch: number; seq: number; corpusLength: number; seed?: number },
): number[] {
  const { batch, seq, corpusLength, seed = 0 } = options;
  const range = corpusLength - seq;
  const base = hash32(seed ^ 0x5bd1e995);
  return Array.from({ length: batch }, (_, r) => hash32((base + step * batch + r) >>> 0) % range);
}

/**
 * Hugging Face's GPT-2 initialisation (GPT2PreTrainedModel._init_weights, as
 * scripts/fixtures/gen_train.py draws it in PyTorch): embeddings and Conv1D weights N(0, 0.02),
 * the residual projections (`c_proj`) N(0, 0.02 / sqrt(2 nLayer)), biases 0, LayerNorms 1 and
 * 0 — Kiln's nn.Embedding default, N(0, 1), would make the tied LM head's first logits huge.
 */
export function initGPT2(model: GPT2, seed = 0): GPT2 {
  const generator = new Generator(seed);
  const std = (name: string) =>
    name.endsWith("c_proj.weight") ? 0.02 / Math.sqrt(2 * model.config.nLayer) : 0.02;
  const weights: Record<string, Tensor> = {};
  for (const [name, p] of model.namedParameters()) {
    if (/(^|\.)ln_(1|2|f)\.weight$/.test(name)) weights[name] = ones([...p.shape]);
    else if (name.endsWith(".bias")) weights[name] = zeros([...p.shape]);
    else weights[name] = randn([...p.shape], { generator }).mul(std(name));
  }
  model.loadStateDict(weights);
  return model;
}

/**
 * GPT-2 tiny without dropout, in training mode: with `init`'s weights (a safetensors path or a
 * state dict), else initialised by initGPT2 from `seed`.
 */
export function createModel(init?: string | Record<string, Tensor>, seed = 0): GPT2 {
  const model = new GPT2(trainConfig);
  if (init === undefined) initGPT2(model, seed);
  else model.loadStateDict(typeof init === "string" ? loadSafetensors(init) : init);
  return model.train();
}

/**
 * One training step of a language model, plain eager code: the logits, the mean cross-entropy
 * of every position's next id, backward, the optimizer's update, and the grads cleared.
 * Returns the loss (before the update).
 */
export function lmStep(model: GPT2, opt: Optimizer, x: Tensor, y: Tensor): Tensor {
  const { logits } = model.call(x);
  const vocab = logits.size(-1);
  const loss = nn.functional.crossEntropy(logits.reshape(-1, vocab), y.reshape(-1));
  loss.backward();
  opt.step();
  opt.zeroGrad();
  return loss;
}

/** One training step of a classifier (logits [N, classes], labels [N]). */
export function classifierStep(
  model: nn.Module & { forward(x: Tensor): Tensor },
  opt: Optimizer,
  x: Tensor,
  y: Tensor,
): Tensor {
  const loss = nn.functional.crossEntropy(model.call(x), y);
  loss.backward();
  opt.step();
  opt.zeroGrad();
  return loss;
}

/**
 * The tensors a training loop carries from one step to the next: the model's parameters and
 * buffers and the optimizer's state. A lazy step returns them from its scope, so the one
 * program that computes the loss also computes (and returns) all of them.
 */
export function liveTensors(model: nn.Module, opt: Optimizer): Tensor[] {
  const out: Tensor[] = [...model.parameters(), ...model.buffers()];
  for (const st of opt.state.values()) {
    for (const v of Object.values(st)) if (typeof v === "object" && v !== null) out.push(v);
  }
  return out;
}

/**
 * `step` (one of the steps above) under lazy(): recorded, then run as one program when the
 * loss is read; returns the loss's value.
 */
export function lazyStep(model: nn.Module, opt: Optimizer, step: () => Tensor): number {
  const [loss] = lazy(() => [step(), ...liveTensors(model, opt)] as const);
  return loss.item() as number;
}

// ---- Synthetic images (the ResNet run) --------------------------------------------------------

/**
 * The images and labels of one ResNet training step (scripts/fixtures/gen_train.py's
 * `image_batch`): sample i = step * batch + b has label hash32(i) % 10 and pixels
 * (hash32(base + n) % 128 - 64) / 64 with base = i * C*H*W + 0x9E3779B9 (mod 2^32), plus 1 on
 * the label's region (channel label % 3; rows 8·(label / 3) .. + 7, or for label 9 rows
 * 24..31 and columns 16..31). Images are float32 [batch, 3, 32, 32], labels int64 [batch].
 */
export function imageBatch(
  step: number,
  batch = 8,
): { x: Tensor; y: Tensor; labels: number[]; pixelSum: number } {
  const C = 3;
  const S = 32;
  const per = C * S * S;
  const data = new Float32Array(batch * per);
  const labels: number[] = [];
  let pixelSum = 0;
  for (let b = 0; b < batch; b++) {
    const i = step * batch + b;
    const label = hash32(i) % 10;
    labels.push(label);
    const base = (i * per + 0x9e3779b9) >>> 0;
    const ch = label % 3;
    const band = Math.floor(label / 3);
    for (let n = 0; n < per; n++) {
      const c = Math.floor(n / (S * S));
      const row = Math.floor(n / S) % S;
      const col = n % S;
      let v = ((hash32((base + n) >>> 0) % 128) - 64) / 64;
      const inRegion = band < 3
        ? row >= 8 * band && row < 8 * band + 8
        : row >= 24 && col >= 16;
      if (c === ch && inRegion) v += 1;
      data[b * per + n] = v;
      pixelSum += v;
    }
  }
  return {
    x: tensor(data).reshape(batch, C, S, S),
    y: tensor(BigInt64Array.from(labels, BigInt)),
    labels,
    pixelSum,
  };
}

// ---- Checkpoints ------------------------------------------------------------------------------

const FORMAT = "kiln-train-checkpoint/1";

/**
 * Saves the model's state dict (`model.<key>`), the optimizer's tensor state
 * (`optim.<param index>.<name>`) and, in the file's metadata, the optimizer's other state
 * (`step` counts, param_groups), the training step and `info` (JSON: the run's settings), as
 * one safetensors file.
 */
export function saveCheckpoint(
  path: string,
  model: nn.Module,
  opt: Optimizer,
  step: number,
  info: Record<string, unknown> = {},
): void {
  const tensors: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(model.stateDict())) tensors[`model.${k}`] = v;
  const sd = opt.stateDict();
  const scalars: Record<string, Record<string, number | null>> = {};
  for (const [i, st] of Object.entries(sd.state)) {
    for (const [name, v] of Object.entries(st)) {
      if (typeof v === "object" && v !== null) tensors[`optim.${i}.${name}`] = v;
      else (scalars[i] ??= {})[name] = v;
    }
  }
  saveSafetensorsFile(path, tensors, {
    metadata: {
      format: FORMAT,
      step: String(step),
      optimizer: JSON.stringify({ param_groups: sd.param_groups, scalars }),
      info: JSON.stringify(info),
    },
  });
}

/**
 * Restores what saveCheckpoint saved into `model` and `opt` (made as for the saved run);
 * returns the training step to continue from and the saved `info`.
 */
export function loadCheckpoint(
  path: string,
  model: nn.Module,
  opt: Optimizer,
): { step: number; info: Record<string, unknown> } {
  const { tensors, metadata } = readSafetensors(path);
  if (metadata?.format !== FORMAT) {
    throw new Error(`${path}: not a training checkpoint (format ${metadata?.format ?? "none"})`);
  }
  const weights: Record<string, Tensor> = {};
  const state: Record<number, ParamState> = {};
  const saved = JSON.parse(metadata.optimizer!) as {
    param_groups: OptimizerStateDict["param_groups"];
    scalars: Record<string, ParamState>;
  };
  for (const [i, s] of Object.entries(saved.scalars)) state[Number(i)] = { ...s };
  for (const [key, t] of Object.entries(tensors)) {
    if (key.startsWith("model.")) {
      weights[key.slice("model.".length)] = t;
      continue;
    }
    const m = /^optim\.(\d+)\.(.+)$/.exec(key);
    if (m === null) throw new Error(`${path}: unexpected tensor '${key}'`);
    (state[Number(m[1])] ??= {})[m[2]!] = t;
  }
  model.loadStateDict(weights);
  opt.loadStateDict({ state, param_groups: saved.param_groups });
  return {
    step: Number(metadata.step),
    info: JSON.parse(metadata.info ?? "{}") as Record<string, unknown>,
  };
}

// ---- Sampling ---------------------------------------------------------------------------------

export interface SampleOptions {
  /** Softmax temperature; 0 is greedy (default 0.8). */
  temperature?: number;
  /** The sampling generator's seed (default 0). */
  seed?: number;
}

/**
 * `n` characters continuing `prompt`. Every forward sees a full window of nPositions ids (the
 * prompt right-padded with spaces while it is shorter, which causal attention cannot see), so
 * every step is the same shape and eager mode reuses its programs; the next id is drawn from
 * the logits at the window's last real position.
 */
export function sample(
  model: GPT2,
  prompt: string,
  n: number,
  options: SampleOptions = {},
): string {
  const { temperature = 0.8, seed = 0 } = options;
  const ctx = model.config.nPositions;
  const gen = new Generator(seed);
  const ids = [...encode(prompt)];
  if (ids.length === 0) ids.push(0);
  const wasTraining = model.training;
  model.eval();
  try {
    noGrad(() => {
      for (let k = 0; k < n; k++) {
        const window = ids.slice(-ctx);
        const last = window.length - 1;
        const padded = BigInt64Array.from({ length: ctx }, (_, i) => BigInt(window[i] ?? 1));
        const { logits } = model.call(tensor(padded).reshape(1, ctx));
        const row = logits.narrow(1, last, 1).reshape(-1).toArray() as number[];
        ids.push(pick(row, temperature, gen));
      }
    });
  } finally {
    model.train(wasTraining);
  }
  return decode(ids.slice(ids.length - n));
}

function pick(logits: readonly number[], temperature: number, gen: Generator): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  if (temperature <= 0) return best;
  const w = logits.map((l) => Math.exp((l - logits[best]!) / temperature));
  let u = gen.uniform() * w.reduce((a, b) => a + b, 0);
  for (let i = 0; i < w.length; i++) {
    u -= w[i]!;
    if (u < 0) return i;
  }
  return best;
}
