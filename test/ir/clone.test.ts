// cloneModule: a copy that prints identically and shares nothing mutable with the original.

import { describe, expect, it } from "vitest";
import { cloneModule } from "../../ir/clone.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { verifyModule } from "../../ir/verify.ts";
import { CORPUS } from "./corpus/models.ts";

describe("cloneModule", () => {
  it.each(Object.keys(CORPUS))("copies %s exactly", (name) => {
    const m = CORPUS[name]!.build();
    const c = cloneModule(m);
    verifyModule(c);
    expect(printHlo(c)).toBe(printHlo(m));
    expect(c.entry).not.toBe(m.entry);
  });

  it("shares no attributes, literals or metadata with the original", () => {
    const m = parseHlo(`HloModule k
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  %c = f32[2] constant({1, 2}), metadata={op_type="const"}
  ROOT %t = f32[2] transpose(%x), dimensions={0}
}`);
    const before = printHlo(m);
    const c = cloneModule(m);
    const [, constant, transpose] = c.entry.instructions;
    (constant!.attrs.literal!.data as Float32Array)[0] = 42;
    constant!.metadata.opType = "changed";
    transpose!.attrs.dimensions!.push(7);
    expect(printHlo(m)).toBe(before);
  });
});
