// Pytrees: how compile() sees the arguments and results of a user function. A value is
// flattened into a TREE SPEC (the structure: arrays, plain objects with their keys in order,
// and the kind of every leaf) and a list of LEAVES (tensors, primitives, and opaque objects such
// as class instances or functions, kept by identity), as JAX and torch.utils._pytree do;
// `unflatten` rebuilds a value of the same structure from new leaves. The spec is what guards
// check structurally, and the leaf paths (`x`, `opts.mask`, `args[2][0]`) are the words guard
// failures and explain() use.

import { Tensor } from "../tensor/tensor.ts";

export type LeafKind =
  | "tensor"
  | "number"
  | "string"
  | "boolean"
  | "bigint"
  | "undefined"
  | "null"
  | "symbol"
  | "opaque";

/** The structure of a flattened value. */
export type TreeSpec =
  | { readonly type: "leaf"; readonly kind: LeafKind }
  | { readonly type: "array"; readonly items: readonly TreeSpec[] }
  | {
      readonly type: "object";
      readonly keys: readonly string[];
      readonly items: readonly TreeSpec[];
    };

/** A leaf with where it was found: `path` is the list of keys from the root. */
export interface Leaf {
  readonly path: readonly (string | number)[];
  readonly value: unknown;
  readonly kind: LeafKind;
}

/** Nesting past this depth is an error (a cycle, or data no model passes). */
const MAX_DEPTH = 64;

export function leafKind(v: unknown): LeafKind {
  if (v instanceof Tensor) return "tensor";
  if (v === null) return "null";
  switch (typeof v) {
    case "number":
      return "number";
    case "string":
      return "string";
    case "boolean":
      return "boolean";
    case "bigint":
      return "bigint";
    case "undefined":
      return "undefined";
    case "symbol":
      return "symbol";
    case "object":
    case "function":
      return "opaque";
    default: {
      const never: never = typeof v as never;
      throw new Error(`unknown value type ${String(never)}`);
    }
  }
}

/** True for the containers a pytree looks inside: arrays and plain objects. */
export function isContainer(v: unknown): v is unknown[] | Record<string, unknown> {
  if (Array.isArray(v)) return true;
  if (typeof v !== "object" || v === null || v instanceof Tensor) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Flattens `value` into its spec and leaves (depth-first, keys in insertion order). */
export function flatten(value: unknown): { spec: TreeSpec; leaves: Leaf[] } {
  const leaves: Leaf[] = [];
  const active = new Set<object>();
  const walk = (v: unknown, path: (string | number)[]): TreeSpec => {
    if (!isContainer(v)) {
      const kind = leafKind(v);
      leaves.push({ path, value: v, kind });
      return { type: "leaf", kind };
    }
    if (active.has(v) || path.length > MAX_DEPTH) {
      throw new TypeError(
        `compile: the value at ${formatPath("args", path)} contains itself ` +
          `(a cycle); arguments and results must be trees`,
      );
    }
    active.add(v);
    try {
      if (Array.isArray(v)) {
        return { type: "array", items: v.map((x, i) => walk(x, [...path, i])) };
      }
      const keys = Object.keys(v);
      return { type: "object", keys, items: keys.map((k) => walk(v[k], [...path, k])) };
    } finally {
      active.delete(v);
    }
  };
  const spec = walk(value, []);
  return { spec, leaves };
}

/** Rebuilds a value of `spec`'s structure from `leaves` (in flatten's order). */
export function unflatten(spec: TreeSpec, leaves: readonly unknown[]): unknown {
  let next = 0;
  const build = (s: TreeSpec): unknown => {
    switch (s.type) {
      case "leaf":
        if (next >= leaves.length) throw new Error("unflatten: too few leaves for the spec");
        return leaves[next++];
      case "array":
        return s.items.map(build);
      case "object": {
        const out: Record<string, unknown> = {};
        for (const [i, k] of s.keys.entries()) out[k] = build(s.items[i]!);
        return out;
      }
      default: {
        const never: never = s;
        throw new Error(`unknown tree spec ${String(never)}`);
      }
    }
  };
  const out = build(spec);
  if (next !== leaves.length) {
    throw new Error(`unflatten: ${leaves.length} leaves for a spec of ${next}`);
  }
  return out;
}

/** Number of leaves of a spec. */
export function leafCount(spec: TreeSpec): number {
  if (spec.type === "leaf") return 1;
  let n = 0;
  for (const s of spec.items) n += leafCount(s);
  return n;
}

const IDENT = /^[A-Za-z_$][\w$]*$/;

/**
 * A path as JS-like text: `formatPath("opts", ["mask", 0])` is `opts.mask[0]`. Numeric keys
 * print as indices; keys that are not identifiers are quoted.
 */
export function formatPath(root: string, path: readonly (string | number)[]): string {
  let s = root;
  for (const k of path) {
    if (typeof k === "number") s += `[${k}]`;
    else if (IDENT.test(k)) s += `.${k}`;
    else s += `[${JSON.stringify(k)}]`;
  }
  return s;
}

/** Whether two key paths are the same path. */
export function sameKeys(
  a: readonly (string | number)[],
  b: readonly (string | number)[],
): boolean {
  return a.length === b.length && a.every((k, i) => k === b[i]);
}

/** The value at key path `keys` below `root` (an argument list, most often). */
export function readKeys(root: unknown, keys: readonly (string | number)[]): unknown {
  let v: unknown = root;
  for (const k of keys) v = (v as Record<string | number, unknown>)[k];
  return v;
}

/** A one-line description of a spec for messages (`{x: tensor, n: number}`). */
export function describeSpec(spec: TreeSpec): string {
  switch (spec.type) {
    case "leaf":
      return spec.kind;
    case "array":
      return `[${spec.items.map(describeSpec).join(", ")}]`;
    case "object":
      return `{${spec.keys.map((k, i) => `${k}: ${describeSpec(spec.items[i]!)}`).join(", ")}}`;
    default: {
      const never: never = spec;
      throw new Error(`unknown tree spec ${String(never)}`);
    }
  }
}
