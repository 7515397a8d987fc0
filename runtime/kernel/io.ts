// A step-list program's arguments and results as its backends pass them: every array leaf of
// the argument values in order (tuples flattened), fresh result buffers for the root shape in
// leaf order, and the results put back together as the root's value tree. Shared by every
// backend that runs a lowered program (js, native).

import type { EvalValue } from "../../ir/evaluate.ts";
import { allocate, Literal, type LiteralData } from "../../ir/literal.ts";
import type { Shape } from "../../ir/shape.ts";

/** The data of every array leaf of `v`, in order, appended to `out`. */
export function leafData(v: EvalValue, out: LiteralData[]): void {
  if (Array.isArray(v)) v.forEach((e) => leafData(e, out));
  else out.push(v.data);
}

/** Fresh (zeroed) result buffers for a root shape, in leaf order, appended to `out`. */
export function allocResults(s: Shape, out: LiteralData[]): void {
  if (s.kind === "tuple") {
    s.elements.forEach((e) => allocResults(e, out));
    return;
  }
  // allocate() checks the size: an impossible one is an error naming the count and bytes.
  out.push(allocate(s.type, s.dims.reduce((a, b) => a * b, 1)));
}

/** The result buffers (from `at.i` on) as the root's value tree. */
export function resultValue(s: Shape, bufs: readonly LiteralData[], at: { i: number }): EvalValue {
  if (s.kind === "tuple") return s.elements.map((e) => resultValue(e, bufs, at));
  return new Literal(s.type, s.dims, bufs[at.i++]!);
}
