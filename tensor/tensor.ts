// The Tensor: a dtype, a shape and a value held through `impl`: concrete data (a typed-array
// Storage), or a pending node of lazy mode (tensor/lazy.ts; tracing will add symbolic ones),
// realized through a registered Realizer when the value is observed (`item()`,
// `toArray()`, `data()`, `toString()`). Tensors are immutable values: ops return new tensors
// and never write into an input's storage, so results may share storage with inputs safely.
// The op methods (`x.add(y)`, `x.sum(1)`) are not declared here: each op module installs its
// own methods and declares them by augmenting this class (see tensor/README.md), so the op
// library grows without touching this file.

import { bf16BitsToNumber, f16BitsToNumber } from "../ir/literal.ts";
import { type DType, isFloatingDType, type Storage, storageCtor } from "./dtype.ts";
import { OpError } from "./errors.ts";
import { formatTensor } from "./format.ts";
import { normalizeDim, numelOf, shapeString } from "./shape.ts";

/** Where a Tensor's value lives. `kind` says which; only "concrete" exists today. */
export interface TensorImpl {
  readonly kind: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** A value held in memory: `storage` in row-major order, typed per dtype (dtype.ts). */
export class ConcreteImpl implements TensorImpl {
  readonly kind = "concrete";
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly storage: Storage;

  /**
   * `trusted`: the eager op cache's results, whose dims (already frozen) and storage come from a
   * verified program, skip the checks; everything else is checked.
   */
  constructor(dtype: DType, shape: readonly number[], storage: Storage, trusted?: true) {
    if (trusted) {
      this.dtype = dtype;
      this.shape = shape;
      this.storage = storage;
      return;
    }
    for (const [i, d] of shape.entries()) {
      if (!Number.isInteger(d) || d < 0) {
        throw new Error(`tensor shape ${shapeString(shape)}: dim ${i} must be an integer >= 0`);
      }
    }
    const ctor = storageCtor(dtype);
    if (!(storage instanceof ctor)) {
      throw new Error(
        `a ${dtype} tensor is stored in a ${ctor.name}, got ${storage.constructor.name}`,
      );
    }
    const n = numelOf(shape);
    if (storage.length !== n) {
      throw new Error(
        `a tensor of shape ${shapeString(shape)} needs ${n} elements, got ${storage.length}`,
      );
    }
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.storage = storage;
  }
}

/** Turns a deferred impl (lazy, symbolic) into a concrete one by running what it stands for. */
export type Realizer = (impl: TensorImpl) => ConcreteImpl;

const realizers = new Map<string, Realizer>();

/** Lazy mode and tracing register how their impls are realized. */
export function registerRealizer(kind: string, realize: Realizer): void {
  if (kind === "concrete") throw new Error(`the concrete impl needs no realizer`);
  realizers.set(kind, realize);
}

/**
 * Called when code observes the value of a tensor that is not concrete yet (`item`, `toArray`,
 * `data`, `toBytes`, `toString`, a coercion to a number, or a direct `realize`), before it is
 * realized: compile() counts these as graph breaks and names the user's source line.
 */
export type ObserveHook = (t: Tensor, how: string) => void;

let observeHook: ObserveHook | undefined;

/** Installs the observe hook (undefined removes it); returns the one it replaces. */
export function setObserveHook(hook: ObserveHook | undefined): ObserveHook | undefined {
  const saved = observeHook;
  observeHook = hook;
  return saved;
}

/** Values as nested arrays; a zero-dim tensor gives its one value. */
export type NestedArray<T> = T | NestedArray<T>[];

export interface ToArrayOptions {
  /** int64 values as bigints (exact); without it they are numbers, an error when unsafe. */
  bigint?: boolean;
}

/** The op that made a tensor, for autograd (tensor/autograd.ts's GradNode). */
export interface GradFn {
  /** `MulBackward`, `MatmulBackward`: the op's name in PyTorch's style. */
  readonly name: string;
}

/** Told of every read and write of a tensor's `.grad` while a compile() trace runs. */
export interface GradHook {
  read(t: Tensor): void;
  write(t: Tensor, g: Tensor | null): void;
}

let gradHook: GradHook | undefined;

/** Sets the `.grad` hook (compile()'s tracer); returns the previous one. */
export function setGradHook(h: GradHook | undefined): GradHook | undefined {
  const saved = gradHook;
  gradHook = h;
  return saved;
}

export class Tensor {
  /** The value (internal to the frontend and the runtime; ops read it, users should not). */
  impl: TensorImpl;
  /** The gradient (see `grad`); read and written without telling a trace. */
  gradRaw: Tensor | null = null;
  /** The recorded op that made this tensor (null for a leaf: made by the user or under noGrad). */
  gradFn: GradFn | null = null;
  /** Which of gradFn's results this tensor is. */
  outputNr = 0;
  private leafRequiresGrad = false;

  constructor(impl: TensorImpl) {
    this.impl = impl;
  }

  /**
   * Whether gradients flow to this tensor: a leaf the user marked, or a result of a recorded op.
   * Only a floating-point leaf can be marked; a non-leaf's flag cannot be changed (detach it).
   */
  get requiresGrad(): boolean {
    return this.leafRequiresGrad || this.gradFn !== null;
  }

  set requiresGrad(on: boolean) {
    if (this.gradFn !== null) {
      if (on) return;
      throw new OpError(
        "requiresGrad",
        `a result of an op (${this.gradFn.name}) cannot stop requiring grad; ` +
          `use detach() for a tensor outside the graph`,
      );
    }
    if (on && !isFloatingDType(this.dtype)) {
      throw new OpError("requiresGrad", `only floating-point tensors can require grad, got ${this.dtype}`);
    }
    this.leafRequiresGrad = on;
  }

  /**
   * The gradient backward() accumulated into this tensor (a leaf, or a retainGrad result). A
   * compile() trace watches reads and writes (compiler/trace.ts: a gradient read becomes a
   * program input, a write a program output).
   */
  get grad(): Tensor | null {
    if (gradHook !== undefined) gradHook.read(this);
    return this.gradRaw;
  }

  set grad(g: Tensor | null) {
    if (gradHook !== undefined) gradHook.write(this, g);
    this.gradRaw = g;
  }

  /** Sets requiresGrad (PyTorch's `requires_grad_()`) and returns this tensor. */
  requiresGrad_(on = true): this {
    this.requiresGrad = on;
    return this;
  }

  /** Whether this tensor is a leaf of the autograd graph (no recorded op made it). */
  get isLeaf(): boolean {
    return this.gradFn === null;
  }

  /** The same value outside the autograd graph (shares the storage; requires no grad). */
  detach(): Tensor {
    return new Tensor(this.impl);
  }

  get dtype(): DType {
    return this.impl.dtype;
  }

  /** The sizes of the dims (a frozen array). */
  get shape(): readonly number[] {
    return this.impl.shape;
  }

  get ndim(): number {
    return this.impl.shape.length;
  }

  /** Same as ndim (PyTorch's `dim()`). */
  dim(): number {
    return this.impl.shape.length;
  }

  /** Number of elements. */
  numel(): number {
    return numelOf(this.impl.shape);
  }

  /** The shape, or the size of one dim (negative dims count from the end). */
  size(): readonly number[];
  size(dim: number): number;
  size(dim?: number): number | readonly number[] {
    if (dim === undefined) return this.shape;
    return this.shape[normalizeDim("size", dim, this.ndim)]!;
  }

  isFloatingPoint(): boolean {
    return isFloatingDType(this.dtype);
  }

  /** The value in memory, running whatever a deferred impl stands for (then keeping it). */
  realize(how = "realize"): ConcreteImpl {
    const impl = this.impl;
    if (impl instanceof ConcreteImpl) return impl;
    observeHook?.(this, how);
    const realizer = realizers.get(impl.kind);
    if (!realizer) throw new Error(`no realizer is registered for '${impl.kind}' tensors`);
    const concrete = realizer(impl);
    this.impl = concrete;
    return concrete;
  }

  /**
   * The one element of a one-element tensor, as a number: bool gives 1 or 0, so the value
   * works in a comparison (`x.amax().item() > 10`) and in arithmetic under strict TypeScript,
   * and as a condition (`if (mask.any().item())`) as PyTorch's does; `toArray()` keeps
   * booleans. An int64 value is a number when it is a safe integer (|v| < 2^53) and an error
   * otherwise, unless `{ bigint: true }` asks for a bigint (always, for int64).
   */
  item(): number;
  item(options: ToArrayOptions): number | bigint;
  item(options: ToArrayOptions = {}): number | bigint {
    const n = this.numel();
    if (n !== 1) {
      throw new OpError("item", `a tensor with ${n} elements cannot be converted to a scalar`);
    }
    const v = this.reader("item", options)(0);
    return typeof v === "boolean" ? Number(v) : v;
  }

  /**
   * Nested arrays of values (a zero-dim tensor gives its value): numbers, booleans for bool;
   * int64 as item() says.
   */
  toArray(): NestedArray<number | boolean>;
  toArray(options: ToArrayOptions): NestedArray<number | boolean | bigint>;
  toArray(options: ToArrayOptions = {}): NestedArray<number | boolean | bigint> {
    const read = this.reader("toArray", options);
    const shape = this.shape;
    if (shape.length === 0) return read(0);
    const build = (
      dim: number,
      offset: number,
      stride: number,
    ): NestedArray<number | boolean | bigint>[] => {
      const size = shape[dim]!;
      const inner = size === 0 ? 0 : stride / size;
      const out: NestedArray<number | boolean | bigint>[] = [];
      for (let i = 0; i < size; i++) {
        out.push(
          dim === shape.length - 1 ? read(offset + i) : build(dim + 1, offset + i * inner, inner),
        );
      }
      return out;
    };
    return build(0, 0, this.numel());
  }

  /**
   * A copy of the values as a typed array: Float32Array for the float dtypes (float16 and
   * bfloat16 decoded to their exact values), Int32Array, BigInt64Array (int64, exact),
   * Uint8Array (uint8, and bool as 0/1).
   */
  data(): Float32Array | Int32Array | BigInt64Array | Uint8Array {
    const { dtype, storage } = this.realize("data");
    if (dtype === "float16" || dtype === "bfloat16") {
      const decode = dtype === "float16" ? f16BitsToNumber : bf16BitsToNumber;
      return Float32Array.from(storage as Uint16Array, decode);
    }
    return copyOf(storage as Float32Array | Int32Array | BigInt64Array | Uint8Array);
  }

  /** The stored bytes, little-endian (float16/bfloat16 as their 16 bits): safetensors' layout. */
  toBytes(): Uint8Array {
    assertLittleEndian();
    const s = this.realize("toBytes").storage;
    return copyOf(new Uint8Array(s.buffer, s.byteOffset, s.byteLength));
  }

  toString(): string {
    const impl = this.realize("toString");
    return formatTensor(impl.dtype, impl.shape, elementReader(impl));
  }

  // util.inspect.custom: a registered symbol, so no import of node:util (the browser build).
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  /**
   * Coercion (`+t`, `t > 0`, `t * 2`, `${t}`): a one-element tensor gives its value as a number
   * (a data-dependent observation, so a graph break under compile()); a string hint, or `+`
   * with a string on a larger tensor, gives the repr. A numeric coercion of a larger tensor is
   * an error rather than a silent NaN.
   */
  [Symbol.toPrimitive](hint: string): number | string {
    if (hint === "string") return this.toString();
    const n = this.numel();
    if (n !== 1 && hint === "default") return this.toString();
    if (n !== 1) {
      throw new OpError(
        "toPrimitive",
        `a tensor with ${n} elements cannot be converted to a number ` +
          `(shape [${this.shape.join(", ")}]); reduce it first or use item()/toArray()`,
      );
    }
    return Number(this.reader("valueOf", {})(0));
  }

  private reader(op: string, options: ToArrayOptions): (i: number) => number | boolean | bigint {
    const impl = this.realize(op);
    const read = elementReader(impl);
    if (impl.dtype !== "int64" || options.bigint) return read;
    return (i) => {
      const v = read(i) as bigint;
      const n = Number(v);
      if (!Number.isSafeInteger(n)) {
        throw new OpError(
          op,
          `int64 value ${v} is not exactly representable as a number; ` +
            `pass { bigint: true } to get bigints`,
        );
      }
      return n;
    };
  }
}

/** Element i as a JS value: number, bigint (int64) or boolean (bool). */
export function elementReader(impl: ConcreteImpl): (i: number) => number | boolean | bigint {
  const s = impl.storage;
  switch (impl.dtype) {
    case "float16":
      return (i) => f16BitsToNumber(s[i] as number);
    case "bfloat16":
      return (i) => bf16BitsToNumber(s[i] as number);
    case "bool":
      return (i) => s[i] !== 0;
    case "float32":
    case "int32":
    case "int64":
    case "uint8":
      return (i) => s[i]!;
    default: {
      const never: never = impl.dtype;
      throw new Error(`unknown dtype ${String(never)}`);
    }
  }
}

/** A tensor over `storage` without copying it (the caller gives up writing to it). */
export function fromStorage(dtype: DType, shape: readonly number[], storage: Storage): Tensor {
  return new Tensor(new ConcreteImpl(dtype, shape, storage));
}

let littleEndian: boolean | undefined;
function assertLittleEndian(): void {
  littleEndian ??= new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  if (!littleEndian) throw new Error("Kiln's byte layout needs a little-endian platform");
}

/** Throws unless this platform is little-endian (typed arrays then match the byte layout). */
export function checkLittleEndian(): void {
  assertLittleEndian();
}

/**
 * A copy of a typed array in an ArrayBuffer of its own. From 64 KiB up the new memory is not
 * cleared first (Buffer.allocUnsafe, its own ArrayBuffer above 4 KiB): the copy overwrites every
 * byte, and clearing a large result before copying it cost as much as the copy.
 */
function copyOf<T extends Float32Array | Int32Array | BigInt64Array | Uint8Array>(a: T): T {
  if (a.byteLength < 64 * 1024 || typeof Buffer === "undefined") return a.slice() as T;
  const b = Buffer.allocUnsafe(a.byteLength);
  if (b.byteOffset !== 0 || b.buffer.byteLength !== a.byteLength) return a.slice() as T;
  const ctor = a.constructor as new (buffer: ArrayBuffer, offset: number, length: number) => T;
  const out = new ctor(b.buffer as ArrayBuffer, 0, a.length);
  (out as unknown as { set(src: T): void }).set(a);
  return out;
}
