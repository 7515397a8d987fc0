// The model-zoo validation core (scripts/validate.ts) on one tiny model at one size: every mode
// runs, agrees with eager and PyTorch within the zoo's 1e-4, compiles at least once, and the
// error measure sees a real difference (so a row of zeros is a finding, not a blind spot).

import { describe, expect, it } from "vitest";
import { markdownReport, maxAbsError, validateModel } from "../scripts/validate.ts";
import { ops } from "../index.ts";

describe("scripts/validate", () => {
  it("validates the tiny MLP at one size in every mode, and against PyTorch", () => {
    const rows = validateModel("mlp", [{ batch: 2 }], { backends: ["js"] });
    const modes = rows.map((r) => `${r.size} ${r.mode}`);
    expect(modes).toEqual([
      "batch=2 eager",
      "batch=2 lazy",
      "batch=2 compiled:js",
      "batch=2 compiled:interpreter",
      "pytorch eager",
      "pytorch lazy",
      "pytorch compiled:js",
    ]);
    for (const r of rows) {
      expect(r.maxErrEager).toBeGreaterThanOrEqual(0);
      expect(r.maxErrEager).toBeLessThan(1e-4);
      if (r.mode !== "eager") {
        expect(r.compiles).toBeGreaterThanOrEqual(1);
        expect(r.fusion!.kernels).toBeGreaterThanOrEqual(1);
      }
      expect(r.graphBreaks).toBe(0);
    }
    const torch = rows.filter((r) => r.size === "pytorch");
    for (const r of torch) {
      expect(r.maxErrPyTorch).toBeGreaterThanOrEqual(0);
      expect(r.maxErrPyTorch).toBeLessThan(1e-4);
    }
    const doc = markdownReport(rows, 1);
    expect(doc).toContain("| mlp | batch=2 | compiled:js |");
    expect(doc).toMatch(/- Commit: \S+/);
  });

  it("measures a difference, NaN, and a shape mismatch", () => {
    const a = ops.tensor([1, 2, 3]);
    expect(maxAbsError("t", [a], [ops.tensor([1, 2.5, 3])])).toBeCloseTo(0.5, 6);
    expect(maxAbsError("t", [a], [ops.tensor([1, NaN, 3])])).toBe(Infinity);
    expect(() => maxAbsError("t", [a], [ops.tensor([[1, 2, 3]])])).toThrow(
      "t: output 0 has shape [3], expected [1, 3]",
    );
    expect(() => maxAbsError("t", [a], [])).toThrow("t: 1 output tensors, expected 0");
  });
});
