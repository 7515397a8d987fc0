// The dynamic padder's bookkeeping and emission helpers (passes/dynamic_padder.ts runs the pass):
// the per-dim real size that travels with every padded value (an s32[] instruction, or null
// when the real size is the bound), the error type, and an `Emitter` per rewritten computation
// that appends s32 size arithmetic, iota < size masks, select-masking and window-size formulas
// through the builder (so every emitted instruction is shape-checked). Constants and masks are
// made once per computation: a softmax over a dynamic dim masks twice with the same predicate.

import { reducerIdentityValue } from "../ir/element_types.ts";
import type { WindowDim } from "../ir/attributes.ts";
import type { ComputationBuilder } from "../ir/builder.ts";
import type { ScalarValue } from "../ir/literal.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import {
  arrayShape,
  type ArrayShape,
  type ElementType,
  type Shape,
  tupleShape,
} from "../ir/shape.ts";

/** The real size of one dim: an s32[] instruction, or null when it equals the dim's bound. */
export type DimSize = Instruction | null;

/** Real sizes shaped like the value: one DimSize per dim of an array, a tree for tuples. */
export type Sizes =
  | { readonly kind: "array"; readonly dims: readonly DimSize[] }
  | { readonly kind: "tuple"; readonly elements: readonly Sizes[] };

/** A value of the padded program: its (static, padded) instruction and its real sizes. */
export interface Padded {
  readonly value: Instruction;
  readonly sizes: Sizes;
}

/** A pattern the padder cannot rewrite exactly; names the instruction and the reason. */
export class DynamicPadderError extends Error {
  readonly instruction: string | undefined;
  readonly opcode: string | undefined;

  constructor(detail: string, instr?: Instruction) {
    const where = instr ? ` %${instr.name} (${instr.opcode})` : "";
    super(`dynamic-padder:${where}: ${detail}`);
    this.name = "DynamicPadderError";
    this.instruction = instr?.name;
    this.opcode = instr?.opcode;
  }
}

export function arraySizes(dims: readonly DimSize[]): Sizes {
  return { kind: "array", dims };
}

/** Sizes of a value whose every dim is at its bound. */
export function fullSizes(shape: Shape): Sizes {
  return shape.kind === "tuple"
    ? { kind: "tuple", elements: shape.elements.map(fullSizes) }
    : { kind: "array", dims: shape.dims.map(() => null) };
}

/** The per-dim sizes of an array value (a tuple here is a bug in the caller). */
export function dimsOf(p: Padded | Sizes): readonly DimSize[] {
  const s = "sizes" in p ? p.sizes : p;
  if (s.kind !== "array") throw new DynamicPadderError("expected an array value, got a tuple");
  return s.dims;
}

export function hasTracked(s: Sizes): boolean {
  return s.kind === "array" ? s.dims.some((d) => d !== null) : s.elements.some(hasTracked);
}

/** Drops sizes of dims the declared shape calls static: their real size IS the bound. */
export function normalizeSizes(s: Sizes, shape: Shape): Sizes {
  if (shape.kind === "tuple") {
    if (s.kind !== "tuple" || s.elements.length !== shape.elements.length) {
      throw new DynamicPadderError(`internal: sizes do not match the tuple shape`);
    }
    const elements = shape.elements.map((e, i) => normalizeSizes(s.elements[i]!, e));
    return { kind: "tuple", elements };
  }
  if (s.kind !== "array" || s.dims.length !== shape.dims.length) {
    throw new DynamicPadderError(`internal: sizes do not match the array shape`);
  }
  return { kind: "array", dims: s.dims.map((d, i) => (shape.dynamic[i] ? d : null)) };
}

/** The shape with every bounded dynamic dim made static at its bound. */
export function staticShape(shape: Shape): Shape {
  if (shape.kind === "tuple") return tupleShape(shape.elements.map(staticShape));
  return arrayShape(
    shape.type,
    shape.dims,
    shape.dims.map(() => false),
    shape.layout,
  );
}

export function staticArray(shape: Shape): ArrayShape {
  const s = staticShape(shape);
  if (s.kind !== "array") throw new DynamicPadderError("expected an array shape, got a tuple");
  return s;
}

/** A dynamic dim of a (possibly tuple) shape: the path of tuple indices to its leaf, its dim. */
export interface DynamicDim {
  readonly path: readonly number[];
  readonly dim: number;
  readonly bound: number;
}

/** Every bounded dynamic dim of `shape`, leaves in order, dims in order. */
export function dynamicDims(shape: Shape, path: readonly number[] = []): DynamicDim[] {
  if (shape.kind === "tuple") {
    return shape.elements.flatMap((e, i) => dynamicDims(e, [...path, i]));
  }
  const out: DynamicDim[] = [];
  shape.dynamic.forEach((dyn, dim) => {
    if (dyn) out.push({ path, dim, bound: shape.dims[dim]! });
  });
  return out;
}

export function sizeAt(s: Sizes, path: readonly number[], dim: number): DimSize {
  let cur = s;
  for (const i of path) {
    if (cur.kind !== "tuple") throw new DynamicPadderError("internal: bad size path");
    cur = cur.elements[i]!;
  }
  return dimsOf(cur)[dim] ?? null;
}

/** A Sizes tree for `shape` whose dims listed in `dyn` take `values[k]`, the rest null. */
export function sizesFrom(
  shape: Shape,
  dyn: readonly DynamicDim[],
  values: readonly Instruction[],
): Sizes {
  const build = (s: Shape, path: readonly number[]): Sizes => {
    if (s.kind === "tuple") {
      return { kind: "tuple", elements: s.elements.map((e, i) => build(e, [...path, i])) };
    }
    const dims: DimSize[] = s.dims.map(() => null);
    dyn.forEach((d, k) => {
      if (d.path.length === path.length && d.path.every((p, i) => p === path[i])) {
        dims[d.dim] = values[k]!;
      }
    });
    return { kind: "array", dims };
  };
  return build(shape, []);
}

/** The identity element of a float/int/pred type for one reducer opcode, if it has one. */
export function identityFor(opcode: string, t: ElementType): ScalarValue | undefined {
  return reducerIdentityValue(opcode, t);
}

/** Appends instructions to one rewritten computation, with per-computation caches. */
export class Emitter {
  readonly b: ComputationBuilder;
  private readonly consts = new Map<string, Instruction>();
  private readonly masks = new Map<string, Instruction>();

  constructor(b: ComputationBuilder) {
    this.b = b;
  }

  /** A scalar constant, made once per (type, value) in this computation. */
  scalar(type: ElementType, v: ScalarValue): Instruction {
    const key = `${type}:${Object.is(v, -0) ? "-0" : String(v)}`;
    let c = this.consts.get(key);
    if (!c) {
      c = this.b.scalar(type, v);
      this.consts.set(key, c);
    }
    return c;
  }

  s32(v: number): Instruction {
    return this.scalar("s32", v);
  }

  /** The real size as an instruction (the bound as a constant when it is null). */
  size(s: DimSize, bound: number): Instruction {
    return s ?? this.s32(bound);
  }

  add(a: Instruction, b: Instruction): Instruction {
    return this.b.add(a, b);
  }
  sub(a: Instruction, b: Instruction): Instruction {
    return this.b.subtract(a, b);
  }
  mul(a: Instruction, b: Instruction): Instruction {
    return this.b.multiply(a, b);
  }
  max(a: Instruction, b: Instruction): Instruction {
    return this.b.maximum(a, b);
  }
  /** a / b on s32 scalars with the divisor kept >= 1 (the quotient matters only when b > 0). */
  div(a: Instruction, b: Instruction): Instruction {
    return this.b.divide(a, this.b.maximum(b, this.s32(1)));
  }
  rem(a: Instruction, b: Instruction): Instruction {
    return this.b.remainder(a, this.b.maximum(b, this.s32(1)));
  }

  /** The product of sizes and constants (constant factors folded). */
  product(factors: readonly (Instruction | number)[]): Instruction {
    let k = 1;
    let acc: Instruction | undefined;
    for (const f of factors) {
      if (typeof f === "number") k *= f;
      else acc = acc ? this.mul(acc, f) : f;
    }
    if (!acc) return this.s32(k);
    return k === 1 ? acc : this.mul(acc, this.s32(k));
  }

  /** `value` converted to `type` (itself when it already has it). */
  convert(value: Instruction, type: ElementType): Instruction {
    const s = value.shape;
    return s.kind === "array" && s.type === type ? value : this.b.convert(value, type);
  }

  /** A scalar broadcast to `dims`. */
  splat(scalar: Instruction, dims: readonly number[]): Instruction {
    return dims.length === 0 ? scalar : this.b.broadcast(scalar, dims, []);
  }

  /** pred[dims]: true where index `dim` < `size` (iota < size). */
  mask(dims: readonly number[], dim: number, size: Instruction): Instruction {
    const key = `${dims.join(",")}|${dim}|${size.id}`;
    let m = this.masks.get(key);
    if (!m) {
      const iota = this.b.iota(arrayShape("s32", dims), dim);
      m = this.b.compare(iota, this.splat(size, dims), "LT");
      this.masks.set(key, m);
    }
    return m;
  }

  /** The conjunction of the masks of the dims in `which` whose size is tracked; null if none. */
  maskOf(dims: readonly number[], sizes: readonly DimSize[], which: readonly number[]) {
    let m: Instruction | null = null;
    for (const d of which) {
      const s = sizes[d];
      if (s === null || s === undefined) continue;
      const md = this.mask(dims, d, s);
      m = m ? this.b.and(m, md) : md;
    }
    return m;
  }

  /** `x` where `mask` holds, `fill` (a scalar of x's type) elsewhere. */
  fill(x: Instruction, mask: Instruction, fill: Instruction): Instruction {
    const s = x.shape as ArrayShape;
    return this.b.select(mask, x, this.splat(fill, s.dims));
  }

  /**
   * Output size of a window swept over a dim of real size n (XLA's formula, as the evaluator's
   * windowedSize): floor((dilated n + pads - dilated window) / stride) + 1, or 0 if negative.
   */
  windowedSize(n: Instruction, w: WindowDim): Instruction {
    const dilated =
      w.baseDilation === 1
        ? n
        : this.b.select(
            this.b.compare(n, this.s32(0), "GT"),
            this.add(this.mul(this.sub(n, this.s32(1)), this.s32(w.baseDilation)), this.s32(1)),
            this.s32(0),
          );
    const dilatedWindow = w.size === 0 ? 0 : (w.size - 1) * w.windowDilation + 1;
    const span = this.add(dilated, this.s32(w.padLow + w.padHigh - dilatedWindow));
    if (w.stride === 1) return this.max(this.add(span, this.s32(1)), this.s32(0));
    const q = this.add(this.div(this.max(span, this.s32(0)), this.s32(w.stride)), this.s32(1));
    return this.b.select(this.b.compare(span, this.s32(0), "LT"), this.s32(0), q);
  }
}

/** What a rule may ask of the pass while rewriting one instruction. */
export interface PadCtx {
  readonly module: Module;
  /** Appends to the computation being written. */
  readonly em: Emitter;
  /** Rewrites `comp` inline into the current computation, its parameters bound to `args`. */
  inline(comp: Computation, args: readonly Padded[]): Padded;
  /**
   * A new computation named after `base` with parameters of `paramShapes`; `body` writes it
   * through its own context and returns the ROOT.
   */
  subComputation(
    base: string,
    paramShapes: readonly Shape[],
    body: (ctx: PadCtx, params: readonly Instruction[]) => Instruction,
  ): Computation;
  /** Copies `instr` onto new operands with a static result shape (attributes deep-copied). */
  copy(instr: Instruction, operands: readonly Instruction[]): Instruction;
  /**
   * Records that the reduce or dot `r` (just made) only needs its operand's first `size`
   * elements along each listed dim: past them they are neutral (a reduction hint).
   */
  noteReduced(r: Instruction, dims: readonly { dim: number; size: DimSize }[]): void;
}
