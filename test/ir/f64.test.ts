// The f64 element type: the reference evaluator computes and stores it in double precision (what
// the float64 gradient checks of test/tensor/grad_ops.test.ts need); the text form round-trips
// it; the kernel backends decline it (UnsupportedError, so a caller falls back to the
// interpreter), the proto form writes its literals as XLA's f64s (bit for bit), and the frontend
// has no float64 dtype.

import { describe, expect, it } from "vitest";
import { evaluate } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { verifyModule } from "../../ir/verify.ts";
import { jsBackend, UnsupportedError } from "../../runtime/index.ts";
import { fromElementType } from "../../tensor/dtype.ts";

const M = `HloModule f64

add {
  a = f64[] parameter(0)
  b = f64[] parameter(1)
  ROOT s = f64[] add(a, b)
}

ENTRY main {
  x = f64[3] parameter(0)
  third = f64[] constant(0.3333333333333333)
  t = f64[3] broadcast(third), dimensions={}
  y = f64[3] multiply(x, t)
  e = f64[3] exponential(y)
  zero = f64[] constant(0)
  s = f64[] reduce(e, zero), dimensions={0}, to_apply=add
  n = f32[3] convert(y)
  ROOT r = (f64[3], f64[], f32[3]) tuple(y, s, n)
}
`;

describe("f64", () => {
  it("the evaluator computes in double precision; convert to f32 rounds", () => {
    const m = parseHlo(M);
    verifyModule(m);
    const x = literal("f64", [3], [1, 2, 1e-9]);
    const [y, s, n] = evaluate(m, [x]) as Literal[];
    expect(y!.data).toBeInstanceOf(Float64Array);
    const third = 0.3333333333333333;
    expect(Array.from(y!.data as Float64Array)).toEqual([third, 2 * third, 1e-9 * third]);
    expect(s!.data[0]).toBe(Math.exp(third) + Math.exp(2 * third) + Math.exp(1e-9 * third));
    expect(Array.from(n!.data as Float32Array)).toEqual([third, 2 * third, 1e-9 * third].map(Math.fround));
  });

  it("prints and parses back exactly", () => {
    const m = parseHlo(M);
    const text = printHlo(m);
    expect(text).toContain("f64[] constant(0.3333333333333333)");
    expect(printHlo(parseHlo(text))).toBe(text);
  });

  it("the kernel backends decline it and the frontend has none; the proto keeps it exactly", () => {
    const m = parseHlo(M);
    expect(() => jsBackend.compile(m)).toThrow(UnsupportedError);
    expect(() => jsBackend.compile(m)).toThrow(/f64 arrays run on the interpreter only/);
    const back = moduleFromProto(moduleToProto(m));
    expect(printHlo(back)).toBe(printHlo(m));
    const third = back.entry.instructions.find((i) => i.name === "third")!;
    expect(third.attrs.literal!.data[0]).toBe(0.3333333333333333);
    expect(() => fromElementType("f64")).toThrow(/no tensor dtype/);
  });
});
