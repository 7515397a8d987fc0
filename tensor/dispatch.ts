// The one dispatcher every frontend op goes through. An op is defined once: as a LOWERING
// (`lower(b, inputs, attrs)` appends the op's IR to a builder, given IR values for its operands)
// or as a DECOMPOSITION (a plain function of Tensors calling other ops). A call parses its
// arguments (tensor/args.ts), splits them into operands (tensors and JS scalars, which become IR
// parameters) and attributes (part of the program), and hands a lowering to the current
// DispatchMode. The eager mode (the default) builds a one-op module, compiles it through the
// runtime's Backend once per (op, operand dtypes and shapes, attributes, backend) and runs it
// (a backend that declines a module with UnsupportedError leaves it to the interpreter); lazy
// mode (tensor/lazy.ts) and tracing are other modes reusing `lowerOp`, so an op never needs to
// know how it is executed. Every instruction a lowering makes records the op in metadata.opType.

import type { Metadata } from "../ir/attributes.ts";
import { type ComputationBuilder, ModuleBuilder } from "../ir/builder.ts";
import { ShapeError } from "../ir/errors.ts";
import type { EvalValue } from "../ir/evaluate.ts";
import {
  bf16BitsToNumber,
  f16BitsToNumber,
  f32ToBF16Bits,
  f32ToF16Bits,
  Literal,
  type LiteralData,
  scalarLiteral,
} from "../ir/literal.ts";
import type { Instruction, Module } from "../ir/module.ts";
import { optimizationPipeline } from "../passes/index.ts";
import { arrayShape, type Shape, shapeToString } from "../ir/shape.ts";
import {
  defaultProgramCache,
  getBackend,
  interpreterBackend,
  noteExecutableHit,
  single,
  UnsupportedError,
  type Backend,
  type Executable,
} from "../runtime/index.ts";
import { log } from "../util/log.ts";
import { locateHere } from "../util/user_frame.ts";
import {
  type AnyParam,
  type ArgsOf,
  type AttrsOf,
  type CallForms,
  parseArgs,
  type Tail,
} from "./args.ts";
import {
  type DType,
  fromElementType,
  isIntScalar,
  type Scalar,
  scalarDType,
  type Storage,
  toElementType,
} from "./dtype.ts";
import { OpError } from "./errors.ts";
import { markScalarOperand, scalarParameterShape } from "./lower.ts";
import { ConcreteImpl, Tensor } from "./tensor.ts";

/** A runtime operand of an op: a tensor, or a JS scalar taking part as a wrapped number. */
export type Operand = Tensor | Scalar;

/** Attributes as a mode sees them: the parsed non-operand arguments by name. */
export type Attrs = Readonly<Record<string, unknown>>;

/** An op defined by its lowering to IR, with its types erased (what modes receive). */
export interface Lowering {
  readonly kind: "lowering";
  readonly name: string;
  readonly signature: readonly AnyParam[];
  /** Checks and rewrites the parsed arguments (operands included) before anything else. */
  normalize?(args: Attrs): Attrs;
  lower(b: ComputationBuilder, inputs: Instruction[], attrs: Attrs): Instruction | Instruction[];
  /**
   * The op's own derivative, where differentiating its lowering opcode by opcode would not be
   * PyTorch's (relu's gradient at 0): given the forward inputs and outputs in `b` and a
   * cotangent per output (undefined where none), one cotangent per input (undefined: none).
   * Without it, autograd differentiates the lowering with the IR's rules.
   */
  vjp?: VjpFn;
}

/** An op's own derivative (Lowering.vjp). */
export type VjpFn = (
  b: ComputationBuilder,
  inputs: readonly Instruction[],
  outputs: readonly Instruction[],
  cotangents: readonly (Instruction | undefined)[],
  attrs: Attrs,
  /** The IR rules' cotangents per input (what autograd would use without `vjp`), to adjust. */
  auto: () => (Instruction | undefined)[],
) => (Instruction | undefined)[];

/** An op defined by other ops. */
export interface Decomposition {
  readonly kind: "decomposition";
  readonly name: string;
  readonly signature: readonly AnyParam[];
  decompose(args: Attrs): Tensor | Tensor[];
}

export type OpDefinition = Lowering | Decomposition;

/** How lowered ops execute: eager (now), lazy and tracing (later). */
export interface DispatchMode {
  readonly name: string;
  /**
   * Runs `op` on its operands (in signature order; a list parameter contributes its elements,
   * an optional operand not given is absent). A lowering that returns several values gives an
   * array of tensors.
   */
  run(op: Lowering, operands: readonly Operand[], attrs: Attrs): Tensor | Tensor[];
}

/**
 * Appends `op`'s lowering to `b`. Every instruction it makes gets metadata.opType = op.name
 * (plus `metadata`, e.g. a traced source location); an IR ShapeError that escapes the lowering
 * becomes an OpError naming the op and its input shapes.
 */
export function lowerOp(
  b: ComputationBuilder,
  op: Lowering,
  inputs: Instruction[],
  attrs: Attrs,
  metadata: Metadata = {},
): Instruction | Instruction[] {
  try {
    return b.withMetadata({ ...metadata, opType: op.name }, () => op.lower(b, inputs, attrs));
  } catch (e) {
    if (e instanceof ShapeError) {
      const shapes = inputs.map((x) => shapeToString(x.shape, false)).join(", ");
      throw new OpError(op.name, `cannot lower for inputs (${shapes}): ${e.message}`, {
        cause: e,
      });
    }
    throw e;
  }
}

// ---- Modes ----------------------------------------------------------------------------------

let mode: DispatchMode;

export function currentMode(): DispatchMode {
  return mode;
}

/**
 * Makes `m` the dispatch mode from now on (a global switch such as `setLazy(true)`); returns
 * the mode it replaces. Prefer withMode for a scope.
 */
export function setMode(m: DispatchMode): DispatchMode {
  const saved = mode;
  mode = m;
  return saved;
}

/** Runs `fn` with `m` as the dispatch mode, restoring the previous one afterwards. */
export function withMode<T>(m: DispatchMode, fn: () => T): T {
  const saved = mode;
  mode = m;
  try {
    return fn();
  } finally {
    mode = saved;
  }
}

// ---- Eager mode: one-op programs, cached ------------------------------------------------------

interface CacheEntry {
  readonly exe: Executable;
  readonly tuple: boolean;
  /** Use stamp: the eager cache evicts the least recently used entry (lowest stamp) first. */
  used: number;
  /**
   * The cache-hit fast path (`Executable.runLeaves`): each result leaf's dtype and frozen dims,
   * when the executable has that entry and no result is a half type (those are re-encoded).
   */
  readonly outs?: readonly { readonly dtype: DType; readonly dims: readonly number[] }[];
  /**
   * The op only re-views one operand's elements (a reshape, a contiguous slice): the result
   * shares that operand's storage (tensors are immutable), so no kernel runs and nothing is
   * copied or allocated — as PyTorch's views.
   */
  readonly view?: { operand: number; offset: number; dims: readonly number[] };
}

/**
 * Whether an op's module is a view of one parameter: reshapes (and contiguous slices) of it
 * up to the root. A slice is contiguous when every dim after its first partial one is whole
 * and every dim before it has one element; the view is then a subarray at the slice's start.
 */
function viewOf(module: Module): CacheEntry["view"] {
  const root = module.entry.root;
  if (root.shape.kind !== "array") return undefined;
  const dims = root.shape.dims;
  let i: Instruction = root;
  let offset = 0;
  let sliced = false;
  for (;;) {
    if (i.opcode === "reshape") {
      i = i.operands[0]!;
    } else if (i.opcode === "slice" && !sliced) {
      const src = i.operands[0]!.shape;
      if (src.kind !== "array") return undefined;
      const sl = i.attrs.slice!;
      let k = sl.length - 1;
      while (k >= 0 && sl[k]!.start === 0 && sl[k]!.limit === src.dims[k] && sl[k]!.stride === 1) k--;
      if (k >= 0 && sl[k]!.stride !== 1 && sl[k]!.limit - sl[k]!.start > 1) return undefined;
      for (let j = 0; j < k; j++) if (sl[j]!.limit - sl[j]!.start !== 1) return undefined;
      // Reshapes above a slice keep the slice's element order, so the offset is the start's
      // linear index in the sliced operand, which must itself be the parameter.
      let stride = 1;
      for (let j = sl.length - 1; j >= 0; j--) {
        offset += sl[j]!.start * stride;
        stride *= src.dims[j]!;
      }
      sliced = true;
      i = i.operands[0]!;
    } else {
      break;
    }
  }
  if (i.opcode !== "parameter" || i.shape.kind !== "array") return undefined;
  if (i.shape.type !== root.shape.type) return undefined;
  return { operand: i.attrs.parameterNumber ?? 0, offset, dims };
}

const cache = new Map<string, CacheEntry>();
const counters = { hits: 0, misses: 0, evictions: 0 };
let clock = 0;
let capacity = 4096;
let eagerBackend: string | undefined;

export interface OpCacheStats {
  readonly hits: number;
  readonly misses: number;
  readonly evictions: number;
  readonly size: number;
  readonly capacity: number;
}

/** Hits, misses and evictions of the eager op cache since the last reset. */
export function opCacheStats(): OpCacheStats {
  return { ...counters, size: cache.size, capacity };
}

/** Empties the eager op cache and zeroes its counters. */
export function resetOpCache(): void {
  cache.clear();
  counters.hits = 0;
  counters.misses = 0;
  counters.evictions = 0;
}

/** Entries kept (least recently used evicted first). */
export function setOpCacheCapacity(n: number): void {
  if (!Number.isInteger(n) || n < 1) throw new Error(`op cache capacity must be >= 1, got ${n}`);
  capacity = n;
  evict();
}

/** The backend eager ops run on: a registered name, or undefined for the default. */
export function setEagerBackend(name: string | undefined): void {
  if (name !== undefined) getBackend(name); // fails now, naming the registered ones
  eagerBackend = name;
}

/** The backend name setEagerBackend chose (undefined: the default); lazy mode follows it. */
export function eagerBackendName(): string | undefined {
  return eagerBackend;
}

function evict(): void {
  while (cache.size > capacity) {
    // A scan, only when over capacity (after a miss, which compiled or loaded a program): hits
    // just stamp their entry, instead of moving it to the end of the map.
    let oldest: string | undefined;
    let stamp = Infinity;
    for (const [k, e] of cache) {
      if (e.used < stamp) {
        stamp = e.used;
        oldest = k;
      }
    }
    cache.delete(oldest!);
    counters.evictions++;
  }
}

/** A cache key fragment for an attribute value (stable, distinguishing -0, NaN, bigints). */
function keyOf(v: unknown): string {
  switch (typeof v) {
    case "number":
      return Object.is(v, -0) ? "-0" : String(v);
    case "bigint":
      return `${v}n`;
    case "string":
      return JSON.stringify(v);
    case "boolean":
      return v ? "T" : "F";
    case "undefined":
      return "_";
    default:
      if (v === null) return "null";
      if (Array.isArray(v)) return `[${v.map(keyOf).join(",")}]`;
      if (v instanceof Tensor) throw new Error(`a Tensor cannot be an attribute`);
      if (typeof v === "object") {
        const o = v as Record<string, unknown>;
        return `{${Object.keys(o)
          .sort()
          .map((k) => `${k}:${keyOf(o[k])}`)
          .join(",")}}`;
      }
      throw new Error(`an attribute cannot be ${typeof v}`);
  }
}

/** Shape key text by shape array: a tensor's shape is frozen, and results share their entry's. */
const shapeText = new WeakMap<readonly number[], string>();

function operandKey(o: Operand): string {
  if (o instanceof Tensor) {
    const shape = o.shape;
    let t = shapeText.get(shape);
    if (t === undefined) {
      t = shape.join(",");
      if (Object.isFrozen(shape)) shapeText.set(shape, t);
    }
    return `${o.dtype}[${t}]`;
  }
  return `#${scalarDType(o)}`;
}

/**
 * What a lowering's program depends on, as text: the op, the operands' dtypes and shapes (or
 * scalar dtypes) and the attributes. Equal keys lower to the same IR (lazy mode keys shape
 * inference and whole graphs on it); the eager cache adds the backend.
 */
export function loweringKey(op: Lowering, operands: readonly Operand[], attrs: Attrs): string {
  let key = `${op.name}|`;
  for (const o of operands) key += `${operandKey(o)};`;
  key += "|";
  for (const p of op.signature) if (p.role === "none") key += `${keyOf(attrs[p.name])};`;
  return key;
}

/** An IR parameter for an operand: the tensor's shape, or a marked zero-dim wrapped number. */
export function operandParameter(b: ComputationBuilder, o: Operand): Instruction {
  if (o instanceof Tensor) return b.parameter(arrayShape(toElementType(o.dtype), o.shape));
  return markScalarOperand(b.parameter(scalarParameterShape(scalarDType(o))));
}

/** The literal an operand is passed as (float16/bfloat16 decoded from their bits). */
export function operandLiteral(o: Operand): Literal {
  if (!(o instanceof Tensor)) {
    const dtype = scalarDType(o);
    const v = typeof o === "number" && dtype === "int64" && isIntScalar(o) ? BigInt(o) : o;
    return scalarLiteral(toElementType(dtype), v);
  }
  const { dtype, shape, storage } = o.realize();
  let data: LiteralData;
  if (dtype === "float16") data = Float32Array.from(storage as Uint16Array, f16BitsToNumber);
  else if (dtype === "bfloat16") data = Float32Array.from(storage as Uint16Array, bf16BitsToNumber);
  else data = storage as LiteralData;
  return new Literal(toElementType(dtype), shape, data);
}

/** A tensor holding a result literal (float16/bfloat16 encoded to bits). */
export function tensorFromLiteral(lit: Literal): Tensor {
  const dtype = fromElementType(lit.type);
  let storage: Storage;
  if (dtype === "float16" || dtype === "bfloat16") {
    const encode = dtype === "float16" ? f32ToF16Bits : f32ToBF16Bits;
    storage = Uint16Array.from(lit.data as Float32Array, encode);
  } else {
    storage = lit.data as Storage; // not f64: fromElementType has no dtype for it
  }
  return new Tensor(new ConcreteImpl(dtype, lit.dims, storage));
}

/** Whether an op's module has more than one instruction besides its parameters (and tuple). */
function worthOptimizing(module: Module): boolean {
  let n = 0;
  for (const i of module.entry.instructions) {
    if (i.opcode !== "parameter" && i.opcode !== "tuple" && ++n > 1) return true;
  }
  return false;
}

function compile(
  op: Lowering,
  operands: readonly Operand[],
  attrs: Attrs,
  backend: Backend,
): CacheEntry {
  const mb = new ModuleBuilder(op.name);
  let tuple = false;
  mb.entry("main", (b) => {
    const params = operands.map((o) => operandParameter(b, o));
    const r = lowerOp(b, op, params, attrs);
    if (!Array.isArray(r)) return r;
    tuple = true;
    return b.tuple(r);
  });
  const module = mb.build();
  // An op of several instructions (gelu, layer norm, softmax, attention) is fused like any
  // program, so eager runs it as one or two kernels instead of one materialized array per
  // instruction (its broadcasts included). The passes keep the meaning, so an exact-tier backend
  // still gives the evaluator's bits; a one-instruction op has nothing to fuse.
  if (backend.name !== interpreterBackend.name && worthOptimizing(module)) {
    optimizationPipeline().run(module);
  }
  eagerModuleObserver?.(module);
  const view = tuple ? undefined : viewOf(module);
  if (view !== undefined && operands[view.operand] instanceof Tensor) {
    // Still compiled (verified, and run by nothing): a view needs no executable, but keeping
    // one keeps every entry alike.
    return { exe: interpreterBackend.compile(module), tuple, view, used: 0 };
  }
  // Through the program cache's disk (not its memory: this map is the memory), so a warmed-up
  // cache serves eager ops in a new process too, and the cache-only mode covers them.
  const request = {
    hints: { purpose: "eager" } as const,
    memory: false,
    deferWrite: true,
    origin: {
      kind: "eager",
      source: op.name,
      signature: operands.map(operandSig),
      attrs: op.signature
        .filter((p) => p.role === "none" && attrs[p.name] !== undefined)
        .map((p) => `${p.name}=${keyOf(attrs[p.name])}`)
        .join(", "),
    } as const,
  };
  const programs = defaultProgramCache();
  let exe: Executable;
  try {
    exe = programs.getOrCompile(module, backend, EAGER_KEY, undefined, request).executable;
  } catch (e) {
    // The interpreter runs every opcode; a faster backend may decline a module.
    if (!(e instanceof UnsupportedError) || backend.name === interpreterBackend.name) throw e;
    log("cache", () => `eager: ${op.name} falls back to the interpreter: ${e.message}`);
    exe = programs.getOrCompile(module, interpreterBackend, EAGER_KEY, undefined, request)
      .executable;
  }
  // Half-precision operands are decoded to f32 literals on the checked path; the key fixes the
  // operands' dtypes, so whether the fast path applies is known here, once.
  const halfOperand = operands.some(
    (o) => o instanceof Tensor && (o.dtype === "float16" || o.dtype === "bfloat16"),
  );
  const outs = exe.runLeaves && !halfOperand ? fastOuts(module.entry.root.shape) : undefined;
  return outs ? { exe, tuple, used: 0, outs } : { exe, tuple, used: 0 };
}

/** Each result leaf's dtype and frozen dims, or undefined when the fast path cannot serve them. */
function fastOuts(root: Shape): CacheEntry["outs"] {
  const leaves = root.kind === "tuple" ? root.elements : [root];
  const outs: { dtype: DType; dims: readonly number[] }[] = [];
  for (const l of leaves) {
    if (l.kind !== "array" || l.dynamic.some((d) => d)) return undefined;
    const dtype = fromElementType(l.type);
    if (dtype === "float16" || dtype === "bfloat16") return undefined;
    outs.push({ dtype, dims: Object.freeze([...l.dims]) });
  }
  return outs;
}

/**
 * A cache hit through `Executable.runLeaves`: the key guarantees every operand's dtype and
 * shape (none a half type: compile() gives such entries no `outs`), so the arguments go in as
 * their storage and the results come out as tensors without the checks `run` and the
 * constructors make.
 */
function runFast(entry: CacheEntry, operands: readonly Operand[]): Tensor | Tensor[] {
  const args: LiteralData[] = [];
  for (const o of operands) {
    args.push(o instanceof Tensor ? (o.realize().storage as LiteralData) : operandLiteral(o).data);
  }
  // The outs' dtypes are tensor dtypes, so no buffer is an f64 one.
  const bufs = entry.exe.runLeaves!(args) as Storage[];
  const outs = entry.outs!;
  if (!entry.tuple) {
    return new Tensor(new ConcreteImpl(outs[0]!.dtype, outs[0]!.dims, bufs[0]!, true));
  }
  return outs.map((r, k) => new Tensor(new ConcreteImpl(r.dtype, r.dims, bufs[k]!, true)));
}

/** Told of each eager op's module as it is compiled (after optimization). */
let eagerModuleObserver: ((module: Module) => void) | undefined;

/**
 * Observes the modules eager ops compile (undefined: none); returns the previous observer. Tests
 * use it to build every kernel a set of cases needs on `native` in one parallel batch
 * (prepareNative) instead of one compiler run per op.
 */
export function setEagerModuleObserver(
  o: ((module: Module) => void) | undefined,
): ((module: Module) => void) | undefined {
  const saved = eagerModuleObserver;
  eagerModuleObserver = o;
  return saved;
}

// Eager programs are keyed apart from whole programs of the same module (compiled with hints).
const EAGER_KEY = { eager: true };

/** An operand as the cache-only mode's message shows it (`f32[3,5]`, `#f32` for a scalar). */
function operandSig(o: Operand): { type: string; dims: string[] } {
  if (o instanceof Tensor) return { type: toElementType(o.dtype), dims: o.shape.map(String) };
  return { type: `#${toElementType(scalarDType(o))}`, dims: [] };
}

export const eagerMode: DispatchMode = {
  name: "eager",
  run(op, operands, attrs) {
    const backend = getBackend(eagerBackend);
    let key = `${op.name}|${backend.name}|`;
    for (const o of operands) key += `${operandKey(o)};`;
    key += "|";
    for (const p of op.signature) if (p.role === "none") key += `${keyOf(attrs[p.name])};`;
    let entry = cache.get(key);
    if (entry) {
      counters.hits++;
      noteExecutableHit(entry.exe, "memory");
      entry.used = ++clock;
      if (entry.outs !== undefined) return runFast(entry, operands);
    } else {
      counters.misses++;
      entry = compile(op, operands, attrs, backend);
      entry.used = ++clock;
      log("cache", () => `eager miss: ${key}`);
      cache.set(key, entry);
      evict();
    }
    const view = entry.view;
    if (view !== undefined) {
      const src = (operands[view.operand] as Tensor).realize();
      const n = view.dims.reduce((a, b) => a * b, 1);
      const storage = view.offset === 0 && n === src.storage.length
        ? src.storage
        : (src.storage.subarray(view.offset, view.offset + n) as Storage);
      return new Tensor(new ConcreteImpl(src.dtype, view.dims, storage));
    }
    const out: EvalValue = entry.exe.run(operands.map(operandLiteral));
    if (!entry.tuple) return tensorFromLiteral(single(out));
    if (!Array.isArray(out)) throw new Error(`${op.name}: expected a tuple result`);
    return out.map((v) => tensorFromLiteral(single(v)));
  },
};

mode = eagerMode;

// ---- Defining ops ---------------------------------------------------------------------------

/** A callable op: the functional form, with its definition and signature attached. */
export interface OpFunction<Ps extends readonly AnyParam[], Out> {
  (...args: CallForms<Ps>): Out;
  readonly opName: string;
  readonly signature: Ps;
  readonly definition: OpDefinition;
}

/** The method form of an op (the first parameter is `this`). */
export type MethodOf<F> =
  F extends OpFunction<infer Ps, infer Out> ? (...args: CallForms<Tail<Ps>>) => Out : never;

const registry = new Map<string, OpDefinition>();

/** Every defined op by name (lowerings and decompositions). */
export function registeredOps(): ReadonlyMap<string, OpDefinition> {
  return registry;
}

function register(def: OpDefinition): void {
  if (registry.has(def.name)) throw new Error(`op '${def.name}' is defined twice`);
  registry.set(def.name, def);
}

/**
 * Parses a call and runs it: lowerings through the current mode, decompositions directly.
 * Whatever escapes it names the user's line (an OpError does so itself; an IR error from
 * running the op, a RangeError from allocating, gets ` at file:line:col` appended here).
 */
export function callOp(def: OpDefinition, raw: readonly unknown[]): Tensor | Tensor[] {
  try {
    return runOp(def, raw);
  } catch (e) {
    throw e instanceof Error ? locateHere(e) : e;
  }
}

function runOp(def: OpDefinition, raw: readonly unknown[]): Tensor | Tensor[] {
  const parsed = parseArgs(def.name, def.signature, raw) as Attrs;
  if (def.kind === "decomposition") return def.decompose(parsed);
  const args = def.normalize ? def.normalize(parsed) : parsed;
  const operands: Operand[] = [];
  const attrs: Record<string, unknown> = {};
  for (const p of def.signature) {
    const v = args[p.name];
    switch (p.role) {
      case "none":
        attrs[p.name] = v;
        break;
      case "tensor":
      case "tensorOrScalar":
      case "scalar":
        if (v !== undefined) operands.push(v as Operand);
        break;
      case "tensors":
        if (v !== undefined) operands.push(...(v as Tensor[]));
        break;
      default: {
        const never: never = p.role;
        throw new Error(`unknown operand role ${String(never)}`);
      }
    }
  }
  const out = mode.run(def, operands, attrs);
  if (gradRecorder !== undefined) gradRecorder(def, operands, attrs, out);
  return out;
}

/** What autograd (tensor/autograd.ts) does after each lowered op: records it when it must. */
export type GradRecorder = (
  op: Lowering,
  operands: readonly Operand[],
  attrs: Attrs,
  out: Tensor | Tensor[],
) => void;

let gradRecorder: GradRecorder | undefined;

/** Installs the autograd recorder (done once, by importing tensor/autograd.ts). */
export function setGradRecorder(r: GradRecorder | undefined): void {
  gradRecorder = r;
}

function callable<Ps extends readonly AnyParam[], Out>(def: OpDefinition, signature: Ps) {
  const fn = (...args: unknown[]) => callOp(def, args);
  return Object.assign(fn, {
    opName: def.name,
    signature,
    definition: def,
  }) as unknown as OpFunction<Ps, Out>;
}

/**
 * Defines an op by its lowering. `normalize` (optional) checks and rewrites the parsed
 * arguments before they key the cache (e.g. arange's defaults); `lower` gets IR values for the
 * operands in signature order and the attributes, and returns the result (an array for several).
 */
export function defineOp<
  const Ps extends readonly AnyParam[],
  R extends Instruction | Instruction[],
>(def: {
  name: string;
  signature: Ps;
  normalize?: (args: ArgsOf<Ps>) => ArgsOf<Ps>;
  lower: (b: ComputationBuilder, inputs: Instruction[], attrs: AttrsOf<Ps>) => R;
  vjp?: (
    b: ComputationBuilder,
    inputs: readonly Instruction[],
    outputs: readonly Instruction[],
    cotangents: readonly (Instruction | undefined)[],
    attrs: AttrsOf<Ps>,
    auto: () => (Instruction | undefined)[],
  ) => (Instruction | undefined)[];
}): OpFunction<Ps, R extends Instruction[] ? Tensor[] : Tensor> {
  const lowering: Lowering = {
    kind: "lowering",
    name: def.name,
    signature: def.signature,
    lower: def.lower as unknown as Lowering["lower"],
    ...(def.normalize ? { normalize: def.normalize as unknown as Lowering["normalize"] } : {}),
    ...(def.vjp ? { vjp: def.vjp as unknown as VjpFn } : {}),
  };
  register(lowering);
  return callable(lowering, def.signature);
}

/** Defines an op as a function of other ops. */
export function defineDecomposition<
  const Ps extends readonly AnyParam[],
  R extends Tensor | Tensor[],
>(def: { name: string; signature: Ps; decompose: (args: ArgsOf<Ps>) => R }): OpFunction<Ps, R> {
  const d: Decomposition = {
    kind: "decomposition",
    name: def.name,
    signature: def.signature,
    decompose: def.decompose as unknown as Decomposition["decompose"],
  };
  register(d);
  return callable(d, def.signature);
}

/** Installs `x.name(...)` for each op, forwarding to the functional form with x first. */
export function installMethods(ops: Readonly<Record<string, (...args: never[]) => unknown>>) {
  for (const [name, fn] of Object.entries(ops)) {
    if (Object.prototype.hasOwnProperty.call(Tensor.prototype, name)) {
      throw new Error(`Tensor.${name} is already defined`);
    }
    const f = fn as (...args: unknown[]) => unknown;
    Object.defineProperty(Tensor.prototype, name, {
      value: function (this: Tensor, ...rest: unknown[]) {
        return f(this, ...rest);
      },
      writable: true,
      configurable: true,
    });
  }
}
