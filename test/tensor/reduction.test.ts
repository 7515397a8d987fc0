// The reduction family (tensor/ops/reduction.ts, plus sum and mean from core.ts) against
// PyTorch 1.13's golden values (test/fixtures/reduction.json, written by
// scripts/fixtures/gen_reduction.py) on every registered backend; property tests of sort,
// topk, argmax and cumsum against plain-JS references; the call forms (methods, options,
// the `{ values, indices }` pair); and the error messages, which name the op, the shape and
// the argument.
//
// Tolerances: float32 results of exp/log/pow/sqrt (logsumexp, softmax, logSoftmax, norm, var,
// std) use atol = rtol = 1e-5, since PyTorch's vectorized transcendentals differ from the
// reference evaluator's correctly rounded ones by an ulp or so before any sums; other float32
// results use atol 1e-6, rtol 1e-5 (PyTorch accumulates float32 sums in other orders and in
// double for cumsum). float16 and bfloat16 results may differ by one ulp of the type (the
// value is rounded from a float32 computation in both, but the float32 values differ in their
// last bits): rtol 2e-3 and 1e-2. Integers, bools and indices are exact.

import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tryCase, warmNative } from "./native_warm.ts";
import { backendNames } from "../../runtime/index.ts";
import { setEagerBackend } from "../../tensor/dispatch.ts";
import {
  ArgumentError,
  isPending,
  lazy,
  OpError,
  opCacheStats,
  ops,
  resetOpCache,
  Tensor,
  tensor,
  type DType,
} from "../../tensor/index.ts";
import {
  amax,
  argmax,
  cumsum,
  max,
  min,
  sort,
  topk,
  valuesIndices,
  type ValuesIndices,
} from "../../tensor/ops/reduction.ts";
import {
  expectClose,
  loadFixtures,
  type CloseOptions,
  type FixtureCase,
  type FixtureValue,
} from "../fixtures/load.ts";
import { flat } from "./reference.ts";

/** Every op of the area; the coverage test checks each has fixture cases. */
const AREA_OPS = [
  "sum",
  "mean",
  "prod",
  "max",
  "min",
  "amax",
  "amin",
  "argmax",
  "argmin",
  "var",
  "std",
  "logsumexp",
  "all",
  "any",
  "norm",
  "softmax",
  "logSoftmax",
  "cumsum",
  "cumprod",
  "sort",
  "topk",
] as const;

const TRANSCENDENTAL = new Set(["logsumexp", "softmax", "logSoftmax", "norm", "var", "std"]);

function tolerance(op: string, dtype: DType): CloseOptions {
  if (dtype === "float16") return { atol: 2e-3, rtol: 2e-3 };
  if (dtype === "bfloat16") return { atol: 1e-2, rtol: 1e-2 };
  if (dtype === "float32") {
    return TRANSCENDENTAL.has(op) ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-6, rtol: 1e-5 };
  }
  return { atol: 0, rtol: 0 };
}

type AnyOp = (...args: unknown[]) => Tensor | Tensor[] | ValuesIndices;

function opFunction(name: string): AnyOp {
  const f = (ops as unknown as Record<string, unknown>)[name];
  if (typeof f !== "function") throw new Error(`ops.${name} is not a function`);
  return f as AnyOp;
}

function runCase(c: FixtureCase): Tensor | Tensor[] | ValuesIndices {
  const args: unknown[] = [...c.args];
  if (Object.keys(c.kwargs).length > 0) args.push(c.kwargs);
  return opFunction(c.op)(...args);
}

function compare(op: string, actual: unknown, expected: FixtureValue, label: string): void {
  if (Array.isArray(expected)) {
    expect(Array.isArray(actual), `${label}: expected a pair`).toBe(true);
    const pair = actual as ValuesIndices;
    expect(pair.length).toBe(expected.length);
    expected.forEach((e, i) => compare(op, pair[i], e, `${label}[${i}]`));
    return;
  }
  if (!(expected instanceof Tensor)) throw new Error(`${label}: expected output is not a tensor`);
  expectClose(actual as Tensor, expected, tolerance(op, expected.dtype), label);
}

const cases = loadFixtures("reduction");

describe("reduction fixtures", () => {
  it("cover every op of the area", () => {
    const seen = new Set(cases.map((c) => c.op));
    for (const op of AREA_OPS) expect(seen.has(op), `no fixture case for ${op}`).toBe(true);
    for (const op of seen) expect(AREA_OPS as readonly string[]).toContain(op);
  });

  describe.each(backendNames())("against PyTorch [%s]", (backend) => {
    beforeAll(() => {
      // One parallel batch of compiler runs for every case's native kernels.
      if (backend === "native") warmNative(() => cases.forEach((c) => tryCase(() => runCase(c))));
      setEagerBackend(backend);
    }, 300_000);
    afterAll(() => setEagerBackend(undefined));
    it.each(AREA_OPS)("%s", (op) => {
      for (const c of cases.filter((k) => k.op === op)) {
        let got: unknown;
        try {
          got = runCase(c);
        } catch (e) {
          throw new Error(`${c.name}: ${(e as Error).message}`, { cause: e });
        }
        compare(op, got, c.out, c.name);
      }
    });
  });
});

// ---- Call forms -----------------------------------------------------------------------------

describe("call forms", () => {
  const x = tensor([
    [3, 1, 4],
    [1, 5, 9],
  ]);

  it("max/min with a dim give a pair that destructures both ways", () => {
    const r = max(x, 1);
    const [v, i] = r;
    expect(v).toBe(r.values);
    expect(i).toBe(r.indices);
    expect(flat(r.values)).toEqual([4, 9]);
    expect(flat(r.indices)).toEqual([2, 2]);
    expect(r.indices.dtype).toBe("int64");
    expect(Object.isFrozen(r)).toBe(true);
    expect(Object.keys(r)).toEqual(["0", "1"]);
    const { values, indices } = x.min({ dim: 0, keepdim: true });
    expect(values.shape).toEqual([1, 3]);
    expect(flat(values)).toEqual([1, 1, 4]);
    expect(flat(indices)).toEqual([1, 0, 0]);
  });

  it("max/min without a dim give a tensor", () => {
    const m = x.max();
    expect(m).toBeInstanceOf(Tensor);
    expect(m.item()).toBe(9);
    expect(min(x).item()).toBe(1);
  });

  it("methods, positional and options forms agree", () => {
    const forms: Tensor[] = [
      x.amax(1, true),
      x.amax({ dim: 1, keepdim: true }),
      ops.amax(x, 1, { keepdim: true }),
      amax(x, [1], true),
    ];
    for (const f of forms) expect(f.toArray()).toEqual([[4], [9]]);
    expect(x.var(1, { correction: 0 }).toArray()).toEqual(ops.var(x, [1], false).toArray());
    const biased = x.var({ correction: 0 }).item() as number;
    expect(x.std({ unbiased: false }).item()).toBeCloseTo(Math.sqrt(biased), 6);
    expect(flat(x.argmax(1))).toEqual(flat(argmax(x, { dim: 1 })));
    expect(flat(x.cumsum(1))).toEqual(flat(cumsum(x, { dim: 1 })));
    const s = x.sort({ dim: 1, descending: true });
    expect(flat(s.values)).toEqual([4, 3, 1, 9, 5, 1]);
    expect(flat(sort(x, 1, true).indices)).toEqual(flat(s.indices));
    const t = x.topk(1, { dim: 0 });
    expect(flat(t.values)).toEqual([3, 5, 9]);
    expect(flat(t.indices)).toEqual([0, 1, 1]);
    expect(flat(x.softmax(1).sum(1))).toEqual([expect.closeTo(1, 6), expect.closeTo(1, 6)]);
  });

  it("valuesIndices builds the pair", () => {
    const a = tensor([1]);
    const b = tensor([0], { dtype: "int64" });
    const p = valuesIndices(a, b);
    expect(p[0]).toBe(a);
    expect(p.indices).toBe(b);
    expect([...p]).toEqual([a, b]);
  });

  it("run in one lazy graph (several reducers and comparators in one module) as eagerly", () => {
    const x = tensor([
      [1, NaN, 3, 0],
      [2, 2, -1, 5],
    ]);
    const run = () => {
      const m = x.max(1);
      const s = x.sort(0, true);
      return [
        m.values,
        m.indices,
        s.values,
        s.indices,
        x.argmin(1),
        x.topk(2).indices,
        x.softmax(1).cumsum(1),
        x.logsumexp(0),
        x.var(1),
        x.norm(3, 1),
        x.amax(0),
      ];
    };
    const eager = run();
    const pending = lazy(run);
    expect(pending.some(isPending)).toBe(true);
    pending.forEach((t, i) => expectClose(t, eager[i]!, {}, `result ${i}`));
  });

  it("programs depend on shapes and options, not values: one compile serves both calls", () => {
    const a = tensor([[1, 2, 3]]);
    const b = tensor([[3, 2, 1]]);
    resetOpCache();
    expect(flat(topk(a, 2).indices)).toEqual([2, 1]);
    expect(flat(topk(b, 2).indices)).toEqual([0, 1]);
    expect(opCacheStats()).toMatchObject({ misses: 1, hits: 1 });
  });
});

// ---- Properties against plain-JS references -------------------------------------------------

/** Float32 values with NaN, ±inf, ±0 and ties among them. */
const floats = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: -4, max: 4 }).map((v) => v / 2) },
  { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, -0) },
  { weight: 3, arbitrary: fc.float({ noNaN: true, noDefaultInfinity: true }) },
);

/** PyTorch's order: numbers ascending, NaN above everything; stable. */
function referenceSort(xs: readonly number[], descending: boolean): number[] {
  const key = (v: number) => (Number.isNaN(v) ? Infinity : v);
  const rank = (a: number, b: number) => {
    const na = Number.isNaN(a);
    const nb = Number.isNaN(b);
    if (na || nb) return na === nb ? 0 : na ? 1 : -1;
    return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
  };
  const idx = xs.map((_, i) => i);
  return idx.sort((i, j) => (descending ? -1 : 1) * rank(xs[i]!, xs[j]!) || i - j);
}

function sameFloat(a: number, b: number): boolean {
  return (Number.isNaN(a) && Number.isNaN(b)) || a === b;
}

describe("properties", () => {
  it("sort is a stable permutation in PyTorch's order (NaN last ascending)", () => {
    fc.assert(
      fc.property(fc.array(floats, { maxLength: 12 }), fc.boolean(), (raw, descending) => {
        const xs = raw.map(Math.fround);
        const { values, indices } = sort(tensor(xs), { descending, stable: true });
        const want = referenceSort(xs, descending);
        expect(flat(indices)).toEqual(want);
        flat(values).forEach((v, i) => expect(sameFloat(v, xs[want[i]!]!)).toBe(true));
      }),
      { numRuns: 60 },
    );
  });

  it("argmax/argmin pick the first extreme, NaN first of all", () => {
    fc.assert(
      fc.property(fc.array(floats, { minLength: 1, maxLength: 12 }), (raw) => {
        const xs = raw.map(Math.fround);
        const nan = xs.findIndex(Number.isNaN);
        const first = (better: (a: number, b: number) => boolean) =>
          nan >= 0 ? nan : xs.reduce((best, v, i) => (better(v, xs[best]!) ? i : best), 0);
        expect(tensor(xs).argmax().item()).toBe(first((a, b) => a > b));
        expect(tensor(xs).argmin().item()).toBe(first((a, b) => a < b));
        const m = max(tensor([xs]), 1);
        expect(m.indices.item()).toBe(first((a, b) => a > b));
        expect(sameFloat(m.values.item() as number, xs[first((a, b) => a > b)]!)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it("topk is the head of the sort", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -50, max: 50 }), { minLength: 1, maxLength: 10 }),
        fc.boolean(),
        fc.nat(),
        (xs, largest, kk) => {
          const k = kk % (xs.length + 1);
          const x = tensor(xs, { dtype: "int32" });
          const t = topk(x, k, { largest });
          const s = sort(x, { descending: largest });
          expect(flat(t.values)).toEqual(flat(s.values).slice(0, k));
          expect(flat(t.indices)).toEqual(flat(s.indices).slice(0, k));
        },
      ),
      { numRuns: 40 },
    );
  });

  it("cumsum of int32 is the running sum in int64", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -1e6, max: 1e6 }), { maxLength: 12 }), (xs) => {
        const r = cumsum(tensor(xs, { dtype: "int32" }), 0);
        expect(r.dtype).toBe("int64");
        let acc = 0;
        expect(flat(r)).toEqual(xs.map((v) => (acc += v)));
      }),
      { numRuns: 40 },
    );
  });
});

// ---- Errors ---------------------------------------------------------------------------------

describe("errors name the op, the shape and the argument", () => {
  const x = tensor([
    [1, 2],
    [3, 4],
  ]);
  const empty = tensor([], { shape: [2, 0] });
  const ints = tensor([1, 2], { dtype: "int32" });

  function fails(fn: () => unknown, op: string, pattern: RegExp): void {
    let err: unknown;
    try {
      fn();
    } catch (e) {
      err = e;
    }
    expect(err, `expected ${op} to throw`).toBeInstanceOf(OpError);
    expect((err as OpError).op).toBe(op);
    expect((err as Error).message).toMatch(pattern);
  }

  it("max, min, amax, argmax of nothing", () => {
    fails(() => tensor([]).max(), "max", /^max: cannot reduce an empty tensor \(shape \[0\]\)/);
    fails(() => empty.min(1), "min", /dim 1 of size 0 \(input shape \[2,0\]\)/);
    fails(() => empty.amax([0, 1]), "amax", /empty tensor \(shape \[2,0\]\)/);
    fails(() => empty.amin(-1), "amin", /dim 1 of size 0/);
    fails(() => empty.argmax(), "argmax", /empty tensor/);
    fails(() => empty.argmin(1, true), "argmin", /dim 1 of size 0/);
    // Reducing a dim that is not empty is fine.
    expect(empty.max(0).values.shape).toEqual([0]);
  });

  it("bad dims", () => {
    fails(() => x.max(2), "max", /dim 2 is out of range for a tensor of 2 dims \(expected -2\.\.1/);
    fails(() => x.softmax(-3), "softmax", /dim -3 is out of range/);
    fails(() => x.cumsum(5), "cumsum", /dim 5 is out of range/);
    fails(() => x.sort(2), "sort", /dim 2 is out of range/);
    fails(() => x.amax([0, -2]), "amax", /dim -2 appears more than once/);
  });

  it("bad arguments", () => {
    fails(
      () => x.max(x as never),
      "max",
      /argument 'dim' must be an integer \(for the elementwise maximum of two tensors use maxim/,
    );
    fails(() => ops.min(x, x as never), "min", /use minimum/);
    fails(() => x.max({ keepdim: true } as never), "max", /keepdim needs a dim/);
    fails(() => x.norm("nuc" as never), "norm", /'nuc', the nuclear norm, is not supported/);
    fails(() => x.norm("l2" as never), "norm", /argument 'p' must be a number/);
    fails(() => x.var({ unbiased: true, correction: 0 }), "var", /either unbiased or correction/);
    fails(() => x.softmax(undefined as never), "softmax", /argument 'dim' is required/);
    fails(() => x.logsumexp(undefined as never), "logsumexp", /argument 'dim' is required/);
    const e = (() => {
      try {
        x.topk(1, { dim: 0, k: 2 } as never);
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(ArgumentError);
  });

  it("dtypes PyTorch refuses", () => {
    fails(() => ints.var(), "var", /expected a floating point input, got int32/);
    fails(() => ints.std(), "std", /floating point/);
    fails(() => ints.norm(), "norm", /got int32 \(pass \{ dtype: "float32" \}\)/);
    fails(() => ints.softmax(0), "softmax", /got int32 \(pass \{ dtype: "float32" \}\)/);
    fails(() => x.logSoftmax(0, "int32"), "logSoftmax", /got int32 as dtype/);
    fails(() => x.cumsum(0, "bool"), "cumsum", /dtype bool is not supported/);
    fails(() => ints.mean(), "mean", /must be floating point, got int32/);
  });

  it("topk's k out of range", () => {
    const msg = /k \(3\) is out of range: expected 0\.\.2 for dim 1 of shape \[2,2\]/;
    fails(() => x.topk(3), "topk", msg);
    fails(() => x.topk(-1), "topk", /k \(-1\) is out of range/);
    fails(() => tensor(1).topk(2), "topk", /expected 0\.\.1 for a zero-dim tensor/);
  });
});
