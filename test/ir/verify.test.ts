// The verifier: a valid module passes; each broken invariant is rejected with a VerifyError that
// names the computation and the instruction. Modules are built with the builder, then broken
// through the module API (or, for the users lists, by hand) the way a buggy pass would.

import { describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { VerifyError } from "../../ir/errors.ts";
import { literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { arrayShape, scalarShape, tupleShape } from "../../ir/shape.ts";
import { verifyComputation, verifyModule } from "../../ir/verify.ts";

const f32 = (...dims: (number | string)[]) => arrayShape("f32", dims);

function verifyError(m: Module): VerifyError {
  try {
    verifyModule(m);
  } catch (e) {
    if (e instanceof VerifyError) return e;
    throw new Error(`expected a VerifyError, got ${String(e)}`);
  }
  throw new Error("expected a VerifyError, the module verified");
}

/** A small valid module; `refs` exposes instructions to break. */
function sample() {
  const mb = new ModuleBuilder("sample");
  const add = mb.reducer("add", "f32");
  const refs: Record<string, Instruction> = {};
  const entry = mb.entry("main", (b) => {
    refs.x = b.parameter(f32("<=8", 4), "x");
    refs.y = b.parameter(f32("<=8", 4), "y");
    refs.sum = b.add(refs.x, refs.y);
    refs.neg = b.negate(refs.sum);
    refs.red = b.reduce(refs.neg, b.scalar("f32", 0), [1], add);
    return refs.red;
  });
  return { mb, module: mb.module, entry, add, refs };
}

describe("verifyModule accepts", () => {
  it("a module with reducers, loops, branches and dynamic dims", () => {
    const mb = new ModuleBuilder("ok");
    const add = mb.reducer("add", "f32");
    const state = tupleShape([scalarShape("s32"), f32(4)]);
    const cond = mb.computation("cond", (b) =>
      b.compare(b.getTupleElement(b.parameter(state), 0), b.scalar("s32", 3), "LT"),
    );
    const body = mb.computation("body", (b) => {
      const s = b.parameter(state);
      const i = b.add(b.getTupleElement(s, 0), b.scalar("s32", 1));
      const v = b.getTupleElement(s, 1);
      return b.tuple([i, b.multiply(v, v)]);
    });
    const neg = mb.computation("neg", (b) => b.negate(b.parameter(f32(4))));
    mb.entry("main", (b) => {
      const x = b.parameter(f32(4));
      const n = b.parameter(scalarShape("s32"));
      const loop = b.while(b.tuple([b.scalar("s32", 0), x]), cond, body);
      const v = b.getTupleElement(loop, 1);
      const picked = b.conditional(b.scalar("pred", true), [v, x], [neg, neg]);
      const dyn = b.setDimensionSize(picked, n, 0);
      return b.reduce(dyn, b.scalar("f32", 0), [0], add);
    });
    expect(() => verifyModule(mb.module)).not.toThrow();
    expect(() => mb.build()).not.toThrow();
  });
});

describe("verifyModule rejects", () => {
  it("a module without an ENTRY", () => {
    const mb = new ModuleBuilder("headless");
    mb.computation("f", (b) => b.parameter(f32(2)));
    const err = verifyError(mb.module);
    expect(err.message).toBe("verifier: module 'headless': the module has no ENTRY");
  });

  it("a stored shape the shape rule does not give", () => {
    const { module, refs } = sample();
    refs.neg!.shape = f32(8, 4);
    const err = verifyError(module);
    expect([err.computation, err.instruction]).toEqual(["main", refs.neg!.name]);
    expect(err.message).toBe(
      `verifier: %${refs.neg!.name} in main: its stored shape is f32[8,4] but the negate ` +
        "shape rule gives f32[<=8,4]",
    );
  });

  it("an instruction whose shape rule fails", () => {
    const { module, refs } = sample();
    refs.y!.shape = f32("<=8", 5);
    refs.sum!.shape = f32("<=8", 5);
    const err = verifyError(module);
    expect(err.instruction).toBe(refs.sum!.name);
    expect(err.message).toContain(
      "add(f32[<=8,4], f32[<=8,5]): operands must have the same dims",
    );
  });

  it("a constant whose shape differs from its literal", () => {
    const mb = new ModuleBuilder("c");
    let k: Instruction | undefined;
    mb.entry("main", (b) => (k = b.constant(literal("f32", [2], [1, 2]))));
    k!.attrs.literal = literal("f32", [3], [1, 2, 3]);
    expect(verifyError(mb.module).message).toContain(
      "the literal's shape f32[3] differs from the declared shape f32[2]",
    );
  });

  it("a wrong operand count", () => {
    const { module, entry, refs } = sample();
    const bad = entry.addInstruction({
      opcode: "negate",
      shape: refs.x!.shape,
      operands: [refs.x!, refs.y!],
      name: "two_operand_negate",
    });
    entry.root = refs.red!;
    const err = verifyError(module);
    expect([err.instruction, err.message]).toEqual([
      bad.name,
      "verifier: %two_operand_negate in main: negate takes 1 operand, it has 2",
    ]);
  });

  it("an operand that comes later in the instruction list", () => {
    const { module, entry, refs } = sample();
    const order = [...entry.instructions];
    const i = order.indexOf(refs.sum!);
    const j = order.indexOf(refs.neg!);
    [order[i], order[j]] = [order[j]!, order[i]!];
    entry.setOrder(order);
    const err = verifyError(module);
    expect(err.instruction).toBe(refs.neg!.name);
    expect(err.message).toContain(
      `operand 0 %${refs.sum!.name} comes after it; instructions must be in topological order`,
    );
  });

  it("a cycle between instructions", () => {
    const { module, refs } = sample();
    refs.sum!.setOperand(0, refs.neg!);
    const err = verifyError(module);
    expect(err.instruction).toBe(refs.sum!.name);
    expect(err.message).toContain(
      `depends on it: a cycle %${refs.sum!.name} -> %${refs.neg!.name} -> %${refs.sum!.name}`,
    );
  });

  it("an instruction that uses itself", () => {
    const { module, refs } = sample();
    refs.neg!.setOperand(0, refs.neg!);
    const err = verifyError(module);
    expect(err.instruction).toBe(refs.neg!.name);
    expect(err.message).toContain("a cycle");
  });

  it("a reducer with the wrong signature", () => {
    const { module, entry, refs } = sample();
    const bad = module.addComputation("bad_reducer");
    const p0 = bad.addInstruction({
      opcode: "parameter",
      shape: scalarShape("f32"),
      attrs: { parameterNumber: 0 },
    });
    for (const n of [1, 2]) {
      const attrs = { parameterNumber: n };
      bad.addInstruction({ opcode: "parameter", shape: scalarShape("f32"), attrs });
    }
    bad.root = p0;
    refs.red!.called = [bad];
    const err = verifyError(module);
    expect([err.computation, err.instruction]).toEqual([entry.name, refs.red!.name]);
    expect(err.message).toContain(
      "reducer (f32[], f32[], f32[]) -> f32[] must take 2 scalar parameters",
    );
  });

  it("a reducer whose types do not match the input", () => {
    const { module, mb, refs } = sample();
    refs.red!.called = [mb.reducer("add", "s32")];
    expect(verifyError(module).message).toContain("accumulator 0 is s32 but init value 0 is f32");
  });

  it("a duplicate parameter number", () => {
    const { module, refs } = sample();
    refs.y!.attrs.parameterNumber = 0;
    const err = verifyError(module);
    expect(err.instruction).toBe("y");
    expect(err.message).toBe(
      "verifier: %y in main: parameter number 0 is also used by %x; each number must appear once",
    );
  });

  it("a gap in the parameter numbers", () => {
    const { module, refs } = sample();
    refs.y!.attrs.parameterNumber = 2;
    const err = verifyError(module);
    expect(err.instruction).toBe("y");
    expect(err.message).toContain("parameters must be numbered 0..1; number 1 is missing");
  });

  it("recursion between computations", () => {
    const mb = new ModuleBuilder("rec");
    const a = mb.computation("a", (b) => b.negate(b.parameter(f32(2))));
    const bComp = mb.computation("b", (b) => b.call([b.parameter(f32(2))], a));
    const aCall = a.addInstruction({
      opcode: "call",
      shape: f32(2),
      operands: [a.root],
      called: [bComp],
      name: "a_calls_b",
    });
    a.root = aCall;
    mb.entry("main", (b) => b.call([b.parameter(f32(2))], bComp));
    const err = verifyError(mb.module);
    expect(err.message).toContain("recursion: the call graph has a cycle");
    expect(err.message).toMatch(/a -> b -> a|b -> a -> b/);
  });

  it("a computation that calls itself", () => {
    const mb = new ModuleBuilder("self");
    const f = mb.computation("f", (b) => b.negate(b.parameter(f32(2))));
    f.root = f.addInstruction({ opcode: "call", shape: f32(2), operands: [f.root], called: [f] });
    mb.entry("main", (b) => b.call([b.parameter(f32(2))], f));
    const err = verifyError(mb.module);
    expect([err.computation, err.message]).toEqual([
      "f",
      `verifier: %${f.root.name} in f: recursion: the call graph has a cycle f -> f`,
    ]);
  });

  it("a call of the ENTRY computation", () => {
    const { module, entry } = sample();
    const helper = module.addComputation("helper");
    const p = helper.addInstruction({
      opcode: "parameter",
      shape: f32("<=8", 4),
      attrs: { parameterNumber: 0 },
    });
    helper.addInstruction({
      opcode: "parameter",
      shape: f32("<=8", 4),
      attrs: { parameterNumber: 1 },
    });
    helper.addInstruction({
      opcode: "call",
      shape: entry.root.shape,
      operands: [p, helper.parameter(1)],
      called: [entry],
      name: "calls_entry",
    });
    expect(verifyError(module).message).toBe(
      "verifier: %calls_entry in helper: it calls the ENTRY computation 'main'",
    );
  });

  it("a called computation from another module", () => {
    const { module, refs } = sample();
    refs.red!.called = [new ModuleBuilder("other").reducer("add", "f32")];
    expect(verifyError(module).message).toContain(
      "it calls computation 'add_f32', which is not in module 'sample'",
    );
  });

  it("duplicate instruction names (renaming onto a used name is refused at once)", () => {
    const { module, refs } = sample();
    expect(() => (refs.neg!.name = refs.sum!.name)).toThrow(
      `module '${module.name}' already has an instruction named '${refs.sum!.name}'`,
    );
    refs.neg!.name = "fresh_name";
    expect(refs.neg!.name).toBe("fresh_name");
    expect(module.hasName("fresh_name")).toBe(true);
    verifyModule(module);
  });

  it("duplicate computation names", () => {
    const { module, add } = sample();
    module.addComputation("spare").addInstruction({
      opcode: "parameter",
      shape: f32(),
      attrs: { parameterNumber: 0 },
    });
    module.getComputation("spare").name = add.name;
    expect(verifyError(module).message).toContain("two computations are named 'add_f32'");
  });

  it("an empty computation", () => {
    const { module } = sample();
    module.addComputation("hollow");
    expect(verifyError(module).message).toBe("verifier: hollow: the computation is empty");
  });

  it("a users list that disagrees with the operands", () => {
    const { module, refs } = sample();
    // Corrupt the link the way a pass editing internals by hand would.
    (refs.sum!.users as Instruction[]).length = 0;
    const err = verifyError(module);
    expect(err.instruction).toBe(refs.neg!.name);
    expect(err.message).toContain(`it uses %${refs.sum!.name} (operand 0) but is missing`);
  });

  it("a while whose body does not preserve the loop state", () => {
    const mb = new ModuleBuilder("w");
    const state = tupleShape([scalarShape("s32"), f32(4)]);
    const cond = mb.computation("cond", (b) =>
      b.compare(b.getTupleElement(b.parameter(state), 0), b.scalar("s32", 3), "LT"),
    );
    const body = mb.computation("body", (b) => b.parameter(state));
    let loop: Instruction | undefined;
    mb.entry("main", (b) => {
      loop = b.while(b.tuple([b.scalar("s32", 0), b.parameter(f32(4))]), cond, body);
      return loop;
    });
    const narrow = mb.computation("narrow", (b) => b.getTupleElement(b.parameter(state), 0));
    loop!.called = [cond, narrow];
    expect(verifyError(mb.module).message).toContain(
      "body ((s32[], f32[4])) -> s32[] must return the loop state's shape",
    );
  });
});

describe("verifyComputation", () => {
  it("checks one computation on its own", () => {
    const { entry, refs } = sample();
    expect(() => verifyComputation(entry)).not.toThrow();
    refs.neg!.shape = f32(1);
    expect(() => verifyComputation(entry)).toThrow(VerifyError);
  });
});
