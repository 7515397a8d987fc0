// Property tests: for random broadcast-compatible shapes (empty dims included) and random
// float32 values, elementwise ops and where match the plain-JS broadcasting reference;
// incompatible shapes give an OpError naming both shapes; sums over random dims with keepdim
// match the row-major folding reference.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { add, maximum, mul, OpError, sub, sum, tensor, where } from "../../tensor/index.ts";
import { getBackend } from "../../runtime/index.ts";
import { broadcastShape, expectSums, flat, mapRef, numel, reduceRef, ref } from "./reference.ts";

const fr = Math.fround;

/** A result shape and operand shapes that broadcast to it (each a suffix with some dims 1). */
const compatibleShapes = (count: number) =>
  fc
    .array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 })
    .chain((out) =>
      fc.tuple(
        ...Array.from({ length: count }, () =>
          fc
            .tuple(
              fc.integer({ min: 0, max: out.length }),
              fc.array(fc.boolean(), { minLength: out.length, maxLength: out.length }),
            )
            .map(([rank, ones]) =>
              out.slice(out.length - rank).map((d, i) => (ones[out.length - rank + i] ? 1 : d)),
            ),
        ),
      ),
    );

const f32Values = (n: number) =>
  fc.array(fc.float({ min: -100, max: 100, noNaN: true }), { minLength: n, maxLength: n });

const withValues = (shapes: number[][]) =>
  fc.tuple(...shapes.map((s) => f32Values(numel(s)))).map((vals) => ({ shapes, vals }));

describe("broadcasting (property)", () => {
  it("binary ops match the reference", () => {
    fc.assert(
      fc.property(compatibleShapes(2).chain(withValues), ({ shapes, vals }) => {
        const [a, b] = shapes.map((s, i) => tensor(vals[i]!, { shape: s }));
        const ra = ref(a!);
        const rb = ref(b!);
        const check = (got: ReturnType<typeof add>, f: (u: number, v: number) => number) => {
          const e = mapRef([ra, rb], f);
          expect(got.shape).toEqual(e.shape);
          expect(flat(got)).toEqual(e.values);
        };
        check(add(a!, b!), (u, v) => fr(u + v));
        check(sub(a!, b!), (u, v) => fr(u - v));
        check(mul(a!, b!), (u, v) => fr(u * v));
        check(maximum(a!, b!), (u, v) => (u < v ? v : u)); // ties keep the lhs (XLA)
        check(a!.lt(b!), (u, v) => (u < v ? 1 : 0));
      }),
      { numRuns: 40 },
    );
  });

  it("where broadcasts three operands", () => {
    fc.assert(
      fc.property(compatibleShapes(3).chain(withValues), ({ shapes, vals }) => {
        const [c, a, b] = shapes.map((s, i) => tensor(vals[i]!, { shape: s }));
        const cond = c!.lt(0);
        const e = mapRef([ref(cond), ref(a!), ref(b!)], (k, u, v) => (k ? u : v));
        const got = where(cond, a!, b!);
        expect(got.shape).toEqual(e.shape);
        expect(flat(got)).toEqual(e.values);
      }),
      { numRuns: 30 },
    );
  });

  it("incompatible shapes name both shapes", () => {
    const anyShape = fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 });
    fc.assert(
      fc.property(anyShape, anyShape, (sa, sb) => {
        fc.pre(broadcastShape(sa, sb) === null);
        const attempt = () =>
          add(
            tensor(new Float32Array(numel(sa)), { shape: sa }),
            tensor(new Float32Array(numel(sb)), { shape: sb }),
          );
        expect(attempt).toThrow(OpError);
        expect(attempt).toThrow(
          `add: shapes [${sa.join(",")}] and [${sb.join(",")}] cannot be broadcast`,
        );
      }),
      { numRuns: 30 },
    );
  });
});

describe("sum (property)", () => {
  it("matches the row-major reference over random dims", () => {
    const shapeAndDims = fc
      .array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 })
      .chain((shape) =>
        fc.tuple(
          fc.constant(shape),
          fc.subarray(shape.map((_, i) => i)),
          fc.boolean(),
          f32Values(numel(shape)),
          fc.boolean(),
        ),
      );
    fc.assert(
      fc.property(shapeAndDims, ([shape, dims, keepdim, vals, negative]) => {
        const x = tensor(vals, { shape });
        const asked = negative ? dims.map((d) => d - shape.length) : dims;
        const all = dims.length === 0 ? shape.map((_, i) => i) : dims;
        // The evaluator's meaning: the sum in double, rounded once (a float32 running sum can
        // differ from it by far more than an ulp where terms cancel); a tolerance-tier backend
        // is held to its bound around it, scaled by the same sums over the terms' magnitudes.
        const r = ref(x);
        const e = reduceRef(r, all, keepdim, 0, (acc, v) => acc + v);
        const mags = reduceRef({ ...r, values: r.values.map(Math.abs) }, all, keepdim, 0,
          (acc, v) => acc + v).values;
        const count = all.reduce((n, d) => n * shape[d]!, 1);
        const got = sum(x, asked, keepdim);
        expect(got.shape).toEqual(e.shape);
        expectSums(getBackend().name, flat(got), e.values.map(fr), mags, count);
      }),
      { numRuns: 40 },
    );
  });
});
