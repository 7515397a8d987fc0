// The argument convention of every frontend op, built once. An op declares its signature as a
// list of parameters in PyTorch's order (`[p.tensor("input"), p.dims("dim").optional(),
// p.bool("keepdim").default(false)]`); callers pass them positionally, or end with ONE options
// object naming the rest in camelCase, so `x.sum(1, true)` and `x.sum({ dim: 1, keepdim: true })`
// are the same call. A list parameter marked `varargs` also takes its elements as separate
// numbers (`x.reshape(2, 3)` or `x.reshape([2, 3])`). Each parameter validates and normalizes
// its value, and every failure is an ArgumentError naming the op and the argument. The types
// follow the declaration: `CallForms<Ps>` is the union of accepted argument lists, `ArgsOf<Ps>`
// the parsed record.

import { type DType, DTYPES, isDType, type Scalar } from "./dtype.ts";
import { ArgumentError } from "./errors.ts";
import { Tensor } from "./tensor.ts";

/**
 * How the dispatcher treats a parameter: `none` is an attribute (part of the op's compiled
 * program and its cache key); the others are runtime operands (IR parameters).
 */
export type OperandRole = "none" | "tensor" | "tensorOrScalar" | "scalar" | "tensors";

/** Thrown by a check to report what is wrong with the value (the parser adds op and name). */
export class ArgProblem extends Error {}

/** `problem("must be ...")`: what a parameter check throws. */
export function problem(detail: string): never {
  throw new ArgProblem(detail);
}

/**
 * One parameter. `In` is what callers pass, `Out` what the op receives after checking and
 * defaults; `Opt` says whether it may be left out; `Var` whether its elements may be passed as
 * separate positional numbers; `Role` how the dispatcher treats it.
 */
export class Param<
  N extends string = string,
  In = unknown,
  Out = unknown,
  Opt extends boolean = boolean,
  Var extends boolean = boolean,
  Role extends OperandRole = OperandRole,
> {
  /** Phantom: the caller-side type (never set). */
  declare readonly _in?: In;

  constructor(
    readonly name: N,
    readonly role: Role,
    readonly isOptional: Opt,
    readonly isVarargs: Var,
    /** Checks and normalizes a given value (never undefined or null); throws ArgProblem. */
    readonly check: (value: unknown) => Out,
    readonly defaultValue: Out | undefined = undefined,
  ) {}

  /** May be left out; the op then sees undefined. */
  optional(): Param<N, In, Out | undefined, true, Var, Role> {
    return new Param<N, In, Out | undefined, true, Var, Role>(
      this.name,
      this.role,
      true,
      this.isVarargs,
      this.check,
      undefined,
    );
  }

  /** For a list: its elements may also come as separate positional numbers (`reshape(2, 3)`). */
  varargs(): Param<N, In, Out, Opt, true, Role> {
    return new Param<N, In, Out, Opt, true, Role>(
      this.name,
      this.role,
      this.isOptional,
      true,
      this.check,
      this.defaultValue,
    );
  }

  /** May be left out; the op then sees `value`. */
  default(value: Out): Param<N, In, Out, true, Var, Role> {
    return new Param<N, In, Out, true, Var, Role>(
      this.name,
      this.role,
      true,
      this.isVarargs,
      this.check,
      value,
    );
  }
}

// Type-level helpers. `unknown` stands for any param type argument (all positions are covariant).
export type AnyParam = Param<string, unknown, unknown, boolean, boolean, OperandRole>;
type InOf<P> = P extends Param<string, infer I, unknown, boolean, boolean, OperandRole> ? I : never;
type OutOf<P> =
  P extends Param<string, unknown, infer O, boolean, boolean, OperandRole> ? O : never;
type IsOpt<P> = P extends { readonly isOptional: true } ? true : false;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type ElemOf<T> = T extends readonly (infer E)[] ? E : never;

/** The options object naming `Ps`: required ones required, optional ones optional. */
export type OptionsOf<Ps extends readonly AnyParam[]> = Simplify<
  { [P in Ps[number] as IsOpt<P> extends true ? never : P["name"]]: InOf<P> } & {
    [P in Ps[number] as IsOpt<P> extends true ? P["name"] : never]?: InOf<P> | null;
  }
>;

type AllOptional<Ps> = Ps extends readonly [infer H, ...infer R]
  ? IsOpt<H> extends true
    ? AllOptional<R>
    : false
  : true;

/** Every accepted argument list: a positional prefix, then optionally one options object. */
export type CallForms<Ps extends readonly AnyParam[]> = Ps extends readonly [
  infer H extends AnyParam,
  ...infer R extends readonly AnyParam[],
]
  ? | [options: OptionsOf<Ps>]
    | (AllOptional<Ps> extends true ? [] : never)
    | (H extends { readonly isVarargs: true }
        ? | [...ElemOf<InOf<H>>[]]
          | (R extends readonly [] ? never : [...ElemOf<InOf<H>>[], OptionsOf<R>])
          | [InOf<H>, ...CallForms<R>]
        : [IsOpt<H> extends true ? InOf<H> | null | undefined : InOf<H>, ...CallForms<R>])
  : [];

/** The parsed arguments: every parameter by name, defaults applied. */
export type ArgsOf<Ps extends readonly AnyParam[]> = Simplify<{
  [P in Ps[number] as P["name"]]: OutOf<P>;
}>;

/** The attribute (non-operand) parameters: what a lowering receives. */
export type AttrsOf<Ps extends readonly AnyParam[]> = Simplify<{
  [P in Ps[number] as P["role"] extends "none" ? P["name"] : never]: OutOf<P>;
}>;

/** The parameters after the first (a method's, where the first is `this`). */
export type Tail<Ps extends readonly AnyParam[]> = Ps extends readonly [
  AnyParam,
  ...infer R extends readonly AnyParam[],
]
  ? R
  : never;

// ---- Parsing --------------------------------------------------------------------------------

/** An options object: a plain `{...}` (not a Tensor, array, typed array or other instance). */
export function isOptionsObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function describe(v: unknown): string {
  if (v instanceof Tensor) return `a ${v.dtype} tensor of shape [${v.shape.join(",")}]`;
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "function") return "a function";
  if (Array.isArray(v)) return `[${v.map(describe).join(", ")}]`;
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  if (isOptionsObject(v)) return `{${Object.keys(v).join(", ")}}`;
  if (typeof v === "object" && v !== null) return `a ${v.constructor.name}`;
  return String(v);
}

function checked<T>(op: string, p: AnyParam, v: unknown): T {
  try {
    return p.check(v) as T;
  } catch (e) {
    if (e instanceof ArgProblem)
      throw new ArgumentError(op, p.name, `${e.message}, got ${describe(v)}`);
    throw e;
  }
}

/**
 * Parses raw call arguments against a signature: a positional prefix (a varargs list taking a
 * run of numbers), then at most one trailing options object naming any parameter not given
 * positionally. undefined and null mean "not given". Missing required parameters, unknown
 * names, duplicates and surplus arguments are ArgumentErrors naming the op.
 */
export function parseArgs<const Ps extends readonly AnyParam[]>(
  op: string,
  params: Ps,
  raw: readonly unknown[],
): ArgsOf<Ps> {
  const out: Record<string, unknown> = {};
  const given = new Set<string>();
  let i = 0;
  for (const p of params) {
    if (i >= raw.length) break;
    const v = raw[i];
    if (i === raw.length - 1 && isOptionsObject(v)) break;
    if (p.isVarargs && (typeof v === "number" || typeof v === "bigint")) {
      const run: unknown[] = [];
      while (i < raw.length && (typeof raw[i] === "number" || typeof raw[i] === "bigint")) {
        run.push(raw[i++]);
      }
      out[p.name] = checked(op, p, run);
      given.add(p.name);
      continue;
    }
    if (v !== undefined && v !== null) {
      out[p.name] = checked(op, p, v);
      given.add(p.name);
    }
    i++;
  }
  if (i < raw.length) {
    const last = raw[i];
    if (i !== raw.length - 1 || !isOptionsObject(last)) {
      throw new ArgumentError(
        op,
        undefined,
        `takes at most ${params.length} argument${params.length === 1 ? "" : "s"} ` +
          `(${params.map((p) => p.name).join(", ")}), got ${raw.length}`,
      );
    }
    for (const [key, v] of Object.entries(last)) {
      const p = params.find((q) => q.name === key);
      if (!p) {
        throw new ArgumentError(
          op,
          undefined,
          `got an unknown argument '${key}' ` +
            `(expected one of ${params.map((q) => q.name).join(", ")})`,
        );
      }
      if (given.has(key)) {
        throw new ArgumentError(op, key, `was given both positionally and in the options object`);
      }
      if (v === undefined || v === null) continue;
      out[key] = checked(op, p, v);
      given.add(key);
    }
  }
  for (const p of params) {
    if (given.has(p.name)) continue;
    if (!p.isOptional) throw new ArgumentError(op, p.name, `is required but was not given`);
    out[p.name] = p.defaultValue;
  }
  return out as ArgsOf<Ps>;
}

// ---- Parameter kinds ------------------------------------------------------------------------

function isScalar(v: unknown): v is Scalar {
  return typeof v === "number" || typeof v === "boolean" || typeof v === "bigint";
}

function intValue(v: unknown, what: string): number {
  if (typeof v === "bigint" && Number.isSafeInteger(Number(v))) return Number(v);
  if (typeof v !== "number" || !Number.isInteger(v)) problem(`must be ${what}`);
  return v;
}

function intList(v: unknown, what: string, min: number): number[] {
  const list = typeof v === "number" || typeof v === "bigint" ? [v] : v;
  if (!Array.isArray(list)) problem(`must be ${what}`);
  return list.map((x: unknown) => {
    const n = intValue(x, what);
    if (n < min) problem(`must be ${what}`);
    return n;
  });
}

function param<N extends string, In, Out, Role extends OperandRole = "none">(
  name: N,
  check: (v: unknown) => Out,
  role?: Role,
): Param<N, In, Out, false, false, Role> {
  return new Param<N, In, Out, false, false, Role>(
    name,
    (role ?? "none") as Role,
    false,
    false,
    check,
  );
}

/** The parameter kinds. Each returns a required parameter; chain .optional() / .default(v). */
export const p = {
  /** A tensor operand. */
  tensor<N extends string>(name: N): Param<N, Tensor, Tensor, false, false, "tensor"> {
    return param<N, Tensor, Tensor, "tensor">(
      name,
      (v): Tensor => (v instanceof Tensor ? v : problem("must be a Tensor")),
      "tensor",
    );
  },

  /** A tensor, or a JS scalar taking part as a zero-dim "wrapped number" (PyTorch's rule). */
  tensorOrScalar<N extends string>(
    name: N,
  ): Param<N, Tensor | Scalar, Tensor | Scalar, false, false, "tensorOrScalar"> {
    return param<N, Tensor | Scalar, Tensor | Scalar, "tensorOrScalar">(
      name,
      (v): Tensor | Scalar =>
        v instanceof Tensor || isScalar(v) ? v : problem("must be a Tensor or a scalar"),
      "tensorOrScalar",
    );
  },

  /** A scalar passed to the program at run time (so its value does not key the cache). */
  scalarOperand<N extends string>(name: N): Param<N, Scalar, Scalar, false, false, "scalar"> {
    return param<N, Scalar, Scalar, "scalar">(
      name,
      (v) => (isScalar(v) ? v : problem("must be a number, boolean or bigint")),
      "scalar",
    );
  },

  /** A list of tensor operands (`cat`, `stack`). */
  tensors<N extends string>(
    name: N,
  ): Param<N, readonly Tensor[], Tensor[], false, false, "tensors"> {
    return param<N, readonly Tensor[], Tensor[], "tensors">(
      name,
      (v): Tensor[] => {
        if (!Array.isArray(v) || !v.every((t) => t instanceof Tensor)) {
          problem("must be a list of Tensors");
        }
        return [...(v as Tensor[])];
      },
      "tensors",
    );
  },

  /** An integer attribute. */
  int<N extends string>(name: N, opts: { min?: number } = {}) {
    const min = opts.min ?? -Infinity;
    const what = min > -Infinity ? `an integer >= ${min}` : "an integer";
    return param<N, number, number>(name, (v) => {
      const n = intValue(v, what);
      if (n < min) problem(`must be ${what}`);
      return n;
    });
  },

  /** A list of integers; `.varargs()` lets callers spread it (`reshape(2, 3)`). */
  ints<N extends string>(name: N, opts: { min?: number } = {}) {
    const min = opts.min ?? -Infinity;
    const what = min > -Infinity ? `a list of integers >= ${min}` : "a list of integers";
    return param<N, readonly number[], number[]>(name, (v) => intList(v, what, min));
  },

  /** A dim or several: `1` or `[0, 2]`, normalized to a list. */
  dims<N extends string>(name: N) {
    return param<N, number | readonly number[], number[]>(name, (v) =>
      intList(v, "an integer or a list of integers", -Infinity),
    );
  },

  bool<N extends string>(name: N) {
    return param<N, boolean, boolean>(name, (v) =>
      typeof v === "boolean" ? v : problem("must be true or false"),
    );
  },

  /** A finite or infinite JS number (an attribute). */
  number<N extends string>(name: N) {
    return param<N, number, number>(name, (v) =>
      typeof v === "number" && !Number.isNaN(v) ? v : problem("must be a number"),
    );
  },

  /** A number, boolean or bigint attribute (PyTorch's Scalar, e.g. `alpha`). */
  scalar<N extends string>(name: N) {
    return param<N, Scalar, Scalar>(name, (v) =>
      isScalar(v) ? v : problem("must be a number, boolean or bigint"),
    );
  },

  dtype<N extends string>(name: N) {
    return param<N, DType, DType>(name, (v) =>
      isDType(v) ? v : problem(`must be one of ${DTYPES.join(", ")}`),
    );
  },

  /** One of a fixed set of strings. */
  oneOf<N extends string, const V extends string>(name: N, values: readonly V[]) {
    return param<N, V, V>(name, (v) =>
      typeof v === "string" && (values as readonly string[]).includes(v)
        ? (v as V)
        : problem(`must be one of ${values.map((x) => `'${x}'`).join(", ")}`),
    );
  },

  /** Anything else: `check` validates and normalizes, calling problem() on bad values. */
  custom<N extends string, In, Out = In>(name: N, check: (v: unknown) => Out) {
    return param<N, In, Out>(name, check);
  },
};
