// The dynamic padder's rewrite rules, one per opcode (a table typed over Opcode, so a new opcode
// without a rule does not compile). A rule gets the original instruction and its operands as
// padded values (static instruction + real sizes) and returns the padded value of its result:
// the same op on padded operands when padding cannot reach a real element (elementwise,
// broadcast, transpose, ...), the op on MASKED operands when it can (reductions over a dynamic
// dim, contractions, windows reaching past the real end, sort), or explicit data movement when
// the real elements would land in the wrong place (concatenate, reverse, dynamic-update-slice of
// a dynamic update). Real sizes follow the evaluator's rules for actual dims exactly
// (ir/evaluate*.ts), which is what makes the padded result equal the unpadded one. Reshape is in
// dynamic_reshape.ts, control flow in dynamic_control.ts.

import type { Attributes } from "../ir/attributes.ts";
import type { ComputationBuilder } from "../ir/builder.ts";
import { cloneAttributes } from "../ir/clone.ts";
import type { Computation, Instruction } from "../ir/module.ts";
import type { Opcode } from "../ir/opcodes.ts";
import { type ArrayShape, type ElementType, scalarShape, type Shape } from "../ir/shape.ts";
import { callRule, conditionalRule, fusionRule, whileRule } from "./dynamic_control.ts";
import { reshapeRule } from "./dynamic_reshape.ts";
import {
  arraySizes,
  type DimSize,
  dimsOf,
  DynamicPadderError,
  fullSizes,
  hasTracked,
  identityFor,
  type Padded,
  type PadCtx,
  type Sizes,
} from "./dynamic_sizes.ts";

export type Rule = (ctx: PadCtx, instr: Instruction, ops: readonly Padded[]) => Padded;

function arr(instr: Instruction): ArrayShape {
  if (instr.shape.kind !== "array") throw new DynamicPadderError("expected an array result", instr);
  return instr.shape;
}

function opArr(instr: Instruction, i: number): ArrayShape {
  const s = instr.operand(i).shape;
  if (s.kind !== "array") throw new DynamicPadderError(`operand ${i} must be an array`, instr);
  return s;
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** The copy of `instr` on the padded operands, with the given real sizes. */
function same(ctx: PadCtx, instr: Instruction, ops: readonly Padded[], sizes: Sizes): Padded {
  return { value: ctx.copy(instr, ops.map((o) => o.value)), sizes };
}

/**
 * Real sizes of an elementwise result: a dim is at its bound if any (non-scalar) operand has it
 * at its bound (the evaluator requires equal actual dims), else it takes the first operand's.
 */
function mergedDims(ops: readonly Padded[], rank: number, skipDim?: number): DimSize[] {
  return range(rank).map((d) => {
    if (d === skipDim) return null;
    let found: DimSize | undefined;
    for (const o of ops) {
      const s = dimsOf(o);
      if (s.length !== rank) continue;
      const v = s[d]!;
      if (v === null) return null;
      found ??= v;
    }
    return found ?? null;
  });
}

const elementwise: Rule = (ctx, instr, ops) => {
  if (instr.shape.kind === "tuple") return same(ctx, instr, ops, ops[0]!.sizes); // copy of a tuple
  return same(ctx, instr, ops, arraySizes(mergedDims(ops, arr(instr).dims.length)));
};

const leaf: Rule = (ctx, instr, ops) => same(ctx, instr, ops, fullSizes(instr.shape));

const parameterRule: Rule = (_ctx, instr) => {
  throw new DynamicPadderError("internal: parameters are bound by the caller", instr);
};

/** An opcode the padder has no rule for: fine on static shapes, refused on dynamic ones. */
const noRule = (what: string): Rule => (ctx, instr, ops) => {
  if (ops.some((o) => hasTracked(o.sizes)) || hasDynamic(instr.shape)) {
    throw new DynamicPadderError(
      `${what} with bounded dynamic operands or result cannot be padded (the padder has no ` +
        `rule for ${what})`,
      instr,
    );
  }
  return same(ctx, instr, ops, fullSizes(instr.shape));
};

/** Rejects an op whose operands or result have dynamic dims (its semantics are unknown). */
const opaque: Rule = (ctx, instr, ops) => {
  if (ops.some((o) => hasTracked(o.sizes)) || hasDynamic(instr.shape)) {
    throw new DynamicPadderError(
      `a custom-call with bounded dynamic operands or result cannot be padded: its ` +
        `semantics are unknown, so padding could leak into its result`,
      instr,
    );
  }
  return same(ctx, instr, ops, fullSizes(instr.shape));
};

/** An opcode the padder does not rewrite: fine on static shapes, refused on dynamic ones. */
const unsupported = (what: string): Rule => (ctx, instr, ops) => {
  if (ops.some((o) => hasTracked(o.sizes)) || hasDynamic(instr.shape)) {
    throw new DynamicPadderError(
      `${what} with bounded dynamic operands or result cannot be padded (the padder has no ` +
        "rule for collectives)",
      instr,
    );
  }
  return same(ctx, instr, ops, fullSizes(instr.shape));
};

function hasDynamic(s: Shape): boolean {
  return s.kind === "tuple" ? s.elements.some(hasDynamic) : s.dynamic.some((d) => d);
}

const bitcastConvert: Rule = (ctx, instr, ops) => {
  const s = dimsOf(ops[0]!);
  const rank = arr(instr).dims.length;
  const dims = range(rank).map((d) => (d < s.length ? s[d]! : null));
  return same(ctx, instr, ops, arraySizes(dims));
};

// ---- movement --------------------------------------------------------------------------------

const broadcast: Rule = (ctx, instr, ops) => {
  const s = dimsOf(ops[0]!);
  const dims: DimSize[] = arr(instr).dims.map(() => null);
  (instr.attrs.dimensions ?? []).forEach((r, i) => (dims[r] = s[i]!));
  return same(ctx, instr, ops, arraySizes(dims));
};

const transpose: Rule = (ctx, instr, ops) => {
  const s = dimsOf(ops[0]!);
  return same(ctx, instr, ops, arraySizes((instr.attrs.dimensions ?? []).map((p) => s[p]!)));
};

const slice: Rule = (ctx, instr, ops) => {
  const s = dimsOf(ops[0]!);
  const x = opArr(instr, 0);
  // A full slice of a dynamic dim keeps its real size (XLA, the evaluator); any other slice has
  // static size and reads only real elements whenever the unpadded program is valid.
  const dims = (instr.attrs.slice ?? []).map((sl, i) =>
    sl.start === 0 && sl.stride === 1 && sl.limit === x.dims[i] ? s[i]! : null,
  );
  return same(ctx, instr, ops, arraySizes(dims));
};

/** The index type start indices are computed in: s64 stays s64, the rest widen to s32. */
function indexType(t: ElementType): ElementType {
  return t === "s64" ? "s64" : "s32";
}

/** clamp(0, start, hi) on scalars of type t (hi an s32 size expression). */
function clampStart(ctx: PadCtx, start: Instruction, hi: Instruction, t: ElementType) {
  const em = ctx.em;
  return em.b.clamp(em.scalar(t, t === "s64" ? 0n : 0), start, em.convert(hi, t));
}

const dynamicSlice: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const s = dimsOf(ops[0]!);
  if (!s.some((d) => d !== null)) return same(ctx, instr, ops, fullSizes(instr.shape));
  // The evaluator clamps each start into [0, real size - slice size], not into the bound.
  const sizes = instr.attrs.dynamicSliceSizes ?? [];
  const t = indexType((instr.operand(1).shape as ArrayShape).type);
  const starts = ops.slice(1).map((o, i) => {
    const st = em.convert(o.value, t);
    const n = s[i];
    return n ? clampStart(ctx, st, em.sub(n, em.s32(sizes[i]!)), t) : st;
  });
  return { value: ctx.copy(instr, [ops[0]!.value, ...starts]), sizes: fullSizes(instr.shape) };
};

const dynamicUpdateSlice: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const b = em.b;
  const [x, u] = [ops[0]!, ops[1]!];
  const sx = dimsOf(x);
  const su = dimsOf(u);
  const xb = opArr(instr, 0).dims;
  const ub = opArr(instr, 1).dims;
  const result = arraySizes([...sx]);
  if (!hasTracked(x.sizes) && !hasTracked(u.sizes)) return same(ctx, instr, ops, result);
  const t = indexType((instr.operand(2).shape as ArrayShape).type);
  // Starts clamp into [0, real operand - real update] as in the unpadded program.
  const starts = ops.slice(2).map((o, i) => {
    const st = em.convert(o.value, t);
    if (sx[i] === null && su[i] === null) return st;
    return clampStart(ctx, st, em.sub(em.size(sx[i]!, xb[i]!), em.size(su[i]!, ub[i]!)), t);
  });
  const tracked = range(ub.length).filter((i) => su[i] !== null);
  if (tracked.length === 0) {
    return { value: ctx.copy(instr, [x.value, u.value, ...starts]), sizes: result };
  }
  // A dynamic update writes only its real part: widen the operand so the whole padded update
  // fits at the real start, write the update merged with what it covers, cut the widening off.
  const type = opArr(instr, 0).type;
  const zero = em.scalar(type, type === "s64" ? 0n : 0);
  const widened = b.pad(
    x.value,
    zero,
    xb.map((_, i) => [0, su[i] !== null ? ub[i]! : 0, 0] as const),
  );
  const covered = b.dynamicSlice(widened, starts, ub);
  const m = em.maskOf(ub, su, tracked)!;
  const merged = b.select(m, u.value, covered);
  const written = b.dynamicUpdateSlice(widened, merged, starts);
  const value = b.slice(
    written,
    xb.map(() => 0),
    xb,
  );
  return { value, sizes: result };
};

const concatenate: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const b = em.b;
  const d = instr.attrs.dimensions?.[0] ?? 0;
  const shape = arr(instr);
  const dims = mergedDims(ops, shape.dims.length, d);
  if (ops.every((o) => dimsOf(o)[d] === null)) return same(ctx, instr, ops, arraySizes(dims));
  // Real parts are laid end to end at real offsets: each operand is written whole at the running
  // real offset, so its padding is overwritten by the next operand's data.
  const bounds = ops.map((_, k) => opArr(instr, k).dims[d]!);
  const total = shape.dims[d]!;
  const first = ops[0]!;
  const zero = em.scalar(shape.type, shape.type === "s64" ? 0n : 0);
  let buf = b.pad(
    first.value,
    zero,
    shape.dims.map((_, i) => [0, i === d ? total - bounds[0]! : 0, 0] as const),
  );
  let offset = em.size(dimsOf(first)[d]!, bounds[0]!);
  ops.slice(1).forEach((o, k) => {
    const starts = shape.dims.map((_, i) => (i === d ? offset : em.s32(0)));
    buf = b.dynamicUpdateSlice(buf, o.value, starts);
    offset = em.add(offset, em.size(dimsOf(o)[d]!, bounds[k + 1]!));
  });
  dims[d] = offset;
  return { value: buf, sizes: arraySizes(dims) };
};

const pad: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const [x, v] = [ops[0]!, ops[1]!];
  const s = dimsOf(x);
  const cfg = instr.attrs.padding ?? [];
  const xb = opArr(instr, 0).dims;
  // Where high padding follows the real end, the padded operand's tail must read as the padding
  // value, as the unpadded program's high padding does.
  const m = em.maskOf(
    xb,
    s,
    range(xb.length).filter((i) => cfg[i]!.high > 0),
  );
  const operand = m ? em.fill(x.value, m, v.value) : x.value;
  const dims = s.map((n, i) => {
    if (n === null) return null;
    const p = cfg[i]!;
    let size = em.add(n, em.s32(p.low + p.high));
    if (p.interior > 0) {
      const holes = em.max(em.sub(n, em.s32(1)), em.s32(0));
      size = em.add(size, em.mul(holes, em.s32(p.interior)));
    }
    return size;
  });
  return { value: ctx.copy(instr, [operand, v.value]), sizes: arraySizes(dims) };
};

const reverse: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const b = em.b;
  const x = ops[0]!;
  const s = dimsOf(x);
  const xb = opArr(instr, 0).dims;
  const rev = ctx.copy(instr, [x.value]);
  const tracked = (instr.attrs.dimensions ?? []).filter((d) => s[d] !== null);
  if (tracked.length === 0) return { value: rev, sizes: x.sizes };
  // Reversing the padded dim puts the real part at [N - n, N): shift it back to the front.
  const type = opArr(instr, 0).type;
  const widened = b.pad(
    rev,
    em.scalar(type, type === "s64" ? 0n : 0),
    xb.map((n, i) => [0, tracked.includes(i) ? n : 0, 0] as const),
  );
  const starts = xb.map((n, i) => (tracked.includes(i) ? em.sub(em.s32(n), s[i]!) : em.s32(0)));
  return { value: b.dynamicSlice(widened, starts, xb), sizes: x.sizes };
};

const getDimensionSize: Rule = (ctx, instr, ops) => {
  const d = instr.attrs.dimensions?.[0] ?? 0;
  const value = ctx.em.size(dimsOf(ops[0]!)[d]!, opArr(instr, 0).dims[d]!);
  return { value, sizes: arraySizes([]) };
};

const setDimensionSize: Rule = (_ctx, instr, ops) => {
  const d = instr.attrs.dimensions?.[0] ?? 0;
  const dims = [...dimsOf(ops[0]!)];
  dims[d] = ops[1]!.value;
  return { value: ops[0]!.value, sizes: arraySizes(dims) };
};

// ---- contractions ----------------------------------------------------------------------------

/** `x` with the positions past the real size of each dim in `which` set to zero. */
function zeroPast(ctx: PadCtx, x: Padded, shape: ArrayShape, which: readonly number[]) {
  const em = ctx.em;
  const m = em.maskOf(shape.dims, dimsOf(x), which);
  if (!m) return x.value;
  return em.fill(x.value, m, em.scalar(shape.type, shape.type === "s64" ? 0n : 0));
}

const dot: Rule = (ctx, instr, ops) => {
  const dn = instr.attrs.dot!;
  const [l, r] = [ops[0]!, ops[1]!];
  const sl = dimsOf(l);
  const sr = dimsOf(r);
  // Both sides are zeroed past the real length of a contracted dim, so padded terms are 0·0
  // (never 0·inf) and add nothing.
  const lhs = zeroPast(ctx, l, opArr(instr, 0), dn.lhsContracting);
  const rhs = zeroPast(ctx, r, opArr(instr, 1), dn.rhsContracting);
  const dims: DimSize[] = dn.lhsBatch.map((d, i) => {
    const a = sl[d]!;
    const b = sr[dn.rhsBatch[i]!]!;
    return a === null || b === null ? null : a;
  });
  const free = (s: readonly DimSize[], used: readonly number[]) =>
    s.forEach((v, i) => {
      if (!used.includes(i)) dims.push(v);
    });
  free(sl, [...dn.lhsBatch, ...dn.lhsContracting]);
  free(sr, [...dn.rhsBatch, ...dn.rhsContracting]);
  const value = ctx.copy(instr, [lhs, rhs]);
  ctx.noteReduced(
    value,
    dn.lhsContracting.map((d, i) => ({ dim: d, size: sl[d] ?? sr[dn.rhsContracting[i]!]! })),
  );
  return { value, sizes: arraySizes(dims) };
};

const convolution: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const d = instr.attrs.convDims!;
  const window = instr.attrs.window ?? [];
  const [l, r] = [ops[0]!, ops[1]!];
  const sl = dimsOf(l);
  const sr = dimsOf(r);
  const fgc = instr.attrs.featureGroupCount ?? 1;
  const bgc = instr.attrs.batchGroupCount ?? 1;
  const reject = (why: string): never => {
    throw new DynamicPadderError(why, instr);
  };
  if (d.kernelSpatial.some((k) => sr[k] !== null) || sr[d.kernelOutputFeature] !== null) {
    reject(`a kernel with a dynamic spatial or output feature dim cannot be padded`);
  }
  const featureDynamic = sl[d.inputFeature] !== null || sr[d.kernelInputFeature] !== null;
  if (featureDynamic && fgc > 1) {
    reject(`a dynamic input feature dim with feature_group_count ${fgc} cannot be padded`);
  }
  if (sl[d.inputBatch] !== null && bgc > 1) {
    reject(`a dynamic batch dim with batch_group_count ${bgc} cannot be padded`);
  }
  // Input positions past the real end are zeroed where a real output's window can reach them
  // (high padding) and along a contracted feature dim.
  const lhsDims = [
    d.inputFeature,
    ...d.inputSpatial.filter((s, i) => window[i]!.padHigh > 0 && sl[s] !== null),
  ];
  const lhs = zeroPast(ctx, l, opArr(instr, 0), lhsDims);
  const rhs = zeroPast(ctx, r, opArr(instr, 1), [d.kernelInputFeature]);
  const rank = arr(instr).dims.length;
  const dims: DimSize[] = new Array<DimSize>(rank).fill(null);
  dims[d.outputBatch] = sl[d.inputBatch]!;
  d.outputSpatial.forEach((o, i) => {
    const n = sl[d.inputSpatial[i]!]!;
    dims[o] = n === null ? null : em.windowedSize(n, window[i]!);
  });
  return { value: ctx.copy(instr, [lhs, rhs]), sizes: arraySizes(dims) };
};

// ---- reductions ------------------------------------------------------------------------------

/** The identity of a reducer `op(p0, p1)` over type t, when it is one of the known ops. */
function reducerIdentity(c: Computation, t: ElementType) {
  const params = c.parameters;
  const root = c.root;
  if (params.length !== 2 || c.instructions.length !== 3) return undefined;
  const scalarT = (i: Instruction) =>
    i.shape.kind === "array" && i.shape.dims.length === 0 && i.shape.type === t;
  if (!params.every(scalarT) || !scalarT(root)) return undefined;
  const [a, b] = root.operands;
  if (!a || !b || a === b || !params.includes(a) || !params.includes(b)) return undefined;
  return identityFor(root.opcode, t);
}

/** Copies a scalar computation's body into `b` with its parameters bound to `args`. */
export function inlineScalar(
  b: ComputationBuilder,
  c: Computation,
  args: readonly Instruction[],
): Instruction {
  const env = new Map<Instruction, Instruction>();
  for (const i of c.instructions) {
    if (i.opcode === "parameter") {
      env.set(i, args[i.attrs.parameterNumber ?? 0]!);
      continue;
    }
    const ops = i.operands.map((o) => env.get(o)!);
    env.set(i, b.op(i.opcode, ops, cloneAttributes(i.attrs), i.called, i.shape));
  }
  return env.get(c.root)!;
}

/**
 * A reducer over N values plus a pred "is real" flag, lifted from `reducer` the way a semigroup
 * becomes a monoid: a padded element leaves the accumulator as it is, so no identity is needed.
 */
function maskedReducer(ctx: PadCtx, reducer: Computation, types: readonly ElementType[]) {
  const shapes: Shape[] = [
    ...types.map((t) => scalarShape(t)),
    scalarShape("pred"),
    ...types.map((t) => scalarShape(t)),
    scalarShape("pred"),
  ];
  const n = types.length;
  return ctx.subComputation(`${reducer.name}.masked`, shapes, (sub, p) => {
    const b = sub.em.b;
    const accs = p.slice(0, n);
    const accReal = p[n]!;
    const vals = p.slice(n + 1, 2 * n + 1);
    const valReal = p[2 * n + 1]!;
    const r = inlineScalar(b, reducer, [...accs, ...vals]);
    const rs = n === 1 ? [r] : range(n).map((i) => b.getTupleElement(r, i));
    const outs = range(n).map((i) =>
      b.select(valReal, b.select(accReal, rs[i]!, vals[i]!), accs[i]!),
    );
    return b.tuple([...outs, b.or(accReal, valReal)]);
  });
}

/** The result of a masked (N+1)-output reduction, without the flag output. */
function dropFlag(ctx: PadCtx, r: Instruction, n: number): Instruction {
  const b = ctx.em.b;
  const outs = range(n).map((i) => b.getTupleElement(r, i));
  return n === 1 ? outs[0]! : b.tuple(outs);
}

/**
 * reduce / reduce-window over dims of which `masked` have real sizes: padded elements become the
 * reducer's identity, or, for a reducer without a known one (argmax), are skipped through a
 * masked reducer.
 */
function maskedReduction(
  ctx: PadCtx,
  instr: Instruction,
  ops: readonly Padded[],
  masked: readonly number[],
  attrs: Attributes,
): Instruction {
  const em = ctx.em;
  const b = em.b;
  const n = ops.length / 2;
  const inputs = ops.slice(0, n);
  const inits = ops.slice(n).map((o) => o.value);
  const shape = opArr(instr, 0);
  const m = em.maskOf(shape.dims, dimsOf(inputs[0]!), masked);
  if (!m) return ctx.copy(instr, ops.map((o) => o.value));
  const reducer = instr.called[0]!;
  const types = inputs.map((_, i) => opArr(instr, i).type);
  const identity = n === 1 ? reducerIdentity(reducer, types[0]!) : undefined;
  if (identity !== undefined) {
    const x = em.fill(inputs[0]!.value, m, em.scalar(types[0]!, identity));
    const r = ctx.copy(instr, [x, inits[0]!]);
    // Only a reduce: a reduce-window's windows overlap the padding differently.
    if (instr.opcode === "reduce") {
      const s = dimsOf(inputs[0]!);
      ctx.noteReduced(r, masked.map((d) => ({ dim: d, size: s[d]! })));
    }
    return r;
  }
  const lifted = maskedReducer(ctx, reducer, types);
  const r = b.op(
    instr.opcode,
    [...inputs.map((x) => x.value), m, ...inits, em.scalar("pred", true)],
    cloneAttributes(attrs),
    [lifted],
  );
  return dropFlag(ctx, r, n);
}

function resultSizes(instr: Instruction, dims: readonly DimSize[]): Sizes {
  return instr.shape.kind === "tuple"
    ? { kind: "tuple", elements: instr.shape.elements.map(() => arraySizes(dims)) }
    : arraySizes(dims);
}

const reduce: Rule = (ctx, instr, ops) => {
  const reduced = instr.attrs.dimensions ?? [];
  const s = dimsOf(ops[0]!);
  const value = maskedReduction(ctx, instr, ops, reduced, instr.attrs);
  const kept = s.filter((_, i) => !reduced.includes(i));
  return { value, sizes: resultSizes(instr, kept) };
};

const reduceWindow: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const window = instr.attrs.window ?? [];
  const s = dimsOf(ops[0]!);
  // A real output's window reaches past the real end only through high padding.
  const masked = range(s.length).filter((i) => window[i]!.padHigh > 0);
  const value = maskedReduction(ctx, instr, ops, masked, instr.attrs);
  const dims = s.map((n, i) => (n === null ? null : em.windowedSize(n, window[i]!)));
  return { value, sizes: resultSizes(instr, dims) };
};

// ---- indexing --------------------------------------------------------------------------------

/**
 * A per-element bound for an index array: `values[k]` along the index vector dim `ivd` of the
 * indices (or everywhere when the index vector is implicit), in type t.
 */
function perComponent(
  ctx: PadCtx,
  values: readonly Instruction[],
  idxDims: readonly number[],
  ivd: number,
  t: ElementType,
): Instruction {
  const em = ctx.em;
  const b = em.b;
  const vs = values.map((v) => em.convert(v, t));
  if (ivd === idxDims.length) return em.splat(vs[0]!, idxDims);
  const vec = vs.length === 1 ? b.reshape(vs[0]!, [1]) : b.concatenate(
    vs.map((v) => b.reshape(v, [1])),
    0,
  );
  return b.broadcast(vec, idxDims, [ivd]);
}

const gather: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const b = em.b;
  const g = instr.attrs.gather!;
  const sliceSizes = instr.attrs.gatherSliceSizes ?? [];
  const [x, idx] = [ops[0]!, ops[1]!];
  const sx = dimsOf(x);
  const si = dimsOf(idx);
  const xb = opArr(instr, 0).dims;
  const idxShape = opArr(instr, 1);
  let indices = idx.value;
  if (g.startIndexMap.some((d) => sx[d] !== null)) {
    // Start indices clamp into [0, real size - slice size] as in the unpadded program.
    const t = indexType(idxShape.type);
    const his = g.startIndexMap.map((d) => em.sub(em.size(sx[d]!, xb[d]!), em.s32(sliceSizes[d]!)));
    const hi = perComponent(ctx, his, idxShape.dims, g.indexVectorDim, t);
    const lo = em.splat(em.scalar(t, t === "s64" ? 0n : 0), idxShape.dims);
    indices = b.clamp(lo, em.convert(idx.value, t), hi);
  }
  const outRank = arr(instr).dims.length;
  const batchIdxDims = range(idxShape.dims.length).filter((d) => d !== g.indexVectorDim);
  let k = 0;
  // Offset dims have the static slice sizes; batch dims follow the indices.
  const dims = range(outRank).map((p) =>
    g.offsetDims.includes(p) ? null : si[batchIdxDims[k++]!]!,
  );
  return { value: ctx.copy(instr, [x.value, indices]), sizes: arraySizes(dims) };
};

const scatter: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const b = em.b;
  const sd = instr.attrs.scatter!;
  const n = (ops.length - 1) / 2;
  const inputs = ops.slice(0, n);
  const idx = ops[n]!;
  const updates = ops.slice(n + 1);
  const sx = dimsOf(inputs[0]!);
  const si = dimsOf(idx);
  const su = dimsOf(updates[0]!);
  const xb = opArr(instr, 0).dims;
  const ub = opArr(instr, n + 1).dims;
  const idxShape = opArr(instr, n);
  const sizes = resultSizes(instr, sx);
  if (sd.updateWindowDims.some((d) => su[d] !== null)) {
    throw new DynamicPadderError(
      `a scatter whose update window has a dynamic dim cannot be padded`,
      instr,
    );
  }
  const operandDims = sd.scatterDimsToOperandDims.filter((d) => sx[d] !== null);
  const batchDims = range(idxShape.dims.length).filter(
    (d) => d !== sd.indexVectorDim && si[d] !== null,
  );
  if (operandDims.length === 0 && batchDims.length === 0) {
    return same(ctx, instr, ops, sizes);
  }
  const k = sd.scatterDimsToOperandDims.length;
  if (k === 0) {
    throw new DynamicPadderError(
      `a scatter without index components cannot skip padded update positions`,
      instr,
    );
  }
  // An update window that does not fit the REAL operand is skipped by the unpadded program:
  // its start is moved past the bound so the padded program skips it too. So are the update
  // positions past the real length of the indices.
  const windowSize = xb.map(() => 1);
  const windowOperandDims = range(xb.length).filter(
    (d) => !sd.insertedWindowDims.includes(d) && !sd.inputBatchingDims.includes(d),
  );
  windowOperandDims.forEach((d, i) => (windowSize[d] = ub[sd.updateWindowDims[i]!]!));
  const t = indexType(idxShape.type);
  let indices = em.convert(idx.value, t);
  const oob = perComponent(
    ctx,
    sd.scatterDimsToOperandDims.map((d) => em.s32(xb[d]!)),
    idxShape.dims,
    sd.indexVectorDim,
    t,
  );
  if (operandDims.length > 0) {
    const his = sd.scatterDimsToOperandDims.map((d) =>
      em.sub(em.size(sx[d]!, xb[d]!), em.s32(windowSize[d]!)),
    );
    const hi = perComponent(ctx, his, idxShape.dims, sd.indexVectorDim, t);
    indices = b.select(b.compare(indices, hi, "LE"), indices, oob);
  }
  const m = em.maskOf(idxShape.dims, si, batchDims);
  if (m) indices = b.select(m, indices, oob);
  const value = ctx.copy(instr, [
    ...inputs.map((i) => i.value),
    indices,
    ...updates.map((u) => u.value),
  ]);
  return { value, sizes };
};

const sort: Rule = (ctx, instr, ops) => {
  const em = ctx.em;
  const b = em.b;
  const d = instr.attrs.dimensions?.[0] ?? 0;
  const s = dimsOf(ops[0]!);
  const sizes = resultSizes(instr, s);
  if (s[d] === null) return same(ctx, instr, ops, sizes);
  // A leading key (0 real, 1 padding) compared first sorts the padding after every real
  // element; real elements meet only each other, through the original comparator.
  const shape = opArr(instr, 0);
  const isPad = b.select(
    em.mask(shape.dims, d, s[d]!),
    em.splat(em.s32(0), shape.dims),
    em.splat(em.s32(1), shape.dims),
  );
  const cmp = instr.called[0]!;
  const paramShapes: Shape[] = [scalarShape("s32"), scalarShape("s32")];
  ops.forEach((_, i) => {
    const t = opArr(instr, i).type;
    paramShapes.push(scalarShape(t), scalarShape(t));
  });
  const comparator = ctx.subComputation(`${cmp.name}.padding_last`, paramShapes, (sub, p) => {
    const cb = sub.em.b;
    const differ = cb.compare(p[0]!, p[1]!, "NE");
    const realFirst = cb.compare(p[0]!, p[1]!, "LT");
    return cb.select(differ, realFirst, inlineScalar(cb, cmp, p.slice(2)));
  });
  const attrs = cloneAttributes(instr.attrs);
  const sorted = b.op("sort", [isPad, ...ops.map((o) => o.value)], attrs, [comparator]);
  const outs = ops.map((_, i) => b.getTupleElement(sorted, i + 1));
  return { value: outs.length === 1 ? outs[0]! : b.tuple(outs), sizes };
};

// ---- tuples ----------------------------------------------------------------------------------

const tuple: Rule = (ctx, instr, ops) =>
  same(ctx, instr, ops, { kind: "tuple", elements: ops.map((o) => o.sizes) });

const getTupleElement: Rule = (ctx, instr, ops) => {
  const s = ops[0]!.sizes;
  if (s.kind !== "tuple") throw new DynamicPadderError("operand is not a tuple", instr);
  return same(ctx, instr, ops, s.elements[instr.attrs.tupleIndex ?? 0]!);
};

export const RULES = {
  parameter: parameterRule,
  constant: leaf,
  iota: leaf,
  "replica-id": leaf,
  "partition-id": leaf,
  "all-reduce": unsupported("all-reduce"),
  "all-reduce-start": unsupported("all-reduce-start"),
  "all-reduce-done": unsupported("all-reduce-done"),
  "all-gather": unsupported("all-gather"),
  "all-gather-start": unsupported("all-gather-start"),
  "all-gather-done": unsupported("all-gather-done"),
  "reduce-scatter": unsupported("reduce-scatter"),
  "all-to-all": unsupported("all-to-all"),
  "collective-permute": unsupported("collective-permute"),
  "collective-permute-start": unsupported("collective-permute-start"),
  "collective-permute-done": unsupported("collective-permute-done"),
  "async-start": unsupported("async-start"),
  "async-update": unsupported("async-update"),
  "async-done": unsupported("async-done"),
  "after-all": leaf,
  "ragged-dot": noRule("ragged-dot"),
  map: noRule("map"),
  scan: noRule("scan"),
  "ragged-all-to-all": noRule("ragged-all-to-all"),
  "collective-broadcast": noRule("collective-broadcast"),
  "add-dependency": noRule("add-dependency"),
  "opt-barrier": noRule("opt-barrier"),
  send: noRule("send"),
  "send-done": noRule("send-done"),
  recv: noRule("recv"),
  "recv-done": noRule("recv-done"),
  infeed: noRule("infeed"),
  outfeed: noRule("outfeed"),
  "copy-start": noRule("copy-start"),
  "copy-done": noRule("copy-done"),
  "reduce-precision": elementwise,
  rng: noRule("rng"),
  "rng-bit-generator": noRule("rng-bit-generator"),
  abs: elementwise,
  negate: elementwise,
  sign: elementwise,
  exponential: elementwise,
  "exponential-minus-one": elementwise,
  log: elementwise,
  "log-plus-one": elementwise,
  sqrt: elementwise,
  rsqrt: elementwise,
  cbrt: elementwise,
  tanh: elementwise,
  logistic: elementwise,
  sine: elementwise,
  cosine: elementwise,
  tan: elementwise,
  erf: elementwise,
  floor: elementwise,
  ceil: elementwise,
  "round-nearest-afz": elementwise,
  "round-nearest-even": elementwise,
  "is-finite": elementwise,
  not: elementwise,
  copy: elementwise,
  convert: elementwise,
  "bitcast-convert": bitcastConvert,
  add: elementwise,
  subtract: elementwise,
  multiply: elementwise,
  divide: elementwise,
  remainder: elementwise,
  power: elementwise,
  maximum: elementwise,
  minimum: elementwise,
  atan2: elementwise,
  and: elementwise,
  or: elementwise,
  xor: elementwise,
  "shift-left": elementwise,
  "shift-right-arithmetic": elementwise,
  "shift-right-logical": elementwise,
  compare: elementwise,
  select: elementwise,
  clamp: elementwise,
  broadcast,
  reshape: reshapeRule,
  bitcast: opaque,
  transpose,
  slice,
  "dynamic-slice": dynamicSlice,
  "dynamic-update-slice": dynamicUpdateSlice,
  concatenate,
  pad,
  reverse,
  dot,
  convolution,
  reduce,
  "reduce-window": reduceWindow,
  gather,
  scatter,
  sort,
  tuple,
  "get-tuple-element": getTupleElement,
  fusion: fusionRule,
  call: callRule,
  while: whileRule,
  conditional: conditionalRule,
  "get-dimension-size": getDimensionSize,
  "set-dimension-size": setDimensionSize,
  "custom-call": opaque,
} satisfies { [K in Opcode]: Rule };
