// Regression tests for IR bugs found in review, one per bug.

import { describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { arrayShape } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";

describe("IR regressions", () => {
  it("a mixed-precision reducer is rejected by the verifier, not accepted then unrunnable", () => {
    const m = parseHlo(`HloModule mixed
%acc (a: f32[], b: bf16[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = bf16[] parameter(1)
  %bc = f32[] convert(%b)
  ROOT %s = f32[] add(%a, %bc)
}
ENTRY %main (x: bf16[4]) -> f32[] {
  %x = bf16[4] parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%acc
}`);
    expect(() => verifyModule(m)).toThrow(/accumulator 0 type f32 does not fit input type bf16/);
  });

  it("copy of a tuple evaluates", () => {
    const m = parseHlo(`HloModule c
ENTRY %main (x: f32[2]) -> (f32[2], f32[2]) {
  %x = f32[2] parameter(0)
  %t = (f32[2], f32[2]) tuple(%x, %x)
  ROOT %c = (f32[2], f32[2]) copy(%t)
}`);
    verifyModule(m);
    const out = evaluate(m, [literal("f32", [2], [1, 2])]) as Literal[];
    expect(out.map((l) => l.toNumbers())).toEqual([[1, 2], [1, 2]]);
  });

  it("a failed builder definition releases its instruction names", () => {
    const mb = new ModuleBuilder("retry");
    expect(() =>
      mb.entry("main", (b) => {
        b.parameter(arrayShape("f32", [2]), "x");
        throw new Error("user code failed");
      }),
    ).toThrow("user code failed");
    mb.entry("main", (b) => b.negate(b.parameter(arrayShape("f32", [2]), "x")));
    verifyModule(mb.build());
  });

  it("Literal.toString shows NaN, infinities and -0", () => {
    expect(literal("f32", [4], [NaN, Infinity, -Infinity, -0]).toString()).toBe(
      "f32[4] [NaN, Infinity, -Infinity, -0]",
    );
    expect(literal("s64", [1], [2n ** 62n]).toString()).toBe("s64[1] [4611686018427387904]");
  });

  it("an unsafe s64 number is refused with the reason", () => {
    expect(() => literal("s64", [1], [2 ** 60])).toThrow(/beyond Number.MAX_SAFE_INTEGER/);
  });
});

describe("Computation edits", () => {
  const text = `HloModule e
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  %dead_a = f32[2] exponential(%x)
  %dead_b = f32[2] negate(%dead_a)
  ROOT %keep = f32[2] abs(%x)
}`;

  it("removing an instruction twice is an error, not the loss of another one", () => {
    const m = parseHlo(text);
    const c = m.entry;
    const b = c.instructions.find((i) => i.name === "dead_b")!;
    c.removeInstruction(b);
    expect(() => c.removeInstruction(b)).toThrow(/removed already/);
    expect(c.root.name).toBe("keep");
    expect(c.instructions.map((i) => i.name)).toEqual(["x", "dead_a", "keep"]);
  });

  it("removeInstructions drops a dead chain at once and keeps the ROOT", () => {
    const m = parseHlo(text);
    const c = m.entry;
    const dead = c.instructions.filter((i) => i.name.startsWith("dead_"));
    c.removeInstructions(dead);
    expect(c.instructions.map((i) => i.name)).toEqual(["x", "keep"]);
    expect(c.root.name).toBe("keep");
    expect(m.hasName("dead_a")).toBe(false);
    verifyModule(m);
    expect(() => c.removeInstructions([c.instructions[0]!])).toThrow(/used by 'keep'/);
  });
});

describe("Module.uniqueName", () => {
  it("gives a name that addInstruction accepts, and never the same name twice", () => {
    const m = parseHlo(`HloModule u
ENTRY %main (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %negate.1 = f32[2] negate(%x)
}`);
    const name = m.uniqueName("negate");
    expect(name).toBe("negate.2");
    expect(m.uniqueName("negate")).toBe("negate.3");
    const c = m.entry;
    const added = c.addInstruction({
      opcode: "negate",
      shape: c.root.shape,
      operands: [c.root],
      name,
    });
    expect(added.name).toBe("negate.2");
    expect(c.addInstruction({ opcode: "negate", shape: c.root.shape, operands: [added] }).name)
      .toBe("negate.4");
  });
});
