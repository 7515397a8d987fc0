// Shape arithmetic of the frontend, in PyTorch's terms: negative dims, numpy broadcasting,
// reshape with one inferred (-1) dim. Pure functions of dims; each failure is an OpError naming
// the op, the shapes and the argument, so lowerings and Tensor methods report problems the way
// a PyTorch user reads them.

import { OpError } from "./errors.ts";

/** `[2,3]`: how frontend messages print a shape. */
export function shapeString(dims: readonly number[]): string {
  return `[${dims.join(",")}]`;
}

export function numelOf(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/**
 * A dim in [-ndim, ndim) made non-negative. A zero-dim tensor accepts -1 and 0 (PyTorch wraps
 * them as if it had one dim) and gives 0. `what` names the argument in the message.
 */
export function normalizeDim(op: string, dim: number, ndim: number, what = "dim"): number {
  const n = Math.max(ndim, 1);
  if (!Number.isInteger(dim) || dim < -n || dim >= n) {
    throw new OpError(
      op,
      `${what} ${dim} is out of range for a tensor of ${ndim} dim${ndim === 1 ? "" : "s"} ` +
        `(expected ${-n}..${n - 1})`,
    );
  }
  return dim < 0 ? dim + n : dim;
}

/** Several dims normalized; a dim named twice is an error. */
export function normalizeDims(
  op: string,
  dims: readonly number[],
  ndim: number,
  what = "dim",
): number[] {
  const out: number[] = [];
  for (const d of dims) {
    const n = normalizeDim(op, d, ndim, what);
    if (out.includes(n)) {
      throw new OpError(op, `${what} ${d} appears more than once in [${dims.join(", ")}]`);
    }
    out.push(n);
  }
  return out;
}

/**
 * numpy broadcasting: shapes aligned at their last dims; each pair of sizes must be equal or
 * one of them 1 (0 broadcasts with 1 to 0).
 */
export function broadcastShapes(op: string, ...shapes: readonly (readonly number[])[]): number[] {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out: number[] = new Array<number>(rank).fill(1);
  for (let k = 1; k <= rank; k++) {
    let size = 1;
    let from = -1;
    shapes.forEach((s, i) => {
      const d = s[s.length - k];
      if (d === undefined || d === 1) return;
      if (size === 1) {
        size = d;
        from = i;
      } else if (d !== size) {
        const a = shapes[from]!;
        throw new OpError(
          op,
          `shapes ${shapes.map(shapeString).join(" and ")} cannot be broadcast (dim -${k}: ` +
            `${a[a.length - k]} vs ${d})`,
        );
      }
    });
    out[rank - k] = size;
  }
  return out;
}

/** A reshape target with at most one -1 resolved against `numel` elements. */
export function inferShape(op: string, target: readonly number[], numel: number): number[] {
  let inferred = -1;
  let known = 1;
  target.forEach((d, i) => {
    if (d === -1) {
      if (inferred >= 0)
        throw new OpError(op, `only one dim can be -1, got ${shapeString(target)}`);
      inferred = i;
    } else if (!Number.isInteger(d) || d < 0) {
      throw new OpError(op, `invalid size ${d} at dim ${i} of ${shapeString(target)}`);
    } else {
      known *= d;
    }
  });
  const invalid = () =>
    new OpError(op, `shape ${shapeString(target)} is invalid for input of size ${numel}`);
  if (inferred < 0) {
    if (known !== numel) throw invalid();
    return [...target];
  }
  if (known === 0 || numel % known !== 0) throw invalid();
  const out = [...target];
  out[inferred] = numel / known;
  return out;
}
