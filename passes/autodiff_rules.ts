// Reverse-mode derivative rules, one per opcode: each rule gets the forward instruction (in the
// module being differentiated), its output cotangent and a builder on that module's ENTRY, and
// returns one cotangent per operand (undefined where none flows). Opcodes without a derivative
// map to `{ none: reason }`; autodiff.ts throws an AutodiffError when a gradient reaches one.

import { ComputationBuilder } from "../ir/builder.ts";
import { literal } from "../ir/literal.ts";
import type { Computation, Instruction } from "../ir/module.ts";
import type { Opcode } from "../ir/opcodes.ts";
import type { PaddingDim } from "../ir/attributes.ts";
import { arrayShape, scalarShape, type ArrayShape, type ElementType } from "../ir/shape.ts";

export interface VjpContext {
  readonly b: ComputationBuilder;
  /** The forward instruction (its operands are the forward values). */
  readonly instr: Instruction;
  /** The cotangent of the forward instruction's (array) result. */
  readonly g: Instruction;
  /** A scalar of the result's element type broadcast to `dims`. */
  full(v: number, dims: readonly number[]): Instruction;
  /** Sum of `x` over `dims`. */
  sum(x: Instruction, dims: readonly number[]): Instruction;
  /** The scalar add computation `(T[], T[]) -> T[]` of the result's element type (made once). */
  addReducer(): Computation;
}

export type VjpRule = (ctx: VjpContext) => (Instruction | undefined)[];

const arr = (i: Instruction): ArrayShape => {
  if (i.shape.kind !== "array") throw new Error(`%${i.name} is not an array`);
  return i.shape;
};
const dimsOf = (i: Instruction): readonly number[] => arr(i).dims;
const range = (n: number): number[] => Array.from({ length: n }, (_, k) => k);

const none = (reason: string): { none: string } => ({ none: reason });
/**
 * Piecewise-constant ops (sign, floor, ceil, the roundings): zero almost everywhere, and zero
 * where it jumps too, as PyTorch defines them — no cotangent flows to the operand.
 */
const zeroGradient: VjpRule = () => [];
const notFloat = none("its result is not a float (integer, pred or index)");

function maskedPair(c: VjpContext, dir: "GE" | "LE"): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [x, y] = instr.operands as [Instruction, Instruction];
  const zero = c.full(0, dimsOf(g));
  // Ties go to the first operand (first-wins).
  const m = b.compare(x, y, dir);
  return [b.select(m, g, zero), b.select(m, zero, g)];
}

function broadcastVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const bd = instr.attrs.dimensions ?? [];
  const outRank = dimsOf(g).length;
  const reduced = range(outRank).filter((d) => !bd.includes(d));
  let r = c.sum(g, reduced);
  const sorted = [...bd].sort((p, q) => p - q);
  const perm = bd.map((d) => sorted.indexOf(d));
  if (perm.some((p, k) => p !== k)) r = b.transpose(r, perm);
  return [r];
}

function dotVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [lhs, rhs] = instr.operands as [Instruction, Instruction];
  const dn = instr.attrs.dot!;
  const lr = dimsOf(lhs).length;
  const rr = dimsOf(rhs).length;
  const nb = dn.lhsBatch.length;
  const lFree = range(lr).filter((d) => !dn.lhsBatch.includes(d) && !dn.lhsContracting.includes(d));
  const rFree = range(rr).filter((d) => !dn.rhsBatch.includes(d) && !dn.rhsContracting.includes(d));
  const gBatch = range(nb);
  const gL = lFree.map((_, k) => nb + k);
  const gR = rFree.map((_, k) => nb + lFree.length + k);
  const side = (
    other: Instruction,
    otherBatch: readonly number[],
    otherFree: readonly number[],
    gFreeOther: readonly number[],
    selfRank: number,
    selfBatch: readonly number[],
    selfFree: readonly number[],
    selfContr: readonly number[],
    otherContr: readonly number[],
  ): Instruction => {
    // Result dims: batch, g's dims for self's free dims, other's contracting dims ascending.
    let r = b.dot(g, other, {
      lhsBatch: gBatch,
      rhsBatch: [...otherBatch],
      lhsContracting: [...gFreeOther],
      rhsContracting: [...otherFree],
    });
    const sortedOther = [...otherContr].sort((p, q) => p - q);
    const perm = range(selfRank).map((d) => {
      const bi = selfBatch.indexOf(d);
      if (bi >= 0) return bi;
      const fi = selfFree.indexOf(d);
      if (fi >= 0) return nb + fi;
      const ci = selfContr.indexOf(d);
      return nb + selfFree.length + sortedOther.indexOf(otherContr[ci]!);
    });
    if (perm.some((p, k) => p !== k)) r = b.transpose(r, perm);
    return r;
  };
  return [
    side(rhs, dn.rhsBatch, rFree, gR, lr, dn.lhsBatch, lFree, dn.lhsContracting, dn.rhsContracting),
    side(lhs, dn.lhsBatch, lFree, gL, rr, dn.rhsBatch, rFree, dn.rhsContracting, dn.lhsContracting),
  ];
}


/** A cotangent summed to a scalar when its operand is one (the scalar bounds of clamp). */
function fitTo(c: VjpContext, operand: Instruction, ct: Instruction): Instruction {
  return dimsOf(operand).length === 0 && dimsOf(ct).length > 0
    ? c.sum(ct, range(dimsOf(ct).length))
    : ct;
}

/** An operand of an elementwise op broadcast to the result's dims (a scalar clamp bound). */
function asFull(c: VjpContext, x: Instruction): Instruction {
  const d = dimsOf(c.g);
  return dimsOf(x).length === 0 && d.length > 0 ? c.b.broadcast(x, d, []) : x;
}

/**
 * x^y: d/dx = y*x^(y-1), read as 0 where y == 0 (so 0^0 gives 0, not 0*inf); d/dy = log(x)*x^y
 * with log(x) read as 0 where x == 0, so the gradient wrt y is 0 there (as JAX does).
 */
function powerVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, g, instr } = c;
  const [x, y] = instr.operands as [Instruction, Instruction];
  const d = dimsOf(g);
  const zero = c.full(0, d);
  const one = c.full(1, d);
  const dx = b.select(
    b.compare(y, zero, "EQ"),
    zero,
    b.multiply(y, b.power(x, b.subtract(y, one))),
  );
  const logx = b.log(b.select(b.compare(x, zero, "EQ"), one, x));
  return [b.multiply(g, dx), b.multiply(g, b.multiply(logx, instr))];
}

/** remainder(x, y) = x - trunc(x/y)*y: dx = g, dy = -g*trunc(x/y) (trunc = sign*floor(abs)). */
function remainderVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, g, instr } = c;
  const [x, y] = instr.operands as [Instruction, Instruction];
  const q = b.divide(x, y);
  const trunc = b.multiply(b.sign(q), b.floor(b.abs(q)));
  return [g, b.negate(b.multiply(g, trunc))];
}

/** atan2(x, y) = atan(x/y) on the right branch: dx = y/(x²+y²), dy = -x/(x²+y²). */
function atan2Vjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, g, instr } = c;
  const [x, y] = instr.operands as [Instruction, Instruction];
  const gr = b.divide(g, b.add(b.multiply(x, x), b.multiply(y, y)));
  return [b.multiply(gr, y), b.negate(b.multiply(gr, x))];
}

/**
 * clamp(lo, x, hi) = min(max(x, lo), hi) (XLA). Ties go to x: the cotangent flows to x where
 * lo <= x <= hi, to lo where x < lo, and to hi where max(x, lo) > hi (so where lo > hi it all
 * goes to hi, which is what the forward returns there). A scalar bound gets the sum.
 */
function clampVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, g, instr } = c;
  const [lo0, x, hi0] = instr.operands as [Instruction, Instruction, Instruction];
  const lo = asFull(c, lo0);
  const hi = asFull(c, hi0);
  const toHi = b.compare(b.maximum(x, lo), hi, "GT");
  const below = b.compare(x, lo, "LT");
  const zero = c.full(0, dimsOf(g));
  const gHi = b.select(toHi, g, zero);
  const rest = b.select(toHi, zero, g);
  const gLo = b.select(below, rest, zero);
  const gX = b.select(below, zero, rest);
  return [fitTo(c, lo0, gLo), gX, fitTo(c, hi0, gHi)];
}

/** Elements of a size-n dim dilated by `by` (n - 1 holes of by - 1): (n - 1)*by + 1, 0 for 0. */
const dilated = (n: number, by: number): number => (n === 0 ? 0 : (n - 1) * by + 1);

/** A zero scalar of x's element type. */
const zeroOf = (b: ComputationBuilder, x: Instruction): Instruction => b.scalar(arr(x).type, 0);

/**
 * The cotangent of pad's operand from the padded result's `g`: undo the edge padding (negative
 * edges come back as zeros), then take every (interior+1)-th element.
 */
function unpad(b: ComputationBuilder, g: Instruction, padding: readonly PaddingDim[]): Instruction {
  let r = g;
  if (padding.some((p) => p.low !== 0 || p.high !== 0)) {
    r = b.pad(r, zeroOf(b, g), padding.map((p) => [-p.low, -p.high, 0] as const));
  }
  if (padding.some((p) => p.interior !== 0)) {
    const d = dimsOf(r);
    r = b.slice(
      r,
      d.map(() => 0),
      d,
      padding.map((p) => p.interior + 1),
    );
  }
  return r;
}

/** slice: g back in place, zeros elsewhere (interior padding for the strides). */
function sliceVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const x = instr.operands[0]!;
  const xd = dimsOf(x);
  const gd = dimsOf(g);
  const sl = instr.attrs.slice!;
  if (sl.every((s, i) => s.start === 0 && s.stride === 1 && gd[i] === xd[i])) return [g];
  const padding = sl.map((s, i) => {
    const covered = dilated(gd[i]!, s.stride);
    return [s.start, xd[i]! - s.start - covered, s.stride - 1] as const;
  });
  return [b.pad(g, zeroOf(b, g), padding)];
}

/**
 * pad: the operand gets g without the padding (strided for interior padding; negative edges give
 * zeros to the removed elements); the padding value gets the sum of g over the padded positions.
 */
function padVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const x = instr.operands[0]!;
  const padding = instr.attrs.padding!;
  const gx = unpad(b, g, padding);
  const isPad = b.pad(
    b.broadcast(b.scalar("pred", false), dimsOf(x), []),
    b.scalar("pred", true),
    padding,
  );
  const gv = c.sum(b.select(isPad, g, c.full(0, dimsOf(g))), range(dimsOf(g).length));
  return [gx, gv];
}

function concatenateVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const dim = instr.attrs.dimensions![0]!;
  const gd = dimsOf(g);
  let at = 0;
  return instr.operands.map((o) => {
    const n = dimsOf(o)[dim]!;
    const starts = gd.map((_, i) => (i === dim ? at : 0));
    const limits = gd.map((d, i) => (i === dim ? at + n : d));
    at += n;
    return b.slice(g, starts, limits);
  });
}

/** dynamic-slice: g written into zeros at the same (clamped the same way) starts. */
function dynamicSliceVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [x, ...starts] = instr.operands as [Instruction, ...Instruction[]];
  return [b.dynamicUpdateSlice(c.full(0, dimsOf(x)), g, starts)];
}

/** dynamic-update-slice: the operand gets g with the window zeroed, the update the window of g. */
function dynamicUpdateSliceVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [, u, ...starts] = instr.operands as [Instruction, Instruction, ...Instruction[]];
  return [
    b.dynamicUpdateSlice(g, c.full(0, dimsOf(u)), starts),
    b.dynamicSlice(g, starts, dimsOf(u)),
  ];
}

/**
 * What a 2-parameter scalar computation does: "param0"/"param1" when it returns a parameter
 * (param1 is a scatter's replace), the opcode when it is one binary op of both parameters
 * (either order), else undefined.
 */
function combinerOf(comp: Computation): "param0" | "param1" | Opcode | undefined {
  const ps = comp.parameters;
  const root = comp.root;
  if (ps.length !== 2) return undefined;
  if (root.opcode === "parameter") {
    return root.attrs.parameterNumber === 0 ? "param0" : "param1";
  }
  const [a, b] = root.operands;
  const both = (a === ps[0] && b === ps[1]) || (a === ps[1] && b === ps[0]);
  return both && root.operands.length === 2 ? root.opcode : undefined;
}

/**
 * reduce of one input: add (g broadcast back; the init gets sum(g)), or maximum/minimum: g goes
 * to the elements equal to the result, split evenly among ties (as JAX and PyTorch's amax); the
 * init gets g where no element equals the result (all of them strictly beyond the init).
 */
function reduceVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  if (instr.operands.length !== 2) {
    throw new Error(
      "a variadic reduce (several inputs, e.g. an argmax) has no derivative here; only " +
        "single-input add/max/min reduces do",
    );
  }
  const kind = combinerOf(instr.called[0]!);
  const x = instr.operands[0]!;
  const xd = dimsOf(x);
  const red = instr.attrs.dimensions ?? [];
  const kept = range(xd.length).filter((d) => !red.includes(d));
  const all = range(dimsOf(g).length);
  if (kind === "add") return [b.broadcast(g, xd, kept), c.sum(g, all)];
  if (kind !== "maximum" && kind !== "minimum") {
    throw new Error(
      `a reduce whose reducer is ${kind ?? "not one binary op"} has no derivative here ` +
        "(only add, maximum and minimum)",
    );
  }
  const eq = b.compare(x, b.broadcast(instr, xd, kept), "EQ");
  const count = c.sum(b.select(eq, c.full(1, xd), c.full(0, xd)), red);
  // Where count is 0 no element is selected, so the inf of g/0 never leaks.
  const share = b.broadcast(b.divide(g, count), xd, kept);
  const gx = b.select(eq, share, c.full(0, xd));
  const none = b.compare(count, c.full(0, dimsOf(g)), "EQ");
  return [gx, c.sum(b.select(none, g, c.full(0, dimsOf(g))), all)];
}

/**
 * A variadic reduce of (values, positions) as an argmax/argmin lowers (tensor/ops/reduction.ts
 * argReduce: the second input an iota along the reduced dim, so each output's position names
 * one element): the values' cotangent goes to exactly the element whose position the reduce
 * returned, as PyTorch's max(dim)/min(dim) backward (an index_put at the returned indices); the
 * positions get none. Any other variadic reduce has no derivative here.
 */
export function argReduceVjp(
  b: ComputationBuilder,
  instr: Instruction,
  g: readonly unknown[],
): (Instruction | undefined)[] {
  const [x, pos] = instr.operands as [Instruction, Instruction];
  const red = instr.attrs.dimensions ?? [];
  const isIotaAlong = pos.opcode === "iota" && red.length === 1 &&
    pos.attrs.iotaDimension === red[0];
  if (!isIotaAlong) {
    throw new Error(
      "a variadic reduce has a derivative only as an argmax/argmin (values with the positions " +
        "of an iota along the one reduced dim)",
    );
  }
  const gv = g[0] as Instruction | undefined;
  if (gv === undefined) return [];
  const xd = dimsOf(x);
  const kept = range(xd.length).filter((d) => !red.includes(d));
  const chosen = b.broadcast(b.getTupleElement(instr, 1), xd, kept);
  const hit = b.compare(pos, chosen, "EQ");
  const t = arr(x).type;
  const zero = b.broadcast(b.scalar(t, 0), xd, []);
  return [b.select(hit, b.broadcast(gv, xd, kept), zero)];
}

/**
 * reduce-window of one input. The window sweeps the base padded by (padLow, padHigh) and dilated
 * by baseDilation (`pad` with interior baseDilation-1 builds it); output o reads base positions
 * o*stride + k*windowDilation for window offset k. The init is combined once per output.
 *
 * add: the padded base's cotangent is a reduce-window add of g dilated by the stride (interior
 * padding), which sums for each position the outputs whose windows hold it; then unpad.
 *
 * maximum/minimum: per window offset k a strided slice of the padded base; the cotangent of each
 * output goes to the FIRST element of its window (in row-major window order) that equals the
 * result, as XLA's select-and-scatter with GE and PyTorch's max_pool2d do; positions of padding
 * or dilation holes never take it. The init gets g where no element of the window equals the
 * result.
 */
function reduceWindowVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  if (instr.operands.length !== 2) {
    throw new Error(
      "a variadic reduce-window (several inputs, e.g. max pooling with indices) has no " +
        "derivative here; only single-input add/max/min reduce-windows do",
    );
  }
  const kind = combinerOf(instr.called[0]!);
  const [x, init] = instr.operands as [Instruction, Instruction];
  const xd = dimsOf(x);
  const gd = dimsOf(g);
  const win = instr.attrs.window!;
  const all = range(gd.length);
  if (kind !== "add" && kind !== "maximum" && kind !== "minimum") {
    throw new Error(
      `a reduce-window whose reducer is ${kind ?? "not one binary op"} has no derivative ` +
        "here (only add, maximum and minimum)",
    );
  }
  if (gd.some((d) => d === 0) || xd.some((d) => d === 0)) {
    return [c.full(0, xd), c.sum(g, all)];
  }
  const base: PaddingDim[] = win.map((w) => ({
    low: w.padLow,
    high: w.padHigh,
    interior: w.baseDilation - 1,
  }));
  const P = win.map((w, i) => w.padLow + dilated(xd[i]!, w.baseDilation) + w.padHigh);
  if (kind === "add") {
    const gpad = b.pad(
      g,
      zeroOf(b, g),
      win.map((w, i) => {
        const span = (w.size - 1) * w.windowDilation;
        return [span, P[i]! - dilated(gd[i]!, w.stride), w.stride - 1] as const;
      }),
    );
    const gp = b.reduceWindow(
      gpad,
      zeroOf(b, g),
      win.map((w) => ({ size: w.size, windowDilation: w.windowDilation })),
      c.addReducer(),
    );
    return [unpad(b, gp, base), c.sum(g, all)];
  }
  const xp = b.pad(x, init, base);
  const real = b.pad(
    b.broadcast(b.scalar("pred", true), xd, []),
    b.scalar("pred", false),
    base,
  );
  const zero = c.full(0, gd);
  let taken: Instruction | undefined;
  let gp: Instruction | undefined;
  const offsets: number[][] = [[]];
  for (const w of win) {
    const next: number[][] = [];
    for (const o of offsets) for (let k = 0; k < w.size; k++) next.push([...o, k]);
    offsets.splice(0, offsets.length, ...next);
  }
  for (const k of offsets) {
    const starts = win.map((w, i) => k[i]! * w.windowDilation);
    const limits = win.map((w, i) => starts[i]! + dilated(gd[i]!, w.stride));
    const strides = win.map((w) => w.stride);
    const at = b.and(
      b.compare(b.slice(xp, starts, limits, strides), instr, "EQ"),
      b.slice(real, starts, limits, strides),
    );
    const pick = taken === undefined ? at : b.and(at, b.not(taken));
    taken = taken === undefined ? at : b.or(taken, at);
    const part = b.pad(
      b.select(pick, g, zero),
      zeroOf(b, g),
      win.map((w, i) => [starts[i]!, P[i]! - limits[i]!, w.stride - 1] as const),
    );
    gp = gp === undefined ? part : b.add(gp, part);
  }
  return [unpad(b, gp!, base), c.sum(b.select(taken!, zero, g), all)];
}

/** An integer scalar of an index type. */
const indexScalar = (b: ComputationBuilder, type: ElementType, v: number): Instruction =>
  b.scalar(type, v);

/**
 * The index vectors' components: one array over the batch dims of `idx` (every dim but
 * indexVectorDim) per entry of the index vector.
 */
function indexComponents(b: ComputationBuilder, idx: Instruction, ivd: number, n: number) {
  const d = dimsOf(idx);
  if (ivd === d.length) return [idx];
  const batch = d.filter((_, i) => i !== ivd);
  return range(n).map((j) => {
    const s = b.slice(
      idx,
      d.map((_, i) => (i === ivd ? j : 0)),
      d.map((x, i) => (i === ivd ? j + 1 : x)),
    );
    return b.reshape(s, batch);
  });
}

/**
 * `idx` with each index vector clamped as gather clamps it (to [0, dim - sliceSize] per
 * operand dim it maps to), so a scatter of the same windows lands where gather read them.
 */
function clampIndices(
  b: ComputationBuilder,
  idx: Instruction,
  ivd: number,
  bounds: readonly number[],
): Instruction {
  const t = arr(idx).type;
  const d = dimsOf(idx);
  const zero = indexScalar(b, t, 0);
  if (bounds.length === 0) return idx;
  let hi: Instruction;
  if (bounds.every((v) => v === bounds[0])) hi = indexScalar(b, t, bounds[0]!);
  else {
    const vec = b.constant(literal(t, [bounds.length], bounds));
    hi = b.broadcast(vec, d, [ivd]);
  }
  return b.clamp(zero, idx, hi);
}

/** Pred over the update dims: true where the update's window lies in bounds (scatter applies it). */
function inBoundsUpdates(
  b: ComputationBuilder,
  idx: Instruction,
  ivd: number,
  bounds: readonly number[],
  updateDims: readonly number[],
  updateScatterDims: readonly number[],
): Instruction | undefined {
  if (bounds.length === 0) return undefined;
  const t = arr(idx).type;
  let ok: Instruction | undefined;
  indexComponents(b, idx, ivd, bounds.length).forEach((comp, j) => {
    const cd = dimsOf(comp);
    const lo = b.broadcast(indexScalar(b, t, 0), cd, []);
    const hi = b.broadcast(indexScalar(b, t, bounds[j]!), cd, []);
    const inside = b.and(b.compare(comp, lo, "GE"), b.compare(comp, hi, "LE"));
    ok = ok === undefined ? inside : b.and(ok, inside);
  });
  return b.broadcast(ok!, updateDims, updateScatterDims);
}

/** gather: a scatter-add of g into zeros with the same dimension numbers (indices clamped). */
function gatherVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [x, idx] = instr.operands as [Instruction, Instruction];
  const gn = instr.attrs.gather!;
  const sizes = instr.attrs.gatherSliceSizes!;
  const xd = dimsOf(x);
  const bounds = gn.startIndexMap.map((d) => xd[d]! - sizes[d]!);
  const gx = b.scatter(
    c.full(0, xd),
    clampIndices(b, idx, gn.indexVectorDim, bounds),
    g,
    {
      updateWindowDims: gn.offsetDims,
      insertedWindowDims: gn.collapsedSliceDims,
      scatterDimsToOperandDims: gn.startIndexMap,
      indexVectorDim: gn.indexVectorDim,
      inputBatchingDims: gn.operandBatchingDims,
      scatterIndicesBatchingDims: gn.startIndicesBatchingDims,
    },
    c.addReducer(),
  );
  return [gx, undefined];
}

/**
 * scatter of one input. add: the operand gets g, each update the gather of g at its window (0
 * for a window out of bounds, which scatter skips). Replace (the combiner returns the update):
 * s32 ids of the update elements are scattered the same way, so each operand position learns
 * which element was written last (the evaluator's order; XLA leaves repeated indices unordered)
 * and only that element gets g there; the operand keeps g where nothing was written. A combiner
 * that keeps the operand: g to the operand, nothing to the updates.
 */
function scatterVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  if (instr.operands.length !== 3) {
    throw new Error("a variadic scatter (several inputs) has no derivative here");
  }
  const [x, idx, u] = instr.operands as [Instruction, Instruction, Instruction];
  const kind = combinerOf(instr.called[0]!);
  if (kind === "param0") return [g, undefined, undefined];
  if (kind !== "add" && kind !== "param1") {
    throw new Error(
      `a scatter whose combiner is ${kind ?? "not one binary op"} has no derivative here ` +
        "(only add and replace)",
    );
  }
  const sn = instr.attrs.scatter!;
  const xd = dimsOf(x);
  const ud = dimsOf(u);
  const windowOperandDims = range(xd.length).filter(
    (d) => !sn.insertedWindowDims.includes(d) && !sn.inputBatchingDims.includes(d),
  );
  const sizes = xd.map(() => 1);
  windowOperandDims.forEach((d, k) => (sizes[d] = ud[sn.updateWindowDims[k]!]!));
  const dims = {
    offsetDims: sn.updateWindowDims,
    collapsedSliceDims: sn.insertedWindowDims,
    startIndexMap: sn.scatterDimsToOperandDims,
    indexVectorDim: sn.indexVectorDim,
    operandBatchingDims: sn.inputBatchingDims,
    startIndicesBatchingDims: sn.scatterIndicesBatchingDims,
  };
  const gathered = b.gather(g, idx, dims, sizes);
  const zu = c.full(0, ud);
  if (kind === "add") {
    const bounds = sn.scatterDimsToOperandDims.map((d) => xd[d]! - sizes[d]!);
    const updateScatterDims = range(ud.length).filter((d) => !sn.updateWindowDims.includes(d));
    const ok = inBoundsUpdates(b, idx, sn.indexVectorDim, bounds, ud, updateScatterDims);
    return [g, undefined, ok === undefined ? gathered : b.select(ok, gathered, zu)];
  }
  const m = b.computation.parent;
  const replace = m.addComputation(m.uniqueComputationName("vjp_replace_s32"));
  const rb = new ComputationBuilder(replace);
  rb.parameter(scalarShape("s32"));
  replace.root = rb.parameter(scalarShape("s32"));
  const n = ud.reduce((p, d) => p * d, 1);
  const ids = b.reshape(b.iota(arrayShape("s32", [n]), 0), ud);
  const none = b.broadcast(b.scalar("s32", -1), xd, []);
  const written = b.scatter(none, idx, ids, sn, replace);
  const kept = b.compare(written, none, "EQ");
  const won = b.compare(b.gather(written, idx, dims, sizes), ids, "EQ");
  return [b.select(kept, g, c.full(0, xd)), undefined, b.select(won, gathered, zu)];
}

/** `x` transposed by `perm` (result dim i is x's dim perm[i]), skipped when perm is identity. */
function permute(b: ComputationBuilder, x: Instruction, perm: readonly number[]): Instruction {
  return perm.some((p, i) => p !== i) ? b.transpose(x, perm) : x;
}


/**
 * convolution, both operands, for any window (strides, padding of either sign, lhs and rhs
 * dilation, window reversal), feature_group_count or batch_group_count, and dim numbers.
 *
 * lhs: a convolution of g with the kernel spatially reversed and its feature dims swapped (the
 * group axis moved from the output features to the new output features), lhs dilation = the
 * forward stride, stride = the forward lhs dilation, padding (dilated window - 1 - padLow) low and
 * whatever gives back the input's size high. With batch groups the groups come out in the
 * features and are moved back into the batch.
 *
 * rhs: a convolution of the lhs (batch and feature roles swapped) with g as the kernel, stride =
 * the forward rhs dilation, rhs dilation = the forward stride; feature groups become batch groups
 * and batch groups feature groups.
 */
function convolutionVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr } = c;
  const [lhs, rhs] = instr.operands as [Instruction, Instruction];
  const dn = instr.attrs.convDims!;
  const win = instr.attrs.window!;
  const G = instr.attrs.featureGroupCount ?? 1;
  const Bg = instr.attrs.batchGroupCount ?? 1;
  const lt = arr(lhs).type;
  const g = arr(c.g).type === lt ? c.g : b.convert(c.g, lt);
  const ld = dimsOf(lhs);
  const rd = dimsOf(rhs);
  const gd = dimsOf(g);
  const sp = range(dn.inputSpatial.length);
  const N = sp.map((i) => ld[dn.inputSpatial[i]!]!);
  const K = sp.map((i) => rd[dn.kernelSpatial[i]!]!);
  const O = sp.map((i) => gd[dn.outputSpatial[i]!]!);
  if ([...ld, ...rd, ...gd].some((d) => d === 0)) {
    return [b.broadcast(b.scalar(lt, 0), ld, []), b.broadcast(b.scalar(lt, 0), rd, [])];
  }
  const canonSpatial = sp.map((i) => 2 + i);
  const canonOut = { outputBatch: 0, outputFeature: 1, outputSpatial: canonSpatial };

  // ---- lhs: kernel as [new in features, new out features, spatial...] = [F/grp, grp*Ci, K...].
  const F = rd[dn.kernelOutputFeature]!;
  const Ci = rd[dn.kernelInputFeature]!;
  const grp = Math.max(G, Bg);
  let w = permute(b, rhs, [dn.kernelOutputFeature, dn.kernelInputFeature, ...dn.kernelSpatial]);
  if (grp > 1) {
    w = b.reshape(w, [grp, F / grp, Ci, ...K]);
    w = b.transpose(w, [1, 0, 2, ...sp.map((i) => 3 + i)]);
    w = b.reshape(w, [F / grp, grp * Ci, ...K]);
  }
  const rev = sp.filter((i) => !win[i]!.windowReversal).map((i) => 2 + i);
  if (rev.length > 0) w = b.reverse(w, rev);
  const lhsWindow = sp.map((i) => {
    const x = win[i]!;
    const span = dilated(K[i]!, x.windowDilation);
    const low = span - 1 - x.padLow;
    const high = dilated(N[i]!, x.baseDilation) + span - 1 - dilated(O[i]!, x.stride) - low;
    return {
      size: K[i]!,
      stride: x.baseDilation,
      padLow: low,
      padHigh: high,
      windowDilation: x.windowDilation,
      baseDilation: x.stride,
    };
  });
  let dl = b.convolution(g, w, {
    window: lhsWindow,
    dims: {
      inputBatch: dn.outputBatch,
      inputFeature: dn.outputFeature,
      inputSpatial: dn.outputSpatial,
      kernelInputFeature: 0,
      kernelOutputFeature: 1,
      kernelSpatial: canonSpatial,
      ...canonOut,
    },
    featureGroupCount: grp,
  });
  if (Bg > 1) {
    // [Nb, Bg*C, S...] -> [Bg*Nb, C, S...]: batch group k held batch rows k*Nb ... k*Nb+Nb-1.
    const nb = gd[dn.outputBatch]!;
    const S = sp.map((i) => N[i]!);
    dl = b.reshape(dl, [nb, Bg, Ci, ...S]);
    dl = b.transpose(dl, [1, 0, 2, ...sp.map((i) => 3 + i)]);
    dl = b.reshape(dl, [Bg * nb, Ci, ...S]);
  }
  const toLhs: number[] = [];
  toLhs[dn.inputBatch] = 0;
  toLhs[dn.inputFeature] = 1;
  dn.inputSpatial.forEach((d, i) => (toLhs[d] = 2 + i));
  dl = permute(b, dl, toLhs);

  // ---- rhs: result [Ci, F, K...] (batch <- input features, features <- output features).
  const rhsWindow = sp.map((i) => {
    const x = win[i]!;
    const high =
      (K[i]! - 1) * x.windowDilation +
      dilated(O[i]!, x.stride) -
      dilated(N[i]!, x.baseDilation) -
      x.padLow;
    return {
      size: O[i]!,
      stride: x.windowDilation,
      padLow: x.padLow,
      padHigh: high,
      windowDilation: x.stride,
      baseDilation: x.baseDilation,
    };
  });
  let dr = b.convolution(lhs, g, {
    window: rhsWindow,
    dims: {
      inputBatch: dn.inputFeature,
      inputFeature: dn.inputBatch,
      inputSpatial: dn.inputSpatial,
      kernelInputFeature: dn.outputBatch,
      kernelOutputFeature: dn.outputFeature,
      kernelSpatial: dn.outputSpatial,
      ...canonOut,
    },
    featureGroupCount: Bg,
    batchGroupCount: G,
  });
  const back = sp.filter((i) => win[i]!.windowReversal).map((i) => 2 + i);
  if (back.length > 0) dr = b.reverse(dr, back);
  const toRhs: number[] = [];
  toRhs[dn.kernelInputFeature] = 0;
  toRhs[dn.kernelOutputFeature] = 1;
  dn.kernelSpatial.forEach((d, i) => (toRhs[d] = 2 + i));
  dr = permute(b, dr, toRhs);
  const rt = arr(rhs).type;
  return [dl, rt === lt ? dr : b.convert(dr, rt)];
}

const U = (f: (c: VjpContext, x: Instruction) => Instruction): VjpRule => {
  return (c) => [f(c, c.instr.operands[0]!)];
};

const noAsyncGradient = { none: "an asynchronous call (Kiln has no derivative rule for it)" };
const noTransferGradient = { none: "a transfer (Kiln has no derivative rule for transfers)" };
const noCollectiveGradient = { none: "a collective (Kiln has no derivative rule for collectives)" };

export const VJP_RULES: Record<Opcode, VjpRule | { none: string }> = {
  parameter: () => [],
  constant: () => [],
  iota: notFloat,
  "replica-id": notFloat,
  "partition-id": notFloat,
  "all-reduce": noCollectiveGradient,
  "all-reduce-start": noCollectiveGradient,
  "all-reduce-done": noCollectiveGradient,
  "all-gather": noCollectiveGradient,
  "all-gather-start": noCollectiveGradient,
  "all-gather-done": noCollectiveGradient,
  "reduce-scatter": noCollectiveGradient,
  "all-to-all": noCollectiveGradient,
  "collective-permute": noCollectiveGradient,
  "collective-permute-start": noCollectiveGradient,
  "collective-permute-done": noCollectiveGradient,
  "async-start": noAsyncGradient,
  "async-update": noAsyncGradient,
  "async-done": noAsyncGradient,
  "after-all": notFloat,
  "ragged-dot": none("a grouped matmul (Kiln has no derivative rule for it yet)"),
  map: none("a per-element call (Kiln has no derivative rule for it yet)"),
  scan: none("a scan (Kiln has no derivative rule for it yet)"),
  "ragged-all-to-all": noCollectiveGradient,
  "collective-broadcast": noCollectiveGradient,
  "add-dependency": none("an ordering on a token (Kiln has no derivative rule for it)"),
  "opt-barrier": none("an optimization barrier (Kiln has no derivative rule for it)"),
  send: noTransferGradient,
  "send-done": noTransferGradient,
  recv: noTransferGradient,
  "recv-done": noTransferGradient,
  infeed: noTransferGradient,
  outfeed: noTransferGradient,
  "copy-start": none("an asynchronous copy (Kiln has no derivative rule for it)"),
  "copy-done": none("an asynchronous copy (Kiln has no derivative rule for it)"),
  "reduce-precision": none("a rounding to a narrower float (Kiln has no derivative rule for it)"),
  rng: none("random numbers (no derivative)"),
  "rng-bit-generator": none("random bits (no derivative)"),
  abs: U(({ b, g }, x) => b.multiply(g, b.sign(x))),
  negate: U(({ b, g }) => b.negate(g)),
  sign: zeroGradient,
  exponential: U(({ b, g, instr }) => b.multiply(g, instr)),
  "exponential-minus-one": U(({ b, g }, x) => b.multiply(g, b.exp(x))),
  log: U(({ b, g }, x) => b.divide(g, x)),
  "log-plus-one": U((c, x) => c.b.divide(c.g, c.b.add(x, c.full(1, dimsOf(x))))),
  sqrt: U((c) => c.b.divide(c.b.multiply(c.g, c.full(0.5, dimsOf(c.g))), c.instr)),
  rsqrt: U((c, x) => {
    const { b, g, instr } = c;
    return b.multiply(b.multiply(g, c.full(-0.5, dimsOf(g))), b.divide(instr, x));
  }),
  cbrt: U((c) => {
    const { b, g, instr: y } = c;
    return b.divide(g, b.multiply(c.full(3, dimsOf(g)), b.multiply(y, y)));
  }),
  tanh: U((c) => {
    const { b, g, instr: y } = c;
    return b.multiply(g, b.subtract(c.full(1, dimsOf(g)), b.multiply(y, y)));
  }),
  logistic: U((c) => {
    const { b, g, instr: y } = c;
    return b.multiply(g, b.multiply(y, b.subtract(c.full(1, dimsOf(g)), y)));
  }),
  sine: U(({ b, g }, x) => b.multiply(g, b.cos(x))),
  cosine: U(({ b, g }, x) => b.negate(b.multiply(g, b.sin(x)))),
  tan: U((c) => {
    const { b, g, instr: y } = c;
    return b.multiply(g, b.add(c.full(1, dimsOf(g)), b.multiply(y, y)));
  }),
  erf: U((c, x) => {
    const { b, g } = c;
    const e = b.exp(b.negate(b.multiply(x, x)));
    return b.multiply(g, b.multiply(c.full(2 / Math.sqrt(Math.PI), dimsOf(g)), e));
  }),
  floor: zeroGradient,
  ceil: zeroGradient,
  "round-nearest-afz": zeroGradient,
  "round-nearest-even": zeroGradient,
  "is-finite": notFloat,
  not: notFloat,
  copy: U(({ g }) => g),
  convert: U(({ b, g }, x) => b.convert(g, arr(x).type)),
  "bitcast-convert": none("a bit reinterpretation has no derivative"),
  add: ({ g }) => [g, g],
  subtract: ({ b, g }) => [g, b.negate(g)],
  multiply: ({ b, g, instr }) => [
    b.multiply(g, instr.operands[1]!),
    b.multiply(g, instr.operands[0]!),
  ],
  divide: ({ b, g, instr }) => {
    const y = instr.operands[1]!;
    const gx = b.divide(g, y);
    return [gx, b.negate(b.multiply(gx, instr))];
  },
  remainder: remainderVjp,
  power: powerVjp,
  maximum: (c) => maskedPair(c, "GE"),
  minimum: (c) => maskedPair(c, "LE"),
  atan2: atan2Vjp,
  and: notFloat,
  or: notFloat,
  xor: notFloat,
  "shift-left": notFloat,
  "shift-right-arithmetic": notFloat,
  "shift-right-logical": notFloat,
  compare: notFloat,
  select: (c) => {
    const { b, g, instr } = c;
    const p = instr.operands[0]!;
    const zero = c.full(0, dimsOf(g));
    return [undefined, b.select(p, g, zero), b.select(p, zero, g)];
  },
  clamp: clampVjp,
  broadcast: broadcastVjp,
  reshape: U(({ b, g }, x) => b.reshape(g, dimsOf(x))),
  bitcast: none("a bitcast reinterprets a layout, which autodiff does not model"),
  transpose: U(({ b, g, instr }) => {
    const perm = instr.attrs.dimensions ?? [];
    const inv: number[] = [];
    perm.forEach((p, i) => (inv[p] = i));
    return b.transpose(g, inv);
  }),
  slice: sliceVjp,
  "dynamic-slice": dynamicSliceVjp,
  "dynamic-update-slice": dynamicUpdateSliceVjp,
  concatenate: concatenateVjp,
  pad: padVjp,
  reverse: U(({ b, g, instr }) => b.reverse(g, instr.attrs.dimensions ?? [])),
  dot: dotVjp,
  convolution: convolutionVjp,
  reduce: reduceVjp,
  "reduce-window": reduceWindowVjp,
  gather: gatherVjp,
  scatter: scatterVjp,
  sort: none("sort has no derivative here"),
  tuple: () => {
    throw new Error("tuple is handled by the driver");
  },
  "get-tuple-element": () => {
    throw new Error("get-tuple-element is handled by the driver");
  },
  fusion: none("differentiate before fusion"),
  call: none("calls are not differentiated (inline first)"),
  while: none("loops are not differentiated"),
  conditional: none("conditionals are not differentiated"),
  "get-dimension-size": notFloat,
  "set-dimension-size": none("bounded dynamism is not differentiated"),
  "custom-call": none("a custom-call is opaque"),
};
