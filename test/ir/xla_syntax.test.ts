// Syntax forms of XLA's HLO text that Kiln reads: result shapes left out for the shape rule to
// infer, nested instructions as operands, a scalar broadcast without dimensions=, and the
// `HloModule name:` header. Each reads into the module its explicit spelling gives (same
// fingerprint), verifies, and round-trips through the printer and the proto.

import { describe, expect, it } from "vitest";
import { ParseError } from "../../ir/errors.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { verifyModule } from "../../ir/verify.ts";
import { jsBackend, UnsupportedError } from "../../runtime/index.ts";

function roundTrips(m: Module): void {
  verifyModule(m);
  expect(fingerprint(parseHlo(printHlo(m)))).toBe(fingerprint(m));
  expect(fingerprint(moduleFromProto(moduleToProto(m)))).toBe(fingerprint(m));
}

const mod = (body: string, header = "HloModule m") =>
  parseHlo(`${header}\nENTRY e {\n  ${body.trim().split("\n").join("\n  ")}\n}\n`);

describe("XLA's syntax forms", () => {
  it("a result shape left out is inferred by the opcode's shape rule", () => {
    const short = mod(`
p = f32[2,3] parameter(0)
q = s32[] parameter(1)
t = transpose(p), dimensions={1,0}
c = compare(p, p), direction=LT
s = select(c, p, p)
n = negate(t)
ROOT r = tuple(n, s, q)`);
    const long = mod(`
p = f32[2,3] parameter(0)
q = s32[] parameter(1)
t = f32[3,2] transpose(p), dimensions={1,0}
c = pred[2,3] compare(p, p), direction=LT
s = f32[2,3] select(c, p, p)
n = f32[3,2] negate(t)
ROOT r = (f32[3,2], f32[2,3], s32[]) tuple(n, s, q)`);
    expect(fingerprint(short)).toBe(fingerprint(long));
    roundTrips(short);
  });

  it("an opcode whose shape no rule gives still needs it written", () => {
    for (const body of ["ROOT p = parameter(0)", "ROOT c = constant(1)"]) {
      expect(() => mod(body)).toThrow(ParseError);
    }
    expect(() => mod("p = f32[] parameter(0)\nROOT r = reshape(p)")).toThrow(
      /expected the result shape of reshape 'r' \(no rule infers it/,
    );
    // Operands the rule rejects: the rule's message, at the instruction.
    const mixed = "p = f32[2] parameter(0)\nq = s32[2] parameter(1)\nROOT a = add(p, q)";
    expect(() => mod(mixed)).toThrow(
      /add 'a' a result shape.*operands must have the same element type/,
    );
  });

  it("nested instructions are emitted before their user, named as XLA names them", () => {
    const m = mod(`
p = f32[2] parameter(0)
ROOT a = f32[2] add(f32[2] negate(p), exponential(negate(p)))`);
    const names = m.entry.instructions.map((i) => `${i.name}=${i.opcode}`);
    expect(names).toEqual([
      "p=parameter",
      "negate.anon=negate",
      "negate.anon.1=negate",
      "exponential.anon=exponential",
      "a=add",
    ]);
    roundTrips(m);
    const x = literal("f32", [2], [0, 1]);
    const out = evaluate(m, [x]) as Literal;
    expect(Array.from(out.data as Float32Array)).toEqual(
      [0, 1].map((v) => Math.fround(-v + Math.fround(Math.exp(-v)))),
    );
  });

  it("a nested name never collides with a written one", () => {
    const m = mod(`
p = f32[2] parameter(0)
negate.anon = f32[2] negate(p)
ROOT a = add(negate(p), negate.anon)`);
    expect(m.entry.instructions.map((i) => i.name)).toEqual([
      "p",
      "negate.anon",
      "negate.anon.1",
      "a",
    ]);
    roundTrips(m);
  });

  it("broadcast without dimensions= broadcasts a scalar; of a non-scalar, fails to verify", () => {
    const m = mod("p = f32[] parameter(0)\nROOT b = f32[3] broadcast(p)");
    expect(m.entry.root.attrs.dimensions).toEqual([]);
    expect(fingerprint(m)).toBe(
      fingerprint(mod("p = f32[] parameter(0)\nROOT b = f32[3] broadcast(p), dimensions={}")),
    );
    roundTrips(m);
    const bad = mod("p = f32[3] parameter(0)\nROOT b = f32[3,3] broadcast(p)");
    expect(() => verifyModule(bad)).toThrow(/broadcast/);
  });

  it("reads the `HloModule name:` header", () => {
    const m = mod("ROOT c = f32[] constant(1)", "HloModule named:");
    expect(m.name).toBe("named");
    roundTrips(m);
  });

  it("tiled and memory-space layouts are kept, printed and written to the proto", () => {
    const m = mod(`
p = f32[8,4,1]{0,1,2:T(4,128)} parameter(0)
s = u32[]{:S(2)} constant(3)
c = f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)} copy(p)
ROOT t = (f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)}, u32[]{:S(2)}) tuple(c, s)`);
    const c = m.entry.instructions.find((i) => i.name === "c")!;
    expect(c.shape).toEqual({
      kind: "array",
      type: "f32",
      dims: [8, 4, 1],
      dynamic: [false, false, false],
      layout: [1, 2, 0],
      layoutDetails: { tiles: [[1, 128], [2, 1]], elementSizeInBits: 32, memorySpace: 1 },
    });
    const text = printHlo(m);
    expect(text).toContain("%c = f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)} copy(");
    expect(text).toContain("%s = u32[]{:S(2)} constant(3)");
    roundTrips(m);
    // The details are part of the module: a different tile is a different fingerprint.
    const other = mod(`
p = f32[8,4,1]{0,1,2:T(8,128)} parameter(0)
s = u32[]{:S(2)} constant(3)
c = f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)} copy(p)
ROOT t = (f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)}, u32[]{:S(2)}) tuple(c, s)`);
    expect(fingerprint(other)).not.toBe(fingerprint(m));
  });

  it("a layout field Kiln does not keep is a parse error naming it", () => {
    expect(() => mod("ROOT p = f32[2]{0:D(C)} parameter(0)")).toThrow(
      /expected a layout field Kiln keeps \(T\(tiles\), E\(bits\), S\(memory space\)\), got 'D'/,
    );
    expect(() => mod("ROOT p = f32[2]{0:T(*,2)} parameter(0)")).toThrow(/combined tile dims/);
  });

  it("sharding and frontend_attributes are kept, printed and written to the proto", () => {
    const m = mod(`
p = f32[4,4] parameter(0), sharding={ devices=[2,2]<=[4] }
a = f32[4,4] negate(p), sharding={maximal device=3}, frontend_attributes={z="2",a={n = 1 : i32}}
ROOT t = (f32[4,4], f32[4,4]) tuple(p, a), sharding={{replicated}, {manual}}`);
    const text = printHlo(m);
    // Canonical text (XLA's HloSharding::ToString), attributes sorted by key as XLA's map.
    expect(text).toContain("parameter(0), sharding={devices=[2,2]<=[4]}");
    expect(text).toContain(
      'sharding={maximal device=3}, frontend_attributes={a={n = 1 : i32},z="2"}',
    );
    expect(text).toContain("sharding={{replicated}, {manual}}");
    roundTrips(m);
    // They are part of the module.
    const bare = mod(`
p = f32[4,4] parameter(0)
a = f32[4,4] negate(p)
ROOT t = (f32[4,4], f32[4,4]) tuple(p, a)`);
    expect(fingerprint(bare)).not.toBe(fingerprint(m));
    expect(mod("ROOT p = f32[] parameter(0), frontend_attributes={}").entry.root.attrs).toEqual({
      parameterNumber: 0,
    });
  });

  it("a sharding form Kiln does not structure is kept as text; its proto is a clear error", () => {
    const named = "{mesh[a=2,b=4], [{a}, {b}]}";
    const m = mod(`ROOT p = f32[4,4] parameter(0), sharding=${named}`);
    expect(m.entry.root.attrs.sharding).toBe(named);
    expect(printHlo(m)).toContain(`sharding=${named}`);
    expect(fingerprint(parseHlo(printHlo(m)))).toBe(fingerprint(m));
    expect(() => moduleToProto(m)).toThrow(/the sharding \{mesh.* has no proto form here/);
  });

  it("bitcast: the evaluator reinterprets layouts; the kernel backends decline it", () => {
    const m = mod("p = f32[2,3]{1,0} parameter(0)\nROOT t = f32[3,2]{0,1} bitcast(p)");
    roundTrips(m);
    const out = evaluate(m, [literal("f32", [2, 3], [0, 1, 2, 3, 4, 5])]) as Literal;
    expect(Array.from(out.data as Float32Array)).toEqual([0, 3, 1, 4, 2, 5]);
    expect(() => jsBackend.compile(m)).toThrow(UnsupportedError);
    expect(() => jsBackend.compile(m)).toThrow(/bitcast .* runs on the interpreter only/);
  });

  it("NaN signs and payloads: kept in text; the proto writer refuses, never drops them", () => {
    const m = mod(`
a = f32[4] constant({nan, -nan, nan(0x40007f), -nan(0x1)})
ROOT b = f64[2] constant({-nan(0x8000000000005), nan(0x5)})`);
    const text = printHlo(m);
    expect(text).toContain("constant({nan, -nan, nan(0x40007f), -nan(0x1)})");
    expect(text).toContain("constant({-nan(0x8000000000005), nan(0x5)})");
    expect(fingerprint(parseHlo(text))).toBe(fingerprint(m));
    expect(() => moduleToProto(m)).toThrow(/NaN with a sign or payload \(element 1\)/);
    // The plain NaN is written exactly.
    roundTrips(mod("ROOT a = f32[2] constant({nan, 1})"));
    expect(() => mod("ROOT a = f16[1] constant({nan(0x1)})")).toThrow(
      /expected a NaN without a payload for f16/,
    );
    expect(() => mod("ROOT a = f32[1] constant({nan(0x800000)})")).toThrow(/NaN payload in/);
  });

  it("token[] and after-all: a shape without values; only after-all makes one", () => {
    const m = mod("p = token[] parameter(0)\na = token[] after-all()\nROOT b = after-all(p, a)");
    expect(m.entry.root.shape).toEqual({ kind: "array", type: "token", dims: [], dynamic: [] });
    roundTrips(m);
    expect(() => mod("ROOT c = token[] constant(0)")).toThrow(ParseError);
    const add = mod("p = token[] parameter(0)\nROOT a = token[] add(p, p)");
    expect(() => verifyModule(add)).toThrow(/add/);
    const notToken = mod("p = f32[] parameter(0)\nROOT a = token[] after-all(p)");
    expect(() => verifyModule(notToken)).toThrow(/operand 0 must be token\[\], got f32\[\]/);
    expect(() => jsBackend.compile(m)).toThrow(/token arrays run on the interpreter only/);
  });
});
