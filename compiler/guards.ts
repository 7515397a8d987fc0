// Guards: the conditions under which a compiled program may stand in for the user's code.
// They are DATA (`{ kind, path, expected }`, what explain() prints and tests inspect), recorded
// while tracing, plus how to read the guarded value (an argument leaf, a property of an object
// the trace saw, a free variable, a Kiln setting). A cache entry compiles its guards into ONE
// JavaScript function (new Function) that returns the index of the first failing guard or -1:
// objects are bound as constants, so a check is property loads and strict comparisons, with no
// path walking and no allocation. Only on a miss does the slow path read the failing value again
// and put the reason in words: `x.shape[1] was 128, now 129`, `this.training was false, now
// true`. A guard that throws (a getter, a vanished object) counts as failing, with the error as
// its reason, so a half-checked entry is never run.

import { type DType } from "../tensor/dtype.ts";
import { Tensor } from "../tensor/tensor.ts";

export type GuardKind = "dtype" | "shape" | "value" | "identity" | "range" | "equal";

/**
 * One guard as data. `expected` is a dtype, a shape, a primitive, an object, [lo, hi], or (for
 * "equal": two dynamic dims that one program treats as one size) the other dim's path.
 */
export interface Guard {
  readonly kind: GuardKind;
  /** What is guarded, as the user would write it (`x.shape`, `this.training`, `scale`). */
  readonly path: string;
  readonly expected: unknown;
}

/** Where a guarded value is read from at call time. */
export type Access =
  /** A leaf of the call's arguments: args[index] then keys. */
  | { readonly root: "arg"; readonly keys: readonly (string | number)[] }
  /** An object seen while tracing (bound by identity), or one of its properties. */
  | { readonly root: "ref"; readonly ref: object; readonly key?: string | number }
  /** A free variable's current value (read per call, see compiler/freevars.ts). */
  | { readonly root: "free"; readonly index: number }
  /** A Kiln setting's current value (see settingsNow in compiler/compile.ts). */
  | { readonly root: "setting"; readonly index: number }
  /** What `Object.keys` gives for an object (joined with ","), or the arguments' count. */
  | { readonly root: "keys"; readonly of: Access }
  | { readonly root: "argCount" };

/**
 * How a value is tested, beyond `kind`: "tensor-dtype"/"tensor-shape" read a Tensor's dtype or
 * shape (failing when the value is not a Tensor); "array"/"object" check a container's kind and
 * length or keys (structure of argument objects).
 */
export type GuardTest = "plain" | "tensor" | "array" | "object";

export interface GuardSpec {
  readonly guard: Guard;
  readonly access: Access;
  readonly test: GuardTest;
  /**
   * For dtype and shape guards on a module's tensors: the tensor's value (impl) when traced.
   * While it is still the same object the guard holds at the cost of one comparison; a new
   * value (loadStateDict, to()) is checked by dtype and shape.
   */
  readonly impl?: object;
  /** For "equal" guards: where the value it must equal is read. */
  readonly other?: Access;
}

/** Inputs a guard function reads at call time. */
export interface GuardInputs {
  readonly args: readonly unknown[];
  readonly free: readonly unknown[];
  readonly settings: readonly unknown[];
}

export type GuardFunction = (
  args: readonly unknown[],
  free: readonly unknown[],
  settings: readonly unknown[],
) => number;

const SAFE_KEY = /^[A-Za-z_$][\w$]*$/;

function keyExpr(k: string | number): string {
  if (typeof k === "number") return `[${k}]`;
  return SAFE_KEY.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
}

function literalExpr(v: unknown): string | undefined {
  switch (typeof v) {
    case "number":
      if (Number.isNaN(v)) return undefined;
      return Object.is(v, -0) ? "-0" : String(v);
    case "string":
      return JSON.stringify(v);
    case "boolean":
      return v ? "true" : "false";
    case "bigint":
      return `${v}n`;
    case "undefined":
      return "undefined";
    default:
      return v === null ? "null" : undefined;
  }
}

/**
 * Compiles guard specs into one function. `refs` collects bound objects and expected values
 * that have no literal form; the function closes over them.
 */
export function compileGuards(specs: readonly GuardSpec[]): GuardFunction {
  const consts: unknown[] = [];
  const constIndex = new Map<unknown, number>();
  const bind = (v: unknown): string => {
    let i = constIndex.get(v);
    if (i === undefined) {
      i = consts.length;
      consts.push(v);
      constIndex.set(v, i);
    }
    return `K[${i}]`;
  };
  const access = (a: Access): string => {
    switch (a.root) {
      case "arg":
        return `args${a.keys.map(keyExpr).join("")}`;
      case "ref":
        return a.key === undefined ? bind(a.ref) : `${bind(a.ref)}${keyExpr(a.key)}`;
      case "free":
        return `free[${a.index}]`;
      case "setting":
        return `settings[${a.index}]`;
      case "keys":
        return `Object.keys(${access(a.of)}).join(",")`;
      case "argCount":
        return "args.length";
      default: {
        const never: never = a;
        throw new Error(`unknown guard access ${String(never)}`);
      }
    }
  };
  const lines: string[] = [];
  let previous = "";
  for (const [i, s] of specs.entries()) {
    // Consecutive guards on one value (identity, dtype, shape of a weight) load it once.
    const a = access(s.access);
    lines.push(a === previous ? `g = ${i};` : `g = ${i}; v = ${a};`);
    previous = a;
    const other = s.other !== undefined ? access(s.other) : "undefined";
    lines.push(`if (!(${condition(s, bind, other)})) return ${i};`);
  }
  const body =
    `return function guards(args, free, settings) {\n` +
    `  let g = 0, v, s;\n` +
    `  try {\n    ${lines.join("\n    ")}\n  } catch (e) {\n    return g;\n  }\n` +
    `  return -1;\n};`;
  const make = new Function("K", "T", body) as (
    K: readonly unknown[],
    T: typeof Tensor,
  ) => GuardFunction;
  return make(consts, Tensor);
}

function condition(s: GuardSpec, bind: (v: unknown) => string, other: string): string {
  const full = fullCondition(s, bind, other);
  if (s.impl === undefined) return full;
  return `(v != null && v.impl === ${bind(s.impl)}) || (${full})`;
}

function fullCondition(s: GuardSpec, bind: (v: unknown) => string, other: string): string {
  const { kind, expected } = s.guard;
  switch (kind) {
    case "dtype":
      return `v instanceof T && v.impl.dtype === ${JSON.stringify(expected as DType)}`;
    case "shape": {
      // A null dim is dynamic: a range guard right after checks it.
      const dims = expected as readonly (number | null)[];
      const parts = [`v instanceof T`, `(s = v.impl.shape).length === ${dims.length}`];
      for (const [i, d] of dims.entries()) if (d !== null) parts.push(`s[${i}] === ${d}`);
      return parts.join(" && ");
    }
    case "value": {
      if (s.test === "array") {
        return `Array.isArray(v) && v.length === ${expected as number}`;
      }
      if (s.test === "object") {
        return (
          `v !== null && typeof v === "object" && !Array.isArray(v) && ` +
          `(Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)`
        );
      }
      if (typeof expected === "number" && Number.isNaN(expected)) return `Number.isNaN(v)`;
      const lit = literalExpr(expected);
      return lit !== undefined ? `v === ${lit}` : `v === ${bind(expected)}`;
    }
    case "identity":
      return `v === ${bind(expected)}`;
    case "range": {
      const [lo, hi] = expected as readonly [number, number];
      return `typeof v === "number" && v >= ${lo} && v <= ${hi}`;
    }
    case "equal":
      return `v === ${other}`;
    default: {
      const never: never = kind;
      throw new Error(`unknown guard kind ${String(never)}`);
    }
  }
}

/** Reads the value a guard looks at, now (the slow path, for reasons). */
export function readGuarded(a: Access, inputs: GuardInputs): unknown {
  switch (a.root) {
    case "arg": {
      let v: unknown = inputs.args;
      for (const k of a.keys) v = (v as Record<string | number, unknown>)[k];
      return v;
    }
    case "ref":
      return a.key === undefined ? a.ref : (a.ref as Record<string | number, unknown>)[a.key];
    case "free":
      return inputs.free[a.index];
    case "setting":
      return inputs.settings[a.index];
    case "keys": {
      const o = readGuarded(a.of, inputs);
      return Object.keys(o as object).join(",");
    }
    case "argCount":
      return inputs.args.length;
    default: {
      const never: never = a;
      throw new Error(`unknown guard access ${String(never)}`);
    }
  }
}

/** A value in a reason: primitives as literals, tensors and objects by kind. */
export function describeValue(v: unknown): string {
  if (v instanceof Tensor) return `a ${v.dtype} tensor of shape [${v.shape.join(", ")}]`;
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "bigint") return `${v}n`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (typeof v === "function") return `function ${v.name || "(anonymous)"}`;
  if (typeof v === "object" && v !== null) {
    const name = (v as { constructor?: { name?: string } }).constructor?.name;
    return name && name !== "Object" ? `a ${name}` : "an object";
  }
  return String(v);
}

/** A guard as one line (`x.shape == [2, 16]`, `this.training === false`). */
export function describeGuard(g: Guard): string {
  switch (g.kind) {
    case "dtype":
      return `${g.path}.dtype == ${String(g.expected)}`;
    case "shape":
      return `${g.path}.shape == [${(g.expected as (number | null)[])
        .map((d) => (d === null ? "*" : String(d))).join(", ")}]`;
    case "value":
      return `${g.path} === ${describeValue(g.expected)}`;
    case "identity":
      return `${g.path} is ${describeValue(g.expected)} (same object)`;
    case "range": {
      const [lo, hi] = g.expected as [number, number];
      return `${lo} <= ${g.path} <= ${hi}`;
    }
    case "equal":
      return `${g.path} == ${String(g.expected)}`;
    default: {
      const never: never = g.kind;
      throw new Error(`unknown guard kind ${String(never)}`);
    }
  }
}

/** Why guard `s` fails now, in words (`x.shape[1] was 128, now 129`). */
export function failureReason(s: GuardSpec, inputs: GuardInputs): string {
  const { kind, path, expected } = s.guard;
  let v: unknown;
  try {
    v = readGuarded(s.access, inputs);
  } catch (e) {
    return `${path} could not be read: ${e instanceof Error ? e.message : String(e)}`;
  }
  switch (kind) {
    case "dtype":
      if (!(v instanceof Tensor)) return `${path} was a tensor, now ${describeValue(v)}`;
      return `${path}.dtype was ${String(expected)}, now ${v.dtype}`;
    case "shape": {
      if (!(v instanceof Tensor)) return `${path} was a tensor, now ${describeValue(v)}`;
      const dims = expected as readonly (number | null)[];
      if (v.shape.length !== dims.length) {
        return `${path}.ndim was ${dims.length}, now ${v.shape.length} (shape [${dims.join(
          ", ",
        )}], now [${v.shape.join(", ")}])`;
      }
      const i = dims.findIndex((d, k) => d !== null && v.shape[k] !== d);
      return `${path}.shape[${i}] was ${dims[i]}, now ${v.shape[i]}`;
    }
    case "value":
      if (s.test === "array") {
        if (!Array.isArray(v)) return `${path} was an array, now ${describeValue(v)}`;
        return `${path}.length was ${String(expected)}, now ${v.length}`;
      }
      if (s.test === "object") return `${path} was a plain object, now ${describeValue(v)}`;
      return `${path} was ${describeValue(expected)}, now ${describeValue(v)}`;
    case "identity":
      return v === undefined
        ? `${path} was ${describeValue(expected)}, now undefined`
        : `${path} is a different object (was ${describeValue(expected)}, now ` +
            `${describeValue(v)})`;
    case "range": {
      const [lo, hi] = expected as readonly [number, number];
      return `${path} was in [${lo}, ${hi}], now ${describeValue(v)}`;
    }
    case "equal": {
      let o: unknown;
      try {
        o = s.other !== undefined ? readGuarded(s.other, inputs) : undefined;
      } catch {
        o = undefined;
      }
      return `${path} was equal to ${String(expected)}, now ${describeValue(v)} vs ${
        describeValue(o)}`;
    }
    default: {
      const never: never = kind;
      throw new Error(`unknown guard kind ${String(never)}`);
    }
  }
}

/**
 * A compiled guard set: the specs, the function, and `check`, which returns undefined when all
 * pass or the first failure (its index, guard and reason). A guard function that itself throws
 * (it should not: it catches) is reported as failing at guard 0.
 */
export class GuardSet {
  readonly specs: readonly GuardSpec[];
  readonly fn: GuardFunction;

  constructor(specs: readonly GuardSpec[]) {
    this.specs = specs;
    this.fn = compileGuards(specs);
  }

  get guards(): Guard[] {
    return this.specs.map((s) => s.guard);
  }

  /** Index of the first failing guard, or -1. */
  first(inputs: GuardInputs): number {
    return this.fn(inputs.args, inputs.free, inputs.settings);
  }

  /** The first failure in words, or undefined when every guard holds. */
  failure(inputs: GuardInputs): { index: number; guard: Guard; reason: string } | undefined {
    const i = this.first(inputs);
    if (i < 0) return undefined;
    const s = this.specs[i]!;
    return { index: i, guard: s.guard, reason: failureReason(s, inputs) };
  }
}
