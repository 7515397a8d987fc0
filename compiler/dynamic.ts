// Bounded dynamism's frontend: which dims of a call's argument tensors are dynamic, the bucket
// a real size falls in, and the bad-input errors. A dim becomes dynamic in one of three ways:
// the `dynamic` compile option (keyed by the argument's path as guards print it — `x`,
// `options.attentionMask` — or by a top-level argument's position, "0"), `markDynamic` on the
// tensor itself (like torch._dynamo.mark_dynamic), or AUTOMATIC dynamism (the default): a dim
// whose size changed once between calls. Sizes 0 and 1 are always specialized (compiled as
// static), as in PyTorch, because code treats them specially (broadcasting, empty tensors). A
// bucket is the closed range of sizes one compiled program serves; its top is the bound the
// program is compiled for (see compiler/dynamic_module.ts for how the program is built).

import { allocate, Literal, type LiteralData } from "../ir/literal.ts";
import { operandLiteral, tensorFromLiteral } from "../tensor/dispatch.ts";
import { Tensor } from "../tensor/tensor.ts";
import { checkKnownKeys, suggestion } from "../util/suggest.ts";
import { describeValue } from "./guards.ts";
import { formatPath } from "./pytree.ts";

/** A declared range of sizes for one dim (inclusive; min defaults to 0, max to unbounded). */
export interface DimRange {
  readonly min?: number;
  readonly max?: number;
}

/**
 * How sizes are grouped into compiled programs: "pow2" (2, 3-4, 5-8, ..., the default), an
 * increasing list of bucket tops (`[16, 32, 64]`), fixed steps (`{ multiple: 64 }`), or "none":
 * one program for the whole declared range, compiled at its max.
 */
export type BucketPolicy = "pow2" | "none" | readonly number[] | { readonly multiple: number };

/** Per argument path (or top-level position), per dim: its range (`true`: any size). */
export type DynamicSpec = Readonly<Record<string, Readonly<Record<number, DimRange | true>>>>;

/** The `dynamic` compile option: "auto" (default), false (always static), or declared dims. */
export type DynamicOption = "auto" | false | DynamicSpec;

/** A bad dynamic declaration, or a size outside a declared range (outOfRange: "error"). */
export class DynamicShapeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DynamicShapeError";
  }
}

// ---- markDynamic -----------------------------------------------------------------------------

const marks = new WeakMap<Tensor, Map<number, DimRange>>();

/**
 * Declares dim `dim` of `t` dynamic within `range` for the next compiled calls that receive
 * `t` (negative dims count from the end). Returns `t`.
 */
export function markDynamic(t: Tensor, dim: number, range: DimRange = {}): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`markDynamic: expected a tensor, got ${describeValue(t)}`);
  }
  const r = t.shape.length;
  const d = dim < 0 ? dim + r : dim;
  if (!Number.isInteger(dim) || d < 0 || d >= r) {
    throw new DynamicShapeError(
      `markDynamic: dim ${String(dim)} is out of range for a tensor of shape [${t.shape.join(
        ", ",
      )}]`,
    );
  }
  checkRange(range, `markDynamic(dim ${dim})`);
  let m = marks.get(t);
  if (!m) marks.set(t, (m = new Map()));
  m.set(d, { ...range });
  return t;
}

/** The dims markDynamic declared on `t`. */
export function dynamicMarks(t: Tensor): ReadonlyMap<number, DimRange> | undefined {
  return marks.get(t);
}

// ---- validation ------------------------------------------------------------------------------

const dynamicError = (message: string) => new DynamicShapeError(message);

function checkRange(range: DimRange, where: string): void {
  if (typeof range !== "object" || range === null || Array.isArray(range)) {
    throw new DynamicShapeError(
      `${where}: a range must be { min?, max? } or true, got ${describeValue(range)}`,
    );
  }
  checkKnownKeys(range, ["min", "max"], where, dynamicError, "range key");
  const { min, max } = range;
  for (const [k, v] of [["min", min], ["max", max]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 0)) {
      throw new DynamicShapeError(`${where}: ${k} must be an integer >= 0, got ${String(v)}`);
    }
  }
  if (min !== undefined && max !== undefined && min > max) {
    throw new DynamicShapeError(`${where}: min (${min}) > max (${max})`);
  }
}

/** Throws a DynamicShapeError for a malformed bucket policy. */
export function checkBuckets(p: BucketPolicy): void {
  if (p === "pow2" || p === "none") return;
  if (Array.isArray(p)) {
    const list = p as readonly number[];
    if (list.length === 0) throw new DynamicShapeError(`buckets: the list is empty`);
    list.forEach((e, i) => {
      if (!Number.isInteger(e) || e < 1) {
        throw new DynamicShapeError(`buckets: edge ${i} is ${String(e)}; edges are integers >= 1`);
      }
      if (i > 0 && e <= list[i - 1]!) {
        throw new DynamicShapeError(
          `buckets: the list must be strictly increasing, but edge ${i} (${e}) <= edge ${
            i - 1
          } (${list[i - 1]})`,
        );
      }
    });
    return;
  }
  if (typeof p === "object" && p !== null && "multiple" in p) {
    checkKnownKeys(p, ["multiple"], "buckets", dynamicError, "key");
    const m = (p as { multiple: unknown }).multiple;
    if (typeof m !== "number" || !Number.isInteger(m) || m < 1) {
      throw new DynamicShapeError(`buckets: multiple must be an integer >= 1, got ${String(m)}`);
    }
    return;
  }
  throw new DynamicShapeError(
    `buckets: expected "pow2", "none", an increasing list or { multiple }, got ${describeValue(p)}`,
  );
}

/** Throws a DynamicShapeError for a malformed `dynamic` option. */
export function checkDynamicOption(d: DynamicOption, buckets: BucketPolicy): void {
  if (d === "auto") {
    if (buckets === "none") {
      throw new DynamicShapeError(
        `buckets: "none" compiles one program at a declared max; declare the dims with ` +
          `dynamic: { x: { 1: { max: 1024 } } } or markDynamic (dynamic: "auto" has no max)`,
      );
    }
    return;
  }
  if (d === false) return;
  if (typeof d !== "object" || d === null || Array.isArray(d)) {
    throw new DynamicShapeError(
      `dynamic: expected "auto", false or { arg: { dim: { min?, max? } } }, got ` +
        describeValue(d),
    );
  }
  for (const [arg, dims] of Object.entries(d)) {
    if (typeof dims !== "object" || dims === null || Array.isArray(dims)) {
      throw new DynamicShapeError(
        `dynamic.${arg}: expected { dim: { min?, max? } }, got ${describeValue(dims)}`,
      );
    }
    for (const [k, r] of Object.entries(dims)) {
      if (!/^-?\d+$/.test(k)) {
        throw new DynamicShapeError(
          `dynamic.${arg}: '${k}' is not a dim index (keys are dims: { 1: { max: 1024 } })`,
        );
      }
      if (r !== true) checkRange(r, `dynamic.${arg}[${k}]`);
      if (buckets === "none" && (r === true || r.max === undefined)) {
        throw new DynamicShapeError(
          `dynamic.${arg}[${k}]: buckets "none" compiles one program at the max; give a max`,
        );
      }
    }
  }
}

/**
 * Throws a DynamicShapeError for a `dynamic` key whose argument is not one of the function's:
 * the key's root (`x` of `x`, `options` of `options.attentionMask`, `0` of `0`) must be a
 * parameter's name or position. `names` are the parameter names read from the source
 * (undefined for a destructured or rest parameter; empty when unreadable: nothing is checked).
 */
export function checkDynamicArgs(
  d: DynamicOption,
  names: readonly (string | undefined)[],
): void {
  if (d === "auto" || d === false || names.length === 0) return;
  const known = names.filter((n): n is string => n !== undefined);
  // A rest or destructured last parameter takes any later position.
  const open = names[names.length - 1] === undefined;
  for (const key of Object.keys(d)) {
    const root = /^[^.[]*/.exec(key)![0];
    if (/^\d+$/.test(root)) {
      if (open || Number(root) < names.length) continue;
      const n = names.length;
      throw new DynamicShapeError(
        `dynamic.${key}: no argument ${root}: the function takes ${n} ` +
          `argument${n === 1 ? "" : "s"}` +
          `${known.length > 0 ? ` (${known.join(", ")})` : ""}`,
      );
    }
    if (known.includes(root)) continue;
    throw new DynamicShapeError(
      `dynamic.${key}: no argument '${root}'${suggestion(root, known, "arguments")}; ` +
        `keys are argument names or positions: dynamic: { ${known[0] ?? "0"}: { 1: { max: 64 } } }`,
    );
  }
}

// ---- buckets ---------------------------------------------------------------------------------

/** The closed range of sizes one program serves; `hi` is the bound it is compiled for. */
export interface Bucket {
  readonly lo: number;
  readonly hi: number;
}

/** A policy in words, for reasons (`pow2`, `[16, 32, 64]`, `multiple of 64`, `none`). */
export function policyName(p: BucketPolicy): string {
  if (typeof p === "string") return p;
  if (Array.isArray(p)) return `[${(p as readonly number[]).join(", ")}]`;
  return `multiple of ${(p as { multiple: number }).multiple}`;
}

/**
 * The bucket of `size`, or a string saying why the size is specialized (0 and 1; above the
 * last edge of a list with no larger max). Sizes are assumed inside `range` (checked before).
 */
export function bucketFor(size: number, p: BucketPolicy, range: DimRange): Bucket | string {
  if (size <= 1) return `size ${size} is specialized (sizes 0 and 1 always are)`;
  const min = Math.max(range.min ?? 0, 2);
  const max = range.max ?? Number.MAX_SAFE_INTEGER;
  let lo: number;
  let hi: number;
  if (p === "none") {
    lo = min;
    hi = max;
  } else if (p === "pow2") {
    hi = 2 ** Math.ceil(Math.log2(size));
    lo = hi / 2 + 1;
    if (hi === 2) lo = 2;
  } else if (Array.isArray(p)) {
    const list = p as readonly number[];
    const i = list.findIndex((e) => e >= size);
    if (i < 0) {
      const last = list[list.length - 1]!;
      if (range.max === undefined || range.max <= last) {
        return `size ${size} is above the last bucket edge (${last})`;
      }
      lo = last + 1;
      hi = range.max;
    } else {
      hi = list[i]!;
      lo = i === 0 ? 2 : list[i - 1]! + 1;
    }
  } else {
    const m = (p as { multiple: number }).multiple;
    hi = Math.ceil(size / m) * m;
    lo = hi - m + 1;
  }
  return { lo: Math.max(lo, min), hi: Math.min(hi, max) };
}

// ---- which dims are dynamic on a call --------------------------------------------------------

/** One dynamic dim of one argument tensor on one call. */
export interface DynamicDimPlan {
  /** Keys from the argument list to the tensor. */
  readonly keys: readonly (string | number)[];
  /** The tensor's path as guards print it (`inputIds`, `options.attentionMask`). */
  readonly path: string;
  readonly dim: number;
  readonly size: number;
  readonly range: DimRange;
  readonly source: "option" | "markDynamic" | "auto";
}

/** Looks a tensor leaf up in the `dynamic` option: by path text, or by top-level position. */
export function declaredDims(
  spec: DynamicOption,
  keys: readonly (string | number)[],
  path: string,
  rank: number,
): Map<number, DimRange> {
  const out = new Map<number, DimRange>();
  if (spec === "auto" || spec === false) return out;
  const byPos = keys.length >= 1 ? formatPath(String(keys[0]), keys.slice(1)) : undefined;
  const entry = spec[path] ?? (byPos !== undefined ? spec[byPos] : undefined);
  if (!entry) return out;
  for (const [k, r] of Object.entries(entry)) {
    const i = Number(k);
    const d = i < 0 ? i + rank : i;
    if (d < 0 || d >= rank) {
      throw new DynamicShapeError(
        `dynamic.${path}: dim ${k} is out of range for a tensor of rank ${rank}`,
      );
    }
    out.set(d, r === true ? {} : r);
  }
  return out;
}

/** A size outside its declared range, in words. */
export function outOfRange(p: DynamicDimPlan): string | undefined {
  const { min, max } = p.range;
  if ((min !== undefined && p.size < min) || (max !== undefined && p.size > max)) {
    return (
      `${p.path}.shape[${p.dim}] is ${p.size}, outside its declared range ` +
      `[${min ?? 0}, ${max ?? "inf"}] (${p.source === "markDynamic" ? "markDynamic" : "dynamic"})`
    );
  }
  return undefined;
}

/**
 * Why a call's dynamic dim is compiled for its exact size in an entry of its own that, unlike a
 * bucket's, there can be any number of: a size outside its declared range (outOfRange:
 * "recompile") or above a bucket list's last edge. Such entries count under recompileLimit.
 */
export function unboundedSpecialization(
  plan: readonly DynamicDimPlan[],
  buckets: BucketPolicy,
): string | undefined {
  for (const p of plan) {
    const bad = outOfRange(p);
    if (bad !== undefined) return bad;
    const b = bucketFor(p.size, buckets, p.range);
    if (typeof b === "string" && p.size > 1) return `${p.path}.shape[${p.dim}]: ${b}`;
  }
  return undefined;
}

// ---- inputs at another size ------------------------------------------------------------------

/**
 * `t` with the dims in `sizes` changed (dim -> new size): elements repeat the real ones along
 * a grown dim (index mod the real size) so token ids stay valid ids, and are cut along a
 * shrunk one. Only the traces at other sizes see these values; nothing computes with them.
 */
export function resizeTensor(t: Tensor, sizes: ReadonlyMap<number, number>): Tensor {
  const lit = operandLiteral(t);
  const src = lit.dims;
  const dst = src.map((d, k) => sizes.get(k) ?? d);
  const n = dst.reduce((a, b) => a * b, 1);
  const data = allocate(lit.type, n) as unknown as { [i: number]: number | bigint };
  const from = lit.data as unknown as { readonly [i: number]: number | bigint };
  const strides: number[] = [];
  let acc = 1;
  for (let k = src.length - 1; k >= 0; k--) {
    strides[k] = acc;
    acc *= src[k]!;
  }
  const idx = dst.map(() => 0);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = 0; k < idx.length; k++) s += (idx[k]! % Math.max(src[k]!, 1)) * strides[k]!;
    data[i] = from[s]!;
    for (let k = idx.length - 1; k >= 0; k--) {
      if (++idx[k]! < dst[k]!) break;
      idx[k] = 0;
    }
  }
  return tensorFromLiteral(new Literal(lit.type, dst, data as unknown as LiteralData));
}
