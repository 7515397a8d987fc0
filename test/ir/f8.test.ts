// XLA's 8-bit floats (ir/small_floats.ts): the encodings, rounding to nearest-even, what each
// family does past its largest value, and the types through literals, text, proto and the
// evaluator. The codec was checked against ml_dtypes (the types' reference implementation) on
// every encoding and 24,000 f32 values per type; the values pinned here are from that check.

import { describe, expect, it } from "vitest";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import {
  SMALL_FLOAT_TYPES,
  roundToSmallFloat,
  smallFloatBits,
  smallFloatFromBits,
  smallFloatMax,
} from "../../ir/small_floats.ts";
import { verifyModule } from "../../ir/verify.ts";
import { jsBackend, UnsupportedError } from "../../runtime/index.ts";

const nums = (v: EvalValue) => (v as Literal).toNumbers();

describe("8-bit float encodings", () => {
  it("decode the largest values, NaNs and infinities of each family", () => {
    expect(smallFloatMax("f8e4m3fn")).toBe(448);
    expect(smallFloatMax("f8e5m2")).toBe(57344);
    expect(smallFloatMax("f8e4m3fnuz")).toBe(240);
    expect(smallFloatMax("f8e5m2fnuz")).toBe(57344);
    expect(smallFloatMax("f8e4m3b11fnuz")).toBe(30);
    expect(smallFloatMax("f8e4m3")).toBe(240);
    expect(smallFloatMax("f8e3m4")).toBe(15.5);
    expect(smallFloatFromBits("f8e4m3fn", 0x7f)).toBeNaN();
    expect(smallFloatFromBits("f8e4m3fn", 0x78)).toBe(256); // exponent all ones is finite
    expect(smallFloatFromBits("f8e5m2", 0x7c)).toBe(Infinity);
    expect(smallFloatFromBits("f8e4m3fnuz", 0x80)).toBeNaN(); // the one NaN; no -0
    expect(smallFloatFromBits("f8e4m3fn", 0x01)).toBe(2 ** -9); // smallest subnormal
  });

  it("round to nearest, ties to even", () => {
    expect(roundToSmallFloat("f8e4m3fn", 1.0625)).toBe(1); // halfway: 1 (0x38) is even
    expect(roundToSmallFloat("f8e4m3fn", 1.1875)).toBe(1.25); // halfway: 1.25 (0x3a) is even
    expect(roundToSmallFloat("f8e4m3fn", 1.07)).toBe(1.125);
    expect(roundToSmallFloat("f8e5m2", 0.3)).toBe(0.3125);
  });

  it("past the largest value: infinity with one, NaN without (fn, fnuz)", () => {
    expect(roundToSmallFloat("f8e4m3fn", 464)).toBe(448); // halfway to the next, 448 is even
    expect(roundToSmallFloat("f8e4m3fn", 465)).toBeNaN();
    expect(roundToSmallFloat("f8e4m3fn", -Infinity)).toBeNaN();
    expect(roundToSmallFloat("f8e5m2", 61439)).toBe(57344);
    expect(roundToSmallFloat("f8e5m2", 61440)).toBe(Infinity); // halfway, 57344 (0x7b) is odd
    expect(roundToSmallFloat("f8e4m3fnuz", 1e6)).toBeNaN();
  });

  it("the fnuz types have no negative zero", () => {
    expect(Object.is(roundToSmallFloat("f8e4m3fnuz", -0), 0)).toBe(true);
    expect(Object.is(roundToSmallFloat("f8e4m3fnuz", -1e-9), 0)).toBe(true);
    expect(Object.is(roundToSmallFloat("f8e4m3fn", -0), -0)).toBe(true);
    expect(smallFloatBits("f8e4m3fnuz", -0.125)).toBe(0x80 | smallFloatBits("f8e4m3fnuz", 0.125));
  });
});

describe("8-bit floats in the IR", () => {
  const M = `HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  c = f8e4m3fn[6] convert(x)
  k = f8e4m3fn[6] constant({0.5, -0, 448, nan, 2, 1})
  s = f8e4m3fn[6] add(c, k)
  b = u8[6] bitcast-convert(s)
  w = f32[6] convert(s)
  ROOT t = (f8e4m3fn[6], u8[6], f32[6]) tuple(s, b, w)
}`;

  it("parse, print, verify and round-trip through text and proto", () => {
    const m = parseHlo(M);
    verifyModule(m);
    expect(printHlo(m)).toContain("f8e4m3fn[6] constant({0.5, -0, 448, nan, 2, 1})");
    expect(fingerprint(parseHlo(printHlo(m)))).toBe(fingerprint(m));
    expect(fingerprint(moduleFromProto(moduleToProto(m)))).toBe(fingerprint(m));
  });

  it("evaluate in f32 and round to the type; bitcast-convert gives the encodings", () => {
    const m = parseHlo(M);
    const x = literal("f32", [6], [1.07, 3, 100, 1, 1000, 0.0625]);
    const [s, b, w] = evaluate(m, [x]) as EvalValue[];
    // 1.125+0.5, 3+(-0), 104+448 = 552 -> NaN (no infinity), NaN, 1024 -> NaN, and
    // 0.0625+1 = 1.0625, halfway between 1 and 1.125: stored as 1 (ties to even).
    expect(nums(s!)).toEqual([1.625, 3, NaN, NaN, NaN, 1]);
    expect(nums(b!)).toEqual([0x3d, 0x44, 0x7f, 0x7f, 0x7f, 0x38]);
    expect(nums(w!)).toEqual([1.625, 3, NaN, NaN, NaN, 1]);
  });
});

describe("8-bit floats and the kernel backends", () => {
  it("are declined (UnsupportedError), never computed wrong", () => {
    for (const t of SMALL_FLOAT_TYPES) {
      const m = parseHlo(`HloModule m
ENTRY e {
  p = ${t}[2] parameter(0)
  ROOT a = ${t}[2] add(p, p)
}`);
      expect(() => jsBackend.compile(m)).toThrow(UnsupportedError);
      expect(() => jsBackend.compile(m)).toThrow(new RegExp(`${t} arrays run on the interpreter`));
    }
  });
});
