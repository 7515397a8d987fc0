// Element types and shapes of the IR. A shape is an array shape (element type, dims, which dims are
// bounded-dynamic, an optional layout) or a tuple of shapes. A bounded dynamic dim stores its bound
// in `dims` and sets `dynamic[i]`, exactly as XLA's ShapeProto does (`dimensions` plus
// `is_dynamic_dimension`), so `f32[<=512,768]` is { dims: [512, 768], dynamic: [true, false] }.

import { isSmallFloatType } from "./small_floats.ts";

export const ELEMENT_TYPES = [
  "pred",
  "s4",
  "s8",
  "s16",
  "s32",
  "s64",
  "u4",
  "u8",
  "u16",
  "u32",
  "u64",
  "f16",
  "bf16",
  "f32",
  "f64",
  "f8e5m2",
  "f8e4m3",
  "f8e3m4",
  "f8e4m3fn",
  "f8e4m3fnuz",
  "f8e5m2fnuz",
  "f8e4m3b11fnuz",
  "token",
] as const;
export type ElementType = (typeof ELEMENT_TYPES)[number];

/**
 * XLA's token (`token[]`): the value that orders side effects (after-all). It has no elements
 * to compute with: no literal values, no arithmetic, no proto literal; it is an element type so
 * that `token[]` is a shape like any other.
 */
export function isTokenType(t: ElementType): t is "token" {
  return t === "token";
}

export function isElementType(s: string): s is ElementType {
  return (ELEMENT_TYPES as readonly string[]).includes(s);
}

export function isFloatType(t: ElementType): boolean {
  return t === "f32" || t === "f16" || t === "bf16" || t === "f64" || isSmallFloatType(t);
}

const SIGNED_INTEGERS: readonly ElementType[] = ["s4", "s8", "s16", "s32", "s64"];
const UNSIGNED_INTEGERS: readonly ElementType[] = ["u4", "u8", "u16", "u32", "u64"];

export function isIntegerType(t: ElementType): boolean {
  return SIGNED_INTEGERS.includes(t) || UNSIGNED_INTEGERS.includes(t);
}

export function isSignedIntegerType(t: ElementType): boolean {
  return SIGNED_INTEGERS.includes(t);
}

export function isUnsignedIntegerType(t: ElementType): boolean {
  return UNSIGNED_INTEGERS.includes(t);
}

/** Integer types whose values are JavaScript bigints (s64, u64); every other type is a number. */
export function isBigIntType(t: ElementType): t is "s64" | "u64" {
  return t === "s64" || t === "u64";
}

/**
 * Size in bytes of one element as stored by XLA (pred is one byte; s4 and u4 take one byte each
 * in an XLA Literal and in a LiteralProto, unpacked).
 */
export function elementByteSize(t: ElementType): number {
  switch (t) {
    case "pred":
    case "s4":
    case "s8":
    case "u4":
    case "u8":
      return 1;
    case "s16":
    case "u16":
    case "f16":
    case "bf16":
      return 2;
    case "s32":
    case "u32":
    case "f32":
      return 4;
    case "s64":
    case "u64":
    case "f64":
      return 8;
    case "token":
      return 0;
    case "f8e5m2":
    case "f8e4m3":
    case "f8e3m4":
    case "f8e4m3fn":
    case "f8e4m3fnuz":
    case "f8e5m2fnuz":
    case "f8e4m3b11fnuz":
      return 1;
    default: {
      const never: never = t;
      throw new Error(`unknown element type ${String(never)}`);
    }
  }
}

export interface ArrayShape {
  readonly kind: "array";
  readonly type: ElementType;
  /** Static size, or the bound of a dynamic dim. */
  readonly dims: readonly number[];
  /** `dynamic[i]` is true when dim i is bounded dynamic (`<=dims[i]`). Same length as dims. */
  readonly dynamic: readonly boolean[];
  /** Minor-to-major dimension order (`{1,0}`), when one was given. */
  readonly layout?: readonly number[];
  /**
   * The rest of an XLA layout after the `:` (`{1,0:T(8,128)(2,1)E(4)S(1)}`): kept, printed and
   * written to the proto, never used by Kiln's computation. Only with `layout`.
   */
  readonly layoutDetails?: LayoutDetails;
}

/** XLA layout fields beyond minor_to_major that Kiln reads, keeps and writes. */
export interface LayoutDetails {
  /** `T(8,128)(2,1)`: the tiles, outermost first. */
  readonly tiles?: readonly (readonly number[])[];
  /** `E(4)`: the element size in bits. */
  readonly elementSizeInBits?: number;
  /** `S(1)`: the memory space. */
  readonly memorySpace?: number;
}

/** `T(8,128)E(4)S(1)`: the text of a layout's details after the `:`. */
export function layoutDetailsToString(d: LayoutDetails): string {
  let s = "";
  if (d.tiles && d.tiles.length > 0) s += `T${d.tiles.map((t) => `(${t.join(",")})`).join("")}`;
  if (d.elementSizeInBits !== undefined) s += `E(${d.elementSizeInBits})`;
  if (d.memorySpace !== undefined) s += `S(${d.memorySpace})`;
  return s;
}

export interface TupleShape {
  readonly kind: "tuple";
  readonly elements: readonly Shape[];
}

export type Shape = ArrayShape | TupleShape;

/**
 * An array shape. A dim given as a string `"<=N"` is bounded dynamic with bound N; pass `dynamic`
 * explicitly to set the flags from another shape.
 */
export function arrayShape(
  type: ElementType,
  dims: readonly (number | string)[],
  dynamic?: readonly boolean[],
  layout?: readonly number[],
): ArrayShape {
  const sizes: number[] = [];
  const flags: boolean[] = [];
  dims.forEach((d, i) => {
    if (typeof d === "string") {
      const m = /^<=(\d+)$/.exec(d.trim());
      if (!m) throw new Error(`arrayShape: bad dim '${d}' (expected a number or '<=N')`);
      sizes.push(Number(m[1]));
      flags.push(true);
    } else {
      if (!Number.isInteger(d) || d < 0) {
        throw new Error(`arrayShape: dim ${i} is ${d}; dims must be non-negative integers`);
      }
      sizes.push(d);
      flags.push(dynamic?.[i] ?? false);
    }
  });
  if (dynamic && dynamic.length !== dims.length) {
    throw new Error(`arrayShape: ${dims.length} dims but ${dynamic.length} dynamic flags`);
  }
  const s: ArrayShape = layout
    ? { kind: "array", type, dims: sizes, dynamic: flags, layout: [...layout] }
    : { kind: "array", type, dims: sizes, dynamic: flags };
  return s;
}

export function scalarShape(type: ElementType): ArrayShape {
  return { kind: "array", type, dims: [], dynamic: [] };
}

export function tupleShape(elements: readonly Shape[]): TupleShape {
  return { kind: "tuple", elements: [...elements] };
}

/**
 * How deeply tuple shapes may nest: an array is depth 0, `(f32[])` depth 1. One limit for the
 * parser, the builder, the verifier and both directions of the proto form, so that whatever one
 * of them accepts the others do too (the proto decoder's recursion limit is derived from it).
 */
export const MAX_TUPLE_DEPTH = 200;

/** The tuple nesting depth of `s` (0 for an array); stops counting past MAX_TUPLE_DEPTH + 1. */
export function tupleDepth(s: Shape): number {
  // Level by level, not recursively, and each shared sub-shape once: a shape built in code may
  // nest arbitrarily deep, or reuse one tuple object many times.
  let depth = 0;
  let level = new Set<Shape>([s]);
  while (depth <= MAX_TUPLE_DEPTH) {
    const next = new Set<Shape>();
    let anyTuple = false;
    for (const e of level) {
      if (e.kind !== "tuple") continue;
      anyTuple = true;
      for (const x of e.elements) next.add(x);
    }
    if (!anyTuple) break;
    depth++;
    level = next;
  }
  return depth;
}

export function isArray(s: Shape): s is ArrayShape {
  return s.kind === "array";
}

export function isTuple(s: Shape): s is TupleShape {
  return s.kind === "tuple";
}

export function rank(s: ArrayShape): number {
  return s.dims.length;
}

export function isScalar(s: Shape): boolean {
  return s.kind === "array" && s.dims.length === 0;
}

export function isDynamic(s: Shape): boolean {
  return s.kind === "array" ? s.dynamic.some((d) => d) : s.elements.some(isDynamic);
}

/** Number of elements at the static size / bound of every dim. */
export function elementCount(s: ArrayShape): number {
  let n = 1;
  for (const d of s.dims) n *= d;
  return n;
}

/** Same element type and dims (bounds), and the same dims dynamic. Layout is ignored. */
export function shapesEqual(a: Shape, b: Shape): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === "tuple") {
    const bt = b as TupleShape;
    return (
      a.elements.length === bt.elements.length &&
      a.elements.every((e, i) => shapesEqual(e, bt.elements[i]!))
    );
  }
  const ba = b as ArrayShape;
  return (
    a.type === ba.type &&
    a.dims.length === ba.dims.length &&
    a.dims.every((d, i) => d === ba.dims[i]) &&
    a.dynamic.every((d, i) => d === ba.dynamic[i])
  );
}

/** Same dims and dynamic flags, element type ignored (the "compatible" of XLA's shape rules). */
export function sameDims(a: ArrayShape, b: ArrayShape): boolean {
  return (
    a.dims.length === b.dims.length &&
    a.dims.every((d, i) => d === b.dims[i]) &&
    a.dynamic.every((d, i) => d === b.dynamic[i])
  );
}

export function withType(s: ArrayShape, type: ElementType): ArrayShape {
  return { kind: "array", type, dims: s.dims, dynamic: s.dynamic };
}

/** Whether `layout` is XLA's default for its rank: minor_to_major {rank-1, ..., 0}. */
export function isDefaultLayout(layout: readonly number[]): boolean {
  return layout.every((d, k) => d === layout.length - 1 - k);
}

/**
 * XLA's text form: `f32[2,<=8]{1,0}`, `(f32[2], s32[])`, `pred[]`. `withLayout` "non-default"
 * leaves out a layout that is the default one (which means the same as none, in Kiln and XLA).
 */
export function shapeToString(s: Shape, withLayout: boolean | "non-default" = true): string {
  if (s.kind === "tuple") {
    return `(${s.elements.map((e) => shapeToString(e, withLayout)).join(", ")})`;
  }
  const dims = s.dims.map((d, i) => (s.dynamic[i] ? `<=${d}` : `${d}`)).join(",");
  const details = s.layoutDetails ? layoutDetailsToString(s.layoutDetails) : "";
  const shown =
    s.layout !== undefined &&
    (withLayout === true ||
      (withLayout === "non-default" && (details !== "" || !isDefaultLayout(s.layout))));
  const layout = shown ? `{${s.layout!.join(",")}${details ? `:${details}` : ""}}` : "";
  return `${s.type}[${dims}]${layout}`;
}
