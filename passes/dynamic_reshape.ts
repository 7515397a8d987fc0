// Reshape under the dynamic padder. The real result dims follow the evaluator's rule (static
// dims as declared; with several dynamic dims, those matching an operand dim in a common prefix
// or suffix keep its size; the one left open is what the element count leaves). The data needs
// no movement when the real elements sit where a plain reshape of the padded buffer puts them:
// both sides keep their real elements as a prefix of the buffer ([<=T, 4] -> [<=4T]), or the
// reshape splits and merges only groups of dims that each carry at most one dynamic dim at
// their front ([B, <=T, H*D] -> [B, <=T, H, D], the attention head split). Anything else
// ([2, <=T] -> [<=2T]) is relaid out by a gather whose indices are computed from the real
// sizes: for each result position, its row-major rank among the real elements, decoded into the
// operand's real index, encoded at the operand's padded strides.

import type { Instruction } from "../ir/module.ts";
import type { ArrayShape } from "../ir/shape.ts";
import { arrayShape } from "../ir/shape.ts";
import {
  arraySizes,
  type DimSize,
  dimsOf,
  DynamicPadderError,
  type Emitter,
  type Padded,
  type PadCtx,
} from "./dynamic_sizes.ts";

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** Real result sizes of a reshape, per the evaluator's rule (see ir/evaluate_movement.ts). */
function resultSizes(
  em: Emitter,
  xs: readonly DimSize[],
  x: ArrayShape,
  r: ArrayShape,
): DimSize[] {
  const sr: DimSize[] = r.dims.map(() => null);
  const open = new Set(range(r.dims.length).filter((i) => r.dynamic[i]));
  if (open.size > 1) {
    const n = Math.min(r.dims.length, x.dims.length);
    const same = (i: number, j: number) =>
      r.dims[i] === x.dims[j] && r.dynamic[i] === x.dynamic[j];
    for (let k = 0; k < n && same(k, k); k++) {
      if (open.delete(k)) sr[k] = xs[k]!;
    }
    for (let k = 1; k <= n && same(r.dims.length - k, x.dims.length - k); k++) {
      if (open.delete(r.dims.length - k)) sr[r.dims.length - k] = xs[x.dims.length - k]!;
    }
  }
  // Several open dims: the evaluator accepts only the full bounds, so they stay at the bound.
  if (open.size !== 1) return sr;
  const [d] = [...open] as [number];
  if (xs.every((s) => s === null) && sr.every((s) => s === null)) return sr;
  const count = em.product(xs.map((s, j) => s ?? x.dims[j]!));
  const rest = em.product(sr.map((s, i) => (i === d ? 1 : (s ?? r.dims[i]!))));
  // A zero-sized rest leaves the open dim at its bound (the evaluator's rule).
  const b = em.b;
  sr[d] = b.select(b.compare(rest, em.s32(0), "EQ"), em.s32(r.dims[d]!), em.div(count, rest));
  return sr;
}

/** True when every tracked dim has only bound-1 dims before it: the real data is a prefix. */
function prefixLayout(sizes: readonly DimSize[], bounds: readonly number[], dims: number[]) {
  return dims.every((j, k) => sizes[j] === null || dims.slice(0, k).every((i) => bounds[i] === 1));
}

/** Groups of operand and result dims with equal bound products (no zero bounds), or null. */
function groups(a: readonly number[], b: readonly number[]): [number[], number[]][] | null {
  const out: [number[], number[]][] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const ga: number[] = [];
    const gb: number[] = [];
    let pa = 1;
    let pb = 1;
    if (i < a.length) {
      ga.push(i);
      pa *= a[i++]!;
    }
    if (j < b.length) {
      gb.push(j);
      pb *= b[j++]!;
    }
    while (pa !== pb) {
      if (pa < pb) {
        if (i >= a.length) return null;
        ga.push(i);
        pa *= a[i++]!;
      } else {
        if (j >= b.length) return null;
        gb.push(j);
        pb *= b[j++]!;
      }
    }
    out.push([ga, gb]);
  }
  return out;
}

/** True when a plain reshape of the padded buffer puts every real element in its place. */
function layoutCompatible(
  xs: readonly DimSize[],
  x: ArrayShape,
  sr: readonly DimSize[],
  r: ArrayShape,
): boolean {
  if (x.dims.includes(0) || r.dims.includes(0)) return true; // no elements at all
  if (sr.every((s) => s === null)) return true; // the unpadded program needs a full operand
  const prefixX = prefixLayout(xs, x.dims, range(x.dims.length));
  if (prefixX && prefixLayout(sr, r.dims, range(r.dims.length))) return true;
  const gs = groups(x.dims, r.dims);
  if (!gs) return false;
  return gs.every(([ga, gb]) => {
    const ta = ga.filter((j) => xs[j] !== null).length;
    const tb = gb.filter((i) => sr[i] !== null).length;
    if (ta === 0 && tb === 0) return true;
    return ta === 1 && tb === 1 && prefixLayout(xs, x.dims, ga) && prefixLayout(sr, r.dims, gb);
  });
}

/** Row-major strides of sizes given as instructions or constants. */
function strides(em: Emitter, sizes: readonly (Instruction | number)[]): Instruction[] {
  const out: Instruction[] = [];
  let acc: (Instruction | number)[] = [];
  for (let k = sizes.length - 1; k >= 0; k--) {
    out[k] = em.product(acc);
    acc = [...acc, sizes[k]!];
  }
  return out;
}

/** The padded result of a reshape that needs its real elements moved (see the file header). */
function relayout(
  em: Emitter,
  x: Padded,
  xShape: ArrayShape,
  sr: readonly DimSize[],
  r: ArrayShape,
): Instruction {
  const b = em.b;
  const total = xShape.dims.reduce((p, d) => p * d, 1);
  if (total >= 2 ** 31) {
    throw new DynamicPadderError(`a relayout of ${total} elements does not fit s32 indices`);
  }
  const xs = dimsOf(x);
  const rdims = r.dims;
  const splat = (s: Instruction) => em.splat(s, rdims);
  // rank = the row-major position of each result element among the real elements.
  const rStrides = strides(em, sr.map((s, i) => s ?? rdims[i]!));
  let rank: Instruction | undefined;
  rdims.forEach((n, k) => {
    if (n === 1) return;
    const term = b.multiply(b.iota(arrayShape("s32", rdims), k), splat(rStrides[k]!));
    rank = rank ? b.add(rank, term) : term;
  });
  rank ??= splat(em.s32(0));
  const xStrides = strides(em, xs.map((s, j) => s ?? xShape.dims[j]!));
  let pos: Instruction | undefined;
  let padStride = 1;
  for (let j = xShape.dims.length - 1; j >= 0; j--) {
    const n = xShape.dims[j]!;
    if (n !== 1) {
      let coord = b.divide(rank, splat(em.max(xStrides[j]!, em.s32(1))));
      if (j > 0) coord = b.remainder(coord, splat(em.max(em.size(xs[j]!, n), em.s32(1))));
      const term = padStride === 1 ? coord : b.multiply(coord, splat(em.s32(padStride)));
      pos = pos ? b.add(pos, term) : term;
    }
    padStride *= n;
  }
  pos ??= splat(em.s32(0));
  const flat = b.reshape(x.value, [total]);
  const gathered = b.gather(
    flat,
    pos,
    { offsetDims: [], collapsedSliceDims: [0], startIndexMap: [0], indexVectorDim: rdims.length },
    [1],
  );
  return gathered;
}

export function reshapeRule(ctx: PadCtx, instr: Instruction, ops: readonly Padded[]): Padded {
  const em = ctx.em;
  const x = ops[0]!;
  const xShape = instr.operand(0).shape;
  const r = instr.shape;
  if (xShape.kind !== "array" || r.kind !== "array") {
    throw new DynamicPadderError("reshape needs array shapes", instr);
  }
  const xs = dimsOf(x);
  const sr = resultSizes(em, xs, xShape, r);
  if (layoutCompatible(xs, xShape, sr, r)) {
    return { value: ctx.copy(instr, [x.value]), sizes: arraySizes(sr) };
  }
  return { value: relayout(em, x, xShape, sr, r), sizes: arraySizes(sr) };
}
