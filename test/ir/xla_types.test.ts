// The integer element types XLA has beyond s32, s64 and u8 (s4 s8 s16 u4 u16 u32 u64), and f64's
// proto form: through shapes, literals (text and proto), the verifier and the evaluator, and the
// kernel backends declining them (never computing them wrong).

import { describe, expect, it } from "vitest";
import { ELEMENT_TYPE_INFO, reducerIdentity } from "../../ir/element_types.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { dataFromBytes, dataToBytes, Literal, literal, storageCtor } from "../../ir/literal.ts";
import { parseHlo, parseShape } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { ParseError, VerifyError } from "../../ir/errors.ts";
import { verifyModule } from "../../ir/verify.ts";
import { jsBackend, UnsupportedError } from "../../runtime/index.ts";
import { XLA_TYPES_EXPECTED, XLA_TYPES_HLO, XLA_TYPES_INPUTS } from "./corpus/xla_types.ts";

const NEW_TYPES = ["s4", "s8", "s16", "u4", "u16", "u32", "u64"] as const;

describe("XLA's integer element types", () => {
  it("parse, verify and round-trip through text and proto", () => {
    const m = parseHlo(XLA_TYPES_HLO);
    verifyModule(m);
    const text = printHlo(m);
    expect(fingerprint(parseHlo(text))).toBe(fingerprint(m));
    const back = moduleFromProto(moduleToProto(m));
    expect(printHlo(back)).toBe(text);
  });

  it("the evaluator computes XLA's values: wrap-around, x/0, shifts, converts, reductions", () => {
    const args = XLA_TYPES_INPUTS.map(([t, dims, v]) => literal(t, dims, v));
    const out = evaluate(parseHlo(XLA_TYPES_HLO), args) as Literal[];
    expect(out.length).toBe(XLA_TYPES_EXPECTED.length);
    out.forEach((lit, k) => {
      expect([k, Array.from(lit.data as ArrayLike<number | bigint>, String)]).toEqual([
        k,
        XLA_TYPES_EXPECTED[k],
      ]);
    });
  });

  it("each type's extremes are its literal bounds; one past them is a parse error", () => {
    for (const t of NEW_TYPES) {
      const { min, max } = ELEMENT_TYPE_INFO[t];
      const ok = mod(`ROOT c = ${t}[2] constant({${min}, ${max}})`);
      const data = ok.entry.root.attrs.literal!.data as ArrayLike<number | bigint>;
      expect(Array.from(data)).toEqual([min, max]);
      const over = typeof max === "bigint" ? max + 1n : max + 1;
      const text = `ROOT c = ${t}[1] constant({${over}})`;
      expect(() => mod(text)).toThrow(ParseError);
      expect(() => mod(text)).toThrow(new RegExp(`expected a value that fits ${t}`));
      const under = typeof min === "bigint" ? min - 1n : min - 1;
      expect(() => literal(t, [1], [under])).toThrow(/out of range/);
    }
  });

  it("bytes: little-endian, s4/u4 one per byte with the low 4 bits", () => {
    const s16 = literal("s16", [2], [-2, 258]);
    expect(Array.from(dataToBytes("s16", s16.data))).toEqual([0xfe, 0xff, 2, 1]);
    const s4 = dataFromBytes("s4", new Uint8Array([0x0f, 0x08, 0xf7])) as Int8Array;
    expect(Array.from(s4)).toEqual([-1, -8, 7]);
    expect(Array.from(dataFromBytes("u4", new Uint8Array([0xff])) as Uint8Array)).toEqual([15]);
    const u64 = dataFromBytes("u64", new Uint8Array(8).fill(0xff));
    expect(u64[0]).toBe(2n ** 64n - 1n);
    for (const t of NEW_TYPES) expect(storageCtor(t).name).toBe(ELEMENT_TYPE_INFO[t].storage);
  });

  it("and's identity is all ones: -1 signed, the largest value unsigned", () => {
    expect(reducerIdentity("and", "u32")).toBe(4294967295);
    expect(reducerIdentity("and", "u64")).toBe(2n ** 64n - 1n);
    expect(reducerIdentity("and", "s8")).toBe(-1);
    expect(reducerIdentity("maximum", "u16")).toBe(0);
    expect(reducerIdentity("minimum", "s4")).toBe(7);
  });

  it("the verifier applies each opcode's type class to them", () => {
    const bad = (body: string) => mod(`p = u32[2] parameter(0)\n  ${body}`);
    expect(() => verifyModule(bad("ROOT x = u32[2] exponential(p)"))).toThrow(VerifyError);
    const signed = bad("ROOT x = pred[2] compare(p, p), direction=LT, type=SIGNED");
    expect(() => verifyModule(signed)).toThrow(
      /comparison type SIGNED does not apply to element type u32/,
    );
    verifyModule(bad("ROOT x = pred[2] compare(p, p), direction=LT, type=UNSIGNED"));
    expect(() => verifyModule(bad("ROOT x = s4[2,8] bitcast-convert(p)"))).toThrow(
      /bitcast-convert of a 4-bit type is not supported/,
    );
    // Mixed types need an explicit convert, as in XLA.
    const mixed = bad("c = s8[2] constant({1, 2})\n  ROOT x = u32[2] add(p, c)");
    expect(() => verifyModule(mixed)).toThrow(/same element type/);
  });

  it("an unknown element type is still a parse error naming it", () => {
    expect(() => parseShape("c64[2]")).toThrow(ParseError);
    expect(() => parseShape("c64[2]")).toThrow(/got 'c64'/);
  });

  it("the kernel backends decline them (UnsupportedError), never compute them wrong", () => {
    for (const t of NEW_TYPES) {
      const m = mod(`p = ${t}[2] parameter(0)\n  ROOT a = ${t}[2] add(p, p)`);
      expect(() => jsBackend.compile(m)).toThrow(UnsupportedError);
      const why = new RegExp(`${t} arrays run on the interpreter only`);
      expect(() => jsBackend.compile(m)).toThrow(why);
    }
    // A tuple leaf is enough to decline.
    const m = mod(
      "p = f32[2] parameter(0)\n  c = u16[] constant(1)\n  ROOT t = (f32[2], u16[]) tuple(p, c)",
    );
    expect(() => jsBackend.compile(m)).toThrow(/u16 arrays run on the interpreter only/);
  });
});

/** A one-computation module around `body` (instruction lines). */
function mod(body: string) {
  return parseHlo(`HloModule m\nENTRY e {\n  ${body}\n}\n`);
}
