// From traces at several sizes to ONE program with bounded dynamic dims. In JavaScript a size
// is a plain number in the user's code, so Kiln cannot follow `T * heads` or `T - 1`
// symbolically; instead the same code is traced at the bucket's top (the program's bounds) and
// at other sizes in the bucket, and the programs are compared instruction by instruction. A
// program may have several independent SIZE GROUPS (an encoder's frames and a decoder's tokens):
// every trace is a point with one size per group, and the caller varies one group at a time
// from the top (so each difference is attributed to one group) plus a point where they all
// differ (so a product of two sizes is caught, not fitted). Same structure (opcodes, operands,
// attributes, called computations) means the code did not branch on the sizes there: a dim
// that differs is dynamic (`<=bound`, its bound the top's size; it must grow with the sizes),
// and a constant that differs (`arange(start, ...)`'s start, a count) is an integer affine
// function of the sizes (a1*T1 + a2*T2 + c), rebuilt from `get-dimension-size` so the program
// reads the real sizes at run time; a slice may differ only along a dim it takes whole ([0:T]),
// which the top's [0:bound] slice keeps dynamic. Different structure — user code that branches
// on a size, a slice whose limits move otherwise, a float constant like 1/T — is never guessed
// at: the comparison returns a reason naming the instruction and its source line (and the trace
// it differs in), and the caller specializes the dims (compiles the exact sizes) instead.

import { ComputationBuilder } from "../ir/builder.ts";
import { cloneAttributes, cloneModule } from "../ir/clone.ts";
import { Literal, scalarLiteral } from "../ir/literal.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import type { SliceDim } from "../ir/attributes.ts";
import { printComputation } from "../ir/print.ts";
import {
  type ArrayShape,
  arrayShape,
  type ElementType,
  isFloatType,
  type Shape,
  shapeToString,
} from "../ir/shape.ts";

/** A program traced at one point: one size per size group, in group order. */
export interface SizedModule {
  readonly module: Module;
  readonly sizes: readonly number[];
}

/** Where the program reads a group's real size: dim `dim` of ENTRY parameter `param`. */
export interface SizeSource {
  readonly param: number;
  readonly dim: number;
}

/** An affine function of the groups' sizes: c + sum of a[g] * size[g] (integers). */
export interface Affine {
  readonly a: readonly number[];
  readonly c: number;
}

export type DynamicModuleResult =
  | { readonly ok: true; readonly module: Module; readonly dynamicDims: number }
  /** `group`: the one size group the reason belongs to, when it belongs to one of several. */
  | { readonly ok: false; readonly why: string; readonly group?: number };

/**
 * A point in words: `size 17` with one group (as messages have always read), else each group's
 * name and size (`x.shape[1] = 17, y.shape[1] = 32`), names being the caller's.
 */
export function pointText(sizes: readonly number[], names?: readonly string[]): string {
  if (sizes.length === 1) return `size ${sizes[0]}`;
  return sizes.map((n, g) => `${names?.[g] ?? `size ${g}`} = ${n}`).join(", ");
}

function where(i: Instruction): string {
  const m = i.metadata;
  const src =
    m.sourceFile !== undefined && m.sourceLine !== undefined
      ? ` at ${m.sourceFile}:${m.sourceLine}:${m.sourceColumn ?? 1}`
      : "";
  const op = m.opType !== undefined ? ` (${m.opType})` : "";
  return `${i.opcode} %${i.name}${op}${src}`;
}

/** c + sum of a[g] * sizes[g]. */
export function affineAt(f: Affine, sizes: readonly number[]): number {
  let v = f.c;
  for (const [g, a] of f.a.entries()) v += a * sizes[g]!;
  return v;
}

/** The one group in which `sizes` differs from `base`, when there are several groups. */
export function movedAlone(sizes: readonly number[], base: readonly number[]): number | undefined {
  const moved = sizes.flatMap((n, g) => (n !== base[g] ? [g] : []));
  return moved.length === 1 && base.length > 1 ? moved[0] : undefined;
}

/**
 * When fitAffine fails on `points` (the first the base) with several groups: the first group
 * whose own points (the base and the points that move that group alone) already have no
 * integer affine fit (or, with `growing`, no growing one), or undefined when only the points
 * that move several groups together break it.
 */
export function blameGroup(
  points: readonly (readonly [readonly number[], number])[],
  growing = false,
): number | undefined {
  const base = points[0];
  if (!base || base[0].length < 2) return undefined;
  for (let g = 0; g < base[0].length; g++) {
    const own = points.filter(([x], i) => i === 0 || movedAlone(x, base[0]) === g);
    const line = own.map(([x, v]) => [[x[g]!], v] as const);
    const fit = fitAffine(line);
    if (line.length >= 2 && (!fit || (growing && fit.a[0]! < 0))) return g;
  }
  return undefined;
}

/**
 * The integer affine function of the group sizes through the points (`[sizes, value]`), or
 * undefined. The first point is the base; each group's coefficient comes from the first point
 * that differs from the base in that group alone, and every point is then checked, so a value
 * that is not affine along one group, or that depends on a product of two groups' sizes, is
 * rejected (as long as some point moves those groups together).
 */
export function fitAffine(
  points: readonly (readonly [readonly number[], number])[],
): Affine | undefined {
  const base = points[0];
  if (!base || points.length < 2) return undefined;
  const [b, v0] = base;
  const a: number[] = [];
  for (let g = 0; g < b.length; g++) {
    const axis = points.find(([x]) => x[g] !== b[g] && x.every((n, h) => h === g || n === b[h]));
    if (!axis) return undefined;
    const slope = (axis[1] - v0) / (axis[0][g]! - b[g]!);
    if (!Number.isInteger(slope)) return undefined;
    a.push(slope);
  }
  const fit = { a, c: 0 };
  const c = v0 - affineAt(fit, b);
  if (!Number.isInteger(c)) return undefined;
  const out = { a, c };
  for (const [x, y] of points) if (affineAt(out, x) !== y) return undefined;
  return out;
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
 * Compares `top` (traced at every group's top) with `others` (the same code at other points)
 * and returns `top` rebuilt with bounded dynamic dims and size-reading constants, or why not.
 * `sources[g]` is where the program reads group g's size (undefined when no parameter carries
 * it: then nothing may depend on that group but what the caller feeds in); `names[g]` names the
 * group in reasons.
 */
export function buildDynamicModule(
  top: SizedModule,
  others: readonly SizedModule[],
  sources: readonly (SizeSource | undefined)[],
  names?: readonly string[],
): DynamicModuleResult {
  const entry = top.module.entry;
  const at = (s: SizedModule) => pointText(s.sizes, names);
  const blame = (j: number): { group?: number } => {
    const g = movedAlone(others[j]!.sizes, top.sizes);
    return g !== undefined ? { group: g } : {};
  };
  // Called computations (reducers) must be the same text everywhere.
  const callee = (m: Module) =>
    m.computations.filter((c) => c !== m.entry).map((c) => printComputation(c)).join("\n");
  const topCallees = callee(top.module);
  for (const [j, o] of others.entries()) {
    if (callee(o.module) !== topCallees) {
      return { ok: false, ...blame(j), why: `the called computations differ between ${at(top)} ` +
        `and ${at(o)}` };
    }
  }
  const instrs = entry.instructions;
  const index = new Map<Instruction, number>(instrs.map((x, k) => [x, k]));
  const other = others.map((o) => o.module.entry.instructions);
  for (const [k, o] of others.entries()) {
    if (other[k]!.length !== instrs.length) {
      const ys = other[k]!;
      const first = instrs.findIndex((x, n) => ys[n]?.opcode !== x.opcode);
      const where1 = first >= 0 ? `; first at ${where(instrs[first]!)}` : "";
      return {
        ok: false,
        ...blame(k),
        why:
          `the program has ${instrs.length} instructions at ${at(top)} and ` +
          `${ys.length} at ${at(o)}: the code depends on the size (a branch or a ` +
          `loop over it)${where1}`,
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
      const mismatch = (what: string): DynamicModuleResult => ({
        ok: false,
        ...blame(j),
        why: `${where(x)} ${what} at ${at(top)} and at ${at(others[j]!)}: the code depends ` +
          `on the size there`,
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
    // Constants that move with the sizes.
    if (x.opcode === "constant") {
      const lx = x.attrs.literal!;
      const lits = xsAt.map((y) => y.attrs.literal!);
      if (!lits.every((l) => sameLiteral(l, lx))) {
        const vx = splatValue(lx);
        const vs = lits.map(splatValue);
        const pts = vx === undefined || vs.some((v) => v === undefined)
          ? undefined
          : [[top.sizes, vx] as const, ...vs.map((v, j) => [others[j]!.sizes, v!] as const)];
        const fit = pts && fitAffine(pts);
        if (!fit || lits.some((l) => l.dims.join() !== lx.dims.join())) {
          const g = pts && blameGroup(pts);
          return {
            ok: false,
            ...(g !== undefined && { group: g }),
            why: `${where(x)} holds a value that changes with the size and is not an integer ` +
              `affine function of ${top.sizes.length === 1 ? "it" : "the sizes"}`,
          };
        }
        constants.set(k, fit);
      }
    }
    // Dims that move with the sizes.
    const xs = x.shape;
    if (xs.kind === "tuple") {
      shapes.push(undefined);
      continue;
    }
    const flags: boolean[] = [];
    for (const [d, bound] of xs.dims.entries()) {
      const pts = xsAt.map((y, j) => {
        const s = y.shape as ArrayShape;
        return [others[j]!.sizes, s.dims[d]!] as const;
      });
      if (pts.every(([, v]) => v === bound)) {
        flags.push(false);
        continue;
      }
      const fit = fitAffine([[top.sizes, bound], ...pts]);
      if (!fit || fit.a.some((a) => a < 0) || !fit.a.some((a) => a > 0)) {
        const g = blameGroup([[top.sizes, bound], ...pts], true);
        return {
          ok: false,
          ...(g !== undefined && { group: g }),
          why:
            `dim ${d} of ${where(x)} is ${bound} at ${at(top)} but ` +
            pts.map(([s, v]) => `${v} at ${pointText(s, names)}`).join(", ") +
            `: not a growing integer affine function of the ${
              top.sizes.length === 1 ? "size" : "sizes"
            }`,
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
  return rebuild(top.module, shapes, constants, dimFits, sources, names, dynamicDims);
}

/**
 * Ops whose dynamic dims do not come from an operand's: their real size is set from the size
 * parameter (`set-dimension-size`), as XLA's frontends do for a broadcast to a dynamic shape.
 */
const SIZE_MAKERS = new Set(["broadcast", "iota"]);

/** A group's size is needed where no parameter carries it (a reason, not a bug). */
class MissingSize extends Error {}

function rebuild(
  original: Module,
  shapes: readonly (Shape | undefined)[],
  constants: ReadonlyMap<number, Affine>,
  dimFits: ReadonlyMap<number, ReadonlyMap<number, Affine>>,
  sources: readonly (SizeSource | undefined)[],
  names: readonly string[] | undefined,
  dynamicDims: number,
): DynamicModuleResult {
  const module = cloneModule(original);
  const old = module.entry;
  const comp: Computation = module.addComputation(module.uniqueComputationName("main.dynamic"));
  const b = new ComputationBuilder(comp);
  const env = new Map<Instruction, Instruction>();
  const params = old.parameters;
  const sizes = new Map<number, Instruction>();
  const sizeValue = (g: number): Instruction => {
    const known = sizes.get(g);
    if (known) return known;
    const source = sources[g];
    if (!source) {
      const name = names?.[g] ?? `size group ${g}`;
      throw new MissingSize(`the program depends on ${name}, but takes no tensor with that dim`);
    }
    const p = env.get(params[source.param]!)!;
    const size = b.getDimensionSize(p, source.dim);
    sizes.set(g, size);
    return size;
  };
  /** c + sum of a[g] * size[g] in element type `t` (`s32` sizes converted first). */
  const affineValue = (fit: Affine, t: ElementType): Instruction => {
    let v: Instruction | undefined;
    for (const [g, a] of fit.a.entries()) {
      if (a === 0) continue;
      let term = t === "s32" ? sizeValue(g) : b.convert(sizeValue(g), t);
      if (a !== 1) term = b.multiply(term, b.constant(scalarLiteral(t, numberFor(t, a))));
      v = v ? b.add(v, term) : term;
    }
    const c = b.constant(scalarLiteral(t, numberFor(t, fit.c)));
    if (!v) return c;
    return fit.c !== 0 ? b.add(v, c) : v;
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
        const v = affineValue(fit, t);
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
          y = b.setDimensionSize(y, affineValue(fit, "s32"), d);
        }
      } else {
        const ops = x.operands.map((o) => env.get(o)!);
        y = b.op(x.opcode, ops, cloneAttributes(x.attrs), x.called, declared);
      }
      env.set(x, y);
    }
  } catch (e) {
    if (e instanceof MissingSize) return { ok: false, why: e.message };
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

function numberFor(t: ElementType, v: number): number | bigint {
  if (t === "s64") return BigInt(v);
  return isFloatType(t) ? v : Math.trunc(v);
}

/** `f32[<=64,32]` for messages. */
export function describeShape(s: Shape): string {
  return shapeToString(s, false);
}
