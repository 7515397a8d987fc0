// The first ops, each checked against a plain-JS reference written in the test (numpy
// broadcasting by index arithmetic in reference.ts; f32 results as Math.fround of the double
// result, which is what one IEEE f32 operation gives) or against the IR evaluator on an
// independently built module (matmul). Also: negative dims, keepdim, empty tensors, and the
// error messages, which name the op, the shapes and the argument. Every case runs on each
// registered backend.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { arrayShape } from "../../ir/shape.ts";
import { backendNames, backendTier } from "../../runtime/index.ts";
import { EPS, PROGRAM_EPS_FACTOR, PROGRAM_ULPS, ulp } from "../../runtime/tiers.ts";
import { setEagerBackend } from "../../tensor/dispatch.ts";
import {
  add,
  div,
  eq,
  exp,
  lt,
  matmul,
  maximum,
  mean,
  mul,
  neg,
  OpError,
  ops,
  relu,
  sub,
  sum,
  tensor,
  where,
  zeros,
  type Tensor,
} from "../../tensor/index.ts";
import { expectSums, f32, flat, mapRef, reduceRef, ref, values } from "./reference.ts";

const fr = Math.fround;

/** The backend eager ops run on in the current block. */
let backendNow = "js";

/** The frontend's semantics must hold whichever backend eager ops run on. */
function onEachBackend(name: string, fn: () => void): void {
  describe.each(backendNames())(`${name} [%s]`, (backend) => {
    beforeAll(() => {
      setEagerBackend(backend);
      backendNow = backend;
    });
    afterAll(() => setEagerBackend(undefined));
    fn();
  });
}

function t(shape: number[], seed: number, dtype: "float32" | "int32" = "float32"): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = values(n, seed).map((y) => (dtype === "int32" ? Math.round(y * 3) : y));
  return tensor(v, { dtype, shape });
}

function expectRef(got: Tensor, expected: { shape: number[]; values: number[] }) {
  expect(got.shape).toEqual(expected.shape);
  expect(flat(got)).toEqual(expected.values);
}

/**
 * A multi-operation op's result: bit for bit on an exact-tier backend, within the program bound
 * of runtime/tiers.ts (ulps of the result plus eps times the inputs' and result's scale) on a
 * tolerance-tier one.
 */
function expectProgram(
  got: Tensor,
  expected: { shape: number[]; values: number[] },
  inputs: readonly { values: number[] }[],
) {
  if (backendTier(backendNow) === "exact") {
    expectRef(got, expected);
    return;
  }
  expect(got.shape).toEqual(expected.shape);
  const all = [...expected.values, ...inputs.flatMap((r) => r.values)];
  const scale = Math.max(0, ...all.filter(Number.isFinite).map(Math.abs));
  flat(got).forEach((g, i) => {
    const w = expected.values[i]!;
    const bound = PROGRAM_ULPS * ulp(w, "f32") + PROGRAM_EPS_FACTOR * EPS.f32 * scale;
    expect(Math.abs(g - w), `element ${i}: ${g} vs ${w}`).toBeLessThanOrEqual(bound);
  });
}

const SHAPE_PAIRS: [number[], number[]][] = [
  [
    [2, 3],
    [2, 3],
  ],
  [[2, 3], [3]],
  [
    [2, 1],
    [1, 4],
  ],
  [
    [4, 1, 3],
    [2, 1],
  ],
  [[], [2, 2]],
  [[0, 3], [3]],
  [
    [0, 3],
    [1, 1],
  ],
  [[3], []],
];

onEachBackend("elementwise arithmetic (float32, broadcasting)", () => {
  it.each(SHAPE_PAIRS)("%j with %j", (sa, sb) => {
    const a = t(sa, 1);
    const b = t(sb, 2);
    const ra = ref(a);
    const rb = ref(b);
    expectRef(
      add(a, b),
      mapRef([ra, rb], (u, v) => fr(u + v)),
    );
    expectRef(
      sub(a, b),
      mapRef([ra, rb], (u, v) => fr(u - v)),
    );
    expectRef(
      mul(a, b),
      mapRef([ra, rb], (u, v) => fr(u * v)),
    );
    expectRef(
      div(a, b),
      mapRef([ra, rb], (u, v) => fr(u / v)),
    );
    expectRef(
      maximum(a, b),
      mapRef([ra, rb], (u, v) => Math.max(u, v)),
    );
    expectRef(
      eq(a, a),
      mapRef([ra], () => 1),
    );
    expectRef(
      lt(a, b),
      mapRef([ra, rb], (u, v) => (u < v ? 1 : 0)),
    );
    // With alpha the op is two operations (a multiply, then the add): one program, which a
    // tolerance-tier backend may contract to an FMA (runtime/tiers.ts).
    expectProgram(
      add(a, b, { alpha: 2.5 }),
      mapRef([ra, rb], (u, v) => fr(u + fr(v * 2.5))),
      [ra, rb],
    );
    expectProgram(
      sub(a, b, 3),
      mapRef([ra, rb], (u, v) => fr(u - fr(v * 3))),
      [ra, rb],
    );
  });

  it("scalars take part as wrapped numbers", () => {
    const a = t([2, 3], 3);
    const ra = ref(a);
    expectRef(
      a.add(1.25),
      mapRef([ra], (u) => fr(u + 1.25)),
    );
    expectRef(
      ops.add(2, a),
      mapRef([ra], (u) => fr(2 + u)),
    );
    expectRef(
      a.mul(0.1),
      mapRef([ra], (u) => fr(u * fr(0.1))),
    );
    expectRef(
      a.div(4),
      mapRef([ra], (u) => fr(u / 4)),
    );
    expectRef(
      a.lt(0),
      mapRef([ra], (u) => (u < 0 ? 1 : 0)),
    );
    expectRef(
      a.eq(a.add(0)),
      mapRef([ra], () => 1),
    );
    expect(a.add(1).dtype).toBe("float32");
  });

  it("integer arithmetic wraps and keeps the dtype; true division is float32", () => {
    const a = tensor([2147483647, -7, 9], { dtype: "int32" });
    const b = tensor([1, 2, -4], { dtype: "int32" });
    expect(a.add(b).toArray()).toEqual([-2147483648, -5, 5]);
    expect(a.mul(b).dtype).toBe("int32");
    expect(a.sub(b, 2).toArray()).toEqual([2147483645, -11, 17]);
    const q = a.div(b);
    expect(q.dtype).toBe("float32");
    expect(flat(q)).toEqual([fr(2147483647), -3.5, -2.25]);
    expect(tensor([5], { dtype: "uint8" }).div(2).dtype).toBe("float32");
    expect(
      tensor([true])
        .div(tensor([true]))
        .toArray(),
    ).toEqual([1]);
  });

  it("div rounding modes match trunc/floor of the quotient", () => {
    const a = [7, -7, 7, -7, 0, 5, -1];
    const b = [2, 2, -2, -2, 3, 5, 3];
    const ints = ops.div(tensor(a, { dtype: "int32" }), tensor(b, { dtype: "int32" }), "floor");
    expect(ints.dtype).toBe("int32");
    expect(ints.toArray()).toEqual(a.map((x, i) => Math.floor(x / b[i]!)));
    const trunc = ops.div(tensor(a, { dtype: "int64" }), tensor(b, { dtype: "int64" }), "trunc");
    expect(trunc.toArray()).toEqual(a.map((x, i) => Math.trunc(x / b[i]!) + 0));
    const fa = [7.5, -7.5, 7.5, -7.5, 0.25, -0.25, 1, 5];
    const fb = [2, 2, -2, -2, 1, 1, 0, 0.5];
    const ff = div(tensor(fa), tensor(fb), { roundingMode: "floor" });
    expect(flat(ff)).toEqual(fa.map((x, i) => (fb[i] === 0 ? x / fb[i]! : Math.floor(x / fb[i]!))));
    const ft = div(tensor(fa), tensor(fb), { roundingMode: "trunc" });
    expect(flat(ft)).toEqual(fa.map((x, i) => Math.trunc(x / fb[i]!)));
    // floor(-0.25 / 1) is -1; a zero quotient keeps its sign.
    expect(Object.is(flat(div(tensor([-0.0]), tensor([3]), "floor"))[0], -0)).toBe(true);
    const h = div(tensor([7.5], { dtype: "float16" }), 2, "floor");
    expect(h.dtype).toBe("float16");
    expect(h.toArray()).toEqual([3]);
  });

  it("bool arithmetic: add is or, mul is and; sub and neg refuse bool", () => {
    const a = tensor([true, true, false, false]);
    const b = tensor([true, false, true, false]);
    expect(a.add(b).toArray()).toEqual([true, true, true, false]);
    expect(a.add(b).dtype).toBe("bool");
    expect(a.mul(b).toArray()).toEqual([true, false, false, false]);
    expect(a.add(1).toArray()).toEqual([2, 2, 1, 1]);
    expect(a.add(1).dtype).toBe("int64");
    expect(() => a.sub(b)).toThrow(
      "sub: bool tensors are not supported; use logicalXor or logicalNot instead",
    );
    expect(() => a.neg()).toThrow(/neg: bool tensors are not supported/);
    expect(() => a.relu()).toThrow(/relu: bool tensors are not supported/);
  });

  it("alpha must fit the result's category", () => {
    const i = tensor([1, 2], { dtype: "int32" });
    expect(() => i.add(i, 0.5)).toThrow(
      "add: for integral inputs, alpha must not be a floating point number, got 0.5",
    );
    expect(() => i.add(i, true)).toThrow(/boolean alpha is only supported for bool results/);
    expect(i.add(i, 2).toArray()).toEqual([3, 6]);
  });
});

onEachBackend("unary ops", () => {
  const a = t([3, 4], 4);
  const ra = ref(a);

  it("neg, exp, relu", () => {
    expectRef(
      neg(a),
      mapRef([ra], (u) => -u),
    );
    expectRef(
      exp(a),
      mapRef([ra], (u) => fr(Math.exp(u))),
    );
    expectRef(
      relu(a),
      mapRef([ra], (u) => (u > 0 ? u : 0)),
    );
    expect(neg(tensor([3], { dtype: "int64" })).toArray()).toEqual([-3]);
  });

  it("exp of integers is float32; relu keeps integers", () => {
    const i = tensor([0, 1, -1], { dtype: "int32" });
    expect(exp(i).dtype).toBe("float32");
    expect(flat(exp(i))).toEqual([1, fr(Math.E), fr(Math.exp(-1))]);
    expect(relu(i).toArray()).toEqual([0, 1, 0]);
    expect(relu(i).dtype).toBe("int32");
  });

  it("NaN propagates through relu and maximum", () => {
    expect(flat(relu(tensor([NaN, -1])))).toEqual([NaN, 0]);
    expect(flat(maximum(tensor([NaN, 1]), tensor([0, NaN])))).toEqual([NaN, NaN]);
  });
});

onEachBackend("where", () => {
  it("selects with broadcasting and promotion", () => {
    const c = tensor([true, false, true]);
    const a = t([2, 3], 5);
    const b = t([2, 1], 6);
    const expected = mapRef([ref(c), ref(a), ref(b)], (k, u, v) => (k ? u : v));
    expectRef(where(c, a, b), expected);
    expectRef(a.where(c, b), expected);
    const s = where(c, 1, 0);
    expect(s.dtype).toBe("int64");
    expect(s.toArray()).toEqual([1, 0, 1]);
    expect(where(c, 1.5, tensor([1, 2, 3], { dtype: "int32" })).dtype).toBe("float32");
    expect(() => where(tensor([1, 0]), a, b)).toThrow(
      "where: condition must be a bool tensor, got float32",
    );
  });
});

onEachBackend("reductions", () => {
  const a = t([2, 3, 4], 7);
  const ra = ref(a);
  const add32 = (acc: number, x: number) => fr(acc + x);

  it.each([
    [undefined, false],
    [0, false],
    [1, true],
    [-1, false],
    [[0, 2], true],
    [[-1, -3], false],
    [[], false],
  ] as [number | number[] | undefined, boolean][])("sum dim=%j keepdim=%s", (dim, keepdim) => {
    const dims =
      dim === undefined || (Array.isArray(dim) && dim.length === 0)
        ? [0, 1, 2]
        : (Array.isArray(dim) ? dim : [dim]).map((d) => (d < 0 ? d + 3 : d));
    // Sums in the backend's tier: the same sums over |a| bound a reordered sum's error.
    const m = reduceRef(ra, dims, keepdim, 0, add32);
    const mags = reduceRef({ ...ra, values: ra.values.map(Math.abs) }, dims, keepdim, 0,
      (acc, x) => acc + x).values;
    const count = dims.reduce((n, d) => n * a.shape[d]!, 1);
    for (const got of [sum(a, dim, keepdim), a.sum({ dim, keepdim })]) {
      expect(got.shape).toEqual(m.shape);
      expectSums(backendNow, flat(got), m.values, mags, count);
    }
    const mn = mean(a, dim, keepdim);
    expect(mn.shape).toEqual(m.shape);
    expectSums(backendNow, flat(mn), m.values.map((v) => fr(v / count)),
      mags.map((v) => v / count), count);
  });

  it("integer and bool sums are int64; dtype overrides", () => {
    const i = tensor(
      [
        [1, 2],
        [3, 4],
      ],
      { dtype: "int32" },
    );
    expect(i.sum().dtype).toBe("int64");
    expect(i.sum().item()).toBe(10);
    expect(i.sum(0).toArray()).toEqual([4, 6]);
    expect(tensor([true, true, false]).sum().item()).toBe(2);
    expect(tensor([true, true, false]).sum().dtype).toBe("int64");
    expect(i.sum({ dtype: "float32" }).dtype).toBe("float32");
    expect(tensor([2147483647, 1], { dtype: "int32" }).sum().item()).toBe(2147483648);
  });

  it("half-precision sums accumulate in float32", () => {
    const n = 1000;
    const h = zeros([n], { dtype: "float16" }).add(0.1);
    const v = flat(h)[0]!;
    let acc = 0;
    for (let k = 0; k < n; k++) acc = fr(acc + v);
    const s = h.sum();
    expect(s.dtype).toBe("float16");
    expect(s.item()).toBe(tensor([acc], { dtype: "float16" }).item());
  });

  it("mean needs a floating dtype; empty means are NaN; empty sums 0", () => {
    expect(() => tensor([1, 2], { dtype: "int32" }).mean()).toThrow(
      /mean: could not infer the output dtype: the input must be floating point, got int32/,
    );
    expect(tensor([1, 2], { dtype: "int32" }).mean({ dtype: "float32" }).item()).toBe(1.5);
    expect(flat(zeros(0, 3).mean(0))).toEqual([NaN, NaN, NaN]);
    expect(zeros(0, 3).sum().item()).toBe(0);
    expect(zeros(0, 3).sum(1).shape).toEqual([0]);
  });

  it("zero-dim inputs accept dim 0 and -1", () => {
    expect(tensor(5).sum(0).item()).toBe(5);
    expect(tensor(5).sum(-1, true).shape).toEqual([]);
  });

  it("bad dims name the op", () => {
    expect(() => a.sum(3)).toThrow(
      "sum: dim 3 is out of range for a tensor of 3 dims (expected -3..2)",
    );
    expect(() => a.sum([0, -3])).toThrow("sum: dim -3 appears more than once in [0, -3]");
    expect(() => a.mean(-4)).toThrow(OpError);
  });
});

onEachBackend("shape ops", () => {
  const a = t([2, 3, 4], 8);
  const v = flat(a);

  it("reshape and view infer -1 and keep row-major order", () => {
    expect(a.reshape(6, -1).shape).toEqual([6, 4]);
    expect(flat(a.reshape(-1))).toEqual(v);
    expect(a.view(4, 6).shape).toEqual([4, 6]);
    expect(flat(a.view([24]))).toEqual(v);
    expect(tensor([7]).reshape([]).shape).toEqual([]);
    expect(zeros(0, 4).reshape(-1, 2).shape).toEqual([0, 2]);
    expect(() => a.reshape(5, -1)).toThrow("reshape: shape [5,-1] is invalid for input of size 24");
    expect(() => a.view(-1, -1)).toThrow("view: only one dim can be -1, got [-1,-1]");
    expect(() => a.reshape(2, 2)).toThrow("reshape: shape [2,2] is invalid for input of size 24");
  });

  it("permute and transpose move elements", () => {
    const p = a.permute(2, 0, -2);
    expect(p.shape).toEqual([4, 2, 3]);
    const at = (i: number, j: number, k: number) => v[i * 12 + j * 4 + k]!;
    const pv = flat(p);
    for (let k = 0; k < 4; k++) {
      for (let i = 0; i < 2; i++)
        for (let j = 0; j < 3; j++) expect(pv[k * 6 + i * 3 + j]).toBe(at(i, j, k));
    }
    const tr = a.transpose(0, -1);
    expect(tr.shape).toEqual([4, 3, 2]);
    expect(flat(tr)[1]).toBe(at(1, 0, 0));
    expect(tensor(3).transpose(0, -1).item()).toBe(3);
    expect(() => a.permute(0, 1)).toThrow(
      "permute: dims [0,1] must name each of the input's 3 dims once",
    );
    expect(() => a.permute(0, 0, 1)).toThrow(/permute: dim 0 appears more than once/);
    expect(() => a.transpose(0, 3)).toThrow(
      "transpose: dim1 3 is out of range for a tensor of 3 dims (expected -3..2)",
    );
  });

  it("unsqueeze and squeeze", () => {
    expect(a.unsqueeze(0).shape).toEqual([1, 2, 3, 4]);
    expect(a.unsqueeze(-1).shape).toEqual([2, 3, 4, 1]);
    expect(a.unsqueeze(3).shape).toEqual([2, 3, 4, 1]);
    expect(tensor(1).unsqueeze(0).shape).toEqual([1]);
    expect(() => a.unsqueeze(5)).toThrow(/unsqueeze: dim 5 is out of range for a tensor of 4 dims/);
    const s = zeros(1, 2, 1, 3);
    expect(s.squeeze().shape).toEqual([2, 3]);
    expect(s.squeeze(0).shape).toEqual([2, 1, 3]);
    expect(s.squeeze(1).shape).toEqual([1, 2, 1, 3]);
    expect(s.squeeze([0, -2]).shape).toEqual([2, 3]);
    expect(flat(a.unsqueeze(1).squeeze(1))).toEqual(v);
    expect(() => s.squeeze(4)).toThrow(OpError);
  });

  it("expand broadcasts size-1 and new dims", () => {
    const c = tensor([[1], [2]]);
    expect(c.expand(2, 3).toArray()).toEqual([
      [1, 1, 1],
      [2, 2, 2],
    ]);
    expect(c.expand(-1, 2).toArray()).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(c.expand(2, 2, 2).shape).toEqual([2, 2, 2]);
    expect(c.expand([3, 2, 0]).shape).toEqual([3, 2, 0]);
    expect(() => c.expand(3, 3)).toThrow(
      "expand: the expanded size (3) must match the existing size (2) at non-singleton dim 0; " +
        "target sizes [3,3], tensor sizes [2,1]",
    );
    expect(() => c.expand(3)).toThrow(
      /the number of sizes \(1\) must be at least the number of dims/,
    );
    expect(() => c.expand(-1, 2, 2)).toThrow(/size -1 is not allowed in a new leading dim/);
  });
});

/** matmul by the IR evaluator on a hand-built dot: a [..., n, k] x [k, m] after broadcasting. */
function dotByEvaluator(a: Tensor, b: Tensor): { shape: number[]; values: number[] } {
  const mb = new ModuleBuilder("ref");
  mb.entry("main", (bb) => {
    const x = bb.parameter(arrayShape("f32", a.shape));
    const y = bb.parameter(arrayShape("f32", b.shape));
    return bb.dot(x, y, {
      lhsBatch: a.shape.slice(0, -2).map((_, i) => i),
      rhsBatch: b.shape.slice(0, -2).map((_, i) => i),
      lhsContracting: [a.ndim - 1],
      rhsContracting: [b.ndim - 2],
    });
  });
  const out = evaluate(mb.build(), [
    literal("f32", a.shape, a.data() as Float32Array),
    literal("f32", b.shape, b.data() as Float32Array),
  ]) as Literal;
  return { shape: [...out.dims], values: out.toNumbers() };
}

/** Naive matmul of row-major matrices, accumulating in double and rounding once. */
function naive(a: number[], b: number[], n: number, k: number, m: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let q = 0; q < k; q++) s += a[i * k + q]! * b[q * m + j]!;
      out.push(fr(s));
    }
  }
  return out;
}

onEachBackend("matmul", () => {
  it("2-D x 2-D against the IR evaluator and a naive loop", () => {
    const a = t([3, 4], 9);
    const b = t([4, 5], 10);
    const r = matmul(a, b);
    const abs = (x: Tensor) => flat(x).map(Math.abs);
    const mags = naive(abs(a), abs(b), 3, 4, 5);
    const want = dotByEvaluator(a, b);
    expect(r.shape).toEqual(want.shape);
    expectSums(backendNow, flat(r), want.values, mags, 4);
    expectSums(backendNow, flat(r), naive(flat(a), flat(b), 3, 4, 5), mags, 4);
    expectSums(backendNow, flat(a.matmul(b)), want.values, mags, 4);
  });

  it("vectors: 1-D x 1-D, 1-D x 2-D, 2-D x 1-D", () => {
    const u = t([4], 11);
    const w = t([4], 12);
    const m = t([4, 3], 13);
    const uv = flat(u);
    const abs = (x: number[]) => x.map(Math.abs);
    const check = (got: Tensor, a: number[], b: number[], n: number, k: number, m: number) =>
      expectSums(backendNow, flat(got), naive(a, b, n, k, m), naive(abs(a), abs(b), n, k, m), k);
    const dot = matmul(u, w);
    expect(dot.shape).toEqual([]);
    check(dot, uv, flat(w), 1, 4, 1);
    const um = matmul(u, m);
    expect(um.shape).toEqual([3]);
    check(um, uv, flat(m), 1, 4, 3);
    const mt = t([3, 4], 14);
    const mu = matmul(mt, u);
    expect(mu.shape).toEqual([3]);
    check(mu, flat(mt), uv, 3, 4, 1);
  });

  it("batched with broadcasting", () => {
    const cases: [number[], number[], number[]][] = [
      [
        [2, 3, 4],
        [4, 5],
        [2, 3, 5],
      ],
      [
        [3, 4],
        [2, 4, 5],
        [2, 3, 5],
      ],
      [
        [2, 1, 3, 4],
        [5, 4, 2],
        [2, 5, 3, 2],
      ],
      [
        [2, 3, 4],
        [2, 4, 5],
        [2, 3, 5],
      ],
      [[4], [2, 4, 5], [2, 5]],
      [[2, 3, 4], [4], [2, 3]],
    ];
    for (const [sa, sb, so] of cases) {
      const a = t(sa, 15);
      const b = t(sb, 16);
      const r = matmul(a, b);
      expect(r.shape, `${sa} x ${sb}`).toEqual(so);
      // Reference: every output matrix from the naive loop on the broadcast operands.
      const a3 = a.ndim === 1 ? a.reshape(1, -1) : a;
      const b3 = b.ndim === 1 ? b.reshape(-1, 1) : b;
      const [n, k] = a3.shape.slice(-2) as [number, number];
      const m = b3.shape[b3.ndim - 1]!;
      const batch = so.length - (a.ndim === 1 || b.ndim === 1 ? 1 : 2);
      const bshape = so.slice(0, batch);
      const ea = flat(a3.expand(...bshape, n, k));
      const eb = flat(b3.expand(...bshape, k, m));
      const nb = bshape.reduce((x, y) => x * y, 1);
      const expected: number[] = [];
      const mags: number[] = [];
      for (let q = 0; q < nb; q++) {
        const qa = ea.slice(q * n * k, (q + 1) * n * k);
        const qb = eb.slice(q * k * m, (q + 1) * k * m);
        expected.push(...naive(qa, qb, n, k, m));
        mags.push(...naive(qa.map(Math.abs), qb.map(Math.abs), n, k, m));
      }
      expectSums(backendNow, flat(r), expected, mags, k);
    }
    const a = t([2, 3, 4], 17);
    const b = t([2, 4, 5], 18);
    const want = dotByEvaluator(a, b);
    const absT = (x: Tensor) => tensor(flat(x).map(Math.abs), { shape: x.shape });
    expectSums(backendNow, flat(matmul(a, b)), want.values, dotByEvaluator(absT(a), absT(b)).values,
      4);
  });

  it("integers, empty contractions, and errors", () => {
    const i = tensor(
      [
        [1, 2],
        [3, 4],
      ],
      { dtype: "int32" },
    );
    expect(i.matmul(i).toArray()).toEqual([
      [7, 10],
      [15, 22],
    ]);
    expect(i.matmul(i).dtype).toBe("int32");
    expect(zeros(2, 0).matmul(zeros(0, 3)).toArray()).toEqual([
      [0, 0, 0],
      [0, 0, 0],
    ]);
    expect(() => matmul(t([2, 3], 1), t([4, 5], 2))).toThrow(
      "matmul: shapes [2,3] and [4,5] cannot be multiplied (2x3 and 4x5)",
    );
    expect(() => matmul(tensor(1), t([2], 1))).toThrow(
      "matmul: both arguments need at least 1 dim, got shapes [] and [2]",
    );
    expect(() => matmul(i, t([2, 2], 1))).toThrow(
      "matmul: expected both inputs to have the same dtype, got int32 and float32",
    );
    expect(() => matmul(t([2, 2, 3], 1), t([3, 3, 4], 2))).toThrow(
      "matmul: shapes [2,2,3] and [3,3,4] cannot be multiplied: batch dims [2] and [3] " +
        "cannot be broadcast (dim -3: 2 vs 3)",
    );
    expect(() => matmul(t([5, 2, 2, 3], 1), t([4, 3, 2], 2))).toThrow(
      "matmul: shapes [5,2,2,3] and [4,3,2] cannot be multiplied: batch dims [5,2] and [4] " +
        "cannot be broadcast (dim -3: 2 vs 4)",
    );
  });
});

onEachBackend("to", () => {
  it("converts as PyTorch does for in-range values", () => {
    const x = tensor([1.7, -1.7, 0, 255.9]);
    expect(x.to("int32").toArray()).toEqual([1, -1, 0, 255]);
    expect(x.to("bool").toArray()).toEqual([true, true, false, true]);
    expect(x.to("uint8").toArray()).toEqual([1, 0, 0, 255]);
    expect(x.to({ dtype: "int64" }).toArray()).toEqual([1, -1, 0, 255]);
    expect(
      tensor([2n ** 60n + 1n])
        .to("float32")
        .item(),
    ).toBe(2 ** 60);
    expect(tensor([70000.5]).to("float16").item()).toBe(Infinity);
    expect(x.to(tensor([1], { dtype: "int32" })).dtype).toBe("int32");
    expect(f32([0.1])[0]).toBe(tensor([0.1]).to("float32").item());
  });
});

onEachBackend("broadcast errors", () => {
  it("name the op and both shapes", () => {
    expect(() => add(zeros(2, 3), zeros(4))).toThrow(
      "add: shapes [2,3] and [4] cannot be broadcast (dim -1: 3 vs 4)",
    );
    expect(() => where(zeros([2], { dtype: "bool" }), zeros(3), 1)).toThrow(
      "where: shapes [2] and [3] and [] cannot be broadcast (dim -1: 2 vs 3)",
    );
    expect(() => zeros(0).add(zeros(2))).toThrow(/add: shapes \[0\] and \[2\] cannot be broadcast/);
  });
});
