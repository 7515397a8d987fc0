// The model-zoo validation core (scripts/validate.ts) on one tiny model at one size: every mode
// runs on its backend, agrees with the reference (eager on js) within its tier's bound — exactly
// on an exact backend, within the multi-op program bound on a tolerance one (native) — and with
// PyTorch within the zoo's 1e-4, compiles at least once, and the error measure and the tier
// check see a real difference (so a row of zeros is a finding, not a blind spot).

import { describe, expect, it } from "vitest";
import {
  markdownReport,
  maxAbsError,
  tierCheck,
  validateModel,
} from "../scripts/validate.ts";
import { ops } from "../index.ts";
import { backendNames } from "../runtime/index.ts";

describe("scripts/validate", () => {
  it("validates the tiny MLP at one size in every mode, and against PyTorch", () => {
    const rows = validateModel("mlp", [{ batch: 2 }], { backends: ["js"] });
    const modes = rows.map((r) => `${r.size} ${r.mode}`);
    expect(modes).toEqual([
      "batch=2 eager:js",
      "batch=2 lazy:js",
      "batch=2 compiled:js",
      "batch=2 compiled:interpreter",
      "pytorch eager:js",
      "pytorch lazy:js",
      "pytorch compiled:js",
    ]);
    for (const r of rows) {
      // js and the interpreter are the exact tier: bit-identical to the reference.
      expect(r.tier).toBe("exact");
      expect(r.maxErrEager).toBe(0);
      expect(r.withinBound).toBe(true);
      if (r.mode !== "eager:js") {
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
    expect(doc).toContain("| mlp | batch=2 | compiled:js | 0 | exact, ok |");
    expect(doc).toMatch(/- Commit: \S+/);
  });

  it.runIf(backendNames().includes("native"))(
    "holds native (the tolerance tier) to the program bound, eager, lazy and compiled",
    () => {
      const rows = validateModel("mlp", [{ batch: 2 }], {
        backends: ["native"],
        interpreterAtFirst: false,
        pytorch: false,
      });
      expect(rows.map((r) => r.mode)).toEqual([
        "eager:js",
        "eager:native",
        "lazy:native",
        "compiled:native",
      ]);
      for (const r of rows.slice(1)) {
        expect(r.tier).toBe("tolerance");
        expect(r.bound).toBeGreaterThan(0);
        expect(r.maxErrEager).toBeLessThanOrEqual(r.bound);
        expect(r.withinBound).toBe(true);
      }
    },
  );

  it("measures a difference, NaN, and a shape mismatch", () => {
    const a = ops.tensor([1, 2, 3]);
    expect(maxAbsError("t", [a], [ops.tensor([1, 2.5, 3])])).toBeCloseTo(0.5, 6);
    expect(maxAbsError("t", [a], [ops.tensor([1, NaN, 3])])).toBe(Infinity);
    expect(() => maxAbsError("t", [a], [ops.tensor([[1, 2, 3]])])).toThrow(
      "t: output 0 has shape [3], expected [1, 3]",
    );
    expect(() => maxAbsError("t", [a], [])).toThrow("t: 1 output tensors, expected 0");
  });

  it("checks a tier: exact wants the same bits, tolerance the program bound", () => {
    const want = [ops.tensor([1, -2, 4])];
    const eps = 2 ** -23;
    // The bound at scale 4 (the largest magnitude): 8 ulp(4) + 64 eps 4.
    const bound = 8 * 4 * eps + 64 * eps * 4;
    const near = [ops.tensor([1 + 4 * eps, -2, 4])];
    const far = [ops.tensor([1 + 512 * eps, -2, 4])];
    expect(tierCheck("exact", want, want, 0)).toEqual({ bound: 0, within: true });
    expect(tierCheck("exact", near, want, 0).within).toBe(false);
    const ok = tierCheck("tolerance", near, want, 0);
    expect(ok.within).toBe(true);
    expect(ok.bound).toBeCloseTo(bound, 12);
    expect(tierCheck("tolerance", far, want, 0).within).toBe(false);
    // The inputs' magnitude widens the bound: far is within it at scale 8.
    expect(tierCheck("tolerance", far, want, 8).within).toBe(true);
    const nan = [ops.tensor([NaN, -2, 4])];
    expect(tierCheck("tolerance", nan, want, 0).within).toBe(false);
    expect(tierCheck("tolerance", nan, nan, 0).within).toBe(true);
  });
});
