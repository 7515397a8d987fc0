// Bounded dynamic dims on the `js` backend: a module with `<=N` dims is compiled per distinct
// set of actual argument dims, and must agree bit for bit with the evaluator (which works on
// actual dims) whatever the actual sizes, zero included: elementwise and broadcast, reductions
// and get-dimension-size (a masked mean), reshapes through a dynamic dim, full slices, pad and
// concatenate, dots with a dynamic row dim, set-dimension-size to a shape-known size, fusions
// and loops carrying dynamic state. (A broadcast into a dynamic dim takes the bound, as in XLA,
// so values are brought to a row count with set-dimension-size(..., get-dimension-size).) What
// cannot be specialized says so with an UnsupportedError naming the instruction.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape, scalarShape, tupleShape } from "../../ir/shape.ts";
import { UnsupportedError } from "../../runtime/backend.ts";
import { jsBackend } from "../../runtime/js/backend.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { identical } from "./fixtures/op_cases.ts";

const RUNS = { numRuns: 40 };


const show = (v: EvalValue): string =>
  Array.isArray(v) ? `(${v.map(show).join(", ")})` : v.toString();

/** Runs every input set on one executable (specializing as needed) against the evaluator. */
function checkAll(module: Module, inputSets: readonly EvalValue[][]): void {
  const exe = jsBackend.compile(module);
  for (const inputs of inputSets) {
    const want = evaluate(module, inputs);
    const got = exe.run(inputs);
    if (!identical(got, want)) {
      throw new Error(
        `js differs from the evaluator\n${printHlo(module)}\ninputs: ${inputs.map(show)}\n` +
          `evaluator: ${show(want)}\njs: ${show(got)}`,
      );
    }
  }
}

const arbF = fc.oneof(
  { weight: 8, arbitrary: fc.double({ min: -4, max: 4, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(-0, NaN, Infinity) },
);

function arbF32(dims: readonly number[]): fc.Arbitrary<Literal> {
  const n = dims.reduce((a, b) => a * b, 1);
  return fc.array(arbF, { minLength: n, maxLength: n }).map((v) => literal("f32", dims, v));
}

/** A broadcast of `v` to [bound, ...rest] cut to the actual row count of `like`. */
function rowsLike(
  b: ComputationBuilder,
  v: Instruction,
  like: Instruction,
  bound: number,
  rest: number[],
  map: number[],
): Instruction {
  const full = b.broadcast(v, [bound, ...rest], map);
  return b.setDimensionSize(full, b.getDimensionSize(like, 0), 0);
}

/** Several actual sizes in [0, bound] for one dynamic dim. */
const sizes = (bound: number) =>
  fc.array(fc.integer({ min: 0, max: bound }), { minLength: 1, maxLength: 4 });

describe("js backend: bounded dynamic dims", () => {
  it("a masked mean (reduce over a dynamic dim / get-dimension-size), as in the corpus", () => {
    const entry = CORPUS["dynamic_mean"]!;
    const m = entry.build();
    const arb = sizes(16).chain((ns) => fc.tuple(...ns.map((n) => arbF32([2, n, 8]))));
    fc.assert(fc.property(arb, (xs) => checkAll(m, xs.map((x) => [x]))), RUNS);
  });

  it("elementwise, broadcast and reductions over a dynamic row dim", () => {
    const mb = new ModuleBuilder("dyn_rows");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=6", 5]), "x");
      const w = b.parameter(arrayShape("f32", [5]), "w");
      const y = b.tanh(b.multiply(x, rowsLike(b, w, x, 6, [5], [1])));
      const colSum = b.reduce(y, b.scalar("f32", 0), [0], mb.reducer("add", "f32"));
      const rowMax = b.reduce(y, b.scalar("f32", -Infinity), [1], mb.reducer("max", "f32"));
      const n = b.convert(b.getDimensionSize(x, 0), "f32");
      return b.tuple([b.divide(colSum, b.broadcast(n, [5], [])), rowMax, y]);
    });
    const m = mb.build();
    const arb = sizes(6).chain((ns) =>
      fc.tuple(fc.tuple(...ns.map((n) => arbF32([n, 5]))), arbF32([5])),
    );
    fc.assert(fc.property(arb, ([xs, w]) => checkAll(m, xs.map((x) => [x, w]))), RUNS);
  });

  it("reshapes through a dynamic dim, full slices, pad and concatenate", () => {
    const mb = new ModuleBuilder("dyn_movement");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=8", 4]), "x");
      const flat = b.reshape(x, ["<=32"]);
      const back = b.reshape(b.negate(flat), ["<=8", 4]);
      const full = b.slice(back, [0, 1], [8, 4], [1, 1]);
      const padded = b.pad(full, b.scalar("f32", 7), [
        [1, 0, 0],
        [0, 1, 1],
      ]);
      const both = b.concatenate([x, b.transpose(b.reverse(x, [0, 1]), [0, 1])], 0);
      return b.tuple([padded, both, b.reshape(x, ["<=8", 2, 2])]);
    });
    const m = mb.build();
    const arb = sizes(8).chain((ns) => fc.tuple(...ns.map((n) => arbF32([n, 4]))));
    fc.assert(fc.property(arb, (xs) => checkAll(m, xs.map((x) => [x]))), RUNS);
  });

  it("a dot with a dynamic row dim, inside a kOutput fusion with a bias epilogue", () => {
    const mb = new ModuleBuilder("dyn_linear");
    const fused = mb.computation("fused_linear", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=7", 5]));
      const w = b.parameter(arrayShape("f32", [5, 3]));
      const bias = b.parameter(arrayShape("f32", [3]));
      const d = b.dot(x, w, { lhsContracting: [1], rhsContracting: [0] });
      const h = b.add(d, rowsLike(b, bias, d, 7, [3], [1]));
      return b.maximum(h, rowsLike(b, b.scalar("f32", 0), d, 7, [3], []));
    });
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=7", 5]));
      const w = b.parameter(arrayShape("f32", [5, 3]));
      const bias = b.parameter(arrayShape("f32", [3]));
      return b.fusion([x, w, bias], fused, "kOutput");
    });
    const m = mb.build();
    const arb = sizes(7).chain((ns) =>
      fc.tuple(fc.tuple(...ns.map((n) => arbF32([n, 5]))), arbF32([5, 3]), arbF32([3])),
    );
    fc.assert(fc.property(arb, ([xs, w, bias]) => checkAll(m, xs.map((x) => [x, w, bias]))),
      RUNS);
  });

  it("set-dimension-size to another argument's actual size, and a loop over dynamic state", () => {
    const mb = new ModuleBuilder("dyn_sds");
    const state = tupleShape([scalarShape("s32"), arrayShape("f32", ["<=6"])]);
    const cond = mb.computation("cond", (b) => {
      const s = b.parameter(state);
      return b.compare(b.getTupleElement(s, 0), b.scalar("s32", 3), "LT");
    });
    const body = mb.computation("body", (b) => {
      const s = b.parameter(state);
      const v = b.getTupleElement(s, 1);
      return b.tuple([
        b.add(b.getTupleElement(s, 0), b.scalar("s32", 1)),
        b.add(b.multiply(v, v), rowsLike(b, b.scalar("f32", 0.5), v, 6, [], [])),
      ]);
    });
    mb.entry("main", (b) => {
      const y = b.parameter(arrayShape("f32", [6]), "y");
      const len = b.parameter(arrayShape("s32", ["<=6"]), "len");
      const cut = b.setDimensionSize(y, b.getDimensionSize(len, 0), 0);
      return b.while(b.tuple([b.scalar("s32", 0), cut]), cond, body);
    });
    const m = mb.build();
    const arb = fc.tuple(arbF32([6]), sizes(6));
    fc.assert(
      fc.property(arb, ([y, ns]) =>
        checkAll(m, ns.map((n) => [y, literal("s32", [n], new Array<number>(n).fill(1))])),
      ),
      RUNS,
    );
  });

  it("sort, dynamic-slice, dynamic-update-slice, reduce-window and gather on dynamic dims", () => {
    const mb = new ModuleBuilder("dyn_indexing");
    const lt = mb.computation("lt", (b) =>
      b.compare(b.parameter(scalarShape("f32")), b.parameter(scalarShape("f32")), "LT"),
    );
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", ["<=9"]), "x");
      const ids = b.parameter(arrayShape("s32", ["<=4"]), "ids");
      const i0 = b.scalar("s32", 2);
      const sorted = b.sort(x, 0, lt);
      const window = b.reduceWindow(x, b.scalar("f32", -Infinity), [{ size: 2, stride: 1,
        padLow: 1 }], mb.reducer("max", "f32"));
      const updated = b.dynamicUpdateSlice(x, b.broadcast(b.scalar("f32", 9), [1], []), [i0]);
      const table = b.reshape(b.iota(arrayShape("f32", [12]), 0), [4, 3]);
      const rows = b.gather(
        table,
        ids,
        { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0], indexVectorDim: 1 },
        [1, 3],
      );
      return b.tuple([sorted, window, updated, rows, b.dynamicSlice(table, [i0, i0], [2, 1])]);
    });
    const m = mb.build();
    const arb = fc
      .tuple(sizes(9), fc.integer({ min: 1, max: 4 }))
      .chain(([ns, k]) =>
        fc.tuple(
          fc.tuple(...ns.map((n) => arbF32([Math.max(n, 1)]))),
          fc.array(fc.integer({ min: -1, max: 5 }), { minLength: k, maxLength: k }),
        ),
      );
    fc.assert(
      fc.property(arb, ([xs, ids]) =>
        checkAll(m, xs.map((x) => [x, literal("s32", [ids.length], ids)])),
      ),
      RUNS,
    );
  });

  it("arguments above their bound are rejected, naming the parameter", () => {
    const mb = new ModuleBuilder("bound");
    mb.entry("main", (b) => b.exp(b.parameter(arrayShape("f32", ["<=4", 2]), "x")));
    const exe = jsBackend.compile(mb.build());
    expect(() => exe.run([literal("f32", [5, 2], new Array<number>(10).fill(0))])).toThrow(
      /argument 0 .*'%x'.*above its bound/,
    );
  });

  it("a loop whose body changes the actual dims of its state is rejected, naming it", () => {
    const mb = new ModuleBuilder("shrinking");
    const st = arrayShape("f32", ["<=8"]);
    const cond = mb.computation("cond", (b) =>
      b.compare(b.getDimensionSize(b.parameter(st), 0), b.scalar("s32", 2), "GT"),
    );
    const body = mb.computation("body", (b) =>
      b.setDimensionSize(b.parameter(st), b.scalar("s32", 2), 0),
    );
    mb.entry("main", (b) => b.while(b.parameter(st, "x"), cond, body));
    const m = mb.build();
    const loop = m.entry.root;
    const exe = jsBackend.compile(m);
    const x = literal("f32", [5], [1, 2, 3, 4, 5]);
    expect(() => exe.run([x])).toThrow(UnsupportedError);
    expect(() => exe.run([x])).toThrow(`%${loop.name} (while)`);
    // The evaluator runs it (the state shrinks to 2 elements).
    expect((evaluate(m, [x]) as Literal).dims).toEqual([2]);
  });

  it("exposes the source of the specialization it ran last", () => {
    const mb = new ModuleBuilder("dyn_source");
    mb.entry("main", (b) => b.exp(b.parameter(arrayShape("f32", ["<=4"]), "x")));
    const exe = jsBackend.compile(mb.build()) as { source: string } & ReturnType<
      typeof jsBackend.compile
    >;
    exe.run([literal("f32", [3], [1, 2, 3])]);
    expect(exe.source).toContain("specialized for argument shapes (f32[3])");
    expect(exe.source).toContain("Math.exp");
  });
});
