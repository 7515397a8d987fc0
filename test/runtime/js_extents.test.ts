// The js backend honours extent hints (ir/extents.ts): a bucket's padded program computes the
// rows and columns up to the real size, not to the bucket's top, so a call just above a bucket's
// bottom costs about what a program for its own size costs. Checked on the generated source (the
// dots and loops take the real size as their limit) and on results (equal to eager, with the
// skipped parts of every hinted buffer poisoned with NaN).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { INTERNALS } from "../../compiler/compile.ts";
import { randn, type Tensor } from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { codegenTesting } from "../../runtime/js/render_program.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

/** Causal self-attention over a dynamic sequence dim, with a projection and a residual. */
function attention(x: Tensor, w: Tensor): Tensor {
  const t = x.shape[1]!;
  const q = x.matmul(w);
  const scores = q.matmul(q.transpose(1, 2)).mul(0.25);
  const causal = scores.triu(1).ne(0);
  const p = scores.maskedFill(causal, -Infinity).softmax(-1);
  return p.matmul(q).add(x).mul(1 / 8).sum(-1).add(t);
}

describe("js: extent hints", () => {
  it("dots and loops of a bucket's program stop at the real size; results equal eager", () => {
    const w = randn(8, 8);
    codegenTesting.poison = true;
    try {
      const fast = compile(attention, { dynamic: { x: { 1: { max: 64 } } }, backend: "js" });
      for (const n of [17, 20, 31, 32, 33, 40, 64]) {
        const x = randn(2, n, 8);
        const got = fast(x, w).data() as Float32Array;
        const want = attention(x, w).data() as Float32Array;
        expect(got.length).toBe(want.length);
        for (let i = 0; i < want.length; i++) expect(got[i]).toBeCloseTo(want[i]!, 4);
      }
      const entries = fast[INTERNALS].entries();
      const bucketed = entries.filter((e) => e.dynamicModule !== undefined);
      expect(bucketed.length).toBeGreaterThan(0);
      for (const e of bucketed) {
        const source = (e.exe as unknown as { source: string }).source;
        // A limit is `Math.min(<bound>, Math.max(0, p<k>[0]))` over the size parameter.
        const limited = source.match(/Math\.min\(\d+, Math\.max\(0, p\d+\[0\]\)\)/g) ?? [];
        expect(limited.length).toBeGreaterThan(4);
        // Every dot call passes row and column limits (two trailing arguments after the epilogue).
        const dots = source.split("\n").filter((l) => /^\s*e\d+\(v\d+, /.test(l) && /null, /.test(l));
        expect(dots.length).toBeGreaterThan(0);
        for (const d of dots) expect(d).toMatch(/Math\.max\(0, p\d+\[0\]\)/);
      }
    } finally {
      codegenTesting.poison = false;
    }
  });
});
