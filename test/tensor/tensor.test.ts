// The Tensor object: shape/dtype/size accessors, item/toArray/data/toBytes, the int64 policy
// (exact storage; numbers only when safe), float16/bfloat16 stored as bits and round-tripping
// through ops, and toString in PyTorch's repr format (expected strings are PyTorch's output,
// with Kiln's dtype names and JS booleans).

import { describe, expect, it } from "vitest";
import { bf16BitsToNumber, f32ToBF16Bits, roundToBF16, roundToF16 } from "../../ir/literal.ts";
import { arange, fromBytes, OpError, ops, tensor, zeros } from "../../tensor/index.ts";
import { ConcreteImpl, fromStorage, registerRealizer, Tensor } from "../../tensor/tensor.ts";

describe("Tensor accessors", () => {
  it("shape, dtype, ndim, numel, size", () => {
    const x = zeros(2, 3, 4);
    expect(x.shape).toEqual([2, 3, 4]);
    expect(Object.isFrozen(x.shape)).toBe(true);
    expect(x.dtype).toBe("float32");
    expect(x.ndim).toBe(3);
    expect(x.dim()).toBe(3);
    expect(x.numel()).toBe(24);
    expect(x.size()).toEqual([2, 3, 4]);
    expect(x.size(1)).toBe(3);
    expect(x.size(-1)).toBe(4);
    expect(x.size(-3)).toBe(2);
    expect(() => x.size(3)).toThrow(
      "size: dim 3 is out of range for a tensor of 3 dims (expected -3..2)",
    );
    expect(zeros([]).numel()).toBe(1);
    expect(zeros(0, 5).numel()).toBe(0);
  });

  it("fromStorage checks the storage kind and length", () => {
    expect(() => fromStorage("float32", [2], new Int32Array(2))).toThrow(/Float32Array/);
    expect(() => fromStorage("int32", [3], new Int32Array(2))).toThrow(/needs 3 elements, got 2/);
    expect(() => fromStorage("int32", [-1], new Int32Array(0))).toThrow(/integer >= 0/);
  });
});

describe("reading values", () => {
  it("item gives the one element", () => {
    expect(tensor(2.5).item()).toBe(2.5);
    expect(tensor([[7]], { dtype: "int32" }).item()).toBe(7);
    expect(tensor(true).item()).toBe(1); // a number, so `item() > 0` type-checks
    expect(tensor(false).item()).toBe(0);
    expect(tensor(true).toArray()).toBe(true);
    expect(tensor([3n]).item()).toBe(3);
    expect(() => zeros(2).item()).toThrow(OpError);
    expect(() => zeros(2).item()).toThrow(
      "item: a tensor with 2 elements cannot be converted to a scalar",
    );
  });

  it("toArray nests by shape", () => {
    expect(
      tensor([
        [1, 2],
        [3, 4],
      ]).toArray(),
    ).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(tensor(5).toArray()).toBe(5);
    expect(zeros(2, 0).toArray()).toEqual([[], []]);
    expect(zeros(0, 2).toArray()).toEqual([]);
    expect(tensor([true, false]).toArray()).toEqual([true, false]);
  });

  it("data() is a copy of the values", () => {
    const x = tensor([1, 2, 3]);
    const d = x.data();
    expect(d).toBeInstanceOf(Float32Array);
    d[0] = 100;
    expect(x.toArray()).toEqual([1, 2, 3]);
    expect(tensor([1], { dtype: "int32" }).data()).toBeInstanceOf(Int32Array);
    expect(tensor([1n]).data()).toBeInstanceOf(BigInt64Array);
    expect(tensor([true]).data()).toEqual(new Uint8Array([1]));
  });

  it("toBytes / fromBytes round trip every dtype", () => {
    const cases: Tensor[] = [
      tensor([1.5, -2], { dtype: "float32" }),
      tensor([1.5, -2], { dtype: "float16" }),
      tensor([1.5, -2], { dtype: "bfloat16" }),
      tensor([-7, 9], { dtype: "int32" }),
      tensor([-(2n ** 62n), 5n]),
      tensor([0, 255], { dtype: "uint8" }),
      tensor([true, false]),
    ];
    for (const t of cases) {
      const back = fromBytes(t.toBytes(), t.dtype, t.shape);
      expect(back.dtype).toBe(t.dtype);
      expect(back.toArray({ bigint: true })).toEqual(t.toArray({ bigint: true }));
    }
    expect(tensor([1], { dtype: "float16" }).toBytes()).toEqual(new Uint8Array([0x00, 0x3c]));
    expect(() => fromBytes(new Uint8Array(3), "int32", [1])).toThrow(/4 bytes.*got 3/);
  });
});

describe("int64", () => {
  const big = 2n ** 60n + 1n;

  it("stores values beyond 2^53 exactly and computes on them exactly", () => {
    const x = tensor([big, -big]);
    expect(x.dtype).toBe("int64");
    expect(x.data()).toEqual(new BigInt64Array([big, -big]));
    expect(x.add(1n).toArray({ bigint: true })).toEqual([big + 1n, -big + 1n]);
    expect(x.add(tensor([1n, 2n])).toArray({ bigint: true })).toEqual([big + 1n, -big + 2n]);
    expect(x.sum().item({ bigint: true })).toBe(0n);
    expect(tensor([big, big]).sum().item({ bigint: true })).toBe(2n * big);
  });

  it("item/toArray give numbers only when safe", () => {
    expect(() => tensor([big]).item()).toThrow(
      /not exactly representable as a number.*bigint: true/,
    );
    expect(() => tensor([1n, big]).toArray()).toThrow(/not exactly representable/);
    expect(tensor([2n ** 53n - 1n]).item()).toBe(2 ** 53 - 1);
    expect(tensor([big]).item({ bigint: true })).toBe(big);
    expect(tensor([1.5], { dtype: "float32" }).item({ bigint: true })).toBe(1.5);
  });

  it("rejects JS numbers that are not exact", () => {
    expect(() => tensor([2 ** 60], { dtype: "int64" })).toThrow(/pass a bigint/);
  });
});

describe("float16 and bfloat16", () => {
  const xs = [1 / 3, 65504, 1e-7, -2.71828, 70000, 0.1];

  it("are stored as bits and read back as the rounded values", () => {
    const h = tensor(xs, { dtype: "float16" });
    expect((h.realize().storage as Uint16Array).constructor).toBe(Uint16Array);
    expect(h.toArray()).toEqual(xs.map(roundToF16));
    const bf = tensor(xs, { dtype: "bfloat16" });
    expect(bf.realize().storage).toEqual(Uint16Array.from(xs, f32ToBF16Bits));
    expect(bf.toArray()).toEqual(xs.map((v) => bf16BitsToNumber(f32ToBF16Bits(v))));
    expect(bf.toArray()).toEqual(xs.map(roundToBF16));
  });

  it("round trip through ops unchanged, and compute with one rounding per op", () => {
    for (const dtype of ["float16", "bfloat16"] as const) {
      const round = dtype === "float16" ? roundToF16 : roundToBF16;
      const h = tensor(xs, { dtype });
      expect(h.add(0).toArray()).toEqual(h.toArray());
      expect(h.reshape(2, 3).reshape(-1).toArray()).toEqual(h.toArray());
      expect(h.to("float32").to(dtype).toArray()).toEqual(h.toArray());
      const hv = h.toArray() as number[];
      expect(h.mul(h).toArray()).toEqual(hv.map((v) => round(v * v)));
    }
  });
});

describe("deferred impls", () => {
  it("realize() runs the registered realizer once and keeps the result", () => {
    let calls = 0;
    registerRealizer("test-deferred", (impl) => {
      calls++;
      return new ConcreteImpl(impl.dtype, impl.shape, new Float32Array([4, 5]));
    });
    const t = new Tensor({ kind: "test-deferred", dtype: "float32", shape: [2] });
    expect(t.shape).toEqual([2]);
    expect(calls).toBe(0);
    expect(t.toArray()).toEqual([4, 5]);
    expect(t.add(1).toArray()).toEqual([5, 6]);
    expect(calls).toBe(1);
    const orphan = new Tensor({ kind: "nobody", dtype: "float32", shape: [] });
    expect(() => orphan.item()).toThrow(/no realizer is registered for 'nobody'/);
  });
});

describe("toString (PyTorch's repr)", () => {
  it.each([
    [
      () =>
        tensor([
          [1, 2],
          [3, 4],
        ]),
      "tensor([[1., 2.],\n        [3., 4.]])",
    ],
    [() => tensor([1.5, 2.25]), "tensor([1.5000, 2.2500])"],
    [() => tensor([-1.5, 2.25]), "tensor([-1.5000,  2.2500])"],
    [() => tensor(3), "tensor(3.)"],
    [() => tensor(0.5), "tensor(0.5000)"],
    [() => tensor([1, 2, 3], { dtype: "int32" }), "tensor([1, 2, 3], dtype=int32)"],
    [() => tensor([1n, -20n]), "tensor([  1, -20])"],
    [() => tensor([true, false]), "tensor([ true, false])"],
    [() => tensor([1, 2], { dtype: "float16" }), "tensor([1., 2.], dtype=float16)"],
    [() => tensor([1e-5, 1e5]), "tensor([1.0000e-05, 1.0000e+05])"],
    [() => tensor([1, 2000]), "tensor([1.0000e+00, 2.0000e+03])"],
    [() => tensor([0, NaN, Infinity, -Infinity]), "tensor([0., nan, inf, -inf])"],
    [() => tensor([0.5, NaN]), "tensor([0.5000,    nan])"],
    [() => tensor([]), "tensor([])"],
    [() => zeros(0, 3), "tensor([], size=(0, 3))"],
    [() => zeros([0], { dtype: "int64" }), "tensor([], dtype=int64)"],
    [() => tensor([-0]), "tensor([-0.])"],
    [
      () => arange(24).reshape(2, 3, 4),
      "tensor([[[ 0,  1,  2,  3],\n         [ 4,  5,  6,  7],\n         [ 8,  9, 10, 11]],\n\n" +
        "        [[12, 13, 14, 15],\n         [16, 17, 18, 19],\n         [20, 21, 22, 23]]])",
    ],
    [() => arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"],
    [
      () => arange(30).to("float32"),
      "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n" +
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n" +
        "        28., 29.])",
    ],
  ])("case %#", (make, expected) => {
    expect(make().toString()).toBe(expected);
  });

  it("summarizes large matrices with edge items", () => {
    const s = ops.reshape(arange(40 * 40), 40, 40).toString();
    const lines = s.split("\n");
    expect(lines[0]).toBe("tensor([[   0,    1,    2,  ...,   37,   38,   39],");
    expect(lines[3]).toBe("        ...,");
    expect(lines[lines.length - 1]).toBe("        [1560, 1561, 1562,  ..., 1597, 1598, 1599]])");
    expect(lines.length).toBe(7);
  });
});

describe("the root entry point", () => {
  it("exports the frontend", async () => {
    const kiln = await import("../../index.ts");
    const x = kiln.tensor([
      [1, 2],
      [3, 4],
    ]);
    const y = x
      .matmul(kiln.eye(2))
      .add(kiln.tensor([0.5, -0.5]))
      .relu();
    expect(y).toBeInstanceOf(kiln.Tensor);
    expect(y.toArray()).toEqual([
      [1.5, 1.5],
      [3.5, 3.5],
    ]);
    expect(kiln.ops.relu(kiln.ops.sum(x, { dim: 1, keepdim: true })).shape).toEqual([2, 1]);
    expect(kiln.resultType(x, 1)).toBe("float32");
  });
});
