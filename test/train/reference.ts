// The PyTorch reference runs (scripts/fixtures/gen_train.py → test/fixtures/train/) and the
// agreement the training tests ask of Kiln's per-step losses: within 1e-4 relative for each of
// the first 50 steps, within 1% at the last step.

import { readFileSync } from "node:fs";
import { join } from "node:path";

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
