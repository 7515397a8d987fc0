// Extent hints: which part of an instruction's result anyone needs. The dynamic padder
// (passes/dynamic_padder.ts) compiles a program for a bucket's top and runs it on padded
// buffers; past the real size, a padded value's elements are don't-care (every use masks them).
// It records that on the instruction, in XLA's free-form `backend_config` string, as
// `{"kiln_extents":[[dim, param, a, c], ...]}`: along `dim` only the first
// `a * size + c` elements are needed, where `size` is the s32[] ENTRY parameter `param` (a
// size parameter of the padded calling convention). A backend may skip computing the rest
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

/** The extent hints of `instr`, or undefined (none, or another backend_config). */
export function extentsOf(instr: Instruction): Extent[] | undefined {
  const text = instr.attrs.backendConfig;
  if (text === undefined || !text.startsWith(`{"${KEY}"`)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const list = (parsed as Record<string, unknown>)[KEY];
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

/** Sets (or, with an empty list, clears) the extent hints of `instr`. */
export function setExtents(instr: Instruction, extents: readonly Extent[]): void {
  const current = instr.attrs.backendConfig;
  if (current !== undefined && extentsOf(instr) === undefined && current !== "") {
    throw new Error(`setExtents: %${instr.name} has another backend_config`);
  }
  if (extents.length === 0) {
    delete instr.attrs.backendConfig;
    return;
  }
  const list = [...extents]
    .sort((x, y) => x.dim - y.dim)
    .map((e) => [e.dim, e.param, e.a, e.c]);
  instr.attrs.backendConfig = JSON.stringify({ [KEY]: list });
}

/**
 * Called when every user of `old` is about to use `value` instead: a `value` nothing uses yet
 * (a rewrite's fresh instruction) will have exactly `old`'s users, so it takes `old`'s hint.
 */
export function inheritExtents(old: Instruction, value: Instruction): void {
  if (value.users.length > 0 || value.attrs.backendConfig !== undefined) return;
  if (extentsOf(old) === undefined) return;
  if (old.shape.kind !== "array" || value.shape.kind !== "array") return;
  if (old.shape.dims.join() !== value.shape.dims.join()) return;
  value.attrs.backendConfig = old.attrs.backendConfig;
}

/**
 * Called when the users of `old` are about to use `value` instead: unless `old` carried the
 * same hint (so those users were promised the same), `value`'s hint no longer holds.
 */
export function dropExtentsIfShared(old: Instruction, value: Instruction): void {
  if (value.attrs.backendConfig === old.attrs.backendConfig) return;
  if (extentsOf(value) !== undefined) delete value.attrs.backendConfig;
}
