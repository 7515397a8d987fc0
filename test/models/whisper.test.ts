// The Whisper-style audio encoder against PyTorch (scripts/fixtures/gen_models.py, Hugging
// Face's WhisperEncoder architecture and names): state-dict keys, strict loading, and the
// hidden states within 1e-4 for the full window and for fewer frames (positions sliced); the
// sinusoidal table Kiln builds equals the one PyTorch saved; plus the model-file contract.

import { describe, expect, it } from "vitest";
import createWhisperEncoder, {
  inputs,
  sinusoids,
  tinyConfig,
  WhisperEncoder,
} from "../../models/whisper.ts";
import {
  asTensor,
  expectClose,
  getCase,
  loadPyTorch,
  modelCases,
  TOL,
  weights,
} from "./fixtures.ts";

const cases = modelCases("whisper");

describe("models/whisper", () => {
  const model = loadPyTorch("whisper", new WhisperEncoder(tinyConfig), tinyConfig, cases);

  it("matches PyTorch for the full window and for fewer frames", () => {
    for (const name of ["forward", "forward_short"]) {
      const c = getCase(cases, name);
      expectClose(model.call(asTensor(c.args[0])), asTensor(c.out), TOL, name);
    }
  });

  it("builds Whisper's sinusoidal position table", () => {
    const table = new WhisperEncoder(tinyConfig).embed_positions.weight;
    expectClose(table, weights("whisper")["embed_positions.weight"]!, { atol: 1e-5, rtol: 0 });
    expect(() => sinusoids(4, 3)).toThrow(/channels must be even/);
  });

  it("builds from a config name and makes inputs for a size spec", () => {
    const [x] = inputs({ batch: 1 });
    expect(x.shape).toEqual([1, 8, 32]);
    expect(createWhisperEncoder().call(x).shape).toEqual([1, 16, 32]);
    expect(createWhisperEncoder().call(inputs({ frames: 7 })[0]).shape).toEqual([2, 4, 32]);
    expect(() => inputs({ frames: 33 })).toThrow(/frames 33 exceeds 2 \* maxSourcePositions/);
    expect(() => createWhisperEncoder().call(x.repeat(1, 1, 2))).toThrow(
      /64 frames give 32 positions, more than maxSourcePositions \(16\)/,
    );
  });

  it("has Whisper-tiny's encoder shape in the full config", () => {
    const full = createWhisperEncoder("full");
    const count = full.parameters().reduce((n, p) => n + p.numel(), 0);
    expect(count).toBe(8_208_384); // WhisperModel("openai/whisper-tiny").encoder
    expect(full.embed_positions.weight.shape).toEqual([1500, 384]);
  });
});
