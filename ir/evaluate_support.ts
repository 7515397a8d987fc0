// Shared plumbing of the reference evaluator (ir/evaluate.ts): the value type (a Literal or a
// nested array of them for tuples), row-major index arithmetic, typed element access, the
// context through which an opcode calls other computations, and the conformance check of a
// runtime value against a declared (possibly bounded-dynamic) shape. Values always carry their
// ACTUAL dims; a bounded dynamic dim of the IR shape only limits them.

import { isSmallFloatType, roundToSmallFloat } from "./small_floats.ts";
import type { Attributes } from "./attributes.ts";
import { allocate, Literal, roundToBF16, roundToF16 } from "./literal.ts";
import type { LiteralData } from "./literal.ts";
import type { Computation, Instruction } from "./module.ts";
import { isFloatType, shapeToString, type ElementType, type Shape } from "./shape.ts";

/** A runtime value: an array literal, or a tuple of values. */
export type EvalValue = Literal | EvalValue[];

/** One stored element: a number (bigint for s64; 0/1 for pred). */
export type Scalar = number | bigint;

/** Index-addressable element storage of any element type. */
export interface Elements {
  [i: number]: Scalar;
  readonly length: number;
}

/** What an opcode implementation may ask of the evaluator. */
export interface EvalContext {
  /** Runs a called computation on argument values. */
  call(c: Computation, args: EvalValue[]): EvalValue;
  /** The device running the program (evaluateReplicated); absent: replica 0 of partition 0. */
  device?: { replica: number; partition: number };
}

/** Implementation of one opcode: operand values in, result value out. */
export type OpImpl = (instr: Instruction, ops: readonly EvalValue[], ctx: EvalContext) => EvalValue;

/** A failure inside one instruction; evaluate.ts wraps it into an EvalError naming it. */
export class OpFailure extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = "OpFailure";
  }
}

export function fail(detail: string): never {
  throw new OpFailure(detail);
}

export function elems(lit: Literal): Elements {
  return lit.data as unknown as Elements;
}

export function mutableElems(data: LiteralData): Elements {
  return data as unknown as Elements;
}

export function product(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/** Row-major strides: strides[i] = product of dims after i. */
export function stridesOf(dims: readonly number[]): number[] {
  const s = new Array<number>(dims.length);
  let acc = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= dims[i]!;
  }
  return s;
}

/**
 * Calls fn for every index of `dims` in row-major order. The index array is reused between
 * calls: copy it if it must outlive the call.
 */
export function forEachIndex(
  dims: readonly number[],
  fn: (index: number[], linear: number) => void,
): void {
  const n = product(dims);
  if (n === 0) return;
  const idx = new Array<number>(dims.length).fill(0);
  for (let linear = 0; linear < n; linear++) {
    fn(idx, linear);
    for (let d = dims.length - 1; d >= 0; d--) {
      if (++idx[d]! < dims[d]!) break;
      idx[d] = 0;
    }
  }
}

export function linearIndex(index: readonly number[], strides: readonly number[]): number {
  let l = 0;
  for (let i = 0; i < index.length; i++) l += index[i]! * strides[i]!;
  return l;
}

/** Zero-filled literal with the given actual dims. */
export function zeros(type: ElementType, dims: readonly number[]): Literal {
  return new Literal(type, dims, allocate(type, product(dims)));
}

/** A literal over fresh storage filled by `fill(dataView)`. */
export function build(
  type: ElementType,
  dims: readonly number[],
  fill: (out: Elements) => void,
): Literal {
  const data = allocate(type, product(dims));
  fill(mutableElems(data));
  return new Literal(type, dims, data);
}

/**
 * Rounds a computed value to what `type` stores: f32 via the Float32Array store (Math.fround),
 * f16/bf16 by computing in f32 and rounding to the type (as XLA does for half types).
 */
export function roundFor(type: ElementType): ((v: number) => number) | undefined {
  if (type === "f16") return roundToF16;
  if (type === "bf16") return roundToBF16;
  // f8: computed in f32 (as XLA's CPU backend upcasts them), then rounded to the type.
  if (isSmallFloatType(type)) return (v) => roundToSmallFloat(type, Math.fround(v));
  return undefined;
}

export function isFloat(t: ElementType): boolean {
  return isFloatType(t);
}

/** The text form of a runtime value's actual shape: `f32[3,4]`, `(f32[2], s32[])`. */
export function valueShapeString(v: EvalValue): string {
  if (Array.isArray(v)) return `(${v.map(valueShapeString).join(", ")})`;
  return `${v.type}[${v.dims.join(",")}]`;
}

/** Why `v` does not fit `shape` (type, rank, static dims exact, dynamic dims <= bound), or null. */
export function conformanceProblem(v: EvalValue, shape: Shape): string | null {
  if (shape.kind === "tuple") {
    if (!Array.isArray(v)) return `expected a tuple ${shapeToString(shape, false)}`;
    if (v.length !== shape.elements.length) {
      return `expected a ${shape.elements.length}-tuple, got a ${v.length}-tuple`;
    }
    for (let i = 0; i < v.length; i++) {
      const p = conformanceProblem(v[i]!, shape.elements[i]!);
      if (p !== null) return `tuple element ${i}: ${p}`;
    }
    return null;
  }
  if (Array.isArray(v)) return `expected an array ${shapeToString(shape, false)}, got a tuple`;
  if (v.type !== shape.type) return `element type ${v.type} is not ${shape.type}`;
  if (v.dims.length !== shape.dims.length) {
    return `rank ${v.dims.length} is not ${shape.dims.length}`;
  }
  for (let i = 0; i < v.dims.length; i++) {
    const actual = v.dims[i]!;
    const bound = shape.dims[i]!;
    if (shape.dynamic[i]) {
      if (actual > bound) return `dim ${i} is ${actual}, above its bound ${bound}`;
    } else if (actual !== bound) {
      return `dim ${i} is ${actual}, not ${bound}`;
    }
  }
  return null;
}

export function asLiteral(v: EvalValue | undefined, what: string): Literal {
  if (v === undefined) fail(`${what} is missing`);
  if (Array.isArray(v)) fail(`${what} must be an array, got a tuple ${valueShapeString(v)}`);
  return v;
}

export function asTuple(v: EvalValue | undefined, what: string): EvalValue[] {
  if (v === undefined) fail(`${what} is missing`);
  if (!Array.isArray(v)) fail(`${what} must be a tuple, got ${valueShapeString(v)}`);
  return v;
}

/** The value of a scalar integer literal (an index or a size), as a JS number. */
export function scalarIndex(lit: Literal, what: string): number {
  if (lit.dims.length !== 0) fail(`${what} must be a scalar, got ${valueShapeString(lit)}`);
  if (isFloat(lit.type) || lit.type === "pred") {
    fail(`${what} must be an integer, got ${lit.type}`);
  }
  return Number(lit.data[0]!);
}

/** Reads a required attribute or fails with its name. */
export function attr<K extends keyof Attributes>(
  instr: Instruction,
  key: K,
): NonNullable<Attributes[K]> {
  const v = instr.attrs[key];
  if (v === undefined || v === null) fail(`attribute '${String(key)}' is missing`);
  return v as NonNullable<Attributes[K]>;
}

/** The one entry of a single-dim `dimensions` attribute (concatenate, sort, *-dimension-size). */
export function singleDim(instr: Instruction, rank: number): number {
  const dims = attr(instr, "dimensions");
  if (dims.length !== 1) fail(`dimensions={${dims.join(",")}} must name exactly one dim`);
  const d = dims[0]!;
  if (!Number.isInteger(d) || d < 0 || d >= rank) {
    fail(`dimension ${d} is out of range for rank ${rank}`);
  }
  return d;
}

/** A scalar literal holding one stored element of `type`. */
export function scalarOf(type: ElementType, v: Scalar): Literal {
  const data = allocate(type, 1);
  mutableElems(data)[0] = v;
  return new Literal(type, [], data);
}

export function clampInt(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}
