// Hand-checked cases for the reference evaluator (ir/evaluate.ts): every opcode (the last test
// asserts each opcode of OPCODES appears in some module of this file), the integer and float
// corner cases of XLA's semantics, control flow, variadic reduce, sort, gather/scatter,
// convolution against an independent nested-loop reference, and bounded dynamic dims.

import { describe, expect, it } from "vitest";
import { EvalError } from "../../ir/errors.ts";
import {
  evaluate,
  evaluateComputation,
  evaluateReplicated,
  registerCustomCallTarget,
  unregisterCustomCallTarget,
  type EvalValue,
} from "../../ir/evaluate.ts";
import {
  bf16BitsToNumber,
  f16BitsToNumber,
  filledLiteral,
  Literal,
  literal,
  roundToBF16,
  roundToF16,
  scalarLiteral,
  type ScalarValue,
} from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { OPCODES, type Opcode } from "../../ir/opcodes.ts";
import { parseHlo } from "../../ir/parse.ts";
import type { ElementType } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";

// Every module of this file, registered while the suite is collected (so the coverage test
// sees all of them even when a filter runs only some tests).
const MODULES: Module[] = [];
const INVALID = new Set<Module>();
/** Parses a test module; `invalid` marks one the verifier must reject (an error test). */
function hlo(text: string, invalid = false): Module {
  const m = parseHlo(text);
  MODULES.push(m);
  if (invalid) INVALID.add(m);
  return m;
}

function run(m: Module, ...args: EvalValue[]): EvalValue {
  return evaluate(m, args);
}

function lit(v: EvalValue): Literal {
  if (Array.isArray(v)) throw new Error(`expected an array value, got a tuple`);
  return v;
}

function tup(v: EvalValue): EvalValue[] {
  if (!Array.isArray(v)) throw new Error(`expected a tuple, got ${v.toString()}`);
  return v;
}

/** Elements as stored (numbers; bigint for s64). */
function vals(v: EvalValue): (number | bigint)[] {
  return Array.from(lit(v).data as ArrayLike<number | bigint>);
}

const L = (type: ElementType, dims: number[], values: ScalarValue[]) =>
  literal(type, dims, values);
const f32 = (dims: number[], values: number[]) => literal("f32", dims, values);
const s32 = (dims: number[], values: number[]) => literal("s32", dims, values);

/** A module `ROOT r = T[n] op(p0[, p1])` over one element type. */
function elementwise(
  op: string,
  type: ElementType,
  n: number,
  arity: 1 | 2,
  out = type,
  invalid = false,
) {
  const params = Array.from({ length: arity }, (_, i) => `p${i}`);
  return hlo(
    `
HloModule ${op.replace(/-/g, "_")}_${type}
ENTRY e {
${params.map((p, i) => `  ${p} = ${type}[${n}] parameter(${i})`).join("\n")}
  ROOT r = ${out}[${n}] ${op}(${params.join(", ")})
}`,
    invalid,
  );
}

const REDUCERS = `
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
`;

// ---- unary ops ----------------------------------------------------------------------------

describe("unary float ops", () => {
  const xs = [-2.5, -1, -0.5, -0, 0, 0.3, 0.5, 1, 1.5, 2.5, 10, NaN, Infinity, -Infinity];
  const fx = xs.map(Math.fround);
  const table: [string, (x: number) => number][] = [
    ["abs", Math.abs],
    ["negate", (x) => -x],
    ["exponential", Math.exp],
    ["exponential-minus-one", Math.expm1],
    ["log", Math.log],
    ["log-plus-one", Math.log1p],
    ["sqrt", Math.sqrt],
    ["rsqrt", (x) => 1 / Math.sqrt(x)],
    ["cbrt", Math.cbrt],
    ["tanh", Math.tanh],
    ["logistic", (x) => 1 / (1 + Math.exp(-x))],
    ["sine", Math.sin],
    ["cosine", Math.cos],
    ["tan", Math.tan],
    ["floor", Math.floor],
    ["ceil", Math.ceil],
    ["copy", (x) => x],
  ];
  for (const [op, ref] of table) {
    const m = elementwise(op, "f32", xs.length, 1);
    it(`${op} rounds the double result to f32`, () => {
      const got = vals(run(m, f32([xs.length], xs)));
      fx.forEach((x, i) => expect(got[i]).toBe(Math.fround(ref(x))));
    });
  }

  const signM = elementwise("sign", "f32", xs.length, 1);
  it("sign keeps ±0 and NaN", () => {
    expect(vals(run(signM, f32([xs.length], xs)))).toEqual([
      -1, -1, -1, -0, 0, 1, 1, 1, 1, 1, 1, NaN, 1, -1,
    ]);
  });

  const afz = elementwise("round-nearest-afz", "f32", xs.length, 1);
  const even = elementwise("round-nearest-even", "f32", xs.length, 1);
  it("round-nearest-afz rounds half away from zero", () => {
    expect(vals(run(afz, f32([xs.length], xs)))).toEqual([
      -3, -1, -1, -0, 0, 0, 1, 1, 2, 3, 10, NaN, Infinity, -Infinity,
    ]);
  });
  it("round-nearest-even rounds half to even and keeps the sign of zero", () => {
    expect(vals(run(even, f32([xs.length], xs)))).toEqual([
      -2, -1, -0, -0, 0, 0, 0, 1, 2, 2, 10, NaN, Infinity, -Infinity,
    ]);
  });

  const fin = elementwise("is-finite", "f32", 4, 1, "pred");
  it("is-finite", () => {
    expect(vals(run(fin, f32([4], [1, NaN, Infinity, -0])))).toEqual([1, 0, 0, 1]);
  });

  // Reference values of erf (Abramowitz & Stegun table 7.1, more digits from high-precision
  // evaluation); the f32 result must be the correctly rounded f32 of each.
  const erfRef: [number, number][] = [
    [1e-10, 1.1283791670955126e-10],
    [0.1, 0.1124629160182849],
    [0.5, 0.5204998778130465],
    [1, 0.8427007929497149],
    [1.5, 0.9661051464753108],
    [2, 0.9953222650189527],
    [2.5, 0.999593047982555],
    [3, 0.9999779095030014],
    [3.5, 0.9999992569016276],
    [5, 0.9999999999984626],
    [30, 1],
  ];
  const erfM = elementwise("erf", "f32", erfRef.length * 2 + 2, 1);
  it("erf is f32-accurate everywhere, odd, and keeps ±0", () => {
    const args = [...erfRef.map(([x]) => x), ...erfRef.map(([x]) => -x), -0, NaN];
    const got = vals(run(erfM, f32([args.length], args)));
    erfRef.forEach(([, e], i) => {
      expect(got[i]).toBe(Math.fround(e));
      expect(got[i + erfRef.length]).toBe(-Math.fround(e));
    });
    expect(got[erfRef.length * 2]).toBe(-0);
    expect(got[erfRef.length * 2 + 1]).toBeNaN();
  });

  // An independent, slow erf to double accuracy: the Maclaurin-type series
  // erf(x) = 2/sqrt(pi) exp(-x^2) sum_n (2x^2)^n x / (2n+1)!! (positive terms, no cancellation)
  // below 2.5 and erfc's continued fraction (evaluated backwards) above.
  const seriesErf = (x: number): number => {
    const ax = Math.abs(x);
    let r: number;
    if (ax < 2.5) {
      const x2 = ax * ax;
      let term = ax;
      let sum = ax;
      for (let n = 1; n < 500 && term > sum * 1e-18; n++) {
        term *= (2 * x2) / (2 * n + 1);
        sum += term;
      }
      r = (2 / Math.sqrt(Math.PI)) * Math.exp(-x2) * sum;
    } else {
      let f = ax;
      for (let k = 200; k >= 1; k--) f = ax + k / 2 / f;
      r = 1 - Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
    }
    return x < 0 ? -r : r;
  };
  // Every 211th f32 from 2^-30 to 4.5, both signs: ~2.6M points through the evaluator.
  const sweep = (() => {
    const bits = new Uint32Array(1);
    const asF = new Float32Array(bits.buffer);
    const xs: number[] = [];
    for (let b = 0x30800000; b <= 0x40900000; b += 211) {
      bits[0] = b;
      xs.push(asF[0]!, -asF[0]!);
    }
    return xs;
  })();
  const erfSweepM = elementwise("erf", "f32", sweep.length, 1);
  it("erf is the correctly rounded f32 on a dense sweep", () => {
    const got = vals(run(erfSweepM, f32([sweep.length], sweep)));
    let bad = 0;
    const firstBad: number[] = [];
    sweep.forEach((x, i) => {
      if (got[i] !== Math.fround(seriesErf(x))) {
        bad++;
        if (firstBad.length < 5) firstBad.push(x);
      }
    });
    expect(firstBad).toEqual([]);
    expect(bad).toBe(0);
  });

  const notPred = elementwise("not", "pred", 2, 1);
  const notS32 = elementwise("not", "s32", 2, 1);
  const notU8 = elementwise("not", "u8", 2, 1);
  it("not is logical on pred and bitwise on integers", () => {
    expect(vals(run(notPred, L("pred", [2], [true, false])))).toEqual([0, 1]);
    expect(vals(run(notS32, s32([2], [0, 5])))).toEqual([-1, -6]);
    expect(vals(run(notU8, L("u8", [2], [0, 5])))).toEqual([255, 250]);
  });

  const absS32 = elementwise("abs", "s32", 3, 1);
  const negS32 = elementwise("negate", "s32", 3, 1);
  const signS32 = elementwise("sign", "s32", 3, 1);
  const negU8 = elementwise("negate", "u8", 2, 1);
  it("integer abs/negate/sign wrap at INT_MIN", () => {
    const x = s32([3], [-2147483648, -7, 0]);
    expect(vals(run(absS32, x))).toEqual([-2147483648, 7, 0]);
    expect(vals(run(negS32, x))).toEqual([-2147483648, 7, 0]);
    expect(vals(run(signS32, x))).toEqual([-1, -1, 0]);
    expect(vals(run(negU8, L("u8", [2], [1, 0])))).toEqual([255, 0]);
  });

  const expS32 = elementwise("exponential", "s32", 1, 1, "s32", true);
  it("a float-only op on integers is an EvalError naming the instruction", () => {
    expect(() => run(expS32, s32([1], [1]))).toThrow(EvalError);
    expect(() => run(expS32, s32([1], [1]))).toThrow(/%r: exponential\(s32\[1\]\).*not defined/);
  });
});

// ---- binary ops ---------------------------------------------------------------------------

describe("integer arithmetic", () => {
  const MIN = -2147483648;
  const div = elementwise("divide", "s32", 8, 2);
  const rem = elementwise("remainder", "s32", 8, 2);
  it("s32 divide truncates; x/0 = -1; INT_MIN/-1 = INT_MIN", () => {
    const a = s32([8], [7, -7, 7, -7, 5, -5, MIN, 0]);
    const b = s32([8], [2, 2, -2, -2, 0, 0, -1, 0]);
    expect(vals(run(div, a, b))).toEqual([3, -3, -3, 3, -1, -1, MIN, -1]);
  });
  it("s32 remainder has the dividend's sign; x%0 = x; INT_MIN%-1 = 0", () => {
    const a = s32([8], [7, -7, 7, -7, 5, -5, MIN, 0]);
    const b = s32([8], [2, 2, -2, -2, 0, 0, -1, 0]);
    expect(vals(run(rem, a, b))).toEqual([1, -1, 1, -1, 5, -5, 0, 0]);
  });

  const addS32 = elementwise("add", "s32", 2, 2);
  const mulS32 = elementwise("multiply", "s32", 2, 2);
  const subS32 = elementwise("subtract", "s32", 2, 2);
  it("s32 add/subtract/multiply wrap", () => {
    expect(vals(run(addS32, s32([2], [2147483647, -1]), s32([2], [1, MIN])))).toEqual([
      MIN, 2147483647,
    ]);
    expect(vals(run(subS32, s32([2], [MIN, 0]), s32([2], [1, MIN])))).toEqual([2147483647, MIN]);
    expect(vals(run(mulS32, s32([2], [65536, 123456789]), s32([2], [65536, 1000])))).toEqual([
      0, Number(BigInt.asIntN(32, 123456789000n)),
    ]);
  });

  const u8ops = ["add", "subtract", "multiply", "divide", "remainder"].map(
    (op) => [op, elementwise(op, "u8", 3, 2)] as const,
  );
  it("u8 wraps mod 256; x/0 = 255; x%0 = x", () => {
    const a = L("u8", [3], [200, 5, 16]);
    const b = L("u8", [3], [100, 10, 0]);
    const want: Record<string, number[]> = {
      add: [44, 15, 16],
      subtract: [100, 251, 16],
      multiply: [32, 50, 0],
      divide: [2, 0, 255],
      remainder: [0, 5, 16],
    };
    for (const [op, m] of u8ops) expect(vals(run(m, a, b)), op).toEqual(want[op]);
  });

  const s64ops = ["add", "subtract", "multiply", "divide", "remainder"].map(
    (op) => [op, elementwise(op, "s64", 4, 2)] as const,
  );
  it("s64 is exact beyond 2^53 and wraps at 2^64", () => {
    const MAX = 2n ** 63n - 1n;
    const MIN64 = -(2n ** 63n);
    const a = L("s64", [4], [2n ** 53n, MAX, MIN64, 2n ** 62n]);
    const b = L("s64", [4], [1n, 1n, -1n, 0n]);
    const want: Record<string, bigint[]> = {
      add: [2n ** 53n + 1n, MIN64, MIN64 - 1n + 2n ** 64n, 2n ** 62n],
      subtract: [2n ** 53n - 1n, MAX - 1n, MIN64 + 1n, 2n ** 62n],
      multiply: [2n ** 53n, MAX, MIN64, 0n],
      divide: [2n ** 53n, MAX, MIN64, -1n],
      remainder: [0n, 0n, 0n, 2n ** 62n],
    };
    for (const [op, m] of s64ops) expect(vals(run(m, a, b)), op).toEqual(want[op]);
    const mul = s64ops.find(([op]) => op === "multiply")![1];
    expect(vals(run(mul, L("s64", [4], [2n ** 31n, 3n ** 39n, 2n ** 62n, -1n]),
      L("s64", [4], [2n ** 31n + 1n, 3n, 4n, MIN64])))).toEqual([
      2n ** 62n + 2n ** 31n, BigInt.asIntN(64, 3n ** 40n), 0n, MIN64,
    ]);
  });

  const powS32 = elementwise("power", "s32", 8, 2);
  const powU8 = elementwise("power", "u8", 2, 2);
  const powS64 = elementwise("power", "s64", 3, 2);
  it("integer power is exact and wraps; negative exponents give 0 unless the base is 1", () => {
    const a = s32([8], [2, 2, 1, -1, -2, 3, 0, 5]);
    const b = s32([8], [10, -1, -5, -1, 3, 40, 0, 0]);
    // (-1)^-1 is 0: XLA's evaluator returns 0 for any negative exponent unless the base is 1.
    const wrapped = Number(BigInt.asIntN(32, 3n ** 40n));
    expect(vals(run(powS32, a, b))).toEqual([1024, 0, 1, 0, -8, wrapped, 1, 1]);
    expect(vals(run(powU8, L("u8", [2], [3, 2]), L("u8", [2], [5, 8])))).toEqual([243, 0]);
    expect(vals(run(powS64, L("s64", [3], [3n, -2n, 7n]), L("s64", [3], [39n, 63n, -2n]))))
      .toEqual([3n ** 39n, -(2n ** 63n), 0n]);
  });
});

describe("float binary ops", () => {
  const powF = elementwise("power", "f32", 8, 2);
  it("power follows C pow with 1^y = 1 and x^0 = 1", () => {
    const a = f32([8], [2, 0, 1, NaN, -1, 2, -8, 4]);
    const b = f32([8], [-1, 0, NaN, 0, Infinity, 0.5, 1 / 3, 0.5]);
    expect(vals(run(powF, a, b))).toEqual([
      0.5, 1, 1, 1, 1, Math.fround(Math.SQRT2), NaN, 2,
    ]);
  });

  const maxF = elementwise("maximum", "f32", 6, 2);
  const minF = elementwise("minimum", "f32", 6, 2);
  it("maximum/minimum propagate NaN and return the lhs on ties (so -0 vs +0 keeps the lhs)", () => {
    const a = f32([6], [NaN, 1, -0, 0, 3, -Infinity]);
    const b = f32([6], [1, NaN, 0, -0, 2, Infinity]);
    expect(vals(run(maxF, a, b))).toEqual([NaN, NaN, -0, 0, 3, Infinity]);
    expect(vals(run(minF, a, b))).toEqual([NaN, NaN, -0, 0, 2, -Infinity]);
  });

  const divF = elementwise("divide", "f32", 4, 2);
  const remF = elementwise("remainder", "f32", 4, 2);
  const atan = elementwise("atan2", "f32", 3, 2);
  it("divide is IEEE, remainder is fmod, atan2 is atan2", () => {
    expect(vals(run(divF, f32([4], [1, -1, 0, 1]), f32([4], [0, 0, 0, 3])))).toEqual([
      Infinity, -Infinity, NaN, Math.fround(1 / 3),
    ]);
    expect(vals(run(remF, f32([4], [5.5, -5.5, 5, -0]), f32([4], [2, 2, Infinity, 3])))).toEqual([
      1.5, -1.5, 5, -0,
    ]);
    expect(vals(run(atan, f32([3], [1, 1, -0]), f32([3], [1, -1, -1])))).toEqual([
      Math.fround(Math.PI / 4), Math.fround((3 * Math.PI) / 4), Math.fround(-Math.PI),
    ]);
  });

  const addF = elementwise("add", "f32", 2, 2);
  it("f32 results round once from the exact double result", () => {
    expect(vals(run(addF, f32([2], [1, 16777216]), f32([2], [2 ** -30, 1])))).toEqual([
      1, 16777216,
    ]);
  });

  const addH = elementwise("add", "f16", 3, 2);
  const mulH = elementwise("multiply", "f16", 1, 2);
  const addB = elementwise("add", "bf16", 2, 2);
  it("f16/bf16 compute in f32 and round to nearest even", () => {
    const one = 1;
    const ulp = 2 ** -10;
    const a = L("f16", [3], [one, one + ulp, 2048]);
    const b = L("f16", [3], [ulp / 2, ulp / 2, 1]);
    // ties go to the even neighbour: 1 (even), 1 + 2^-9 (even), 2048 (even)
    expect(vals(run(addH, a, b))).toEqual([1, 1 + 2 ** -9, 2048]);
    expect(vals(run(mulH, L("f16", [1], [300]), L("f16", [1], [300])))).toEqual([Infinity]);
    expect(vals(run(addB, L("bf16", [2], [1, 256]), L("bf16", [2], [2 ** -8, 1])))).toEqual([
      1, 256,
    ]);
  });
});

describe("bitwise ops and shifts", () => {
  const ops = ["and", "or", "xor"];
  const s32m = ops.map((op) => elementwise(op, "s32", 2, 2));
  const predm = ops.map((op) => elementwise(op, "pred", 4, 2));
  it("and/or/xor on s32 and pred", () => {
    const want = [[8, -16], [14, -1], [6, 15]];
    s32m.forEach((m, i) => {
      expect(vals(run(m, s32([2], [12, -1]), s32([2], [10, -16])))).toEqual(want[i]);
    });
    const p = L("pred", [4], [0, 0, 1, 1]);
    const q = L("pred", [4], [0, 1, 0, 1]);
    const wantP = [[0, 0, 0, 1], [0, 1, 1, 1], [0, 1, 1, 0]];
    predm.forEach((m, i) => expect(vals(run(m, p, q))).toEqual(wantP[i]));
  });

  const shl = elementwise("shift-left", "s32", 4, 2);
  const sra = elementwise("shift-right-arithmetic", "s32", 4, 2);
  const srl = elementwise("shift-right-logical", "s32", 4, 2);
  it("s32 shifts by >= 32 or < 0 give 0 (or the sign fill)", () => {
    const amt = s32([4], [1, 31, 32, -1]);
    expect(vals(run(shl, s32([4], [1, 1, 1, 1]), amt))).toEqual([2, -2147483648, 0, 0]);
    expect(vals(run(sra, s32([4], [-8, -8, -8, 8]), amt))).toEqual([-4, -1, -1, 0]);
    expect(vals(run(srl, s32([4], [-8, -8, -8, -8]), amt))).toEqual([2147483644, 1, 0, 0]);
  });

  const shlU8 = elementwise("shift-left", "u8", 3, 2);
  const sraU8 = elementwise("shift-right-arithmetic", "u8", 3, 2);
  const srlU8 = elementwise("shift-right-logical", "u8", 3, 2);
  it("u8 shifts; the arithmetic shift reads u8 as int8", () => {
    expect(vals(run(shlU8, L("u8", [3], [255, 1, 3]), L("u8", [3], [1, 8, 2])))).toEqual([
      254, 0, 12,
    ]);
    expect(vals(run(sraU8, L("u8", [3], [128, 128, 64]), L("u8", [3], [1, 8, 8])))).toEqual([
      192, 255, 0,
    ]);
    expect(vals(run(srlU8, L("u8", [3], [128, 128, 255]), L("u8", [3], [1, 8, 4])))).toEqual([
      64, 0, 15,
    ]);
  });

  const shl64 = elementwise("shift-left", "s64", 3, 2);
  const sra64 = elementwise("shift-right-arithmetic", "s64", 3, 2);
  const srl64 = elementwise("shift-right-logical", "s64", 3, 2);
  it("s64 shifts", () => {
    const MIN = -(2n ** 63n);
    const amt = L("s64", [3], [63n, 64n, 60n]);
    expect(vals(run(shl64, L("s64", [3], [1n, 1n, 1n]), amt))).toEqual([MIN, 0n, 2n ** 60n]);
    expect(vals(run(sra64, L("s64", [3], [MIN, MIN, -(2n ** 62n)]), amt))).toEqual([
      -1n, -1n, -4n,
    ]);
    expect(vals(run(srl64, L("s64", [3], [-1n, -1n, -1n]), amt))).toEqual([1n, 0n, 15n]);
  });
});

describe("compare", () => {
  const dirs = ["EQ", "NE", "LT", "LE", "GT", "GE"] as const;
  const floatM = dirs.map((d) =>
    hlo(`
HloModule cmp_${d}
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT r = pred[4] compare(a, b), direction=${d}
}`),
  );
  it("FLOAT comparisons with NaN are false except NE; -0 == +0", () => {
    const a = f32([4], [NaN, 1, -0, 1]);
    const b = f32([4], [1, NaN, 0, 2]);
    const want = {
      EQ: [0, 0, 1, 0],
      NE: [1, 1, 0, 1],
      LT: [0, 0, 0, 1],
      LE: [0, 0, 1, 1],
      GT: [0, 0, 0, 0],
      GE: [0, 0, 1, 0],
    };
    dirs.forEach((d, i) => expect(vals(run(floatM[i]!, a, b)), d).toEqual(want[d]));
  });

  const total = hlo(`
HloModule cmp_total
ENTRY e {
  a = f32[6] parameter(0)
  b = f32[6] parameter(1)
  ROOT r = pred[6] compare(a, b), direction=LT, type=TOTALORDER
}`);
  it("TOTALORDER: -NaN < -inf < -0 < +0 < inf < +NaN", () => {
    // Built from bits: a JS array of numbers may not keep the sign of a NaN.
    const fromBits = (bits: number[]) =>
      new Literal("f32", [bits.length], new Float32Array(new Uint32Array(bits).buffer));
    const order = [0xffc00000, 0xff800000, 0x80000000, 0x00000000, 0x7f800000, 0x7fc00000];
    // a[i] < b[i] for consecutive elements of the order, and NaN vs NaN is not less.
    const a = fromBits([...order.slice(0, 5), 0x7fc00000]);
    const b = fromBits([...order.slice(1), 0x7fc00000]);
    expect(vals(run(total, a, b))).toEqual([1, 1, 1, 1, 1, 0]);
    expect(vals(run(total, b, a))).toEqual([0, 0, 0, 0, 0, 0]);
  });

  const u8m = hlo(`
HloModule cmp_u8
ENTRY e {
  a = u8[2] parameter(0)
  b = u8[2] parameter(1)
  ROOT r = pred[2] compare(a, b), direction=GT
}`);
  const s64m = hlo(`
HloModule cmp_s64
ENTRY e {
  a = s64[2] parameter(0)
  b = s64[2] parameter(1)
  ROOT r = pred[2] compare(a, b), direction=LT
}`);
  it("integer comparisons: u8 unsigned, s64 exact", () => {
    expect(vals(run(u8m, L("u8", [2], [200, 1]), L("u8", [2], [100, 2])))).toEqual([1, 0]);
    expect(vals(run(s64m, L("s64", [2], [2n ** 53n, -5n]), L("s64", [2], [2n ** 53n + 1n, -5n]))))
      .toEqual([1, 0]);
  });
});

describe("select and clamp", () => {
  const sel = hlo(`
HloModule sel
ENTRY e {
  p = pred[3] parameter(0)
  a = s32[3] parameter(1)
  b = s32[3] parameter(2)
  ROOT r = s32[3] select(p, a, b)
}`);
  it("select picks per element", () => {
    const got = run(sel, L("pred", [3], [1, 0, 1]), s32([3], [1, 2, 3]), s32([3], [7, 8, 9]));
    expect(vals(got)).toEqual([1, 8, 3]);
  });

  const clampM = hlo(`
HloModule clamp
ENTRY e {
  lo = f32[] parameter(0)
  x = f32[5] parameter(1)
  hi = f32[] parameter(2)
  ROOT r = f32[5] clamp(lo, x, hi)
}`);
  const clampArr = hlo(`
HloModule clamp_arr
ENTRY e {
  lo = s32[3] parameter(0)
  x = s32[3] parameter(1)
  hi = s32[3] parameter(2)
  ROOT r = s32[3] clamp(lo, x, hi)
}`);
  it("clamp with scalar bounds; NaN in the operand or a bound propagates", () => {
    const x = f32([5], [-5, 0.5, 5, NaN, -0]);
    expect(vals(run(clampM, scalarLiteral("f32", 0), x, scalarLiteral("f32", 1)))).toEqual([
      0, 0.5, 1, NaN, -0,
    ]);
    const nanLo = vals(run(clampM, scalarLiteral("f32", NaN), x, scalarLiteral("f32", 1)));
    expect(nanLo.every((v) => Number.isNaN(v))).toBe(true);
    expect(
      vals(run(clampArr, s32([3], [0, 0, 5]), s32([3], [-1, 3, 4]), s32([3], [2, 2, 9]))),
    ).toEqual([0, 2, 5]);
  });
});

// ---- convert and bitcast-convert ------------------------------------------------------------

describe("convert", () => {
  const conv = (from: ElementType, to: ElementType, n: number) =>
    hlo(`
HloModule cvt_${from}_${to}
ENTRY e {
  p = ${from}[${n}] parameter(0)
  ROOT r = ${to}[${n}] convert(p)
}`);
  const f2s = conv("f32", "s32", 9);
  const f2u = conv("f32", "u8", 5);
  const f2l = conv("f32", "s64", 4);
  const l2f = conv("s64", "f32", 4);
  const i2h = conv("s32", "f16", 3);
  const f2h = conv("f32", "f16", 4);
  const f2b = conv("f32", "bf16", 3);
  const f2p = conv("f32", "pred", 4);
  const p2f = conv("pred", "f32", 2);
  const i2u = conv("s32", "u8", 3);
  const l2i = conv("s64", "s32", 3);
  const h2b = conv("f16", "bf16", 1);
  const u2l = conv("u8", "s64", 1);

  it("float → int truncates toward zero, NaN → 0, saturates", () => {
    const x = [1.9, -1.9, NaN, 3e9, -3e9, Infinity, -Infinity, 2147483520, -0.5];
    expect(vals(run(f2s, f32([9], x)))).toEqual([
      1, -1, 0, 2147483647, -2147483648, 2147483647, -2147483648, 2147483520, 0,
    ]);
    expect(vals(run(f2u, f32([5], [-1, 300, 255.9, NaN, 3.7])))).toEqual([0, 255, 255, 0, 3]);
    expect(vals(run(f2l, f32([4], [1e19, -1e19, 1.5e10, NaN])))).toEqual([
      2n ** 63n - 1n, -(2n ** 63n), BigInt(Math.fround(1.5e10)), 0n,
    ]);
  });

  it("int → float rounds once to nearest even (s64 exactly, not via double)", () => {
    const big = 2n ** 60n + 2n ** 36n + 1n; // just above a tie of f32; a double rounds onto it
    expect(vals(run(l2f, L("s64", [4], [2n ** 53n + 1n, 2n ** 24n + 1n, 2n ** 24n + 3n, big]))))
      .toEqual([2 ** 53, 2 ** 24, 2 ** 24 + 4, 2 ** 60 + 2 ** 37]);
    expect(vals(run(i2h, s32([3], [2049, 70000, -3])))).toEqual([2048, Infinity, -3]);
  });

  it("f32 → f16/bf16 rounds to nearest even; pred is x != 0", () => {
    const ulp16 = 2 ** -10;
    expect(vals(run(f2h, f32([4], [1 + ulp16 / 2, 1 + 1.5 * ulp16, 65520, 1e-8])))).toEqual([
      1, 1 + 2 * ulp16, Infinity, 0,
    ]);
    expect(vals(run(f2b, f32([3], [1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.1415926])))).toEqual([
      1, 1 + 2 ** -6, roundToBF16(3.1415926),
    ]);
    expect(vals(run(f2p, f32([4], [0, -0, 2, NaN])))).toEqual([0, 0, 1, 1]);
    expect(vals(run(p2f, L("pred", [2], [true, false])))).toEqual([1, 0]);
    expect(vals(run(h2b, L("f16", [1], [roundToF16(3.1415926)])))).toEqual([
      roundToBF16(roundToF16(3.1415926)),
    ]);
  });

  it("int → int wraps to the width", () => {
    expect(vals(run(i2u, s32([3], [300, -1, 255])))).toEqual([44, 255, 255]);
    expect(vals(run(l2i, L("s64", [3], [2n ** 32n + 7n, 2n ** 31n, -1n])))).toEqual([
      7, -2147483648, -1,
    ]);
    expect(vals(run(u2l, L("u8", [1], [200])))).toEqual([200n]);
  });

  const bc = (from: string, to: string) =>
    hlo(`
HloModule bc
ENTRY e {
  p = ${from} parameter(0)
  ROOT r = ${to} bitcast-convert(p)
}`);
  const f2i = bc("f32[3]", "s32[3]");
  const i2f = bc("s32[2]", "f32[2]");
  const f2hh = bc("f32[1]", "f16[1,2]");
  const l2ii = bc("s64[1]", "s32[1,2]");
  const u2i = bc("u8[2,4]", "s32[2]");
  const h2bb = bc("f16[1]", "bf16[1]");
  it("bitcast-convert reinterprets little-endian bits", () => {
    expect(vals(run(f2i, f32([3], [1, -2, 0])))).toEqual([0x3f800000, -1073741824, 0]);
    const nanBits = 0x7fc00001;
    const back = vals(run(i2f, s32([2], [0x40490fdb, nanBits])));
    expect(back[0]).toBe(Math.fround(Math.PI));
    expect(back[1]).toBeNaN();
    expect(vals(run(f2hh, f32([1], [1])))).toEqual([0, f16BitsToNumber(0x3f80)]);
    expect(vals(run(l2ii, L("s64", [1], [2n ** 32n + 5n])))).toEqual([5, 1]);
    expect(vals(run(u2i, L("u8", [2, 4], [1, 0, 0, 0, 0, 1, 0, 0])))).toEqual([1, 256]);
    // f16 1.0 has bits 0x3c00; read as bf16 bits that is 0.0078125 (2^-7)
    expect(vals(run(h2bb, L("f16", [1], [1])))).toEqual([bf16BitsToNumber(0x3c00)]);
  });

  it("an f32 NaN payload survives bitcast-convert round trips", () => {
    const m = hlo(`
HloModule bc_nan
ENTRY e {
  p = s32[1] parameter(0)
  f = f32[1] bitcast-convert(p)
  ROOT r = s32[1] bitcast-convert(f)
}`);
    expect(vals(run(m, s32([1], [0x7fc00abc])))).toEqual([0x7fc00abc]);
  });
});

// ---- data movement ------------------------------------------------------------------------

describe("data movement", () => {
  const bitcast = hlo(`
HloModule bitcast
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  t = f32[3,2]{0,1} bitcast(p)
  r = f32[6] bitcast(p)
  c = f32[3,2]{0,1} parameter(1)
  u = f32[3,2]{1,0} bitcast(c)
  ROOT out = (f32[3,2]{0,1}, f32[6], f32[3,2]{1,0}) tuple(t, r, u)
}`);
  it("bitcast reads the operand's buffer (in its layout) as the result in its layout", () => {
    const x = literal("f32", [2, 3], [0, 1, 2, 3, 4, 5]);
    const y = literal("f32", [3, 2], [0, 1, 2, 3, 4, 5]);
    const [t, r, u] = tup(run(bitcast, x, y));
    // {1,0} -> {0,1} with the dims swapped: XLA's transpose-as-bitcast.
    expect(vals(t!)).toEqual([0, 3, 1, 4, 2, 5]);
    // Default layouts: a reshape.
    expect(vals(r!)).toEqual([0, 1, 2, 3, 4, 5]);
    // A column-major operand's buffer is [0, 2, 4, 1, 3, 5]; read row-major as 3x2.
    expect(vals(u!)).toEqual([0, 2, 4, 1, 3, 5]);
  });

  const ids = hlo(`
HloModule ids
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  a = token[] after-all()
  b = token[] after-all(a, a)
  ROOT t = (u32[], u32[], token[]) tuple(r, p, b)
}`);
  it("replica-id and partition-id: the evaluator runs replica 0 of partition 0", () => {
    const [r, p, b] = tup(run(ids));
    expect([lit(r!).type, vals(r!), vals(p!)]).toEqual(["u32", [0], [0]]);
    expect(lit(b!).type).toBe("token");
  });

  const orderings = hlo(`
HloModule orderings
ENTRY e {
  x = f32[3] parameter(0)
  a = token[] after-all()
  d = f32[3] add-dependency(x, a)
  cs = (f32[3], f32[3], u32[]) copy-start(d)
  cd = f32[3] copy-done(cs)
  ROOT ob = (f32[3], f32[3]) opt-barrier((f32[3], f32[3]) tuple(cd, x))
}`);
  it("add-dependency, copy-start/-done and opt-barrier pass their operand's value on", () => {
    const x = literal("f32", [3], [1, -2, 3.5]);
    const [c, y] = tup(run(orderings, x));
    expect([vals(c!), vals(y!)]).toEqual([[1, -2, 3.5], [1, -2, 3.5]]);
  });

  it("transfers and random numbers are refused by name", () => {
    const cases: [string, RegExp][] = [
      ["t = token[] after-all()\n  ROOT s = (f32[2], u32[], token[]) send(x, t), channel_id=1",
        /the evaluator does not run send: a transfer/],
      ["t = token[] after-all()\n  ROOT r = (f32[2], u32[], token[]) recv(t), channel_id=1",
        /the evaluator does not run recv: a transfer/],
      ["t = token[] after-all()\n  s = (f32[2], u32[], token[]) send(x, t)\n" +
        "  ROOT d = token[] send-done(s)", /the evaluator does not run send: a transfer/],
      ["t = token[] after-all()\n  r = (f32[2], u32[], token[]) recv(t)\n" +
        "  ROOT d = (f32[2], token[]) recv-done(r)", /the evaluator does not run recv: a transfer/],
      ["t = token[] after-all()\n  ROOT r = (f32[2], token[]) infeed(t)",
        /the evaluator does not run infeed: a transfer/],
      ["t = token[] after-all()\n  ROOT o = token[] outfeed(x, t)",
        /the evaluator does not run outfeed: a transfer/],
      ["z = f32[] constant(0)\n  ROOT r = f32[2] rng(z, z), distribution=rng_uniform",
        /the evaluator does not run rng: its numbers are the backend's/],
      ["s = u64[2] constant({1, 2})\n  ROOT r = (u64[2], u32[2]) rng-bit-generator(s), " +
        "algorithm=rng_philox", /the evaluator does not run rng-bit-generator/],
    ];
    for (const [body, re] of cases) {
      const m = hlo(`HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ${body}\n}`);
      expect(() => run(m, literal("f32", [2], [1, 2]))).toThrow(EvalError);
      expect(() => run(m, literal("f32", [2], [1, 2]))).toThrow(re);
    }
  });

  const mapped = hlo(`
HloModule mapped
f {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  cb = f32[] convert(b)
  ROOT m = f32[] multiply(a, cb)
}
ENTRY e {
  x = f32[2,2] parameter(0)
  i = s32[2,2] parameter(1)
  ROOT m = f32[2,2] map(x, i), dimensions={0,1}, to_apply=f
}`);
  it("map: to_apply on each element", () => {
    const x = literal("f32", [2, 2], [1.5, -2, 3, 4]);
    const i = literal("s32", [2, 2], [2, 3, -1, 0]);
    expect(vals(run(mapped, x, i))).toEqual([3, -6, -3, 0]);
  });

  it("ragged-dot, scan, ragged-all-to-all and collective-broadcast are refused by name", () => {
    const m = (body: string) =>
      hlo(`HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n` +
        `  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  x = f32[4] parameter(0)\n  ${body}\n}`);
    const x = literal("f32", [4], [1, 2, 3, 4]);
    const cases: [string, RegExp][] = [
      ["l = f32[2,3] constant({{1,2,3},{4,5,6}})\n  r = f32[2,3,1] constant({{{1},{1},{1}}," +
        "{{2},{2},{2}}})\n  g = s32[2] constant({1, 1})\n  ROOT d = f32[2,1] ragged-dot(l, r, g)," +
        " lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, " +
        "rhs_group_dims={0}", /the evaluator does not run ragged-dot/],
      ["z = f32[] constant(0)\n  ROOT s = f32[] scan(x, z), dimensions={0}, num_carries=1, " +
        "to_apply=add", /the evaluator does not run scan/],
      ["o = s32[2] constant({0, 0})\n  ROOT r = f32[4] ragged-all-to-all(x, x, o, o, o, o)",
        /the evaluator does not run ragged-all-to-all/],
      ["ROOT b = f32[4] collective-broadcast(x), replica_groups={{0}}",
        /the evaluator does not run collective-broadcast/],
    ];
    for (const [body, re] of cases) expect(() => run(m(body), x)).toThrow(re);
  });

  const rp = hlo(`
HloModule rp
ENTRY e {
  x = f32[8] parameter(0)
  a = f32[8] reduce-precision(x), exponent_bits=5, mantissa_bits=2
  b = f32[8] reduce-precision(x), exponent_bits=4, mantissa_bits=0
  h = f16[8] convert(x)
  c = f16[8] reduce-precision(h), exponent_bits=5, mantissa_bits=1
  ROOT t = (f32[8], f32[8], f16[8]) tuple(a, b, c)
}`);
  it("reduce-precision: ties to even, exponents out of range to zero or infinity (XLA's)", () => {
    // 1.125 and 1.375 are ties at 2 mantissa bits (to 1 and 1.5); 1.0625 rounds down; 1e5
    // overflows e5 (max 57344 for e5m2) to inf; 1e-5 underflows to 0 (sign kept); with no
    // mantissa bits a NaN becomes inf, with some it stays NaN.
    const x = literal("f32", [8], [1.125, 1.375, 1.0625, 1e5, -1e-5, NaN, 3, -0]);
    const [a, b, c] = tup(run(rp, x));
    expect(vals(a!)).toEqual([1, 1.5, 1, Infinity, -0, NaN, 3, -0]);
    // e4m0: powers of two in [2^-6, 2^7]; 1.375 -> 1, and the tie 3 -> 2 (the even bit pattern:
    // 2's biased exponent 128, not 4's 129).
    expect(vals(b!)).toEqual([1, 1, 1, Infinity, -0, Infinity, 2, -0]);
    // f16 at 1 mantissa bit: 1.125 -> 1, 1.375 -> 1.5, 3 -> 3.
    expect(vals(c!)).toEqual([1, 1.5, 1, Infinity, -0, NaN, 3, -0]);
  });

  const iota = hlo(`
HloModule iota
ENTRY e {
  a = s32[2,3] iota(), iota_dimension=1
  b = f32[2,3] iota(), iota_dimension=0
  ROOT t = (s32[2,3], f32[2,3]) tuple(a, b)
}`);
  it("iota counts along its dimension", () => {
    const [a, b] = tup(run(iota));
    expect(vals(a!)).toEqual([0, 1, 2, 0, 1, 2]);
    expect(vals(b!)).toEqual([0, 0, 0, 1, 1, 1]);
  });

  const bcast = hlo(`
HloModule bcast
ENTRY e {
  v = f32[3] parameter(0)
  s = f32[] parameter(1)
  a = f32[2,3] broadcast(v), dimensions={1}
  b = f32[3,2] broadcast(v), dimensions={0}
  c = f32[2,2] broadcast(s), dimensions={}
  ROOT t = (f32[2,3], f32[3,2], f32[2,2]) tuple(a, b, c)
}`);
  it("broadcast maps operand dims to result dims", () => {
    const [a, b, c] = tup(run(bcast, f32([3], [1, 2, 3]), scalarLiteral("f32", 7)));
    expect(vals(a!)).toEqual([1, 2, 3, 1, 2, 3]);
    expect(vals(b!)).toEqual([1, 1, 2, 2, 3, 3]);
    expect(vals(c!)).toEqual([7, 7, 7, 7]);
  });

  const shapes = hlo(`
HloModule shapes
ENTRY e {
  x = f32[2,3] parameter(0)
  r = f32[3,2] reshape(x)
  t = f32[3,2] transpose(x), dimensions={1,0}
  v = f32[2,3] reverse(x), dimensions={1}
  w = f32[2,3] reverse(x), dimensions={0,1}
  s = f32[1,2] slice(x), slice={[1:2], [0:3:2]}
  ROOT o = (f32[3,2], f32[3,2], f32[2,3], f32[2,3], f32[1,2]) tuple(r, t, v, w, s)
}`);
  it("reshape, transpose, reverse, slice", () => {
    const [r, t, v, w, s] = tup(run(shapes, f32([2, 3], [1, 2, 3, 4, 5, 6])));
    expect(lit(r!).dims).toEqual([3, 2]);
    expect(vals(r!)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(vals(t!)).toEqual([1, 4, 2, 5, 3, 6]);
    expect(vals(v!)).toEqual([3, 2, 1, 6, 5, 4]);
    expect(vals(w!)).toEqual([6, 5, 4, 3, 2, 1]);
    expect(vals(s!)).toEqual([4, 6]);
  });

  const dyn = hlo(`
HloModule dyn_slice
ENTRY e {
  x = s32[5] parameter(0)
  i = s32[] parameter(1)
  u = s32[2] parameter(2)
  ds = s32[3] dynamic-slice(x, i), dynamic_slice_sizes={3}
  dus = s32[5] dynamic-update-slice(x, u, i)
  ROOT t = (s32[3], s32[5]) tuple(ds, dus)
}`);
  it("dynamic-slice and dynamic-update-slice clamp their start into range", () => {
    const x = s32([5], [0, 1, 2, 3, 4]);
    const u = s32([2], [8, 9]);
    const at = (i: number) => tup(run(dyn, x, scalarLiteral("s32", i), u)).map(vals);
    expect(at(1)).toEqual([[1, 2, 3], [0, 8, 9, 3, 4]]);
    expect(at(4)).toEqual([[2, 3, 4], [0, 1, 2, 8, 9]]);
    expect(at(-3)).toEqual([[0, 1, 2], [8, 9, 2, 3, 4]]);
    expect(vals(x)).toEqual([0, 1, 2, 3, 4]); // the operand is not modified
  });

  const dyn2 = hlo(`
HloModule dyn_slice_2d
ENTRY e {
  x = s32[3,4] parameter(0)
  i = s64[] parameter(1)
  j = s64[] parameter(2)
  ROOT ds = s32[2,2] dynamic-slice(x, i, j), dynamic_slice_sizes={2,2}
}`);
  it("dynamic-slice in 2-D with s64 indices", () => {
    const x = s32([3, 4], Array.from({ length: 12 }, (_, k) => k));
    const got = run(dyn2, x, scalarLiteral("s64", 2n), scalarLiteral("s64", 1n));
    expect(vals(got)).toEqual([5, 6, 9, 10]);
  });

  const cat = hlo(`
HloModule cat
ENTRY e {
  a = f32[2,1] parameter(0)
  b = f32[2,2] parameter(1)
  ROOT c = f32[2,3] concatenate(a, b), dimensions={1}
}`);
  it("concatenate", () => {
    expect(vals(run(cat, f32([2, 1], [1, 2]), f32([2, 2], [3, 4, 5, 6])))).toEqual([
      1, 3, 4, 2, 5, 6,
    ]);
  });

  const pad = hlo(`
HloModule pad
ENTRY e {
  x = f32[3] parameter(0)
  v = f32[] constant(9)
  a = f32[6] pad(x, v), padding=-1_2_1
  y = f32[2,2] parameter(1)
  b = f32[3,5] pad(y, v), padding=1_0x0_2_1
  ROOT t = (f32[6], f32[3,5]) tuple(a, b)
}`);
  it("pad with negative edge and interior padding", () => {
    const [a, b] = tup(run(pad, f32([3], [1, 2, 3]), f32([2, 2], [1, 2, 3, 4])));
    expect(vals(a!)).toEqual([9, 2, 9, 3, 9, 9]);
    expect(vals(b!)).toEqual([9, 9, 9, 9, 9, 1, 9, 2, 9, 9, 3, 9, 4, 9, 9]);
  });
});

// ---- dot and convolution ------------------------------------------------------------------

describe("dot", () => {
  const mm = hlo(`
HloModule mm
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,2] parameter(1)
  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}`);
  it("matrix multiply", () => {
    const got = run(mm, f32([2, 3], [1, 2, 3, 4, 5, 6]), f32([3, 2], [7, 8, 9, 10, 11, 12]));
    expect(vals(got)).toEqual([58, 64, 139, 154]);
  });

  const general = hlo(`
HloModule dot_general
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[4,2,5] parameter(1)
  ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_batch_dims={1}, rhs_contracting_dims={0}
}`);
  it("result dims are batch, lhs free, rhs free", () => {
    const av = Array.from({ length: 24 }, (_, k) => (k % 7) - 3);
    const bv = Array.from({ length: 40 }, (_, k) => (k % 5) - 2);
    const got = vals(run(general, f32([2, 3, 4], av), f32([4, 2, 5], bv)));
    const want: number[] = [];
    for (let b = 0; b < 2; b++) {
      for (let i = 0; i < 3; i++) {
        for (let j = 0; j < 5; j++) {
          let s = 0;
          for (let k = 0; k < 4; k++) s += av[b * 12 + i * 4 + k]! * bv[k * 10 + b * 5 + j]!;
          want.push(s);
        }
      }
    }
    expect(got).toEqual(want);
  });

  const outer = hlo(`
HloModule outer
ENTRY e {
  a = s32[2] parameter(0)
  b = s32[3] parameter(1)
  o = s32[2,3] dot(a, b)
  i = s32[] dot(a, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (s32[2,3], s32[]) tuple(o, i)
}`);
  it("outer product without contracting dims; s32 accumulation wraps", () => {
    const [o, i] = tup(run(outer, s32([2], [65536, 2]), s32([3], [1, 2, 3])));
    expect(vals(o!)).toEqual([65536, 131072, 196608, 2, 4, 6]);
    expect(vals(i!)).toEqual([4]); // 2^32 + 4 wraps to 4
  });

  const exact = hlo(`
HloModule dot_exact
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}`);
  it("f32 dot accumulates in double and rounds once", () => {
    const got = run(exact, f32([3], [2 ** 24, 1, -(2 ** 24)]), f32([3], [1, 1, 1]));
    expect(vals(got)).toEqual([1]); // an f32 running sum would give 0
  });

  const half = hlo(`
HloModule dot_f16
ENTRY e {
  a = f16[2] parameter(0)
  b = f16[2] parameter(1)
  ROOT d = f16[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}`);
  it("f16 dot rounds the exact sum to f16", () => {
    const got = run(half, L("f16", [2], [1, 2 ** -11]), L("f16", [2], [1, 1.5]));
    expect(vals(got)).toEqual([roundToF16(1 + 1.5 * 2 ** -11)]);
  });
});

interface ConvOpts {
  stride: [number, number];
  padLo: [number, number];
  padHi: [number, number];
  lhsDil: [number, number];
  rhsDil: [number, number];
  groups: number;
}

const count = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);

/** Conv reference for NHWC input, HWIO kernel: materializes the padded, dilated input. */
function convRef(
  x: number[],
  [n, h, w, c]: number[],
  k: number[],
  [kh, kw, ci, co]: number[],
  o: ConvOpts,
): { dims: number[]; data: number[] } {
  const ph = (h - 1) * o.lhsDil[0] + 1 + o.padLo[0] + o.padHi[0];
  const pw = (w - 1) * o.lhsDil[1] + 1 + o.padLo[1] + o.padHi[1];
  const padded = new Array<number>(n * ph * pw * c).fill(0);
  for (let b = 0; b < n; b++) {
    for (let y = 0; y < h; y++) {
      for (let z = 0; z < w; z++) {
        const py = o.padLo[0] + y * o.lhsDil[0];
        const pz = o.padLo[1] + z * o.lhsDil[1];
        if (py < 0 || py >= ph || pz < 0 || pz >= pw) continue;
        for (let f = 0; f < c; f++) {
          padded[((b * ph + py) * pw + pz) * c + f] = x[((b * h + y) * w + z) * c + f]!;
        }
      }
    }
  }
  const ekh = (kh - 1) * o.rhsDil[0] + 1;
  const ekw = (kw - 1) * o.rhsDil[1] + 1;
  const oh = Math.floor((ph - ekh) / o.stride[0]) + 1;
  const ow = Math.floor((pw - ekw) / o.stride[1]) + 1;
  const perGroupOut = co / o.groups;
  const data: number[] = [];
  for (let b = 0; b < n; b++) {
    for (let y = 0; y < oh; y++) {
      for (let z = 0; z < ow; z++) {
        for (let f = 0; f < co; f++) {
          const g = Math.floor(f / perGroupOut);
          let s = 0;
          for (let dy = 0; dy < kh; dy++) {
            for (let dz = 0; dz < kw; dz++) {
              const py = y * o.stride[0] + dy * o.rhsDil[0];
              const pz = z * o.stride[1] + dz * o.rhsDil[1];
              for (let i = 0; i < ci; i++) {
                const xin = padded[((b * ph + py) * pw + pz) * c + g * ci + i]!;
                s += xin * k[((dy * kw + dz) * ci + i) * co + f]!;
              }
            }
          }
          data.push(s);
        }
      }
    }
  }
  return { dims: [n, oh, ow, co], data };
}

describe("convolution", () => {
  const seq = (len: number, mod: number) =>
    Array.from({ length: len }, (_, i) => ((i * 7 + 3) % mod) - Math.floor(mod / 2));

  type Pair = [number, number];
  const opts = (
    stride: Pair,
    padLo: Pair,
    padHi: Pair,
    lhsDil: Pair,
    rhsDil: Pair,
    groups: number,
  ): ConvOpts => ({ stride, padLo, padHi, lhsDil, rhsDil, groups });
  const cases: { name: string; x: number[]; k: number[]; window: string; o: ConvOpts }[] = [
    {
      name: "stride 2, padding 1",
      x: [2, 5, 5, 2],
      k: [3, 3, 2, 3],
      window: "size=3x3 stride=2x2 pad=1_1x1_1",
      o: opts([2, 2], [1, 1], [1, 1], [1, 1], [1, 1], 1),
    },
    {
      name: "window (rhs) dilation and asymmetric padding",
      x: [1, 6, 5, 1],
      k: [2, 2, 1, 2],
      window: "size=2x2 pad=0_1x2_0 rhs_dilate=2x2",
      o: opts([1, 1], [0, 2], [1, 0], [1, 1], [2, 2], 1),
    },
    {
      name: "base (lhs) dilation",
      x: [1, 3, 3, 2],
      k: [2, 2, 2, 1],
      window: "size=2x2 lhs_dilate=2x2",
      o: opts([1, 1], [0, 0], [0, 0], [2, 2], [1, 1], 1),
    },
    {
      name: "feature groups (grouped conv)",
      x: [2, 4, 4, 4],
      k: [3, 3, 2, 4],
      window: "size=3x3 pad=1_1x1_1",
      o: opts([1, 1], [1, 1], [1, 1], [1, 1], [1, 1], 2),
    },
    {
      name: "negative padding",
      x: [1, 5, 5, 1],
      k: [2, 2, 1, 1],
      window: "size=2x2 pad=-1_0x0_-1",
      o: opts([1, 1], [-1, 0], [0, -1], [1, 1], [1, 1], 1),
    },
  ];
  for (const cs of cases) {
    const xs = seq(count(cs.x), 9);
    const ks = seq(count(cs.k), 5);
    const ref = convRef(xs, cs.x, ks, cs.k, cs.o);
    const fgc = cs.o.groups > 1 ? `, feature_group_count=${cs.o.groups}` : "";
    const m = hlo(`
HloModule conv
ENTRY e {
  x = f32[${cs.x.join(",")}] parameter(0)
  k = f32[${cs.k.join(",")}] parameter(1)
  ROOT c = f32[${ref.dims.join(",")}] convolution(x, k), window={${cs.window}},
    dim_labels=b01f_01io->b01f${fgc}
}`);
    it(`2-D ${cs.name} matches a direct nested-loop computation`, () => {
      const got = lit(run(m, f32(cs.x, xs), f32(cs.k, ks)));
      expect(got.dims).toEqual(ref.dims);
      expect(got.toNumbers()).toEqual(ref.data);
    });
  }

  const nchw = hlo(`
HloModule conv_nchw
ENTRY e {
  x = f32[1,2,4,4] parameter(0)
  k = f32[3,2,2,2] parameter(1)
  ROOT c = f32[1,3,3,3] convolution(x, k), window={size=2x2}, dim_labels=bf01_oi01->bf01
}`);
  const nhwc = hlo(`
HloModule conv_nhwc
ENTRY e {
  x = f32[1,4,4,2] parameter(0)
  k = f32[2,2,2,3] parameter(1)
  ROOT c = f32[1,3,3,3] convolution(x, k), window={size=2x2}, dim_labels=b01f_01io->b01f
}`);
  const tr = hlo(`
HloModule conv_tr
ENTRY e {
  x = f32[1,2,4,4] parameter(0)
  k = f32[3,2,2,2] parameter(1)
  xt = f32[1,4,4,2] transpose(x), dimensions={0,2,3,1}
  kt = f32[2,2,2,3] transpose(k), dimensions={2,3,1,0}
  ROOT t = (f32[1,4,4,2], f32[2,2,2,3]) tuple(xt, kt)
}`);
  it("dimension numbers: NCHW/OIHW equals NHWC/HWIO on transposed data", () => {
    const x = f32([1, 2, 4, 4], seq(32, 7));
    const k = f32([3, 2, 2, 2], seq(24, 5));
    const [xt, kt] = tup(run(tr, x, k));
    const a = lit(run(nchw, x, k));
    const b = lit(run(nhwc, xt!, kt!));
    // a is [b, f, y, x], b is [b, y, x, f]
    for (let f = 0; f < 3; f++) {
      for (let y = 0; y < 3; y++) {
        for (let z = 0; z < 3; z++) {
          expect(a.data[(f * 3 + y) * 3 + z]).toBe(b.data[(y * 3 + z) * 3 + f]);
        }
      }
    }
  });

  const rev = hlo(`
HloModule conv_rev
ENTRY e {
  x = f32[1,4,1] parameter(0)
  k = f32[2,1,1] parameter(1)
  ROOT c = f32[1,3,1] convolution(x, k), window={size=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f
}`);
  it("window reversal flips the kernel", () => {
    const got = run(rev, f32([1, 4, 1], [1, 2, 3, 4]), f32([2, 1, 1], [10, 1]));
    expect(vals(got)).toEqual([1 * 1 + 2 * 10, 2 * 1 + 3 * 10, 3 * 1 + 4 * 10]);
  });

  const bgc = hlo(`
HloModule conv_bgc
ENTRY e {
  x = f32[4,3,1] parameter(0)
  k = f32[2,1,2] parameter(1)
  ROOT c = f32[2,2,2] convolution(x, k), window={size=2}, dim_labels=b0f_0io->b0f,
    batch_group_count=2
}`);
  it("batch_group_count: output feature o reads input batch b + group(o) * batch/groups", () => {
    const xs = Array.from({ length: 12 }, (_, i) => i + 1);
    const ks = [1, 10, 100, 1000]; // k[w][0][o]
    const got = vals(run(bgc, f32([4, 3, 1], xs), f32([2, 1, 2], ks)));
    const want: number[] = [];
    for (let b = 0; b < 2; b++) {
      for (let z = 0; z < 2; z++) {
        for (let o = 0; o < 2; o++) {
          const ib = b + o * 2;
          let s = 0;
          for (let w = 0; w < 2; w++) s += xs[ib * 3 + z + w]! * ks[w * 2 + o]!;
          want.push(s);
        }
      }
    }
    expect(got).toEqual(want);
  });
});

// ---- reductions ---------------------------------------------------------------------------

describe("reduce", () => {
  const digits = `
digits {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ten = s32[] constant(10)
  m = s32[] multiply(a, ten)
  ROOT r = s32[] add(m, b)
}`;
  const order = hlo(`
HloModule reduce_order
${digits}
ENTRY e {
  x = s32[2,2,2] parameter(0)
  z = s32[] constant(0)
  all = s32[] reduce(x, z), dimensions={0,1,2}, to_apply=digits
  r02 = s32[2] reduce(x, z), dimensions={2,0}, to_apply=digits
  r1 = s32[2,2] reduce(x, z), dimensions={1}, to_apply=digits
  ROOT t = (s32[], s32[2], s32[2,2]) tuple(all, r02, r1)
}`);
  it("folds from the init in row-major order of the reduced elements", () => {
    const x = s32([2, 2, 2], [1, 2, 3, 4, 5, 6, 7, 8]);
    const [all, r02, r1] = tup(run(order, x));
    expect(vals(all!)).toEqual([12345678]);
    expect(vals(r02!)).toEqual([1256, 3478]);
    expect(vals(r1!)).toEqual([13, 24, 57, 68]);
  });

  const sum = hlo(`
HloModule reduce_sum
${REDUCERS}
ENTRY e {
  x = f32[2,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply=add_f32
}`);
  it("sum over a dim (f32 running sum rounds each step)", () => {
    expect(vals(run(sum, f32([2, 3], [1, 2, 3, 2 ** 24, 1, 1])))).toEqual([6, 2 ** 24]);
  });

  const argmax = hlo(`
HloModule argmax
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(bv, av), direction=GT
  v = f32[] select(gt, bv, av)
  i = s32[] select(gt, bi, ai)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[2,4] parameter(0)
  idx = s32[2,4] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  neg = s32[] constant(-1)
  ROOT r = (f32[2], s32[2]) reduce(x, idx, ninf, neg), dimensions={1}, to_apply=argmax
}`);
  it("variadic reduce computes argmax (first index on ties)", () => {
    const [v, i] = tup(run(argmax, f32([2, 4], [1, 5, 3, 5, -1, -2, -3, -4])));
    expect(vals(v!)).toEqual([5, -1]);
    expect(vals(i!)).toEqual([1, 0]);
  });

  const empty = hlo(`
HloModule reduce_empty
${REDUCERS}
ENTRY e {
  x = f32[2,0] parameter(0)
  z = f32[] constant(-7)
  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply=max_f32
}`);
  it("reducing an empty dim gives the init", () => {
    expect(vals(run(empty, f32([2, 0], [])))).toEqual([-7, -7]);
  });
});

describe("reduce-window", () => {
  const pool = hlo(`
HloModule pool
${REDUCERS}
ENTRY e {
  x = f32[4,4] parameter(0)
  c = f32[] constant(-inf)
  ROOT r = f32[2,2] reduce-window(x, c), window={size=2x2 stride=2x2}, to_apply=max_f32
}`);
  it("2x2 max pool with stride 2", () => {
    const x = f32([4, 4], Array.from({ length: 16 }, (_, i) => i));
    expect(vals(run(pool, x))).toEqual([5, 7, 13, 15]);
  });

  const win = hlo(`
HloModule windows
${REDUCERS}
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[5] parameter(1)
  z = f32[] constant(0)
  ten = f32[] constant(10)
  padded = f32[3] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add_f32
  init10 = f32[3] reduce-window(x, ten), window={size=3 pad=1_1}, to_apply=add_f32
  based = f32[4] reduce-window(x, z), window={size=2 lhs_dilate=2}, to_apply=add_f32
  dilated = f32[3] reduce-window(y, z), window={size=2 rhs_dilate=2}, to_apply=add_f32
  ROOT t = (f32[3], f32[3], f32[4], f32[3]) tuple(padded, init10, based, dilated)
}`);
  it("padding and base-dilation holes hold no element; window dilation skips", () => {
    const [padded, init10, based, dilated] = tup(
      run(win, f32([3], [1, 2, 3]), f32([5], [1, 2, 3, 4, 5])),
    );
    expect(vals(padded!)).toEqual([3, 6, 5]);
    // the init is folded in once, not once per padding position
    expect(vals(init10!)).toEqual([13, 16, 15]);
    expect(vals(based!)).toEqual([1, 2, 2, 3]);
    expect(vals(dilated!)).toEqual([4, 6, 8]);
  });
});

// ---- gather, scatter, sort -----------------------------------------------------------------

describe("gather", () => {
  const embed = hlo(`
HloModule embed
ENTRY e {
  table = f32[5,3] parameter(0)
  ids = s32[5] parameter(1)
  ROOT g = f32[5,3] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
}`);
  it("embedding lookup; out-of-range start indices clamp", () => {
    const rows = Array.from({ length: 15 }, (_, i) => Math.floor(i / 3) * 10 + (i % 3));
    const table = f32([5, 3], rows);
    const got = lit(run(embed, table, s32([5], [2, 0, 4, 7, -1])));
    expect(got.dims).toEqual([5, 3]);
    expect(got.toNumbers()).toEqual([
      20, 21, 22, 0, 1, 2, 40, 41, 42, 40, 41, 42, 0, 1, 2,
    ]);
  });

  const window = hlo(`
HloModule gather_window
ENTRY e {
  x = s32[4,4] parameter(0)
  idx = s32[2,2] parameter(1)
  ROOT g = s32[2,2,2] gather(x, idx), offset_dims={1,2}, collapsed_slice_dims={},
    start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
}`);
  it("2-D windows with clamped starts", () => {
    const x = s32([4, 4], Array.from({ length: 16 }, (_, i) => i));
    const got = vals(run(window, x, s32([2, 2], [1, 1, 3, 3])));
    expect(got).toEqual([5, 6, 9, 10, 10, 11, 14, 15]);
  });

  const batched = hlo(`
HloModule gather_batch
ENTRY e {
  x = f32[2,4] parameter(0)
  idx = s32[2,1] parameter(1)
  ROOT g = f32[2] gather(x, idx), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1},
    operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1,
    slice_sizes={1,1}
}`);
  it("batching dims pick the operand batch of each index", () => {
    const x = f32([2, 4], [0, 1, 2, 3, 10, 11, 12, 13]);
    expect(vals(run(batched, x, s32([2, 1], [3, 1])))).toEqual([3, 11]);
  });
});

describe("scatter", () => {
  const add = hlo(`
HloModule scatter_add
${REDUCERS}
ENTRY e {
  x = f32[5] parameter(0)
  idx = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[5] scatter(x, idx, u), update_window_dims={}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
}`);
  it("scatter-add accumulates duplicates and drops out-of-bounds updates", () => {
    const x = f32([5], [0, 0, 0, 0, 100]);
    const got = run(add, x, s32([4, 1], [1, 3, 1, 9]), f32([4], [1, 2, 3, 4]));
    expect(vals(got)).toEqual([0, 4, 0, 2, 100]);
  });

  const rows = hlo(`
HloModule scatter_rows
assign {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}
ENTRY e {
  x = f32[3,3] parameter(0)
  idx = s32[3,2] parameter(1)
  u = f32[3,2,2] parameter(2)
  ROOT s = f32[3,3] scatter(x, idx, u), update_window_dims={1,2}, inserted_window_dims={},
    scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=assign
}`);
  it("windows apply in order (last write wins); a window partly out of bounds is skipped", () => {
    const x = f32([3, 3], new Array(9).fill(0));
    const idx = s32([3, 2], [0, 0, 0, 1, 2, 0]);
    const u = f32([3, 2, 2], [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
    expect(vals(run(rows, x, idx, u))).toEqual([1, 2, 2, 1, 2, 2, 0, 0, 0]);
  });

  const batched = hlo(`
HloModule scatter_batch
${REDUCERS}
ENTRY e {
  x = f32[2,3] parameter(0)
  idx = s32[2,1] parameter(1)
  u = f32[2] parameter(2)
  ROOT s = f32[2,3] scatter(x, idx, u), update_window_dims={}, inserted_window_dims={1},
    scatter_dims_to_operand_dims={1}, input_batching_dims={0},
    scatter_indices_batching_dims={0}, index_vector_dim=1, to_apply=add_f32
}`);
  it("batching dims scatter into each batch", () => {
    const x = f32([2, 3], [0, 0, 0, 0, 0, 0]);
    const got = run(batched, x, s32([2, 1], [2, 0]), f32([2], [5, 7]));
    expect(vals(got)).toEqual([0, 0, 5, 7, 0, 0]);
  });
});

describe("sort", () => {
  const kv = hlo(`
HloModule sort_kv
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = f32[6] parameter(0)
  v = s32[6] parameter(1)
  ROOT s = (f32[6], s32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt
}`);
  it("two operands permuted together, stable", () => {
    const [k, v] = tup(run(kv, f32([6], [3, 1, 2, 1, 3, 0]), s32([6], [0, 1, 2, 3, 4, 5])));
    expect(vals(k!)).toEqual([0, 1, 1, 2, 3, 3]);
    expect(vals(v!)).toEqual([5, 1, 3, 2, 0, 4]);
  });

  const rows = hlo(`
HloModule sort_rows
gt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = s32[2,3] parameter(0)
  ROOT s = s32[2,3] sort(x), dimensions={1}, to_apply=gt
}`);
  it("sorts along the given dim (descending comparator)", () => {
    expect(vals(run(rows, s32([2, 3], [1, 3, 2, 9, 7, 8])))).toEqual([3, 2, 1, 9, 8, 7]);
  });

  const total = hlo(`
HloModule sort_total
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = f32[6] parameter(0)
  ROOT s = f32[6] sort(x), dimensions={0}, to_apply=lt
}`);
  it("a TOTALORDER comparator puts NaN last and -0 before +0", () => {
    expect(vals(run(total, f32([6], [NaN, 1, 0, -0, -Infinity, -1])))).toEqual([
      -Infinity, -1, -0, 0, 1, NaN,
    ]);
  });

  const byAbs = hlo(`
HloModule sort_abs
absless {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  x = s32[] abs(a)
  y = s32[] abs(b)
  ROOT r = pred[] compare(x, y), direction=LT
}
ENTRY e {
  x = s32[5] parameter(0)
  ROOT s = s32[5] sort(x), dimensions={0}, is_stable=true, to_apply=absless
}`);
  it("a general comparator computation (stable on ties)", () => {
    expect(vals(run(byAbs, s32([5], [-3, 2, 1, -2, 3])))).toEqual([1, 2, -2, -3, 3]);
  });
});

// ---- tuples and control flow --------------------------------------------------------------

describe("control flow", () => {
  const loop = hlo(`
HloModule loop
cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(i, ten), direction=LT
}
body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = s32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  acc1 = s32[] add(acc, i1)
  ROOT t = (s32[], s32[]) tuple(i1, acc1)
}
ENTRY e {
  start = s32[] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(start, zero)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(w), index=1
}`);
  it("while sums 1..10, and runs zero times when the condition starts false", () => {
    expect(vals(run(loop, scalarLiteral("s32", 0)))).toEqual([55]);
    expect(vals(run(loop, scalarLiteral("s32", 20)))).toEqual([0]);
  });

  const cond = hlo(`
HloModule cond
inc {
  x = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT r = f32[] add(x, one)
}
dbl {
  x = f32[] parameter(0)
  ROOT r = f32[] add(x, x)
}
neg {
  x = f32[] parameter(0)
  ROOT r = f32[] negate(x)
}
ENTRY e {
  p = pred[] parameter(0)
  i = s32[] parameter(1)
  x = f32[] parameter(2)
  a = f32[] conditional(p, x, x), true_computation=inc, false_computation=dbl
  b = f32[] conditional(i, x, x, x), branch_computations={inc, dbl, neg}
  ROOT t = (f32[], f32[]) tuple(a, b)
}`);
  it("conditional: pred form and index form (out-of-range index → last branch)", () => {
    const at = (p: boolean, i: number) =>
      tup(run(cond, scalarLiteral("pred", p), scalarLiteral("s32", i), scalarLiteral("f32", 5)))
        .map((v) => vals(v)[0]);
    expect(at(true, 0)).toEqual([6, 6]);
    expect(at(false, 1)).toEqual([10, 10]);
    expect(at(false, 2)).toEqual([10, -5]);
    expect(at(true, -1)).toEqual([6, -5]);
    expect(at(true, 7)).toEqual([6, -5]);
  });

  const calls = hlo(`
HloModule calls
fused {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  m = f32[2] multiply(a, b)
  ROOT s = f32[2] add(m, a)
}
pair {
  a = f32[2] parameter(0)
  n = f32[2] negate(a)
  inner = (f32[2]) tuple(n)
  ROOT t = (f32[2], (f32[2])) tuple(a, inner)
}
ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  f = f32[2] fusion(x, y), kind=kLoop, calls=fused
  c = (f32[2], (f32[2])) call(f), to_apply=pair
  ROOT t = ((f32[2], (f32[2])), f32[2]) tuple(c, f)
}`);
  it("fusion and call evaluate their computations; nested tuples come back nested", () => {
    const out = tup(run(calls, f32([2], [1, 2]), f32([2], [3, 4])));
    const [c, f] = out;
    expect(vals(f!)).toEqual([4, 10]);
    const [a, inner] = tup(c!);
    expect(vals(a!)).toEqual([4, 10]);
    expect(vals(tup(inner!)[0]!)).toEqual([-4, -10]);
  });
});

describe("custom-call", () => {
  const m = hlo(`
HloModule cc
ENTRY e {
  x = f32[2] parameter(0)
  ROOT r = f32[2] custom-call(x), custom_call_target="kiln_test_double"
}`);
  it("an unregistered target is an EvalError naming it", () => {
    expect(() => run(m, f32([2], [1, 2]))).toThrow(EvalError);
    expect(() => run(m, f32([2], [1, 2]))).toThrow(/'kiln_test_double' is not registered/);
  });
  it("a registered target runs", () => {
    registerCustomCallTarget("kiln_test_double", (ops) => {
      const x = ops[0] as Literal;
      return literal("f32", x.dims, Array.from(x.data as Float32Array, (v) => 2 * v));
    });
    try {
      expect(vals(run(m, f32([2], [1, 2])))).toEqual([2, 4]);
    } finally {
      unregisterCustomCallTarget("kiln_test_double");
    }
  });
});

// ---- bounded dynamic dims -----------------------------------------------------------------

describe("bounded dynamic dims", () => {
  const sizes = hlo(`
HloModule dyn
${REDUCERS}
ENTRY e {
  p = f32[<=8] parameter(0)
  n = s32[] get-dimension-size(p), dimensions={0}
  z = f32[] constant(0)
  s = f32[] reduce(p, z), dimensions={0}, to_apply=add_f32
  d = f32[<=8] add(p, p)
  b = f32[2,<=8] broadcast(p), dimensions={1}
  ROOT t = (s32[], f32[], f32[<=8], f32[2,<=8]) tuple(n, s, d, b)
}`);
  it("ops work on actual sizes: get-dimension-size, reduce, elementwise, broadcast", () => {
    const [n, s, d, b] = tup(run(sizes, f32([5], [1, 2, 3, 4, 5])));
    expect(vals(n!)).toEqual([5]);
    expect(vals(s!)).toEqual([15]);
    expect(lit(d!).dims).toEqual([5]);
    expect(vals(d!)).toEqual([2, 4, 6, 8, 10]);
    expect(lit(b!).dims).toEqual([2, 5]);
    const full = tup(run(sizes, f32([8], new Array<number>(8).fill(1))));
    expect(vals(full[0]!)).toEqual([8]);
  });

  const setSize = hlo(`
HloModule set_size
ENTRY e {
  p = f32[8] parameter(0)
  k = s32[] parameter(1)
  r = f32[<=8] set-dimension-size(p, k), dimensions={0}
  n = s32[] get-dimension-size(r), dimensions={0}
  ROOT t = (f32[<=8], s32[]) tuple(r, n)
}`);
  it("set-dimension-size keeps the first n entries; n above the bound is an error", () => {
    const x = f32([8], [1, 2, 3, 4, 5, 6, 7, 8]);
    const [r, n] = tup(run(setSize, x, scalarLiteral("s32", 3)));
    expect(vals(r!)).toEqual([1, 2, 3]);
    expect(vals(n!)).toEqual([3]);
    expect(() => run(setSize, x, scalarLiteral("s32", 9))).toThrow(
      /%r: set-dimension-size\(f32\[8\], s32\[\]\): size 9 is outside \[0, 8\]/,
    );
  });

  const reshape = hlo(`
HloModule dyn_reshape
ENTRY e {
  p = f32[<=4,3] parameter(0)
  a = f32[<=12] reshape(p)
  b = f32[<=4,3,1] reshape(p)
  s = f32[<=4,2] slice(p), slice={[0:4], [1:3]}
  ROOT t = (f32[<=12], f32[<=4,3,1], f32[<=4,2]) tuple(a, b, s)
}`);
  it("reshape infers the dynamic dim from the element count; a full slice stays dynamic", () => {
    const [a, b, s] = tup(run(reshape, f32([2, 3], [1, 2, 3, 4, 5, 6])));
    expect(lit(a!).dims).toEqual([6]);
    expect(lit(b!).dims).toEqual([2, 3, 1]);
    // slice {[0:4]} covers the whole bounded dim, so it keeps the actual size 2
    expect(lit(s!).dims).toEqual([2, 2]);
    expect(vals(s!)).toEqual([2, 3, 5, 6]);
  });

  const mismatch = hlo(`
HloModule dyn_mismatch
ENTRY e {
  a = f32[<=8] parameter(0)
  b = f32[<=8] parameter(1)
  ROOT r = f32[<=8] add(a, b)
}`);
  it("elementwise ops need equal actual dims", () => {
    expect(() => run(mismatch, f32([3], [1, 2, 3]), f32([5], [1, 2, 3, 4, 5]))).toThrow(
      /%r: add\(f32\[3\], f32\[5\]\): operands have different actual dims/,
    );
  });

  it("arguments: a dynamic dim may be short but not above its bound; static dims exact", () => {
    expect(() => run(mismatch, f32([9], new Array(9).fill(0)), f32([1], [0]))).toThrow(
      /argument 0 is f32\[9\] but parameter 0 'a' .* is f32\[<=8\]/,
    );
    expect(vals(run(mismatch, f32([0], []), f32([0], [])))).toEqual([]);
  });
});

// ---- errors -------------------------------------------------------------------------------

describe("errors", () => {
  it("a result no array can hold → EvalError naming the instruction, count and bytes", () => {
    const huge = hlo(`
HloModule broadcast_huge
ENTRY e {
  z = f32[] constant(0)
  ROOT b = f32[99999999999] broadcast(z), dimensions={}
}`);
    expect(() => run(huge)).toThrow(EvalError);
    expect(() => run(huge)).toThrow(/^evaluate %b: broadcast\(f32\[\]\): cannot allocate /);
    expect(() => run(huge)).toThrow(
      /99999999999 f32 elements \(399999999996 bytes\) requested, more than the 4294967296/,
    );
    expect(() => filledLiteral("s64", [1e5, 1e5, 1e5], 0)).toThrow(
      /1000000000000000 s64 elements \(8000000000000000 bytes\) requested/,
    );
  });

  const m = hlo(`
HloModule args
ENTRY e {
  x = f32[2,3] parameter(0)
  y = s32[] parameter(1)
  ROOT r = f32[2,3] negate(x)
}`);
  it("wrong argument count, element type or dims → EvalError naming the parameter", () => {
    const x = f32([2, 3], [1, 2, 3, 4, 5, 6]);
    expect(() => run(m, x)).toThrow(/takes 2 argument\(s\), got 1/);
    expect(() => run(m, f32([3, 2], [1, 2, 3, 4, 5, 6]), scalarLiteral("s32", 1))).toThrow(
      /evaluate %x: argument 0 is f32\[3,2\] but parameter 0 'x' of 'e' is f32\[2,3\]/,
    );
    expect(() => run(m, x, scalarLiteral("f32", 1))).toThrow(
      /argument 1 is f32\[\] but parameter 1 'y' of 'e' is s32\[\]: element type f32 is not s32/,
    );
    expect(() => run(m, x, [scalarLiteral("s32", 1)])).toThrow(
      /expected an array s32\[\], got a tuple/,
    );
  });

  const nested = hlo(`
HloModule nested
body {
  x = f32[2] parameter(0)
  ROOT r = f32[2] custom-call(x), custom_call_target="nowhere"
}
ENTRY e {
  x = f32[2] parameter(0)
  ROOT c = f32[2] call(x), to_apply=body
}`);
  it("an error in a called computation names both instructions", () => {
    expect(() => run(nested, f32([2], [1, 2]))).toThrow(
      /evaluate %c: call\(f32\[2\]\): in a called computation: evaluate %r: custom-call/,
    );
  });

  const wrongShape = hlo(
    `
HloModule wrong_shape
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT r = f32[3,3] negate(x)
}`,
    true,
  );
  it("a result that does not fit its declared shape is reported", () => {
    expect(() => run(wrongShape, f32([2, 3], [1, 2, 3, 4, 5, 6]))).toThrow(
      /%r: negate\(f32\[2,3\]\) produced f32\[2,3\], which does not fit .* f32\[3,3\]/,
    );
  });

  it("evaluateComputation runs a non-entry computation on values", () => {
    const c = MODULES.find((x) => x.name === "calls")!.getComputation("fused");
    expect(vals(evaluateComputation(c, [f32([2], [1, 2]), f32([2], [3, 4])]))).toEqual([4, 10]);
    expect(() => evaluateComputation(c, [f32([2], [1, 2])])).toThrow(
      /computation 'fused' takes 2 argument\(s\), got 1/,
    );
  });
});

// ---- collectives over N simulated devices -------------------------------------------------

describe("collectives (evaluateReplicated: N devices in lockstep)", () => {
  const ADD = `
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
`;
  const on = (...xs: number[][]) => xs.map((x) => [f32([x.length], x)]);
  const each = (rs: EvalValue[]) => rs.map((r) => (Array.isArray(r) ? r.map(vals) : vals(r)));

  it("all-reduce sums within each replica group, and over every device without groups", () => {
    const m = hlo(`HloModule ar
${ADD}
ENTRY %e {
  %x = f32[2] parameter(0)
  %g = f32[2] all-reduce(%x), replica_groups={{0,2},{1,3}}, to_apply=%add
  %all = f32[2] all-reduce(%x), replica_groups={}, to_apply=%add
  ROOT %t = (f32[2], f32[2]) tuple(%g, %all)
}`);
    const rs = evaluateReplicated(m, on([1, 2], [10, 20], [100, 200], [1000, 2000]));
    expect(each(rs)).toEqual([
      [[101, 202], [1111, 2222]],
      [[1010, 2020], [1111, 2222]],
      [[101, 202], [1111, 2222]],
      [[1010, 2020], [1111, 2222]],
    ]);
  });

  it("all-gather concatenates in group order; reduce-scatter gives device j the j-th part", () => {
    const m = hlo(`HloModule ag
${ADD}
ENTRY %e {
  %x = f32[2] parameter(0)
  %g = f32[4] all-gather(%x), replica_groups={{1,0}}, dimensions={0}
  %r = f32[1] reduce-scatter(%x), replica_groups={{0,1}}, dimensions={0}, to_apply=%add
  ROOT %t = (f32[4], f32[1]) tuple(%g, %r)
}`);
    expect(each(evaluateReplicated(m, on([1, 2], [3, 4])))).toEqual([
      [[3, 4, 1, 2], [4]],
      [[3, 4, 1, 2], [6]],
    ]);
  });

  it("all-to-all sends chunk j to device j (array and tuple forms)", () => {
    const m = hlo(`HloModule a2a
ENTRY %e {
  %x = f32[4] parameter(0)
  %a = f32[4] all-to-all(%x), replica_groups={{0,1}}, dimensions={0}
  %s0 = f32[2] slice(%x), slice={[0:2]}
  %s1 = f32[2] slice(%x), slice={[2:4]}
  %b = (f32[2], f32[2]) all-to-all(%s0, %s1), replica_groups={{0,1}}
  ROOT %t = (f32[4], (f32[2], f32[2])) tuple(%a, %b)
}`);
    const rs = evaluateReplicated(m, on([1, 2, 3, 4], [5, 6, 7, 8]));
    const flat = rs.map((r) => {
      const [a, b] = r as EvalValue[];
      return [vals(a!), (b as EvalValue[]).map(vals)];
    });
    expect(flat).toEqual([
      [[1, 2, 5, 6], [[1, 2], [5, 6]]],
      [[3, 4, 7, 8], [[3, 4], [7, 8]]],
    ]);
  });

  it("collective-permute moves values along the pairs; a device no pair targets gets zeros", () => {
    const m = hlo(`HloModule cp
ENTRY %e {
  %x = f32[2] parameter(0)
  ROOT %p = f32[2] collective-permute(%x), source_target_pairs={{0,1},{1,2}}
}`);
    expect(each(evaluateReplicated(m, on([1, 2], [3, 4], [5, 6])))).toEqual([
      [0, 0],
      [1, 2],
      [3, 4],
    ]);
  });

  it("the -start/-done pairs compute what the synchronous collectives do", () => {
    const m = hlo(`HloModule async
${ADD}
ENTRY %e {
  %x = f32[2] parameter(0)
  %ars = f32[2] all-reduce-start(%x), to_apply=%add
  %ard = f32[2] all-reduce-done(%ars)
  %ags = (f32[2], f32[4]) all-gather-start(%x), dimensions={0}
  %agd = f32[4] all-gather-done(%ags)
  %cps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(%x),
    source_target_pairs={{0,1},{1,0}}
  %cpd = f32[2] collective-permute-done(%cps)
  ROOT %t = (f32[2], f32[4], f32[2]) tuple(%ard, %agd, %cpd)
}`);
    expect(each(evaluateReplicated(m, on([1, 2], [3, 4])))).toEqual([
      [[4, 6], [1, 2, 3, 4], [3, 4]],
      [[4, 6], [1, 2, 3, 4], [1, 2]],
    ]);
  });

  it("groups follow XLA's modes: replicas, partitions (channel_id), flattened ids", () => {
    // 2 replicas x 2 partitions: device d = replica * 2 + partition.
    const m = hlo(`HloModule modes
${ADD}
ENTRY %e {
  %x = f32[1] parameter(0)
  %rep = f32[1] all-reduce(%x), to_apply=%add
  %both = f32[1] all-reduce(%x), channel_id=1, replica_groups={{0,1}}, to_apply=%add
  %flat = f32[1] all-reduce(%x), channel_id=2, replica_groups=[2,2]<=[2,2]T(1,0),
    use_global_device_ids=true, to_apply=%add
  %perm = f32[1] collective-permute(%x), channel_id=3, source_target_pairs={{0,1}}
  %rid = u32[] replica-id()
  %pid = u32[] partition-id()
  ROOT %t = (f32[1], f32[1], f32[1], f32[1], u32[], u32[])
    tuple(%rep, %both, %flat, %perm, %rid, %pid)
}`);
    const rs = evaluateReplicated(m, on([1], [10], [100], [1000]), { partitions: 2 });
    expect(each(rs)).toEqual([
      [[101], [1111], [101], [0], [0], [0]],
      [[1010], [1111], [1010], [1], [0], [1]],
      [[101], [1111], [101], [0], [1], [0]],
      [[1010], [1111], [1010], [100], [1], [1]],
    ]);
  });

  it("runs a collective inside a loop on every device, and refuses diverging devices", () => {
    const m = hlo(`HloModule loop
${ADD}
%cond (s: (s32[], f32[2])) -> pred[] {
  %s = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (s: (s32[], f32[2])) -> (s32[], f32[2]) {
  %s = (s32[], f32[2]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %v = f32[2] get-tuple-element(%s), index=1
  %r = f32[2] all-reduce(%v), to_apply=%add
  ROOT %t = (s32[], f32[2]) tuple(%j, %r)
}
ENTRY %e {
  %i0 = s32[] parameter(0)
  %x = f32[2] parameter(1)
  %s0 = (s32[], f32[2]) tuple(%i0, %x)
  %w = (s32[], f32[2]) while(%s0), condition=%cond, body=%body
  ROOT %out = f32[2] get-tuple-element(%w), index=1
}`);
    const s32 = (v: number) => literal("s32", [], [v]);
    const rs = evaluateReplicated(m, [
      [s32(0), f32([2], [1, 2])],
      [s32(0), f32([2], [3, 4])],
    ]);
    // (1,2)+(3,4) = (4,6), then doubled by each of the two further trips.
    expect(rs.map(vals)).toEqual([
      [16, 24],
      [16, 24],
    ]);
    expect(() =>
      evaluateReplicated(m, [
        [s32(0), f32([2], [1, 2])],
        [s32(1), f32([2], [3, 4])],
      ]),
    ).toThrow(/the devices disagree on the loop condition/);
  });

  it("async-start runs its callee (in lockstep when it holds a collective)", () => {
    const m = hlo(`HloModule async
${ADD}
%wrapped (a: f32[2]) -> f32[2] {
  %a = f32[2] parameter(0)
  ROOT %r = f32[2] all-reduce(%a), to_apply=%add
}
ENTRY %e {
  %x = f32[2] parameter(0)
  %s = ((f32[2]), f32[2], s32[]) async-start(%x), calls=%wrapped
  %u = ((f32[2]), f32[2], s32[]) async-update(%s)
  %d = f32[2] async-done(%u), calls=%wrapped
  %c = s32[] get-tuple-element(%u), index=2
  ROOT %t = (f32[2], s32[]) tuple(%d, %c)
}`);
    expect(each(evaluateReplicated(m, on([1, 2], [3, 4])))).toEqual([
      [[4, 6], [0]],
      [[4, 6], [0]],
    ]);
    expect((run(m, f32([2], [1, 2])) as EvalValue[]).map(vals)).toEqual([[1, 2], [0]]);
  });

  it("a float reducer of a wider type combines in it and converts back (mixed precision)", () => {
    const m = hlo(`HloModule mixed
${ADD}
ENTRY %e {
  %x = bf16[1] parameter(0)
  ROOT %r = bf16[1] all-reduce(%x), to_apply=%add
}`);
    // 256 + 1 + 1: in bf16 each step would round back to 256; in f32 the sum is 258.
    const v = (x: number) => [literal("bf16", [1], [x])];
    const rs = evaluateReplicated(m, [v(256), v(1), v(1)]);
    expect(rs.map(vals)).toEqual([[258], [258], [258]]);
  });

  it("evaluate() runs one device: groups naming other devices are an error", () => {
    const m = hlo(`HloModule one
${ADD}
ENTRY %e {
  %x = f32[2] parameter(0)
  %a = f32[2] all-reduce(%x), to_apply=%add
  ROOT %b = f32[2] all-reduce(%a), replica_groups={{0,1}}, to_apply=%add
}`);
    expect(() => run(m, f32([2], [1, 2]))).toThrow(
      /replica_groups name replica 1, but the program runs on 1 replica\(s\) x 1 partition/,
    );
    const single = hlo(`HloModule single
${ADD}
ENTRY %e {
  %x = f32[2] parameter(0)
  ROOT %a = f32[2] all-reduce(%x), to_apply=%add
}`);
    expect(vals(run(single, f32([2], [1, 2])))).toEqual([1, 2]);
    expect(() => evaluateReplicated(single, on([1, 2], [3, 4]), { replicas: 3 })).toThrow(
      /one argument list per device: 3 replica\(s\) x 1 partition\(s\), got 2/,
    );
  });
});

// ---- coverage -----------------------------------------------------------------------------

describe("coverage", () => {
  it("every opcode appears in at least one module of this file", () => {
    const seen = new Set<Opcode>();
    for (const m of MODULES) for (const i of m.allInstructions()) seen.add(i.opcode);
    const missing = OPCODES.filter((op) => !seen.has(op));
    expect(missing).toEqual([]);
  });
  it("every module of this file but the deliberately broken ones passes the verifier", () => {
    for (const m of MODULES) {
      if (INVALID.has(m)) expect(() => verifyModule(m), m.name).toThrow();
      else expect(() => verifyModule(m), m.name).not.toThrow();
    }
  });
});
