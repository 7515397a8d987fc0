// Fusions on the `js` backend (the fusion contract shared with passes/fuse.ts). Hand-written
// fusion computations of each kind — kLoop with broadcast/transpose/reshape inside, kInput
// softmax / layer norm / RMS norm / column and multi-output reductions as ONE kernel, kOutput
// dot + bias + relu + residual and convolution + bias — must be bit-identical to the evaluator
// and compile to the expected number of kernels with no per-instruction fallback; fusions that
// do not fit their kind still run correctly through the fallback, which KILN_LOGS=fusion
// reports. The corpus modules run on js exactly as on the evaluator, before and after the
// fusion passes.

import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { literal, type Literal, type ScalarValue } from "../../ir/literal.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape, type ElementType, scalarShape } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import { fusionPasses } from "../../passes/fuse.ts";
import { jsBackend, type JsExecutable } from "../../runtime/js/backend.ts";
import { setLogTopics } from "../../util/log.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { fusedModule as fusedCase, type Kind } from "./fixtures/fusion_cases.ts";
import { identical } from "./fixtures/op_cases.ts";

const RUNS = { numRuns: 40 };

// ---- helpers ---------------------------------------------------------------------------------


const show = (v: EvalValue): string =>
  Array.isArray(v) ? `(${v.map(show).join(", ")})` : v.toString();

/** Compiles on js, checks bit-identity with the evaluator, returns the executable. */
function runBoth(module: Module, inputs: EvalValue[]): JsExecutable {
  const exe = jsBackend.compile(module) as JsExecutable;
  const got = exe.run(inputs);
  const want = evaluate(module, inputs);
  if (!identical(got, want)) {
    throw new Error(
      `js differs from the evaluator\n${printHlo(module)}\nevaluator: ${show(want)}\n` +
        `js: ${show(got)}\n${exe.source}`,
    );
  }
  return exe;
}

/** Generated kernel functions (programs are `c*`, kernels `k*`). */
const kernelCount = (exe: JsExecutable) => (exe.source.match(/^function k/gm) ?? []).length;

/** True when the fused computation was compiled as a per-instruction program (the fallback). */
const fellBack = (exe: JsExecutable, c: Computation) =>
  exe.source.includes(`// computation ${c.name}\n`);

const count = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);

const arbF = fc.oneof(
  { weight: 6, arbitrary: fc.double({ min: -8, max: 8, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -0, NaN, Infinity, -Infinity, 1e30) },
);

function arbLit(t: ElementType, dims: readonly number[]): fc.Arbitrary<Literal> {
  const n = count(dims);
  const el: fc.Arbitrary<ScalarValue> =
    t === "s32" ? fc.integer({ min: -1000, max: 1000 }) : t === "pred" ? fc.boolean() : arbF;
  return fc.array(el, { minLength: n, maxLength: n }).map((vs) => literal(t, dims, vs));
}

const bcast = (b: ComputationBuilder, v: number, dims: number[], t: ElementType = "f32") =>
  b.broadcast(b.scalar(t, v), dims, []);

/** One fusion of `kind` over the inputs' shapes (fusion_cases' module), and the fused computation. */
function fusedModule(
  name: string,
  kind: Kind,
  inputs: readonly Literal[],
  body: (b: ComputationBuilder, ps: Instruction[], mb: ModuleBuilder) => Instruction,
): { module: Module; fused: Computation } {
  const module = fusedCase(name, kind, inputs, body);
  return { module, fused: module.computations.find((c) => c.name === `fused_${name}`)! };
}

afterEach(() => {
  setLogTopics(undefined);
  vi.restoreAllMocks();
});

// ---- kLoop -----------------------------------------------------------------------------------

type Leaf = "full" | "bcast" | "transposed" | "flat" | "sliced" | "padded" | "iota";

/** A random elementwise DAG over parameters reaching the output through data movement. */
const loopCase = fc
  .record({
    dims: fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 3 }),
    t: fc.constantFrom<ElementType>("f32", "f32", "f16", "s32"),
    leaves: fc.array(fc.constantFrom<Leaf>("full", "bcast", "transposed", "flat", "sliced",
      "padded", "iota"), { minLength: 1, maxLength: 4 }),
    ops: fc.array(fc.tuple(fc.constantFrom("add", "multiply", "subtract", "maximum", "divide",
      "tanh", "exp", "select", "abs", "pad", "concat"), fc.nat(), fc.nat()),
      { minLength: 1, maxLength: 8 }),
    keepMask: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
  })
  .chain((r) => {
    const shapes = r.leaves.map((l) => {
      switch (l) {
        case "bcast":
          return r.dims.filter((_, i) => r.keepMask[i]);
        case "transposed":
          return [...r.dims].reverse();
        case "flat":
          return [count(r.dims)];
        case "sliced":
          return r.dims.map((d) => d * 2 + 1);
        case "padded":
          return r.dims.map((d) => Math.max(d - 1, 1));
        default:
          return r.dims;
      }
    });
    return fc.tuple(fc.constant(r), fc.tuple(...shapes.map((s) => arbLit(r.t, s))));
  })
  .map(([r, inputs]) => {
    const { dims, t } = r;
    return fusedModule("loop", "kLoop", inputs, (b, ps) => {
      const vals: Instruction[] = r.leaves.map((l, i) => {
        const p = ps[i]!;
        switch (l) {
          case "bcast":
            return b.broadcast(p, dims, dims.map((_, k) => k).filter((k) => r.keepMask[k]));
          case "transposed":
            return b.transpose(p, dims.map((_, k) => dims.length - 1 - k));
          case "flat":
            return b.reshape(p, dims);
          case "sliced":
            return b.slice(p, dims.map(() => 1), dims.map((d) => 1 + 2 * d), dims.map(() => 2));
          case "padded":
            return b.pad(
              p,
              b.scalar(t, t === "s32" ? 3 : 0.25),
              dims.map((d) => [d > 1 ? 1 : 0, 0, 0] as const),
            );
          case "iota":
            return b.convert(b.iota(arrayShape("s32", dims), dims.length - 1), t);
          default:
            return p;
        }
      });
      for (const [op, i, j] of r.ops) {
        const x = vals[i % vals.length]!;
        const y = vals[j % vals.length]!;
        const n0 = dims[0]!;
        const rows = (v: Instruction, from: number, to: number) =>
          b.slice(v, dims.map((_, k) => (k === 0 ? from : 0)), dims.map((d, k) => (k ? d : to)));
        switch (op) {
          case "tanh":
            vals.push(t === "s32" ? b.negate(x) : b.tanh(x));
            break;
          case "exp":
            vals.push(t === "s32" ? b.abs(x) : b.exp(x));
            break;
          case "pad": {
            // The padded value is read inside the pad's branch (inlined, not hoisted).
            const p = b.pad(x, b.scalar(t, -2), dims.map((_, k) => [k ? 0 : 1, 0, 0] as const));
            vals.push(rows(p, 0, n0));
            break;
          }
          case "concat": {
            const k = n0 >> 1;
            vals.push(k === 0 ? y : b.concatenate([rows(x, 0, k), rows(y, k, n0)], 0));
            break;
          }
          case "abs":
            vals.push(b.abs(x));
            break;
          case "select":
            vals.push(b.select(b.compare(x, y, "LT"), x, b.negate(y)));
            break;
          default:
            vals.push(b.op(op as "add", [x, y]));
        }
      }
      return b.multiply(vals[vals.length - 1]!, bcast(b, 3, dims, t));
    });
  });

describe("kLoop fusions", () => {
  it("random elementwise graphs with broadcast/transpose/reshape/slice/pad inside: one kernel",
    () => {
      fc.assert(
        fc.property(loopCase, ({ module, fused }) => {
          const exe = runBoth(module, inputsOf(module));
          expect(fellBack(exe, fused)).toBe(false);
          expect(kernelCount(exe)).toBe(1);
        }),
        { numRuns: 60 },
      );
    });

  it("reads a transposed, reshaped, broadcast operand without materializing it", () => {
    const x = literal("f32", [6, 4], Array.from({ length: 24 }, (_, i) => i * 0.37 - 3));
    const bias = literal("f32", [3], [0.5, -1, 2]);
    const { module, fused } = fusedModule("movement", "kLoop", [x, bias], (b, [p, q]) => {
      // [6,4] -> transpose [4,6] -> reshape [4,2,3] + broadcast bias over dim 2.
      const r = b.reshape(b.transpose(p!, [1, 0]), [4, 2, 3]);
      return b.tanh(b.add(r, b.broadcast(q!, [4, 2, 3], [2])));
    });
    const exe = runBoth(module, [x, bias]);
    expect(kernelCount(exe)).toBe(1);
    expect(fellBack(exe, fused)).toBe(false);
  });
});

describe("kLoop regressions", () => {
  it("an iota's index arithmetic keeps its precedence inside a pad branch", () => {
    // iota - iota inside a pad: the branch is inlined, so `i + 1` must stay parenthesized.
    const z = literal("s32", [], [5]);
    const { module } = fusedModule("pad_iota", "kLoop", [z], (b, [p]) => {
      const io = (d: number) => b.slice(b.iota(arrayShape("s32", [4, 4]), d), [1, 1], [4, 4]);
      const diff = b.multiply(b.subtract(io(1), io(0)), b.broadcast(p!, [3, 3], []));
      return b.pad(diff, b.scalar("s32", 7), [
        [1, 0, 0],
        [0, 2, 1],
      ]);
    });
    runBoth(module, [z]);
  });
});

/** Inputs for a module's parameters (deterministic, with special values sprinkled in). */
function inputsOf(m: Module): Literal[] {
  let s = 12345;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  };
  return m.entry.parameters.map((p) => {
    const sh = p.shape;
    if (sh.kind !== "array") throw new Error("tuple parameter");
    const n = count(sh.dims);
    const vals = Array.from({ length: n }, (_, i) =>
      sh.type === "s32" ? Math.round(next() * 100) : i % 17 === 5 ? -0 : next() * 4,
    );
    return literal(sh.type, sh.dims, vals);
  });
}

// ---- kInput ----------------------------------------------------------------------------------

function softmax(b: ComputationBuilder, mb: ModuleBuilder, x: Instruction, dims: number[]) {
  const last = dims.length - 1;
  const keep = dims.map((_, i) => i).slice(0, last);
  const m = b.reduce(x, b.scalar("f32", -Infinity), [last], mb.reducer("max", "f32"));
  const e = b.exp(b.subtract(x, b.broadcast(m, dims, keep)));
  const s = b.reduce(e, b.scalar("f32", 0), [last], mb.reducer("add", "f32"));
  return b.divide(e, b.broadcast(s, dims, keep));
}

function layerNorm(
  b: ComputationBuilder,
  mb: ModuleBuilder,
  x: Instruction,
  g: Instruction,
  beta: Instruction,
  rows: number,
  cols: number,
) {
  const add = mb.reducer("add", "f32");
  const n = bcast(b, cols, [rows]);
  const mean = b.divide(b.reduce(x, b.scalar("f32", 0), [1], add), n);
  const xc = b.subtract(x, b.broadcast(mean, [rows, cols], [0]));
  const v = b.divide(b.reduce(b.multiply(xc, xc), b.scalar("f32", 0), [1], add), n);
  const inv = b.rsqrt(b.add(v, bcast(b, 1e-5, [rows])));
  const y = b.multiply(xc, b.broadcast(inv, [rows, cols], [0]));
  const scaled = b.multiply(y, b.broadcast(g, [rows, cols], [1]));
  return b.add(scaled, b.broadcast(beta, [rows, cols], [1]));
}

const small = fc.integer({ min: 1, max: 6 });
const rowsCols = fc.tuple(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 17 }));

describe("kInput fusions: one kernel per fusion", () => {
  it("softmax over the last dim (rank 2 and 3)", () => {
    const arb = fc
      .array(fc.integer({ min: 1, max: 7 }), { minLength: 2, maxLength: 3 })
      .chain((dims) => arbLit("f32", dims));
    fc.assert(
      fc.property(arb, (x) => {
        const dims = [...x.dims];
        const { module, fused } = fusedModule("softmax", "kInput", [x], (b, [p], mb) =>
          softmax(b, mb, p!, dims),
        );
        const exe = runBoth(module, [x]);
        expect(fellBack(exe, fused)).toBe(false);
        expect(kernelCount(exe)).toBe(1);
      }),
      RUNS,
    );
  });

  it("layer norm with gamma and beta", () => {
    const arb = rowsCols.chain(([r, c]) =>
      fc.tuple(arbLit("f32", [r, c]), arbLit("f32", [c]), arbLit("f32", [c])),
    );
    fc.assert(
      fc.property(arb, ([x, g, beta]) => {
        const [rows, cols] = x.dims as [number, number];
        const { module, fused } = fusedModule("layer_norm", "kInput", [x, g, beta], (b, ps, mb) =>
          layerNorm(b, mb, ps[0]!, ps[1]!, ps[2]!, rows, cols),
        );
        const exe = runBoth(module, [x, g, beta]);
        expect(fellBack(exe, fused)).toBe(false);
        expect(kernelCount(exe)).toBe(1);
      }),
      RUNS,
    );
  });

  it("RMS norm, a reduce-shaped root (mean) and a column reduction", () => {
    const arb = rowsCols.chain(([r, c]) => fc.tuple(arbLit("f32", [r, c]), arbLit("f32", [c])));
    fc.assert(
      fc.property(arb, ([x, w]) => {
        const [rows, cols] = x.dims as [number, number];
        const rms = fusedModule("rms", "kInput", [x, w], (b, [p, q], mb) => {
          const ms = b.divide(
            b.reduce(b.multiply(p!, p!), b.scalar("f32", 0), [1], mb.reducer("add", "f32")),
            bcast(b, cols, [rows]),
          );
          const inv = b.rsqrt(b.add(ms, bcast(b, 1e-6, [rows])));
          return b.multiply(
            b.multiply(p!, b.broadcast(inv, [rows, cols], [0])),
            b.broadcast(q!, [rows, cols], [1]),
          );
        });
        const mean = fusedModule("mean", "kInput", [x], (b, [p], mb) =>
          b.divide(
            b.reduce(b.exp(p!), b.scalar("f32", 0), [1], mb.reducer("add", "f32")),
            bcast(b, cols, [rows]),
          ),
        );
        const column = fusedModule("column", "kInput", [x], (b, [p], mb) =>
          b.reduce(b.abs(p!), b.scalar("f32", 0), [0], mb.reducer("add", "f32")),
        );
        for (const { module, fused } of [rms, mean, column]) {
          const exe = runBoth(module, inputsOf(module).map((_, i) => [x, w][i]!));
          expect(fellBack(exe, fused)).toBe(false);
          expect(kernelCount(exe)).toBe(1);
        }
      }),
      RUNS,
    );
  });

  it("multi-output (mean and variance as a tuple) and a variadic argmax", () => {
    const arb = rowsCols.chain(([r, c]) => arbLit("f32", [r, c]));
    fc.assert(
      fc.property(arb, (x) => {
        const [rows, cols] = x.dims as [number, number];
        const stats = fusedModule("stats", "kInput", [x], (b, [p], mb) => {
          const add = mb.reducer("add", "f32");
          const s = b.reduce(p!, b.scalar("f32", 0), [1], add);
          const ss = b.reduce(b.multiply(p!, p!), b.scalar("f32", 0), [1], add);
          return b.tuple([s, ss, b.negate(p!)]);
        });
        const argmax = fusedModule("argmax", "kInput", [x], (b, [p], mb) => {
          const f = scalarShape("f32");
          const s = scalarShape("s32");
          const red = mb.computation("argmax_red", (c) => {
            const av = c.parameter(f);
            const ai = c.parameter(s);
            const xv = c.parameter(f);
            const xi = c.parameter(s);
            const take = c.compare(xv, av, "GT");
            return c.tuple([c.select(take, xv, av), c.select(take, xi, ai)]);
          });
          const idx = b.iota(arrayShape("s32", [rows, cols]), 1);
          return b.reduce([p!, idx], [b.scalar("f32", -Infinity), b.scalar("s32", -1)], [1], red);
        });
        for (const { module, fused } of [stats, argmax]) {
          const exe = runBoth(module, [x]);
          expect(fellBack(exe, fused)).toBe(false);
          expect(kernelCount(exe)).toBe(1);
        }
      }),
      RUNS,
    );
  });
});

// ---- kOutput ---------------------------------------------------------------------------------

describe("kOutput fusions", () => {
  it("dot + bias + relu + residual, with batch dims and odd sizes", () => {
    const arb = fc
      .record({
        batch: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 1 }),
        m: fc.integer({ min: 1, max: 9 }),
        k: fc.integer({ min: 0, max: 9 }),
        n: fc.integer({ min: 1, max: 9 }),
      })
      .chain((r) =>
        fc.tuple(
          fc.constant(r),
          arbLit("f32", [...r.batch, r.m, r.k]),
          arbLit("f32", [...r.batch, r.k, r.n]),
          arbLit("f32", [r.n]),
          arbLit("f32", [...r.batch, r.m, r.n]),
        ),
      );
    fc.assert(
      fc.property(arb, ([r, x, w, bias, res]) => {
        const nb = r.batch.length;
        const out = [...r.batch, r.m, r.n];
        const { module, fused } = fusedModule("linear", "kOutput", [x, w, bias, res], (b, ps) => {
          const batch = nb ? [0] : [];
          const d = b.dot(ps[0]!, ps[1]!, {
            lhsBatch: batch,
            rhsBatch: batch,
            lhsContracting: [nb + 1],
            rhsContracting: [nb],
          });
          const h = b.add(d, b.broadcast(ps[2]!, out, [nb + 1]));
          return b.add(b.maximum(h, bcast(b, 0, out)), ps[3]!);
        });
        const exe = runBoth(module, [x, w, bias, res]);
        expect(fellBack(exe, fused)).toBe(false);
        // The epilogue is the only generated kernel (the dot is a library kernel).
        expect(kernelCount(exe)).toBe(1);
        expect(exe.source).toMatch(/\(lo, hi\) => k\d+_/);
      }),
      RUNS,
    );
  });

  it("dot of transposed and broadcast parameters reads them in place", () => {
    const arb = fc
      .tuple(small, small, small)
      .chain(([m, k, n]) =>
        fc.tuple(arbLit("f32", [k, m]), arbLit("f32", [k]), arbLit("f32", [n])),
      );
    fc.assert(
      fc.property(arb, ([xt, col, s]) => {
        const [k, m] = xt.dims as [number, number];
        const n = s.dims[0]!;
        const { module, fused } = fusedModule("views", "kOutput", [xt, col, s], (b, ps) => {
          const x = b.transpose(ps[0]!, [1, 0]); // [m, k]
          const w = b.broadcast(ps[1]!, [k, n], [0]); // [k, n], constant along n
          const d = b.dot(x, w, { lhsContracting: [1], rhsContracting: [0] });
          return b.multiply(d, b.broadcast(ps[2]!, [m, n], [1]));
        });
        const exe = runBoth(module, [xt, col, s]);
        expect(fellBack(exe, fused)).toBe(false);
        expect(kernelCount(exe)).toBe(1);
      }),
      RUNS,
    );
  });

  it("an epilogue that reads the dot at another index runs after the dot", () => {
    const x = literal("f32", [3, 4], Array.from({ length: 12 }, (_, i) => i - 5.5));
    const w = literal("f32", [4, 3], Array.from({ length: 12 }, (_, i) => 0.25 * i - 1));
    const { module, fused } = fusedModule("transposed_epilogue", "kOutput", [x, w], (b, ps) => {
      const d = b.dot(ps[0]!, ps[1]!, { lhsContracting: [1], rhsContracting: [0] });
      return b.add(d, b.transpose(d, [1, 0]));
    });
    const exe = runBoth(module, [x, w]);
    expect(fellBack(exe, fused)).toBe(false);
    expect(exe.source).not.toMatch(/\(lo, hi\) =>/);
  });

  it("a vector times a matrix (no lhs free dims: the epilogue has no rows) + bias", () => {
    // linear() on a 1-d input: the epilogue's row range is empty of dims (a range of one).
    for (const [k, n] of [[4, 3], [1, 1], [17, 5]] as const) {
      const x = literal("f32", [k], Array.from({ length: k }, (_, i) => i - 1.5));
      const w = literal("f32", [n, k], Array.from({ length: n * k }, (_, i) => 0.5 * i - 2));
      const bias = literal("f32", [n], Array.from({ length: n }, (_, i) => i + 0.25));
      const { module, fused } = fusedModule("vec_mat", "kOutput", [x, w, bias], (b, ps) =>
        b.add(b.dot(ps[0]!, ps[1]!, { lhsContracting: [0], rhsContracting: [1] }), ps[2]!),
      );
      const exe = runBoth(module, [x, w, bias]);
      expect(fellBack(exe, fused)).toBe(false);
    }
  });

  it("f16 and s32 dots with epilogues", () => {
    const arb = fc
      .tuple(small, small, small)
      .chain(([m, k, n]) =>
        fc.tuple(
          arbLit("f32", [m, k]),
          arbLit("f32", [k, n]),
          arbLit("s32", [m, k]),
          arbLit("s32", [k, n]),
        ),
      );
    fc.assert(
      fc.property(arb, ([x, w, xi, wi]) => {
        const [m] = x.dims as [number];
        const n = w.dims[1]!;
        const half = fusedModule("half", "kOutput", [x, w], (b, ps) => {
          const d = b.dot(b.convert(ps[0]!, "f16"), b.convert(ps[1]!, "f16"), {
            lhsContracting: [1],
            rhsContracting: [0],
          });
          return b.tanh(b.multiply(d, bcast(b, 0.5, [m, n], "f16")));
        });
        const ints = fusedModule("ints", "kOutput", [xi, wi], (b, ps) => {
          const d = b.dot(ps[0]!, ps[1]!, { lhsContracting: [1], rhsContracting: [0] });
          return b.maximum(d, bcast(b, 0, [m, n], "s32"));
        });
        runBoth(half.module, [x, w]);
        const exe = runBoth(ints.module, [xi, wi]);
        expect(fellBack(exe, ints.fused)).toBe(false);
      }),
      RUNS,
    );
  });

  it("convolution + bias (+ relu), NCHW and NHWC", () => {
    const arb = fc
      .record({
        n: fc.integer({ min: 1, max: 2 }),
        c: fc.integer({ min: 1, max: 3 }),
        o: fc.integer({ min: 1, max: 4 }),
        h: fc.integer({ min: 1, max: 6 }),
        k: fc.integer({ min: 1, max: 3 }),
        nhwc: fc.boolean(),
      })
      .chain((r) => {
        const input = r.nhwc ? [r.n, r.h, r.h, r.c] : [r.n, r.c, r.h, r.h];
        const kernel = r.nhwc ? [r.k, r.k, r.c, r.o] : [r.o, r.c, r.k, r.k];
        return fc.tuple(
          fc.constant(r),
          arbLit("f32", input),
          arbLit("f32", kernel),
          arbLit("f32", [r.o]),
        );
      });
    fc.assert(
      fc.property(arb, ([r, x, w, bias]) => {
        const pad = Math.floor(r.k / 2);
        const outH = r.h + 2 * pad - r.k + 1;
        const out = r.nhwc ? [r.n, outH, outH, r.o] : [r.n, r.o, outH, outH];
        const { module, fused } = fusedModule("conv", "kOutput", [x, w, bias], (b, ps) => {
          const y = b.convolution(ps[0]!, ps[1]!, {
            window: [
              { size: r.k, padLow: pad, padHigh: pad },
              { size: r.k, padLow: pad, padHigh: pad },
            ],
            dims: r.nhwc ? "b01f_01io->b01f" : "bf01_oi01->bf01",
          });
          const z = b.add(y, b.broadcast(ps[2]!, out, [r.nhwc ? 3 : 1]));
          return b.maximum(z, bcast(b, 0, out));
        });
        const exe = runBoth(module, [x, w, bias]);
        expect(fellBack(exe, fused)).toBe(false);
        expect(kernelCount(exe)).toBe(1);
      }),
      RUNS,
    );
  });
});

// ---- fallbacks -------------------------------------------------------------------------------

describe("fusions that do not fit their kind run per instruction", () => {
  it("kLoop with a reduce, kOutput with two dots, kInput over two shapes or rows, kCustom", () => {
    setLogTopics(["fusion"]);
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const x = literal("f32", [3, 4], Array.from({ length: 12 }, (_, i) => Math.sin(i) * 3));
    const w = literal("f32", [4, 4], Array.from({ length: 16 }, (_, i) => Math.cos(i)));
    const cases = [
      fusedModule("loop_with_reduce", "kLoop", [x], (b, [p], mb) => {
        const s = b.reduce(p!, b.scalar("f32", 0), [1], mb.reducer("add", "f32"));
        return b.subtract(p!, b.broadcast(s, [3, 4], [0]));
      }),
      fusedModule("two_dots", "kOutput", [x, w], (b, [p, q]) => {
        const d = b.dot(p!, q!, { lhsContracting: [1], rhsContracting: [0] });
        return b.dot(d, q!, { lhsContracting: [1], rhsContracting: [0] });
      }),
      fusedModule("two_shapes", "kInput", [x], (b, [p], mb) => {
        const add = mb.reducer("add", "f32");
        const rows = b.reduce(p!, b.scalar("f32", 0), [1], add);
        const all = b.reduce(rows, b.scalar("f32", 0), [0], add);
        return b.broadcast(all, [3], []);
      }),
      fusedModule("custom", "kCustom", [x], (b, [p]) => b.exp(p!)),
      // A row's result read at another row (broadcast along the other dim of a square).
      fusedModule("other_row", "kInput", [w], (b, [p], mb) => {
        const s = b.reduce(p!, b.scalar("f32", 0), [1], mb.reducer("add", "f32"));
        return b.multiply(p!, b.broadcast(s, [4, 4], [1]));
      }),
    ];
    for (const { module, fused } of cases) {
      const inputs = module.entry.parameters.map((p) => (p.shape.kind === "array" &&
        p.shape.dims[0] === 4 ? w : x));
      const exe = runBoth(module, inputs);
      expect(fellBack(exe, fused)).toBe(true);
      const said = lines.some(
        (l) => l.includes("[kiln:fusion] js:") && l.includes("per instruction"),
      );
      expect(said).toBe(true);
      lines.length = 0;
    }
  });
});

// ---- the corpus ------------------------------------------------------------------------------

describe("corpus modules on js", () => {
  for (const [name, entry] of Object.entries(CORPUS)) {
    it(`${name}: bit-identical to the evaluator, unfused and after the fusion passes`, () => {
      const inputs = entry.inputs();
      runBoth(entry.build(), inputs);
      const fused = cloneModule(entry.build());
      for (const p of fusionPasses()) p.run(fused);
      verifyModule(fused);
      setLogTopics(["fusion"]);
      const lines: string[] = [];
      vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
        lines.push(String(chunk));
        return true;
      });
      const exe = runBoth(fused, inputs);
      expect(identical(exe.run(inputs), evaluate(entry.build(), inputs))).toBe(true);
      expect(lines.filter((l) => l.includes("[kiln:fusion] js:"))).toEqual([]);
    });
  }
});
