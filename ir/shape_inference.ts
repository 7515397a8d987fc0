// Shape rules: for every opcode, the result shape that follows from its operand shapes, its
// attributes and the signatures of the computations it calls, with XLA's semantics
// (xla/service/shape_inference.cc and the HLO verifier): no implicit broadcasting, bounded dynamic
// dims propagated through every rule, and a ShapeError naming the opcode, the operand shapes and
// the rule in words for any violation. A few opcodes' results cannot be inferred (parameter,
// constant, iota, reshape, broadcast, convert, bitcast-convert, custom-call); for those the
// declared shape is required and checked for consistency instead. The builder and the verifier
// both call `inferShape`; nothing else in the IR has its own copy of these rules.

import { elementInfo } from "./element_types.ts";
import {
  COMPARISON_DIRECTIONS,
  type Attributes,
  type ConvDimensionNumbers,
  type DotDimensionNumbers,
  type WindowDim,
} from "./attributes.ts";
import { ShapeError } from "./errors.ts";
import type { Computation } from "./module.ts";
import { OPCODE_INFO, type Opcode } from "./opcodes.ts";
import {
  arrayShape,
  elementByteSize,
  elementCount,
  type ArrayShape,
  type ElementType,
  isFloatType,
  isIntegerType,
  isSignedIntegerType,
  isUnsignedIntegerType,
  scalarShape,
  type Shape,
  type TupleShape,
  shapesEqual,
  shapeToString,
  tupleShape,
} from "./shape.ts";

// ---- Public helpers --------------------------------------------------------------------------

/** A computation's parameter shapes (by parameter number) and result (ROOT) shape. */
export interface Signature {
  params: Shape[];
  result: Shape;
}

/** The signature of `c`; throws when `c` is empty (it has no ROOT). */
export function computationSignature(c: Computation): Signature {
  return { params: c.parameters.map((p) => p.shape), result: c.root.shape };
}

/** `(f32[], f32[]) -> f32[]` */
export function signatureToString(sig: Signature): string {
  return `(${sig.params.map((s) => shapeToString(s, false)).join(", ")}) -> ${shapeToString(
    sig.result,
    false,
  )}`;
}

/** Opcodes whose result shape is taken from the instruction (and checked), not inferred. */
export const DECLARED_SHAPE_OPCODES: ReadonlySet<Opcode> = new Set<Opcode>([
  "parameter",
  "constant",
  "iota",
  "reshape",
  "bitcast",
  "broadcast",
  "convert",
  "bitcast-convert",
  "custom-call",
  "all-gather",
  "all-gather-start",
  "reduce-scatter",
  "recv",
  "infeed",
  "rng",
  "rng-bit-generator",
]);

/** True when `inferShape(opcode, ...)` needs the declared shape. */
export function needsDeclaredShape(opcode: Opcode): boolean {
  return DECLARED_SHAPE_OPCODES.has(opcode);
}

/** A size of `n` elements dilated by `dilation` (XLA's window_util::DilatedBound). */
export function dilatedBound(n: number, dilation: number): number {
  return n === 0 ? 0 : (n - 1) * dilation + 1;
}

/** Number of window positions of `window` in `bound` with `stride` (window_util::StridedBound). */
export function stridedBound(bound: number, window: number, stride: number): number {
  if (bound === 0 || window > bound) return 0;
  return Math.floor((bound - window) / stride) + 1;
}

/**
 * The result of bitcast-convert of `operand` to `type` (XLA's rule): the same dims when the bit
 * widths are equal; a new minor dim of size ratio when narrowing; the minor dim (which must equal
 * the ratio) removed when widening. Throws a message in words when the conversion is invalid.
 */
export function bitcastConvertShape(operand: ArrayShape, type: ElementType): ArrayShape {
  if (operand.type === "pred" || type === "pred") {
    throw new Error(`cannot bitcast-convert from or to pred (${operand.type} => ${type})`);
  }
  if (elementInfo(operand.type).bits < 8 || elementInfo(type).bits < 8) {
    // XLA packs sub-byte types for a bitcast (two s4 per byte); Kiln stores one per byte and
    // does not implement the packing, so it refuses rather than compute a different result.
    throw new Error(
      `bitcast-convert of a 4-bit type is not supported (${operand.type} => ${type})`,
    );
  }
  const inBits = elementByteSize(operand.type) * 8;
  const outBits = elementByteSize(type) * 8;
  if (inBits === outBits) return arrayShape(type, operand.dims, operand.dynamic);
  if (inBits > outBits) {
    const ratio = inBits / outBits;
    return arrayShape(type, [...operand.dims, ratio], [...operand.dynamic, false]);
  }
  const ratio = outBits / inBits;
  const last = operand.dims.length - 1;
  if (last < 0 || operand.dims[last] !== ratio) {
    throw new Error(
      `bitcast-convert from ${operand.type} to ${type} needs a minor dim of size ${ratio} ` +
        `(the ratio of bit widths ${outBits}/${inBits})`,
    );
  }
  if (operand.dynamic[last]) {
    throw new Error(`bitcast-convert cannot consume a dynamic minor dim`);
  }
  return arrayShape(type, operand.dims.slice(0, last), operand.dynamic.slice(0, last));
}

/**
 * The shape of `opcode` applied to operands of the given shapes. `called` holds the called
 * computations in the role order of OPCODE_INFO[opcode].called. `declared` is the instruction's
 * stored shape: required for the opcodes in DECLARED_SHAPE_OPCODES (and returned after the
 * consistency checks); for dot and convolution its element type is the preferred result type
 * (as XLA's verifier passes it); otherwise it is not consulted and the caller compares.
 * Throws ShapeError on any violation.
 */
export function inferShape(
  opcode: Opcode,
  operands: readonly Shape[],
  attrs: Attributes,
  called: readonly Computation[],
  declared?: Shape,
): Shape {
  const c = new RuleContext(opcode, operands, attrs, called, declared);
  const info = OPCODE_INFO[opcode];
  if (typeof info.arity === "number" && operands.length !== info.arity) {
    c.fail(`expects ${info.arity} operand${info.arity === 1 ? "" : "s"}, got ${operands.length}`);
  }
  const role = info.called;
  switch (role) {
    case "none":
      if (called.length !== 0) c.fail(`calls no computation, got ${called.length}`);
      break;
    case "to_apply":
    case "calls":
      if (called.length !== 1) {
        c.fail(`needs exactly one called computation (${role}), got ${called.length}`);
      }
      break;
    case "async":
      if (called.length > 1) c.fail(`calls at most one computation, got ${called.length}`);
      break;
    case "while":
      if (called.length !== 2) {
        c.fail(`needs a condition and a body computation, got ${called.length} computations`);
      }
      break;
    case "branches":
      if (called.length < 1) c.fail(`needs at least one branch computation`);
      break;
    case "list":
      break;
    default: {
      const never: never = role;
      throw new Error(`unknown called role ${String(never)}`);
    }
  }
  if (DECLARED_SHAPE_OPCODES.has(opcode) && declared === undefined) {
    c.fail(`the result shape cannot be inferred; the declared shape is required`);
  }
  return SHAPE_RULES[opcode](c);
}

// ---- Rule context ----------------------------------------------------------------------------

class RuleContext {
  constructor(
    readonly opcode: Opcode,
    readonly operands: readonly Shape[],
    readonly attrs: Attributes,
    readonly called: readonly Computation[],
    readonly declared: Shape | undefined,
  ) {}

  fail(rule: string): never {
    throw new ShapeError(
      this.opcode,
      this.operands.map((s) => shapeToString(s, false)),
      rule,
    );
  }

  /** Operand i, which must be an array. */
  array(i: number, what = `operand ${i}`): ArrayShape {
    const s = this.operands[i];
    if (s === undefined) this.fail(`missing ${what}`);
    if (s.kind !== "array") this.fail(`${what} must be an array, got ${shapeToString(s, false)}`);
    return s;
  }

  /** Operand i, which must be a scalar array. */
  scalar(i: number, what = `operand ${i}`): ArrayShape {
    const s = this.array(i, what);
    if (s.dims.length !== 0) this.fail(`${what} must be a scalar, got ${str(s)}`);
    return s;
  }

  /** The declared shape, which must be an array. */
  declaredArray(): ArrayShape {
    const d = this.declared;
    if (d === undefined) this.fail(`the declared shape is required`);
    if (d.kind !== "array") this.fail(`the declared shape must be an array, got ${str(d)}`);
    return d;
  }

  need<T>(value: T | undefined, name: string): T {
    if (value === undefined) this.fail(`needs attribute ${name}`);
    return value;
  }

  /** attrs.dimensions with exactly one entry, in range for `rank`. */
  oneDim(rank: number): number {
    const dims = this.need(this.attrs.dimensions, "dimensions");
    if (dims.length !== 1) this.fail(`dimensions must hold exactly one dim, got {${dims}}`);
    const d = dims[0]!;
    this.index(d, rank, "dimension");
    return d;
  }

  /** An integer in [0, limit). */
  index(d: number, limit: number, what: string): void {
    if (!Number.isInteger(d) || d < 0 || d >= limit) {
      this.fail(`${what} ${d} is out of range [0, ${limit})`);
    }
  }

  int(v: number, what: string, min = -Infinity): void {
    if (!Number.isInteger(v) || v < min) {
      this.fail(`${what} must be an integer${min > -Infinity ? ` >= ${min}` : ""}, got ${v}`);
    }
  }

  /** A list of dims: each in [0, rank), optionally unique and/or sorted ascending. */
  dimList(
    list: readonly number[],
    rank: number,
    what: string,
    opts: { unique?: boolean; sorted?: boolean } = {},
  ): void {
    for (const d of list) this.index(d, rank, `${what} {${list}}: dim`);
    if (opts.unique && new Set(list).size !== list.length) {
      this.fail(`${what} {${list}} must not repeat a dim`);
    }
    if (opts.sorted && list.some((d, i) => i > 0 && list[i - 1]! >= d)) {
      this.fail(`${what} {${list}} must be sorted ascending`);
    }
  }

  /** The signature of called computation i, in words `role` for messages. */
  callee(i: number, role: string): Signature {
    const comp = this.called[i];
    if (comp === undefined) this.fail(`missing ${role} computation`);
    try {
      return computationSignature(comp);
    } catch (e) {
      return this.fail(`${role} computation '${comp.name}': ${(e as Error).message}`);
    }
  }
}

type ShapeRule = (c: RuleContext) => Shape;

const str = (s: Shape): string => shapeToString(s, false);

/** A layout-free copy of an array shape with another element type (or the same). */
const plain = (s: ArrayShape, type: ElementType = s.type): ArrayShape =>
  arrayShape(type, s.dims, s.dynamic);

const sameBounds = (a: ArrayShape, b: ArrayShape): boolean =>
  a.dims.length === b.dims.length && a.dims.every((d, i) => d === b.dims[i]);

/** Element-type classes the elementwise rules accept. */
type TypeClass = "any" | "float" | "signed" | "numeric" | "integer" | "intOrPred";

const CLASS_TEXT: { [K in TypeClass]: string } = {
  any: "any element type",
  float: "a floating-point element type (f16, bf16, f32)",
  signed: "a signed element type (s4 ... s64, f16, bf16, f32, f64)",
  numeric: "a numeric element type (not pred)",
  integer: "an integer element type (s4, s8, s16, s32, s64, u4, u8, u16, u32, u64)",
  intOrPred: "an integer or pred element type (pred, s4 ... s64, u4 ... u64)",
};

function inClass(t: ElementType, cls: TypeClass): boolean {
  // A token has no values: no elementwise opcode takes one.
  if (t === "token") return false;
  switch (cls) {
    case "any":
      return true;
    case "float":
      return isFloatType(t);
    case "signed":
      return isFloatType(t) || isSignedIntegerType(t);
    case "numeric":
      return t !== "pred";
    case "integer":
      return isIntegerType(t);
    case "intOrPred":
      return isIntegerType(t) || t === "pred";
    default: {
      const never: never = cls;
      throw new Error(`unknown type class ${String(never)}`);
    }
  }
}

function checkClass(c: RuleContext, t: ElementType, cls: TypeClass): void {
  if (!inClass(t, cls)) c.fail(`needs ${CLASS_TEXT[cls]}, got ${t}`);
}

const NO_BROADCAST =
  "operands must have the same dims (no implicit broadcasting in HLO; use broadcast)";

/** Same bounds required; a dim is dynamic in the result if it is dynamic in any of the shapes. */
function mergeDims(c: RuleContext, shapes: readonly ArrayShape[], type: ElementType): ArrayShape {
  const first = shapes[0]!;
  for (const s of shapes) if (!sameBounds(first, s)) c.fail(NO_BROADCAST);
  const dynamic = first.dims.map((_, i) => shapes.some((s) => s.dynamic[i]));
  return arrayShape(type, first.dims, dynamic);
}

function sameTypes(c: RuleContext, shapes: readonly ArrayShape[]): ElementType {
  const t = shapes[0]!.type;
  for (const s of shapes) {
    if (s.type !== t) {
      c.fail(`operands must have the same element type, got ${t} and ${s.type} (use convert)`);
    }
  }
  return t;
}

// ---- Elementwise rules -----------------------------------------------------------------------

const unary =
  (cls: TypeClass, result?: ElementType): ShapeRule =>
  (c) => {
    const x = c.array(0);
    checkClass(c, x.type, cls);
    return plain(x, result ?? x.type);
  };

const binary =
  (cls: TypeClass): ShapeRule =>
  (c) => {
    const a = c.array(0, "lhs");
    const b = c.array(1, "rhs");
    const t = sameTypes(c, [a, b]);
    checkClass(c, t, cls);
    return mergeDims(c, [a, b], t);
  };

const compareRule: ShapeRule = (c) => {
  const a = c.array(0, "lhs");
  const b = c.array(1, "rhs");
  const t = sameTypes(c, [a, b]);
  const dir = c.need(c.attrs.direction, "direction");
  if (!COMPARISON_DIRECTIONS.includes(dir)) {
    c.fail(`direction must be one of ${COMPARISON_DIRECTIONS.join(" ")}, got ${String(dir)}`);
  }
  const ct = c.attrs.comparisonType;
  if (ct !== undefined) {
    const ok =
      ct === "FLOAT" || ct === "TOTALORDER"
        ? isFloatType(t)
        : ct === "SIGNED"
          ? isSignedIntegerType(t)
          : ct === "UNSIGNED"
            ? isUnsignedIntegerType(t) || t === "pred"
            : false;
    if (!ok) c.fail(`comparison type ${String(ct)} does not apply to element type ${t}`);
  }
  return mergeDims(c, [a, b], "pred");
};

const selectRule: ShapeRule = (c) => {
  const p = c.array(0, "predicate");
  const a = c.array(1, "on_true");
  const b = c.array(2, "on_false");
  if (p.type !== "pred") c.fail(`the predicate must have element type pred, got ${p.type}`);
  const t = sameTypes(c, [a, b]);
  if (p.dims.length === 0) return mergeDims(c, [a, b], t);
  return mergeDims(c, [p, a, b], t);
};

const clampRule: ShapeRule = (c) => {
  const lo = c.array(0, "min");
  const x = c.array(1, "operand");
  const hi = c.array(2, "max");
  const t = sameTypes(c, [lo, x, hi]);
  const nonScalar = [lo, x, hi].filter((s, i) => i === 1 || s.dims.length > 0);
  return mergeDims(c, nonScalar, t);
};

const convertRule: ShapeRule = (c) => {
  const x = c.array(0);
  const d = c.declaredArray();
  if (!sameBounds(x, d) || !x.dynamic.every((f, i) => f === d.dynamic[i])) {
    c.fail(`the result ${str(d)} must have the operand's dims (convert changes only the type)`);
  }
  return d;
};

const bitcastConvertRule: ShapeRule = (c) => {
  const x = c.array(0);
  const d = c.declaredArray();
  let expected: ArrayShape;
  try {
    expected = bitcastConvertShape(x, d.type);
  } catch (e) {
    return c.fail((e as Error).message);
  }
  if (!shapesEqual(expected, d)) {
    c.fail(`bitcast to ${d.type} gives ${str(expected)}, but the declared shape is ${str(d)}`);
  }
  return d;
};

// ---- Leaves ----------------------------------------------------------------------------------

const parameterRule: ShapeRule = (c) => {
  const n = c.need(c.attrs.parameterNumber, "parameterNumber");
  c.int(n, "parameterNumber", 0);
  return c.declared!;
};

const constantRule: ShapeRule = (c) => {
  const lit = c.need(c.attrs.literal, "literal");
  const d = c.declaredArray();
  const litShape = lit.shape;
  if (d.dynamic.some((f) => f)) c.fail(`a constant cannot have dynamic dims, got ${str(d)}`);
  if (!shapesEqual(litShape, d)) {
    c.fail(`the literal's shape ${str(litShape)} differs from the declared shape ${str(d)}`);
  }
  return d;
};

const iotaRule: ShapeRule = (c) => {
  const d = c.declaredArray();
  if (d.dims.length === 0) c.fail(`iota needs a result of rank >= 1, got ${str(d)}`);
  // As XLA's verifier: an iota counts in an integer or float type, not pred (or token).
  if (d.type === "pred" || d.type === "token") {
    c.fail(`iota needs an integer or floating-point result, got ${str(d)}`);
  }
  const dim = c.need(c.attrs.iotaDimension, "iotaDimension");
  c.index(dim, d.dims.length, `iotaDimension of ${str(d)}`);
  return d;
};

const customCallRule: ShapeRule = (c) => {
  const target = c.need(c.attrs.customCallTarget, "customCallTarget");
  if (target.length === 0) c.fail(`customCallTarget must not be empty`);
  const constraints = c.attrs.operandLayoutConstraints;
  if (constraints !== undefined) {
    if (constraints.length !== c.operands.length) {
      c.fail(
        `operand_layout_constraints has ${constraints.length} shapes for ` +
          `${c.operands.length} operands`,
      );
    }
    constraints.forEach((s, i) => {
      if (!shapesEqual(plainShape(s), plainShape(c.operands[i]!))) {
        c.fail(`operand layout constraint ${i} ${str(s)} does not fit operand ${i}`);
      }
    });
  }
  checkAliasing(c, c.declared!);
  return c.declared!;
};

/** output_to_operand_aliasing: indices that exist, on both sides, with equal shapes. */
function checkAliasing(c: RuleContext, result: Shape): void {
  const at = (s: Shape | undefined, index: readonly number[]): Shape | undefined => {
    for (const k of index) s = s?.kind === "tuple" ? s.elements[k] : undefined;
    return s;
  };
  for (const a of c.attrs.outputToOperandAliasing ?? []) {
    const out = at(result, a.output);
    const op = at(c.operands[a.operand], a.operandIndex);
    if (out === undefined || op === undefined || !shapesEqual(plainShape(out), plainShape(op))) {
      c.fail(
        `output_to_operand_aliasing {${a.output}}: (${a.operand}, {${a.operandIndex}}) must ` +
          "name an output and an operand part of the same shape",
      );
    }
  }
}

/** A shape without layouts (what aliasing and layout constraints compare). */
function plainShape(s: Shape): Shape {
  return s.kind === "tuple" ? tupleShape(s.elements.map(plainShape)) : plain(s);
}

// ---- Shape and data movement -----------------------------------------------------------------

const broadcastRule: ShapeRule = (c) => {
  const x = c.array(0);
  const d = c.declaredArray();
  const map = c.need(c.attrs.dimensions, "dimensions");
  if (d.type !== x.type) c.fail(`the result element type ${d.type} must be ${x.type}`);
  if (map.length !== x.dims.length) {
    c.fail(
      `dimensions {${map}} must map each of the operand's ${x.dims.length} dims ` +
        `to a result dim`,
    );
  }
  c.dimList(map, d.dims.length, "dimensions", { sorted: true });
  map.forEach((r, i) => {
    if (x.dims[i] !== d.dims[r]) {
      c.fail(
        `operand dim ${i} (size ${x.dims[i]}) maps to result dim ${r} of size ${d.dims[r]} in ` +
          `${str(d)}; sizes must be equal`,
      );
    }
    if (x.dynamic[i] !== d.dynamic[r]) {
      c.fail(`operand dim ${i} and result dim ${r} of ${str(d)} differ in being dynamic`);
    }
  });
  return d;
};

const reshapeRule: ShapeRule = (c) => {
  const x = c.array(0);
  const d = c.declaredArray();
  if (d.type !== x.type) c.fail(`the result element type ${d.type} must be ${x.type}`);
  if (elementCount(x) !== elementCount(d)) {
    c.fail(
      `the result ${str(d)} has ${elementCount(d)} elements at its bounds but the operand has ` +
        `${elementCount(x)}`,
    );
  }
  return d;
};

/**
 * bitcast (XLA's): the operand's buffer read as the declared shape, layouts included. Kiln
 * requires what makes that well defined without a target's layout rules: the same element type
 * and element count, static dims (XLA's layout-insensitive verifier checks less).
 */
const bitcastRule: ShapeRule = (c) => {
  const x = c.array(0);
  const d = c.declaredArray();
  if (d.type !== x.type) {
    c.fail(`the result element type ${d.type} must be ${x.type} (use bitcast-convert)`);
  }
  if (elementCount(x) !== elementCount(d)) {
    c.fail(
      `the result ${str(d)} has ${elementCount(d)} elements but the operand has ${elementCount(x)}`,
    );
  }
  if (x.dynamic.some((f) => f) || d.dynamic.some((f) => f)) {
    c.fail("bitcast of a bounded-dynamic shape is not supported (its buffer size varies)");
  }
  return d;
};

/** after-all: any number of token operands (none included) joined into one token. */
const afterAllRule: ShapeRule = (c) => {
  c.operands.forEach((s, k) => {
    if (s.kind !== "array" || s.type !== "token" || s.dims.length !== 0) {
      c.fail(`operand ${k} must be token[], got ${str(s)}`);
    }
  });
  return scalarShape("token");
};

const transposeRule: ShapeRule = (c) => {
  const x = c.array(0);
  const perm = c.need(c.attrs.dimensions, "dimensions");
  if (perm.length !== x.dims.length) {
    c.fail(`dimensions {${perm}} must be a permutation of the operand's ${x.dims.length} dims`);
  }
  c.dimList(perm, x.dims.length, "dimensions", { unique: true });
  return arrayShape(
    x.type,
    perm.map((p) => x.dims[p]!),
    perm.map((p) => x.dynamic[p]!),
  );
};

const reverseRule: ShapeRule = (c) => {
  const x = c.array(0);
  const dims = c.need(c.attrs.dimensions, "dimensions");
  c.dimList(dims, x.dims.length, "dimensions", { unique: true });
  return plain(x);
};

const sliceRule: ShapeRule = (c) => {
  const x = c.array(0);
  const sl = c.need(c.attrs.slice, "slice");
  if (sl.length !== x.dims.length) {
    c.fail(`slice has ${sl.length} entries but the operand has rank ${x.dims.length}`);
  }
  const dims: number[] = [];
  const dynamic: boolean[] = [];
  sl.forEach((s, i) => {
    c.int(s.start, `slice start of dim ${i}`, 0);
    c.int(s.limit, `slice limit of dim ${i}`, 0);
    c.int(s.stride, `slice stride of dim ${i}`, 1);
    if (s.start > s.limit || s.limit > x.dims[i]!) {
      c.fail(
        `slice [${s.start}:${s.limit}] of dim ${i} (size ${x.dims[i]}) needs ` +
          `0 <= start <= limit <= size`,
      );
    }
    const size = Math.ceil((s.limit - s.start) / s.stride);
    dims.push(size);
    // As XLA: slicing one element out of a dynamic dim makes it static.
    dynamic.push(x.dynamic[i]! && size !== 1);
  });
  return arrayShape(x.type, dims, dynamic);
};

/** Scalar integer start indices, all of one type, one per dim of `rank`. */
function checkStartIndices(c: RuleContext, first: number, rank: number): void {
  const n = c.operands.length - first;
  if (n !== rank) c.fail(`needs one scalar start index per operand dim (${rank}), got ${n}`);
  let type: ElementType | undefined;
  for (let i = first; i < c.operands.length; i++) {
    const s = c.scalar(i, `start index ${i - first}`);
    if (!isIntegerType(s.type)) {
      c.fail(`start index ${i - first} must be an integer, got ${s.type}`);
    }
    if (type !== undefined && s.type !== type) {
      c.fail(`start indices must all have the same type, got ${type} and ${s.type}`);
    }
    type = s.type;
  }
}

const dynamicSliceRule: ShapeRule = (c) => {
  const x = c.array(0);
  checkStartIndices(c, 1, x.dims.length);
  const sizes = c.need(c.attrs.dynamicSliceSizes, "dynamicSliceSizes");
  if (sizes.length !== x.dims.length) {
    c.fail(
      `dynamicSliceSizes has ${sizes.length} entries but the operand has rank ${x.dims.length}`,
    );
  }
  sizes.forEach((s, i) => {
    c.int(s, `slice size of dim ${i}`, 0);
    if (s > x.dims[i]!) c.fail(`slice size ${s} of dim ${i} exceeds the operand's ${x.dims[i]}`);
  });
  return arrayShape(x.type, sizes);
};

const dynamicUpdateSliceRule: ShapeRule = (c) => {
  const x = c.array(0);
  const u = c.array(1, "update");
  checkStartIndices(c, 2, x.dims.length);
  if (u.dims.length !== x.dims.length) {
    c.fail(`the update's rank ${u.dims.length} must equal the operand's rank ${x.dims.length}`);
  }
  if (u.type !== x.type) c.fail(`the update's element type ${u.type} must be ${x.type}`);
  u.dims.forEach((d, i) => {
    if (d > x.dims[i]!) c.fail(`update dim ${i} (size ${d}) exceeds the operand's ${x.dims[i]}`);
  });
  const dynamic = x.dims.map((d, i) => x.dynamic[i]! || (u.dynamic[i]! && u.dims[i] === d));
  return arrayShape(x.type, x.dims, dynamic);
};

const concatenateRule: ShapeRule = (c) => {
  if (c.operands.length < 1) c.fail(`needs at least one operand`);
  const xs = c.operands.map((_, i) => c.array(i));
  const first = xs[0]!;
  const dim = c.oneDim(first.dims.length);
  const t = sameTypes(c, xs);
  for (const s of xs) {
    if (s.dims.length !== first.dims.length) c.fail(`operands must all have the same rank`);
    s.dims.forEach((d, i) => {
      if (i !== dim && d !== first.dims[i]) {
        c.fail(`operands may differ only in the concatenated dim ${dim}; they differ in dim ${i}`);
      }
    });
  }
  const dims = first.dims.map((d, i) => (i === dim ? xs.reduce((a, s) => a + s.dims[i]!, 0) : d));
  const dynamic = first.dims.map((_, i) => xs.some((s) => s.dynamic[i]));
  return arrayShape(t, dims, dynamic);
};

const padRule: ShapeRule = (c) => {
  const x = c.array(0);
  const v = c.scalar(1, "padding value");
  if (v.type !== x.type) c.fail(`the padding value's type ${v.type} must be ${x.type}`);
  const pads = c.need(c.attrs.padding, "padding");
  if (pads.length !== x.dims.length) {
    c.fail(`padding has ${pads.length} entries but the operand has rank ${x.dims.length}`);
  }
  const dims = pads.map((p, i) => {
    c.int(p.low, `low padding of dim ${i}`);
    c.int(p.high, `high padding of dim ${i}`);
    c.int(p.interior, `interior padding of dim ${i}`, 0);
    const n = x.dims[i]!;
    const size = n + p.low + p.high + Math.max(n - 1, 0) * p.interior;
    if (size < 0) c.fail(`padding ${p.low}_${p.high}_${p.interior} makes dim ${i} negative`);
    return size;
  });
  return arrayShape(x.type, dims, x.dynamic);
};

// ---- Contractions ----------------------------------------------------------------------------

/** The result element type of dot/convolution: the declared one when given (XLA's preferred). */
function preferredType(c: RuleContext, from: ElementType): ElementType {
  const d = c.declared;
  if (d === undefined || d.kind !== "array" || d.type === from) return from;
  const to = d.type;
  const ok = isFloatType(from)
    ? isFloatType(to)
    : (isIntegerType(to) || to === "pred") && elementByteSize(to) >= elementByteSize(from);
  if (!ok) c.fail(`the result type ${to} cannot be produced from ${from} operands`);
  return to;
}

const dotRule: ShapeRule = (c) => {
  const a = c.array(0, "lhs");
  const b = c.array(1, "rhs");
  const t = sameTypes(c, [a, b]);
  const dn = c.need(c.attrs.dot, "dot");
  const { dims, dynamic } = dotResultDims(c, a, b, dn, []);
  return arrayShape(preferredType(c, t), dims, dynamic);
};

/**
 * The checks of a dot's dimension numbers and its result dims: batch, lhs free, rhs free (less
 * `rhsSkip`, a ragged-dot's group dim).
 */
function dotResultDims(
  c: RuleContext,
  a: ArrayShape,
  b: ArrayShape,
  dn: DotDimensionNumbers,
  rhsSkip: readonly number[],
): { dims: number[]; dynamic: boolean[] } {
  c.dimList([...dn.lhsBatch, ...dn.lhsContracting], a.dims.length, "lhs batch+contracting dims", {
    unique: true,
  });
  c.dimList([...dn.rhsBatch, ...dn.rhsContracting], b.dims.length, "rhs batch+contracting dims", {
    unique: true,
  });
  if (dn.lhsBatch.length !== dn.rhsBatch.length) {
    c.fail(`lhs and rhs need the same number of batch dims, got {${dn.lhsBatch}} and ` +
      `{${dn.rhsBatch}}`);
  }
  if (dn.lhsContracting.length !== dn.rhsContracting.length) {
    c.fail(
      `lhs and rhs need the same number of contracting dims, got {${dn.lhsContracting}} ` +
        `and {${dn.rhsContracting}}`,
    );
  }
  dn.lhsBatch.forEach((l, i) => {
    const r = dn.rhsBatch[i]!;
    if (a.dims[l] !== b.dims[r]) {
      c.fail(
        `batch dim sizes must match: lhs dim ${l} is ${a.dims[l]}, rhs dim ${r} is ${b.dims[r]}`,
      );
    }
  });
  dn.lhsContracting.forEach((l, i) => {
    const r = dn.rhsContracting[i]!;
    if (a.dims[l] !== b.dims[r]) {
      c.fail(
        `contracting dim sizes must match: lhs dim ${l} is ${a.dims[l]}, rhs dim ${r} is ` +
          `${b.dims[r]}`,
      );
    }
  });
  const dims: number[] = [];
  const dynamic: boolean[] = [];
  dn.lhsBatch.forEach((l, i) => {
    dims.push(a.dims[l]!);
    dynamic.push(a.dynamic[l]! || b.dynamic[dn.rhsBatch[i]!]!);
  });
  const free = (s: ArrayShape, used: number[]) =>
    s.dims.forEach((d, i) => {
      if (!used.includes(i)) {
        dims.push(d);
        dynamic.push(s.dynamic[i]!);
      }
    });
  free(a, [...dn.lhsBatch, ...dn.lhsContracting]);
  free(b, [...dn.rhsBatch, ...dn.rhsContracting, ...rhsSkip]);
  return { dims, dynamic };
}

/**
 * ragged-dot(lhs, rhs, group_sizes) (XLA's InferRaggedDotOpShape): lhs_ragged_dims names the one
 * lhs dim cut into groups by group_sizes ([g], or [prefix..., g]). A non-contracting ragged dim
 * takes one rhs group dim (of size g), which the result drops; a contracting one gives the
 * result a leading dim of g; a batch one changes no dim.
 */
const raggedDotRule: ShapeRule = (c) => {
  const a = c.array(0, "lhs");
  const b = c.array(1, "rhs");
  const gs = c.array(2, "group_sizes");
  const t = sameTypes(c, [a, b]);
  if (!isIntegerType(gs.type)) c.fail(`group_sizes must be integers, got ${gs.type}`);
  const dn = c.need(c.attrs.dot, "dot");
  const ragged = c.need(c.attrs.lhsRaggedDims, "lhs_ragged_dims");
  const groupDims = c.attrs.rhsGroupDims ?? [];
  if (ragged.length !== 1) c.fail(`lhs_ragged_dims must hold exactly one dim, got {${ragged}}`);
  const r = ragged[0]!;
  c.index(r, a.dims.length, "lhs ragged dim");
  const mode = dn.lhsBatch.includes(r)
    ? "batch"
    : dn.lhsContracting.includes(r)
      ? "contracting"
      : "non-contracting";
  const lhsFree = a.dims.map((_, i) => i).filter(
    (i) => !dn.lhsBatch.includes(i) && !dn.lhsContracting.includes(i),
  );
  const prefix =
    mode === "batch"
      ? dn.lhsBatch.slice(0, dn.lhsBatch.indexOf(r))
      : mode === "contracting"
        ? [...dn.lhsBatch, ...dn.lhsContracting.slice(0, dn.lhsContracting.indexOf(r))]
        : [...dn.lhsBatch, ...lhsFree.slice(0, lhsFree.indexOf(r))];
  if (gs.dims.length === 0) c.fail(`group_sizes must have a group dim, got ${str(gs)}`);
  if (gs.dims.length !== 1) {
    const want = prefix.map((d) => a.dims[d]!);
    if (gs.dims.length !== want.length + 1 || want.some((d, i) => gs.dims[i] !== d)) {
      c.fail(`group_sizes must have shape [${[...want, "g"].join(",")}], got ${str(gs)}`);
    }
  }
  const g = gs.dims[gs.dims.length - 1]!;
  for (const d of groupDims) {
    c.index(d, b.dims.length, "rhs group dim");
    if (dn.rhsBatch.includes(d) || dn.rhsContracting.includes(d)) {
      c.fail(`rhs group dim ${d} cannot be a batch or contracting dim`);
    }
  }
  if (mode !== "non-contracting" && groupDims.length !== 0) {
    c.fail(`a ${mode} ragged dim takes no rhs group dims, got {${groupDims}}`);
  }
  if (mode === "non-contracting") {
    if (groupDims.length !== 1) {
      c.fail(`a non-contracting ragged dim needs exactly one rhs group dim, got {${groupDims}}`);
    }
    if (b.dims[groupDims[0]!] !== g) {
      c.fail(`the rhs group dim must have size ${g} (group_sizes), got ${b.dims[groupDims[0]!]}`);
    }
  }
  const { dims, dynamic } = dotResultDims(c, a, b, dn, groupDims);
  if (mode === "contracting") {
    dims.unshift(g);
    dynamic.unshift(gs.dynamic[gs.dims.length - 1]!);
  }
  return arrayShape(preferredType(c, t), dims, dynamic);
};

/**
 * map(operands...): to_apply over the elements of same-dims operands, scalars in, a scalar out;
 * dimensions=, when given, lists every dim in order (XLA maps over all of them).
 */
const mapRule: ShapeRule = (c: RuleContext) => {
  if (c.operands.length === 0) c.fail("needs at least one operand");
  const xs = c.operands.map((_, i) => c.array(i));
  const first = xs[0]!;
  mergeDims(c, xs, first.type);
  const dims = c.attrs.dimensions;
  if (dims !== undefined && (dims.length !== first.dims.length || dims.some((d, i) => d !== i))) {
    c.fail(`dimensions {${dims}} must be every operand dim in order (0..${first.dims.length - 1})`);
  }
  const sig = c.callee(0, "to_apply");
  const where = `to_apply ${signatureToString(sig)}`;
  if (sig.params.length !== xs.length) {
    c.fail(`${where} takes ${sig.params.length} parameters but got ${xs.length} operands`);
  }
  xs.forEach((x, i) => {
    if (!shapesEqual(sig.params[i]!, scalarShape(x.type))) {
      c.fail(`${where}: parameter ${i} must be ${x.type}[]`);
    }
  });
  const r = sig.result;
  if (r.kind !== "array" || r.dims.length !== 0) c.fail(`${where} must return a scalar`);
  return mergeDims(c, xs, r.type);
};

/** An array shape with a dim of size n inserted at `at`. */
function withDim(s: Shape, at: number, n: number, c: RuleContext): Shape {
  if (s.kind !== "array") c.fail(`scan outputs must be arrays, got ${str(s)}`);
  if (at > s.dims.length) c.fail(`scan dim ${at} is out of range for output ${str(s)}`);
  const dims = [...s.dims];
  const dynamic = [...s.dynamic];
  dims.splice(at, 0, n);
  dynamic.splice(at, 0, false);
  return arrayShape(s.type, dims, dynamic);
}

/**
 * scan(inputs..., inits...): to_apply runs once per element along dimensions={d} (backwards with
 * is_reverse), on the inputs' slices and the carries, giving (outputs..., carries...); the
 * result stacks each output along d and ends with the last carries (XLA's parser's rule).
 */
const scanRule: ShapeRule = (c: RuleContext) => {
  const k = c.need(c.attrs.numCarries, "num_carries");
  c.int(k, "num_carries", 0);
  if (k > c.operands.length) {
    c.fail(`num_carries ${k} is more than the ${c.operands.length} operands`);
  }
  const nIn = c.operands.length - k;
  if (nIn === 0) c.fail("needs at least one input to scan");
  const d = c.oneDim(c.array(0, "input 0").dims.length);
  const n = c.array(0, "input 0").dims[d]!;
  const inputs = c.operands.slice(0, nIn).map((_, i) => c.array(i, `input ${i}`));
  for (const x of inputs) {
    if (x.dims.length <= d || x.dims[d] !== n) {
      c.fail(`every input needs dim ${d} of size ${n}, got ${str(x)}`);
    }
  }
  const carries = c.operands.slice(nIn);
  const sig = c.callee(0, "to_apply");
  const where = `to_apply ${signatureToString(sig)}`;
  if (sig.params.length !== c.operands.length) {
    c.fail(`${where} takes ${sig.params.length} parameters but got ${c.operands.length} operands`);
  }
  inputs.forEach((x, i) => {
    const keep = (_: unknown, j: number) => j !== d;
    const slice = arrayShape(x.type, x.dims.filter(keep), x.dynamic.filter(keep));
    if (!compatibleShapes(sig.params[i]!, slice)) {
      c.fail(`${where}: parameter ${i} must be the slice ${str(slice)} of input ${i}`);
    }
  });
  carries.forEach((x, i) => {
    if (!compatibleShapes(sig.params[nIn + i]!, x)) {
      c.fail(`${where}: parameter ${nIn + i} must be carry ${i}'s ${str(x)}`);
    }
  });
  const root = sig.result;
  if (root.kind !== "tuple") {
    if (k > 0) return plainShape(root);
    return withDim(root, d, n, c);
  }
  const m = root.elements.length;
  if (m < k) c.fail(`${where} must return (outputs..., ${k} carries)`);
  root.elements.slice(m - k).forEach((e, i) => {
    if (!compatibleShapes(e, carries[i]!)) {
      c.fail(`${where}: its carry ${i} ${str(e)} must be the init's ${str(carries[i]!)}`);
    }
  });
  return tupleShape(
    root.elements.map((e, i) => (i < m - k ? withDim(e, d, n, c) : plainShape(e))),
  );
};

/** ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes). */
const raggedAllToAllRule: ShapeRule = (c: RuleContext) => {
  const input = c.array(0, "input");
  const output = c.array(1, "output");
  if (input.type !== output.type) {
    c.fail(
      `input and output must have the same element type, got ${input.type} and ${output.type}`,
    );
  }
  const rest = (s: ArrayShape) => s.dims.slice(1).join(",");
  if (input.dims.length !== output.dims.length || rest(input) !== rest(output)) {
    c.fail(`input ${str(input)} and output ${str(output)} must agree on every dim but the first`);
  }
  const names = ["input_offsets", "send_sizes", "output_offsets", "recv_sizes"];
  names.forEach((name, i) => {
    const s = c.array(i + 2, name);
    if (s.type !== "s32" && s.type !== "s64") c.fail(`${name} must be s32 or s64, got ${str(s)}`);
  });
  return plain(output);
};

/** collective-broadcast(x): each group's first device's x, on every device of the group. */
const collectiveBroadcastRule: ShapeRule = (c) => plainShape(c.operands[0]!);

/** Output dims of a window over `base` (XLA's InferWindowOutputShape). */
function windowOutput(
  c: RuleContext,
  base: readonly number[],
  baseDynamic: readonly boolean[],
  window: readonly WindowDim[],
): { dims: number[]; dynamic: boolean[] } {
  if (window.length !== base.length) {
    c.fail(`the window has ${window.length} dims but the base has ${base.length}`);
  }
  const dims = window.map((w, i) => {
    c.int(w.size, `window size of dim ${i}`, 1);
    c.int(w.stride, `window stride of dim ${i}`, 1);
    c.int(w.padLow, `window low padding of dim ${i}`);
    c.int(w.padHigh, `window high padding of dim ${i}`);
    c.int(w.baseDilation, `base dilation of dim ${i}`, 1);
    c.int(w.windowDilation, `window dilation of dim ${i}`, 1);
    const padded = w.padLow + dilatedBound(base[i]!, w.baseDilation) + w.padHigh;
    if (padded < 0) c.fail(`the padded base of window dim ${i} is negative (${padded})`);
    return stridedBound(padded, dilatedBound(w.size, w.windowDilation), w.stride);
  });
  return { dims, dynamic: [...baseDynamic] };
}

function checkConvDims(c: RuleContext, d: ConvDimensionNumbers, rank: number): void {
  const sides: [string, number[]][] = [
    ["input", [d.inputBatch, d.inputFeature, ...d.inputSpatial]],
    ["kernel", [d.kernelInputFeature, d.kernelOutputFeature, ...d.kernelSpatial]],
    ["output", [d.outputBatch, d.outputFeature, ...d.outputSpatial]],
  ];
  for (const [side, list] of sides) {
    if (list.length !== rank) {
      c.fail(`convolution ${side} dims {${list}} must name each of the ${rank} dims once`);
    }
    c.dimList(list, rank, `convolution ${side} dims`, { unique: true });
  }
}

const convolutionRule: ShapeRule = (c) => {
  const lhs = c.array(0, "lhs");
  const rhs = c.array(1, "rhs");
  const t = sameTypes(c, [lhs, rhs]);
  const d = c.need(c.attrs.convDims, "convDims");
  const window = c.need(c.attrs.window, "window");
  const fgc = c.attrs.featureGroupCount ?? 1;
  const bgc = c.attrs.batchGroupCount ?? 1;
  c.int(fgc, "featureGroupCount", 1);
  c.int(bgc, "batchGroupCount", 1);
  if (fgc > 1 && bgc > 1) {
    c.fail(`featureGroupCount ${fgc} and batchGroupCount ${bgc} cannot both exceed 1`);
  }
  const nSpatial = d.inputSpatial.length;
  const rank = nSpatial + 2;
  if (lhs.dims.length !== rank || rhs.dims.length !== rank) {
    c.fail(`lhs and rhs must have rank ${rank} (${nSpatial} spatial dims + batch + feature)`);
  }
  checkConvDims(c, d, rank);
  if (window.length !== nSpatial) {
    c.fail(`the window has ${window.length} dims but there are ${nSpatial} spatial dims`);
  }
  const inFeatures = lhs.dims[d.inputFeature]!;
  const inBatch = lhs.dims[d.inputBatch]!;
  const kIn = rhs.dims[d.kernelInputFeature]!;
  const kOut = rhs.dims[d.kernelOutputFeature]!;
  if (inFeatures % fgc !== 0 || inFeatures / fgc !== kIn) {
    c.fail(
      `input features (${inFeatures}) must equal kernel input features (${kIn}) times ` +
        `featureGroupCount (${fgc})`,
    );
  }
  if (kOut % fgc !== 0) {
    c.fail(`kernel output features (${kOut}) must be a multiple of featureGroupCount (${fgc})`);
  }
  if (kOut % bgc !== 0) {
    c.fail(`kernel output features (${kOut}) must be a multiple of batchGroupCount (${bgc})`);
  }
  if (inBatch % bgc !== 0) {
    c.fail(`input batch (${inBatch}) must be a multiple of batchGroupCount (${bgc})`);
  }
  d.kernelSpatial.forEach((k, i) => {
    if (rhs.dims[k] !== window[i]!.size) {
      c.fail(
        `window size ${window[i]!.size} of spatial dim ${i} must equal the kernel's spatial ` +
          `dim ${k} (size ${rhs.dims[k]})`,
      );
    }
  });
  if (rhs.dynamic[d.kernelOutputFeature]) {
    c.fail(`a dynamic kernel output feature dim is not supported`);
  }
  const out = windowOutput(
    c,
    d.inputSpatial.map((s) => lhs.dims[s]!),
    d.inputSpatial.map((s, i) => lhs.dynamic[s]! || rhs.dynamic[d.kernelSpatial[i]!]!),
    window,
  );
  const dims: number[] = new Array<number>(rank).fill(0);
  const dynamic: boolean[] = new Array<boolean>(rank).fill(false);
  dims[d.outputBatch] = inBatch / bgc;
  dynamic[d.outputBatch] = lhs.dynamic[d.inputBatch]!;
  dims[d.outputFeature] = kOut;
  d.outputSpatial.forEach((o, i) => {
    dims[o] = out.dims[i]!;
    dynamic[o] = out.dynamic[i]!;
  });
  return arrayShape(preferredType(c, t), dims, dynamic);
};

// ---- Reductions, windows, indexing, sorting --------------------------------------------------

/**
 * Checks a reducer (XLA's VerifyReducerShape, with exact types): 2N scalar parameters (N
 * accumulators typed as the inits, then N values typed as the inputs) returning the accumulators
 * (a scalar for N = 1, an N-tuple otherwise). Returns the accumulator types.
 */
function checkReducer(
  c: RuleContext,
  inits: readonly ArrayShape[],
  inputTypes: readonly ElementType[],
): ElementType[] {
  const sig = c.callee(0, "to_apply");
  const n = inits.length;
  const where = `reducer ${signatureToString(sig)}`;
  if (sig.params.length !== 2 * n) {
    c.fail(`${where} must take ${2 * n} scalar parameters (${n} accumulators, then ${n} values)`);
  }
  let accs: readonly Shape[];
  if (n === 1) {
    if (sig.result.kind !== "array") c.fail(`${where} must return a scalar`);
    accs = [sig.result];
  } else {
    if (sig.result.kind !== "tuple" || sig.result.elements.length !== n) {
      c.fail(`${where} must return a tuple of ${n} scalars`);
    }
    accs = sig.result.elements;
  }
  return accs.map((acc, i) => {
    if (acc.kind !== "array" || acc.dims.length !== 0) {
      c.fail(`${where} must return scalars, got ${str(acc)} at index ${i}`);
    }
    if (acc.type !== inits[i]!.type) {
      c.fail(`${where}: accumulator ${i} is ${acc.type} but init value ${i} is ${inits[i]!.type}`);
    }
    if (!shapesEqual(sig.params[i]!, acc)) {
      c.fail(`${where}: parameter ${i} must be the accumulator ${str(acc)}`);
    }
    const v = scalarShape(inputTypes[i]!);
    if (!shapesEqual(sig.params[n + i]!, v)) {
      c.fail(`${where}: parameter ${n + i} must be the input element ${str(v)}`);
    }
    // Exact types, as the evaluator and backends compute: a bf16 input with an f32 accumulator
    // must be converted first (XLA allows mixed float precision here; Kiln does not, yet).
    if (acc.type !== v.type) {
      c.fail(`${where}: accumulator ${i} type ${acc.type} does not fit input type ${v.type}`);
    }
    return acc.type;
  });
}

/** Splits reduce-style operands (N inputs, then N scalar inits). */
function inputsAndInits(c: RuleContext): { inputs: ArrayShape[]; inits: ArrayShape[] } {
  const total = c.operands.length;
  if (total < 2 || total % 2 !== 0) {
    c.fail(`needs N inputs followed by N init values (an even count >= 2), got ${total} operands`);
  }
  const n = total / 2;
  const inputs = c.operands.slice(0, n).map((_, i) => c.array(i, `input ${i}`));
  const inits = c.operands.slice(n).map((_, i) => c.scalar(n + i, `init value ${i}`));
  for (const s of inputs) {
    if (!sameBounds(inputs[0]!, s) || !s.dynamic.every((f, i) => f === inputs[0]!.dynamic[i])) {
      c.fail(`all inputs must have the same dims`);
    }
  }
  return { inputs, inits };
}

const reduceRule: ShapeRule = (c) => {
  const { inputs, inits } = inputsAndInits(c);
  const x = inputs[0]!;
  const dims = c.need(c.attrs.dimensions, "dimensions");
  c.dimList(dims, x.dims.length, "dimensions", { unique: true });
  const types = checkReducer(
    c,
    inits,
    inputs.map((s) => s.type),
  );
  const keep = x.dims.map((_, i) => i).filter((i) => !dims.includes(i));
  const out = types.map((t) =>
    arrayShape(
      t,
      keep.map((i) => x.dims[i]!),
      keep.map((i) => x.dynamic[i]!),
    ),
  );
  return out.length === 1 ? out[0]! : tupleShape(out);
};

const reduceWindowRule: ShapeRule = (c) => {
  const { inputs, inits } = inputsAndInits(c);
  const x = inputs[0]!;
  const window = c.need(c.attrs.window, "window");
  const types = checkReducer(
    c,
    inits,
    inputs.map((s) => s.type),
  );
  const w = windowOutput(c, x.dims, x.dynamic, window);
  const out = types.map((t) => arrayShape(t, w.dims, w.dynamic));
  return out.length === 1 ? out[0]! : tupleShape(out);
};

/** Indices expanded with a trailing 1 when indexVectorDim == rank (XLA's implicit reshape). */
function expandIndices(
  c: RuleContext,
  idx: ArrayShape,
  indexVectorDim: number,
): { dims: number[]; dynamic: boolean[] } {
  if (!isIntegerType(idx.type)) c.fail(`indices must have an integer type, got ${idx.type}`);
  if (!Number.isInteger(indexVectorDim) || indexVectorDim < 0) {
    c.fail(`indexVectorDim ${indexVectorDim} must be an integer >= 0`);
  }
  if (indexVectorDim > idx.dims.length) {
    c.fail(`indexVectorDim ${indexVectorDim} must be in [0, ${idx.dims.length}] for ${str(idx)}`);
  }
  const dims = [...idx.dims];
  const dynamic = [...idx.dynamic];
  if (indexVectorDim === dims.length) {
    dims.push(1);
    dynamic.push(false);
  }
  return { dims, dynamic };
}

/** Batching dims shared by operand and indices: pairwise, sizes equal, off the index vector. */
function checkBatching(
  c: RuleContext,
  operand: ArrayShape,
  operandBatching: readonly number[],
  indicesDims: readonly number[],
  indicesBatching: readonly number[],
  indexVectorDim: number,
  names: [string, string],
): void {
  c.dimList(operandBatching, operand.dims.length, names[0], { unique: true, sorted: true });
  c.dimList(indicesBatching, indicesDims.length, names[1], { unique: true });
  if (operandBatching.length !== indicesBatching.length) {
    c.fail(
      `${names[0]} {${operandBatching}} and ${names[1]} {${indicesBatching}} need equal sizes`,
    );
  }
  if (indicesBatching.includes(indexVectorDim)) {
    c.fail(`${names[1]} {${indicesBatching}} must not contain indexVectorDim ${indexVectorDim}`);
  }
  operandBatching.forEach((o, i) => {
    const k = indicesBatching[i]!;
    if (operand.dims[o] !== indicesDims[k]) {
      c.fail(
        `batching dim sizes must match: operand dim ${o} is ${operand.dims[o]}, indices dim ` +
          `${k} is ${indicesDims[k]}`,
      );
    }
  });
}

const gatherRule: ShapeRule = (c) => {
  const x = c.array(0, "operand");
  const idx = c.array(1, "start indices");
  const g = c.need(c.attrs.gather, "gather");
  const sizes = c.need(c.attrs.gatherSliceSizes, "gatherSliceSizes");
  const ex = expandIndices(c, idx, g.indexVectorDim);
  const rank = x.dims.length;
  const batchRank = ex.dims.length - 1;
  const outRank = g.offsetDims.length + batchRank;
  c.dimList(g.offsetDims, outRank, "offsetDims", { unique: true, sorted: true });
  c.dimList(g.collapsedSliceDims, rank, "collapsedSliceDims", { unique: true, sorted: true });
  checkBatching(
    c,
    x,
    g.operandBatchingDims,
    ex.dims,
    g.startIndicesBatchingDims,
    g.indexVectorDim,
    ["operandBatchingDims", "startIndicesBatchingDims"],
  );
  for (const d of g.operandBatchingDims) {
    if (g.collapsedSliceDims.includes(d)) {
      c.fail(`dim ${d} cannot be both a collapsed slice dim and an operand batching dim`);
    }
  }
  if (g.startIndexMap.length !== ex.dims[g.indexVectorDim]) {
    c.fail(
      `startIndexMap {${g.startIndexMap}} needs one entry per index vector element ` +
        `(${ex.dims[g.indexVectorDim]})`,
    );
  }
  c.dimList(g.startIndexMap, rank, "startIndexMap", { unique: true });
  for (const d of g.startIndexMap) {
    if (g.operandBatchingDims.includes(d)) {
      c.fail(`startIndexMap {${g.startIndexMap}} must not contain operand batching dim ${d}`);
    }
  }
  if (sizes.length !== rank) {
    c.fail(`gatherSliceSizes has ${sizes.length} entries but the operand has rank ${rank}`);
  }
  sizes.forEach((s, i) => {
    c.int(s, `slice size of dim ${i}`, 0);
    if (s > x.dims[i]!) c.fail(`slice size ${s} of dim ${i} exceeds the operand's ${x.dims[i]}`);
  });
  for (const d of [...g.collapsedSliceDims, ...g.operandBatchingDims]) {
    if (sizes[d]! > 1) {
      c.fail(`collapsed and batching dims need slice size <= 1; dim ${d} is ${sizes[d]}`);
    }
  }
  const windowDims = sizes
    .map((_, i) => i)
    .filter((i) => !g.collapsedSliceDims.includes(i) && !g.operandBatchingDims.includes(i));
  if (windowDims.length !== g.offsetDims.length) {
    c.fail(
      `offsetDims {${g.offsetDims}} needs one entry per operand dim that is neither collapsed ` +
        `nor batching (${windowDims.length})`,
    );
  }
  const dims: number[] = [];
  const dynamic: boolean[] = [];
  let offsetSeen = 0;
  let batchSeen = 0;
  for (let i = 0; i < outRank; i++) {
    if (g.offsetDims.includes(i)) {
      const od = windowDims[offsetSeen++]!;
      dims.push(sizes[od]!);
      // Gathering a whole dynamic dim keeps it dynamic.
      dynamic.push(x.dynamic[od]! && sizes[od] === x.dims[od]);
    } else {
      if (batchSeen === g.indexVectorDim) batchSeen++;
      dims.push(ex.dims[batchSeen]!);
      dynamic.push(ex.dynamic[batchSeen]!);
      batchSeen++;
    }
  }
  return arrayShape(x.type, dims, dynamic);
};

const scatterRule: ShapeRule = (c) => {
  const total = c.operands.length;
  if (total < 3 || total % 2 !== 1) {
    c.fail(`needs N inputs, the indices, then N updates (an odd count >= 3), got ${total}`);
  }
  const n = (total - 1) / 2;
  const inputs = c.operands.slice(0, n).map((_, i) => c.array(i, `input ${i}`));
  const idx = c.array(n, "scatter indices");
  const updates = c.operands.slice(n + 1).map((_, i) => c.array(n + 1 + i, `updates ${i}`));
  const s = c.need(c.attrs.scatter, "scatter");
  const x = inputs[0]!;
  const u = updates[0]!;
  for (const other of inputs) {
    if (!sameBounds(x, other)) c.fail(`all inputs must have the same dims`);
  }
  for (const other of updates) {
    if (!sameBounds(u, other)) c.fail(`all updates must have the same dims`);
  }
  inputs.forEach((inp, i) => {
    if (updates[i]!.type !== inp.type) {
      c.fail(`updates ${i} has type ${updates[i]!.type} but input ${i} is ${inp.type}`);
    }
  });
  const ex = expandIndices(c, idx, s.indexVectorDim);
  const rank = x.dims.length;
  c.dimList(s.updateWindowDims, u.dims.length, "updateWindowDims", { unique: true, sorted: true });
  c.dimList(s.insertedWindowDims, rank, "insertedWindowDims", { unique: true, sorted: true });
  checkBatching(
    c,
    x,
    s.inputBatchingDims,
    ex.dims,
    s.scatterIndicesBatchingDims,
    s.indexVectorDim,
    ["inputBatchingDims", "scatterIndicesBatchingDims"],
  );
  for (const d of s.inputBatchingDims) {
    if (s.insertedWindowDims.includes(d)) {
      c.fail(`dim ${d} cannot be both an inserted window dim and an input batching dim`);
    }
  }
  const expectedUpdateRank = ex.dims.length - 1 + s.updateWindowDims.length;
  if (u.dims.length !== expectedUpdateRank) {
    c.fail(`updates must have rank ${expectedUpdateRank}, got ${u.dims.length}`);
  }
  const windowRank =
    s.updateWindowDims.length + s.insertedWindowDims.length + s.inputBatchingDims.length;
  if (windowRank !== rank) {
    c.fail(
      `updateWindowDims, insertedWindowDims and inputBatchingDims together must cover the ` +
        `input's ${rank} dims, got ${windowRank}`,
    );
  }
  if (s.scatterDimsToOperandDims.length !== ex.dims[s.indexVectorDim]) {
    c.fail(
      `scatterDimsToOperandDims {${s.scatterDimsToOperandDims}} needs one entry per index ` +
        `vector element (${ex.dims[s.indexVectorDim]})`,
    );
  }
  c.dimList(s.scatterDimsToOperandDims, rank, "scatterDimsToOperandDims", { unique: true });
  for (const d of s.scatterDimsToOperandDims) {
    if (s.inputBatchingDims.includes(d)) {
      c.fail(`scatterDimsToOperandDims must not contain input batching dim ${d}`);
    }
  }
  const windowOperandDims = x.dims
    .map((_, i) => i)
    .filter((i) => !s.insertedWindowDims.includes(i) && !s.inputBatchingDims.includes(i));
  s.updateWindowDims.forEach((ud, i) => {
    const od = windowOperandDims[i]!;
    if (u.dims[ud]! > x.dims[od]!) {
      c.fail(
        `update window dim ${ud} (size ${u.dims[ud]}) exceeds input dim ${od} (size ` +
          `${x.dims[od]})`,
      );
    }
  });
  let seen = 0;
  for (let i = 0; i < u.dims.length; i++) {
    if (s.updateWindowDims.includes(i)) continue;
    if (seen === s.indexVectorDim) seen++;
    if (u.dims[i] !== ex.dims[seen]) {
      c.fail(
        `update scatter dim ${i} (size ${u.dims[i]}) must equal indices dim ${seen} (size ` +
          `${ex.dims[seen]})`,
      );
    }
    seen++;
  }
  checkReducer(
    c,
    inputs.map((inp) => scalarShape(inp.type)),
    updates.map((up) => up.type),
  );
  return n === 1 ? plain(x) : tupleShape(inputs.map((inp) => plain(inp)));
};

const sortRule: ShapeRule = (c) => {
  if (c.operands.length < 1) c.fail(`needs at least one operand`);
  const xs = c.operands.map((_, i) => c.array(i));
  const x = xs[0]!;
  for (const s of xs) {
    if (!sameBounds(x, s) || !s.dynamic.every((f, i) => f === x.dynamic[i])) {
      c.fail(`all operands must have the same dims`);
    }
  }
  c.oneDim(x.dims.length);
  const sig = c.callee(0, "comparator");
  const where = `comparator ${signatureToString(sig)}`;
  if (sig.params.length !== 2 * xs.length) {
    c.fail(`${where} must take ${2 * xs.length} scalar parameters (two per operand)`);
  }
  xs.forEach((s, i) => {
    const want = scalarShape(s.type);
    for (const k of [2 * i, 2 * i + 1]) {
      if (!shapesEqual(sig.params[k]!, want)) {
        c.fail(`${where}: parameter ${k} must be ${str(want)} (operand ${i}'s element)`);
      }
    }
  });
  if (!shapesEqual(sig.result, scalarShape("pred"))) c.fail(`${where} must return pred[]`);
  return xs.length === 1 ? plain(x) : tupleShape(xs.map((s) => plain(s)));
};

// ---- Tuples and control flow -----------------------------------------------------------------

const tupleRule: ShapeRule = (c) => tupleShape(c.operands);

const getTupleElementRule: ShapeRule = (c: RuleContext) => {
  const t = c.operands[0]!;
  if (t.kind !== "tuple") c.fail(`the operand must be a tuple`);
  const i = c.need(c.attrs.tupleIndex, "tupleIndex");
  c.index(i, t.elements.length, "tupleIndex");
  return t.elements[i]!;
};

/** Operands must match the callee's parameters one for one; the result is the callee's. */
const callLike =
  (role: string): ShapeRule =>
  (c) => {
    const sig = c.callee(0, role);
    const where = `${role} computation ${signatureToString(sig)}`;
    if (sig.params.length !== c.operands.length) {
      c.fail(
        `${where} takes ${sig.params.length} parameters but got ${c.operands.length} operands`,
      );
    }
    sig.params.forEach((p, i) => {
      if (!shapesEqual(p, c.operands[i]!)) {
        c.fail(`${where}: operand ${i} must have shape ${str(p)}`);
      }
    });
    if (c.opcode === "fusion") {
      const kind = c.need(c.attrs.fusionKind, "fusionKind");
      if (!["kLoop", "kInput", "kOutput", "kCustom"].includes(kind)) {
        c.fail(`unknown fusionKind ${String(kind)}`);
      }
      checkAliasing(c, sig.result);
    }
    return sig.result;
  };

const whileRule: ShapeRule = (c) => {
  const t = c.operands[0]!;
  const cond = c.callee(0, "condition");
  const body = c.callee(1, "body");
  const cw = `condition ${signatureToString(cond)}`;
  const bw = `body ${signatureToString(body)}`;
  if (cond.params.length !== 1 || !shapesEqual(cond.params[0]!, t)) {
    c.fail(`${cw} must take one parameter of the loop state's shape ${str(t)}`);
  }
  if (!shapesEqual(cond.result, scalarShape("pred"))) c.fail(`${cw} must return pred[]`);
  if (body.params.length !== 1 || !shapesEqual(body.params[0]!, t)) {
    c.fail(`${bw} must take one parameter of the loop state's shape ${str(t)}`);
  }
  if (!shapesEqual(body.result, t)) c.fail(`${bw} must return the loop state's shape ${str(t)}`);
  return t;
};

/** Same structure, types and bounds; dynamic where any is (XLA's merge over branches). */
function mergeBranchResults(c: RuleContext, a: Shape, b: Shape, j: number): Shape {
  const mismatch = (): never =>
    c.fail(`branch ${j} returns ${str(b)} but branch 0 returns ${str(a)}; they must agree`);
  if (a.kind === "tuple") {
    if (b.kind !== "tuple" || b.elements.length !== a.elements.length) return mismatch();
    return tupleShape(a.elements.map((e, i) => mergeBranchResults(c, e, b.elements[i]!, j)));
  }
  if (b.kind !== "array" || a.type !== b.type || !sameBounds(a, b)) return mismatch();
  return arrayShape(
    a.type,
    a.dims,
    a.dims.map((_, i) => a.dynamic[i]! || b.dynamic[i]!),
  );
}

const conditionalRule: ShapeRule = (c) => {
  const sel = c.scalar(0, "branch selector");
  const n = c.called.length;
  if (sel.type === "pred") {
    if (n !== 2) c.fail(`a pred selector needs exactly 2 branches, got ${n}`);
  } else if (sel.type !== "s32") {
    c.fail(`the branch selector must be pred[] or s32[], got ${str(sel)}`);
  }
  if (c.operands.length !== n + 1) {
    c.fail(`needs one operand per branch (${n}) after the selector, got ${c.operands.length - 1}`);
  }
  let result: Shape | undefined;
  for (let j = 0; j < n; j++) {
    const sig = c.callee(j, `branch ${j}`);
    const op = c.operands[j + 1]!;
    if (sig.params.length !== 1 || !shapesEqual(sig.params[0]!, op)) {
      c.fail(
        `branch ${j} computation ${signatureToString(sig)} must take one parameter of its ` +
          `operand's shape ${str(op)}`,
      );
    }
    result = result === undefined ? sig.result : mergeBranchResults(c, result, sig.result, j);
  }
  return result!;
};

// ---- Bounded dynamism ------------------------------------------------------------------------

const getDimensionSizeRule: ShapeRule = (c) => {
  const x = c.array(0);
  c.oneDim(x.dims.length);
  return scalarShape("s32");
};

const setDimensionSizeRule: ShapeRule = (c) => {
  const x = c.array(0);
  const size = c.array(1, "size");
  if (!shapesEqual(size, scalarShape("s32"))) c.fail(`the size must be s32[], got ${str(size)}`);
  const d = c.oneDim(x.dims.length);
  return arrayShape(
    x.type,
    x.dims,
    x.dynamic.map((f, i) => f || i === d),
  );
};

// ---- Collectives ----------------------------------------------------------------------------

/**
 * Checks replica_groups (ids non-negative, none in two groups, no empty group) and returns the
 * size every group has, or undefined when the groups are absent or empty (one group of every
 * device: its size is the device count, which the module does not carry).
 */
function groupSize(c: RuleContext, uniform: boolean): number | undefined {
  const groups = c.attrs.replicaGroups ?? [];
  const seen = new Set<number>();
  for (const g of groups) {
    if (g.length === 0) c.fail(`replica_groups must not hold an empty group`);
    for (const id of g) {
      if (!Number.isInteger(id) || id < 0) c.fail(`replica_groups: bad device id ${id}`);
      if (seen.has(id)) c.fail(`replica_groups: device ${id} is in more than one group`);
      seen.add(id);
    }
  }
  if (groups.length === 0) return undefined;
  const size = groups[0]!.length;
  if (uniform && groups.some((g) => g.length !== size)) {
    c.fail(`replica_groups must all have the same size, got ${printGroupsText(groups)}`);
  }
  return size;
}

const printGroupsText = (gs: readonly (readonly number[])[]): string =>
  `{${gs.map((g) => `{${g.join(",")}}`).join(",")}}`;

const oneOrTuple = (shapes: readonly Shape[]): Shape =>
  shapes.length === 1 ? shapes[0]! : tupleShape(shapes);

/** The array operands of a collective (at least one). */
function collectiveOperands(c: RuleContext): ArrayShape[] {
  if (c.operands.length === 0) c.fail(`needs at least one operand`);
  return c.operands.map((_, i) => c.array(i));
}

/**
 * The reducer of all-reduce / reduce-scatter: (R[], R[]) -> R[]. R is the operands' type T or,
 * for float operands, another float type (XLA's verifier allows the mixed precision: values
 * are combined in R and the result converted back to T).
 */
function checkCollectiveReducer(c: RuleContext, ops: readonly ArrayShape[]): void {
  const sig = c.callee(0, "to_apply");
  const t = ops[0]!.type;
  const r = sig.result.kind === "array" ? sig.result.type : t;
  const s = scalarShape(r);
  const mixedOk = r === t || (isFloatType(r) && isFloatType(t));
  if (
    !mixedOk ||
    sig.params.length !== 2 ||
    !sig.params.every((p) => shapesEqual(p, s)) ||
    !shapesEqual(sig.result, s)
  ) {
    c.fail(`reducer ${signatureToString(sig)} must be (${t}[], ${t}[]) -> ${t}[]`);
  }
  for (const o of ops) {
    if (o.type !== t) {
      c.fail(`all operands must have one element type ${t}, got ${str(o)}`);
    }
  }
}

const allReduceRule: ShapeRule = (c) => {
  const ops = collectiveOperands(c);
  groupSize(c, false);
  checkCollectiveReducer(c, ops);
  return oneOrTuple(ops);
};

/**
 * all-gather (grow = true) and reduce-scatter: each result is its operand with dimension
 * `dimensions[0]` multiplied (all-gather) or divided (reduce-scatter) by the group size. With
 * no groups the size is the device count, which the module does not carry: the declared result
 * is then checked for a whole multiple / divisor.
 */
function gatherScatterResults(c: RuleContext, grow: boolean, declared: Shape): ArrayShape[] {
  const ops = collectiveOperands(c);
  const size = groupSize(c, true);
  // With a channel_id but not use_global_device_ids the groups list replicas, and every
  // partition of each joins in: the factor is the group size times the partition count, which
  // the module does not carry (XLA's CollectiveOpGroupMode kCrossReplicaAndPartition).
  const exact = (c.attrs.channelId ?? 0) <= 0 || c.attrs.useGlobalDeviceIds === true;
  const k = exact ? size : undefined;
  const rank = ops[0]!.dims.length;
  const d = c.oneDim(rank);
  const want = declared.kind === "tuple" ? declared.elements : [declared];
  if (want.length !== ops.length) {
    c.fail(`the result must hold ${ops.length} arrays (one per operand), got ${str(declared)}`);
  }
  return ops.map((x, i) => {
    const r = want[i]!;
    if (r.kind !== "array" || r.type !== x.type || r.dims.length !== x.dims.length) {
      c.fail(`result ${i} must be ${x.type} of rank ${x.dims.length}, got ${str(r)}`);
    }
    if (x.dims.length !== rank) c.fail(`all operands must have rank ${rank}, got ${str(x)}`);
    const ok = x.dims.every((n, j) => {
      if (j !== d) return n === r.dims[j];
      const [big, small] = grow ? [r.dims[j]!, n] : [n, r.dims[j]!];
      if (k !== undefined) return big === small * k;
      const unit = small * (size ?? 1);
      return unit > 0 ? big % unit === 0 : big === 0;
    });
    if (!ok || x.dynamic.some((f) => f) || r.dynamic.some((f) => f)) {
      const how = grow ? "multiplied" : "divided";
      const by = k !== undefined
        ? `the group size ${k}`
        : size !== undefined
          ? `a multiple of the group size ${size} (times the partition count)`
          : "the device count";
      c.fail(
        `result ${i} ${str(r)} must be operand ${str(x)} with dimension ${d} ${how} by ${by} ` +
          "(static dims)",
      );
    }
    return plain(r);
  });
}

const allGatherRule: ShapeRule = (c: RuleContext) => {
  const d = c.declared ?? c.fail(`the declared shape is required`);
  return oneOrTuple(gatherScatterResults(c, true, d));
};

/** all-gather-start: (operand, result); with several operands ((operands...), (results...)). */
const allGatherStartRule: ShapeRule = (c: RuleContext) => {
  const d = c.declared ?? c.fail(`the declared shape is required`);
  if (d.kind !== "tuple" || d.elements.length !== 2) {
    c.fail(`the result must be the tuple (operand(s), result(s)), got ${str(d)}`);
  }
  const results = gatherScatterResults(c, true, d.elements[1]!);
  return tupleShape([oneOrTuple(c.operands), oneOrTuple(results)]);
};

const reduceScatterRule: ShapeRule = (c: RuleContext) => {
  const d = c.declared ?? c.fail(`the declared shape is required`);
  const results = gatherScatterResults(c, false, d);
  checkCollectiveReducer(c, collectiveOperands(c));
  return oneOrTuple(results);
};

/**
 * all-to-all: with `dimensions={d}` one array, its dimension d split into group-size chunks
 * (so d must divide); without, N arrays exchanged between the N devices of each group.
 */
const allToAllRule: ShapeRule = (c) => {
  const ops = collectiveOperands(c);
  const k = groupSize(c, true);
  if (c.attrs.dimensions !== undefined) {
    if (ops.length !== 1) c.fail(`with dimensions= it takes one operand, got ${ops.length}`);
    const x = ops[0]!;
    const d = c.oneDim(x.dims.length);
    if (k !== undefined && x.dims[d]! % k !== 0) {
      c.fail(`dimension ${d} of ${str(x)} must split into ${k} equal chunks (the group size)`);
    }
    return x;
  }
  if (k !== undefined && ops.length !== k) {
    c.fail(`the tuple form needs one operand per device of a group (${k}), got ${ops.length}`);
  }
  return oneOrTuple(ops);
};

function checkPairs(c: RuleContext): void {
  const pairs = c.need(c.attrs.sourceTargetPairs, "sourceTargetPairs");
  const sources = new Set<number>();
  const targets = new Set<number>();
  for (const [x, y] of pairs) {
    if (!Number.isInteger(x) || x < 0 || !Number.isInteger(y) || y < 0) {
      c.fail(`source_target_pairs: bad pair {${x},${y}}`);
    }
    if (sources.has(x)) c.fail(`source_target_pairs: device ${x} is a source twice`);
    if (targets.has(y)) c.fail(`source_target_pairs: device ${y} is a target twice`);
    sources.add(x);
    targets.add(y);
  }
}

const collectivePermuteRule: ShapeRule = (c) => {
  const x = c.array(0);
  checkPairs(c);
  return x;
};

/** collective-permute-start: (operand, result), optionally followed by u32[]/s32[] contexts. */
const collectivePermuteStartRule: ShapeRule = (c: RuleContext) => {
  const x = c.array(0);
  checkPairs(c);
  const d = c.declared;
  if (d === undefined) return tupleShape([x, x]);
  if (d.kind !== "tuple" || d.elements.length < 2) {
    c.fail(`the result must be the tuple (operand, result, contexts...), got ${str(d)}`);
  }
  const extra = d.elements.slice(2);
  for (const e of extra) {
    if (e.kind !== "array" || e.dims.length !== 0 || (e.type !== "u32" && e.type !== "s32")) {
      c.fail(`the contexts after (operand, result) must be u32[] or s32[], got ${str(e)}`);
    }
  }
  return tupleShape([x, x, ...extra.map((e) => plain(e as ArrayShape))]);
};

/** all-gather-done and collective-permute-done: element 1 (the result) of a -start tuple. */
const collectiveDoneRule: ShapeRule = (c: RuleContext) => {
  const t = c.operands[0]!;
  if (t.kind !== "tuple" || t.elements.length < 2) {
    c.fail(`the operand must be the tuple of a -start (operand, result, ...), got ${str(t)}`);
  }
  return t.elements[1]!;
};

// ---- Asynchronous calls ------------------------------------------------------------------------

/**
 * async-start: declared `((operands...), result, contexts...)`: element 0 the operands' shapes,
 * element 1 the callee's result, which takes the operands as its parameters; any further
 * elements (XLA's contexts, typically u32[] / s32[]) are kept as declared.
 */
const asyncStartRule: ShapeRule = (c: RuleContext) => {
  const sig = c.callee(0, "calls");
  const where = `async computation ${signatureToString(sig)}`;
  if (sig.params.length !== c.operands.length) {
    c.fail(`${where} takes ${sig.params.length} parameters but got ${c.operands.length} operands`);
  }
  sig.params.forEach((p, i) => {
    if (!shapesEqual(p, c.operands[i]!)) c.fail(`${where}: operand ${i} must have shape ${str(p)}`);
  });
  const d = c.declared;
  const head = [tupleShape(c.operands), sig.result];
  if (d === undefined) return tupleShape(head);
  if (d.kind !== "tuple" || d.elements.length < 2) {
    c.fail(`the result must be ((operands...), result, contexts...), got ${str(d)}`);
  }
  return tupleShape([...head, ...d.elements.slice(2)]);
};

/** async-update: the -start tuple, unchanged; with `calls=`, the start's computation. */
const asyncUpdateRule: ShapeRule = (c: RuleContext) => {
  const t = c.operands[0]!;
  if (t.kind !== "tuple" || t.elements.length < 2) {
    c.fail(`the operand must be an async-start's ((operands...), result, ...), got ${str(t)}`);
  }
  checkAsyncCallee(c, t);
  return t;
};

/** async-done: element 1 (the result) of the -start tuple. */
const asyncDoneRule: ShapeRule = (c: RuleContext) => {
  const t = c.operands[0]!;
  if (t.kind !== "tuple" || t.elements.length < 2) {
    c.fail(`the operand must be an async-start's ((operands...), result, ...), got ${str(t)}`);
  }
  checkAsyncCallee(c, t);
  return t.elements[1]!;
};

function checkAsyncCallee(c: RuleContext, t: TupleShape): void {
  if (c.called.length === 0) return;
  const sig = c.callee(0, "calls");
  if (!shapesEqual(sig.result, t.elements[1]!)) {
    c.fail(`the async computation returns ${str(sig.result)}, not the start's result`);
  }
}

// ---- Side effects, transfers, copies, random numbers -------------------------------------------

const TOKEN = scalarShape("token");
const isToken = (s: Shape | undefined): boolean =>
  s !== undefined && s.kind === "array" && s.type === "token" && s.dims.length === 0;

function tokenOperand(c: RuleContext, i: number): void {
  if (!isToken(c.operands[i])) c.fail(`operand ${i} must be token[], got ${str(c.operands[i]!)}`);
}

/** XLA's ShapeUtil::Compatible: same element types and dims, layouts and dynamism aside. */
function compatibleShapes(a: Shape, b: Shape): boolean {
  if (a.kind === "tuple" || b.kind === "tuple") {
    return (
      a.kind === "tuple" &&
      b.kind === "tuple" &&
      a.elements.length === b.elements.length &&
      a.elements.every((e, i) => compatibleShapes(e, b.elements[i]!))
    );
  }
  return a.type === b.type && sameBounds(a, b);
}

/** add-dependency(x, token): x, ordered after the token. */
const addDependencyRule: ShapeRule = (c) => {
  tokenOperand(c, 1);
  return plainShape(c.operands[0]!);
};

/** send(data, token): (data, u32[] context, token[]). */
const sendRule: ShapeRule = (c) => {
  tokenOperand(c, 1);
  return tupleShape([plainShape(c.operands[0]!), scalarShape("u32"), TOKEN]);
};

/** recv(token): the declared (data, u32[] context, token[]); the data shape is the declared one. */
const recvRule: ShapeRule = (c: RuleContext) => {
  tokenOperand(c, 0);
  const d = c.declared!;
  if (d.kind !== "tuple" || d.elements.length !== 3) {
    c.fail(`the result must be the tuple (data, u32[], token[]), got ${str(d)}`);
  }
  return tupleShape([plainShape(d.elements[0]!), scalarShape("u32"), TOKEN]);
};

/** The (data, u32[], token[]) tuple of a send or recv, operand 0 of its -done. */
function transferTuple(c: RuleContext, of: string): TupleShape {
  const t = c.operands[0]!;
  if (t.kind !== "tuple" || t.elements.length !== 3 || !isToken(t.elements[2])) {
    c.fail(`the operand must be a ${of}'s (data, u32[], token[]), got ${str(t)}`);
  }
  return t;
}

const sendDoneRule: ShapeRule = (c: RuleContext) => {
  transferTuple(c, "send");
  return TOKEN;
};

/** recv-done: (data, token[]). */
const recvDoneRule: ShapeRule = (c: RuleContext) => {
  const t = transferTuple(c, "recv");
  return tupleShape([plainShape(t.elements[0]!), TOKEN]);
};

/** infeed(token): the declared (data, token[]). */
const infeedRule: ShapeRule = (c: RuleContext) => {
  tokenOperand(c, 0);
  const d = c.declared!;
  if (d.kind !== "tuple" || d.elements.length !== 2) {
    c.fail(`the result must be the tuple (data, token[]), got ${str(d)}`);
  }
  return tupleShape([plainShape(d.elements[0]!), TOKEN]);
};

/** outfeed(data, token): token[]; outfeed_shape, when given, is the data's shape. */
const outfeedRule: ShapeRule = (c) => {
  tokenOperand(c, 1);
  const want = c.attrs.outfeedShape;
  if (want !== undefined && !compatibleShapes(want, c.operands[0]!)) {
    c.fail(`outfeed_shape ${str(want)} must be the operand's shape ${str(c.operands[0]!)}`);
  }
  return TOKEN;
};

/** copy-start(x): (destination x, source x, u32[] context). */
const copyStartRule: ShapeRule = (c) => {
  const x = plainShape(c.operands[0]!);
  return tupleShape([x, x, scalarShape("u32")]);
};

/** copy-done: the destination of a copy-start's (destination, source, context). */
const copyDoneRule: ShapeRule = (c: RuleContext) => {
  const t = c.operands[0]!;
  if (t.kind !== "tuple" || t.elements.length < 2) {
    c.fail(`the operand must be a copy-start's (destination, source, context), got ${str(t)}`);
  }
  if (!compatibleShapes(t.elements[0]!, t.elements[1]!)) {
    c.fail(
      `the destination ${str(t.elements[0]!)} and source ${str(t.elements[1]!)} must have ` +
        "the same shape",
    );
  }
  return plainShape(t.elements[0]!);
};

/** reduce-precision: a float array rounded to exponent_bits and mantissa_bits; same shape. */
const reducePrecisionRule: ShapeRule = (c) => {
  const x = c.array(0);
  if (!isFloatType(x.type)) c.fail(`needs a floating-point element type, got ${x.type}`);
  const e = c.need(c.attrs.exponentBits, "exponent_bits");
  const m = c.need(c.attrs.mantissaBits, "mantissa_bits");
  c.int(e, "exponent_bits", 1);
  c.int(m, "mantissa_bits", 0);
  return plain(x);
};

/**
 * rng(a, b): numbers of the declared array shape, uniform in [a, b) or normal with mean a and
 * standard deviation b; a and b are scalars of the result's element type (XLA's verifier).
 */
const rngRule: ShapeRule = (c) => {
  const d = c.declaredArray();
  const a = c.scalar(0, "operand 0 (a)");
  const b = c.scalar(1, "operand 1 (b)");
  if (a.type !== b.type || a.type !== d.type) {
    c.fail(`operands and result must have the same element type, got ${a.type}, ${b.type} ` +
      `and ${d.type}`);
  }
  const dist = c.need(c.attrs.rngDistribution, "distribution");
  if (dist === "rng_normal" && !isFloatType(d.type)) {
    c.fail(`rng_normal needs a floating-point element type, got ${d.type}`);
  }
  if (dist === "rng_uniform" && d.type === "token") {
    c.fail(`rng_uniform needs a float, integer or pred element type, got ${d.type}`);
  }
  return plain(d);
};

/**
 * rng-bit-generator(state): the declared (new state, bits), the new state the operand's shape;
 * XLA also accepts a declared array (the bits alone).
 */
const rngBitGeneratorRule: ShapeRule = (c: RuleContext) => {
  const state = c.array(0, "the state");
  c.need(c.attrs.rngAlgorithm, "algorithm");
  const d = c.declared!;
  if (d.kind === "array") return plain(d);
  if (d.elements.length !== 2) {
    c.fail(`the result must be the tuple (state, bits), got ${str(d)}`);
  }
  if (!compatibleShapes(d.elements[0]!, state)) {
    c.fail(`the result's state ${str(d.elements[0]!)} must be the operand's ${str(state)}`);
  }
  return tupleShape([plain(state), plainShape(d.elements[1]!)]);
};

// ---- The table -------------------------------------------------------------------------------

const SHAPE_RULES = {
  parameter: parameterRule,
  constant: constantRule,
  iota: iotaRule,
  "replica-id": () => scalarShape("u32"),
  "partition-id": () => scalarShape("u32"),
  "after-all": afterAllRule,
  "add-dependency": addDependencyRule,
  "opt-barrier": (c) => plainShape(c.operands[0]!),
  send: sendRule,
  "send-done": sendDoneRule,
  recv: recvRule,
  "recv-done": recvDoneRule,
  infeed: infeedRule,
  outfeed: outfeedRule,
  "copy-start": copyStartRule,
  "copy-done": copyDoneRule,
  "reduce-precision": reducePrecisionRule,
  rng: rngRule,
  "rng-bit-generator": rngBitGeneratorRule,
  "ragged-dot": raggedDotRule,
  map: mapRule,
  scan: scanRule,
  "ragged-all-to-all": raggedAllToAllRule,
  "collective-broadcast": collectiveBroadcastRule,
  "async-start": asyncStartRule,
  "async-update": asyncUpdateRule,
  "async-done": asyncDoneRule,
  "all-reduce": allReduceRule,
  "all-reduce-start": allReduceRule,
  "all-reduce-done": (c) => c.operands[0]!,
  "all-gather": allGatherRule,
  "all-gather-start": allGatherStartRule,
  "all-gather-done": collectiveDoneRule,
  "reduce-scatter": reduceScatterRule,
  "all-to-all": allToAllRule,
  "collective-permute": collectivePermuteRule,
  "collective-permute-start": collectivePermuteStartRule,
  "collective-permute-done": collectiveDoneRule,
  abs: unary("signed"),
  negate: unary("numeric"),
  sign: unary("signed"),
  exponential: unary("float"),
  "exponential-minus-one": unary("float"),
  log: unary("float"),
  "log-plus-one": unary("float"),
  sqrt: unary("float"),
  rsqrt: unary("float"),
  cbrt: unary("float"),
  tanh: unary("float"),
  logistic: unary("float"),
  sine: unary("float"),
  cosine: unary("float"),
  tan: unary("float"),
  erf: unary("float"),
  floor: unary("float"),
  ceil: unary("float"),
  "round-nearest-afz": unary("float"),
  "round-nearest-even": unary("float"),
  "is-finite": unary("float", "pred"),
  not: unary("intOrPred"),
  copy: (c) => c.operands[0]!,
  convert: convertRule,
  "bitcast-convert": bitcastConvertRule,
  add: binary("any"),
  subtract: binary("numeric"),
  multiply: binary("any"),
  divide: binary("numeric"),
  remainder: binary("numeric"),
  power: binary("numeric"),
  maximum: binary("any"),
  minimum: binary("any"),
  atan2: binary("float"),
  and: binary("intOrPred"),
  or: binary("intOrPred"),
  xor: binary("intOrPred"),
  "shift-left": binary("integer"),
  "shift-right-arithmetic": binary("integer"),
  "shift-right-logical": binary("integer"),
  compare: compareRule,
  select: selectRule,
  clamp: clampRule,
  broadcast: broadcastRule,
  reshape: reshapeRule,
  bitcast: bitcastRule,
  transpose: transposeRule,
  slice: sliceRule,
  "dynamic-slice": dynamicSliceRule,
  "dynamic-update-slice": dynamicUpdateSliceRule,
  concatenate: concatenateRule,
  pad: padRule,
  reverse: reverseRule,
  dot: dotRule,
  convolution: convolutionRule,
  reduce: reduceRule,
  "reduce-window": reduceWindowRule,
  gather: gatherRule,
  scatter: scatterRule,
  sort: sortRule,
  tuple: tupleRule,
  "get-tuple-element": getTupleElementRule,
  fusion: callLike("fusion"),
  call: callLike("to_apply"),
  while: whileRule,
  conditional: conditionalRule,
  "get-dimension-size": getDimensionSizeRule,
  "set-dimension-size": setDimensionSizeRule,
  "custom-call": customCallRule,
} satisfies { [K in Opcode]: ShapeRule };
