// From traces at several sizes to ONE program with bounded dynamic dims. In JavaScript a size
// is a plain number in the user's code, so Kiln cannot follow `T * heads` or `T - 1`
// symbolically; instead the same code is traced at the bucket's top (the program's bounds) and
// at other sizes in the bucket, and the programs are compared instruction by instruction. Same
// structure (opcodes, operands, attributes, called computations) means the code did not branch
// on the size there: a dim that differs is dynamic (`<=bound`, its bound the top's size; it must
// grow with the size), and a constant that differs (`arange(start, ...)`'s start, a count) is an
// integer affine function of the size, rebuilt from `get-dimension-size` so the program reads
// the real size at run time; a slice may differ only along a dim it takes whole ([0:T]), which
// the top's [0:bound] slice keeps dynamic. Different structure — user code that branches on the
// size, a slice whose limits move otherwise, a float constant like 1/T — is never guessed at:
// the comparison returns a reason naming the instruction and its source line, and the caller
// specializes the dim (compiles the exact size) instead.

import { ComputationBuilder } from "../ir/builder.ts";
import { cloneAttributes, cloneModule } from "../ir/clone.ts";
import { Literal, scalarLiteral } from "../ir/literal.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import type { SliceDim } from "../ir/attributes.ts";
import { printComputation } from "../ir/print.ts";
import {
  type ArrayShape,
  arrayShape,
  isFloatType,
  type Shape,
  shapeToString,
} from "../ir/shape.ts";

/** A program traced at one size of the dynamic class. */
export interface SizedModule {
  readonly module: Module;
  readonly size: number;
}

/** Where the program reads the real size: dim `dim` of ENTRY parameter `param`. */
export interface SizeSource {
  readonly param: number;
  readonly dim: number;
}

/** An affine function of the size: a * size + c (integers). */
export interface Affine {
  readonly a: number;
  readonly c: number;
}

export type DynamicModuleResult =
  | { readonly ok: true; readonly module: Module; readonly dynamicDims: number }
  | { readonly ok: false; readonly why: string };

function where(i: Instruction): string {
  const m = i.metadata;
  const src =
    m.sourceFile !== undefined && m.sourceLine !== undefined
      ? ` at ${m.sourceFile}:${m.sourceLine}:${m.sourceColumn ?? 1}`
      : "";
  const op = m.opType !== undefined ? ` (${m.opType})` : "";
  return `${i.opcode} %${i.name}${op}${src}`;
}

/**
 * The integer affine function through the points, or undefined. With two or more points the
 * function is fixed by the first two and checked against the rest.
 */
export function fitAffine(points: readonly (readonly [number, number])[]): Affine | undefined {
  const [p0, p1] = points;
  if (!p0 || !p1 || p0[0] === p1[0]) return undefined;
  const a = (p1[1] - p0[1]) / (p1[0] - p0[0]);
  const c = p0[1] - a * p0[0];
  if (!Number.isInteger(a) || !Number.isInteger(c)) return undefined;
  for (const [x, y] of points) if (a * x + c !== y) return undefined;
  return { a, c };
}

function attrsKey(i: Instruction, withoutSlice = false): string {
  const drop = withoutSlice ? { slice: undefined } : {};
  return JSON.stringify({ ...i.attrs, literal: undefined, ...drop }, (_k, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`;
    if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<number>);
    return v;
  });
}

/** A slice dim that takes all of its operand dim: [0:extent], stride 1. */
function isFullSlice(sl: SliceDim, extent: number): boolean {
  return sl.start === 0 && sl.stride === 1 && sl.limit === extent;
}

function sliceText(sl: SliceDim): string {
  return `[${sl.start}:${sl.limit}${sl.stride === 1 ? "" : `:${sl.stride}`}]`;
}

/**
 * Why the attributes of `x` (at the top) and `y` (the same instruction at another size) cannot
 * be one instruction of the bounded program, or undefined when they can. Equal attributes can.
 * A slice may also differ along a dim it takes whole ([0:T] at every size): the top's slice is
 * then [0:bound] over the `<=bound` dim, which keeps the real size (the padder's slice rule).
 * Anything else that moves with the size — a slice that stops short of the end (`x[:T-1]`),
 * dynamic-slice sizes, padding — has no form over a dynamic dim here, and is specialized.
 */
function attributesDiffer(x: Instruction, y: Instruction): string | undefined {
  if (attrsKey(x) === attrsKey(y)) return undefined;
  const xs = x.attrs.slice;
  const ys = y.attrs.slice;
  if (x.opcode !== "slice" || !xs || !ys || xs.length !== ys.length) {
    return "has different attributes";
  }
  if (attrsKey(x, true) !== attrsKey(y, true)) return "has different attributes";
  const xop = x.operand(0).shape;
  const yop = y.operand(0).shape;
  if (xop.kind !== "array" || yop.kind !== "array") return "has different attributes";
  for (const [d, a] of xs.entries()) {
    const b = ys[d]!;
    if (a.start === b.start && a.limit === b.limit && a.stride === b.stride) continue;
    if (isFullSlice(a, xop.dims[d]!) && isFullSlice(b, yop.dims[d]!)) continue;
    return (
      `slices dim ${d} as ${sliceText(a)} of ${xop.dims[d]} and as ${sliceText(b)} of ` +
      `${yop.dims[d]}: only a slice of the whole dim (or the same range at every size) can ` +
      `follow a dynamic dim`
    );
  }
  return undefined;
}

/** The single value of a splat literal (every element equal), or undefined. */
function splatValue(l: Literal): number | undefined {
  if (l.data.length === 0) return undefined;
  const v0 = Number(l.data[0]);
  for (let k = 1; k < l.data.length; k++) if (Number(l.data[k]) !== v0) return undefined;
  return v0;
}

function sameLiteral(a: Literal, b: Literal): boolean {
  if (a.type !== b.type || a.dims.length !== b.dims.length) return false;
  if (a.dims.some((d, k) => d !== b.dims[k])) return false;
  for (let k = 0; k < a.data.length; k++) {
    const x = a.data[k]!;
    const y = b.data[k]!;
    if (x !== y && !(Number.isNaN(Number(x)) && Number.isNaN(Number(y)))) return false;
  }
  return true;
}

/**
 * Compares `top` (traced at the bucket's top) with `others` (the same code at other sizes)
 * and returns `top` rebuilt with bounded dynamic dims and size-reading constants, or why not.
 */
export function buildDynamicModule(
  top: SizedModule,
  others: readonly SizedModule[],
  source: SizeSource,
): DynamicModuleResult {
  const entry = top.module.entry;
  // Called computations (reducers) must be the same text everywhere.
  const callee = (m: Module) =>
    m.computations.filter((c) => c !== m.entry).map((c) => printComputation(c)).join("\n");
  const topCallees = callee(top.module);
  for (const o of others) {
    if (callee(o.module) !== topCallees) {
      return { ok: false, why: `the called computations differ between size ${top.size} and ` +
        `size ${o.size}` };
    }
  }
  const instrs = entry.instructions;
  const index = new Map<Instruction, number>(instrs.map((x, k) => [x, k]));
  const other = others.map((o) => o.module.entry.instructions);
  for (const [k, o] of others.entries()) {
    if (other[k]!.length !== instrs.length) {
      const ys = other[k]!;
      const at = instrs.findIndex((x, n) => ys[n]?.opcode !== x.opcode);
      const first = at >= 0 ? `; first at ${where(instrs[at]!)}` : "";
      return {
        ok: false,
        why:
          `the program has ${instrs.length} instructions at size ${top.size} and ` +
          `${ys.length} at size ${o.size}: the code depends on the size (a branch or a ` +
          `loop over it)${first}`,
      };
    }
  }
  const shapes: (Shape | undefined)[] = [];
  const constants = new Map<number, Affine>();
  /** Per instruction, the affine size of each dynamic dim. */
  const dimFits = new Map<number, Map<number, Affine>>();
  let dynamicDims = 0;
  for (const [k, x] of instrs.entries()) {
    const xsAt = other.map((list) => list[k]!);
    for (const [j, y] of xsAt.entries()) {
      const size = others[j]!.size;
      const mismatch = (what: string): DynamicModuleResult => ({
        ok: false,
        why: `${where(x)} ${what} at size ${top.size} and at size ${size}: the code depends on ` +
          `the size there`,
      });
      if (y.opcode !== x.opcode) return mismatch(`is ${y.opcode} instead`);
      const ops = x.operands.map((o) => index.get(o));
      const yIndex = new Map(other[j]!.map((z, n) => [z, n]));
      const yops = y.operands.map((o) => yIndex.get(o));
      if (ops.length !== yops.length || ops.some((n, q) => n !== yops[q])) {
        return mismatch("has different operands");
      }
      const attrWhy = attributesDiffer(x, y);
      if (attrWhy !== undefined) return mismatch(attrWhy);
      if (x.called.map((c) => c.name).join() !== y.called.map((c) => c.name).join()) {
        return mismatch("calls different computations");
      }
    }
    // Constants that move with the size.
    if (x.opcode === "constant") {
      const lx = x.attrs.literal!;
      const lits = xsAt.map((y) => y.attrs.literal!);
      if (!lits.every((l) => sameLiteral(l, lx))) {
        const vx = splatValue(lx);
        const vs = lits.map(splatValue);
        const fit =
          vx === undefined || vs.some((v) => v === undefined)
            ? undefined
            : fitAffine([[top.size, vx], ...vs.map((v, j) => [others[j]!.size, v!] as const)]);
        if (!fit || lits.some((l) => l.dims.join() !== lx.dims.join())) {
          return {
            ok: false,
            why: `${where(x)} holds a value that changes with the size and is not an integer ` +
              `affine function of it`,
          };
        }
        constants.set(k, fit);
      }
    }
    // Dims that move with the size.
    const xs = x.shape;
    if (xs.kind === "tuple") {
      shapes.push(undefined);
      continue;
    }
    const flags: boolean[] = [];
    for (const [d, bound] of xs.dims.entries()) {
      const pts = xsAt.map((y, j) => {
        const s = y.shape as ArrayShape;
        return [others[j]!.size, s.dims[d]!] as const;
      });
      if (pts.every(([, v]) => v === bound)) {
        flags.push(false);
        continue;
      }
      const fit = fitAffine([[top.size, bound], ...pts]);
      if (!fit || fit.a <= 0) {
        return {
          ok: false,
          why:
            `dim ${d} of ${where(x)} is ${bound} at size ${top.size} but ` +
            pts.map(([s, v]) => `${v} at size ${s}`).join(", ") +
            `: not a growing integer affine function of the size`,
        };
      }
      flags.push(true);
      dynamicDims++;
      let fits = dimFits.get(k);
      if (!fits) dimFits.set(k, (fits = new Map()));
      fits.set(d, fit);
    }
    shapes.push(arrayShape(xs.type, xs.dims, flags));
  }
  return rebuild(top.module, shapes, constants, dimFits, source, dynamicDims);
}

/**
 * Ops whose dynamic dims do not come from an operand's: their real size is set from the size
 * parameter (`set-dimension-size`), as XLA's frontends do for a broadcast to a dynamic shape.
 */
const SIZE_MAKERS = new Set(["broadcast", "iota"]);

function rebuild(
  original: Module,
  shapes: readonly (Shape | undefined)[],
  constants: ReadonlyMap<number, Affine>,
  dimFits: ReadonlyMap<number, ReadonlyMap<number, Affine>>,
  source: SizeSource,
  dynamicDims: number,
): DynamicModuleResult {
  const module = cloneModule(original);
  const old = module.entry;
  const comp: Computation = module.addComputation(module.uniqueComputationName("main.dynamic"));
  const b = new ComputationBuilder(comp);
  const env = new Map<Instruction, Instruction>();
  const params = old.parameters;
  let size: Instruction | undefined;
  const sizeValue = (): Instruction => {
    if (size) return size;
    const p = env.get(params[source.param]!)!;
    return (size = b.getDimensionSize(p, source.dim));
  };
  try {
    for (const [k, x] of old.instructions.entries()) {
      b.metadata = { ...x.metadata };
      const declared = shapes[k];
      const fit = constants.get(k);
      let y: Instruction;
      if (fit) {
        const lit = x.attrs.literal!;
        const t = lit.type;
        let v = b.convert(sizeValue(), t);
        if (fit.a !== 1) v = b.multiply(v, b.constant(scalarLiteral(t, numberFor(t, fit.a))));
        if (fit.c !== 0) v = b.add(v, b.constant(scalarLiteral(t, numberFor(t, fit.c))));
        y = lit.dims.length === 0 ? v : b.broadcast(v, lit.dims, []);
      } else if (SIZE_MAKERS.has(x.opcode) && dimFits.has(k) && declared?.kind === "array") {
        const ops = x.operands.map((o) => env.get(o)!);
        // A broadcast's dims that come from its operand stay dynamic through it.
        const mapped = new Set(x.opcode === "broadcast" ? x.attrs.dimensions ?? [] : []);
        const flags = declared.dynamic.map((f, d) => f && mapped.has(d));
        const full = arrayShape(declared.type, declared.dims, flags);
        y = b.op(x.opcode, ops, cloneAttributes(x.attrs), x.called, full);
        for (const [d, fit] of dimFits.get(k)!) {
          if (mapped.has(d)) continue;
          let n = sizeValue();
          if (fit.a !== 1) n = b.multiply(n, b.scalar("s32", fit.a));
          if (fit.c !== 0) n = b.add(n, b.scalar("s32", fit.c));
          y = b.setDimensionSize(y, n, d);
        }
      } else {
        const ops = x.operands.map((o) => env.get(o)!);
        y = b.op(x.opcode, ops, cloneAttributes(x.attrs), x.called, declared);
      }
      env.set(x, y);
    }
  } catch (e) {
    return {
      ok: false,
      why: `the program with dynamic dims does not type-check: ${
        e instanceof Error ? e.message : String(e)
      }`,
    };
  }
  comp.root = env.get(old.root)!;
  const name = old.name;
  module.entry = comp;
  module.removeComputation(old);
  comp.name = name;
  return { ok: true, module, dynamicDims };
}

function numberFor(t: import("../ir/shape.ts").ElementType, v: number): number | bigint {
  if (t === "s64") return BigInt(v);
  return isFloatType(t) ? v : Math.trunc(v);
}

/** `f32[<=64,32]` for messages. */
export function describeShape(s: Shape): string {
  return shapeToString(s, false);
}
