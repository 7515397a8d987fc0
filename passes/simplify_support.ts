// Graph plumbing shared by the simplification passes (algebraic simplifier, constant folding,
// CSE, DCE): pinning ROOTs before a pass appends instructions, deleting what a rewrite left
// unused, restoring topological order after new instructions were appended at the end, telling
// which instructions may have effects besides their value, and reading splat constants (a
// constant, or a broadcast of one, whose elements all hold one value).

import type { Computation, Instruction, Module } from "../ir/module.ts";
import { instructionPrintOrder } from "../ir/print.ts";
import { type ArrayShape, isFloatType, type Shape } from "../ir/shape.ts";

/**
 * Makes every computation's ROOT explicit. Without an explicit ROOT the last instruction is the
 * ROOT, so a pass that appends an instruction would silently change what a computation returns.
 */
export function pinRoots(module: Module): void {
  for (const c of module.computations) {
    if (!c.hasExplicitRoot && c.instructions.length > 0) c.root = c.root;
  }
}

/**
 * True for instructions that may do something besides computing their value. Kiln's IR has no
 * side-effect flag, so every custom-call is treated as effectful: never deleted, merged or folded.
 */
export function isEffectful(i: Instruction): boolean {
  return i.opcode === "custom-call";
}

/**
 * True when `c` or anything it calls (transitively) holds an instruction passing `test`; `memo`
 * caches the answer per computation for one `test`.
 */
export function containsWhere(
  c: Computation,
  test: (i: Instruction) => boolean,
  memo: Map<Computation, boolean> = new Map(),
): boolean {
  const known = memo.get(c);
  if (known !== undefined) return known;
  memo.set(c, false); // the verifier rejects call cycles; this only stops a malformed walk
  let result = false;
  for (const i of c.instructions) {
    if (test(i) || i.called.some((k) => containsWhere(k, test, memo))) {
      result = true;
      break;
    }
  }
  memo.set(c, result);
  return result;
}

/** True when `i` is effectful or calls (transitively) a computation that holds one. */
export function hasEffects(i: Instruction, memo?: Map<Computation, boolean>): boolean {
  return isEffectful(i) || i.called.some((c) => containsWhere(c, isEffectful, memo));
}

/**
 * Deletes `start` if nothing uses it, then every operand that becomes unused in turn.
 * Parameters, ROOTs and effectful instructions stay. Returns how many were deleted.
 */
export function removeDeadTree(start: Instruction, removed: Set<Instruction> = new Set()): number {
  let n = 0;
  const stack = [start];
  while (stack.length > 0) {
    const i = stack.pop()!;
    if (removed.has(i) || i.users.length > 0 || i.isRoot) continue;
    if (i.opcode === "parameter" || hasEffects(i)) continue;
    const operands = [...new Set(i.operands)];
    i.parent.removeInstruction(i);
    removed.add(i);
    n++;
    stack.push(...operands);
  }
  return n;
}

/** Re-sorts `c` topologically (stable) after instructions were appended out of order. */
export function restoreOrder(c: Computation): void {
  const order = instructionPrintOrder(c);
  if (order !== c.instructions) c.setOrder(order);
}

// ---- splat constants -----------------------------------------------------------------------

export function arrayShapeOf(s: Shape): ArrayShape | undefined {
  return s.kind === "array" ? s : undefined;
}

export function isStatic(s: Shape): boolean {
  return s.kind === "array" && !s.dynamic.some((d) => d);
}

/**
 * The one stored value every element of `i` holds, when `i` is a non-empty constant whose
 * elements are all identical (bitwise: -0 and +0 differ) or a broadcast or reshape of one.
 */
export function splatValue(i: Instruction): number | bigint | undefined {
  let cur = i;
  while (cur.opcode === "broadcast" || cur.opcode === "reshape") cur = cur.operand(0);
  if (cur.opcode !== "constant") return undefined;
  const lit = cur.attrs.literal;
  if (!lit || lit.size === 0) return undefined;
  const first = lit.data[0]!;
  for (let k = 1; k < lit.size; k++) if (!Object.is(lit.data[k], first)) return undefined;
  return first;
}

/**
 * True when every element of `i` is exactly `v` (floats compare with Object.is, so the sign of
 * zero matters; pred holds 0/1; s64 values compare as integers).
 */
export function isSplatOf(i: Instruction, v: number | bigint): boolean {
  const s = splatValue(i);
  if (s === undefined) return false;
  if (typeof v === "bigint") return typeof s === "bigint" ? s === v : false;
  if (typeof s === "bigint") return Number.isInteger(v) && s === BigInt(v);
  return Object.is(s, v);
}

/** Every bit set: the identity of `and` for an integer or pred element type. */
export function allOnes(i: Instruction): boolean {
  const shape = arrayShapeOf(i.shape);
  if (!shape) return false;
  switch (shape.type) {
    case "pred":
      return isSplatOf(i, 1);
    case "u8":
      return isSplatOf(i, 255);
    case "s32":
    case "s64":
      return isSplatOf(i, -1);
    default:
      return false;
  }
}

/**
 * The value v with x + v == x for every x of the type: -0 for floats (+0 is not: -0 + +0 is
 * +0), 0 for integers and pred.
 */
export function additiveIdentity(i: Instruction): number {
  const shape = arrayShapeOf(i.shape);
  return shape && isFloatType(shape.type) ? -0 : 0;
}
