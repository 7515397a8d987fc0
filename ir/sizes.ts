// The one size check for array storage. Every place that allocates an array for a shape (the
// evaluator's literals, the frontend's creation ops, the backends' result and arena buffers)
// asks `arraySizeProblem` first, so an impossible size is an error that names the element
// count and the bytes requested, raised by the layer's own error type (OpError, EvalError, a
// backend's UnsupportedError), never a bare `RangeError: Invalid typed array length` from a
// typed-array constructor deep inside.

import { elementInfo } from "./element_types.ts";
import type { ElementType } from "./shape.ts";

/** The most elements one array may have: V8's typed-array length limit (2^32). */
export const MAX_ARRAY_ELEMENTS = 2 ** 32;

/** The elements of `dims` (a float product, so a huge shape cannot wrap around). */
export function elementCount(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/**
 * Why an array of `count` elements of `bytesPerElement` bytes each cannot be allocated, or
 * null: the count and the bytes requested, and the limit. `name` names the element type.
 */
export function sizeLimitProblem(
  count: number,
  bytesPerElement: number,
  name: string,
): string | null {
  if (count <= MAX_ARRAY_ELEMENTS) return null;
  return (
    `${count} ${name} elements (${count * bytesPerElement} bytes) requested, more than the ` +
    `${MAX_ARRAY_ELEMENTS} elements one array can hold`
  );
}

/**
 * Why an array of `type` with `count` elements cannot be allocated as a Literal, or null.
 * `name` is the type as the caller's user knows it.
 */
export function arraySizeProblem(
  type: ElementType,
  count: number,
  name: string = type,
): string | null {
  return sizeLimitProblem(count, elementInfo(type).storageBytes, name);
}

/** `arraySizeProblem` for a shape, with the shape in the message. */
export function shapeSizeProblem(type: ElementType, dims: readonly number[]): string | null {
  const p = arraySizeProblem(type, elementCount(dims));
  return p === null ? null : `${type}[${dims.join(",")}]: ${p}`;
}
