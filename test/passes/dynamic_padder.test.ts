// The dynamic padder: for every op kind it rewrites, a module with bounded dynamic dims is padded
// (only static shapes remain, the module verifies and round-trips through the text form), then
// at many real lengths inside the bounds — 0 where meaningful, 1 and the bound always among
// them — the padded program run through `runPadded` on the js backend and on the interpreter
// must give BIT-IDENTICAL results to the reference evaluator running the original module at the
// real sizes (the oracle). Inputs are padded with NaN / extreme integers, so any padding that
// leaked into a result would show. Also: the calling convention, patterns the padder rejects
// (with the instruction named), and modules it leaves alone.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { type Literal, literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape, isDynamic, scalarShape, tupleShape } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import {
  DynamicPadder,
  DynamicPadderError,
  paddedSignature,
  runPadded,
} from "../../passes/dynamic_padder.ts";
import { defaultPipeline, PassError } from "../../passes/pipeline.ts";
import type { Executable } from "../../runtime/backend.ts";
import { compileModule } from "../../runtime/compile.ts";
import { interpreterBackend } from "../../runtime/interpreter.ts";
import { jsBackend } from "../../runtime/js/backend.ts";
import { codegenTesting } from "../../runtime/js/render_program.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { identical } from "../runtime/fixtures/op_cases.ts";

// ---- helpers ---------------------------------------------------------------------------------

const RUNS = 30;

/**
 * Padding garbage: NaN, -inf, extreme integers and small in-range ones (a padded index that is
 * valid would write or read real rows), so a leak cannot go unnoticed.
 */
const FILLS = [
  { f32: NaN, s32: 1_000_000_007, s64: 2n ** 62n, u8: 201, pred: true },
  { f32: -Infinity, s32: 1, s64: 1n, u8: 1, pred: false },
] as const;


const show = (v: EvalValue): string =>
  Array.isArray(v) ? `(${v.map(show).join(", ")})` : v.toString();

function anyDynamic(m: Module): boolean {
  return m.computations.some((c) => c.instructions.some((i) => isDynamic(i.shape)));
}

/**
 * Pads a copy of `original` and checks the result's form; executables of it on the js backend,
 * on the interpreter, and through compileModule (optimization pipeline and fusion, then js).
 */
function padded(original: Module): { module: Module; exes: Executable[] } {
  const module = cloneModule(original);
  expect(new DynamicPadder().run(module)).toBe(true);
  verifyModule(module);
  expect(anyDynamic(module)).toBe(false);
  expect(printHlo(parseHlo(printHlo(module)))).toBe(printHlo(module));
  const optimized = compileModule(module, { backend: "js", cache: false }).executable;
  // The js backend skips what extent hints say nobody reads; poisoned, those parts are NaN (or
  // extreme integers), so a result that read them would differ.
  codegenTesting.poison = true;
  let poisoned: Executable[];
  try {
    poisoned = [
      jsBackend.compile(module),
      compileModule(module, { backend: "js", cache: false }).executable,
    ];
  } finally {
    codegenTesting.poison = false;
  }
  return {
    module,
    exes: [jsBackend.compile(module), interpreterBackend.compile(module), optimized, ...poisoned],
  };
}

/** Property: the padded program equals the evaluator on the original at the real sizes. */
function checkPadded(original: Module, inputs: fc.Arbitrary<EvalValue[]>, runs = RUNS): void {
  const { exes } = padded(original);
  fc.assert(
    fc.property(inputs, (args) => {
      const want = evaluate(original, args);
      for (const exe of exes) {
        for (const fill of FILLS) {
          const got = runPadded(exe, original, args, { fill });
          if (!identical(got, want)) {
            throw new Error(
              `${exe.backend} differs from the evaluator (fill ${String(fill.f32)})\n` +
                `${printHlo(exe.module)}\ninputs: ${args.map(show).join("; ")}\n` +
                `evaluator: ${show(want)}\npadded: ${show(got)}`,
            );
          }
        }
      }
    }),
    { numRuns: runs },
  );
}

/** A real length in [min, bound], with min, 1 and the bound itself drawn often. */
function len(bound: number, min = 0): fc.Arbitrary<number> {
  const edges = [...new Set([min, Math.max(min, 1), bound])];
  return fc.oneof(
    { weight: 1, arbitrary: fc.constantFrom(...edges) },
    { weight: 2, arbitrary: fc.integer({ min, max: bound }) },
  );
}

const special = fc.constantFrom(-0, 0, -0, NaN, Infinity, -Infinity);
const arbFloat = fc.oneof(
  { weight: 10, arbitrary: fc.double({ min: -4, max: 4, noNaN: true }) },
  { weight: 2, arbitrary: special },
);
const finiteFloat = fc.oneof(
  { weight: 10, arbitrary: fc.double({ min: -4, max: 4, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(-0, 0) },
);

function f32(dims: readonly number[], values = arbFloat): fc.Arbitrary<Literal> {
  const n = dims.reduce((a, b) => a * b, 1);
  return fc.array(values, { minLength: n, maxLength: n }).map((v) => literal("f32", dims, v));
}

function s32(dims: readonly number[], min: number, max: number): fc.Arbitrary<Literal> {
  const n = dims.reduce((a, b) => a * b, 1);
  return fc
    .array(fc.integer({ min, max }), { minLength: n, maxLength: n })
    .map((v) => literal("s32", dims, v));
}

const scalarS32 = (min: number, max: number) =>
  fc.integer({ min, max }).map((v) => literal("s32", [], [v]));

/** `x` with each listed dim set to the real size of dim `from[k]` of `like` (XLA's pattern). */
function sized(
  b: ComputationBuilder,
  x: Instruction,
  dims: readonly number[],
  like: Instruction,
  from: readonly number[],
): Instruction {
  let out = x;
  dims.forEach((d, k) => {
    out = b.setDimensionSize(out, b.getDimensionSize(like, from[k]!), d);
  });
  return out;
}

/**
 * broadcast(v) to `dims`, with the dynamic dims it adds sized like `like`'s (a broadcast into a
 * dynamic dim takes the bound, as in XLA).
 */
function broadcastLike(
  b: ComputationBuilder,
  v: Instruction,
  dims: readonly (number | string)[],
  keep: readonly number[],
  like: Instruction,
): Instruction {
  const added = dims
    .map((d, i) => (typeof d === "string" && !keep.includes(i) ? i : -1))
    .filter((i) => i >= 0);
  return sized(b, b.broadcast(v, dims, keep), added, like, added);
}

function softmaxRows(b: ComputationBuilder, x: Instruction, dims: (number | string)[]) {
  const mb = b.moduleBuilder!;
  const last = dims.length - 1;
  const keep = dims.map((_, i) => i).slice(0, last);
  const m = b.reduce(x, b.scalar("f32", -Infinity), [last], mb.reducer("max", "f32"));
  const e = b.exp(b.subtract(x, broadcastLike(b, m, dims, keep, x)));
  const s = b.reduce(e, b.scalar("f32", 0), [last], mb.reducer("add", "f32"));
  return { probs: b.divide(e, broadcastLike(b, s, dims, keep, x)), max: m, sum: s };
}

// ---- reductions ------------------------------------------------------------------------------

describe("reductions over a dynamic dim", () => {
  it("masked mean (corpus dynamic_mean)", () => {
    const m = CORPUS.dynamic_mean!.build();
    checkPadded(m, len(16).chain((t) => f32([2, t, 8]).map((x) => [x])));
  });

  it("sum (-0 init and +0 init), max, min, product, over one and two dynamic dims", () => {
    const mb = new ModuleBuilder("reductions");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=6", "<=5", 3]), "x");
      const add = mb.reducer("add", "f32");
      return b.tuple([
        b.reduce(x, b.scalar("f32", 0), [1], add),
        b.reduce(x, b.scalar("f32", -0), [0, 1], add),
        b.reduce(x, b.scalar("f32", -Infinity), [0, 1], mb.reducer("max", "f32")),
        b.reduce(x, b.scalar("f32", Infinity), [1, 2], mb.reducer("min", "f32")),
        b.reduce(x, b.scalar("f32", 1), [0], mb.reducer("mul", "f32")),
        // A non-identity init stays exactly as the unpadded program applies it.
        b.reduce(x, b.scalar("f32", 2.5), [0, 2], mb.reducer("max", "f32")),
        // Half precision rounds every step: the -0 and -inf identities are exact there too.
        b.reduce(b.convert(x, "bf16"), b.scalar("bf16", -0), [0, 1], mb.reducer("add", "bf16")),
        b.reduce(b.convert(x, "f16"), b.scalar("f16", 0), [1], mb.reducer("max", "f16")),
      ]);
    });
    const zeros = fc.oneof(arbFloat, fc.constantFrom(-0, -0, -0));
    checkPadded(
      mb.build(),
      fc.tuple(len(6), len(5)).chain(([a, c]) => f32([a, c, 3], zeros).map((x) => [x])),
    );
  });

  it("integer and pred reductions (add wraps, and/or)", () => {
    const mb = new ModuleBuilder("int_reductions");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("s32", [2, "<=9"]), "x");
      const pz = sized(b, b.broadcast(b.scalar("s32", 0), [2, "<=9"], []), [1], x, [1]);
      const pos = b.compare(x, pz, "GT");
      return b.tuple([
        b.reduce(x, b.scalar("s32", 0), [1], mb.reducer("add", "s32")),
        b.reduce(x, b.scalar("s32", -5), [1], mb.reducer("max", "s32")),
        b.reduce(x, b.scalar("s32", 1), [1], mb.reducer("mul", "s32")),
        b.reduce(pos, b.scalar("pred", true), [1], mb.reducer("and", "pred")),
        b.reduce(pos, b.scalar("pred", false), [1], mb.reducer("or", "pred")),
      ]);
    });
    checkPadded(
      mb.build(),
      len(9).chain((t) => s32([2, t], -2147483648, 2147483647).map((x) => [x])),
    );
  });

  it("argmax (a variadic reduce whose reducer has no identity) and a sum of squares", () => {
    const mb = new ModuleBuilder("argmax");
    const argmax = mb.computation("argmax", (b) => {
      const av = b.parameter(scalarShape("f32"));
      const ai = b.parameter(scalarShape("s32"));
      const bv = b.parameter(scalarShape("f32"));
      const bi = b.parameter(scalarShape("s32"));
      const bNaN = b.compare(bv, bv, "NE");
      const aNaN = b.compare(av, av, "NE");
      const greater = b.or(b.compare(bv, av, "GT"), b.and(bNaN, b.not(aNaN)));
      const tie = b.and(b.compare(bv, av, "EQ"), b.compare(bi, ai, "LT"));
      const takeB = b.or(greater, tie);
      return b.tuple([b.select(takeB, bv, av), b.select(takeB, bi, ai)]);
    });
    const sumSq = mb.computation("sum_sq", (b) => {
      const acc = b.parameter(scalarShape("f32"));
      const v = b.parameter(scalarShape("f32"));
      return b.add(acc, b.multiply(v, v));
    });
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [3, "<=10"]), "x");
      const iota = sized(b, b.iota(arrayShape("s32", [3, "<=10"]), 1), [1], x, [1]);
      const r = b.reduce([x, iota], [b.scalar("f32", -Infinity), b.scalar("s32", 0)], [1], argmax);
      return b.tuple([
        b.getTupleElement(r, 0),
        b.getTupleElement(r, 1),
        b.reduce(x, b.scalar("f32", 0), [1], sumSq),
      ]);
    });
    const m = mb.build();
    checkPadded(m, len(10).chain((t) => f32([3, t]).map((x) => [x])));
  });

  it("softmax and logsumexp over a dynamic dim", () => {
    const mb = new ModuleBuilder("softmax");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [2, "<=12"]), "x");
      const { probs, max, sum } = softmaxRows(b, x, [2, "<=12"]);
      return b.tuple([probs, b.add(b.log(sum), max)]);
    });
    checkPadded(mb.build(), len(12).chain((t) => f32([2, t]).map((x) => [x])));
  });

  it("layer norm and RMS norm over a dynamic dim (with a dynamic gain)", () => {
    const mb = new ModuleBuilder("norms");
    mb.entry("main", (b) => {
      const dims = [3, "<=16"];
      const x = b.parameter(arrayShape("f32", dims), "x");
      const g = b.parameter(arrayShape("f32", ["<=16"]), "gain");
      const add = mb.reducer("add", "f32");
      const n = b.convert(b.getDimensionSize(x, 1), "f32");
      const rows = (v: Instruction) => broadcastLike(b, v, dims, [0], x);
      const mean = b.divide(b.reduce(x, b.scalar("f32", 0), [1], add), b.broadcast(n, [3], []));
      const xc = b.subtract(x, rows(mean));
      const varr = b.divide(
        b.reduce(b.multiply(xc, xc), b.scalar("f32", 0), [1], add),
        b.broadcast(n, [3], []),
      );
      const eps = b.broadcast(b.scalar("f32", 1e-5), [3], []);
      const gain = b.broadcast(g, dims, [1]);
      const ln = b.multiply(b.multiply(xc, rows(b.rsqrt(b.add(varr, eps)))), gain);
      const ms = b.divide(
        b.reduce(b.multiply(x, x), b.scalar("f32", 0), [1], add),
        b.broadcast(n, [3], []),
      );
      const rms = b.multiply(b.multiply(x, rows(b.rsqrt(b.add(ms, eps)))), gain);
      return b.tuple([ln, rms]);
    });
    checkPadded(
      mb.build(),
      len(16).chain((t) => fc.tuple(f32([3, t]), f32([t]))),
    );
  });
});

// ---- contractions and attention --------------------------------------------------------------

describe("contractions", () => {
  it("dot contracting a dynamic dim, and a batch dot with two different dynamic free dims", () => {
    const mb = new ModuleBuilder("dots");
    mb.entry("main", (b) => {
      const a = b.parameter(arrayShape("f32", [3, "<=9"]), "a");
      const w = b.parameter(arrayShape("f32", ["<=9", 4]), "w");
      const q = b.parameter(arrayShape("f32", [2, "<=7", 5]), "q");
      const k = b.parameter(arrayShape("f32", [2, "<=6", 5]), "k");
      return b.tuple([
        b.dot(a, w, { lhsContracting: [1], rhsContracting: [0] }),
        b.dot(q, k, { lhsBatch: [0], rhsBatch: [0], lhsContracting: [2], rhsContracting: [2] }),
      ]);
    });
    checkPadded(
      mb.build(),
      fc
        .tuple(len(9), len(7), len(6))
        .chain(([n, t1, t2]) =>
          fc.tuple(f32([3, n]), f32([n, 4]), f32([2, t1, 5]), f32([2, t2, 5])),
        ),
    );
  });

  it("causal multi-head attention over a dynamic sequence dim (iota-derived mask)", () => {
    const T = 8;
    const D = 6;
    const H = 2;
    const mb = new ModuleBuilder("causal_attention");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [`<=${T}`, D]), "x");
      const wq = b.parameter(arrayShape("f32", [D, D]), "wq");
      const wk = b.parameter(arrayShape("f32", [D, D]), "wk");
      const wv = b.parameter(arrayShape("f32", [D, D]), "wv");
      const proj = (w: Instruction) => {
        const y = b.dot(x, w, { lhsContracting: [1], rhsContracting: [0] });
        // [<=T, D] -> [<=T, H, D/H] -> [H, <=T, D/H]
        return b.transpose(b.reshape(y, [`<=${T}`, H, D / H]), [1, 0, 2]);
      };
      const [q, k, v] = [proj(wq), proj(wk), proj(wv)];
      const sdims = [H, `<=${T}`, `<=${T}`];
      let scores = b.dot(q, k, {
        lhsBatch: [0],
        rhsBatch: [0],
        lhsContracting: [2],
        rhsContracting: [2],
      });
      scores = b.multiply(
        scores,
        sized(b, b.broadcast(b.scalar("f32", 1 / Math.sqrt(D / H)), sdims, []), [1, 2], x, [0, 0]),
      );
      const rows = sized(b, b.iota(arrayShape("s32", sdims), 1), [1, 2], x, [0, 0]);
      const cols = sized(b, b.iota(arrayShape("s32", sdims), 2), [1, 2], x, [0, 0]);
      const ninf = sized(b, b.broadcast(b.scalar("f32", -Infinity), sdims, []), [1, 2], x, [0, 0]);
      const masked = b.select(b.compare(rows, cols, "GE"), scores, ninf);
      const { probs } = softmaxRows(b, masked, sdims);
      const ctx = b.dot(probs, v, {
        lhsBatch: [0],
        rhsBatch: [0],
        lhsContracting: [2],
        rhsContracting: [1],
      });
      const merged = b.reshape(b.transpose(ctx, [1, 0, 2]), [`<=${T}`, D]);
      return b.add(merged, x);
    });
    checkPadded(
      mb.build(),
      len(T).chain((t) =>
        fc.tuple(f32([t, D], finiteFloat), f32([D, D], finiteFloat), f32([D, D], finiteFloat),
          f32([D, D], finiteFloat)),
      ),
    );
  });

  it("convolution over a dynamic spatial dim (same, causal, strided, transposed)", () => {
    const mb = new ModuleBuilder("conv");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [1, "<=12", 2]), "x");
      const k = b.parameter(arrayShape("f32", [3, 2, 4]), "k");
      const conv = (padLow: number, padHigh: number, stride = 1, baseDilation = 1) =>
        b.convolution(x, k, {
          window: [{ size: 3, padLow, padHigh, stride, baseDilation }],
          dims: "b0f_0io->b0f",
        });
      // 'same', causal, strided, and transposed (base dilation 2) convolutions.
      return b.tuple([conv(1, 1), conv(2, 0), conv(1, 2, 2), conv(2, 2, 1, 2)]);
    });
    // Kernel weights are finite: a masked input adds 0·w, which is exact only for finite w.
    checkPadded(
      mb.build(),
      len(12).chain((t) => fc.tuple(f32([1, t, 2]), f32([3, 2, 4], finiteFloat))),
    );
  });
});

// ---- windows, sort, indexing -----------------------------------------------------------------

describe("windows, sort and indexing", () => {
  it("cumsum, centered window sum, max pool and a generic reducer over a dynamic dim", () => {
    const N = 10;
    const mb = new ModuleBuilder("windows");
    const first = mb.computation("keep_first_nonzero", (b) => {
      const acc = b.parameter(scalarShape("f32"));
      const v = b.parameter(scalarShape("f32"));
      const z = b.compare(acc, b.scalar("f32", 0), "EQ");
      return b.select(z, v, acc);
    });
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [2, `<=${N}`]), "x");
      const add = mb.reducer("add", "f32");
      const max = mb.reducer("max", "f32");
      const zero = b.scalar("f32", 0);
      return b.tuple([
        b.reduceWindow(x, zero, [{ size: 1 }, { size: N, padLow: N - 1 }], add),
        b.reduceWindow(
          x,
          b.scalar("f32", -0),
          [{ size: 1 }, { size: 3, padLow: 1, padHigh: 1 }],
          add,
        ),
        b.reduceWindow(x, b.scalar("f32", -Infinity), [{ size: 1 }, { size: 2, stride: 2 }], max),
        b.reduceWindow(
          x,
          b.scalar("f32", -Infinity),
          [{ size: 1 }, { size: 3, stride: 2, padHigh: 2, windowDilation: 2 }],
          max,
        ),
        b.reduceWindow(x, zero, [{ size: 1 }, { size: 3, padLow: 1, padHigh: 1 }], first),
        b.reduceWindow(x, zero, [{ size: 1 }, { size: 2, padHigh: 1, baseDilation: 2 }], add),
      ]);
    });
    checkPadded(mb.build(), len(N).chain((t) => f32([2, t]).map((x) => [x])));
  });

  it("sort along a dynamic dim (values; keys with iota payload; along a static dim)", () => {
    const mb = new ModuleBuilder("sorts");
    const lt = mb.computation("lt", (b) => {
      const p = b.parameter(scalarShape("f32"));
      const q = b.parameter(scalarShape("f32"));
      return b.compare(p, q, "LT", "TOTALORDER");
    });
    const byKey = mb.computation("by_key", (b) => {
      const p = b.parameter(scalarShape("f32"));
      const q = b.parameter(scalarShape("f32"));
      b.parameter(scalarShape("s32"));
      b.parameter(scalarShape("s32"));
      return b.compare(p, q, "GT", "TOTALORDER");
    });
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [2, "<=10"]), "x");
      const y = b.parameter(arrayShape("f32", ["<=5", 4]), "y");
      const iota = sized(b, b.iota(arrayShape("s32", [2, "<=10"]), 1), [1], x, [1]);
      const args = b.sort([x, iota], 1, byKey, true);
      return b.tuple([b.sort(x, 1, lt), b.getTupleElement(args, 1), b.sort(y, 1, lt)]);
    });
    // Few distinct values, so ties (and the stability they test) are common.
    const vals = fc.oneof(fc.constantFrom(-1, 0, -0, 1, 2, NaN, -Infinity), arbFloat);
    checkPadded(
      mb.build(),
      fc.tuple(len(10), len(5)).chain(([t, u]) => fc.tuple(f32([2, t], vals), f32([u, 4], vals))),
    );
  });

  it("gather with indices into a dynamic dim and with a dynamic batch of indices", () => {
    const mb = new ModuleBuilder("gathers");
    mb.entry("main", (b) => {
      const table = b.parameter(arrayShape("f32", ["<=12", 3]), "table");
      const ids = b.parameter(arrayShape("s32", [5]), "ids");
      const fixed = b.parameter(arrayShape("f32", [10, 3]), "fixed");
      const dynIds = b.parameter(arrayShape("s32", ["<=6"]), "dyn_ids");
      const dims = {
        offsetDims: [1],
        collapsedSliceDims: [0],
        startIndexMap: [0],
        indexVectorDim: 1,
      };
      const window = b.parameter(arrayShape("s32", [2, 2]), "windows");
      return b.tuple([
        b.gather(table, ids, dims, [1, 3]),
        b.gather(fixed, dynIds, dims, [1, 3]),
        // Two-component start indices, each clamped to its own dim's real size.
        b.gather(
          table,
          window,
          { offsetDims: [1, 2], startIndexMap: [0, 1], indexVectorDim: 1 },
          [2, 2],
        ),
      ]);
    });
    checkPadded(
      mb.build(),
      fc
        .tuple(len(12, 2), len(6))
        .chain(([t, n]) =>
          fc.tuple(
            f32([t, 3]),
            s32([5], -3, 15),
            f32([10, 3]),
            s32([n], -2, 12),
            s32([2, 2], -2, 14),
          ),
        ),
    );
  });

  it("scatter into a dynamic dim from a dynamic batch of indices", () => {
    const mb = new ModuleBuilder("scatters");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=10", 2]), "x");
      const idx = b.parameter(arrayShape("s32", ["<=4", 1]), "idx");
      const upd = b.parameter(arrayShape("f32", ["<=4", 2, 2]), "upd");
      return b.scatter(
        x,
        idx,
        upd,
        { updateWindowDims: [1, 2], scatterDimsToOperandDims: [0], indexVectorDim: 1 },
        mb.reducer("add", "f32"),
      );
    });
    checkPadded(
      mb.build(),
      fc
        .tuple(len(10), len(4))
        .chain(([t, n]) => fc.tuple(f32([t, 2]), s32([n, 1], -2, 12), f32([n, 2, 2]))),
    );
  });
});

// ---- movement --------------------------------------------------------------------------------

describe("data movement through dynamic dims", () => {
  it("concatenate along a dynamic dim (dynamic, static, dynamic) and along a static dim", () => {
    const mb = new ModuleBuilder("concat");
    mb.entry("main", (b) => {
      const a = b.parameter(arrayShape("f32", ["<=5", 2]), "a");
      const s = b.parameter(arrayShape("f32", [3, 2]), "s");
      const c = b.parameter(arrayShape("f32", ["<=4", 2]), "c");
      const cat = b.concatenate([a, s, c], 0);
      const add = mb.reducer("add", "f32");
      return b.tuple([
        cat,
        b.reduce(cat, b.scalar("f32", -0), [0], add),
        b.concatenate([a, b.negate(a)], 1),
      ]);
    });
    checkPadded(
      mb.build(),
      fc.tuple(len(5), len(4)).chain(([n, m]) => fc.tuple(f32([n, 2]), f32([3, 2]), f32([m, 2]))),
    );
  });

  it("pad (high, interior, negative) and reverse of dynamic dims", () => {
    const mb = new ModuleBuilder("pad_reverse");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=6", 3]), "x");
      const seven = b.scalar("f32", 7);
      return b.tuple([
        b.pad(x, seven, [[1, 2, 1], [0, 1, 0]]),
        b.pad(x, seven, [[2, -1, 0], [-1, 0, 1]]),
        b.reverse(x, [0, 1]),
        b.reverse(x, [1]),
      ]);
    });
    checkPadded(mb.build(), len(6, 1).chain((t) => f32([t, 3]).map((x) => [x])));
  });

  it("reshape: head split, prefix merge, relayout merge and split, two dynamic dims merged", () => {
    const mb = new ModuleBuilder("reshapes");
    mb.entry("main", (b) => {
      const p0 = b.parameter(arrayShape("f32", [2, "<=8", 6]), "p0");
      const p1 = b.parameter(arrayShape("f32", ["<=8", 4]), "p1");
      const p2 = b.parameter(arrayShape("f32", [2, "<=8"]), "p2");
      const p3 = b.parameter(arrayShape("f32", ["<=4", "<=5"]), "p3");
      const p4 = b.parameter(arrayShape("f32", ["<=16"]), "p4");
      const add = mb.reducer("add", "f32");
      const flat2 = b.reshape(p2, ["<=16"]);
      return b.tuple([
        b.reshape(p0, [2, "<=8", 2, 3]),
        b.reshape(p1, ["<=32"]),
        flat2,
        b.reduce(flat2, b.scalar("f32", -0), [0], add),
        b.reshape(p3, ["<=20"]),
        b.reshape(p4, [2, "<=8"]),
        b.reshape(b.reshape(p0, [2, "<=8", 2, 3]), [2, "<=8", 6]),
      ]);
    });
    checkPadded(
      mb.build(),
      fc
        .tuple(len(8), len(8), len(8), len(4), len(5), len(8))
        .chain(([a, c, d, e, f, h]) =>
          fc.tuple(f32([2, a, 6]), f32([c, 4]), f32([2, d]), f32([e, f]), f32([2 * h])),
        ),
    );
  });

  it("slices, dynamic-slice clamped to the real size, get-dimension-size as an output", () => {
    const mb = new ModuleBuilder("slices");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=10", 3]), "x");
      const i = b.parameter(scalarShape("s32"), "i");
      const full = b.slice(x, [0, 1], [10, 3]);
      return b.tuple([
        full,
        b.slice(x, [0, 0], [4, 3], [2, 1]),
        b.dynamicSlice(x, [i, b.scalar("s32", 0)], [4, 3]),
        b.getDimensionSize(full, 0),
      ]);
    });
    checkPadded(
      mb.build(),
      len(10, 4).chain((t) => fc.tuple(f32([t, 3]), scalarS32(-3, 12))),
    );
  });

  it("dynamic-update-slice: a dynamic update into a static cache, into a dynamic operand", () => {
    const mb = new ModuleBuilder("kv_cache");
    mb.entry("main", (b) => {
      const cache = b.parameter(arrayShape("f32", [12, 3]), "cache");
      const upd = b.parameter(arrayShape("f32", ["<=5", 3]), "upd");
      const x = b.parameter(arrayShape("f32", ["<=10", 3]), "x");
      const small = b.parameter(arrayShape("f32", [2, 3]), "small");
      const p = b.parameter(scalarShape("s32"), "pos");
      const zero = b.scalar("s32", 0);
      return b.tuple([
        b.dynamicUpdateSlice(cache, upd, [p, zero]),
        b.dynamicUpdateSlice(x, small, [p, zero]),
        b.dynamicUpdateSlice(x, upd, [p, zero]),
      ]);
    });
    checkPadded(
      mb.build(),
      fc
        .tuple(len(5), len(10, 5))
        .chain(([u, t]) =>
          fc.tuple(f32([12, 3]), f32([u, 3]), f32([t, 3]), f32([2, 3]), scalarS32(-3, 14)),
        ),
    );
  });
});

// ---- control flow ----------------------------------------------------------------------------

describe("control flow", () => {
  it("a while loop carrying a dynamic dim, a conditional on a dynamic operand, a call", () => {
    const mb = new ModuleBuilder("control");
    const vec = arrayShape("f32", ["<=8"]);
    const state = tupleShape([scalarShape("s32"), vec]);
    const add = mb.reducer("add", "f32");
    const center = mb.computation("center", (b) => {
      const x = b.parameter(vec);
      const n = b.convert(b.getDimensionSize(x, 0), "f32");
      const mean = b.divide(b.reduce(x, b.scalar("f32", 0), [0], add), n);
      const m = sized(b, b.broadcast(mean, ["<=8"], []), [0], x, [0]);
      return b.subtract(x, m);
    });
    const cond = mb.computation("cond", (b) => {
      const s = b.parameter(state);
      return b.compare(b.getTupleElement(s, 0), b.scalar("s32", 3), "LT");
    });
    const body = mb.computation("body", (b) => {
      const s = b.parameter(state);
      const x = b.getTupleElement(s, 1);
      const half = sized(b, b.broadcast(b.scalar("f32", 0.5), ["<=8"], []), [0], x, [0]);
      const next = b.multiply(b.call([x], center), half);
      return b.tuple([b.add(b.getTupleElement(s, 0), b.scalar("s32", 1)), next]);
    });
    const twice = mb.computation("twice", (b) => {
      const x = b.parameter(vec);
      return b.add(x, x);
    });
    const backwards = mb.computation("backwards", (b) => b.reverse(b.parameter(vec), [0]));
    mb.entry("main", (b) => {
      const x = b.parameter(vec, "x");
      const flag = b.parameter(scalarShape("pred"), "flag");
      const loop = b.while(b.tuple([b.scalar("s32", 0), x]), cond, body);
      const picked = b.conditional(flag, [x, x], [twice, backwards]);
      return b.tuple([b.getTupleElement(loop, 1), picked, b.call([x], center)]);
    });
    checkPadded(
      mb.build(),
      len(8).chain((t) =>
        fc.tuple(f32([t], finiteFloat), fc.boolean().map((v) => literal("pred", [], [v]))),
      ),
    );
  });

  it("a loop whose carried dynamic dim grows by one each iteration", () => {
    const mb = new ModuleBuilder("growing");
    const state = tupleShape([
      scalarShape("s32"),
      scalarShape("s32"),
      arrayShape("f32", ["<=8"]),
      arrayShape("f32", [8]),
    ]);
    const cond = mb.computation("cond", (b) => {
      const s = b.parameter(state);
      return b.compare(b.getTupleElement(s, 0), b.getTupleElement(s, 1), "LT");
    });
    const body = mb.computation("body", (b) => {
      const s = b.parameter(state);
      const buf = b.getTupleElement(s, 2);
      const src = b.getTupleElement(s, 3);
      const n = b.add(b.getDimensionSize(buf, 0), b.scalar("s32", 1));
      // The first n+1 source values, scaled by the running sum of the previous buffer.
      const sum = b.reduce(buf, b.scalar("f32", 0), [0], mb.reducer("add", "f32"));
      const grown = b.setDimensionSize(src, n, 0);
      const scaled = b.multiply(grown, sized(b, b.broadcast(sum, ["<=8"], []), [0], grown, [0]));
      const i = b.add(b.getTupleElement(s, 0), b.scalar("s32", 1));
      return b.tuple([i, b.getTupleElement(s, 1), scaled, src]);
    });
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=8"]), "x");
      const src = b.parameter(arrayShape("f32", [8]), "src");
      const k = b.parameter(scalarShape("s32"), "steps");
      const loop = b.while(b.tuple([b.scalar("s32", 0), k, x, src]), cond, body);
      return b.getTupleElement(loop, 2);
    });
    checkPadded(
      mb.build(),
      len(8).chain((n) =>
        fc.tuple(f32([n], finiteFloat), f32([8], finiteFloat), scalarS32(0, 8 - n)),
      ),
    );
  });
});

// ---- the convention, errors, modules left alone ----------------------------------------------

describe("calling convention and errors", () => {
  it("parameters at their bounds, then one s32 size per dynamic dim; (result, sizes) out", () => {
    const mb = new ModuleBuilder("conv");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=4", 3, "<=5"]), "x");
      const y = b.parameter(tupleShape([arrayShape("s32", ["<=2"]), scalarShape("f32")]), "y");
      void y;
      return b.tuple([b.negate(x), b.reduce(x, b.scalar("f32", 0), [0], mb.reducer("add", "f32"))]);
    });
    const m = mb.build();
    const sig = paddedSignature(m);
    expect(sig.sizeParams.map((s) => [s.param, s.path, s.dim, s.bound])).toEqual([
      [0, [], 0, 4],
      [0, [], 2, 5],
      [1, [0], 0, 2],
    ]);
    expect(sig.resultSizes.map((s) => [s.path, s.dim])).toEqual([
      [[0], 0],
      [[0], 2],
      [[1], 1],
    ]);
    const p = cloneModule(m);
    new DynamicPadder().run(p);
    expect(printHlo(p)).toContain(
      "ENTRY %main (x: f32[4,3,5], y: (s32[2], f32[]), x.size0: s32[], x.size2: s32[], " +
        "y.0.size0: s32[]) -> ((f32[4,3,5], f32[3,5]), s32[], s32[], s32[]) {",
    );
  });

  it("leaves a module without dynamic dims alone", () => {
    const m = CORPUS.mlp!.build();
    const before = printHlo(m);
    expect(new DynamicPadder().run(m)).toBe(false);
    expect(printHlo(m)).toBe(before);
    expect(paddedSignature(m).padded).toBe(false);
    const exe = jsBackend.compile(m);
    const args = CORPUS.mlp!.inputs();
    expect(identical(runPadded(exe, m, args), evaluate(m, args))).toBe(true);
  });

  it("runs inside a pipeline (verified after the pass)", () => {
    const m = cloneModule(CORPUS.dynamic_mean!.build());
    expect(defaultPipeline({ verify: true }, [new DynamicPadder()]).run(m)).toBe(true);
    expect(anyDynamic(m)).toBe(false);
  });

  it("rejects a custom-call on a dynamic operand, naming the instruction", () => {
    const mb = new ModuleBuilder("opaque");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=4"]), "x");
      return b.customCall([x], "my_op", arrayShape("f32", ["<=4"]));
    });
    const m = mb.build();
    const before = printHlo(m);
    const run = () => new DynamicPadder().run(m);
    expect(run).toThrow(DynamicPadderError);
    expect(run).toThrow(/%custom-call\.1 \(custom-call\): .*semantics are unknown/);
    // A failed rewrite leaves the module as it was.
    expect(printHlo(m)).toBe(before);
    verifyModule(m);
    expect(() => defaultPipeline({}, [new DynamicPadder()]).run(cloneModule(m))).toThrow(PassError);
  });

  it("rejects a scatter whose update window is dynamic", () => {
    const mb = new ModuleBuilder("bad_scatter");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [10]), "x");
      const idx = b.parameter(arrayShape("s32", [1]), "idx");
      const upd = b.parameter(arrayShape("f32", [1, "<=4"]), "upd");
      return b.scatter(
        x,
        idx,
        upd,
        { updateWindowDims: [1], scatterDimsToOperandDims: [0], indexVectorDim: 1 },
        mb.reducer("add", "f32"),
      );
    });
    expect(() => new DynamicPadder().run(mb.build())).toThrow(
      /%scatter\.1 \(scatter\): a scatter whose update window has a dynamic dim/,
    );
  });

  it("runPadded reports arguments above their bounds and executables of another module", () => {
    const m = CORPUS.dynamic_mean!.build();
    const { exes } = padded(m);
    const tooLong = literal("f32", [2, 17, 8], new Array<number>(2 * 17 * 8).fill(1));
    expect(() => runPadded(exes[0]!, m, [tooLong])).toThrow(
      /argument 0 is f32\[2,17,8\], which does not fit parameter 0 f32\[2,<=16,8\].*above/,
    );
    expect(() => runPadded(jsBackend.compile(m), m, [CORPUS.dynamic_mean!.inputs()[0]!])).toThrow(
      /the executable takes 1 parameter\(s\), but the padded form of 'dynamic_mean' takes 2/,
    );
  });
});
