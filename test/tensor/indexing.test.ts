// Indexing ops (gather scatter scatterAdd indexSelect embedding maskedFill tril triu oneHot)
// against PyTorch 1.13's golden values (test/fixtures/indexing.json, written by
// scripts/fixtures/gen_indexing.py), every case on every registered backend, functional and
// method forms. Results are exact (NaN, infinities and -0 included) except where floats are
// accumulated (scatter's add/multiply, scatterAdd): those within 1e-6, though both sides add in
// the same order. Also: eager mode's index-value checks, what the lowerings do with
// out-of-range indices when values are not known (XLA's semantics, run on the IR evaluator),
// and the error messages.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal } from "../../ir/literal.ts";
import type { Instruction } from "../../ir/module.ts";
import { arrayShape, type ElementType } from "../../ir/shape.ts";
import { backendNames } from "../../runtime/index.ts";
import { type Attrs, lowerOp, type Lowering } from "../../tensor/dispatch.ts";
import {
  ArgumentError,
  OpError,
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

const cases = loadFixtures("indexing");

const AREA_OPS = [
  "gather", "scatter", "scatterAdd", "indexSelect", "embedding", "maskedFill", "tril", "triu",
  "oneHot",
];

/** Cases that accumulate floats: add/multiply reductions. */
function accumulates(c: FixtureCase): boolean {
  return c.op === "scatterAdd" || c.kwargs.reduce !== undefined || c.args.length === 5;
}

function check(got: Tensor | Tensor[], c: FixtureCase, label: string): void {
  if (Array.isArray(got)) throw new Error(`${label}: expected a tensor, got a list`);
  const tol = accumulates(c)
    ? { atol: 1e-6, rtol: 1e-6 }
    : { atol: 0, rtol: 0, signedZero: true };
  expectClose(got, c.out as Tensor, tol, label);
}

describe("indexing fixtures", () => {
  it("cover every op of the area", () => {
    const seen = new Set(cases.map((c) => c.op));
    expect(AREA_OPS.filter((op) => !seen.has(op))).toEqual([]);
    expect([...seen].filter((op) => !AREA_OPS.includes(op))).toEqual([]);
  });
});

describe.each(backendNames())("indexing ops vs PyTorch [%s]", (backend) => {
  beforeAll(() => setEagerBackend(backend));
  afterAll(() => setEagerBackend(undefined));
  it.each(cases.map((c) => [c.name, c] as const))("%s", (_, c) => {
    check(callFunctional(c), c, c.name);
    const m = callMethod(c);
    if (m !== undefined) check(m, c, `${c.name} (method)`);
  });
});

// ---- Index values: checked in eager mode, XLA's semantics in a program ---------------------

describe("eager mode checks index values", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]]);

  it("out-of-range and negative indices are errors naming the op and the dim", () => {
    expect(() => x.gather(1, tensor([[3n]]))).toThrow(
      /gather: index 3 is out of bounds for dim 1 with size 3/,
    );
    expect(() => x.gather(0, tensor([[-1n]]))).toThrow(/gather: index -1 is out of bounds/);
    expect(() => x.scatter(1, tensor([[5n]]), 0)).toThrow(
      /scatter: index 5 is out of bounds for dim 1 with size 3/,
    );
    expect(() => x.scatterAdd(0, tensor([[2n]]), x)).toThrow(/scatterAdd: index 2 is out of/);
    expect(() => x.indexSelect(0, tensor([-1n]))).toThrow(/indexSelect: index -1 is out of/);
    expect(() => x.indexSelect(1, tensor([0, 3], { dtype: "int32" }))).toThrow(
      /indexSelect: index 3 is out of bounds for dim 1 with size 3/,
    );
    expect(() => ops.embedding(tensor([2n]), x)).toThrow(
      /embedding: index 2 is out of bounds for the weight's 2 embeddings with size 2/,
    );
    expect(() => ops.oneHot(tensor([3n]), 3)).toThrow(
      /oneHot: class values must be smaller than numClasses \(3\), got 3/,
    );
    expect(() => ops.oneHot(tensor([-1n]))).toThrow(/oneHot: class values must be non-negative/);
  });

  it("oneHot infers numClasses from the values, not from an empty tensor", () => {
    expect(ops.oneHot(tensor([1n, 3n])).shape).toEqual([2, 4]);
    expect(() => ops.oneHot(tensor([], { dtype: "int64" }))).toThrow(
      /oneHot: cannot infer the number of classes from an empty tensor/,
    );
  });
});

/** Runs `op`'s lowering on the IR evaluator, where no value check happens (as under compile). */
function runLowering(
  op: { definition: unknown },
  inputs: { type: ElementType; dims: number[]; data: number[] | bigint[] }[],
  attrs: Attrs,
): number[] {
  const mb = new ModuleBuilder("t");
  mb.entry("main", (b) => {
    const params = inputs.map((i) => b.parameter(arrayShape(i.type, i.dims)));
    return lowerOp(b, op.definition as Lowering, params, attrs) as Instruction;
  });
  const out = evaluate(
    mb.build(),
    inputs.map((i) => literal(i.type, i.dims, i.data)),
  );
  if (Array.isArray(out)) throw new Error("expected one result");
  return Array.from(out.data as ArrayLike<number | bigint>, Number);
}

describe("in a program, out-of-range indices follow XLA (documented)", () => {
  const x = { type: "f32" as const, dims: [2, 3], data: [1, 2, 3, 4, 5, 6] };

  it("gather and indexSelect clamp the index into range", () => {
    const idx = { type: "s64" as const, dims: [2, 1], data: [7n, -4n] };
    expect(runLowering(ops.gather, [x, idx], { dim: 1 })).toEqual([3, 4]);
    const v = { type: "s64" as const, dims: [2], data: [9n, -1n] };
    expect(runLowering(ops.indexSelect, [x, v], { dim: 1 })).toEqual([3, 1, 6, 4]);
  });

  it("scatter skips updates whose index is out of range", () => {
    const idx = { type: "s64" as const, dims: [1, 2], data: [5n, 0n] };
    const src = { type: "f32" as const, dims: [1, 2], data: [10, 20] };
    expect(runLowering(ops.scatter, [x, idx, src], { dim: 1 })).toEqual([20, 2, 3, 4, 5, 6]);
  });

  it("oneHot gives an all-zero row for a class out of range", () => {
    const idx = { type: "s64" as const, dims: [2], data: [1n, 5n] };
    expect(runLowering(ops.oneHot, [idx], { numClasses: 3 })).toEqual([0, 1, 0, 0, 0, 0]);
  });
});

// ---- Errors ---------------------------------------------------------------------------------

describe("errors name the op, the shapes and the argument", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]]);
  const i = tensor([[0n, 1n]]);

  it("index dtype and rank", () => {
    expect(() => x.gather(1, tensor([[0, 1]]))).toThrow(
      /gather: index must be an int64 or int32 tensor, got float32/,
    );
    expect(() => x.gather(1, tensor([0n]))).toThrow(
      /gather: index \[1\] must have the same number of dims as input \[2,3\]/,
    );
    expect(() => x.gather(1, tensor([[0n], [1n], [2n]]))).toThrow(
      /gather: index \[3,1\] must not be larger than input \[2,3\] in any dim but dim 1/,
    );
    expect(() => x.indexSelect(0, tensor([[0n]]))).toThrow(/indexSelect: index must be a vector/);
    expect(() => ops.oneHot(tensor([1.5]), 3)).toThrow(/oneHot: tensor must be an int64 or int32/);
    expect(() => ops.embedding(tensor([0.5]), x)).toThrow(/embedding: input must be an int64/);
  });

  it("scatter", () => {
    expect(() => x.scatter(1, i, tensor([[1, 2]], { dtype: "int64" }))).toThrow(
      /scatter: expected src to have the input's dtype float32, got int64/,
    );
    expect(() => x.scatter(1, i, tensor([1]))).toThrow(
      /scatter: index \[1,2\] must have the same number of dims as src \[1\]/,
    );
    expect(() => x.scatter(1, tensor([[0n, 1n, 2n]]), tensor([[1, 2]]))).toThrow(
      /scatter: index \[1,3\] must be no larger than input \[2,3\] apart from dim 1 and no larger/,
    );
    expect(() => x.scatter(1, i, 1, "max" as never)).toThrow(ArgumentError);
    expect(() => x.scatterAdd(1, i, 1 as never)).toThrow(/argument 'src' must be a Tensor/);
  });

  it("embedding, maskedFill, tril/triu, oneHot", () => {
    expect(() => ops.embedding(tensor([0n]), tensor([1, 2]))).toThrow(
      /embedding: weight must be 2-D \(\[numEmbeddings, embeddingDim\]\), got shape \[2\]/,
    );
    expect(() => ops.embedding(tensor([0n]), x, 2)).toThrow(
      /embedding: paddingIdx 2 must be within numEmbeddings/,
    );
    expect(() => x.maskedFill(tensor([1, 0, 1]), 0)).toThrow(
      /maskedFill: mask must be a bool tensor, got float32/,
    );
    expect(() => x.maskedFill(tensor([true, false, true]), tensor([1]))).toThrow(
      /maskedFill: value must be a scalar or a zero-dim tensor, got a tensor of shape \[1\]/,
    );
    expect(() => x.maskedFill(tensor([true, false]), 0)).toThrow(
      /maskedFill: shapes \[2,3\] and \[2\] cannot be broadcast/,
    );
    expect(() => tensor([1, 2]).tril()).toThrow(/tril: needs a tensor of at least 2 dims/);
    expect(() => tensor([1, 2]).triu()).toThrow(OpError);
    expect(() => ops.oneHot(tensor([1n]), -2)).toThrow(/argument 'numClasses' must be an integer/);
  });
});
