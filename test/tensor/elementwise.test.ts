// Elementwise ops against PyTorch 1.13's golden values (test/fixtures/elementwise.json, written
// by scripts/fixtures/gen_elementwise.py): every case on every registered backend. Ops whose
// results PyTorch computes exactly (sign-like, rounding, selection, comparisons, conversions,
// the four basic operations: computing in double and rounding once to f32/f16/bf16 is correctly
// rounded for those) must match bit for bit, signed zeros included; transcendental ones within a
// tolerance (PyTorch uses vectorized approximations; the reference evaluator computes in double).
// Also: the argument forms (method, options object, scalars first), the errors PyTorch raises,
// clamp's shared program, and an integer property test against a BigInt reference.

import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendNames } from "../../runtime/index.ts";
import {
  ArgumentError,
  OpError,
  opCacheStats,
  ops,
  resetOpCache,
  setEagerBackend,
  tensor,
  Tensor,
  type DType,
} from "../../tensor/index.ts";
import { expectClose, type FixtureValue, loadFixtures } from "../fixtures/load.ts";
import { flat } from "./reference.ts";
import { tryCase, warmNative } from "./native_warm.ts";

const cases = loadFixtures("elementwise");

/** Every op of this area (elementwise.ts plus the elementwise ops of core.ts). */
const AREA_OPS = [
  "add", "sub", "mul", "div", "pow", "neg", "abs", "sign", "exp", "exp2", "expm1", "log", "log2",
  "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
  "relu6", "leakyRelu", "elu", "gelu", "silu", "mish", "softplus", "erf", "floor", "ceil",
  "round", "trunc", "clamp", "maximum", "minimum", "where", "eq", "ne", "lt", "le", "gt", "ge",
  "logicalAnd", "logicalOr", "logicalNot", "logicalXor", "isnan", "isinf", "isfinite",
  "nanToNum", "to",
];

/** Ops whose every result is exactly determined (compared bit for bit, -0 included). */
const EXACT = new Set([
  "add", "sub", "mul", "div", "neg", "abs", "sign", "floor", "ceil", "round", "trunc", "relu",
  "relu6", "leakyRelu", "clamp", "maximum", "minimum", "where", "eq", "ne", "lt", "le", "gt",
  "ge", "logicalAnd", "logicalOr", "logicalNot", "logicalXor", "isnan", "isinf", "isfinite",
  "nanToNum", "to", "reciprocal", "sqrt",
]);

/** Tolerances for the rest, by result dtype: about 1 ulp for half types, more for float32. */
const TOLERANCE: Partial<Record<DType, { atol: number; rtol: number }>> = {
  float32: { atol: 1e-6, rtol: 1e-5 },
  float16: { atol: 1e-4, rtol: 1e-3 },
  bfloat16: { atol: 1e-3, rtol: 8e-3 },
};

type OpFn = (...args: unknown[]) => unknown;

function opNamed(name: string): OpFn {
  const fn = (ops as unknown as Record<string, unknown>)[name];
  if (typeof fn !== "function") throw new Error(`ops.${name} is not a function`);
  return fn as OpFn;
}

const camel = (k: string) => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

function callCase(op: string, args: FixtureValue[], kwargs: Record<string, FixtureValue>) {
  const options = Object.fromEntries(Object.entries(kwargs).map(([k, v]) => [camel(k), v]));
  const all = Object.keys(options).length > 0 ? [...args, options] : args;
  return opNamed(op)(...all);
}

function onEachBackend(name: string, fn: () => void): void {
  describe.each(backendNames())(`${name} [%s]`, (backend) => {
    beforeAll(() => {
      // One parallel batch of compiler runs for every case's native kernels.
      if (backend === "native") warmNative(() => cases.forEach((c) => tryCase(() => callCase(c.op, c.args, c.kwargs))));
      setEagerBackend(backend);
    }, 300_000);
    afterAll(() => setEagerBackend(undefined));
    fn();
  });
}

onEachBackend("elementwise ops match PyTorch", () => {
  it.each(cases.map((c) => [c.name, c] as const))("%s", (_name, c) => {
    const got = callCase(c.op, c.args, c.kwargs);
    const expected = c.out;
    if (!(expected instanceof Tensor)) throw new Error(`${c.name}: expected a tensor result`);
    expect(got).toBeInstanceOf(Tensor);
    const exact = EXACT.has(c.op) && !("alpha" in c.kwargs && expected.dtype !== "int64");
    const tol = exact ? { atol: 0, rtol: 0 } : (TOLERANCE[expected.dtype] ?? { atol: 0, rtol: 0 });
    expectClose(got as Tensor, expected, { ...tol, signedZero: exact }, c.name);
  });
});

describe("fixture coverage", () => {
  it("every op of the area has PyTorch golden cases", () => {
    const covered = new Set(cases.map((c) => c.op));
    expect(AREA_OPS.filter((op) => !covered.has(op))).toEqual([]);
    for (const op of AREA_OPS) expect(typeof opNamed(op)).toBe("function");
  });

  it("the fixtures cover each dtype and empty tensors", () => {
    const dtypes = new Set<string>();
    let empty = 0;
    for (const c of cases) {
      for (const a of c.args) {
        if (a instanceof Tensor) {
          dtypes.add(a.dtype);
          if (a.numel() === 0) empty++;
        }
      }
    }
    expect([...dtypes].sort()).toEqual(
      ["bfloat16", "bool", "float16", "float32", "int32", "int64", "uint8"].sort(),
    );
    expect(empty).toBeGreaterThan(20);
  });
});

describe("argument forms", () => {
  const x = tensor([-2.5, -0.5, 0.5, 3]);

  it("method and functional forms agree", () => {
    expect(flat(x.abs())).toEqual(flat(ops.abs(x)));
    expect(flat(x.clamp(-1, 1))).toEqual(flat(ops.clamp(x, -1, 1)));
    expect(flat(x.pow(2))).toEqual(flat(ops.pow(x, 2)));
    expect(flat(x.gt(0))).toEqual(flat(ops.gt(x, 0)));
    expect(flat(x.nanToNum())).toEqual(flat(ops.nanToNum(x)));
  });

  it("options objects name the trailing parameters", () => {
    expect(flat(x.clamp({ min: 0 }))).toEqual([0, 0, 0.5, 3]);
    expect(flat(x.clamp(null, 1))).toEqual([-2.5, -0.5, 0.5, 1]);
    expect(flat(x.clamp({ max: 1 }))).toEqual([-2.5, -0.5, 0.5, 1]);
    expect(flat(x.clamp(-1, { max: 1 }))).toEqual([-1, -0.5, 0.5, 1]);
    expect(flat(x.round({ decimals: -1 }))).toEqual([-0, -0, 0, 0]);
    expect(flat(x.leakyRelu({ negativeSlope: 0.5 }))).toEqual([-1.25, -0.25, 0.5, 3]);
    expect(flat(ops.softplus(x, { threshold: 1 }))).toEqual(flat(ops.softplus(x, 1, 1)));
    expect(flat(x.gelu({ approximate: "tanh" }))).toEqual(flat(x.gelu("tanh")));
  });

  it("a JS scalar may be either operand of pow", () => {
    const n = tensor([0, 1, 2, 3], { dtype: "int64" });
    const p = ops.pow(2, n);
    expect(p.dtype).toBe("int64");
    expect(p.toArray()).toEqual([1, 2, 4, 8]);
    expect(ops.pow(0.5, n).dtype).toBe("float32");
    expect(flat(ops.pow(0.5, n))).toEqual([1, 0.5, 0.25, 0.125]);
  });

  it("integer JS numbers are integer scalars (JS has no 2.0)", () => {
    const n = tensor([1, 2], { dtype: "int32" });
    expect(n.pow(2).dtype).toBe("int32");
    expect(n.pow(2.5).dtype).toBe("float32");
    expect(n.clamp(0.5).dtype).toBe("float32");
    expect(n.clamp(0).dtype).toBe("int32");
  });
});

describe("errors name the op and the problem", () => {
  const b = tensor([true, false]);
  const i = tensor([1, 2], { dtype: "int64" });

  it("refuses dtypes as PyTorch does", () => {
    expect(() => ops.abs(b)).toThrow(/^abs: bool tensors are not supported/);
    for (const op of ["floor", "ceil", "round", "trunc", "relu6"]) {
      expect(() => opNamed(op)(b)).toThrow(new RegExp(`^${op}: bool tensors are not supported`));
    }
    for (const op of ["leakyRelu", "elu", "gelu", "silu", "mish", "softplus"]) {
      expect(() => opNamed(op)(i)).toThrow(
        new RegExp(`^${op}: expected a floating point input .*, got int64`),
      );
    }
    expect(() => ops.round(i, { decimals: 2 })).toThrow(
      /^round: decimals=2 needs a floating point input, got int64/,
    );
    expect(() => ops.pow(b, b)).toThrow(/^pow: bool tensors are not supported/);
  });

  it("pow refuses negative integer scalar exponents of integer tensors", () => {
    expect(() => i.pow(-1)).toThrow(ArgumentError);
    expect(() => i.pow(-1)).toThrow(/^pow: argument 'exponent' must not be a negative integer/);
    expect(() => b.pow(-2n)).toThrow(/integers to negative integer powers are not allowed/);
    expect(flat(tensor([2, 4]).pow(-1))).toEqual([0.5, 0.25]);
  });

  it("clamp needs a bound, refuses bool results and out-of-range integer bounds", () => {
    expect(() => ops.clamp(i)).toThrow(
      /^clamp: at least one of 'min' or 'max' must be given/,
    );
    expect(() => ops.clamp(i, null, null)).toThrow(ArgumentError);
    expect(() => ops.clamp(b, true)).toThrow(/^clamp: bool results are not supported/);
    const u = tensor([1, 2], { dtype: "uint8" });
    expect(() => ops.clamp(u, -1, 300)).toThrow(
      /^clamp: argument 'min' value -1 is out of range for the result dtype uint8 \[0, 255\]/,
    );
    expect(() => ops.clamp(tensor([1], { dtype: "int32" }), null, 2 ** 40)).toThrow(
      /argument 'max' value 1099511627776 is out of range for the result dtype int32/,
    );
  });

  it("reports broadcasting failures with the shapes", () => {
    const a = tensor([[1, 2, 3]]);
    const c = tensor([1, 2]);
    expect(() => ops.minimum(a, c)).toThrow(OpError);
    expect(() => ops.minimum(a, c)).toThrow(/^minimum: .*\[1,3\].*\[2\]/);
    expect(() => ops.clamp(a, c, 5)).toThrow(/^clamp: .*\[1,3\].*\[2\]/);
    expect(() => ops.logicalAnd(a, c)).toThrow(/^logicalAnd: /);
  });

  it("rejects bad arguments by name", () => {
    const x = tensor([1.5]);
    expect(() => ops.gelu(x, "fast" as never)).toThrow(
      /^gelu: argument 'approximate' must be one of 'none', 'tanh', got "fast"/,
    );
    expect(() => ops.logicalAnd(x, 1 as never)).toThrow(
      /^logicalAnd: argument 'other' must be a Tensor, got 1/,
    );
    expect(() => ops.minimum(x, 1 as never)).toThrow(/^minimum: argument 'other'/);
    expect(() => ops.leakyRelu(x, "a" as never)).toThrow(/argument 'negativeSlope'/);
    expect(() => ops.round(x, 0.5)).toThrow(/argument 'decimals' must be an integer/);
  });
});

describe("eager programs", () => {
  it("clamp with one bound or two shares one program; bound values are operands", () => {
    const x = tensor([-3, 0.5, 7]);
    resetOpCache();
    x.clamp(0.25);
    expect(flat(x.clamp(null, 1.5))).toEqual([-3, 0.5, 1.5]);
    expect(flat(x.clamp(-1.5, 2.5))).toEqual([-1.5, 0.5, 2.5]);
    expect(flat(x.clamp(1.5))).toEqual([1.5, 1.5, 7]);
    expect(opCacheStats().misses).toBe(1);
    // Integer bounds are int64 operands: another program, reused across values.
    x.clamp(0);
    x.clamp(-1, 2);
    expect(flat(x.clamp(null, 1))).toEqual([-3, 0.5, 1]);
    expect(opCacheStats().misses).toBe(4);
  });

  it("pow exponents are operands, not part of the program", () => {
    const x = tensor([1.5, 2]);
    resetOpCache();
    x.pow(0.5);
    x.pow(3.5);
    expect(opCacheStats().misses).toBe(1);
  });
});

describe("integer semantics (property tests against a BigInt reference)", () => {
  const ints = fc.array(fc.integer({ min: -6, max: 6 }), { minLength: 1, maxLength: 12 });

  it("pow of int64 tensors: wrapping powers, (-1)^-n = ±1, other negative powers 0", () => {
    const ref = (a: bigint, e: bigint): bigint => {
      if (e < 0n) return a === 1n ? 1n : a === -1n ? (e % 2n === 0n ? 1n : -1n) : 0n;
      return BigInt.asIntN(64, a ** e);
    };
    fc.assert(
      fc.property(ints, ints, (as, es) => {
        const n = Math.min(as.length, es.length);
        const a = as.slice(0, n).map(BigInt);
        const e = es.slice(0, n).map((v) => BigInt(v * 5));
        const got = ops.pow(tensor(a), tensor(e)).toArray({ bigint: true });
        expect(got).toEqual(a.map((v, k) => ref(v, e[k]!)));
      }),
      { numRuns: 30 },
    );
  });

  it("clamp of int32 tensors by broadcast tensor bounds", () => {
    fc.assert(
      fc.property(ints, fc.integer({ min: -6, max: 6 }), (xs, lo) => {
        const x = tensor(xs, { dtype: "int32" });
        const hi = tensor([lo + 3], { dtype: "int32" });
        const got = x.clamp(tensor(lo, { dtype: "int32" }), hi);
        expect(got.dtype).toBe("int32");
        expect(got.toArray()).toEqual(xs.map((v) => Math.min(Math.max(v, lo), lo + 3)));
      }),
      { numRuns: 30 },
    );
  });
});
