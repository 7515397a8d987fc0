// Reductions of the reference evaluator: reduce and reduce-window (both variadic: N inputs and N
// init scalars; the reducer takes N accumulators then N values), and the scalar "combiner" that
// calls a reducer/combiner/comparator computation, shared with scatter and sort. Elements are
// folded strictly in row-major order of the reduced (or window) positions, starting from the
// init value, exactly as XLA's HloEvaluator does. A reducer whose body is one binary op of its
// two parameters (or returns one parameter) runs through the same scalar kernel without building
// literals; it rounds each step to the element type, so it is bit-identical to the slow path.

import { isSmallFloatType, roundToSmallFloat } from "./small_floats.ts";
import type { Computation, Instruction } from "./module.ts";
import { roundToBF16, roundToF16 } from "./literal.ts";
import type { ElementType } from "./shape.ts";
import {
  binaryKernel,
  compareKernel,
  isBinaryName,
  type F2,
} from "./evaluate_elementwise.ts";
import { windowedSize } from "./evaluate_contraction.ts";
import {
  asLiteral,
  attr,
  build,
  elems,
  fail,
  forEachIndex,
  product,
  scalarOf,
  stridesOf,
  valueShapeString,
  type EvalContext,
  type EvalValue,
  type OpImpl,
  type Scalar,
} from "./evaluate_support.ts";
import { Literal } from "./literal.ts";

/** N accumulators (or lhs values) and N values in, N results out. */
export type Combiner = (accs: readonly Scalar[], xs: readonly Scalar[]) => Scalar[];

/** What storing a computed value in a literal of type t does to it. */
function storeRound(t: ElementType): (v: Scalar) => Scalar {
  switch (t) {
    case "f32":
      return (v) => Math.fround(v as number);
    case "f16":
      return (v) => roundToF16(v as number);
    case "bf16":
      return (v) => roundToBF16(v as number);
    default:
      if (isSmallFloatType(t)) return (v) => roundToSmallFloat(t, Math.fround(v as number));
      return (v) => v;
  }
}

function isScalarParam(i: Instruction, n: number, t: ElementType): boolean {
  return (
    i.opcode === "parameter" &&
    i.attrs.parameterNumber === n &&
    i.shape.kind === "array" &&
    i.shape.dims.length === 0 &&
    i.shape.type === t
  );
}

/** The fast form of a 2-parameter scalar computation `op(p_a, p_b)` or `p_k`, if it is one. */
function simpleBinary(c: Computation, t: ElementType): F2 | undefined {
  const params = c.parameters;
  if (params.length !== 2 || !params.every((p, n) => isScalarParam(p, n, t))) return undefined;
  const root = c.root;
  const pick = (p: number | undefined): ((a: Scalar, b: Scalar) => Scalar) =>
    p === 0 ? (a) => a : (_a, b) => b;
  if (root.opcode === "parameter") {
    return c.instructions.length === 2 ? pick(root.attrs.parameterNumber) : undefined;
  }
  if (c.instructions.length !== 3 || !isBinaryName(root.opcode)) return undefined;
  if (root.shape.kind !== "array" || root.shape.type !== t || root.shape.dims.length !== 0) {
    return undefined;
  }
  const [x, y] = root.operands;
  if (x?.opcode !== "parameter" || y?.opcode !== "parameter") return undefined;
  let k: F2;
  try {
    k = binaryKernel(root.opcode, t);
  } catch {
    return undefined; // undefined for t: the slow path reports it in the reducer's own terms
  }
  const round = storeRound(t);
  const px = pick(x.attrs.parameterNumber);
  const py = pick(y.attrs.parameterNumber);
  return (a, b) => round(k(px(a, b), py(a, b)));
}

function scalarResult(v: EvalValue, what: string): Scalar {
  const lit = asLiteral(v, what);
  if (lit.dims.length !== 0) fail(`${what} must be a scalar, got ${valueShapeString(lit)}`);
  return elems(lit)[0]!;
}

/**
 * The combiner of a called computation over N element types: `c(acc_0..acc_N-1, x_0..x_N-1)`
 * returning a scalar (N = 1) or an N-tuple of scalars.
 */
export function makeCombiner(
  ctx: EvalContext,
  c: Computation | undefined,
  types: readonly ElementType[],
  role: string,
): Combiner {
  if (!c) fail(`the ${role} computation is missing`);
  if (types.length === 1) {
    const fast = simpleBinary(c, types[0]!);
    if (fast) return (a, x) => [fast(a[0]!, x[0]!)];
  }
  const n = types.length;
  return (accs, xs) => {
    const args: EvalValue[] = [];
    for (let i = 0; i < n; i++) args.push(scalarOf(types[i]!, accs[i]!));
    for (let i = 0; i < n; i++) args.push(scalarOf(types[i]!, xs[i]!));
    const r = ctx.call(c, args);
    if (n === 1 && !Array.isArray(r)) return [scalarResult(r, `${role} result`)];
    if (!Array.isArray(r) || r.length !== n) {
      fail(`${role} '${c.name}' must return ${n === 1 ? "a scalar" : `a ${n}-tuple`}`);
    }
    return r.map((v, i) => scalarResult(v, `${role} result ${i}`));
  };
}

/**
 * A comparator `c(lhs_0, rhs_0, lhs_1, rhs_1, ...)` → pred over N element types, as a function
 * of two positions. A comparator that is one compare of two parameters runs on the kernel.
 */
export function makeComparator(
  ctx: EvalContext,
  c: Computation | undefined,
  types: readonly ElementType[],
): (lhs: readonly Scalar[], rhs: readonly Scalar[]) => boolean {
  if (!c) fail("the comparator computation is missing");
  const n = types.length;
  const params = c.parameters;
  const root = c.root;
  if (
    c.instructions.length === 2 * n + 1 &&
    params.length === 2 * n &&
    params.every((p, k) => isScalarParam(p, k, types[k >> 1]!)) &&
    root.opcode === "compare" &&
    root.operands.every((o) => o.opcode === "parameter") &&
    root.attrs.direction !== undefined
  ) {
    const [a, b] = root.operands.map((o) => o.attrs.parameterNumber!);
    if (types[a! >> 1] === types[b! >> 1]) {
      const k = compareKernel(types[a! >> 1]!, root.attrs.direction, root.attrs.comparisonType);
      const pick = (p: number, l: readonly Scalar[], r: readonly Scalar[]) =>
        p % 2 === 0 ? l[p >> 1]! : r[p >> 1]!;
      return (l, r) => k(pick(a!, l, r), pick(b!, l, r)) === 1;
    }
  }
  return (l, r) => {
    const args: EvalValue[] = [];
    for (let i = 0; i < n; i++) {
      args.push(scalarOf(types[i]!, l[i]!), scalarOf(types[i]!, r[i]!));
    }
    const v = ctx.call(c, args);
    const lit = asLiteral(v, "comparator result");
    if (lit.type !== "pred" || lit.dims.length !== 0) {
      fail(`comparator '${c.name}' must return pred[], got ${valueShapeString(lit)}`);
    }
    return elems(lit)[0] === 1;
  };
}

/** Splits reduce-style operands into N inputs and N scalar inits. */
function inputsAndInits(ops: readonly EvalValue[]): { inputs: Literal[]; inits: Literal[] } {
  if (ops.length === 0 || ops.length % 2 !== 0) {
    fail(`expected N inputs then N init values, got ${ops.length} operands`);
  }
  const n = ops.length / 2;
  const inputs = ops.slice(0, n).map((v, i) => asLiteral(v, `input ${i}`));
  const inits = ops.slice(n).map((v, i) => asLiteral(v, `init ${i}`));
  inputs.forEach((x, i) => {
    const first = inputs[0]!;
    if (x.dims.length !== first.dims.length || x.dims.some((d, k) => d !== first.dims[k])) {
      fail(`input ${i} ${valueShapeString(x)} differs in dims from ${valueShapeString(first)}`);
    }
    const init = inits[i]!;
    if (init.dims.length !== 0 || init.type !== x.type) {
      fail(`init ${i} must be a ${x.type} scalar, got ${valueShapeString(init)}`);
    }
  });
  return { inputs, inits };
}

function results(types: readonly ElementType[], dims: number[], accs: Scalar[][]): EvalValue {
  const lits = types.map((t, i) =>
    build(t, dims, (out) => accs[i]!.forEach((v, k) => (out[k] = v))),
  );
  return lits.length === 1 ? lits[0]! : lits;
}

export const reduceOp: OpImpl = (instr, ops, ctx) => {
  const { inputs, inits } = inputsAndInits(ops);
  const first = inputs[0]!;
  const rank = first.dims.length;
  const reduced = attr(instr, "dimensions");
  for (const d of reduced) if (d < 0 || d >= rank) fail(`reduce dim ${d} is out of range`);
  const kept = Array.from({ length: rank }, (_, i) => i).filter((i) => !reduced.includes(i));
  const outDims = kept.map((d) => first.dims[d]!);
  const outStrides = stridesOf(outDims);
  const types = inputs.map((x) => x.type);
  const combine = makeCombiner(ctx, instr.called[0], types, "reducer");
  const n = inputs.length;
  const count = product(outDims);
  const accs = inits.map((init) => new Array<Scalar>(count).fill(elems(init)[0]!));
  const data = inputs.map((x) => elems(x));
  const acc = new Array<Scalar>(n);
  const xs = new Array<Scalar>(n);
  // Visiting the input in row-major order visits each output's reduced elements in row-major
  // order of the reduced dims.
  forEachIndex(first.dims, (idx, linear) => {
    let o = 0;
    for (let k = 0; k < kept.length; k++) o += idx[kept[k]!]! * outStrides[k]!;
    for (let i = 0; i < n; i++) {
      acc[i] = accs[i]![o]!;
      xs[i] = data[i]![linear]!;
    }
    const r = combine(acc, xs);
    for (let i = 0; i < n; i++) accs[i]![o] = r[i]!;
  });
  return results(types, outDims, accs);
};

export const reduceWindowOp: OpImpl = (instr, ops, ctx) => {
  const { inputs, inits } = inputsAndInits(ops);
  const first = inputs[0]!;
  const rank = first.dims.length;
  const window = attr(instr, "window");
  if (window.length !== rank) fail(`window has ${window.length} dims, input rank is ${rank}`);
  window.forEach((w, k) => {
    if (w.stride < 1 || w.baseDilation < 1 || w.windowDilation < 1) {
      fail(`window dim ${k}: stride and dilations must be >= 1`);
    }
  });
  const outDims = window.map((w, i) =>
    windowedSize(first.dims[i]!, w, w.baseDilation, w.windowDilation),
  );
  const winSizes = window.map((w) => w.size);
  const strides = stridesOf(first.dims);
  const types = inputs.map((x) => x.type);
  const combine = makeCombiner(ctx, instr.called[0], types, "reducer");
  const n = inputs.length;
  const data = inputs.map((x) => elems(x));
  const accs = types.map(() => new Array<Scalar>(product(outDims)));
  const xs = new Array<Scalar>(n);
  forEachIndex(outDims, (oi, linear) => {
    let acc: Scalar[] = inits.map((init) => elems(init)[0]!);
    // Padding positions and holes of the dilated base hold no element: they are skipped.
    forEachIndex(winSizes, (wi) => {
      let l = 0;
      for (let k = 0; k < rank; k++) {
        const w = window[k]!;
        const u = oi[k]! * w.stride - w.padLow + wi[k]! * w.windowDilation;
        if (u % w.baseDilation !== 0) return;
        const x = u / w.baseDilation;
        if (x < 0 || x >= first.dims[k]!) return;
        l += x * strides[k]!;
      }
      for (let i = 0; i < n; i++) xs[i] = data[i]![l]!;
      acc = combine(acc, xs);
    });
    for (let i = 0; i < n; i++) accs[i]![linear] = acc[i]!;
  });
  return results(types, outDims, accs);
};
