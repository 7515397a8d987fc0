// Index checks in programs built before the index values are known (lazy graphs, compile()).
// Eager mode checks index values in each op's `normalize`, before its program runs; a lazy or
// traced program would otherwise follow the IR's (XLA's) semantics and clamp or skip an
// out-of-range index silently. When the program's builder collects checks
// (`collectIndexChecks`), a lowering that would clamp calls `checkInRange`: that adds ordinary
// IR finding the first out-of-range position of the index tensor (row-major, as eager scans
// it), and three results of the program: whether one was found, the value there and the bound
// it broke (a program serving several sizes computes those from its size parameters, so a
// message never names a stale size). The caller strips them after the run and
// `raiseIndexErrors` throws the OpError eager would have thrown. The IR stays plain HLO (the
// reference evaluator gives the same answer, so the exact tier stays exact, and every backend
// renders it with no special case); without a collector (eager mode, or
// `compile(fn, { checkIndices: false })`) nothing is added and XLA's clamping applies.

import type { ComputationBuilder, ModuleBuilder } from "../ir/builder.ts";
import type { EvalValue } from "../ir/evaluate.ts";
import type { Literal } from "../ir/literal.ts";
import type { Instruction } from "../ir/module.ts";
import { arrayShape } from "../ir/shape.ts";
import { frameAt, locate } from "../util/user_frame.ts";
import { OpError } from "./errors.ts";
import { cast, dimsOf, dtypeOf, filled, reduce } from "./lower.ts";
import { numelOf } from "./shape.ts";

/** One checked index tensor: the op and eager's message for a bad value and the bound. */
export interface IndexCheck {
  readonly op: string;
  readonly message: (value: bigint, bound: bigint) => string;
  /** The op's recorded source location (a traced op's), which the error then names. */
  readonly location?: { file: string; line: number; column: number };
}

/** Results per check: found (pred[]), the first bad value (s64[]), the upper bound (s64[]). */
export const RESULTS_PER_CHECK = 3;

/** The checks a program's lowerings added, and their result values (three per check). */
export class IndexChecks {
  readonly checks: IndexCheck[] = [];
  readonly outputs: Instruction[] = [];
}

const collectors = new WeakMap<ModuleBuilder, IndexChecks>();

/** Makes the lowerings into `mb` add index checks; returns where they are collected. */
export function collectIndexChecks(mb: ModuleBuilder): IndexChecks {
  let c = collectors.get(mb);
  if (!c) collectors.set(mb, (c = new IndexChecks()));
  return c;
}

/** Eager's message for an index outside [0, size). */
export function outOfBounds(
  value: bigint | number,
  what: string,
  size: number | bigint,
): string {
  return `index ${value} is out of bounds for ${what} with size ${size}`;
}

/**
 * Adds a check that every value of `idx` (an integer tensor) lies in [lo, hi), or equals
 * `except` (a loss's ignoreIndex), when `b`'s module collects checks; a no-op otherwise (eager
 * mode has checked the values already).
 */
export function checkInRange(
  b: ComputationBuilder,
  idx: Instruction,
  lo: number,
  hi: number,
  op: string,
  message: (value: bigint, bound: bigint) => string,
  except?: number,
): void {
  const mb = b.moduleBuilder;
  const sink = mb && collectors.get(mb);
  if (!sink) return;
  const dims = dimsOf(idx);
  const count = numelOf(dims);
  if (count === 0) return;
  // Compared in the index's own type where the bounds fit (int32 and int64, whose converted
  // copy would be a kernel of its own); only the value found is converted.
  const t = dtypeOf(idx) === "int32" ? "int32" : "int64";
  const x = cast(b, idx, t);
  const bound = (v: number) => filled(b, t, t === "int32" ? v : BigInt(v), dims);
  let bad = b.or(b.compare(x, bound(lo), "LT"), b.compare(x, bound(hi), "GE"));
  if (except !== undefined) bad = b.and(bad, b.compare(x, bound(except), "NE"));
  // The row-major position of each element, as eager's scan meets it (int32 unless too many;
  // 64-bit integers are the slow ones in generated JavaScript).
  const pt = count < 2 ** 31 ? "int32" : "int64";
  const n = (v: number) => (pt === "int32" ? v : BigInt(v));
  const shape = arrayShape(pt === "int32" ? "s32" : "s64", [...dims]);
  let stride = 1;
  let lin: Instruction | undefined;
  for (let k = dims.length - 1; k >= 0; k--) {
    const term = stride === 1
      ? b.iota(shape, k)
      : b.multiply(b.iota(shape, k), filled(b, pt, n(stride), dims));
    lin = lin ? b.add(lin, term) : term;
    stride *= dims[k]!;
  }
  lin ??= filled(b, pt, n(0), dims);
  const all = dims.map((_, k) => k);
  const none = filled(b, pt, n(count), dims);
  const pos = reduce(b, b.select(bad, lin, none), all, "min", n(count), false);
  const found = b.compare(pos, filled(b, pt, n(count), []), "LT");
  const at = b.compare(lin, b.broadcast(pos, [...dims], []), "EQ");
  const value = reduce(b, cast(b, b.select(at, x, bound(0)), "int64"), all, "add", 0n, false);
  const md = b.metadata;
  const location = md.sourceFile !== undefined && md.sourceLine !== undefined
    ? { file: md.sourceFile, line: md.sourceLine, column: md.sourceColumn ?? 1 }
    : undefined;
  sink.checks.push(location ? { op, message, location } : { op, message });
  sink.outputs.push(found, value, filled(b, "int64", BigInt(hi), []));
}

const raised = new WeakSet<Error>();

/** Whether `e` is a failed index check (the program ran; only the user's values were bad). */
export function isIndexCheckError(e: unknown): boolean {
  return e instanceof Error && raised.has(e);
}

function scalarOf(v: EvalValue | Literal): bigint {
  if (Array.isArray(v)) throw new Error("index check: expected an array result, got a tuple");
  const x = (v as Literal).data[0]!;
  return typeof x === "bigint" ? x : BigInt(x);
}

/** Throws the first failed check's OpError; `values` are the checks' results in order. */
export function raiseIndexErrors(
  checks: readonly IndexCheck[],
  values: readonly (EvalValue | Literal)[],
): void {
  checks.forEach((c, k) => {
    const [found, value, bound] = values.slice(RESULTS_PER_CHECK * k).map(scalarOf);
    if (found !== 0n) {
      // At the op's own line when the tracer recorded it (the stack now is the call's).
      const made = new OpError(c.op, c.message(value!, bound!));
      const e = c.location ? locate(made, frameAt(c.location)) : made;
      raised.add(e);
      throw e;
    }
  });
}
