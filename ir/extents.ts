// Extent hints: which part of an instruction's result anyone needs. The dynamic padder
// (passes/dynamic_padder.ts) compiles a program for a bucket's top and runs it on padded
// buffers; past the real size, a padded value's elements are don't-care (every use masks them).
// It records that on the instruction, in XLA's free-form `backend_config` string, as
// `{"kiln_extents":[[dim, param, a, c], ...]}`: along `dim` only the first
// `a * size + c` elements are needed, where `size` is the s32[] ENTRY parameter `param` (a
// size parameter of the padded calling convention); and, for a reduce or dot whose padded
// elements the padder made neutral, `"kiln_reduce"` in the same form over the reduced dims of
// its operand (see reduceExtentsOf). A backend may skip computing the rest
// (runtime/js does: loops run to the real size, so a bucket's program costs about what a
// program for the real size costs); computing everything stays correct.
//
// The hint is a promise about the instruction's USERS, so it only survives rewrites that keep
// them: when a pass points users of another instruction at a hinted one (CSE, a simplification
// replacing X by an equal Y), those users were promised nothing, and the hint is dropped
// (`Instruction.setOperand` calls `dropExtentsIfShared`); a fresh instruction that takes over
// all of a hinted one's users takes its hint (`replaceAllUsesWith` calls `inheritExtents`). Being part of the printed text, the
// hint is in the fingerprint, so a program cache never serves a hinted program for an unhinted
// module or the reverse.

import type { Instruction } from "./module.ts";

/** Along `dim`, only the first `a * value(param) + c` elements are needed. */
export interface Extent {
  readonly dim: number;
  /** The ENTRY parameter number of an s32[] scalar. */
  readonly param: number;
  readonly a: number;
  readonly c: number;
}

const KEY = "kiln_extents";
const REDUCE_KEY = "kiln_reduce";

/** The hint object of `instr`'s backend_config, or undefined when it holds something else. */
function hintsOf(instr: Instruction): Record<string, unknown> | undefined {
  const text = instr.attrs.backendConfig;
  if (text === undefined || !text.startsWith(`{"kiln_`)) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function listOf(hints: Record<string, unknown> | undefined, key: string): Extent[] | undefined {
  const list = hints?.[key];
  if (!Array.isArray(list)) return undefined;
  const out: Extent[] = [];
  for (const e of list) {
    if (!Array.isArray(e) || e.length !== 4 || !e.every((v) => Number.isInteger(v))) {
      return undefined;
    }
    const [dim, param, a, c] = e as number[];
    out.push({ dim: dim!, param: param!, a: a!, c: c! });
  }
  return out.length > 0 ? out : undefined;
}

function write(instr: Instruction, key: string, extents: readonly Extent[]): void {
  const current = instr.attrs.backendConfig;
  const hints = hintsOf(instr);
  if (current !== undefined && current !== "" && hints === undefined) {
    throw new Error(`setExtents: %${instr.name} has another backend_config`);
  }
  const next: Record<string, unknown> = { ...(hints ?? {}) };
  if (extents.length === 0) delete next[key];
  else {
    next[key] = [...extents]
      .sort((x, y) => x.dim - y.dim)
      .map((e) => [e.dim, e.param, e.a, e.c]);
  }
  const keys = [KEY, REDUCE_KEY].filter((k) => next[k] !== undefined);
  if (keys.length === 0) delete instr.attrs.backendConfig;
  else instr.attrs.backendConfig = JSON.stringify(Object.fromEntries(keys.map((k) => [k, next[k]])));
}

/** The extent hints of `instr` (dims of its result), or undefined. */
export function extentsOf(instr: Instruction): Extent[] | undefined {
  return listOf(hintsOf(instr), KEY);
}

/** Sets (or, with an empty list, clears) the extent hints of `instr`. */
export function setExtents(instr: Instruction, extents: readonly Extent[]): void {
  write(instr, KEY, extents);
}

/**
 * The reduction hints of a reduce or dot: along reduced (lhs contracting) dim `dim` of its
 * operand(s), only the first `a * size + c` elements can change the result (the rest are the
 * reducer's identity, or zero on both sides of a dot), so a backend may stop there. Unlike
 * extent hints this is a fact about the operands' values, which rewrites preserve.
 */
export function reduceExtentsOf(instr: Instruction): Extent[] | undefined {
  return listOf(hintsOf(instr), REDUCE_KEY);
}

export function setReduceExtents(instr: Instruction, extents: readonly Extent[]): void {
  write(instr, REDUCE_KEY, extents);
}

/**
 * Called when every user of `old` is about to use `value` instead: a `value` nothing uses yet
 * (a rewrite's fresh instruction) will have exactly `old`'s users, so it takes `old`'s extent
 * hint (not its reduction hint: `value` may reduce other dims).
 */
export function inheritExtents(old: Instruction, value: Instruction): void {
  if (value.users.length > 0 || value.attrs.backendConfig !== undefined) return;
  const ext = extentsOf(old);
  if (ext === undefined) return;
  if (old.shape.kind !== "array" || value.shape.kind !== "array") return;
  if (old.shape.dims.join() !== value.shape.dims.join()) return;
  setExtents(value, ext);
}

/**
 * Called when the users of `old` are about to use `value` instead: unless `old` carried the
 * same extent hint (so those users were promised the same), `value`'s no longer holds.
 */
export function dropExtentsIfShared(old: Instruction, value: Instruction): void {
  const v = extentsOf(value);
  if (v === undefined) return;
  if (JSON.stringify(v) === JSON.stringify(extentsOf(old) ?? null)) return;
  setExtents(value, []);
}
