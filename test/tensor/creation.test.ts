// Creation: tensor() from nested/typed/flat data with dtype inference and conversion, the IR-
// lowered fills and ranges (zeros ones full arange linspace eye and *Like) checked against
// plain-JS formulas, and random tensors: reproducible under a seed, in range, roughly the
// right distribution, with generators independent of the default one. A size no array can
// hold is an OpError naming the op, the element count and the bytes, eager, lazy and compiled.

import { describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { roundToF16 } from "../../ir/literal.ts";
import {
  arange,
  ArgumentError,
  eye,
  fromBytes,
  full,
  fullLike,
  Generator,
  lazy,
  linspace,
  manualSeed,
  OpError,
  ones,
  onesLike,
  rand,
  randint,
  randintLike,
  randLike,
  randn,
  randnLike,
  tensor,
  zeros,
  zerosLike,
} from "../../tensor/index.ts";
import { flat } from "./reference.ts";

describe("tensor()", () => {
  it("infers the shape of nested arrays", () => {
    const x = tensor([[[1, 2, 3]], [[4, 5, 6]]]);
    expect(x.shape).toEqual([2, 1, 3]);
    expect(x.dtype).toBe("float32");
    expect(flat(x)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(tensor(7).shape).toEqual([]);
    expect(tensor([]).shape).toEqual([0]);
    expect(tensor([[], []]).shape).toEqual([2, 0]);
  });

  it("infers dtypes: numbers float32, bigints int64, booleans bool", () => {
    expect(tensor([1.5, 2]).dtype).toBe("float32");
    expect(tensor([[1n], [2n]]).dtype).toBe("int64");
    expect(tensor([true, false]).dtype).toBe("bool");
    expect(tensor([true, 2]).dtype).toBe("float32");
    expect(tensor([true, 2n]).dtype).toBe("int64");
    expect(tensor([]).dtype).toBe("float32");
  });

  it("keeps the kind of typed arrays", () => {
    expect(tensor(new Float32Array([1, 2])).dtype).toBe("float32");
    expect(tensor(new Float64Array([0.1])).toArray()).toEqual([Math.fround(0.1)]);
    expect(tensor(new Int32Array([1, -2])).dtype).toBe("int32");
    expect(tensor(new Int16Array([1])).dtype).toBe("int32");
    expect(tensor(new Uint8Array([255])).dtype).toBe("uint8");
    expect(tensor(new BigInt64Array([1n])).dtype).toBe("int64");
  });

  it("takes flat data with a shape (one dim may be -1)", () => {
    const x = tensor(new Int32Array([1, 2, 3, 4, 5, 6]), { shape: [2, -1] });
    expect(x.shape).toEqual([2, 3]);
    expect(x.toArray()).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(tensor([1, 2, 3, 4], "int32", [2, 2]).toArray()).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(() => tensor([1, 2, 3], { shape: [2, 2] })).toThrow(ArgumentError);
    expect(() => tensor([1, 2, 3], { shape: [2, 2] })).toThrow(
      /shape \[2,2\] is invalid for input of size 3/,
    );
  });

  it("converts values to a given dtype as PyTorch does", () => {
    expect(tensor([1.7, -1.7, 0.2], { dtype: "int32" }).toArray()).toEqual([1, -1, 0]);
    expect(tensor([0, 2, -0.5, NaN], { dtype: "bool" }).toArray()).toEqual([
      false,
      true,
      true,
      true,
    ]);
    expect(tensor([true, false], { dtype: "float32" }).toArray()).toEqual([1, 0]);
    expect(tensor([1n, 300n], { dtype: "int32" }).toArray()).toEqual([1, 300]);
    expect(tensor([0.1], { dtype: "float16" }).toArray()).toEqual([roundToF16(0.1)]);
    expect(() => tensor([256], { dtype: "uint8" })).toThrow(/out of range for uint8/);
    expect(() => tensor([-1], { dtype: "uint8" })).toThrow(/out of range for uint8/);
    expect(() => tensor([2 ** 31], { dtype: "int32" })).toThrow(/out of range for int32/);
    expect(() => tensor([Infinity], { dtype: "int64" })).toThrow(/cannot be stored as int64/);
  });

  it("rejects ragged and non-numeric data, naming where", () => {
    expect(() => tensor([[1, 2], [3]])).toThrow(
      "tensor: argument 'data' is ragged: expected length 2 at [1], got length 1",
    );
    expect(() => tensor([[1, 2], 3] as never)).toThrow(
      /ragged: expected length 2 at \[1\], got a scalar/,
    );
    expect(() => tensor([1, [2]] as never)).toThrow(
      /got a nested array \(the data is ragged\) at \[1\]/,
    );
    expect(() => tensor(["a"] as never)).toThrow(
      /must hold numbers, booleans or bigints; got "a" at \[0\]/,
    );
  });

  it("copies a tensor, converting when asked", () => {
    const x = tensor([1.5, 2.5]);
    const y = tensor(x);
    expect(y).not.toBe(x);
    expect(y.realize().storage).not.toBe(x.realize().storage);
    expect(y.toArray()).toEqual([1.5, 2.5]);
    expect(tensor(x, { dtype: "int32" }).toArray()).toEqual([1, 2]);
  });
});

describe("fills", () => {
  it("zeros, ones, full", () => {
    expect(zeros(2, 3).toArray()).toEqual([
      [0, 0, 0],
      [0, 0, 0],
    ]);
    expect(zeros([2, 3]).shape).toEqual([2, 3]);
    expect(zeros([]).toArray()).toBe(0);
    expect(ones(2, { dtype: "int32" }).toArray()).toEqual([1, 1]);
    expect(ones([2], "bool").toArray()).toEqual([true, true]);
    expect(zeros(0, 4).shape).toEqual([0, 4]);
    expect(full([2, 2], 7).dtype).toBe("int64");
    expect(full([2], 7.5).dtype).toBe("float32");
    expect(full([2], true).dtype).toBe("bool");
    expect(full([2], 2n ** 60n).toArray({ bigint: true })).toEqual([2n ** 60n, 2n ** 60n]);
    expect(full([2], 7.5, { dtype: "float16" }).toArray()).toEqual([7.5, 7.5]);
    expect(full([], -3).toArray()).toBe(-3);
    expect(() => zeros(2, -1)).toThrow(
      "zeros: argument 'size' must be a list of integers >= 0, got [2, -1]",
    );
  });

  it("*Like take shape and dtype from the input", () => {
    const x = tensor([[1, 2, 3]], { dtype: "int32" });
    expect(zerosLike(x).dtype).toBe("int32");
    expect(zerosLike(x).shape).toEqual([1, 3]);
    expect(onesLike(x, { dtype: "float16" }).toArray()).toEqual([[1, 1, 1]]);
    expect(fullLike(x, 4).toArray()).toEqual([[4, 4, 4]]);
    expect(fullLike(x, 4.5, "float32").toArray()).toEqual([[4.5, 4.5, 4.5]]);
  });
});

describe("ranges", () => {
  it("arange with integer arguments is int64 and exact", () => {
    expect(arange(5).toArray()).toEqual([0, 1, 2, 3, 4]);
    expect(arange(5).dtype).toBe("int64");
    expect(arange(2, 5).toArray()).toEqual([2, 3, 4]);
    expect(arange(10, 0, -3).toArray()).toEqual([10, 7, 4, 1]);
    expect(arange({ end: 3 }).toArray()).toEqual([0, 1, 2]);
    expect(arange(0).shape).toEqual([0]);
    expect(arange(0, 5, 2, { dtype: "float32" }).toArray()).toEqual([0, 2, 4]);
    expect(arange(0, 5.5).dtype).toBe("float32");
    expect(arange(0, 5.5).toArray()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("arange with a fractional step is float32, within an ulp of start + i*step", () => {
    const x = arange(-1, 1, 0.1);
    expect(x.dtype).toBe("float32");
    const v = flat(x);
    expect(v.length).toBe(Math.ceil(2 / 0.1));
    v.forEach((got, i) => expect(Math.abs(got - (-1 + i * 0.1))).toBeLessThan(1e-6));
  });

  it("arange rejects bad ranges", () => {
    expect(() => arange(0, 5, 0)).toThrow("arange: argument 'step' must be nonzero");
    expect(() => arange(5, 0, 1)).toThrow(OpError);
    expect(() => arange(5, 0, 1)).toThrow(/inconsistent with step 1/);
    expect(() => arange(0, Infinity)).toThrow(/must be finite/);
    expect(() => arange()).toThrow(/'end' is required/);
  });

  it("linspace follows PyTorch's float32 formula and hits both ends", () => {
    const [start, end, steps] = [-2, 3.3, 7];
    const fs = Math.fround(start);
    const fe = Math.fround(end);
    const step = Math.fround(Math.fround(fe - fs) / (steps - 1));
    const expected = Array.from({ length: steps }, (_, i) =>
      i < Math.floor(steps / 2)
        ? Math.fround(fs + Math.fround(step * i))
        : Math.fround(fe - Math.fround(step * (steps - 1 - i))),
    );
    const x = linspace(start, end, steps);
    expect(flat(x)).toEqual(expected);
    expect(flat(x)[0]).toBe(fs);
    expect(flat(x)[steps - 1]).toBe(fe);
    expect(linspace(0, 1, 1).toArray()).toEqual([0]);
    expect(linspace(0, 1, 0).shape).toEqual([0]);
    expect(linspace(0, 10, 6, { dtype: "int32" }).toArray()).toEqual([0, 2, 4, 6, 8, 10]);
  });

  it("eye", () => {
    expect(eye(3).toArray()).toEqual([
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ]);
    expect(eye(2, 3, { dtype: "bool" }).toArray()).toEqual([
      [true, false, false],
      [false, true, false],
    ]);
    expect(eye(0).shape).toEqual([0, 0]);
  });
});

describe("random", () => {
  it("the same seed gives the same values; another seed other values", () => {
    manualSeed(123);
    const a = [flat(rand(5)), flat(randn(5)), flat(randint(0, 100, [5]))];
    manualSeed(123);
    const b = [flat(rand(5)), flat(randn(5)), flat(randint(0, 100, [5]))];
    expect(b).toEqual(a);
    manualSeed(124);
    expect(flat(rand(5))).not.toEqual(a[0]);
  });

  it("an explicit generator does not touch the default one", () => {
    manualSeed(7);
    const expected = flat(rand(4));
    manualSeed(7);
    const g = new Generator(99);
    const fromG = flat(rand(4, { generator: g }));
    expect(flat(rand(4))).toEqual(expected);
    expect(flat(rand(4, { generator: new Generator(99) }))).toEqual(fromG);
    const state = g.getState();
    const next = flat(randn(3, { generator: g }));
    g.setState(state);
    expect(flat(randn(3, { generator: g }))).toEqual(next);
    expect(g.initialSeed()).toBe(99n);
  });

  it("rand is in [0, 1) for every float dtype", () => {
    manualSeed(1);
    for (const dtype of ["float32", "float16", "bfloat16"] as const) {
      const x = rand([4000], { dtype });
      expect(x.dtype).toBe(dtype);
      const v = flat(x);
      expect(Math.min(...v)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...v)).toBeLessThan(1);
      const mean = v.reduce((s, y) => s + y, 0) / v.length;
      expect(Math.abs(mean - 0.5)).toBeLessThan(0.03);
    }
    expect(() => rand(2, { dtype: "int32" })).toThrow(/must be a floating dtype/);
  });

  it("randn has mean 0 and standard deviation 1", () => {
    manualSeed(2);
    const v = flat(randn(20000));
    const mean = v.reduce((s, y) => s + y, 0) / v.length;
    const sd = Math.sqrt(v.reduce((s, y) => s + (y - mean) ** 2, 0) / v.length);
    expect(Math.abs(mean)).toBeLessThan(0.03);
    expect(Math.abs(sd - 1)).toBeLessThan(0.03);
    expect(v.every(Number.isFinite)).toBe(true);
  });

  it("randint covers [low, high) uniformly", () => {
    manualSeed(3);
    const x = randint(-3, 3, [6000]);
    expect(x.dtype).toBe("int64");
    const v = flat(x);
    const counts = new Map<number, number>();
    for (const y of v) counts.set(y, (counts.get(y) ?? 0) + 1);
    expect([...counts.keys()].sort((a, b) => a - b)).toEqual([-3, -2, -1, 0, 1, 2]);
    for (const c of counts.values()) expect(Math.abs(c - 1000)).toBeLessThan(150);
    expect(randint(5, [2, 2]).shape).toEqual([2, 2]);
    expect(flat(randint(5, [100])).every((y) => y >= 0 && y < 5)).toBe(true);
    expect(randint(0, 2, [3], { dtype: "uint8" }).dtype).toBe("uint8");
    expect(() => randint(5, 5, [2])).toThrow(
      "randint: low must be less than high, got low=5, high=5",
    );
    expect(() => randint(0, 300, [2], { dtype: "uint8" })).toThrow(/out of range for uint8/);
  });

  it("*Like forms take shape and dtype from the input", () => {
    const x = zeros([2, 3], { dtype: "float16" });
    expect(randLike(x).shape).toEqual([2, 3]);
    expect(randLike(x).dtype).toBe("float16");
    expect(randnLike(x, { dtype: "float32" }).dtype).toBe("float32");
    const i = zeros([4], { dtype: "int32" });
    const r = randintLike(i, 10);
    expect(r.dtype).toBe("int32");
    expect(flat(r).every((y) => y >= 0 && y < 10)).toBe(true);
    expect(flat(randintLike(i, 5, 7)).every((y) => y === 5 || y === 6)).toBe(true);
  });
});

describe("impossible sizes", () => {
  it.each([
    ["rand(1e10)", () => rand(1e10), /^rand: .*10000000000 float32 elements \(40000000000 bytes\)/],
    ["randn(1e5, 1e5)", () => randn(1e5, 1e5), /^randn: .*10000000000 float32 elements/],
    [
      "randint(0, 5, [1e10])",
      () => randint(0, 5, [1e10]),
      /^randint: .*10000000000 int64 elements \(80000000000 bytes\)/,
    ],
    [
      "fromBytes(bytes, 'float16', [1e10])",
      () => fromBytes(new Uint8Array(4), "float16", [1e10]),
      /^fromBytes: .*10000000000 float16 elements \(20000000000 bytes\)/,
    ],
  ] as const)("%s (filled in JS): an OpError naming the op, the count and the bytes", (_, f, m) => {
    expect(f).toThrow(OpError);
    expect(f).toThrow(m);
  });

  it.each([
    [
      "zeros(1e10)",
      () => zeros(1e10),
      /^zeros: .*10000000000 float32 elements \(40000000000 bytes\)/,
    ],
    [
      "zeros(1e5, 1e5, 1e5)",
      () => zeros(1e5, 1e5, 1e5),
      /^zeros: .*1000000000000000 float32 elements \(4000000000000000 bytes\)/,
    ],
    [
      "arange(0, 1e12)",
      () => arange(0, 1e12),
      /^arange: .*1000000000000 int64 elements \(8000000000000 bytes\)/,
    ],
    ["ones(2 ** 33)", () => ones(2 ** 33), /^ones: .*8589934592 float32 elements/],
    ["full([1e6, 1e6], 1)", () => full([1e6, 1e6], 1), /^full: .*1000000000000 int64/],
    ["linspace(0, 1, 1e10)", () => linspace(0, 1, 1e10), /^linspace: .*10000000000 float32/],
    ["eye(1e6)", () => eye(1e6), /^eye: .*1000000000000 int32/],
  ] as const)("%s: an OpError naming the op, the count and the bytes", (_what, f, msg) => {
    for (const mode of ["eager", "lazy", "compiled"] as const) {
      let err: unknown;
      try {
        if (mode === "eager") f();
        else if (mode === "lazy") lazy(() => f().toArray());
        else compile(() => f())();
      } catch (e) {
        err = e;
      }
      expect(err, mode).toBeInstanceOf(OpError);
      expect((err as Error).message, mode).toMatch(msg);
    }
  });
});
