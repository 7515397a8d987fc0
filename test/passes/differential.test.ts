// Differential tests of the default pipeline: for every corpus module and for random
// elementwise/movement graphs generated from fast-check seeds, evaluate(optimized) must be
// BIT-IDENTICAL to evaluate(original) (same types and dims; elements equal by Object.is, so -0
// differs from +0 and NaN equals NaN) on random inputs full of NaN, ±inf, -0 and integer
// extremes. The pipeline verifies the module after every pass here (verify: true).

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ComputationBuilder, ModuleBuilder, type ReducerKind } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import { ShapeError } from "../../ir/errors.ts";
import { literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape, type ArrayShape, type ElementType } from "../../ir/shape.ts";
import { defaultPipeline } from "../../passes/pipeline.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { compareModules, randomScalar, rng } from "./support.ts";

function optimize(m: Module): { optimized: Module; changed: boolean } {
  const optimized = cloneModule(m);
  const changed = defaultPipeline({ verify: true }).run(optimized);
  return { optimized, changed };
}

describe("corpus modules: optimized ≡ original, bit for bit", () => {
  for (const [name, entry] of Object.entries(CORPUS)) {
    it(name, () => {
      const original = entry.build();
      const { optimized } = optimize(original);
      expect(compareModules(original, optimized, name.length * 31, 3, [entry.inputs()])).toBeNull();
      // The original is untouched (the pipeline ran on a clone).
      expect(printHlo(original)).toBe(printHlo(entry.build()));
    });
  }

  it("the pipeline changes the corpus where it should (merges the shared constants)", () => {
    // layer_norm builds f32[] constant(0) twice; CSE must merge them.
    const { optimized, changed } = optimize(CORPUS.layer_norm!.build());
    expect(changed).toBe(true);
    expect(printHlo(optimized).match(/constant\(0\)/g)).toHaveLength(1);
  });
});

// ---- random graphs ---------------------------------------------------------------------------

const TYPES: ElementType[] = ["f32", "f16", "bf16", "s32", "u8", "s64", "pred"];
const FLOATS: ElementType[] = ["f32", "f16", "bf16"];
/** Values a splat constant takes: identities (often), their lookalikes, absorbing values. */
const SPLATS = [0, -0, 0, -0, 1, 1, -1, 2, NaN, Infinity, -Infinity, 0.5, 255];

interface Gen {
  r: () => number;
  int(n: number): number;
  pick<T>(xs: readonly T[]): T;
}

function gen(seed: number): Gen {
  const r = rng(seed);
  const int = (n: number) => Math.floor(r() * n);
  return { r, int, pick: (xs) => xs[int(xs.length)]! };
}

function shapeOf(i: Instruction): ArrayShape {
  if (i.shape.kind !== "array") throw new Error("expected an array value");
  return i.shape;
}

const count = (dims: readonly number[]) => dims.reduce((a, d) => a * d, 1);

/** `raw` as a value of type t (integers truncate and wrap into range; pred is raw != 0). */
function asValue(t: ElementType, raw: number): number | bigint | boolean {
  if (FLOATS.includes(t)) return raw;
  if (t === "pred") return raw !== 0 && !Number.isNaN(raw);
  const n = Number.isFinite(raw) ? Math.trunc(raw) : 0;
  if (t === "s64") return BigInt(n);
  return t === "u8" ? ((n % 256) + 256) % 256 : n;
}

/** A splat constant of `shape`: a broadcast of a scalar, or a full constant array. */
function splat(b: ComputationBuilder, g: Gen, shape: ArrayShape, raw = g.pick(SPLATS)) {
  const v = asValue(shape.type, raw);
  const n = count(shape.dims);
  if (g.r() < 0.5 || n > 64) return b.broadcast(b.scalar(shape.type, v), [...shape.dims], []);
  return b.constant(literal(shape.type, [...shape.dims], Array.from({ length: n }, () => v)));
}

/** A random small constant array (values from the special-rich input distribution). */
function randomConstant(b: ComputationBuilder, g: Gen, shape: ArrayShape): Instruction {
  const values = Array.from({ length: count(shape.dims) }, () => randomScalar(shape.type, g.r));
  return b.constant(literal(shape.type, [...shape.dims], values));
}

function randomDims(g: Gen): number[] {
  return Array.from({ length: g.int(4) }, () => 1 + g.int(3));
}

function randomPerm(g: Gen, rank: number): number[] {
  const perm = Array.from({ length: rank }, (_, k) => k);
  for (let k = rank - 1; k > 0; k--) {
    const j = g.int(k + 1);
    [perm[k], perm[j]] = [perm[j]!, perm[k]!];
  }
  return perm;
}

/** Dims with the same element count, by flattening, splitting or inserting a size-1 dim. */
function reshapeDims(g: Gen, dims: readonly number[]): number[] {
  const n = count(dims);
  switch (g.int(4)) {
    case 0:
      return [n];
    case 1: {
      const out = [...dims];
      out.splice(g.int(out.length + 1), 0, 1);
      return out;
    }
    case 2:
      return [...dims];
    default: {
      const d = g.pick([1, 2, 3, 4, 6].filter((k) => n % k === 0));
      return [d, n / d];
    }
  }
}

function randomSlice(b: ComputationBuilder, g: Gen, x: Instruction): Instruction {
  const dims = shapeOf(x).dims;
  if (g.r() < 0.2) return b.slice(x, dims.map(() => 0), [...dims]);
  const starts = dims.map((d) => g.int(d + 1));
  const limits = dims.map((d, k) => starts[k]! + g.int(d - starts[k]! + 1));
  return b.slice(x, starts, limits, dims.map(() => 1 + g.int(3)));
}

/** A broadcast adding one dim (of size 1-3) at a random position. */
function widen(b: ComputationBuilder, g: Gen, x: Instruction): Instruction {
  const xs = shapeOf(x);
  const at = g.int(xs.dims.length + 1);
  const dims = [...xs.dims];
  dims.splice(at, 0, 1 + g.int(3));
  return b.broadcast(x, dims, xs.dims.map((_, k) => (k < at ? k : k + 1)));
}

function randomReverse(b: ComputationBuilder, g: Gen, x: Instruction, dims?: number[]) {
  const rank = shapeOf(x).dims.length;
  return b.reverse(x, dims ?? [...Array(rank).keys()].filter(() => g.r() < 0.6));
}

const UNARY = ["negate", "abs", "copy", "sign", "not", "floor", "exponential"] as const;
const BINARY = [
  "add", "add", "subtract", "multiply", "multiply", "divide", "maximum", "minimum", "and", "or",
  "xor",
] as const;
const COMMUTED = ["add", "multiply", "maximum", "minimum", "and", "or", "xor"] as const;
const EDGES: [(typeof BINARY)[number], number][] = [
  ["add", 0], ["add", -0], ["subtract", 0], ["subtract", -0], ["multiply", 1], ["multiply", 0],
  ["divide", 1], ["maximum", -Infinity], ["minimum", Infinity], ["maximum", 0], ["or", 0],
  ["and", 255], ["xor", 0],
];

/** -x for numeric types, not(x) for pred. */
function negation(b: ComputationBuilder, x: Instruction): Instruction {
  return b.op(shapeOf(x).type === "pred" ? "not" : "negate", [x]);
}

/** Reducer inits: the exact identity, or (`lookalike`) a value that only looks like one. */
function reducerInit(kind: ReducerKind, t: ElementType, lookalike: boolean) {
  const float = FLOATS.includes(t);
  const raw: Record<ReducerKind, number> = {
    add: float && !lookalike ? -0 : 0,
    max: float ? (lookalike ? 0 : -Infinity) : t === "s32" ? -2147483648 : 0,
    min: float ? (lookalike ? 0 : Infinity) : t === "s32" ? 2147483647 : 255,
    mul: lookalike ? 2 : 1,
    and: t === "pred" ? 1 : -1,
    or: 0,
  };
  if (t === "s64" && (kind === "max" || kind === "min")) {
    return kind === "max" ? -(2n ** 63n) : 2n ** 63n - 1n;
  }
  if (kind === "and" && t === "u8") return 255;
  return asValue(t, raw[kind]);
}

type Move = (b: ComputationBuilder, g: Gen, x: Instruction, values: Instruction[]) =>
  Instruction | undefined;

/** The random steps, with weights: plain ops, and the chains and patterns the rules target. */
const MOVES: [number, Move][] = [
  [1, (b, g, x) => b.op(g.pick(UNARY), [x])],
  [3, (b, g, x) => {
    const y = splat(b, g, shapeOf(x));
    return g.r() < 0.5 ? b.op(g.pick(BINARY), [x, y]) : b.op(g.pick(BINARY), [y, x]);
  }],
  [1, (b, g, x, values) => b.op(g.pick(BINARY), [x, g.pick(sameShape(x, values))])],
  // x op c for the (op, c) pairs at the edge of the identity rules: x + (±0), x - (±0), x * 1,
  // x * 0, x / 1, max(x, -inf), ... usually on a parameter, where -0 and NaN inputs arrive.
  [3, (b, g, x, values) => {
    const params = values.filter((v) => v.opcode === "parameter");
    const y = g.r() < 0.6 && params.length > 0 ? g.pick(params) : x;
    const [op, c] = g.pick(EDGES);
    const k = splat(b, g, shapeOf(y), c);
    return g.r() < 0.7 ? b.op(op, [y, k]) : b.op(op, [k, y]);
  }],
  // Both operand orders of one op (CSE may merge them only where they commute exactly).
  [1, (b, g, x, values) => {
    // -x (or not x) puts -0 against +0 and NaN against NaN, where non-commuting ops show.
    const y = g.r() < 0.5 ? g.pick(sameShape(x, values)) : negation(b, x);
    const op = g.pick(COMMUTED);
    values.push(b.op(op, [x, y]));
    return b.op(op, [y, x]);
  }],
  // The same op twice on one operand (CSE merges them).
  [1, (b, g, x, values) => {
    const op = g.pick(UNARY);
    values.push(b.op(op, [x]));
    return b.op(op, [x]);
  }],
  [1, (b, g, x) => b.convert(x, g.pick(TYPES))],
  [3, (b, g, x) => b.convert(b.convert(x, g.pick(TYPES)), g.pick(TYPES))],
  [1, (b, g, x) => b.transpose(x, randomPerm(g, shapeOf(x).dims.length))],
  [1, (b, g, x) => {
    const rank = shapeOf(x).dims.length;
    return b.transpose(b.transpose(x, randomPerm(g, rank)), randomPerm(g, rank));
  }],
  [1, (b, g, x) => b.reshape(x, reshapeDims(g, shapeOf(x).dims))],
  [1, (b, g, x) => {
    const once = b.reshape(x, reshapeDims(g, shapeOf(x).dims));
    return b.reshape(once, reshapeDims(g, shapeOf(once).dims));
  }],
  [1, (b, g, x) => widen(b, g, x)],
  [1, (b, g, x) => widen(b, g, widen(b, g, x))],
  [1, (b, g, x) => randomSlice(b, g, x)],
  [2, (b, g, x) => randomSlice(b, g, randomSlice(b, g, x))],
  [1, (b, g, x) => randomReverse(b, g, x)],
  [1, (b, g, x) => {
    const dims = [...shapeOf(x).dims.keys()].filter(() => g.r() < 0.6);
    return randomReverse(b, g, randomReverse(b, g, x, dims), g.r() < 0.7 ? dims : undefined);
  }],
  [1, (b, g, x) => {
    const op = () => g.pick(["negate", "not"] as const);
    return b.op(op(), [b.op(op(), [x])]);
  }],
  [1, (b, g, x) => {
    const xs = shapeOf(x);
    const zero = g.r() < 0.4;
    const pads = xs.dims.map(() =>
      zero ? ([0, 0, 0] as const) : ([g.int(2), g.int(2), g.int(2)] as const),
    );
    return b.pad(x, b.scalar(xs.type, asValue(xs.type, 0)), pads);
  }],
  [1, (b, g, x, values) => {
    const rank = shapeOf(x).dims.length;
    if (rank === 0) return undefined;
    return b.concatenate(g.r() < 0.3 ? [x] : [x, g.pick(sameShape(x, values))], g.int(rank));
  }],
  [1, (b, g, x, values) => {
    const xs = shapeOf(x);
    const p = g.r() < 0.5
      ? splat(b, g, arrayShape("pred", [...xs.dims]))
      : b.compare(x, g.pick(sameShape(x, values)), g.pick(["LT", "EQ", "NE", "GE"] as const));
    const others = sameShape(x, values).filter((v) => v !== x);
    const other = g.r() < 0.2 ? x : others.length > 0 ? g.pick(others) : negation(b, x);
    return b.select(p, x, other);
  }],
  [2, (b, g, x) => {
    const xs = shapeOf(x);
    const kind = g.pick(["add", "max", "min", "mul", "and", "or"] as const);
    const dims = xs.dims.map((_, k) => k).filter(() => g.r() < 0.5);
    const init = b.scalar(xs.type, reducerInit(kind, xs.type, g.r() < 0.4));
    return b.reduce(x, init, dims, b.moduleBuilder!.reducer(kind, xs.type));
  }],
  [1, (b, g, x, values) => b.getTupleElement(b.tuple([x, g.pick(values)]), g.int(2))],
  [1, (b, g) => randomConstant(b, g, arrayShape(g.pick(TYPES), randomDims(g)))],
  [1, (b, g, x) => {
    const xs = shapeOf(x);
    return xs.dims.length > 0 ? b.getDimensionSize(x, g.int(xs.dims.length)) : undefined;
  }],
  // dot(transpose(x), transpose(c)): the dot-transpose rule, with 1 or 2 free dims per side.
  [2, (b, g, x) => {
    const xs = shapeOf(x);
    const rank = xs.dims.length;
    if (rank < 2 || rank > 3 || xs.type === "pred") return undefined;
    const lhs = g.r() < 0.7 ? b.transpose(x, randomPerm(g, rank)) : x;
    const k = shapeOf(lhs).dims[rank - 1]!;
    const rhsBase = randomConstant(b, g, arrayShape(xs.type, [1 + g.int(2), k]));
    const rhs = g.r() < 0.7 ? b.transpose(rhsBase, [1, 0]) : rhsBase;
    const rc = rhs === rhsBase ? 1 : 0;
    return b.dot(lhs, rhs, { lhsContracting: [rank - 1], rhsContracting: [rc] });
  }],
];

const TOTAL_WEIGHT = MOVES.reduce((a, [w]) => a + w, 0);

function sameShape(x: Instruction, values: readonly Instruction[]): Instruction[] {
  const xs = shapeOf(x);
  return values.filter((v) => {
    const s = shapeOf(v);
    return s.type === xs.type && s.dims.join(",") === xs.dims.join(",");
  });
}

/** One random step: a new value made from existing ones (or undefined when it did not apply). */
function step(b: ComputationBuilder, g: Gen, values: Instruction[]): Instruction | undefined {
  // Prefer recent values, so chains across steps form too.
  const x = values[Math.max(0, values.length - 1 - g.int(3))]!;
  let w = g.r() * TOTAL_WEIGHT;
  for (const [weight, move] of MOVES) {
    w -= weight;
    if (w < 0) return move(b, g, x, values);
  }
  return undefined;
}

/** A random graph: 1-3 parameters, `steps` random ops, ROOT a tuple of the last values. */
function randomModule(seed: number, steps: number): Module {
  const g = gen(seed);
  const mb = new ModuleBuilder(`random_${seed}`);
  mb.entry("main", (b) => {
    const values: Instruction[] = [];
    const nParams = 1 + g.int(3);
    for (let k = 0; k < nParams; k++) {
      values.push(b.parameter(arrayShape(g.pick(TYPES), randomDims(g)), `p${k}`));
    }
    for (let k = 0; k < steps; k++) {
      try {
        const v = step(b, g, values);
        if (v !== undefined) values.push(v);
      } catch (e) {
        // A random step may pick an op its operand type does not allow; try another.
        if (!(e instanceof ShapeError)) throw e;
      }
    }
    const live = values.slice(-1 - g.int(3));
    return live.length === 1 ? live[0]! : b.tuple(live);
  });
  return mb.build();
}

describe("random graphs: optimized ≡ original, bit for bit", () => {
  it("holds for fast-check generated elementwise/movement graphs", () => {
    let changedCount = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 1, max: 14 }),
        (seed, steps) => {
          const original = randomModule(seed, steps);
          const { optimized, changed } = optimize(original);
          if (changed) changedCount++;
          const d = compareModules(original, optimized, seed ^ 0x5eed, 3);
          if (d !== null) {
            throw new Error(`${d}\n--- original\n${printHlo(original)}\n--- optimized\n` +
              printHlo(optimized));
          }
        },
      ),
      { numRuns: 1000 },
    );
    // The generator must actually exercise the passes.
    expect(changedCount).toBeGreaterThan(500);
  });

  it("the generator is deterministic per seed", () => {
    expect(printHlo(randomModule(42, 10))).toBe(printHlo(randomModule(42, 10)));
  });
});
