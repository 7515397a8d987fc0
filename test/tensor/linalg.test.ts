// Linear algebra ops (matmul from core.ts; bmm, linear, einsum, outer, baddbmm from linalg.ts)
// against PyTorch 1.13's golden values (test/fixtures/linalg.json, written by
// scripts/fixtures/gen_linalg.py), every case on every registered backend, functional and
// method forms. float32 within atol 1e-5 + rtol 1e-5 (PyTorch's BLAS sums in another order than
// the backends); bfloat16 within 1 bf16 ulp (PyTorch accumulates in float32, the evaluator in
// double, both round once); integers exactly. Also: how einsum lowers (one dot for the common
// patterns) and the error messages.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { arrayShape } from "../../ir/shape.ts";
import { backendNames } from "../../runtime/index.ts";
import { lowerOp, type Lowering } from "../../tensor/dispatch.ts";
import {
  ArgumentError,
  OpError,
  ops,
  setEagerBackend,
  tensor,
  Tensor,
  type DType,
} from "../../tensor/index.ts";
import {
  callFunctional,
  callMethod,
  expectClose,
  type FixtureCase,
  loadFixtures,
} from "../fixtures/load.ts";

const cases = loadFixtures("linalg");

const AREA_OPS = ["matmul", "bmm", "linear", "einsum", "outer", "baddbmm"];

const TOLERANCE: Partial<Record<DType, { atol: number; rtol: number }>> = {
  float32: { atol: 1e-5, rtol: 1e-5 },
  bfloat16: { atol: 1e-2, rtol: 8e-3 },
};

function check(got: Tensor | Tensor[], c: FixtureCase, label: string): void {
  const out = c.out;
  if (!(out instanceof Tensor)) throw new Error(`${c.name}: expected a tensor output`);
  if (Array.isArray(got)) throw new Error(`${label}: expected a tensor, got a list`);
  expectClose(got, out, TOLERANCE[out.dtype] ?? { atol: 0, rtol: 0 }, label);
}

describe("linalg fixtures", () => {
  it("cover every op of the area", () => {
    const seen = new Set(cases.map((c) => c.op));
    expect(AREA_OPS.filter((op) => !seen.has(op))).toEqual([]);
    expect([...seen].filter((op) => !AREA_OPS.includes(op))).toEqual([]);
  });
});

describe.each(backendNames())("linalg vs PyTorch [%s]", (backend) => {
  beforeAll(() => setEagerBackend(backend));
  afterAll(() => setEagerBackend(undefined));
  it.each(cases.map((c) => [c.name, c] as const))("%s", (_, c) => {
    check(callFunctional(c), c, c.name);
    const m = callMethod(c);
    if (m !== undefined) check(m, c, `${c.name} (method)`);
  });
});

// ---- Lowering shape -------------------------------------------------------------------------

/** The opcodes einsum's lowering emits for operands of these shapes. */
function einsumOpcodes(equation: string, shapes: number[][]): string[] {
  const def = ops.einsum.definition as Lowering;
  const mb = new ModuleBuilder("einsum");
  mb.entry("main", (b) => {
    const params = shapes.map((s) => b.parameter(arrayShape("f32", s)));
    return lowerOp(b, def, params, { equation }) as ReturnType<typeof b.parameter>;
  });
  const module = mb.build();
  return module.entry!.instructions.map((i) => i.opcode).filter((o) => o !== "parameter");
}

describe("einsum lowering", () => {
  it("lowers matmul-like patterns to one dot (no transpose when the order is the dot's)", () => {
    expect(einsumOpcodes("ij,jk->ik", [[2, 3], [3, 4]])).toEqual(["dot"]);
    expect(einsumOpcodes("bij,bjk->bik", [[2, 2, 3], [2, 3, 4]])).toEqual(["dot"]);
    expect(einsumOpcodes("bhqd,bhkd->bhqk", [[1, 2, 3, 4], [1, 2, 5, 4]])).toEqual(["dot"]);
    expect(einsumOpcodes("i,j->ij", [[2], [3]])).toEqual(["dot"]);
  });

  it("adds one transpose when the output order differs from the dot's", () => {
    expect(einsumOpcodes("ij,jk->ki", [[2, 3], [3, 4]])).toEqual(["dot", "transpose"]);
  });

  it("takes a diagonal with a reshape and a strided slice, and sums with one reduce", () => {
    expect(einsumOpcodes("ii->i", [[3, 3]])).toEqual(["reshape", "slice"]);
    const ops_ = einsumOpcodes("ii->", [[3, 3]]);
    expect(ops_.filter((o) => o === "reduce")).toHaveLength(1);
  });
});

// ---- Argument forms -------------------------------------------------------------------------

describe("argument forms", () => {
  const a = tensor([[1, 2], [3, 4]]);
  const b = tensor([[5, 6], [7, 8]]);

  it("einsum takes operands spread, as a list, or in an options object", () => {
    const spread = ops.einsum("ij,jk->ik", a, b);
    expectClose(ops.einsum("ij,jk->ik", [a, b]), spread);
    expectClose(ops.einsum({ equation: "ij,jk->ik", operands: [a, b] }), spread);
    expectClose(spread, ops.matmul(a, b));
  });

  it("baddbmm takes beta and alpha positionally or by name", () => {
    const i = tensor([[[1, 1], [1, 1]]]);
    const x = a.reshape(1, 2, 2);
    const y = b.reshape(1, 2, 2);
    expectClose(ops.baddbmm(i, x, y, 2, 3), ops.baddbmm(i, x, y, { beta: 2, alpha: 3 }));
    expectClose(i.baddbmm(x, y, { alpha: 3, beta: 2 }), ops.baddbmm(i, x, y, 2, 3));
  });

  it("linear takes the bias positionally or by name", () => {
    const bias = tensor([1, -1]);
    expectClose(ops.linear(a, b, bias), ops.linear(a, b, { bias }));
  });
});

// ---- Errors ---------------------------------------------------------------------------------

describe("errors name the op and the shapes", () => {
  const m23 = tensor([[1, 2, 3], [4, 5, 6]]);
  const m32 = m23.mT;

  it("matmul", () => {
    expect(() => ops.matmul(m23, m23)).toThrow(/matmul: shapes \[2,3\] and \[2,3\] cannot be mul/);
    expect(() => ops.matmul(m23, m32.to("int32"))).toThrow(/matmul: .*same dtype/);
    expect(() => ops.matmul(tensor(1), m23)).toThrow(/matmul: .*at least 1 dim/);
  });

  it("bmm", () => {
    const x = ops.zeros(2, 2, 3);
    expect(() => ops.bmm(x, ops.zeros(3, 3, 2))).toThrow(OpError);
    expect(() => ops.bmm(x, ops.zeros(3, 3, 2))).toThrow(/bmm: shapes \[2,2,3\], \[3,3,2\]/);
    expect(() => ops.bmm(m23, m32)).toThrow(/bmm: input and mat2 must be 3-D/);
    expect(() => ops.bmm(x, x.mT.to("int64"))).toThrow(/bmm: .*same dtype.*float32 and int64/);
    expect(() => ops.bmm(x.to("bool"), x.mT.to("bool"))).toThrow(/bmm: bool tensors/);
  });

  it("linear", () => {
    expect(() => ops.linear(m23, m32)).toThrow(/linear: input \[2,3\] has 3 features but weight/);
    expect(() => ops.linear(m23, ops.zeros(2, 2, 3))).toThrow(/linear: weight must be 1-D or 2-D/);
    expect(() => ops.linear(m23, m32.mT, tensor([1, 2, 3]))).toThrow(/linear: .*broadcast/);
  });

  it("outer and baddbmm", () => {
    expect(() => ops.outer(m23, tensor([1]))).toThrow(/outer: both arguments must be 1-D/);
    const i = ops.zeros(2, 2, 2, { dtype: "int64" });
    const x = ops.zeros(2, 2, 3, { dtype: "int64" });
    const y = ops.zeros(2, 3, 2, { dtype: "int64" });
    expect(() => ops.baddbmm(i, x, y, 0.5)).toThrow(/baddbmm: .*'beta' must not be a floating/);
    expect(() => ops.baddbmm(i, x, y, 1, 1.5)).toThrow(/'alpha' must not be a floating/);
    expect(() => ops.baddbmm(ops.zeros(3, 2, 2, { dtype: "int64" }), x, y)).toThrow(
      /baddbmm: input \[3,2,2\] cannot be broadcast to the product's shape \[2,2,2\]/,
    );
  });

  it("einsum", () => {
    expect(() => ops.einsum("ij,jk->ik", m23)).toThrow(/einsum: .*2 operand terms but 1 operand/);
    expect(() => ops.einsum("ij", ops.zeros(2, 3, 4))).toThrow(
      /einsum: operand 0 has 3 dims but its term 'ij' has 2 subscripts and no ellipsis/,
    );
    expect(() => ops.einsum("ij->ik", m23)).toThrow(/output subscript k does not appear/);
    expect(() => ops.einsum("ij->ii", m23)).toThrow(/output subscript i appears more than once/);
    expect(() => ops.einsum("i1->i", m23)).toThrow(/invalid subscript '1'/);
    expect(() => ops.einsum("ii", m23)).toThrow(/subscript i is repeated for operand 0 but the/);
    expect(() => ops.einsum("ij,jk", m23, ops.zeros(2, 2))).toThrow(
      /einsum: subscript j has size 2 for operand 1, which does not broadcast with size 3/,
    );
    expect(() => ops.einsum("ij,jk", m23, m32.to("int32"))).toThrow(/same dtype/);
    const bools = tensor([true, false]);
    expect(() => ops.einsum("i,i->", bools, bools)).toThrow(/bool operands cannot be summed/);
    expect(() => ops.einsum("ij->", { equation: 1 } as never)).toThrow(ArgumentError);
    expect(() => ops.einsum("i.j", m23)).toThrow(/one ellipsis/);
    expect(() => ops.einsum("ij->...ij", m23)).toThrow(/output has an ellipsis but no operand/);
  });
});
