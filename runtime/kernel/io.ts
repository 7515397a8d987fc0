// A step-list program's arguments and results as its backends pass them: every array leaf of
// the argument values in order (tuples flattened), fresh result buffers for the root shape in
// leaf order, and the results put back together as the root's value tree. Shared by every
// backend that runs a lowered program (js, native).

import type { EvalValue } from "../../ir/evaluate.ts";
import { allocate, Literal, type LiteralData } from "../../ir/literal.ts";
import type { Shape } from "../../ir/shape.ts";
import { elementInfo } from "../../ir/element_types.ts";
import { MAX_ARRAY_ELEMENTS } from "../../ir/sizes.ts";

/** The data of every array leaf of `v`, in order, appended to `out`. */
export function leafData(v: EvalValue, out: LiteralData[]): void {
  if (Array.isArray(v)) v.forEach((e) => leafData(e, out));
  else out.push(v.data);
}

/** Result buffers (zeroed, or from `alloc`) for a root shape, in leaf order, appended to `out`. */
export function allocResults(s: Shape, out: LiteralData[], alloc?: ResultAllocator): void {
  if (s.kind === "tuple") {
    s.elements.forEach((e) => allocResults(e, out, alloc));
    return;
  }
  // allocate() checks the size: an impossible one is an error naming the count and bytes.
  const n = s.dims.reduce((a, b) => a * b, 1);
  const buffer = n > 0 && n <= MAX_ARRAY_ELEMENTS
    ? alloc?.(n * elementInfo(s.type).storageBytes)
    : undefined;
  if (buffer === undefined) {
    const bytes = n * elementInfo(s.type).storageBytes;
    if (bytes > ON_HEAP_MAX_BYTES && bytes <= SLAB_MAX_BYTES) {
      const ctor = globalThis[elementInfo(s.type).storage] as unknown as StorageCtor;
      const at = slabOffset(bytes);
      out.push(new ctor(slab!, at, n));
      return;
    }
    out.push(allocate(s.type, n));
    return;
  }
  const ctor = globalThis[elementInfo(s.type).storage] as unknown as StorageCtor;
  out.push(new ctor(buffer, 0, n));
}

// Small results share slabs. V8 keeps a typed array of at most 64 bytes on its heap (cheap), but
// gives a larger one its own off-heap backing store: ~2 us for 256 bytes, which was most of a
// cached eager op (an 8x8 add), against ~0.2 us for a view into a shared 8 KiB slab. A slab is
// fresh (zeroed) memory carved once and never reused, so results stay independent; the cost is
// that a result kept alive keeps its slab (at most 8 KiB) alive with it.
const ON_HEAP_MAX_BYTES = 64;
const SLAB_MAX_BYTES = 1024;
const SLAB_BYTES = 8192;
let slab: ArrayBuffer | undefined;
let slabUsed = SLAB_BYTES;

/** The offset of `bytes` fresh bytes in the current slab (8-byte aligned; a new slab if full). */
function slabOffset(bytes: number): number {
  if (slabUsed + bytes > SLAB_BYTES) {
    slab = new ArrayBuffer(SLAB_BYTES);
    slabUsed = 0;
  }
  const at = slabUsed;
  slabUsed += (bytes + 7) & ~7;
  return at;
}

type StorageCtor = new (buffer: ArrayBuffer, offset: number, length: number) => LiteralData;

/**
 * Where a backend's result buffers come from: an ArrayBuffer of at least `bytes` bytes, or
 * undefined for a fresh zeroed typed array. A backend whose programs write every element of
 * every result may hand out memory that is not cleared first (native, for large results).
 */
export type ResultAllocator = (bytes: number) => ArrayBuffer | undefined;

/** The result buffers (from `at.i` on) as the root's value tree. */
export function resultValue(s: Shape, bufs: readonly LiteralData[], at: { i: number }): EvalValue {
  if (s.kind === "tuple") return s.elements.map((e) => resultValue(e, bufs, at));
  return new Literal(s.type, s.dims, bufs[at.i++]!);
}
