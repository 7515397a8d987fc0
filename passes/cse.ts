// Common subexpression elimination (`cse`): hash-consing on a canonical key. Two instructions
// of one computation with the same opcode, shape (with layout), operands, attributes (literals
// compared bit for bit) and called computations compute the same value, so later ones are
// replaced by the first. Operands of add, multiply, and, or and xor are keyed in a canonical
// order (they commute exactly; maximum/minimum do not: max(-0, +0) is the lhs). Parameters and
// anything with effects (custom-calls, callers of computations that contain one) are never
// merged. Identical computations (not the entry, not fusion bodies) are merged too, callers
// pointed at the first one.

import { sha256Hex } from "../util/hash.ts";
import type { Attributes } from "../ir/attributes.ts";
import type { Literal } from "../ir/literal.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import type { Opcode } from "../ir/opcodes.ts";
import { computationPrintOrder } from "../ir/print.ts";
import { shapeToString } from "../ir/shape.ts";
import type { Pass } from "./pass.ts";
import { hasEffects, pinRoots, removeDeadTree } from "./simplify_support.ts";

export interface CSEOptions {
  /** Merge identical computations (default true). */
  dedupeComputations?: boolean;
}

/** Opcodes whose two operands commute bit for bit under the evaluator's semantics. */
const COMMUTATIVE: ReadonlySet<Opcode> = new Set<Opcode>(["add", "multiply", "and", "or", "xor"]);

/** Bytes of a literal's storage (the exact bits: -0, NaN payloads and all). */
function literalBytes(lit: Literal): Uint8Array {
  return new Uint8Array(lit.data.buffer, lit.data.byteOffset, lit.data.byteLength);
}

function literalKey(lit: Literal): string {
  const bytes = literalBytes(lit);
  const body =
    bytes.length <= 64
      ? Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
      : sha256Hex(bytes);
  return `${lit.type}[${lit.dims.join(",")}]:${body}`;
}

function sameBytes(a: Literal, b: Literal): boolean {
  const x = literalBytes(a);
  const y = literalBytes(b);
  return x.length === y.length && x.every((v, k) => v === y[k]);
}

/** JSON with object keys sorted, so attribute records built in any order key the same. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

function attributesKey(a: Attributes): string {
  const { literal, ...rest } = a;
  return canonicalJson(rest) + (literal ? `|${literalKey(literal)}` : "");
}

/**
 * The canonical key of `i`: everything that determines its value, with operands named by
 * `operandName` and callees by their names.
 */
function instructionKey(i: Instruction, operandName: (o: Instruction) => string): string {
  const ops = i.operands.map(operandName);
  if (COMMUTATIVE.has(i.opcode)) ops.sort();
  return [
    i.opcode,
    shapeToString(i.shape, true),
    ops.join(","),
    attributesKey(i.attrs),
    i.called.map((c) => c.name).join(","),
  ].join(" ");
}

export class CSE implements Pass {
  readonly name = "cse";
  private readonly dedupe: boolean;

  constructor(options: CSEOptions = {}) {
    this.dedupe = options.dedupeComputations ?? true;
  }

  run(module: Module): boolean {
    pinRoots(module);
    let changed = this.dedupe ? dedupeComputations(module) : false;
    const effects = new Map<Computation, boolean>();
    for (const c of module.computations) {
      if (cseComputation(c, effects)) changed = true;
    }
    return changed;
  }
}

function cseComputation(c: Computation, effects: Map<Computation, boolean>): boolean {
  const seen = new Map<string, Instruction>();
  const removed = new Set<Instruction>();
  let changed = false;
  for (const i of [...c.instructions]) {
    if (removed.has(i) || i.opcode === "parameter" || hasEffects(i, effects)) continue;
    const key = instructionKey(i, (o) => String(o.id));
    const first = seen.get(key);
    if (first === undefined) {
      seen.set(key, i);
      continue;
    }
    const a = first.attrs.literal;
    const b = i.attrs.literal;
    if (a && b && !sameBytes(a, b)) continue; // a hash collision: keep both
    i.replaceAllUsesWith(first);
    removeDeadTree(i, removed);
    changed = true;
  }
  return changed;
}

/** The structure of a computation, names left out (a parameter is known by its number). */
function computationKey(c: Computation): string {
  const index = new Map<Instruction, number>();
  c.instructions.forEach((i, k) => index.set(i, k));
  const lines = c.instructions.map((i) => instructionKey(i, (o) => `#${index.get(o)}`));
  lines.push(`ROOT #${index.get(c.root)}`);
  return lines.join("\n");
}

/**
 * Points callers of a computation identical to an earlier one at the earlier one, and deletes
 * the copies. Callees are visited first, so merging them can make their callers identical.
 * Fusion bodies are left alone: fusion passes edit a body in place for its one fusion.
 */
function dedupeComputations(module: Module): boolean {
  const entry = module.entryOrUndefined;
  const fusionBodies = new Set<Computation>();
  for (const i of module.allInstructions()) {
    if (i.opcode === "fusion") for (const c of i.called) fusionBodies.add(c);
  }
  const canonical = new Map<string, Computation>();
  const replaced = new Map<Computation, Computation>();
  for (const c of computationPrintOrder(module)) {
    if (c === entry || c.instructions.length === 0 || fusionBodies.has(c)) continue;
    for (const i of c.instructions) i.called = i.called.map((k) => replaced.get(k) ?? k);
    const key = computationKey(c);
    const first = canonical.get(key);
    if (first === undefined) canonical.set(key, c);
    else replaced.set(c, first);
  }
  if (replaced.size === 0) return false;
  for (const i of module.allInstructions()) {
    i.called = i.called.map((k) => replaced.get(k) ?? k);
  }
  for (const dup of replaced.keys()) module.removeComputation(dup);
  return true;
}
