// The dynamic padder (`dynamic-padder`): rewrites a module with bounded dynamic dims
// (`f32[<=1024,768]`) into one with only static shapes, compiled once for the bounds and run on
// padded buffers, whose results equal the unpadded program's on the real elements. Calling
// convention of the padded ENTRY: the original parameters at their bounds (contents past the
// real size are don't-care), then one `s32[]` real size per dynamic dim of the parameters (in
// parameter order, tuple leaves in order, dims in order); it returns `(result, s32[] ...)`: the
// result at its bounds and one real size per dynamic dim of the original result, so the caller
// slices it back. `paddedSignature` describes this for a module; `runPadded` pads actual-size
// literals, runs an executable of the padded module and slices the result. Each value carries
// its real sizes through the rewrite (XLA's dynamic dimension inference); the per-opcode rules
// that mask, move or pass through are in dynamic_rules.ts. A pattern that cannot be padded
// exactly is a DynamicPadderError naming the instruction, never a silently wrong result.

import { ComputationBuilder } from "../ir/builder.ts";
import { cloneAttributes } from "../ir/clone.ts";
import type { EvalValue } from "../ir/evaluate.ts";
import { conformanceProblem, valueShapeString } from "../ir/evaluate_support.ts";
import { allocate, Literal, type LiteralData, type ScalarValue, toStored } from "../ir/literal.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import {
  type ElementType,
  isDynamic,
  scalarShape,
  type Shape,
  shapeToString,
} from "../ir/shape.ts";
import type { Executable } from "../runtime/backend.ts";
import {
  type Extent,
  extentsOf,
  reduceExtentsOf,
  setExtents,
  setReduceExtents,
} from "../ir/extents.ts";
import type { Pass } from "./pass.ts";
import { RULES } from "./dynamic_rules.ts";
import {
  type DynamicDim,
  dynamicDims,
  DynamicPadderError,
  Emitter,
  normalizeSizes,
  type DimSize,
  type Padded,
  type Sizes,
  type PadCtx,
  sizeAt,
  sizesFrom,
  staticShape,
} from "./dynamic_sizes.ts";

export { DynamicPadderError } from "./dynamic_sizes.ts";

// ---- the calling convention ------------------------------------------------------------------

/** A size parameter of the padded ENTRY: the real size of `dim` of parameter `param`. */
export interface SizeParameter extends DynamicDim {
  readonly param: number;
}

/** How the padded form of a module is called (a pure function of the original's signature). */
export interface PaddedSignature {
  /** False when the module has no dynamic dim: the pass leaves it (and its convention) alone. */
  readonly padded: boolean;
  /** The original parameter shapes (bounded dynamic dims included). */
  readonly params: readonly Shape[];
  /** The size parameters that follow the padded parameters, in order. */
  readonly sizeParams: readonly SizeParameter[];
  /** The original result shape. */
  readonly result: Shape;
  /** The real sizes returned after the padded result, in order. */
  readonly resultSizes: readonly DynamicDim[];
}

function reachable(module: Module): Computation[] {
  const seen = new Set<Computation>();
  const visit = (c: Computation) => {
    if (seen.has(c)) return;
    seen.add(c);
    for (const i of c.instructions) i.called.forEach(visit);
  };
  visit(module.entry);
  return [...seen];
}

/** True when some computation reachable from the ENTRY has a bounded dynamic dim. */
export function hasDynamicDims(module: Module): boolean {
  return reachable(module).some((c) => c.instructions.some((i) => isDynamic(i.shape)));
}

const signatures = new WeakMap<Module, PaddedSignature>();

export function paddedSignature(module: Module): PaddedSignature {
  const params = module.entry.parameters.map((p) => p.shape);
  const result = module.entry.root.shape;
  if (!hasDynamicDims(module)) {
    return { padded: false, params, sizeParams: [], result, resultSizes: [] };
  }
  const sizeParams = params.flatMap((s, param) => dynamicDims(s).map((d) => ({ ...d, param })));
  return { padded: true, params, sizeParams, result, resultSizes: dynamicDims(result) };
}

// ---- the rewrite -----------------------------------------------------------------------------

/** Rewrites `comp` with its parameters bound to `args`, appending through `ctx`. */
function padComputation(ctx: Context, comp: Computation, args: readonly Padded[]): Padded {
  const env = new Map<Instruction, Padded>();
  const b = ctx.em.b;
  const savedMetadata = b.metadata;
  try {
    for (const instr of comp.instructions) {
      if (instr.opcode === "parameter") {
        const arg = args[instr.attrs.parameterNumber ?? 0];
        if (!arg) throw new DynamicPadderError(`internal: no argument for the parameter`, instr);
        env.set(instr, { value: arg.value, sizes: normalizeSizes(arg.sizes, instr.shape) });
        continue;
      }
      const ops = instr.operands.map((o) => env.get(o)!);
      b.metadata = { ...instr.metadata };
      const before = b.computation.instructions.length;
      let r: Padded;
      try {
        r = RULES[instr.opcode](ctx, instr, ops);
      } catch (e) {
        if (e instanceof DynamicPadderError) throw e;
        const shapes = instr.operands.map((o) => shapeToString(o.shape, false)).join(", ");
        const why = e instanceof Error ? e.message : String(e);
        const err = new DynamicPadderError(
          `rewriting ${instr.opcode}(${shapes}) failed: ${why}`,
          instr,
        );
        err.cause = e;
        throw err;
      }
      // The instruction that now computes the value takes the original's name (when free).
      const fresh = b.computation.instructions.indexOf(r.value) >= before;
      if (fresh) ctx.names.push([r.value, instr.name]);
      const sizes = normalizeSizes(r.sizes, instr.shape);
      ctx.noteValue(r.value, sizes, fresh);
      env.set(instr, { value: r.value, sizes });
    }
  } finally {
    b.metadata = savedMetadata;
  }
  return env.get(comp.root)!;
}

function sizesKey(s: Sizes): string {
  return s.kind === "array"
    ? `[${s.dims.map((d) => (d === null ? "-" : String(d.id))).join(",")}]`
    : `(${s.elements.map(sizesKey).join(",")})`;
}

/**
 * A real size as `a * param + c` of one size parameter, when it is built from size parameters
 * and constants by s32 add, subtract, multiply, exact division, and (on constants) compare,
 * select, maximum and minimum — what the Emitter writes; undefined otherwise (no hint).
 */
function affineSize(
  d: Instruction,
  params: ReadonlyMap<Instruction, number>,
): { param: number; a: number; c: number } | undefined {
  type F = { param: number | undefined; a: number; c: number } | { bool: boolean };
  const num = (f: F | undefined) => (f && !("bool" in f) ? f : undefined);
  const konst = (f: F | undefined) => {
    const n = num(f);
    return n && n.param === undefined ? n.c : undefined;
  };
  const go = (i: Instruction, depth: number): F | undefined => {
    if (depth > 32 || i.shape.kind !== "array" || i.shape.dims.length !== 0) return undefined;
    const type = i.shape.type;
    if (type !== "s32" && type !== "pred") return undefined;
    const p = params.get(i);
    if (p !== undefined) return { param: p, a: 1, c: 0 };
    const op = (k: number) => go(i.operand(k), depth + 1);
    switch (i.opcode) {
      case "constant": {
        const v = i.attrs.literal!.data[0];
        return type === "pred" ? { bool: v !== 0 } : { param: undefined, a: 0, c: Number(v) };
      }
      case "compare": {
        const x = konst(op(0));
        const y = konst(op(1));
        if (x === undefined || y === undefined) return undefined;
        const dir = i.attrs.direction;
        const r = dir === "EQ" ? x === y : dir === "NE" ? x !== y : dir === "LT" ? x < y
          : dir === "LE" ? x <= y : dir === "GT" ? x > y : x >= y;
        return { bool: r };
      }
      case "select": {
        const c = op(0);
        if (!c || !("bool" in c)) return undefined;
        return op(c.bool ? 1 : 2);
      }
      case "maximum":
      case "minimum": {
        const x = konst(op(0));
        const y = konst(op(1));
        if (x === undefined || y === undefined) return undefined;
        return { param: undefined, a: 0, c: i.opcode === "maximum" ? Math.max(x, y) : Math.min(x, y) };
      }
      case "add":
      case "subtract":
      case "multiply":
      case "divide": {
        const x = num(op(0));
        const y = num(op(1));
        if (!x || !y) return undefined;
        if (x.param !== undefined && y.param !== undefined && x.param !== y.param) return undefined;
        const param = x.param ?? y.param;
        if (i.opcode === "add") return { param, a: x.a + y.a, c: x.c + y.c };
        if (i.opcode === "subtract") return { param, a: x.a - y.a, c: x.c - y.c };
        if (y.param !== undefined && (i.opcode === "divide" || x.param !== undefined)) {
          return undefined; // size * size, or a division by a size
        }
        if (i.opcode === "divide") {
          const k = y.c;
          if (k === 0 || x.a % k !== 0 || x.c % k !== 0) return undefined;
          return { param, a: x.a / k, c: x.c / k };
        }
        const k = x.param === undefined ? x.c : y.c;
        const f = x.param === undefined ? y : x;
        return { param, a: f.a * k, c: f.c * k };
      }
      default:
        return undefined;
    }
  };
  const f = num(go(d, 0));
  if (!f || f.param === undefined || !Number.isSafeInteger(f.a) || !Number.isSafeInteger(f.c)) {
    return undefined;
  }
  return { param: f.param, a: f.a, c: f.c };
}

/** The rewrite's state for one computation being written. */
class Context implements PadCtx {
  readonly module: Module;
  readonly em: Emitter;
  /** Values made for original instructions, with the names to give them back at the end. */
  readonly names: [Instruction, string][];
  /**
   * Values of original ENTRY instructions whose padding nothing needs (extent hints,
   * ir/extents.ts): made by their rule with no other use inside it; null once a value stands
   * for two originals with different sizes (then nothing is promised).
   */
  readonly hinted = new Map<Instruction, Sizes | null>();

  constructor(module: Module, comp: Computation, names: [Instruction, string][]) {
    this.module = module;
    this.em = new Emitter(new ComputationBuilder(comp));
    this.names = names;
  }

  /** Records the value `v` (with real `sizes`) a rule returned for an original instruction. */
  noteValue(v: Instruction, sizes: Sizes, fresh: boolean): void {
    if (v.parent !== this.em.b.computation) return;
    const known = this.hinted.get(v);
    if (known === undefined) {
      // A fresh value the rule itself reads (a masked copy it reduces) is needed whole.
      if (fresh && v.users.length === 0) this.hinted.set(v, sizes);
      return;
    }
    if (known !== null && sizesKey(known) !== sizesKey(sizes)) this.hinted.set(v, null);
  }

  /** Reduces and dots of the ENTRY whose operands are neutral past the real sizes. */
  readonly reduced = new Map<Instruction, readonly { dim: number; size: DimSize }[]>();

  noteReduced(r: Instruction, dims: readonly { dim: number; size: DimSize }[]): void {
    if (r.parent === this.em.b.computation && dims.some((d) => d.size !== null)) {
      this.reduced.set(r, dims);
    }
  }

  /** Writes the extent hints of the ENTRY values, now that the size parameters exist. */
  writeHints(sizeParams: readonly Instruction[]): void {
    const params = new Map(sizeParams.map((p) => [p, p.attrs.parameterNumber!]));
    const foreign = (i: Instruction) =>
      i.attrs.backendConfig !== undefined &&
      extentsOf(i) === undefined &&
      reduceExtentsOf(i) === undefined;
    for (const [r, dims] of this.reduced) {
      if (foreign(r)) continue;
      const extents: Extent[] = [];
      for (const { dim, size } of dims) {
        const f = size === null ? undefined : affineSize(size, params);
        if (f) extents.push({ dim, ...f });
      }
      if (extents.length > 0) setReduceExtents(r, extents);
    }
    for (const [v, sizes] of this.hinted) {
      if (sizes === null || sizes.kind !== "array" || v.shape.kind !== "array") continue;
      if (foreign(v)) continue;
      const extents: Extent[] = [];
      sizes.dims.forEach((d, dim) => {
        if (d === null) return;
        const f = affineSize(d, params);
        if (f) extents.push({ dim, ...f });
      });
      if (extents.length > 0) setExtents(v, extents);
    }
  }

  inline(comp: Computation, args: readonly Padded[]): Padded {
    return padComputation(this, comp, args);
  }

  subComputation(
    base: string,
    paramShapes: readonly Shape[],
    body: (ctx: PadCtx, params: readonly Instruction[]) => Instruction,
  ): Computation {
    const comp = this.module.addComputation(this.module.uniqueComputationName(base));
    const sub = new Context(this.module, comp, this.names);
    const params = paramShapes.map((s) => sub.em.b.parameter(s));
    comp.root = body(sub, params);
    return comp;
  }

  copy(instr: Instruction, operands: readonly Instruction[]): Instruction {
    return this.em.b.op(
      instr.opcode,
      operands,
      cloneAttributes(instr.attrs),
      instr.called,
      staticShape(instr.shape),
    );
  }
}

/** Removes computations the ENTRY no longer reaches, callers before callees. */
function removeUnreachable(module: Module): void {
  const live = new Set(reachable(module));
  removeComputations(module, module.computations.filter((c) => !live.has(c)));
}

/** Removes `comps`, which nothing outside them calls, callers before callees. */
function removeComputations(module: Module, comps: readonly Computation[]): void {
  let dead = [...comps];
  while (dead.length > 0) {
    const callees = new Set(dead.flatMap((c) => c.calledComputations));
    const next = dead.filter((c) => !callees.has(c));
    if (next.length === 0) throw new DynamicPadderError("internal: a call cycle among dead code");
    for (const c of next) module.removeComputation(c);
    dead = dead.filter((c) => !next.includes(c));
  }
}

/**
 * Pads bounded dynamic dims to their bounds, masking every op whose real result padding could
 * reach; see the file header for the calling convention.
 */
export class DynamicPadder implements Pass {
  readonly name = "dynamic-padder";

  run(module: Module): boolean {
    const sig = paddedSignature(module);
    if (!sig.padded) return false;
    const before = new Set(module.computations);
    try {
      this.rewrite(module, sig);
    } catch (e) {
      // A pattern that cannot be padded leaves the module as it was.
      removeComputations(
        module,
        module.computations.filter((c) => !before.has(c)),
      );
      throw e;
    }
    return true;
  }

  private rewrite(module: Module, sig: PaddedSignature): void {
    const entry = module.entry;
    const comp = module.addComputation(module.uniqueComputationName(`${entry.name}.padded`));
    const names: [Instruction, string][] = [];
    const ctx = new Context(module, comp, names);
    const b = ctx.em.b;
    const originals = entry.parameters;
    const params = originals.map((p) => {
      const np = b.parameter(staticShape(p.shape));
      names.push([np, p.name]);
      return np;
    });
    const sizeParams = sig.sizeParams.map((sp) => {
      const np = b.parameter(scalarShape("s32"));
      const leaf = sp.path.length > 0 ? `.${sp.path.join(".")}` : "";
      names.push([np, `${originals[sp.param]!.name}${leaf}.size${sp.dim}`]);
      return np;
    });
    const args: Padded[] = params.map((value, k) => {
      const mine = sig.sizeParams.flatMap((sp, i) => (sp.param === k ? [{ sp, i }] : []));
      return {
        value,
        sizes: sizesFrom(
          sig.params[k]!,
          mine.map((m) => m.sp),
          mine.map((m) => sizeParams[m.i]!),
        ),
      };
    });
    const root = padComputation(ctx, entry, args);
    ctx.writeHints(sizeParams);
    const outSizes = sig.resultSizes.map((d) =>
      ctx.em.size(sizeAt(root.sizes, d.path, d.dim), d.bound),
    );
    comp.root = b.tuple([root.value, ...outSizes]);
    const entryName = entry.name;
    module.entry = comp;
    removeUnreachable(module);
    comp.name = entryName;
    for (const [instr, name] of names) {
      if (!module.hasName(name)) instr.name = name;
    }
  }
}

// ---- running a padded program ----------------------------------------------------------------

export interface RunPaddedOptions {
  /**
   * What fills the padding of the inputs, per element type (default 0 / false). The result does
   * not depend on it; tests fill with NaN and extreme integers to show that.
   */
  fill?: Partial<Record<ElementType, ScalarValue>>;
}

/**
 * Per result a padded program returned sliced (by its data array), the padded result it was
 * sliced from: fed back to a program with the same bounds (a KV cache from one step to the
 * next), it is passed as it is, instead of padded again. The padding's contents never change a
 * result (what the padder guarantees, and tests show by poisoning it), and a tensor's storage
 * is never written after it is made (data() hands out copies), so the pair stays valid.
 */
const paddedOf = new WeakMap<LiteralData, Literal>();

/**
 * Padded input buffers, by element type and length, handed back after the run that used them:
 * the padding's contents never change a result, so a buffer is reused as it was left (only the
 * real block is written). What a call pads is taken from here and returned after the run, so
 * a loop over one bucket allocates nothing for its inputs after the first call.
 */
const spare = new Map<string, LiteralData[]>();
const SPARE_PER_SIZE = 8;
/** The buffers the current call took from `spare` or allocated (returned after its run). */
let taken: { key: string; data: LiteralData }[] | undefined;

function paddedBuffer(type: Literal["type"], like: LiteralData, n: number): LiteralData {
  const key = `${type}:${n}`;
  // Not cleared either when new: its padding may hold anything.
  const data = spare.get(key)?.pop() ?? overwritten(type, like, n);
  taken?.push({ key, data });
  return data;
}

function giveBack(list: readonly { key: string; data: LiteralData }[], out: EvalValue): void {
  // By memory, not array object: a result that views an input's buffer keeps it.
  const used = new Set<ArrayBufferLike>();
  const leaves = (v: EvalValue) => {
    if (Array.isArray(v)) v.forEach(leaves);
    else used.add(v.data.buffer);
  };
  leaves(out);
  for (const { key, data } of list) {
    if (used.has(data.buffer)) continue; // a result holds the input's memory: the caller's now
    let pool = spare.get(key);
    if (!pool) spare.set(key, (pool = []));
    if (pool.length < SPARE_PER_SIZE) pool.push(data);
  }
}

function padLiteral(
  lit: Literal,
  bounds: readonly number[],
  fill: ScalarValue,
  explicitFill: boolean,
): Literal {
  if (lit.dims.every((d, i) => d === bounds[i])) return lit;
  if (!explicitFill) {
    const known = paddedOf.get(lit.data);
    if (known && known.type === lit.type && known.dims.every((d, i) => d === bounds[i])) {
      return known;
    }
  }
  const n = bounds.reduce((a, b) => a * b, 1);
  let data: LiteralData;
  if (explicitFill) {
    data = allocate(lit.type, n);
    const stored = toStored(lit.type, fill);
    // allocate() zeroes: only another fill needs a pass.
    if (stored !== 0 && stored !== 0n) (data as { fill(v: number | bigint): unknown }).fill(stored);
  } else {
    data = paddedBuffer(lit.type, lit.data, n);
  }
  copyBlock(lit.dims, lit.dims, bounds, lit.data, data);
  return new Literal(lit.type, bounds, data);
}

/**
 * `n` elements of `like`'s kind that the caller overwrites entirely: from 64 KiB up not cleared
 * first (Buffer.allocUnsafe, an ArrayBuffer of its own above 4 KiB; as native's results and
 * Tensor.data()'s copies), below that a zeroed allocation.
 */
function overwritten(type: Literal["type"], like: LiteralData, n: number): LiteralData {
  const bytes = n * like.BYTES_PER_ELEMENT;
  if (bytes < 64 * 1024 || typeof Buffer === "undefined") return allocate(type, n);
  const b = Buffer.allocUnsafe(bytes);
  if (b.byteOffset !== 0 || b.buffer.byteLength !== bytes) return allocate(type, n);
  const ctor = like.constructor as new (buffer: ArrayBuffer, offset: number, length: number) => LiteralData;
  return new ctor(b.buffer as ArrayBuffer, 0, n);
}

function sliceLiteral(lit: Literal, dims: readonly number[]): Literal {
  if (lit.dims.every((d, i) => d === dims[i])) return lit;
  const n = dims.reduce((a, b) => a * b, 1);
  // Every element is copied from the padded result.
  const data = overwritten(lit.type, lit.data, n);
  copyBlock(dims, lit.dims, dims, lit.data, data);
  paddedOf.set(data, lit);
  return new Literal(lit.type, dims, data);
}

/**
 * Copies the elements of `block` (a box at the origin) from `from` in layout `src` to `to` in
 * layout `dst`, a contiguous run at a time: the trailing dims that the block, src and dst all
 * hold whole are one run with the first partial dim before them (TypedArray.set per run).
 */
function copyBlock(
  block: readonly number[],
  src: readonly number[],
  dst: readonly number[],
  from: LiteralData,
  to: LiteralData,
): void {
  const total = block.reduce((a, b) => a * b, 1);
  if (total === 0) return;
  const r = block.length;
  if (r === 0) {
    (to as unknown as number[])[0] = (from as unknown as number[])[0]!;
    return;
  }
  let k = r - 1;
  let run = block[k]!;
  while (k > 0 && block[k] === src[k] && block[k] === dst[k]) {
    k--;
    run *= block[k]!;
  }
  const stride = (dims: readonly number[]) => {
    const out: number[] = [];
    let acc = 1;
    for (let q = dims.length - 1; q >= 0; q--) {
      out[q] = acc;
      acc *= dims[q]!;
    }
    return out;
  };
  const ss = stride(src);
  const ds = stride(dst);
  // The runs: one per index of the dims before k (dim k and after are inside a run).
  const outer = block.slice(0, k);
  const runs = total / run;
  const idx = outer.map(() => 0);
  const f = from as Float32Array;
  const t = to as Float32Array;
  const sameKind = from.constructor === to.constructor;
  for (let n = 0; n < runs; n++) {
    let s = 0;
    let d = 0;
    for (let q = 0; q < k; q++) {
      s += idx[q]! * ss[q]!;
      d += idx[q]! * ds[q]!;
    }
    if (sameKind) t.set(f.subarray(s, s + run), d);
    else {
      const fa = from as unknown as { readonly [i: number]: number | bigint };
      const ta = to as unknown as { [i: number]: number | bigint };
      for (let e = 0; e < run; e++) ta[d + e] = fa[s + e]!;
    }
    for (let q = k - 1; q >= 0; q--) {
      if (++idx[q]! < outer[q]!) break;
      idx[q] = 0;
    }
  }
}

function padValue(v: EvalValue, shape: Shape, options: RunPaddedOptions): EvalValue {
  if (shape.kind === "tuple") {
    return shape.elements.map((e, i) => padValue((v as EvalValue[])[i]!, e, options));
  }
  const lit = v as Literal;
  const given = options.fill?.[lit.type];
  const fill = given ?? (lit.type === "s64" ? 0n : 0);
  return padLiteral(lit, shape.dims, fill, given !== undefined);
}

function leafAt(v: EvalValue, path: readonly number[]): Literal {
  let cur = v;
  for (const i of path) cur = (cur as EvalValue[])[i]!;
  return cur as Literal;
}

/**
 * `v` sliced to its real sizes: `sizes` holds them in dynamicDims order (leaves depth first,
 * each leaf's dynamic dims in order), consumed from `at.k`.
 */
function sliceValue(
  v: EvalValue,
  shape: Shape,
  sizes: readonly number[],
  at: { k: number },
): EvalValue {
  if (shape.kind === "tuple") {
    if (!Array.isArray(v)) throw new Error(`runPadded: expected a tuple result`);
    return shape.elements.map((e, i) => sliceValue(v[i]!, e, sizes, at));
  }
  if (Array.isArray(v)) throw new Error(`runPadded: expected an array result, got a tuple`);
  if (!shape.dynamic.some((d) => d)) return v;
  const dims = shape.dims.map((bound, d) => (shape.dynamic[d] ? sizes[at.k++]! : bound));
  return sliceLiteral(v, dims);
}

/**
 * Runs `exe` (compiled from the padded form of `module`) on actual-size `args` of `module`:
 * pads each argument to its bounds, passes the real sizes, and slices the result back to its
 * real sizes — the value `evaluate(module, args)` gives. A module without dynamic dims runs as
 * is.
 */
export function runPadded(
  exe: Executable,
  module: Module,
  args: readonly EvalValue[],
  options: RunPaddedOptions = {},
): EvalValue {
  // Per call: the signature walks the whole module, so it is computed once per module (a
  // module handed to runPadded is the program's description and is not changed afterwards).
  let sig = signatures.get(module);
  if (!sig) signatures.set(module, (sig = paddedSignature(module)));
  if (!sig.padded) return exe.run(args);
  if (args.length !== sig.params.length) {
    throw new Error(
      `runPadded: '${module.name}' takes ${sig.params.length} argument(s), got ${args.length}`,
    );
  }
  const want = sig.params.length + sig.sizeParams.length;
  const got = exe.module.entry.parameters.length;
  if (got !== want) {
    throw new Error(
      `runPadded: the executable takes ${got} parameter(s), but the padded form of ` +
        `'${module.name}' takes ${want}; was it compiled from DynamicPadder's output?`,
    );
  }
  args.forEach((a, i) => {
    const problem = conformanceProblem(a, sig.params[i]!);
    if (problem !== null) {
      throw new Error(
        `runPadded: argument ${i} is ${valueShapeString(a)}, which does not fit parameter ${i} ` +
          `${shapeToString(sig.params[i]!, false)} of '${module.name}': ${problem}`,
      );
    }
  });
  const mine: { key: string; data: LiteralData }[] = [];
  taken = mine;
  let padded: EvalValue[];
  try {
    padded = args.map((a, i) => padValue(a, sig.params[i]!, options));
  } finally {
    taken = undefined;
  }
  const sizes = sig.sizeParams.map((sp) => {
    const n = leafAt(args[sp.param]!, sp.path).dims[sp.dim]!;
    return new Literal("s32", [], Int32Array.of(n));
  });
  const out = exe.run([...padded, ...sizes]);
  giveBack(mine, out);
  if (!Array.isArray(out) || out.length !== 1 + sig.resultSizes.length) {
    throw new Error(
      `runPadded: expected (result, ${sig.resultSizes.length} size(s)) from the padded ` +
        `program, got ${valueShapeString(out)}`,
    );
  }
  const real = sig.resultSizes.map((d, k) => {
    const lit = out[k + 1] as Literal;
    const n = Number(lit.data[0]);
    if (!(n >= 0 && n <= d.bound)) {
      throw new Error(`runPadded: result size ${n} of dim ${d.dim} is outside [0, ${d.bound}]`);
    }
    return n;
  });
  return sliceValue(out[0]!, sig.result, real, { k: 0 });
}
