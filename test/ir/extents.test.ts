// Extent hints (ir/extents.ts): the dynamic padder marks values whose padding nobody reads; the
// hint round-trips through text and proto, is part of the fingerprint, and is dropped (or
// passed on) when a rewrite changes who reads the value, so CSE, simplification and fusion can
// never make a hinted value feed a user that reads its padding.

import { describe, expect, it } from "vitest";
import {
  extentsOf,
  reduceExtentsOf,
  setExtents,
  setReduceExtents,
} from "../../ir/extents.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { moduleFromProto, moduleToProto } from "../../ir/proto.ts";
import { CSE } from "../../passes/cse.ts";

const TEXT = `HloModule m

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[8,4], n: s32[]) -> (f32[8,4], f32[4]) {
  %x = f32[8,4] parameter(0)
  %n = s32[] parameter(1)
  %e1 = f32[8,4] exponential(f32[8,4] %x)
  %e2 = f32[8,4] exponential(f32[8,4] %x)
  %z = f32[] constant(0)
  %r = f32[4] reduce(f32[8,4] %e2, f32[] %z), dimensions={0}, to_apply=%add
  ROOT %t = (f32[8,4], f32[4]) tuple(f32[8,4] %e1, f32[4] %r)
}
`;

function find(m: Module, name: string): Instruction {
  const i = m.entry.instructions.find((x) => x.name === name);
  if (!i) throw new Error(`no %${name}`);
  return i;
}

describe("extent hints", () => {
  it("round-trip through HLO text and proto, and change the fingerprint", () => {
    const m = parseHlo(TEXT);
    const plain = fingerprint(m);
    setExtents(find(m, "e1"), [{ dim: 0, param: 1, a: 2, c: -1 }]);
    expect(fingerprint(m)).not.toBe(plain);
    const text = printHlo(m);
    expect(text).toContain(`backend_config="{\\"kiln_extents\\":[[0,1,2,-1]]}"`);
    for (const back of [parseHlo(text), moduleFromProto(moduleToProto(m))]) {
      expect(extentsOf(find(back, "e1"))).toEqual([{ dim: 0, param: 1, a: 2, c: -1 }]);
      expect(extentsOf(find(back, "e2"))).toBeUndefined();
    }
    setExtents(find(m, "e1"), []);
    expect(fingerprint(m)).toBe(plain);
  });

  it("CSE never merges a hinted value with an unhinted one that a reduction reads whole", () => {
    const m = parseHlo(TEXT);
    setExtents(find(m, "e1"), [{ dim: 0, param: 1, a: 1, c: 0 }]);
    new CSE().run(m);
    const r = find(m, "r");
    // Either both stay, or the survivor is unhinted: the reduce must read a whole array.
    expect(extentsOf(r.operand(0))).toBeUndefined();
  });

  it("a value that takes over another's users drops its hint, unless promised the same", () => {
    const m = parseHlo(TEXT);
    const e1 = find(m, "e1");
    const e2 = find(m, "e2");
    setExtents(e1, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    e2.replaceAllUsesWith(e1);
    expect(extentsOf(e1)).toBeUndefined();

    const m2 = parseHlo(TEXT);
    const a = find(m2, "e1");
    const b = find(m2, "e2");
    setExtents(a, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    setExtents(b, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    b.replaceAllUsesWith(a);
    expect(extentsOf(a)).toEqual([{ dim: 0, param: 1, a: 1, c: 0 }]);
  });

  it("a fresh replacement with no users of its own inherits the hint", () => {
    const m = parseHlo(TEXT);
    const e1 = find(m, "e1");
    setExtents(e1, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    const fresh = m.entry.addInstruction({
      opcode: "exponential",
      shape: e1.shape,
      operands: [find(m, "x")],
    });
    e1.replaceAllUsesWith(fresh);
    expect(extentsOf(fresh)).toEqual([{ dim: 0, param: 1, a: 1, c: 0 }]);
  });

  it("refuses to overwrite another backend_config", () => {
    const m = parseHlo(TEXT);
    const e1 = find(m, "e1");
    e1.attrs.backendConfig = "opaque";
    expect(() => setExtents(e1, [{ dim: 0, param: 1, a: 1, c: 0 }])).toThrow(/another backend_config/);
  });

  it("a reduction hint sits beside the extent hint and is never handed to a replacement", () => {
    const m = parseHlo(TEXT);
    const r = find(m, "r");
    setReduceExtents(r, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    setExtents(r, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    const back = parseHlo(printHlo(m));
    expect(reduceExtentsOf(find(back, "r"))).toEqual([{ dim: 0, param: 1, a: 1, c: 0 }]);
    expect(extentsOf(find(back, "r"))).toEqual([{ dim: 0, param: 1, a: 1, c: 0 }]);
    // A fresh replacement (which may reduce other dims) gets the extent hint only.
    const fresh = m.entry.addInstruction({
      opcode: "reduce",
      shape: r.shape,
      operands: [find(m, "e2"), find(m, "z")],
      attrs: { dimensions: [0] },
      called: r.called,
    });
    r.replaceAllUsesWith(fresh);
    expect(extentsOf(fresh)).toEqual([{ dim: 0, param: 1, a: 1, c: 0 }]);
    expect(reduceExtentsOf(fresh)).toBeUndefined();
    // Dropping an extent hint keeps the reduction hint (a fact about the operand's values).
    const other = m.entry.addInstruction({ opcode: "exponential", shape: r.shape, operands: [r] });
    m.entry.addInstruction({ opcode: "exponential", shape: r.shape, operands: [other] });
    setExtents(r, [{ dim: 0, param: 1, a: 1, c: 0 }]);
    other.replaceAllUsesWith(r);
    expect(extentsOf(r)).toBeUndefined();
    expect(reduceExtentsOf(r)).toEqual([{ dim: 0, param: 1, a: 1, c: 0 }]);
  });
});
