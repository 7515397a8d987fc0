// Checkpoints resume bit-identically (issue 16): N steps of GPT-2 tiny training straight give
// exactly the weights and optimizer state of N/2 steps, saveCheckpoint, a fresh model and
// optimizer, loadCheckpoint and N/2 more (examples/training.ts; the batches of a step are a
// function of the step and seed alone). Also through the CLI (examples/train.ts, `npm run
// train`): --steps 4 against --steps 2 then --resume --steps 2 write the same checkpoint file.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AdamW } from "../../optim/index.ts";
import type { Tensor } from "../../index.ts";
import {
  createModel,
  lmStep,
  loadCheckpoint,
  readCorpus,
  ROOT,
  saveCheckpoint,
  stepOffsets,
  trainConfig,
  windows,
} from "../../examples/training.ts";
import type { GPT2 } from "../../models/gpt2.ts";
import type { Optimizer } from "../../optim/optimizer.ts";

const ids = readCorpus();
const seq = trainConfig.nPositions;
const batch = 4;
const dir = mkdtempSync(join(tmpdir(), "kiln-checkpoint-"));

function fresh(): [GPT2, Optimizer] {
  const model = createModel(undefined, 7);
  return [model, new AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.01 })];
}

function train(model: GPT2, opt: Optimizer, from: number, to: number): number[] {
  const losses: number[] = [];
  for (let s = from; s < to; s++) {
    const offsets = stepOffsets(s, { batch, seq, corpusLength: ids.length, seed: 7 });
    const { x, y } = windows(ids, offsets, seq);
    losses.push(lmStep(model, opt, x, y).item() as number);
  }
  return losses;
}

/** Every weight and optimizer-state tensor as bytes, by name. */
function snapshot(model: GPT2, opt: Optimizer): Map<string, Uint8Array | number | null> {
  const out = new Map<string, Uint8Array | number | null>();
  for (const [k, v] of Object.entries(model.stateDict())) out.set(`model.${k}`, v.toBytes());
  for (const [i, st] of Object.entries(opt.stateDict().state)) {
    for (const [k, v] of Object.entries(st)) {
      out.set(`optim.${i}.${k}`, typeof v === "object" && v !== null ? (v as Tensor).toBytes() : v);
    }
  }
  return out;
}

describe("training checkpoints", () => {
  it("N steps straight equal N/2 + save + load + N/2, bit for bit", { timeout: 180_000 }, () => {
    const n = 8;
    const [a, optA] = fresh();
    const straight = train(a, optA, 0, n);

    const [b, optB] = fresh();
    const first = train(b, optB, 0, n / 2);
    const path = join(dir, "half.safetensors");
    saveCheckpoint(path, b, optB, n / 2, { batch });
    const [c, optC] = fresh();
    train(c, optC, 0, 1); // c is changed before loading: loading must overwrite it all
    const saved = loadCheckpoint(path, c, optC);
    expect(saved).toEqual({ step: n / 2, info: { batch } });
    const second = train(c, optC, saved.step, n);

    expect([...first, ...second]).toEqual(straight);
    const want = snapshot(a, optA);
    const got = snapshot(c, optC);
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    expect(want.get("optim.0.step")).toBe(n);
    for (const [k, v] of want) expect(got.get(k), k).toEqual(v);
  });

  it("the CLI: --steps 4 equals --steps 2 then --resume --steps 2 (same checkpoint bytes)", () => {
    const cli = (...args: string[]) =>
      execFileSync(process.execPath, ["--import", "tsx", join(ROOT, "examples", "train.ts"),
        "--batch", "2", "--seed", "3", ...args], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
    const straight = join(dir, "straight.safetensors");
    const resumed = join(dir, "resumed.safetensors");
    const out = cli("--steps", "4", "--checkpoint", straight, "--sample", "40");
    expect(out).toMatch(/^step 4\/4 {2}loss \d+\.\d{4} .* tokens\/s/m);
    expect(out).toContain("--- 40 sampled characters (temperature 0.8, seed 3) ---");
    cli("--steps", "2", "--checkpoint", resumed, "--sample", "0");
    const more = cli("--resume", "--steps", "2", "--checkpoint", resumed, "--sample", "0");
    expect(more).toContain("at step 2 (batch 2, seed 3)");
    expect(readFileSync(resumed).equals(readFileSync(straight))).toBe(true);
  }, 240_000);
});
