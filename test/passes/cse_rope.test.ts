// Regression test for the RoPE frequencies a Mistral block computed twice (once for q, once
// for k) and left as two identical fusions (issue 14, section 7). CSE merges the two chains
// when they read the same values; the traced program read `head_dim` and `-log(base)` as one
// zero-dim parameter PER USE (compiler/trace.ts binds every JS scalar operand to its own
// parameter, so a scalar that varies with a dynamic size can become an affine input), and two
// distinct parameters may hold different values, so CSE must keep both chains there.

import { describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { INTERNALS, type Internals } from "../../compiler/compile.ts";
import type { Module } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";
import { ops, type Tensor } from "../../index.ts";
import { CSE } from "../../passes/cse.ts";
import { DCE } from "../../passes/dce.ts";

/** inv_freq = exp((2i / dim) * -log(base)); freqs = pos ⊗ inv_freq; cos and sin of it. */
function rope(k: number, dim: string, logBase: string): string {
  return [
    `  %iota.${k} = s64[8] iota(), iota_dimension=0`,
    `  %two.${k} = s64[8] constant({0, 2, 4, 6, 8, 10, 12, 14})`,
    `  %even.${k} = f32[8] convert(s64[8] %two.${k})`,
    `  %dimf.${k} = f32[] convert(s64[] ${dim})`,
    `  %dimb.${k} = f32[8] broadcast(f32[] %dimf.${k}), dimensions={}`,
    `  %frac.${k} = f32[8] divide(f32[8] %even.${k}, f32[8] %dimb.${k})`,
    `  %lb.${k} = f32[8] broadcast(f32[] ${logBase}), dimensions={}`,
    `  %scaled.${k} = f32[8] multiply(f32[8] %frac.${k}, f32[8] %lb.${k})`,
    `  %inv.${k} = f32[8] exponential(f32[8] %scaled.${k})`,
    `  %pos.${k} = f32[8] convert(s64[8] %iota.${k})`,
    `  %posb.${k} = f32[8,8] broadcast(f32[8] %pos.${k}), dimensions={0}`,
    `  %invb.${k} = f32[8,8] broadcast(f32[8] %inv.${k}), dimensions={1}`,
    `  %freqs.${k} = f32[8,8] multiply(f32[8,8] %posb.${k}, f32[8,8] %invb.${k})`,
    `  %cos.${k} = f32[8,8] cosine(f32[8,8] %freqs.${k})`,
    `  %sin.${k} = f32[8,8] sine(f32[8,8] %freqs.${k})`,
  ].join("\n");
}

function block(dims: [string, string], logs: [string, string]): string {
  return (
    `HloModule rope\n\nENTRY %main (q: f32[8,8], k: f32[8,8], d0: s64[], d1: s64[], ` +
    `l0: f32[], l1: f32[]) -> f32[8,8] {\n` +
    `  %q = f32[8,8] parameter(0)\n  %k = f32[8,8] parameter(1)\n` +
    `  %d0 = s64[] parameter(2)\n  %d1 = s64[] parameter(3)\n` +
    `  %l0 = f32[] parameter(4)\n  %l1 = f32[] parameter(5)\n` +
    `${rope(0, dims[0], logs[0])}\n${rope(1, dims[1], logs[1])}\n` +
    `  %qc = f32[8,8] multiply(f32[8,8] %q, f32[8,8] %cos.0)\n` +
    `  %qs = f32[8,8] multiply(f32[8,8] %q, f32[8,8] %sin.0)\n` +
    `  %qr = f32[8,8] add(f32[8,8] %qc, f32[8,8] %qs)\n` +
    `  %kc = f32[8,8] multiply(f32[8,8] %k, f32[8,8] %cos.1)\n` +
    `  %ks = f32[8,8] multiply(f32[8,8] %k, f32[8,8] %sin.1)\n` +
    `  %kr = f32[8,8] add(f32[8,8] %kc, f32[8,8] %ks)\n` +
    `  ROOT %scores = f32[8,8] dot(f32[8,8] %qr, f32[8,8] %kr), lhs_contracting_dims={1}, ` +
    `rhs_contracting_dims={1}\n}\n`
  );
}

function count(text: string, opcode: string): number {
  const m = parseHlo(text);
  new CSE().run(m);
  new DCE().run(m);
  return m.entry.instructions.filter((i) => i.opcode === opcode).length;
}

describe("cse on RoPE frequencies computed for q and for k", () => {
  it("merges the two chains when they read the same head_dim and base", () => {
    const text = block(["%d0", "%d0"], ["%l0", "%l0"]);
    for (const op of ["iota", "exponential", "cosine", "sine"]) expect(count(text, op)).toBe(1);
  });

  it("keeps both when each reads its own scalar parameter (they may differ)", () => {
    const text = block(["%d0", "%d1"], ["%l0", "%l1"]);
    expect(count(text, "exponential")).toBe(2);
    expect(count(text, "cosine")).toBe(2);
    // What does not depend on the scalars is still shared.
    expect(count(text, "iota")).toBe(1);
  });
});

describe("compile() of a block that computes the RoPE frequencies for q and for k", () => {
  // Each call of freqs() traces its own chain over its own JS numbers (headDim, -log(base)):
  // a static program reads equal scalars as one parameter (compiler/build.ts), so CSE merges
  // the chains and one frequency computation is left.
  const freqs = (headDim: number, base: number) =>
    ops.arange(0, headDim, 2, "float32").div(headDim).mul(-Math.log(base)).exp()
      .reshape(1, headDim / 2).mul(ops.arange(0, 4, 1, "float32").reshape(4, 1));
  const block = (q: Tensor, k: Tensor) =>
    q.mul(freqs(8, 10000).cos()).add(k.mul(freqs(8, 10000).sin())).sum(-1);
  const opcodes = (m: Module) => m.computations.flatMap((c) => c.instructions.map((i) => i.opcode));

  it("leaves one exponential, and the values of eager mode", () => {
    const q = ops.arange(0, 16, 1, "float32").reshape(4, 4);
    const k = q.mul(0.5);
    const fast = compile(block, { backend: "js" });
    expect(fast(q, k).toArray()).toEqual(block(q, k).toArray());
    const internals = (fast as unknown as { [INTERNALS]: Internals })[INTERNALS];
    const exe = internals.entries()[0]!.exe!;
    expect(opcodes(exe.module).filter((o) => o === "exponential").length).toBe(1);
    // Different numbers stay apart.
    const two = (q2: Tensor, k2: Tensor) =>
      q2.mul(freqs(8, 10000).cos()).add(k2.mul(freqs(8, 500).sin())).sum(-1);
    const fast2 = compile(two, { backend: "js" });
    expect(fast2(q, k).toArray()).toEqual(two(q, k).toArray());
    const exe2 = (fast2 as unknown as { [INTERNALS]: Internals })[INTERNALS].entries()[0]!.exe!;
    expect(opcodes(exe2.module).filter((o) => o === "exponential").length).toBe(2);
  });
});
