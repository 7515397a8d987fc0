// Random tensors: `rand`, `randn`, `randint` and their `*Like` forms, drawn from a seedable
// Generator (xoshiro128**, seeded through splitmix64). Like PyTorch, the default generator
// starts from a fixed seed, so a program without `manualSeed` is still reproducible, and
// `manualSeed(s)` restarts it. Random tensors are leaves made in JS, not IR programs: their
// values are data, and a traced program receives them as inputs — compile()'s trace (the
// random hook) makes each draw an input that the compiled call draws again from the same
// generator before its program runs, so compiled code consumes the stream exactly as eager
// code does (dropout in a compiled training step gives eager's masks).

import { type AnyParam, type CallForms, p, parseArgs, problem } from "./args.ts";
import {
  allocateStorage,
  type DType,
  encodeValue,
  isFloatingDType,
  type Storage,
} from "./dtype.ts";
import { ArgumentError } from "./errors.ts";
import { numelOf } from "./shape.ts";
import { fromStorage, Tensor } from "./tensor.ts";

/** PyTorch's default CPU seed (c10's default_rng_seed_val). */
export const DEFAULT_SEED = 67280421310721n;

const MASK64 = (1n << 64n) - 1n;

function splitmix64(state: bigint): [bigint, bigint] {
  const s = (state + 0x9e3779b97f4a7c15n) & MASK64;
  let z = s;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return [s, z ^ (z >> 31n)];
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A seedable source of random bits (xoshiro128**). */
export class Generator {
  private readonly s = new Uint32Array(4);
  private seed = DEFAULT_SEED;

  constructor(seed: number | bigint = DEFAULT_SEED) {
    this.manualSeed(seed);
  }

  /** Restarts the sequence from `seed` (an integer; bigints beyond 2^64 keep their low bits). */
  manualSeed(seed: number | bigint): this {
    if (typeof seed === "number" && !Number.isSafeInteger(seed)) {
      throw new ArgumentError("manualSeed", "seed", `must be an integer, got ${seed}`);
    }
    this.seed = BigInt.asUintN(64, BigInt(seed));
    let state = this.seed;
    for (let i = 0; i < 4; i += 2) {
      const [next, z] = splitmix64(state);
      state = next;
      this.s[i] = Number(z & 0xffffffffn);
      this.s[i + 1] = Number(z >> 32n);
    }
    return this;
  }

  /** The seed the sequence last started from. */
  initialSeed(): bigint {
    return this.seed;
  }

  nextUint32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1]!, 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1]! << 9) >>> 0;
    s[2] ^= s[0]!;
    s[3] ^= s[1]!;
    s[1] ^= s[2]!;
    s[0] ^= s[3]!;
    s[2] ^= t;
    s[3] = rotl(s[3]!, 11);
    return result;
  }

  /** Uniform in [0, 1) on a grid of 2^-bits (bits <= 53). */
  uniform(bits = 53): number {
    if (bits <= 32) return (this.nextUint32() >>> (32 - bits)) * 2 ** -bits;
    const hi = this.nextUint32() >>> (64 - bits); // the top bits - 32 of the first word
    const lo = this.nextUint32();
    return (hi * 2 ** 32 + lo) * 2 ** -bits;
  }

  /** Uniform integer in [0, range), range <= 2^53, without modulo bias. */
  below(range: number): number {
    if (range <= 2 ** 32) {
      const limit = Math.floor(2 ** 32 / range) * range;
      for (;;) {
        const x = this.nextUint32();
        if (x < limit) return x % range;
      }
    }
    for (;;) {
      const x = Math.floor(this.uniform(53) * 2 ** 53);
      const limit = Math.floor(2 ** 53 / range) * range;
      if (x < limit) return x % range;
    }
  }

  /** The state words (to save and restore a stream). */
  getState(): Uint32Array {
    return this.s.slice();
  }

  setState(state: Uint32Array): void {
    if (state.length !== 4 || state.every((w) => w === 0)) {
      throw new Error("Generator.setState: expected 4 state words, not all zero");
    }
    this.s.set(state);
  }
}

/** Told of every random tensor drawn while a compile() trace runs (compiler/trace.ts). */
export interface RandomHook {
  /** Draws with `make` (which reads `g`) and returns the tensor the traced code sees. */
  draw(g: Generator, make: () => Tensor): Tensor;
}

let randomHook: RandomHook | undefined;

/** Sets the random hook (compile()'s tracer); returns the previous one. */
export function setRandomHook(h: RandomHook | undefined): RandomHook | undefined {
  const saved = randomHook;
  randomHook = h;
  return saved;
}

function drawn(g: Generator, make: () => Tensor): Tensor {
  return randomHook !== undefined ? randomHook.draw(g, make) : make();
}

/** The generator random ops use unless given one. */
export const defaultGenerator = new Generator();

/** Reseeds the default generator (PyTorch's torch.manual_seed) and returns it. */
export function manualSeed(seed: number | bigint): Generator {
  return defaultGenerator.manualSeed(seed);
}

// ---- Random tensors -------------------------------------------------------------------------

/** Random bits per float value: its significand (so the value is exact in the dtype, and < 1). */
function significandBits(d: DType): number {
  return d === "float16" ? 11 : d === "bfloat16" ? 8 : 24;
}

const sizeParam = p.ints("size", { min: 0 }).varargs();
const generatorParam = p
  .custom<"generator", Generator>("generator", (v) =>
    v instanceof Generator ? v : problem("must be a Generator"),
  )
  .optional();
const floatDType = p
  .custom<"dtype", DType>("dtype", (v) =>
    typeof v === "string" && isFloatingDType(v as DType)
      ? (v as DType)
      : problem("must be a floating dtype (float32, float16, bfloat16)"),
  )
  .default("float32");

function fill(op: string, dtype: DType, shape: readonly number[], draw: () => number): Tensor {
  const n = numelOf(shape);
  const storage: Storage = allocateStorage(dtype, n, op);
  const out = storage as unknown as (number | bigint)[];
  for (let i = 0; i < n; i++) {
    try {
      out[i] = encodeValue(dtype, draw());
    } catch (e) {
      throw new ArgumentError(op, undefined, (e as Error).message);
    }
  }
  return fromStorage(dtype, shape, storage);
}

const randSig = [sizeParam, floatDType, generatorParam] as const;

/** Uniform on [0, 1): `rand(2, 3)`, `rand([2, 3], { dtype: "float16", generator })`. */
export function rand(...args: CallForms<typeof randSig>): Tensor {
  const { size, dtype, generator } = parseArgs("rand", randSig, args);
  const g = generator ?? defaultGenerator;
  const bits = significandBits(dtype);
  return drawn(g, () => fill("rand", dtype, size, () => g.uniform(bits)));
}

const randnSig = randSig;

/** Standard normal (Box-Muller on the generator's uniforms). */
export function randn(...args: CallForms<typeof randnSig>): Tensor {
  const { size, dtype, generator } = parseArgs("randn", randnSig, args);
  const g = generator ?? defaultGenerator;
  return drawn(g, () => {
    let spare: number | undefined;
    return fill("randn", dtype, size, () => {
      if (spare !== undefined) {
        const v = spare;
        spare = undefined;
        return v;
      }
      const u1 = 1 - g.uniform(53); // in (0, 1], so the log is finite
      const u2 = g.uniform(53);
      const r = Math.sqrt(-2 * Math.log(u1));
      spare = r * Math.sin(2 * Math.PI * u2);
      return r * Math.cos(2 * Math.PI * u2);
    });
  });
}

/** The options randint and randintLike take after their numbers. */
export interface IntOpts {
  dtype?: DType;
  generator?: Generator;
}

const randintSig = [
  p.int("low").default(0),
  p.int("high"),
  p.ints("size", { min: 0 }),
  p.dtype("dtype").default("int64"),
  generatorParam,
] as const;

function drawInts(
  op: string,
  low: number,
  high: number,
  size: readonly number[],
  dtype: DType,
  g: Generator,
) {
  if (!(low < high)) {
    throw new ArgumentError(
      op,
      undefined,
      `low must be less than high, got low=${low}, high=${high}`,
    );
  }
  const range = high - low;
  if (range > 2 ** 53)
    throw new ArgumentError(op, undefined, `high - low must be <= 2^53, got ${range}`);
  return drawn(g, () => fill(op, dtype, size, () => low + g.below(range)));
}

/** Integers uniform on [low, high): `randint(10, [3])`, `randint(-5, 5, [2, 2], { dtype })`. */
export function randint(
  ...args: CallForms<typeof randintSig> | [high: number, size: readonly number[], options?: IntOpts]
): Tensor {
  // PyTorch's randint(high, size) leaves out `low`.
  const raw = typeof args[0] === "number" && Array.isArray(args[1]) ? [0, ...args] : args;
  const { low, high, size, dtype, generator } = parseArgs("randint", randintSig, raw);
  return drawInts("randint", low, high, size, dtype, generator ?? defaultGenerator);
}

const likeSig = [
  p.tensor("input"),
  p.dtype("dtype").optional(),
  generatorParam,
] as const satisfies readonly AnyParam[];

/** rand with `input`'s shape (and dtype unless given). */
export function randLike(...args: CallForms<typeof likeSig>): Tensor {
  const { input, dtype, generator } = parseArgs("randLike", likeSig, args);
  return rand([...input.shape], { dtype: dtype ?? input.dtype, generator });
}

/** randn with `input`'s shape (and dtype unless given). */
export function randnLike(...args: CallForms<typeof likeSig>): Tensor {
  const { input, dtype, generator } = parseArgs("randnLike", likeSig, args);
  return randn([...input.shape], { dtype: dtype ?? input.dtype, generator });
}

const randintLikeSig = [
  p.tensor("input"),
  p.int("low").default(0),
  p.int("high"),
  p.dtype("dtype").optional(),
  generatorParam,
] as const;

/** randint with `input`'s shape: `randintLike(x, 10)` or `randintLike(x, low, high)`. */
export function randintLike(
  ...args: CallForms<typeof randintLikeSig> | [input: Tensor, high: number, options?: IntOpts]
): Tensor {
  const raw =
    typeof args[1] === "number" && typeof args[2] !== "number"
      ? [args[0], 0, ...args.slice(1)]
      : args;
  const { input, low, high, dtype, generator } = parseArgs("randintLike", randintLikeSig, raw);
  return drawInts(
    "randintLike",
    low,
    high,
    input.shape,
    dtype ?? input.dtype,
    generator ?? defaultGenerator,
  );
}
