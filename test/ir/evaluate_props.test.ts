// Property tests of the reference evaluator: algebraic identities that must hold for random
// shapes and values (movement ops undo each other, contractions agree with their elementwise
// decompositions, sort returns a sorted permutation), and the integer/half-float arithmetic
// against exact BigInt / bit-level references. Every module is built as HLO text. The movement,
// contraction and reduction identities run twice: on positive dims and on a zero-size class
// (some dim is 0), where the identities must hold just the same.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import {
  Literal,
  literal,
  literalsIdentical,
  roundToF16,
  scalarLiteral,
} from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";

const RUNS = { numRuns: 60 };

function run(text: string, ...args: EvalValue[]): EvalValue {
  return evaluate(parseHlo(text), args);
}

function lit(v: EvalValue): Literal {
  if (Array.isArray(v)) throw new Error("expected an array value");
  return v;
}

function tup(v: EvalValue): EvalValue[] {
  if (!Array.isArray(v)) throw new Error("expected a tuple");
  return v;
}

const count = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);
const shp = (type: string, dims: readonly number[]) => `${type}[${dims.join(",")}]`;

/** Dims of 1..maxDim: the default class. */
const positiveDims = (maxRank = 3, maxDim = 4) =>
  fc.array(fc.integer({ min: 1, max: maxDim }), { minLength: 1, maxLength: maxRank });

/** The zero-size class: dims of 0..maxDim with at least one 0 (the value has no elements). */
const zeroSizeDims = (maxRank = 3, maxDim = 4) =>
  fc
    .array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: maxDim })), {
      minLength: 1,
      maxLength: maxRank,
    })
    .filter((d) => d.includes(0));

/** The dim classes every identity below runs over. */
const DIM_CLASSES = [
  { name: "positive dims", dims: positiveDims },
  { name: "zero-size dims", dims: zeroSizeDims },
] as const;

/** A random f32 literal of `dims` (any f32 value, NaN and ±0 included). */
const arbF32 = (dims: readonly number[]) =>
  fc
    .array(fc.float(), { minLength: count(dims), maxLength: count(dims) })
    .map((v) => literal("f32", dims, v));

/** Small integers as f32, so sums and products are exact. */
const arbSmall = (dims: readonly number[]) =>
  fc
    .array(fc.integer({ min: -8, max: 8 }), { minLength: count(dims), maxLength: count(dims) })
    .map((v) => literal("f32", dims, v));

const withValues = <T>(dimsArb: fc.Arbitrary<number[]>, f: (d: number[]) => fc.Arbitrary<T>) =>
  dimsArb.chain((dims) => f(dims).map((x) => [dims, x] as const));

function identical(a: EvalValue, b: Literal): boolean {
  return literalsIdentical(lit(a), b);
}

const ADD = `
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
`;

describe.each(DIM_CLASSES)("movement identities ($name)", ({ dims: arbDims }) => {
  it("transpose then the inverse permutation is the identity", () => {
    const arb = withValues(arbDims(4), (dims) =>
      fc.tuple(
        fc.shuffledSubarray(
          dims.map((_, i) => i),
          { minLength: dims.length, maxLength: dims.length },
        ),
        arbF32(dims),
      ),
    );
    fc.assert(
      fc.property(arb, ([dims, [perm, x]]) => {
        const inv = perm.map((_, i) => perm.indexOf(i));
        const tdims = perm.map((p) => dims[p]!);
        const out = run(
          `HloModule t
ENTRY e {
  x = ${shp("f32", dims)} parameter(0)
  t = ${shp("f32", tdims)} transpose(x), dimensions={${perm.join(",")}}
  ROOT r = ${shp("f32", dims)} transpose(t), dimensions={${inv.join(",")}}
}`,
          x,
        );
        expect(identical(out, x)).toBe(true);
      }),
      RUNS,
    );
  });

  it("reverse twice over the same dims is the identity", () => {
    const arb = withValues(arbDims(3), (dims) =>
      fc.tuple(fc.subarray(dims.map((_, i) => i)), arbF32(dims)),
    );
    fc.assert(
      fc.property(arb, ([dims, [rev, x]]) => {
        const s = shp("f32", dims);
        const out = run(
          `HloModule r
ENTRY e {
  x = ${s} parameter(0)
  a = ${s} reverse(x), dimensions={${rev.join(",")}}
  ROOT b = ${s} reverse(a), dimensions={${rev.join(",")}}
}`,
          x,
        );
        expect(identical(out, x)).toBe(true);
      }),
      RUNS,
    );
  });

  it("reshape to a random factorization and back is the identity", () => {
    const arb = withValues(arbDims(3, 6), (dims) =>
      // An empty value reshapes to [d, 0] for any d.
      fc.tuple(fc.constantFrom(...(count(dims) === 0 ? [0, 1, 3] : divisors(count(dims)))),
        arbF32(dims)),
    );
    fc.assert(
      fc.property(arb, ([dims, [d, x]]) => {
        const n = count(dims);
        const mid = n === 0 ? [d, 0] : [d, n / d];
        const out = run(
          `HloModule rs
ENTRY e {
  x = ${shp("f32", dims)} parameter(0)
  a = ${shp("f32", mid)} reshape(x)
  ROOT b = ${shp("f32", dims)} reshape(a)
}`,
          x,
        );
        expect(identical(out, x)).toBe(true);
      }),
      RUNS,
    );
  });

  it("slices of a concatenation recover the parts", () => {
    const arb = arbDims(3).chain((dims) =>
      fc
        .tuple(
          fc.integer({ min: 0, max: dims.length - 1 }),
          fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }),
        )
        .chain(([axis, sizes]) => {
          const parts = sizes.map((s) => dims.map((d, i) => (i === axis ? s : d)));
          return fc.tuple(fc.constant(axis), fc.tuple(...parts.map((p) => arbF32(p))));
        })
        .map(([axis, lits]) => [dims, axis, lits] as const),
    );
    fc.assert(
      fc.property(arb, ([dims, axis, parts]) => {
        const total = parts.reduce((a, p) => a + p.dims[axis]!, 0);
        const cdims = dims.map((d, i) => (i === axis ? total : d));
        let offset = 0;
        const slices = parts.map((p, k) => {
          const spec = p.dims
            .map((d, i) => (i === axis ? `[${offset}:${offset + d}]` : `[0:${d}]`))
            .join(", ");
          offset += p.dims[axis]!;
          return `  s${k} = ${shp("f32", p.dims)} slice(c), slice={${spec}}`;
        });
        const names = parts.map((_, k) => `s${k}`);
        const tupleShape = `(${parts.map((p) => shp("f32", p.dims)).join(", ")})`;
        const out = run(
          `HloModule cat
ENTRY e {
${parts.map((p, k) => `  p${k} = ${shp("f32", p.dims)} parameter(${k})`).join("\n")}
  c = ${shp("f32", cdims)} concatenate(${parts.map((_, k) => `p${k}`).join(", ")}),
    dimensions={${axis}}
${slices.join("\n")}
  ROOT t = ${tupleShape} tuple(${names.join(", ")})
}`,
          ...parts,
        );
        tup(out).forEach((v, k) => expect(identical(v, parts[k]!)).toBe(true));
      }),
      RUNS,
    );
  });

  it("pad then the matching strided slice is the identity", () => {
    const arb = withValues(arbDims(3), (dims) =>
      fc.tuple(
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: 2 }),
            fc.integer({ min: 0, max: 2 }),
            fc.integer({ min: 0, max: 2 }),
          ),
          { minLength: dims.length, maxLength: dims.length },
        ),
        arbF32(dims),
      ),
    );
    fc.assert(
      fc.property(arb, ([dims, [cfg, x]]) => {
        const padded = dims.map((n, i) => {
          const [lo, hi, inner] = cfg[i]!;
          return lo + hi + n + Math.max(n - 1, 0) * inner;
        });
        const padText = cfg.map(([lo, hi, inner]) => `${lo}_${hi}_${inner}`).join("x");
        const slice = dims
          .map((n, i) => {
            const [lo, , inner] = cfg[i]!;
            const limit = n === 0 ? lo : lo + (n - 1) * (inner + 1) + 1;
            return `[${lo}:${limit}:${inner + 1}]`;
          })
          .join(", ");
        const out = run(
          `HloModule pad
ENTRY e {
  x = ${shp("f32", dims)} parameter(0)
  v = f32[] constant(-7)
  p = ${shp("f32", padded)} pad(x, v), padding=${padText}
  ROOT s = ${shp("f32", dims)} slice(p), slice={${slice}}
}`,
          x,
        );
        expect(identical(out, x)).toBe(true);
      }),
      RUNS,
    );
  });

  it("dynamic-slice at in-range starts equals the static slice", () => {
    const arb = withValues(arbDims(3, 5), (dims) =>
      fc.tuple(
        fc.tuple(
          ...dims.map((d) =>
            fc
              .integer({ min: Math.min(1, d), max: d })
              .chain((size) => fc.tuple(fc.integer({ min: 0, max: d - size }), fc.constant(size))),
          ),
        ),
        arbF32(dims),
      ),
    );
    fc.assert(
      fc.property(arb, ([dims, [ss, x]]) => {
        const sizes = ss.map(([, size]) => size);
        const params = ss.map((_, i) => `  i${i} = s32[] parameter(${i + 1})`).join("\n");
        const text = `HloModule ds
ENTRY e {
  x = ${shp("f32", dims)} parameter(0)
${params}
  d = ${shp("f32", sizes)} dynamic-slice(x, ${ss.map((_, i) => `i${i}`).join(", ")}),
    dynamic_slice_sizes={${sizes.join(",")}}
  s = ${shp("f32", sizes)} slice(x),
    slice={${ss.map(([st, size]) => `[${st}:${st + size}]`).join(", ")}}
  ROOT t = (${shp("f32", sizes)}, ${shp("f32", sizes)}) tuple(d, s)
}`;
        const [d, s] = tup(run(text, x, ...ss.map(([st]) => scalarLiteral("s32", st))));
        expect(literalsIdentical(lit(d!), lit(s!))).toBe(true);
      }),
      RUNS,
    );
  });

  it("dynamic-update-slice then dynamic-slice at the same start returns the update", () => {
    const arb = withValues(arbDims(2, 5), (dims) =>
      fc.tuple(
        fc.tuple(
          ...dims.map((d) =>
            fc
              .integer({ min: Math.min(1, d), max: d })
              .chain((size) => fc.tuple(fc.integer({ min: -2, max: d + 2 }), fc.constant(size))),
          ),
        ),
        arbF32(dims),
      ),
    ).chain(([dims, [ss, x]]) =>
      arbF32(ss.map(([, size]) => size)).map((u) => [dims, ss, x, u] as const),
    );
    fc.assert(
      fc.property(arb, ([dims, ss, x, u]) => {
        const sizes = ss.map(([, size]) => size);
        const idx = ss.map((_, i) => `i${i}`).join(", ");
        const text = `HloModule dus
ENTRY e {
  x = ${shp("f32", dims)} parameter(0)
  u = ${shp("f32", sizes)} parameter(1)
${ss.map((_, i) => `  i${i} = s32[] parameter(${i + 2})`).join("\n")}
  w = ${shp("f32", dims)} dynamic-update-slice(x, u, ${idx})
  ROOT d = ${shp("f32", sizes)} dynamic-slice(w, ${idx}), dynamic_slice_sizes={${sizes.join(",")}}
}`;
        // out-of-range starts clamp the same way in both ops
        const out = run(text, x, u, ...ss.map(([st]) => scalarLiteral("s32", st)));
        expect(identical(out, u)).toBe(true);
      }),
      RUNS,
    );
  });
});

describe.each(DIM_CLASSES)("contraction and reduction identities ($name)", ({ dims: arbDims }) => {
  it("broadcast along a new dim then reduce-add over it multiplies by its size", () => {
    const arb = withValues(arbDims(3), (dims) =>
      fc.tuple(
        fc.integer({ min: 0, max: dims.length }),
        fc.integer({ min: 1, max: 5 }),
        arbSmall(dims),
      ),
    );
    fc.assert(
      fc.property(arb, ([dims, [pos, k, x]]) => {
        const big = [...dims.slice(0, pos), k, ...dims.slice(pos)];
        const map = dims.map((_, i) => (i < pos ? i : i + 1));
        const out = run(
          `HloModule br
${ADD}
ENTRY e {
  x = ${shp("f32", dims)} parameter(0)
  b = ${shp("f32", big)} broadcast(x), dimensions={${map.join(",")}}
  z = f32[] constant(0)
  ROOT r = ${shp("f32", dims)} reduce(b, z), dimensions={${pos}}, to_apply=add
}`,
          x,
        );
        expect(lit(out).toNumbers()).toEqual(x.toNumbers().map((v) => v * k + 0));
      }),
      RUNS,
    );
  });

  it("dot equals broadcast, multiply and reduce-add over the contracting dim", () => {
    const arb = fc
      .tuple(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
      )
      .chain(([m, k, n]) =>
        fc.tuple(fc.constant([m, k, n] as const), arbSmall([m, k]), arbSmall([k, n])),
      );
    fc.assert(
      fc.property(arb, ([[m, k, n], a, b]) => {
        const [d, r] = tup(
          run(
            `HloModule dot
${ADD}
ENTRY e {
  a = f32[${m},${k}] parameter(0)
  b = f32[${k},${n}] parameter(1)
  d = f32[${m},${n}] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ba = f32[${m},${k},${n}] broadcast(a), dimensions={0,1}
  bb = f32[${m},${k},${n}] broadcast(b), dimensions={1,2}
  p = f32[${m},${k},${n}] multiply(ba, bb)
  z = f32[] constant(0)
  r = f32[${m},${n}] reduce(p, z), dimensions={1}, to_apply=add
  ROOT t = (f32[${m},${n}], f32[${m},${n}]) tuple(d, r)
}`,
            a,
            b,
          ),
        );
        expect(lit(d!).toNumbers()).toEqual(lit(r!).toNumbers());
      }),
      RUNS,
    );
  });

  it("sort returns a sorted permutation, and a stable key/value sort keeps ties in order", () => {
    const arb = fc.array(fc.integer({ min: -5, max: 5 }), { minLength: 1, maxLength: 20 });
    fc.assert(
      fc.property(arb, (keys) => {
        const n = keys.length;
        const [k, v] = tup(
          run(
            `HloModule sort
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = f32[${n}] parameter(0)
  v = s32[${n}] parameter(1)
  ROOT s = (f32[${n}], s32[${n}]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt
}`,
            literal("f32", [n], keys),
            literal("s32", [n], keys.map((_, i) => i)),
          ),
        );
        const sk = lit(k!).toNumbers();
        const sv = lit(v!).toNumbers();
        expect(sk).toEqual([...keys].sort((a, b) => a - b));
        expect([...sv].sort((a, b) => a - b)).toEqual(keys.map((_, i) => i));
        sv.forEach((orig, i) => {
          expect(keys[orig]).toBe(sk[i]);
          if (i > 0 && sk[i] === sk[i - 1]) expect(orig).toBeGreaterThan(sv[i - 1]!);
        });
      }),
      RUNS,
    );
  });

  it("gather rows equals direct indexing with clamped indices", () => {
    const arb = fc
      .tuple(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 3 }))
      .chain(([v, d]) =>
        fc.tuple(
          fc.constant([v, d] as const),
          arbF32([v, d]),
          fc.array(fc.integer({ min: -3, max: v + 3 }), { minLength: 1, maxLength: 6 }),
        ),
      );
    fc.assert(
      fc.property(arb, ([[v, d], table, ids]) => {
        const n = ids.length;
        const out = lit(
          run(
            `HloModule g
ENTRY e {
  t = f32[${v},${d}] parameter(0)
  i = s32[${n}] parameter(1)
  ROOT g = f32[${n},${d}] gather(t, i), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,${d}}
}`,
            table,
            literal("s32", [n], ids),
          ),
        );
        ids.forEach((id, r) => {
          const row = Math.min(Math.max(id, 0), v - 1);
          for (let c = 0; c < d; c++) {
            expect(Object.is(out.data[r * d + c], table.data[row * d + c])).toBe(true);
          }
        });
      }),
      RUNS,
    );
  });
});

describe("fast paths equal the slow path", () => {
  // A reducer with an extra unused instruction is not recognised as a single binary op, so it
  // runs through evaluateComputation on scalar literals; both must agree bit for bit.
  const reducer = (name: string, op: string, t: string, slow: boolean, swap: boolean) => `
${name} {
  a = ${t}[] parameter(0)
  b = ${t}[] parameter(1)${slow ? `\n  unused = ${t}[] constant(0)` : ""}
  ROOT r = ${t}[] ${op}(${swap ? "b, a" : "a, b"})
}`;
  for (const t of ["f32", "f16"]) {
    for (const op of ["add", "maximum", "minimum", "multiply", "subtract"]) {
      it(`reduce with ${op} over ${t}`, () => {
        const vals = fc
          .array(fc.oneof(fc.float(), fc.constantFrom(0, -0, NaN, 1.5)), {
            minLength: 1,
            maxLength: 12,
          })
          .map((v) => v.map((x) => (t === "f16" ? roundToF16(x) : Math.fround(x))));
        fc.assert(
          fc.property(vals, fc.boolean(), (xs, swap) => {
            const n = xs.length;
            const m = parseHlo(`HloModule fast
${reducer("fast", op, t, false, swap)}
${reducer("slow", op, t, true, swap)}
ENTRY e {
  x = ${t}[${n}] parameter(0)
  z = ${t}[] constant(-0)
  a = ${t}[] reduce(x, z), dimensions={0}, to_apply=fast
  b = ${t}[] reduce(x, z), dimensions={0}, to_apply=slow
  ROOT o = (${t}[], ${t}[]) tuple(a, b)
}`);
            const [a, b] = tup(evaluate(m, [literal(t === "f16" ? "f16" : "f32", [n], xs)]));
            expect(literalsIdentical(lit(a!), lit(b!))).toBe(true);
          }),
          { numRuns: 30 },
        );
      });
    }
  }

  it("sort with a plain compare comparator equals the computed comparator", () => {
    const cmp = (name: string, slow: boolean) => `
${name} {
  a = f32[] parameter(0)
  b = f32[] parameter(1)${slow ? "\n  unused = f32[] constant(0)" : ""}
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
}`;
    const keys = fc.array(fc.oneof(fc.float(), fc.constantFrom(0, -0, NaN)), {
      minLength: 1,
      maxLength: 16,
    });
    fc.assert(
      fc.property(keys, (xs) => {
        const n = xs.length;
        const m = parseHlo(`HloModule sorts
${cmp("fast", false)}
${cmp("slow", true)}
ENTRY e {
  x = f32[${n}] parameter(0)
  a = f32[${n}] sort(x), dimensions={0}, is_stable=true, to_apply=fast
  b = f32[${n}] sort(x), dimensions={0}, is_stable=true, to_apply=slow
  ROOT o = (f32[${n}], f32[${n}]) tuple(a, b)
}`);
        const [a, b] = tup(evaluate(m, [literal("f32", [n], xs)]));
        expect(literalsIdentical(lit(a!), lit(b!))).toBe(true);
      }),
      { numRuns: 30 },
    );
  });
});

describe("arithmetic against exact references", () => {
  const INT32 = fc.integer({ min: -2147483648, max: 2147483647 });
  const ops: [string, (a: bigint, b: bigint) => bigint][] = [
    ["add", (a, b) => a + b],
    ["subtract", (a, b) => a - b],
    ["multiply", (a, b) => a * b],
  ];
  for (const [op, ref] of ops) {
    it(`s32 ${op} wraps modulo 2^32; u8 modulo 2^8; s64 modulo 2^64`, () => {
      const text = (t: string) => `HloModule ${op}_${t}
ENTRY e {
  a = ${t}[4] parameter(0)
  b = ${t}[4] parameter(1)
  ROOT r = ${t}[4] ${op}(a, b)
}`;
      const s32m = parseHlo(text("s32"));
      const u8m = parseHlo(text("u8"));
      const s64m = parseHlo(text("s64"));
      const arb4 = <T>(a: fc.Arbitrary<T>) => fc.array(a, { minLength: 4, maxLength: 4 });
      fc.assert(
        fc.property(
          arb4(INT32),
          arb4(INT32),
          arb4(fc.integer({ min: 0, max: 255 })),
          arb4(fc.integer({ min: 0, max: 255 })),
          arb4(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })),
          arb4(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })),
          (a, b, c, d, e, f) => {
            const r32 = lit(evaluate(s32m, [literal("s32", [4], a), literal("s32", [4], b)]));
            expect(r32.toNumbers()).toEqual(
              a.map((x, i) => Number(BigInt.asIntN(32, ref(BigInt(x), BigInt(b[i]!))))),
            );
            const r8 = lit(evaluate(u8m, [literal("u8", [4], c), literal("u8", [4], d)]));
            expect(r8.toNumbers()).toEqual(
              c.map((x, i) => Number(BigInt.asUintN(8, ref(BigInt(x), BigInt(d[i]!))))),
            );
            const r64 = lit(evaluate(s64m, [literal("s64", [4], e), literal("s64", [4], f)]));
            expect(Array.from(r64.data as BigInt64Array)).toEqual(
              e.map((x, i) => BigInt.asIntN(64, ref(x, f[i]!))),
            );
          },
        ),
        RUNS,
      );
    });
  }

  it("s32 divide/remainder agree with truncating BigInt division (b != 0)", () => {
    const m = parseHlo(`HloModule dr
ENTRY e {
  a = s32[1] parameter(0)
  b = s32[1] parameter(1)
  q = s32[1] divide(a, b)
  r = s32[1] remainder(a, b)
  ROOT t = (s32[1], s32[1]) tuple(q, r)
}`);
    fc.assert(
      fc.property(INT32, INT32.filter((x) => x !== 0), (a, b) => {
        const [q, r] = tup(evaluate(m, [literal("s32", [1], [a]), literal("s32", [1], [b])]));
        const bq = BigInt.asIntN(32, BigInt(a) / BigInt(b));
        const br = BigInt.asIntN(32, BigInt(a) % BigInt(b));
        expect(lit(q!).toNumbers()).toEqual([Number(bq)]);
        expect(lit(r!).toNumbers()).toEqual([Number(br)]);
      }),
      RUNS,
    );
  });

  it("f16 add is the f32 sum rounded to f16", () => {
    const m = parseHlo(`HloModule h
ENTRY e {
  a = f16[1] parameter(0)
  b = f16[1] parameter(1)
  ROOT r = f16[1] add(a, b)
}`);
    const f16 = fc.float({ min: -70000, max: 70000, noNaN: true }).map(roundToF16);
    fc.assert(
      fc.property(f16, f16, (a, b) => {
        const r = lit(evaluate(m, [literal("f16", [1], [a]), literal("f16", [1], [b])]));
        expect(r.data[0]).toBe(roundToF16(Math.fround(a + b)));
      }),
      RUNS,
    );
  });

  it("convert f32 → s32 truncates, saturates and sends NaN to 0", () => {
    const m = parseHlo(`HloModule c
ENTRY e {
  a = f32[1] parameter(0)
  ROOT r = s32[1] convert(a)
}`);
    fc.assert(
      fc.property(fc.float(), (x) => {
        const r = lit(evaluate(m, [literal("f32", [1], [x])])).data[0];
        const want = Number.isNaN(x)
          ? 0
          : Math.min(Math.max(Math.trunc(x), -2147483648), 2147483647);
        expect(r).toBe(want + 0);
      }),
      RUNS,
    );
  });
});

function divisors(n: number): number[] {
  const out: number[] = [];
  for (let d = 1; d <= n; d++) if (n % d === 0) out.push(d);
  return out;
}
