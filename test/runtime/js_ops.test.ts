// Differential tests of the `js` backend, one per opcode (the table below is typed over every
// Opcode, so a new opcode without a case does not compile, and a test checks the keys against
// OPCODES): random shapes (zero-sized dims included), every element type the opcode allows,
// values with NaN, ±inf, -0 and integer corner values, random attributes. Every result must be
// BIT-IDENTICAL to the reference evaluator's (dot and convolution included: the js kernels
// accumulate in double in the evaluator's order). Opcodes the backend rejects must throw
// UnsupportedError naming the instruction.

import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import type { ComparisonDirection, WindowDim } from "../../ir/attributes.ts";
import { type ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { literal, type Literal, literalsIdentical, type ScalarValue } from "../../ir/literal.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { OPCODES, type Opcode } from "../../ir/opcodes.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape, type ElementType, scalarShape, tupleShape } from "../../ir/shape.ts";
import { UnsupportedError } from "../../runtime/backend.ts";
import { jsBackend, type JsExecutable, jsSource } from "../../runtime/js/backend.ts";
import { setLogTopics } from "../../util/log.ts";

const RUNS = { numRuns: 100 };

interface Case {
  module: Module;
  inputs: EvalValue[];
}

// ---- checking --------------------------------------------------------------------------------

function describeValue(v: EvalValue): string {
  return Array.isArray(v) ? `(${v.map(describeValue).join(", ")})` : v.toString();
}

function identical(a: EvalValue, b: EvalValue): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((x, i) => identical(x, b[i]!))
    );
  }
  return literalsIdentical(a, b);
}

/** Runs a case on js and on the evaluator; fails with both results and the module text. */
function check(c: Case): void {
  const want = evaluate(c.module, c.inputs);
  const exe = jsBackend.compile(c.module) as JsExecutable;
  const got = exe.run(c.inputs);
  if (!identical(got, want)) {
    throw new Error(
      `js differs from the evaluator\n${printHlo(c.module)}\ninputs: ` +
        `${c.inputs.map(describeValue).join("; ")}\nevaluator: ${describeValue(want)}\n` +
        `js: ${describeValue(got)}\n${exe.source}`,
    );
  }
}

// ---- arbitraries -----------------------------------------------------------------------------

const FLOATS: ElementType[] = ["f32", "f16", "bf16"];
const INTS: ElementType[] = ["s32", "s64", "u8"];
const ALL: ElementType[] = [...FLOATS, ...INTS, "pred"];
const SIGNED: ElementType[] = [...FLOATS, "s32", "s64"];
const NUMERIC: ElementType[] = [...FLOATS, ...INTS];
const INT_OR_PRED: ElementType[] = [...INTS, "pred"];

const S32_MIN = -2147483648;
const S64_MIN = -(2n ** 63n);
const S64_MAX = 2n ** 63n - 1n;

/** Zeros, NaN, infinities, an f16-overflowing value, an f32 near its max. */
const FLOAT_CORNERS = [0, -0, NaN, Infinity, -Infinity, 1, -1, 0.5, -2.5, 65520, 3e38];

/** One stored value of type t, corner values weighted up. */
function elem(t: ElementType): fc.Arbitrary<ScalarValue> {
  switch (t) {
    case "f32":
    case "f16":
    case "bf16":
      return fc.oneof(
        { weight: 4, arbitrary: fc.double({ min: -10, max: 10, noNaN: true }) },
        { weight: 2, arbitrary: fc.float() },
        {
          weight: 2,
          arbitrary: fc.constantFrom(...FLOAT_CORNERS),
        },
        { weight: 1, arbitrary: fc.integer({ min: -9, max: 9 }) },
      );
    case "s32":
      return fc.oneof(
        fc.integer(),
        fc.integer({ min: -40, max: 40 }),
        fc.constantFrom(S32_MIN, 2147483647, 0, -1, 31, 32),
      );
    case "s64":
      return fc.oneof(
        fc.bigInt({ min: S64_MIN, max: S64_MAX }),
        fc.bigInt({ min: -70n, max: 70n }),
        fc.constantFrom(S64_MIN, S64_MAX, 0n, -1n, 63n, 64n),
      );
    case "u8":
      return fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0, 1, 7, 8, 128, 255));
    case "pred":
      return fc.boolean();
    default: {
      const never: never = t;
      throw new Error(`unknown type ${String(never)}`);
    }
  }
}

const count = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);

function arbLit(t: ElementType, dims: readonly number[]): fc.Arbitrary<Literal> {
  const n = count(dims);
  return fc.array(elem(t), { minLength: n, maxLength: n }).map((vs) => literal(t, dims, vs));
}

const arbDim = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 1, max: 4 }) },
  { weight: 1, arbitrary: fc.constant(0) },
);

const arbDims = (minRank = 0, maxRank = 3) =>
  fc.array(arbDim, { minLength: minRank, maxLength: maxRank });

const posDims = (minRank = 0, maxRank = 3) =>
  fc.array(fc.integer({ min: 1, max: 4 }), { minLength: minRank, maxLength: maxRank });

/**
 * A module with parameters of the given literals' shapes and a root made by `body`. With
 * `fused`, the body is a kLoop fusion whose root also multiplies the result by 3 (xor true for
 * pred), so an intermediate that is not rounded to its type shows.
 */
function moduleOf(
  name: string,
  inputs: readonly EvalValue[],
  body: (b: ComputationBuilder, ps: Instruction[], mb: ModuleBuilder) => Instruction,
  fused = false,
): Case {
  const mb = new ModuleBuilder(name);
  const shapes = inputs.map(shapeOfValue);
  if (!fused) {
    mb.entry("main", (b) => body(b, shapes.map((s) => b.parameter(s)), mb));
    return { module: mb.build(), inputs: [...inputs] };
  }
  const comp = mb.computation("fused", (b) => {
    const r = body(b, shapes.map((s) => b.parameter(s)), mb);
    const s = r.shape;
    if (s.kind !== "array") return r;
    const k = b.broadcast(b.scalar(s.type, s.type === "pred" ? true : 3), s.dims, []);
    return s.type === "pred" ? b.xor(r, k) : b.multiply(r, k);
  });
  mb.entry("main", (b) => b.fusion(shapes.map((s) => b.parameter(s)), comp, "kLoop"));
  return { module: mb.build(), inputs: [...inputs] };
}

function shapeOfValue(v: EvalValue): ReturnType<typeof tupleShape> | ReturnType<typeof arrayShape> {
  return Array.isArray(v) ? tupleShape(v.map(shapeOfValue)) : arrayShape(v.type, v.dims);
}

/** Whether a case runs as a standalone instruction or inside a kLoop fusion. */
const arbFused = fc.boolean();

function unary(op: Opcode, types: ElementType[]): fc.Arbitrary<Case> {
  return fc
    .tuple(fc.constantFrom(...types).chain((t) => arbDims().chain((d) => arbLit(t, d))), arbFused)
    .map(([x, f]) => moduleOf(op, [x], (b, [p]) => b.op(op, [p!]), f));
}

function binary(op: Opcode, types: ElementType[]): fc.Arbitrary<Case> {
  return fc
    .tuple(
      fc
        .constantFrom(...types)
        .chain((t) => arbDims().chain((d) => fc.tuple(arbLit(t, d), arbLit(t, d)))),
      arbFused,
    )
    .map(([[x, y], f]) => moduleOf(op, [x, y], (b, [p, q]) => b.op(op, [p!, q!]), f));
}

const perm = (n: number) =>
  fc.shuffledSubarray(
    Array.from({ length: n }, (_, i) => i),
    { minLength: n, maxLength: n },
  );

// ---- cases per opcode ------------------------------------------------------------------------

const compareCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom(...ALL),
    dir: fc.constantFrom<ComparisonDirection>("EQ", "NE", "LT", "LE", "GT", "GE"),
    total: fc.boolean(),
    dims: arbDims(),
    fused: arbFused,
  })
  .chain((r) => fc.tuple(fc.constant(r), arbLit(r.t, r.dims), arbLit(r.t, r.dims)))
  .map(([r, x, y]) =>
    moduleOf("compare", [x, y], (b, [p, q]) => {
      const float = FLOATS.includes(r.t);
      return b.compare(p!, q!, r.dir, float && r.total ? "TOTALORDER" : undefined);
    }, r.fused),
  );

const selectCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(), scalarPred: fc.boolean(), f: arbFused })
  .chain((r) =>
    fc.tuple(
      fc.constant(r.f),
      fc.tuple(
        arbLit("pred", r.scalarPred ? [] : r.dims),
        arbLit(r.t, r.dims),
        arbLit(r.t, r.dims),
      ),
    ),
  )
  .map(([f, xs]) => moduleOf("select", xs, (b, [p, x, y]) => b.select(p!, x!, y!), f));

const clampCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom(...ALL),
    dims: arbDims(),
    scalarLo: fc.boolean(),
    scalarHi: fc.boolean(),
    f: arbFused,
  })
  .chain((r) =>
    fc.tuple(
      fc.constant(r.f),
      fc.tuple(
        arbLit(r.t, r.scalarLo ? [] : r.dims),
        arbLit(r.t, r.dims),
        arbLit(r.t, r.scalarHi ? [] : r.dims),
      ),
    ),
  )
  .map(([f, xs]) => moduleOf("clamp", xs, (b, [l, x, h]) => b.clamp(l!, x!, h!), f));

const convertCase: fc.Arbitrary<Case> = fc
  .record({
    from: fc.constantFrom(...ALL),
    to: fc.constantFrom(...ALL),
    dims: arbDims(),
    f: arbFused,
  })
  .chain((r) => arbLit(r.from, r.dims).map((x) => [r, x] as const))
  .map(([r, x]) => moduleOf("convert", [x], (b, [p]) => b.convert(p!, r.to), r.f));

const BYTES: Partial<Record<ElementType, number>> = {
  f32: 4,
  f16: 2,
  bf16: 2,
  s32: 4,
  s64: 8,
  u8: 1,
};
const bitcastCase: fc.Arbitrary<Case> = fc
  .record({
    from: fc.constantFrom<ElementType>("f32", "f16", "bf16", "s32", "s64", "u8"),
    to: fc.constantFrom<ElementType>("f32", "f16", "bf16", "s32", "s64", "u8"),
    dims: posDims(0, 2),
  })
  .chain((r) => {
    const wi = BYTES[r.from]!;
    const wo = BYTES[r.to]!;
    const dims = wi < wo ? [...r.dims, wo / wi] : r.dims;
    return arbLit(r.from, dims).map((x) => [r.to, x] as const);
  })
  .map(([to, x]) => moduleOf("bitcast", [x], (b, [p]) => b.bitcastConvert(p!, to)));

const iotaCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(1, 3), d: fc.nat(), f: arbFused })
  .map((r) =>
    moduleOf("iota", [], (b) => b.iota(arrayShape(r.t, r.dims), r.d % r.dims.length), r.f),
  );

const broadcastCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), out: arbDims(0, 4), f: arbFused })
  .chain((r) =>
    fc.subarray(r.out.map((_, i) => i)).chain((keep) =>
      arbLit(r.t, keep.map((i) => r.out[i]!)).map((x) => ({ r, keep, x })),
    ),
  )
  .map(({ r, keep, x }) =>
    moduleOf("broadcast", [x], (b, [p]) => b.broadcast(p!, r.out, keep), r.f),
  );

/** A random regrouping of `dims` into another shape with the same element count. */
function arbReshape(dims: readonly number[]): fc.Arbitrary<number[]> {
  const primes: number[] = [];
  for (let d of dims) {
    for (let f = 2; d > 1; f++) {
      while (d % f === 0) {
        primes.push(f);
        d /= f;
      }
    }
  }
  return fc
    .tuple(fc.shuffledSubarray(primes, { minLength: primes.length, maxLength: primes.length }),
      fc.array(fc.nat({ max: 3 }), { minLength: primes.length, maxLength: primes.length }),
      fc.integer({ min: 0, max: 2 }))
    .map(([ps, cuts, ones]) => {
      const out: number[] = [];
      let cur = 1;
      ps.forEach((p, i) => {
        cur *= p;
        if (cuts[i] === 0 || i === ps.length - 1) {
          out.push(cur);
          cur = 1;
        }
      });
      for (let k = 0; k < ones; k++) out.splice(k % (out.length + 1), 0, 1);
      return count(dims) === 0 ? [...out, 0] : out;
    });
}

const reshapeCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(0, 4), f: arbFused })
  .chain((r) => fc.tuple(fc.constant(r.f), arbLit(r.t, r.dims), arbReshape(r.dims)))
  .map(([f, x, to]) =>
    moduleOf("reshape", [x], (b, [p]) => b.negate(b.reshape(b.convert(p!, "f32"), to)), f),
  );

const transposeCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(0, 4), f: arbFused })
  .chain((r) => fc.tuple(fc.constant(r.f), arbLit(r.t, r.dims), perm(r.dims.length)))
  .map(([f, x, p]) => moduleOf("transpose", [x], (b, [q]) => b.transpose(q!, p), f));

const sliceCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(0, 3), f: arbFused })
  .chain((r) =>
    fc.tuple(
      fc.constant(r.f),
      arbLit(r.t, r.dims),
      fc.tuple(
        ...r.dims.map((d) =>
          fc
            .tuple(fc.nat({ max: d }), fc.nat({ max: d }), fc.integer({ min: 1, max: 3 }))
            .map(([a, c, s]) => ({ start: Math.min(a, c), limit: Math.max(a, c), stride: s })),
        ),
      ),
    ),
  )
  .map(([f, x, sl]) =>
    moduleOf(
      "slice",
      [x],
      (b, [p]) =>
        b.slice(
          p!,
          sl.map((s) => s.start),
          sl.map((s) => s.limit),
          sl.map((s) => s.stride),
        ),
      f,
    ),
  );

const startIndex = (t: "s32" | "s64") =>
  fc.integer({ min: -3, max: 6 }).map((v) => literal(t, [], [t === "s64" ? BigInt(v) : v]));

const dynamicSliceCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom(...ALL),
    dims: arbDims(1, 3),
    it: fc.constantFrom<"s32" | "s64">("s32", "s64"),
    f: arbFused,
  })
  .chain((r) =>
    fc.tuple(
      fc.constant(r.f),
      arbLit(r.t, r.dims),
      fc.tuple(...r.dims.map((d) => fc.nat({ max: d }))),
      fc.tuple(...r.dims.map(() => startIndex(r.it))),
    ),
  )
  .map(([f, x, sizes, starts]) =>
    moduleOf("dynamic_slice", [x, ...starts], (b, [p, ...ss]) => b.dynamicSlice(p!, ss, sizes), f),
  );

const dynamicUpdateSliceCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(1, 3) })
  .chain((r) =>
    fc
      .tuple(...r.dims.map((d) => fc.nat({ max: d })))
      .chain((ud) =>
        fc.tuple(
          arbLit(r.t, r.dims),
          arbLit(r.t, ud),
          fc.tuple(...r.dims.map(() => startIndex("s32"))),
        ),
      ),
  )
  .map(([x, u, starts]) =>
    moduleOf("dus", [x, u, ...starts], (b, [p, q, ...ss]) => b.dynamicUpdateSlice(p!, q!, ss)),
  );

const concatenateCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom(...ALL),
    dims: arbDims(1, 3),
    d: fc.nat(),
    n: fc.integer({ min: 1, max: 3 }),
    f: arbFused,
  })
  .chain((r) => {
    const d = r.d % r.dims.length;
    return fc
      .array(arbDim, { minLength: r.n, maxLength: r.n })
      .chain((sizes) =>
        fc.tuple(...sizes.map((s) => arbLit(r.t, r.dims.map((x, k) => (k === d ? s : x))))),
      )
      .map((xs) => ({ d, xs, f: r.f }));
  })
  .map(({ d, xs, f }) => moduleOf("concatenate", xs, (b, ps) => b.concatenate(ps, d), f));

const padCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(0, 3), f: arbFused })
  .chain((r) =>
    fc.tuple(
      arbLit(r.t, r.dims),
      arbLit(r.t, []),
      fc.constant(r.f),
      fc.tuple(
        ...r.dims.map((d) =>
          fc.tuple(
            fc.integer({ min: -Math.min(d, 2), max: 2 }),
            fc.integer({ min: -Math.min(d, 2), max: 2 }),
            fc.integer({ min: 0, max: 2 }),
          ),
        ),
      ),
    ),
  )
  .filter(([x, , , pads]) =>
    pads.every(([lo, hi, ip], k) => {
      const n = x.dims[k]!;
      return n + lo + hi + Math.max(n - 1, 0) * ip >= 0;
    }),
  )
  .map(([x, v, f, pads]) =>
    moduleOf("pad", [x, v], (b, [p, q]) => b.pad(p!, q!, pads.map(([l, h, i]) => [l, h, i])), f),
  );

const reverseCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(0, 4), f: arbFused })
  .chain((r) =>
    fc.tuple(fc.constant(r.f), arbLit(r.t, r.dims), fc.subarray(r.dims.map((_, i) => i))),
  )
  .map(([f, x, dims]) => moduleOf("reverse", [x], (b, [p]) => b.reverse(p!, dims), f));

/** Random dot_general: batch, contracting and free dims placed at random positions. */
const dotCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom<ElementType>("f32", "f32", "f16", "bf16", "s32", "u8", "s64", "pred"),
    batch: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }),
    contract: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 2 }),
    lfree: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 2 }),
    rfree: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 2 }),
    preferred: fc.boolean(),
  })
  .chain((r) => {
    const nl = r.batch.length + r.contract.length + r.lfree.length;
    const nr = r.batch.length + r.contract.length + r.rfree.length;
    return fc.tuple(fc.constant(r), perm(nl), perm(nr));
  })
  .chain(([r, pl, pr]) => {
    // Position p of an operand holds logical dim pl[p]: batch dims first, then contracting.
    const lay = (p: number[], free: number[]) => {
      const logical = [...r.batch, ...r.contract, ...free];
      const dims = p.map((q) => logical[q]!);
      const where = (q: number) => p.indexOf(q);
      return {
        dims,
        batch: r.batch.map((_, i) => where(i)),
        contract: r.contract.map((_, i) => where(r.batch.length + i)),
      };
    };
    const L = lay(pl, r.lfree);
    const R = lay(pr, r.rfree);
    return fc.tuple(fc.constant({ r, L, R }), arbLit(r.t, L.dims), arbLit(r.t, R.dims));
  })
  .map(([{ r, L, R }, x, y]) =>
    moduleOf("dot", [x, y], (b, [p, q]) => {
      const pref =
        r.preferred && r.t === "bf16" ? "f32" : r.preferred && r.t === "s32" ? "s64" : undefined;
      return b.dot(
        p!,
        q!,
        {
          lhsBatch: L.batch,
          rhsBatch: R.batch,
          lhsContracting: L.contract,
          rhsContracting: R.contract,
        },
        pref,
      );
    }),
  );

/** Random general convolution: 1 or 2 spatial dims, random labels, windows and groups. */
const convolutionCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom<ElementType>("f32", "f32", "f16", "bf16", "s32", "u8", "s64"),
    ns: fc.integer({ min: 1, max: 2 }),
    batch: fc.integer({ min: 1, max: 2 }),
    groups: fc.integer({ min: 1, max: 2 }),
    byBatch: fc.boolean(),
    cin: fc.integer({ min: 1, max: 3 }),
    coutPerGroup: fc.integer({ min: 1, max: 3 }),
  })
  .chain((r) =>
    fc.tuple(
      fc.constant(r),
      fc.array(
        fc.record({
          in: fc.integer({ min: 1, max: 6 }),
          size: fc.integer({ min: 1, max: 3 }),
          stride: fc.integer({ min: 1, max: 2 }),
          padLow: fc.integer({ min: -1, max: 2 }),
          padHigh: fc.integer({ min: -1, max: 2 }),
          windowDilation: fc.integer({ min: 1, max: 2 }),
          baseDilation: fc.integer({ min: 1, max: 2 }),
          windowReversal: fc.boolean(),
        }),
        { minLength: r.ns, maxLength: r.ns },
      ),
      perm(r.ns + 2),
      perm(r.ns + 2),
      perm(r.ns + 2),
    ),
  )
  .filter(([, win]) =>
    win.every((w) => (w.in - 1) * w.baseDilation + 1 + w.padLow + w.padHigh >= 0),
  )
  .chain(([r, win, pi, pk, po]) => {
    const fgc = r.byBatch ? 1 : r.groups;
    const bgc = r.byBatch ? r.groups : 1;
    const inBatch = r.batch * bgc;
    const inF = r.cin * fgc;
    const outF = r.coutPerGroup * r.groups;
    // Logical order: [batch/in-feature, feature/out-feature, spatial...]; p[k] is its position.
    const place = (p: number[], a: number, b: number, sp: number[]) => {
      const dims = new Array<number>(r.ns + 2);
      dims[p[0]!] = a;
      dims[p[1]!] = b;
      sp.forEach((s, k) => (dims[p[k + 2]!] = s));
      return dims;
    };
    const lhs = place(pi, inBatch, inF, win.map((w) => w.in));
    const rhs = place(pk, r.cin, outF, win.map((w) => w.size));
    const label = (p: number[], a: string, b: string) => {
      const chars = new Array<string>(r.ns + 2);
      chars[p[0]!] = a;
      chars[p[1]!] = b;
      for (let k = 0; k < r.ns; k++) chars[p[k + 2]!] = String(k);
      return chars.join("");
    };
    const labels = `${label(pi, "b", "f")}_${label(pk, "i", "o")}->${label(po, "b", "f")}`;
    return fc.tuple(
      fc.constant({ win, labels, fgc, bgc }),
      arbLit(r.t, lhs),
      arbLit(r.t, rhs),
    );
  })
  .map(([{ win, labels, fgc, bgc }, x, w]) =>
    moduleOf("conv", [x, w], (b, [p, q]) =>
      b.convolution(p!, q!, {
        window: win.map((d) => ({
          size: d.size,
          stride: d.stride,
          padLow: d.padLow,
          padHigh: d.padHigh,
          windowDilation: d.windowDilation,
          baseDilation: d.baseDilation,
          windowReversal: d.windowReversal,
        })),
        dims: labels,
        featureGroupCount: fgc,
        batchGroupCount: bgc,
      }),
    ),
  );

type ReducerSpec = "add" | "max" | "min" | "mul" | "and" | "or" | "custom" | "call" | "first";

function reducerFor(mb: ModuleBuilder, kind: ReducerSpec, t: ElementType): Computation {
  switch (kind) {
    case "custom":
      // Not associative: the fold order must be the evaluator's.
      return mb.computation(mb.module.uniqueComputationName("custom"), (b) => {
        const a = b.parameter(scalarShape(t));
        const x = b.parameter(scalarShape(t));
        return b.subtract(b.multiply(a, b.scalar(t, 2)), x);
      });
    case "call": {
      // A reducer that is not elementwise (it calls another computation): the general path.
      const inner = mb.reducer("add", t);
      return mb.computation(mb.module.uniqueComputationName("calling"), (b) => {
        const a = b.parameter(scalarShape(t));
        const x = b.parameter(scalarShape(t));
        return b.call([a, x], inner);
      });
    }
    case "first":
      return mb.computation(mb.module.uniqueComputationName("first"), (b) => {
        b.parameter(scalarShape(t));
        return b.parameter(scalarShape(t));
      });
    default:
      return mb.reducer(kind, t);
  }
}

function reducerKinds(t: ElementType): ReducerSpec[] {
  if (t === "pred") return ["and", "or", "max", "first", "call"];
  const base: ReducerSpec[] = ["add", "max", "min", "mul", "first", "call"];
  if (t !== "u8") base.push("custom");
  if (INTS.includes(t)) base.push("and", "or");
  return base;
}

const reduceCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom(...ALL), dims: arbDims(0, 4) })
  .chain((r) =>
    fc.tuple(
      fc.constant(r),
      fc.subarray(r.dims.map((_, i) => i)),
      fc.constantFrom(...reducerKinds(r.t)),
      arbLit(r.t, r.dims),
      arbLit(r.t, []),
    ),
  )
  .map(([r, dims, kind, x, init]) =>
    moduleOf("reduce", [x, init], (b, [p, i], mb) =>
      b.reduce(p!, i!, dims, reducerFor(mb, kind, r.t)),
    ),
  );

/** Several reduced dims with an order-sensitive reducer (the fold order must match). */
const reduceManyDimsCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom<ElementType>("f32", "f16", "s32"),
    dims: posDims(2, 4),
    kind: fc.constantFrom<ReducerSpec>("custom", "add", "first"),
  })
  .chain((r) =>
    fc.tuple(
      fc.constant(r),
      fc.subarray(r.dims.map((_, i) => i), { minLength: 2 }),
      arbLit(r.t, r.dims),
      arbLit(r.t, []),
    ),
  )
  .map(([r, dims, x, init]) =>
    moduleOf("reduce_many", [x, init], (b, [p, i], mb) =>
      b.reduce(p!, i!, dims, reducerFor(mb, r.kind, r.t)),
    ),
  );

/** A variadic reduce: argmax over the reduced dims (value, index) with a tuple reducer. */
const argmaxCase: fc.Arbitrary<Case> = fc
  .record({ dims: posDims(1, 3) })
  .chain((r) =>
    fc.tuple(fc.constant(r), fc.subarray(r.dims.map((_, i) => i)), arbLit("f32", r.dims)),
  )
  .map(([r, dims, x]) => {
    const mb = new ModuleBuilder("argmax");
    const f = scalarShape("f32");
    const s = scalarShape("s32");
    const red = mb.computation("argmax_reducer", (b) => {
      const av = b.parameter(f);
      const ai = b.parameter(s);
      const xv = b.parameter(f);
      const xi = b.parameter(s);
      const take = b.or(b.compare(xv, av, "GT"), b.compare(xv, xv, "NE"));
      return b.tuple([b.select(take, xv, av), b.select(take, xi, ai)]);
    });
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", r.dims));
      const idx = b.iota(arrayShape("s32", r.dims), r.dims.length - 1);
      return b.reduce([p, idx], [b.scalar("f32", -Infinity), b.scalar("s32", -1)], dims, red);
    });
    return { module: mb.build(), inputs: [x] };
  });

const reduceWindowCase: fc.Arbitrary<Case> = fc
  .record({ t: fc.constantFrom<ElementType>("f32", "s32", "f16", "pred"), dims: posDims(1, 3) })
  .chain((r) =>
    fc.tuple(
      fc.constant(r),
      fc.tuple(
        ...r.dims.map((d) =>
          fc.record({
            size: fc.integer({ min: 1, max: Math.min(d, 3) }),
            stride: fc.integer({ min: 1, max: 2 }),
            padLow: fc.integer({ min: 0, max: 1 }),
            padHigh: fc.integer({ min: 0, max: 1 }),
            windowDilation: fc.integer({ min: 1, max: 2 }),
            baseDilation: fc.integer({ min: 1, max: 2 }),
          }),
        ),
      ),
      fc.constantFrom<ReducerSpec>("max", "first", "custom"),
      arbLit(r.t, r.dims),
      arbLit(r.t, []),
    ),
  )
  .map(([r, win, kind, x, init]) =>
    moduleOf("reduce_window", [x, init], (b, [p, i], mb) =>
      b.reduceWindow(
        p!,
        i!,
        win as Partial<WindowDim>[],
        reducerFor(mb, r.t === "pred" && kind === "custom" ? "or" : kind, r.t),
      ),
    ),
  );

/** Gather families: an embedding lookup, 2-d start vectors, and batching dims. */
const gatherCase: fc.Arbitrary<Case> = fc.oneof(
  fc
    .record({
      rows: fc.integer({ min: 1, max: 6 }),
      cols: fc.integer({ min: 1, max: 4 }),
      n: fc.integer({ min: 0, max: 4 }),
    })
    .chain((r) =>
      fc.tuple(
        fc.constant(r),
        arbLit("f32", [r.rows, r.cols]),
        fc.array(fc.integer({ min: -2, max: r.rows + 1 }), { minLength: r.n, maxLength: r.n }),
      ),
    )
    .map(([r, table, ids]) =>
      moduleOf("embedding", [table, literal("s32", [ids.length], ids)], (b, [t, i]) =>
        b.gather(
          t!,
          i!,
          { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0], indexVectorDim: 1 },
          [1, r.cols],
        ),
      ),
    ),
  fc
    .record({ dims: posDims(3, 3), n: fc.integer({ min: 1, max: 3 }) })
    .chain((r) =>
      fc.tuple(
        fc.constant(r),
        arbLit("s32", r.dims),
        fc.array(fc.integer({ min: -1, max: 4 }), { minLength: 2 * r.n, maxLength: 2 * r.n }),
        fc.tuple(fc.integer({ min: 1, max: r.dims[0]! }), fc.integer({ min: 1, max: r.dims[2]! })),
      ),
    )
    .map(([r, x, idx, [s0, s2]]) =>
      moduleOf("gather2", [x, literal("s64", [2, r.n], idx.map(BigInt))], (b, [p, i]) =>
        // Index vectors along dim 0 of the indices; start_index_map {2, 0}.
        b.gather(
          p!,
          i!,
          { offsetDims: [0, 2], collapsedSliceDims: [1], startIndexMap: [2, 0], indexVectorDim: 0 },
          [s0, 1, s2],
        ),
      ),
    ),
  fc
    .record({
      batch: fc.integer({ min: 1, max: 3 }),
      len: fc.integer({ min: 1, max: 5 }),
      k: fc.integer({ min: 1, max: 3 }),
    })
    .chain((r) =>
      fc.tuple(
        fc.constant(r),
        arbLit("f32", [r.batch, r.len]),
        fc.array(fc.integer({ min: 0, max: r.len - 1 }), {
          minLength: r.batch * r.k,
          maxLength: r.batch * r.k,
        }),
      ),
    )
    .map(([r, x, idx]) =>
      moduleOf("gather_batched", [x, literal("s32", [r.batch, r.k, 1], idx)], (b, [p, i]) =>
        b.gather(
          p!,
          i!,
          {
            offsetDims: [],
            collapsedSliceDims: [1],
            startIndexMap: [1],
            indexVectorDim: 2,
            operandBatchingDims: [0],
            startIndicesBatchingDims: [0],
          },
          [1, 1],
        ),
      ),
    ),
);

/** Scatter families: row updates with inserted window dims, scalar updates, two operands. */
const scatterCase: fc.Arbitrary<Case> = fc.oneof(
  fc
    .record({
      rows: fc.integer({ min: 1, max: 5 }),
      cols: fc.integer({ min: 1, max: 3 }),
      n: fc.integer({ min: 0, max: 4 }),
      kind: fc.constantFrom<ReducerSpec>("add", "max", "first", "custom", "call"),
      t: fc.constantFrom<ElementType>("f32", "s32", "s64", "bf16"),
    })
    .chain((r) =>
      fc.tuple(
        fc.constant(r),
        arbLit(r.t, [r.rows, r.cols]),
        fc.array(fc.integer({ min: -1, max: r.rows }), { minLength: r.n, maxLength: r.n }),
        arbLit(r.t, [r.n, r.cols]),
      ),
    )
    .map(([r, x, ids, u]) =>
      moduleOf("scatter_rows", [x, literal("s32", [ids.length], ids), u], (b, [p, i, q], mb) =>
        b.scatter(
          p!,
          i!,
          q!,
          {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
          },
          reducerFor(mb, r.kind, r.t),
        ),
      ),
    ),
  fc
    .record({
      dims: posDims(2, 2),
      n: fc.integer({ min: 1, max: 4 }),
      w: fc.integer({ min: 1, max: 2 }),
    })
    .chain((r) =>
      fc.tuple(
        fc.constant(r),
        arbLit("s64", r.dims),
        fc.array(fc.integer({ min: -1, max: 4 }), { minLength: 2 * r.n, maxLength: 2 * r.n }),
        arbLit("s64", [r.n, Math.min(r.w, r.dims[1]!)]),
      ),
    )
    .map(([r, x, idx, u]) =>
      moduleOf("scatter_window", [x, literal("s32", [r.n, 2], idx), u], (b, [p, i, q], mb) =>
        b.scatter(
          p!,
          i!,
          q!,
          {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0, 1],
            indexVectorDim: 1,
          },
          reducerFor(mb, "add", "s64"),
        ),
      ),
    ),
  fc
    .record({ len: fc.integer({ min: 1, max: 5 }), n: fc.integer({ min: 0, max: 4 }) })
    .chain((r) =>
      fc.tuple(
        fc.constant(r),
        arbLit("f32", [r.len]),
        arbLit("s32", [r.len]),
        fc.array(fc.integer({ min: -1, max: r.len }), { minLength: r.n, maxLength: r.n }),
        arbLit("f32", [r.n]),
        arbLit("s32", [r.n]),
      ),
    )
    .map(([, x, y, ids, u, v]) => {
      const mb = new ModuleBuilder("scatter_pair");
      const comb = mb.computation("keep_max", (b) => {
        const a = b.parameter(scalarShape("f32"));
        const ai = b.parameter(scalarShape("s32"));
        const c = b.parameter(scalarShape("f32"));
        const ci = b.parameter(scalarShape("s32"));
        const take = b.compare(c, a, "GT");
        return b.tuple([b.select(take, c, a), b.select(take, ci, ai)]);
      });
      const idx = literal("s32", [ids.length, 1], ids);
      const inputs = [x, y, idx, u, v];
      mb.entry("main", (b) => {
        const ps = inputs.map((l) => b.parameter(arrayShape(l.type, l.dims)));
        return b.scatter(
          [ps[0]!, ps[1]!],
          ps[2]!,
          [ps[3]!, ps[4]!],
          {
            updateWindowDims: [],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
          },
          comb,
        );
      });
      return { module: mb.build(), inputs };
    }),
);

/** Sort: one or two operands, LT/GT/TOTALORDER comparators, a two-key comparator. */
const sortCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom<ElementType>("f32", "s32", "s64", "u8", "f16", "pred"),
    dims: arbDims(1, 3),
    d: fc.nat(),
    cmp: fc.constantFrom("LT", "GT", "TOTAL", "twokey", "general"),
    stable: fc.boolean(),
  })
  .chain((r) => fc.tuple(fc.constant(r), arbLit(r.t, r.dims), arbLit("s32", r.dims)))
  .map(([r, x, y]) => {
    const mb = new ModuleBuilder("sort");
    const t = r.t;
    const st = scalarShape(t);
    const si = scalarShape("s32");
    const comparator = mb.computation("cmp", (b) => {
      const a = b.parameter(st);
      const c = b.parameter(st);
      const ai = b.parameter(si);
      const ci = b.parameter(si);
      const float = FLOATS.includes(t);
      switch (r.cmp) {
        case "LT":
          return b.compare(a, c, "LT");
        case "GT":
          return b.compare(a, c, "GT");
        case "TOTAL":
          return float ? b.compare(a, c, "LT", "TOTALORDER") : b.compare(ai, ci, "GE");
        case "twokey":
          return b.or(
            b.compare(a, c, "LT"),
            b.and(b.compare(a, c, "EQ"), b.compare(ai, ci, "GT")),
          );
        default: {
          const inner = mb.computation("inner_lt", (bb) => {
            const u = bb.parameter(si);
            const v = bb.parameter(si);
            return bb.compare(u, v, "LT");
          });
          return b.call([ai, ci], inner);
        }
      }
    });
    const d = r.d % r.dims.length;
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape(t, r.dims));
      const q = b.parameter(arrayShape("s32", r.dims));
      return b.sort([p, q], d, comparator, r.stable);
    });
    return { module: mb.build(), inputs: [x, y] };
  });

const tupleCase: fc.Arbitrary<Case> = fc
  .tuple(arbDims().chain((d) => arbLit("f32", d)), arbDims().chain((d) => arbLit("s64", d)))
  .map(([x, y]) =>
    moduleOf("tuple", [x, y], (b, [p, q]) => b.tuple([b.negate(p!), b.tuple([q!, p!])])),
  );

const getTupleElementCase: fc.Arbitrary<Case> = fc
  .tuple(arbDims().chain((d) => arbLit("f32", d)), arbDims().chain((d) => arbLit("u8", d)))
  .map(([x, y]) =>
    moduleOf("gte", [[x, y]], (b, [t]) =>
      b.tuple([b.getTupleElement(t!, 1), b.abs(b.getTupleElement(t!, 0))]),
    ),
  );

const fusionCase: fc.Arbitrary<Case> = fc
  .record({ dims: posDims(1, 3), kind: fc.constantFrom<"kLoop" | "kCustom">("kLoop", "kCustom") })
  .chain((r) => fc.tuple(fc.constant(r), arbLit("f32", r.dims), arbLit("f32", r.dims)))
  .map(([r, x, y]) => {
    const mb = new ModuleBuilder("fusion");
    const s = arrayShape("f32", r.dims);
    const f = mb.computation("fused", (b) => {
      const p = b.parameter(s);
      const q = b.parameter(s);
      return b.tanh(b.multiply(b.add(p, q), p));
    });
    mb.entry("main", (b) => b.fusion([b.parameter(s), b.parameter(s)], f, r.kind));
    return { module: mb.build(), inputs: [x, y] };
  });

const callCase: fc.Arbitrary<Case> = arbDims()
  .chain((d) => fc.tuple(arbLit("s32", d), arbLit("s32", d)))
  .map(([x, y]) => {
    const mb = new ModuleBuilder("call");
    const s = arrayShape("s32", x.dims);
    const f = mb.computation("callee", (b) => {
      const p = b.parameter(s);
      const q = b.parameter(s);
      return b.tuple([b.multiply(p, q), b.subtract(p, q)]);
    });
    mb.entry("main", (b) => {
      const p = b.parameter(s);
      const q = b.parameter(s);
      return b.getTupleElement(b.call([p, q], f), 0);
    });
    return { module: mb.build(), inputs: [x, y] };
  });

const whileCase: fc.Arbitrary<Case> = fc
  .tuple(fc.integer({ min: -2, max: 6 }), arbDims().chain((d) => arbLit("f32", d)))
  .map(([steps, x]) => {
    const mb = new ModuleBuilder("while");
    const st = tupleShape([scalarShape("s32"), arrayShape("f32", x.dims)]);
    const cond = mb.computation("cond", (b) => {
      const s = b.parameter(st);
      return b.compare(b.getTupleElement(s, 0), b.scalar("s32", steps), "LT");
    });
    const body = mb.computation("body", (b) => {
      const s = b.parameter(st);
      const h = b.getTupleElement(s, 1);
      return b.tuple([
        b.add(b.getTupleElement(s, 0), b.scalar("s32", 1)),
        b.sin(b.add(h, h)),
      ]);
    });
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", x.dims));
      return b.while(b.tuple([b.scalar("s32", 0), p]), cond, body);
    });
    return { module: mb.build(), inputs: [x] };
  });

const conditionalCase: fc.Arbitrary<Case> = fc
  .record({ pred: fc.boolean(), sel: fc.integer({ min: -2, max: 4 }), dims: arbDims() })
  .chain((r) => fc.tuple(fc.constant(r), arbLit("f32", r.dims), fc.boolean()))
  .map(([r, x, flag]) => {
    const mb = new ModuleBuilder("conditional");
    const s = arrayShape("f32", r.dims);
    const branches = ["exp", "neg", "abs"].map((k) =>
      mb.computation(`branch_${k}`, (b) => {
        const p = b.parameter(s);
        return k === "exp" ? b.exp(p) : k === "neg" ? b.negate(p) : b.abs(p);
      }),
    );
    const selector = r.pred ? literal("pred", [], [flag]) : literal("s32", [], [r.sel]);
    mb.entry("main", (b) => {
      const sel = b.parameter(arrayShape(selector.type, []));
      const p = b.parameter(s);
      const bs = r.pred ? branches.slice(0, 2) : branches;
      return b.conditional(sel, bs.map(() => p), bs);
    });
    return { module: mb.build(), inputs: [selector, x] };
  });

const getDimensionSizeCase: fc.Arbitrary<Case> = arbDims(1, 3)
  .chain((d) => fc.tuple(arbLit("f32", d), fc.nat({ max: d.length - 1 })))
  .map(([x, d]) =>
    moduleOf("get_dimension_size", [x], (b, [p]) =>
      b.add(b.getDimensionSize(p!, d), b.scalar("s32", 1)),
    ),
  );

/** set-dimension-size to a size known from the shapes: a constant or a get-dimension-size. */
const setDimensionSizeCase: fc.Arbitrary<Case> = fc
  .record({
    t: fc.constantFrom(...ALL),
    dims: arbDims(1, 3),
    d: fc.nat(),
    n: fc.nat(),
    gds: fc.boolean(),
  })
  .chain((r) => {
    const d = r.d % r.dims.length;
    const n = r.n % (r.dims[d]! + 1);
    return fc.tuple(fc.constant({ ...r, d, n }), arbLit(r.t, r.dims), arbLit("s32", [n]));
  })
  .map(([r, x, y]) =>
    moduleOf("set_dimension_size", [x, y], (b, [p, q]) => {
      const size = r.gds ? b.getDimensionSize(q!, 0) : b.scalar("s32", r.n);
      const s = b.setDimensionSize(p!, size, r.d);
      return b.tuple([s, b.getDimensionSize(s, r.d)]);
    }),
  );

const parameterCase: fc.Arbitrary<Case> = fc
  .constantFrom(...ALL)
  .chain((t) => arbDims().chain((d) => arbLit(t, d)))
  .map((x) => moduleOf("parameter", [x], (_b, [p]) => p!));

const constantCase: fc.Arbitrary<Case> = fc
  .constantFrom(...ALL)
  .chain((t) => arbDims().chain((d) => arbLit(t, d)))
  .map((x) => moduleOf("constant", [], (b) => b.constant(x)));

/** Cases that must be rejected at compile time. */
const UNSUPPORTED = "unsupported" as const;

const CASES = {
  parameter: parameterCase,
  constant: constantCase,
  iota: iotaCase,
  abs: unary("abs", SIGNED),
  negate: unary("negate", NUMERIC),
  sign: unary("sign", SIGNED),
  exponential: unary("exponential", FLOATS),
  "exponential-minus-one": unary("exponential-minus-one", FLOATS),
  log: unary("log", FLOATS),
  "log-plus-one": unary("log-plus-one", FLOATS),
  sqrt: unary("sqrt", FLOATS),
  rsqrt: unary("rsqrt", FLOATS),
  cbrt: unary("cbrt", FLOATS),
  tanh: unary("tanh", FLOATS),
  logistic: unary("logistic", FLOATS),
  sine: unary("sine", FLOATS),
  cosine: unary("cosine", FLOATS),
  tan: unary("tan", FLOATS),
  erf: unary("erf", FLOATS),
  floor: unary("floor", FLOATS),
  ceil: unary("ceil", FLOATS),
  "round-nearest-afz": unary("round-nearest-afz", FLOATS),
  "round-nearest-even": unary("round-nearest-even", FLOATS),
  "is-finite": unary("is-finite", FLOATS),
  not: unary("not", INT_OR_PRED),
  copy: unary("copy", ALL),
  convert: convertCase,
  "bitcast-convert": bitcastCase,
  add: binary("add", ALL),
  subtract: binary("subtract", NUMERIC),
  multiply: binary("multiply", ALL),
  divide: binary("divide", NUMERIC),
  remainder: binary("remainder", NUMERIC),
  power: binary("power", NUMERIC),
  maximum: binary("maximum", ALL),
  minimum: binary("minimum", ALL),
  atan2: binary("atan2", FLOATS),
  and: binary("and", INT_OR_PRED),
  or: binary("or", INT_OR_PRED),
  xor: binary("xor", INT_OR_PRED),
  "shift-left": binary("shift-left", INTS),
  "shift-right-arithmetic": binary("shift-right-arithmetic", INTS),
  "shift-right-logical": binary("shift-right-logical", INTS),
  compare: compareCase,
  select: selectCase,
  clamp: clampCase,
  broadcast: broadcastCase,
  reshape: reshapeCase,
  transpose: transposeCase,
  slice: sliceCase,
  "dynamic-slice": dynamicSliceCase,
  "dynamic-update-slice": dynamicUpdateSliceCase,
  concatenate: concatenateCase,
  pad: padCase,
  reverse: reverseCase,
  dot: dotCase,
  convolution: convolutionCase,
  reduce: fc.oneof(reduceCase, reduceManyDimsCase, argmaxCase),
  "reduce-window": reduceWindowCase,
  gather: gatherCase,
  scatter: scatterCase,
  sort: sortCase,
  tuple: tupleCase,
  "get-tuple-element": getTupleElementCase,
  fusion: fusionCase,
  call: callCase,
  while: whileCase,
  conditional: conditionalCase,
  "get-dimension-size": getDimensionSizeCase,
  "set-dimension-size": setDimensionSizeCase,
  "custom-call": UNSUPPORTED,
} satisfies { [K in Opcode]: fc.Arbitrary<Case> | typeof UNSUPPORTED };

describe("js backend: every opcode is bit-identical to the evaluator", () => {
  it("has a case for every opcode", () => {
    expect(Object.keys(CASES).sort()).toEqual([...OPCODES].sort());
  });

  for (const op of OPCODES) {
    const c = CASES[op];
    if (c === UNSUPPORTED) continue;
    it(op, () => {
      fc.assert(fc.property(c, check), RUNS);
    });
  }
});

describe("js backend: rejected modules", () => {
  it("custom-call throws UnsupportedError naming the instruction", () => {
    const mb = new ModuleBuilder("cc");
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", [3]));
      return b.customCall([p], "my_kernel", arrayShape("f32", [3]));
    });
    const m = mb.build();
    const name = m.entry.root.name;
    let err: unknown;
    try {
      jsBackend.compile(m);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnsupportedError);
    const u = err as UnsupportedError;
    expect(u.instruction).toBe(name);
    expect(u.opcode).toBe("custom-call");
    expect(u.message).toContain(`%${name} (custom-call)`);
    expect(u.message).toContain("my_kernel");
  });

  it("set-dimension-size to a computed size throws UnsupportedError naming it", () => {
    const mb = new ModuleBuilder("sds");
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", [8]), "x");
      const n = b.parameter(scalarShape("s32"), "n");
      return b.negate(b.setDimensionSize(p, n, 0));
    });
    const m = mb.build();
    const sds = m.entry.instructions.find((i) => i.opcode === "set-dimension-size")!;
    expect(() => jsBackend.compile(m)).toThrow(UnsupportedError);
    expect(() => jsBackend.compile(m)).toThrow(`%${sds.name} (set-dimension-size)`);
    expect(() => jsBackend.compile(m)).toThrow(/computed at run time/);
  });

  it("rejects arguments that do not fit the parameters, naming them", () => {
    const mb = new ModuleBuilder("args");
    mb.entry("main", (b) => b.exp(b.parameter(arrayShape("f32", [2]), "x")));
    const exe = jsBackend.compile(mb.build());
    expect(() => exe.run([literal("f32", [3], [1, 2, 3])])).toThrow(/argument 0 .*'%x'/);
    expect(() => exe.run([literal("s32", [2], [1, 2])])).toThrow(/element type s32/);
    expect(() => exe.run([])).toThrow(/takes 1 argument/);
  });
});

describe("js backend: generated source", () => {
  it("is exposed, printed under KILN_LOGS=ir, and safe from names with line breaks", () => {
    const mb = new ModuleBuilder("odd\nname");
    mb.entry("main\u2028entry", (b) => b.exp(b.parameter(arrayShape("f32", [2]), "x\nreturn 1;")));
    const m = mb.build();
    const lines: string[] = [];
    setLogTopics(["ir"]);
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      const exe = jsBackend.compile(m) as JsExecutable;
      expect(exe.source).toContain("Math.exp");
      expect(jsSource(m)).toBe(exe.source);
      expect(lines.join("")).toContain("[kiln:ir] js source of module");
      check({ module: m, inputs: [literal("f32", [2], [0, 1])] });
    } finally {
      setLogTopics(undefined);
      vi.restoreAllMocks();
    }
  });
});

describe("js backend: results never share storage with inputs or constants", () => {
  it("copies a returned parameter, reshape or constant", () => {
    const x = literal("f32", [2, 2], [1, 2, 3, 4]);
    const mb = new ModuleBuilder("alias");
    mb.entry("main", (b) => {
      const p = b.parameter(arrayShape("f32", [2, 2]));
      return b.tuple([p, b.reshape(p, [4]), b.constant(literal("s32", [2], [5, 6]))]);
    });
    const exe = jsBackend.compile(mb.build());
    const out = exe.run([x]) as Literal[];
    (out[0]!.data as Float32Array)[0] = 99;
    (out[1]!.data as Float32Array)[1] = 99;
    (out[2]!.data as Int32Array)[0] = 99;
    expect(Array.from(x.data as Float32Array)).toEqual([1, 2, 3, 4]);
    const again = exe.run([x]) as Literal[];
    expect(Array.from(again[2]!.data as Int32Array)).toEqual([5, 6]);
  });
});
