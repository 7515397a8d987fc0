// Shape ops (reshape view permute transpose unsqueeze squeeze expand from core.ts; flatten
// unflatten mT repeat tile cat stack split chunk narrow slice pad flip roll from shape.ts)
// against PyTorch 1.13's golden values (test/fixtures/shape.json, written by
// scripts/fixtures/gen_shape.py), every case on every registered backend, functional and method
// forms. These ops only move data (cat/stack may also convert), so results must match bit for
// bit: NaN, infinities, -0 and subnormals included. Also: the size of the programs they lower
// to, and the error messages.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import type { Instruction } from "../../ir/module.ts";
import { arrayShape } from "../../ir/shape.ts";
import { backendNames } from "../../runtime/index.ts";
import { type Attrs, lowerOp, type Lowering } from "../../tensor/dispatch.ts";
import {
  ArgumentError,
  OpError,
  opCacheStats,
  ops,
  setEagerBackend,
  tensor,
  Tensor,
} from "../../tensor/index.ts";
import {
  callFunctional,
  callMethod,
  expectClose,
  type FixtureCase,
  loadFixtures,
} from "../fixtures/load.ts";

const cases = loadFixtures("shape");

const AREA_OPS = [
  "reshape", "view", "permute", "transpose", "unsqueeze", "squeeze", "expand", "flatten",
  "unflatten", "mT", "repeat", "tile", "cat", "stack", "split", "chunk", "narrow", "slice", "pad",
  "flip", "roll",
];

const EXACT = { atol: 0, rtol: 0, signedZero: true };

function check(got: Tensor | Tensor[], c: FixtureCase, label: string): void {
  const out = c.out;
  if (Array.isArray(out)) {
    if (!Array.isArray(got)) throw new Error(`${label}: expected a list of tensors`);
    expect(got.length, `${label}: number of pieces`).toBe(out.length);
    out.forEach((o, i) => expectClose(got[i]!, o as Tensor, EXACT, `${label}[${i}]`));
    return;
  }
  if (Array.isArray(got)) throw new Error(`${label}: expected a tensor, got a list`);
  expectClose(got, out as Tensor, EXACT, label);
}

describe("shape fixtures", () => {
  it("cover every op of the area", () => {
    const seen = new Set(cases.map((c) => c.op));
    expect(AREA_OPS.filter((op) => !seen.has(op))).toEqual([]);
    expect([...seen].filter((op) => !AREA_OPS.includes(op))).toEqual([]);
  });
});

describe.each(backendNames())("shape ops vs PyTorch [%s]", (backend) => {
  beforeAll(() => setEagerBackend(backend));
  afterAll(() => setEagerBackend(undefined));
  it.each(cases.map((c) => [c.name, c] as const))("%s", (_, c) => {
    check(callFunctional(c), c, c.name);
    const m = callMethod(c);
    if (m !== undefined) check(m, c, `${c.name} (method)`);
  });
});

// ---- Program size ---------------------------------------------------------------------------

/** The opcodes (parameters left out) an op lowers to for f32 operands of these shapes. */
function opcodes(op: { definition: unknown }, shapes: number[][], attrs: Attrs): string[] {
  const mb = new ModuleBuilder("t");
  mb.entry("main", (b) => {
    const params = shapes.map((s) => b.parameter(arrayShape("f32", s)));
    const r = lowerOp(b, op.definition as Lowering, params, attrs);
    return Array.isArray(r) ? b.tuple(r) : (r as Instruction);
  });
  return mb.module.entry!.instructions.map((i) => i.opcode).filter((o) => o !== "parameter");
}

describe("lowerings stay small", () => {
  it("repeat is one broadcast between reshapes", () => {
    expect(opcodes(ops.repeat, [[2, 3]], { sizes: [2, 1, 2] })).toEqual([
      "reshape",
      "broadcast",
      "reshape",
    ]);
  });

  it("roll is two slices and a concatenate per dim", () => {
    expect(opcodes(ops.roll, [[4, 5]], { shifts: [1], dims: [1] })).toEqual([
      "slice",
      "slice",
      "concatenate",
    ]);
  });

  it("constant pad is one pad instruction, slice one strided slice", () => {
    const pad = opcodes(ops.pad, [[2, 3], []], { pad: [1, 2, -1, 0], mode: "constant" });
    expect(pad).toEqual(["pad"]);
    expect(opcodes(ops.slice, [[10]], { dim: 0, start: 1, end: 9, step: 3 })).toEqual(["slice"]);
  });

  it("ops that change nothing emit nothing", () => {
    expect(opcodes(ops.flip, [[2, 3]], { dims: [] })).toEqual([]);
    expect(opcodes(ops.flatten, [[2, 3]], { startDim: 1, endDim: 1 })).toEqual([]);
    expect(opcodes(ops.roll, [[4]], { shifts: [4], dims: [0] })).toEqual([]);
  });
});

// ---- Argument forms -------------------------------------------------------------------------

describe("argument forms", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]]);

  it("split takes a size or a list of sizes; chunk a count", () => {
    expect(x.split(1, 1).map((t) => t.shape)).toEqual([[2, 1], [2, 1], [2, 1]]);
    expect(x.split([2, 1], { dim: 1 }).map((t) => t.toArray())).toEqual([
      [[1, 2], [4, 5]],
      [[3], [6]],
    ]);
    expect(ops.chunk(x, 2, { dim: -1 }).map((t) => t.shape)).toEqual([[2, 2], [2, 1]]);
  });

  it("slice defaults to the whole dim 0 and takes options", () => {
    expect(x.slice().toArray()).toEqual(x.toArray());
    expect(x.slice({ dim: 1, step: 2 }).toArray()).toEqual([[1, 3], [4, 6]]);
    expect(x.slice(1, -1).toArray()).toEqual([[3], [6]]);
  });

  it("pad takes a runtime value: one program serves every fill value", () => {
    const a = ops.pad(x, [1, 0], { value: 7 });
    const misses = opCacheStats().misses;
    const b = ops.pad(x, [1, 0], { value: -2 });
    expect(opCacheStats().misses).toBe(misses);
    expect(a.toArray()).toEqual([[7, 1, 2, 3], [7, 4, 5, 6]]);
    expect(b.toArray()).toEqual([[-2, 1, 2, 3], [-2, 4, 5, 6]]);
  });
});

// ---- Errors ---------------------------------------------------------------------------------

describe("errors name the op, the shapes and the argument", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]]);

  it("flatten, unflatten, mT", () => {
    expect(() => x.flatten(1, 0)).toThrow(/flatten: startDim 1 cannot come after endDim 0/);
    expect(() => x.flatten(2)).toThrow(/flatten: startDim 2 is out of range/);
    expect(() => x.unflatten(1, [2, 2])).toThrow(
      /unflatten: sizes \[2,2\] do not multiply to the size 3 of dim 1 \(input shape \[2,3\]\)/,
    );
    expect(() => x.unflatten(1, [])).toThrow(/unflatten: sizes must be non-empty/);
    expect(() => tensor([1, 2]).mT).toThrow(/mT: needs a tensor of at least 2 dims, got shape/);
  });

  it("repeat, cat, stack", () => {
    expect(() => x.repeat(2)).toThrow(/repeat: the number of repeats \(1\) cannot be smaller/);
    expect(() => x.repeat(2, -1)).toThrow(ArgumentError);
    expect(() => ops.cat([])).toThrow(/cat: expected a non-empty list of Tensors/);
    expect(() => ops.cat([x, tensor(1)])).toThrow(/cat: zero-dim tensor \(at position 1\)/);
    expect(() => ops.cat([x, tensor([[1, 2]])])).toThrow(
      /cat: sizes of tensors must match except in dim 0: expected size 3 but got size 2/,
    );
    expect(() => ops.cat([x, tensor([1, 2])])).toThrow(/cat: tensors must have the same number/);
    expect(() => ops.cat([x, x], 2)).toThrow(/cat: dim 2 is out of range/);
    expect(() => ops.stack([x, x.mT])).toThrow(
      /stack: expects each tensor to be equal size, but got \[2,3\] at entry 0 and \[3,2\] at/,
    );
  });

  it("split, chunk, narrow, slice", () => {
    expect(() => x.split([1, 1], 1)).toThrow(/split: split sizes \[1,1\] must sum exactly to 3/);
    expect(() => x.split(0)).toThrow(/split: splitSize can only be 0 if the dim's size is 0/);
    expect(() => x.split(-1)).toThrow(ArgumentError);
    expect(() => x.chunk(0)).toThrow(/chunk: chunks must be greater than 0/);
    expect(() => x.narrow(1, 2, 2)).toThrow(/narrow: start \(2\) \+ length \(2\) exceeds the size/);
    expect(() => x.narrow(1, -4, 1)).toThrow(/narrow: start -4 is out of range for dim 1/);
    expect(() => x.slice(0, 0, 2, 0)).toThrow(/slice: argument 'step' must be an integer >= 1/);
    expect(() => tensor(1).slice()).toThrow(/slice: cannot slice a zero-dim tensor/);
  });

  it("pad", () => {
    expect(() => ops.pad(x, [1])).toThrow(/pad: the pad list's length must be even, got 1/);
    expect(() => ops.pad(x, [1, 1, 1, 1, 1, 1])).toThrow(/pad: the pad list .* pads 3 dims but/);
    expect(() => ops.pad(x, [-2, -2])).toThrow(/pad: the input size 3 of dim 1 plus padding/);
    expect(() => ops.pad(x, [3, 0], "reflect")).toThrow(
      /pad: reflect padding \(3, 0\) must be less than the size 3 of dim 1/,
    );
    expect(() => ops.pad(x, [1, 1], "reflect", 2)).toThrow(
      /pad: padding mode 'reflect' does not take a value/,
    );
    expect(() => ops.pad(x, [4, 0], "circular")).toThrow(/pad: circular padding \(4, 0\)/);
    expect(() => ops.pad(x, [1, 1], "wrap" as never)).toThrow(/argument 'mode' must be one of/);
    expect(() => ops.pad(ops.zeros(2, 0), [1, 1], "replicate")).toThrow(
      /pad: replicate padding needs a non-empty dim 1/,
    );
  });

  it("flip, roll", () => {
    expect(() => x.flip(0, 0)).toThrow(/flip: dim 0 appears more than once/);
    expect(() => x.flip(2)).toThrow(OpError);
    expect(() => x.roll([1, 2])).toThrow(/roll: shifts \[1,2\] and dims \[\] must align/);
    expect(() => x.roll([1, 2], [0])).toThrow(/roll: shifts \[1,2\] and dims \[0\] must align/);
  });
});
