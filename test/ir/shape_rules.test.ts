// The shape rules, one table row set per opcode: good cases pin the exact result shape (with
// bounded dynamic dims), bad cases pin that the ShapeError names the opcode and the rule. Every
// opcode must have at least one of each, so a new opcode without cases fails here. Property tests
// check the arithmetic of the rules against independent formulas.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defaultWindowDim, type Attributes, type WindowDim } from "../../ir/attributes.ts";
import { ModuleBuilder } from "../../ir/builder.ts";
import { ShapeError } from "../../ir/errors.ts";
import { literal } from "../../ir/literal.ts";
import type { Computation } from "../../ir/module.ts";
import { OPCODES, type Opcode } from "../../ir/opcodes.ts";
import {
  arrayShape,
  isElementType,
  scalarShape,
  type Shape,
  shapeToString,
  tupleShape,
} from "../../ir/shape.ts";
import {
  computationSignature,
  inferShape,
  needsDeclaredShape,
  signatureToString,
} from "../../ir/shape_inference.ts";

/** Parses `f32[2,<=3]`, `pred[]`, `(f32[2], (s32[]))`. */
function sh(text: string): Shape {
  let pos = 0;
  const parse = (): Shape => {
    while (text[pos] === " ") pos++;
    if (text[pos] === "(") {
      pos++;
      const elements: Shape[] = [];
      while (text[pos] !== ")") {
        elements.push(parse());
        while (text[pos] === " " || text[pos] === ",") pos++;
      }
      pos++;
      return tupleShape(elements);
    }
    const m = /^([a-z0-9]+)\[([^\]]*)\]/.exec(text.slice(pos));
    if (!m || !isElementType(m[1]!)) throw new Error(`bad shape text at ${pos}: ${text}`);
    pos += m[0].length;
    const dims = m[2] === "" ? [] : m[2]!.split(",").map((d) => (d.startsWith("<=") ? d : +d));
    return arrayShape(m[1], dims);
  };
  return parse();
}

// ---- Called computations used by the cases ---------------------------------------------------

const mb = new ModuleBuilder("rules");
const addF32 = mb.reducer("add", "f32");
const addS32 = mb.reducer("add", "s32");
const orPred = mb.reducer("or", "pred");
const argmaxReducer = mb.computation("argmax", (b) => {
  const av = b.parameter(scalarShape("f32"));
  const ai = b.parameter(scalarShape("s32"));
  const bv = b.parameter(scalarShape("f32"));
  const bi = b.parameter(scalarShape("s32"));
  const take = b.compare(av, bv, "GE");
  return b.tuple([b.select(take, av, bv), b.select(take, ai, bi)]);
});
const threeParams = mb.computation("three_params", (b) => {
  const x = b.parameter(scalarShape("f32"));
  b.parameter(scalarShape("f32"));
  b.parameter(scalarShape("f32"));
  return x;
});
const lessF32 = mb.computation("less_f32", (b) =>
  b.compare(b.parameter(scalarShape("f32")), b.parameter(scalarShape("f32")), "LT"),
);
const lessF32S32 = mb.computation("less_f32_s32", (b) => {
  const x = b.parameter(scalarShape("f32"));
  const y = b.parameter(scalarShape("f32"));
  b.parameter(scalarShape("s32"));
  b.parameter(scalarShape("s32"));
  return b.compare(x, y, "LT");
});
const callee = mb.computation("callee", (b) => {
  const x = b.parameter(sh("f32[2]"));
  b.parameter(sh("s32[]"));
  return b.negate(x);
});
const fusedAdd = mb.computation("fused_add", (b) =>
  b.add(b.parameter(sh("f32[2]")), b.parameter(sh("f32[2]"))),
);
const loopState = sh("(s32[], f32[4])");
const whileCond = mb.computation("cond", (b) => {
  const s = b.parameter(loopState);
  return b.compare(b.getTupleElement(s, 0), b.scalar("s32", 10), "LT");
});
const whileBody = mb.computation("body", (b) => {
  const s = b.parameter(loopState);
  const i = b.add(b.getTupleElement(s, 0), b.scalar("s32", 1));
  return b.tuple([i, b.getTupleElement(s, 1)]);
});
const wrongBody = mb.computation("wrong_body", (b) => {
  const s = b.parameter(loopState);
  return b.getTupleElement(s, 1);
});
const stateToS32 = mb.computation("state_to_s32", (b) =>
  b.getTupleElement(b.parameter(loopState), 0),
);
const branchF32 = mb.computation("branch_f32", (b) => b.negate(b.parameter(sh("f32[2]"))));
const branchS32 = mb.computation("branch_s32", (b) =>
  b.broadcast(b.convert(b.parameter(sh("s32[]")), "f32"), [2], []),
);
const branchDyn = mb.computation("branch_dyn", (b) =>
  b.setDimensionSize(b.parameter(sh("f32[2]")), b.scalar("s32", 1), 0),
);
const branchF32x3 = mb.computation("branch_f32x3", (b) =>
  b.broadcast(b.reduce(b.parameter(sh("f32[2]")), b.scalar("f32", 0), [0], addF32), [3], []),
);

// ---- The table -------------------------------------------------------------------------------

interface Good {
  operands: string[];
  attrs?: Attributes;
  called?: Computation[];
  declared?: string;
  result: string;
}

interface Bad {
  operands: string[];
  attrs?: Attributes;
  called?: Computation[];
  declared?: string;
  /** A fragment of the rule in words. */
  error: string;
}

interface Cases {
  good: Good[];
  bad: Bad[];
}

const win = (w: Partial<WindowDim> & { size: number }): WindowDim => ({
  ...defaultWindowDim(w.size),
  ...w,
});

const floatUnary = (): Cases => ({
  good: [
    { operands: ["f32[2,<=3]"], result: "f32[2,<=3]" },
    { operands: ["bf16[]"], result: "bf16[]" },
    { operands: ["f16[4]"], result: "f16[4]" },
  ],
  bad: [
    {
      operands: ["s32[2]"],
      error: "needs a floating-point element type (f16, bf16, f32), got s32",
    },
    { operands: ["(f32[2])"], error: "operand 0 must be an array" },
    { operands: ["f32[2]", "f32[2]"], error: "expects 1 operand, got 2" },
  ],
});

const anyBinary = (): Cases => ({
  good: [
    { operands: ["f32[2,<=3]", "f32[2,3]"], result: "f32[2,<=3]" },
    { operands: ["s32[<=4]", "s32[<=4]"], result: "s32[<=4]" },
    { operands: ["pred[]", "pred[]"], result: "pred[]" },
  ],
  bad: [
    {
      operands: ["f32[2,3]", "f32[3,2]"],
      error: "operands must have the same dims (no implicit broadcasting in HLO; use broadcast)",
    },
    { operands: ["f32[2,3]", "f32[]"], error: "no implicit broadcasting" },
    { operands: ["f32[2]", "s32[2]"], error: "same element type, got f32 and s32" },
  ],
});

const numericBinary = (): Cases => ({
  good: [
    { operands: ["f32[2,<=3]", "f32[2,<=3]"], result: "f32[2,<=3]" },
    { operands: ["u8[4]", "u8[4]"], result: "u8[4]" },
  ],
  bad: [
    {
      operands: ["pred[2]", "pred[2]"],
      error: "needs a numeric element type (not pred), got pred",
    },
    { operands: ["f32[2]", "f32[3]"], error: "no implicit broadcasting" },
  ],
});

const bitwise = (): Cases => ({
  good: [
    { operands: ["pred[2,<=3]", "pred[2,3]"], result: "pred[2,<=3]" },
    { operands: ["s64[4]", "s64[4]"], result: "s64[4]" },
  ],
  bad: [{ operands: ["f32[2]", "f32[2]"], error: "needs an integer or pred element type" }],
});

const shift = (): Cases => ({
  good: [
    { operands: ["s32[2,<=3]", "s32[2,<=3]"], result: "s32[2,<=3]" },
    { operands: ["u8[]", "u8[]"], result: "u8[]" },
  ],
  bad: [
    {
      operands: ["pred[2]", "pred[2]"],
      error: "needs an integer element type (s4, s8, s16, s32, s64, u4, u8, u16, u32, u64)",
    },
    { operands: ["f32[2]", "f32[2]"], error: "needs an integer element type" },
  ],
});

const CASES = {
  parameter: {
    good: [
      { operands: [], attrs: { parameterNumber: 0 }, declared: "f32[<=4,2]", result: "f32[<=4,2]" },
      {
        operands: [],
        attrs: { parameterNumber: 3 },
        declared: "(f32[2], s32[])",
        result: "(f32[2], s32[])",
      },
    ],
    bad: [
      { operands: [], attrs: { parameterNumber: 0 }, error: "the declared shape is required" },
      {
        operands: [],
        attrs: { parameterNumber: -1 },
        declared: "f32[]",
        error: "parameterNumber must be an integer >= 0",
      },
      { operands: ["f32[]"], attrs: { parameterNumber: 0 }, declared: "f32[]", error: "expects 0" },
    ],
  },
  constant: {
    good: [
      {
        operands: [],
        attrs: { literal: literal("f32", [2, 3], [1, 2, 3, 4, 5, 6]) },
        declared: "f32[2,3]",
        result: "f32[2,3]",
      },
    ],
    bad: [
      {
        operands: [],
        attrs: { literal: literal("f32", [2, 3], [1, 2, 3, 4, 5, 6]) },
        declared: "f32[3,2]",
        error: "the literal's shape f32[2,3] differs from the declared shape f32[3,2]",
      },
      { operands: [], declared: "f32[]", error: "needs attribute literal" },
      {
        operands: [],
        attrs: { literal: literal("f32", [2], [1, 2]) },
        declared: "f32[<=2]",
        error: "a constant cannot have dynamic dims",
      },
    ],
  },
  "after-all": {
    good: [
      { operands: [], result: "token[]" },
      { operands: ["token[]", "token[]"], result: "token[]" },
    ],
    bad: [{ operands: ["token[]", "f32[]"], error: "operand 1 must be token[], got f32[]" }],
  },
  "ragged-dot": {
    good: [
      {
        // Non-contracting ragged dim: the rhs group dim (size g) is dropped.
        operands: ["f32[11,5]", "f32[3,5,7]", "s32[3]"],
        attrs: {
          dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [1] },
          lhsRaggedDims: [0],
          rhsGroupDims: [0],
        },
        result: "f32[11,7]",
      },
      {
        // Contracting ragged dim: a leading dim of g.
        operands: ["f32[11,5]", "f32[5,7]", "s64[3]"],
        attrs: {
          dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] },
          lhsRaggedDims: [1],
          rhsGroupDims: [],
        },
        result: "f32[3,11,7]",
      },
    ],
    bad: [
      {
        operands: ["f32[11,5]", "f32[4,5,7]", "s32[3]"],
        attrs: {
          dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [1] },
          lhsRaggedDims: [0],
          rhsGroupDims: [0],
        },
        error: "the rhs group dim must have size 3 (group_sizes), got 4",
      },
      {
        operands: ["f32[11,5]", "f32[5,7]", "s32[3]"],
        attrs: {
          dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] },
          lhsRaggedDims: [0],
          rhsGroupDims: [],
        },
        error: "a non-contracting ragged dim needs exactly one rhs group dim",
      },
    ],
  },
  map: {
    good: [{ operands: ["f32[2,3]", "f32[2,3]"], called: [addF32], result: "f32[2,3]" }],
    bad: [
      { operands: ["s32[2]", "s32[2]"], called: [addF32], error: "parameter 0 must be s32[]" },
      { operands: ["f32[2]", "f32[3]"], called: [addF32], error: "no implicit broadcasting" },
    ],
  },
  scan: {
    good: [
      {
        operands: ["f32[4]", "f32[]"],
        attrs: { dimensions: [0], numCarries: 1 },
        called: [addF32],
        result: "f32[]",
      },
      {
        operands: ["f32[5]", "f32[5]"],
        attrs: { dimensions: [0], numCarries: 0 },
        called: [addF32],
        result: "f32[5]",
      },
    ],
    bad: [
      {
        operands: ["f32[4]", "s32[]"],
        attrs: { dimensions: [0], numCarries: 1 },
        called: [addF32],
        error: "parameter 1 must be carry 0's s32[]",
      },
      {
        operands: ["f32[4]"],
        attrs: { dimensions: [0], numCarries: 1 },
        called: [addF32],
        error: "needs at least one input to scan",
      },
    ],
  },
  "ragged-all-to-all": {
    good: [
      {
        operands: ["f32[8,2]", "f32[6,2]", "s32[2]", "s32[2]", "s32[2]", "s32[2]"],
        result: "f32[6,2]",
      },
    ],
    bad: [
      {
        operands: ["f32[8,2]", "f32[6,3]", "s32[2]", "s32[2]", "s32[2]", "s32[2]"],
        error: "must agree on every dim but the first",
      },
      {
        operands: ["f32[8,2]", "f32[6,2]", "f32[2]", "s32[2]", "s32[2]", "s32[2]"],
        error: "input_offsets must be s32 or s64",
      },
    ],
  },
  "collective-broadcast": {
    good: [{ operands: ["f32[2]"], attrs: { replicaGroups: [[0, 1]] }, result: "f32[2]" }],
    bad: [{ operands: [], error: "expects 1 operand, got 0" }],
  },
  "add-dependency": {
    good: [{ operands: ["f32[2]", "token[]"], result: "f32[2]" }],
    bad: [{ operands: ["f32[2]", "f32[]"], error: "operand 1 must be token[], got f32[]" }],
  },
  "opt-barrier": {
    good: [{ operands: ["(f32[2], s32[])"], result: "(f32[2], s32[])" }],
    bad: [{ operands: ["f32[2]", "f32[2]"], error: "expects 1 operand, got 2" }],
  },
  send: {
    good: [{ operands: ["f32[2]", "token[]"], result: "(f32[2], u32[], token[])" }],
    bad: [{ operands: ["f32[2]", "s32[]"], error: "operand 1 must be token[], got s32[]" }],
  },
  "send-done": {
    good: [{ operands: ["(f32[2], u32[], token[])"], result: "token[]" }],
    bad: [{ operands: ["(f32[2], u32[])"], error: "the operand must be a send's" }],
  },
  recv: {
    good: [
      {
        operands: ["token[]"],
        declared: "(f32[2], u32[], token[])",
        result: "(f32[2], u32[], token[])",
      },
    ],
    bad: [
      {
        operands: ["token[]"],
        declared: "f32[2]",
        error: "must be the tuple (data, u32[], token[])",
      },
      {
        operands: ["f32[]"],
        declared: "(f32[2], u32[], token[])",
        error: "operand 0 must be token[]",
      },
    ],
  },
  "recv-done": {
    good: [{ operands: ["(f32[2], u32[], token[])"], result: "(f32[2], token[])" }],
    bad: [{ operands: ["(f32[2], u32[], f32[])"], error: "the operand must be a recv's" }],
  },
  infeed: {
    good: [
      {
        operands: ["token[]"],
        declared: "((f32[2], s32[]), token[])",
        result: "((f32[2], s32[]), token[])",
      },
    ],
    bad: [
      { operands: ["token[]"], declared: "(f32[2])", error: "must be the tuple (data, token[])" },
    ],
  },
  outfeed: {
    good: [
      { operands: ["f32[2]", "token[]"], result: "token[]" },
      { operands: ["f32[2]", "token[]"], attrs: { outfeedShape: sh("f32[2]") }, result: "token[]" },
    ],
    bad: [
      {
        operands: ["f32[2]", "token[]"],
        attrs: { outfeedShape: sh("f32[3]") },
        error: "outfeed_shape f32[3] must be the operand's shape f32[2]",
      },
    ],
  },
  "copy-start": {
    good: [{ operands: ["f32[2]"], result: "(f32[2], f32[2], u32[])" }],
    bad: [{ operands: [], error: "expects 1 operand, got 0" }],
  },
  "copy-done": {
    good: [{ operands: ["(f32[2], f32[2], u32[])"], result: "f32[2]" }],
    bad: [
      { operands: ["(f32[2], f32[3], u32[])"], error: "the destination f32[2] and source f32[3]" },
      { operands: ["f32[2]"], error: "the operand must be a copy-start's" },
    ],
  },
  "reduce-precision": {
    good: [
      { operands: ["bf16[2]"], attrs: { exponentBits: 5, mantissaBits: 2 }, result: "bf16[2]" },
    ],
    bad: [
      {
        operands: ["s32[2]"],
        attrs: { exponentBits: 5, mantissaBits: 2 },
        error: "needs a floating-point",
      },
      {
        operands: ["f32[2]"],
        attrs: { exponentBits: 0, mantissaBits: 2 },
        error: "exponent_bits must be an integer >= 1",
      },
      { operands: ["f32[2]"], attrs: { exponentBits: 5 }, error: "needs attribute mantissa_bits" },
    ],
  },
  rng: {
    good: [
      {
        operands: ["f32[]", "f32[]"],
        attrs: { rngDistribution: "rng_normal" },
        declared: "f32[3]",
        result: "f32[3]",
      },
      {
        operands: ["s32[]", "s32[]"],
        attrs: { rngDistribution: "rng_uniform" },
        declared: "s32[3]",
        result: "s32[3]",
      },
    ],
    bad: [
      {
        operands: ["s32[]", "s32[]"],
        attrs: { rngDistribution: "rng_normal" },
        declared: "s32[3]",
        error: "rng_normal needs a floating-point",
      },
      {
        operands: ["f32[]", "f16[]"],
        attrs: { rngDistribution: "rng_uniform" },
        declared: "f32[3]",
        error: "the same element type, got f32, f16 and f32",
      },
      {
        operands: ["f32[2]", "f32[]"],
        attrs: { rngDistribution: "rng_uniform" },
        declared: "f32[3]",
        error: "operand 0 (a) must be a scalar",
      },
    ],
  },
  "rng-bit-generator": {
    good: [
      {
        operands: ["u64[2]"],
        attrs: { rngAlgorithm: "rng_three_fry" },
        declared: "(u64[2], u32[4])",
        result: "(u64[2], u32[4])",
      },
      {
        operands: ["u64[2]"],
        attrs: { rngAlgorithm: "rng_default" },
        declared: "u32[4]",
        result: "u32[4]",
      },
    ],
    bad: [
      {
        operands: ["u64[2]"],
        attrs: { rngAlgorithm: "rng_philox" },
        declared: "(u64[3], u32[4])",
        error: "the result's state u64[3] must be the operand's u64[2]",
      },
    ],
  },
  "async-start": {
    good: [
      { operands: ["f32[2]"], called: [branchF32], result: "((f32[2]), f32[2])" },
      {
        operands: ["f32[2]"],
        called: [branchF32],
        declared: "((f32[2]), f32[2], s32[])",
        result: "((f32[2]), f32[2], s32[])",
      },
    ],
    bad: [
      { operands: ["s32[2]"], called: [branchF32], error: "operand 0 must have shape f32[2]" },
      { operands: ["f32[2]"], error: "needs exactly one called computation (calls), got 0" },
    ],
  },
  "async-update": {
    good: [{ operands: ["((f32[2]), f32[2], s32[])"], result: "((f32[2]), f32[2], s32[])" }],
    bad: [{ operands: ["f32[2]"], error: "the operand must be an async-start's" }],
  },
  "async-done": {
    good: [
      { operands: ["((f32[2]), f32[2], s32[])"], result: "f32[2]" },
      { operands: ["((f32[2]), f32[2])"], called: [branchF32], result: "f32[2]" },
    ],
    bad: [
      {
        operands: ["((f32[2]), s32[2])"],
        called: [branchF32],
        error: "the async computation returns f32[2], not the start's result",
      },
      { operands: ["f32[2]"], error: "the operand must be an async-start's" },
    ],
  },
  "all-reduce": {
    good: [
      {
        operands: ["f32[4]"],
        attrs: { replicaGroups: [[0, 1]] },
        called: [addF32],
        result: "f32[4]",
      },
      { operands: ["f32[4]", "f32[2]"], called: [addF32], result: "(f32[4], f32[2])" },
    ],
    bad: [
      {
        operands: ["f32[4]", "s32[4]"],
        called: [addF32],
        error: "all operands must have one element type f32",
      },
      { operands: ["s32[4]"], called: [addF32], error: "must be (s32[], s32[]) -> s32[]" },
      {
        operands: ["f32[4]"],
        attrs: { replicaGroups: [[0, 1], [1, 2]] },
        called: [addF32],
        error: "device 1 is in more than one group",
      },
      { operands: [], called: [addF32], error: "needs at least one operand" },
    ],
  },
  "all-reduce-start": {
    good: [{ operands: ["f32[4]"], called: [addF32], result: "f32[4]" }],
    bad: [{ operands: ["f32[4]"], error: "needs exactly one called computation" }],
  },
  "all-reduce-done": {
    good: [{ operands: ["f32[4]"], result: "f32[4]" }],
    bad: [{ operands: ["f32[4]", "f32[4]"], error: "expects 1 operand, got 2" }],
  },
  "all-gather": {
    good: [
      {
        operands: ["f32[2,3]"],
        attrs: { replicaGroups: [[0, 1, 2, 3]], dimensions: [0] },
        declared: "f32[8,3]",
        result: "f32[8,3]",
      },
      {
        operands: ["f32[2,3]"],
        attrs: { dimensions: [1] },
        declared: "f32[2,6]",
        result: "f32[2,6]",
      },
    ],
    bad: [
      {
        operands: ["f32[2,3]"],
        attrs: { replicaGroups: [[0, 1]], dimensions: [0] },
        declared: "f32[8,3]",
        error: "dimension 0 multiplied by the group size 2",
      },
      {
        operands: ["f32[2,3]"],
        attrs: { replicaGroups: [[0, 1], [2]], dimensions: [0] },
        declared: "f32[4,3]",
        error: "replica_groups must all have the same size",
      },
      { operands: ["f32[2]"], attrs: { dimensions: [0] }, error: "the declared shape is required" },
    ],
  },
  "all-gather-start": {
    good: [
      {
        operands: ["f32[2]"],
        attrs: { replicaGroups: [[0, 1]], dimensions: [0] },
        declared: "(f32[2], f32[4])",
        result: "(f32[2], f32[4])",
      },
    ],
    bad: [
      {
        operands: ["f32[2]"],
        attrs: { dimensions: [0] },
        declared: "f32[4]",
        error: "must be the tuple (operand(s), result(s))",
      },
    ],
  },
  "all-gather-done": {
    good: [{ operands: ["(f32[2], f32[4])"], result: "f32[4]" }],
    bad: [{ operands: ["f32[4]"], error: "must be the tuple of a -start" }],
  },
  "reduce-scatter": {
    good: [
      {
        operands: ["f32[8]"],
        attrs: { replicaGroups: [[0, 1, 2, 3]], dimensions: [0] },
        called: [addF32],
        declared: "f32[2]",
        result: "f32[2]",
      },
    ],
    bad: [
      {
        operands: ["f32[8]"],
        attrs: { replicaGroups: [[0, 1, 2, 3]], dimensions: [0] },
        called: [addF32],
        declared: "f32[4]",
        error: "divided by the group size 4",
      },
    ],
  },
  "all-to-all": {
    good: [
      {
        operands: ["f32[4,2]"],
        attrs: { dimensions: [0], replicaGroups: [[0, 1]] },
        result: "f32[4,2]",
      },
      {
        operands: ["f32[2]", "f32[2]"],
        attrs: { replicaGroups: [[0, 1]] },
        result: "(f32[2], f32[2])",
      },
    ],
    bad: [
      {
        operands: ["f32[3,2]"],
        attrs: { dimensions: [0], replicaGroups: [[0, 1]] },
        error: "must split into 2 equal chunks",
      },
      {
        operands: ["f32[2]"],
        attrs: { replicaGroups: [[0, 1]] },
        error: "needs one operand per device of a group (2), got 1",
      },
    ],
  },
  "collective-permute": {
    good: [
      { operands: ["f32[2]"], attrs: { sourceTargetPairs: [[0, 1], [1, 0]] }, result: "f32[2]" },
    ],
    bad: [
      {
        operands: ["f32[2]"],
        attrs: { sourceTargetPairs: [[0, 1], [2, 1]] },
        error: "device 1 is a target twice",
      },
      { operands: ["f32[2]"], error: "needs attribute sourceTargetPairs" },
    ],
  },
  "collective-permute-start": {
    good: [
      { operands: ["f32[2]"], attrs: { sourceTargetPairs: [[0, 1]] }, result: "(f32[2], f32[2])" },
      {
        operands: ["f32[2]"],
        attrs: { sourceTargetPairs: [[0, 1]] },
        declared: "(f32[2], f32[2], u32[], u32[])",
        result: "(f32[2], f32[2], u32[], u32[])",
      },
    ],
    bad: [
      {
        operands: ["f32[2]"],
        attrs: { sourceTargetPairs: [[0, 1]] },
        declared: "(f32[2], f32[2], f32[])",
        error: "must be u32[] or s32[]",
      },
    ],
  },
  "collective-permute-done": {
    good: [{ operands: ["(f32[2], f32[2], u32[], u32[])"], result: "f32[2]" }],
    bad: [{ operands: ["f32[2]"], error: "must be the tuple of a -start" }],
  },
  "replica-id": {
    good: [{ operands: [], result: "u32[]" }],
    bad: [{ operands: ["u32[]"], error: "expects 0 operands, got 1" }],
  },
  "partition-id": {
    good: [{ operands: [], result: "u32[]" }],
    bad: [{ operands: ["u32[]"], error: "expects 0 operands, got 1" }],
  },
  iota: {
    good: [
      { operands: [], attrs: { iotaDimension: 1 }, declared: "s32[4,<=8]", result: "s32[4,<=8]" },
    ],
    bad: [
      {
        operands: [],
        attrs: { iotaDimension: 2 },
        declared: "s32[4,8]",
        error: "iotaDimension of s32[4,8] 2 is out of range [0, 2)",
      },
      { operands: [], attrs: { iotaDimension: 0 }, declared: "s32[]", error: "rank >= 1" },
      {
        operands: [],
        attrs: { iotaDimension: 0 },
        declared: "pred[128]",
        error: "iota needs an integer or floating-point result, got pred[128]",
      },
    ],
  },
  abs: {
    good: [
      { operands: ["s32[2,<=3]"], result: "s32[2,<=3]" },
      { operands: ["f32[]"], result: "f32[]" },
    ],
    bad: [{ operands: ["u8[2]"], error: "needs a signed element type" }],
  },
  negate: {
    good: [{ operands: ["u8[3]"], result: "u8[3]" }],
    bad: [{ operands: ["pred[3]"], error: "needs a numeric element type (not pred)" }],
  },
  sign: {
    good: [{ operands: ["s64[<=3]"], result: "s64[<=3]" }],
    bad: [{ operands: ["u8[3]"], error: "needs a signed element type" }],
  },
  exponential: floatUnary(),
  "exponential-minus-one": floatUnary(),
  log: floatUnary(),
  "log-plus-one": floatUnary(),
  sqrt: floatUnary(),
  rsqrt: floatUnary(),
  cbrt: floatUnary(),
  tanh: floatUnary(),
  logistic: floatUnary(),
  sine: floatUnary(),
  cosine: floatUnary(),
  tan: floatUnary(),
  erf: floatUnary(),
  floor: floatUnary(),
  ceil: floatUnary(),
  "round-nearest-afz": floatUnary(),
  "round-nearest-even": floatUnary(),
  "is-finite": {
    good: [{ operands: ["f16[2,<=3]"], result: "pred[2,<=3]" }],
    bad: [{ operands: ["s32[2]"], error: "needs a floating-point element type" }],
  },
  not: {
    good: [
      { operands: ["pred[2]"], result: "pred[2]" },
      { operands: ["s32[<=2]"], result: "s32[<=2]" },
    ],
    bad: [{ operands: ["f32[2]"], error: "needs an integer or pred element type" }],
  },
  copy: {
    good: [
      { operands: ["(f32[2], s32[])"], result: "(f32[2], s32[])" },
      { operands: ["f32[<=3]"], result: "f32[<=3]" },
    ],
    bad: [{ operands: ["f32[2]", "f32[2]"], error: "expects 1 operand, got 2" }],
  },
  convert: {
    good: [{ operands: ["f32[2,<=3]"], declared: "s32[2,<=3]", result: "s32[2,<=3]" }],
    bad: [
      { operands: ["f32[2,3]"], declared: "s32[3,2]", error: "must have the operand's dims" },
      { operands: ["f32[2,<=3]"], declared: "s32[2,3]", error: "must have the operand's dims" },
      { operands: ["f32[2]"], error: "the declared shape is required" },
    ],
  },
  "bitcast-convert": {
    good: [
      { operands: ["f32[2,3]"], declared: "s32[2,3]", result: "s32[2,3]" },
      { operands: ["f32[2]"], declared: "f16[2,2]", result: "f16[2,2]" },
      { operands: ["u8[4,<=3,4]"], declared: "s32[4,<=3]", result: "s32[4,<=3]" },
    ],
    bad: [
      { operands: ["f16[4,3]"], declared: "f32[4]", error: "needs a minor dim of size 2" },
      { operands: ["pred[4]"], declared: "u8[4]", error: "cannot bitcast-convert from or to pred" },
      { operands: ["f32[2]"], declared: "s32[3]", error: "gives s32[2], but the declared shape" },
    ],
  },
  add: anyBinary(),
  subtract: numericBinary(),
  multiply: anyBinary(),
  divide: numericBinary(),
  remainder: numericBinary(),
  power: numericBinary(),
  maximum: anyBinary(),
  minimum: anyBinary(),
  atan2: {
    good: [{ operands: ["f32[2,<=3]", "f32[2,3]"], result: "f32[2,<=3]" }],
    bad: [{ operands: ["s32[2]", "s32[2]"], error: "needs a floating-point element type" }],
  },
  and: bitwise(),
  or: bitwise(),
  xor: bitwise(),
  "shift-left": shift(),
  "shift-right-arithmetic": shift(),
  "shift-right-logical": shift(),
  compare: {
    good: [
      { operands: ["f32[2,<=3]", "f32[2,3]"], attrs: { direction: "LT" }, result: "pred[2,<=3]" },
      {
        operands: ["f32[2]", "f32[2]"],
        attrs: { direction: "EQ", comparisonType: "TOTALORDER" },
        result: "pred[2]",
      },
      {
        operands: ["u8[]", "u8[]"],
        attrs: { direction: "GE", comparisonType: "UNSIGNED" },
        result: "pred[]",
      },
    ],
    bad: [
      { operands: ["f32[2]", "f32[2]"], error: "needs attribute direction" },
      {
        operands: ["f32[2]", "f32[2]"],
        attrs: { direction: "LT", comparisonType: "SIGNED" },
        error: "comparison type SIGNED does not apply to element type f32",
      },
      { operands: ["f32[2]", "f32[3]"], attrs: { direction: "LT" }, error: "same dims" },
    ],
  },
  select: {
    good: [
      { operands: ["pred[2,3]", "f32[2,3]", "f32[2,<=3]"], result: "f32[2,<=3]" },
      { operands: ["pred[]", "s32[<=2]", "s32[<=2]"], result: "s32[<=2]" },
      { operands: ["pred[<=2]", "f32[2]", "f32[2]"], result: "f32[<=2]" },
    ],
    bad: [
      {
        operands: ["s32[2]", "f32[2]", "f32[2]"],
        error: "the predicate must have element type pred, got s32",
      },
      { operands: ["pred[3]", "f32[2]", "f32[2]"], error: "no implicit broadcasting" },
      { operands: ["pred[2]", "f32[2]", "s32[2]"], error: "same element type" },
    ],
  },
  clamp: {
    good: [
      { operands: ["f32[]", "f32[2,<=3]", "f32[]"], result: "f32[2,<=3]" },
      { operands: ["s32[<=4]", "s32[4]", "s32[4]"], result: "s32[<=4]" },
    ],
    bad: [
      { operands: ["f32[3]", "f32[2]", "f32[]"], error: "no implicit broadcasting" },
      { operands: ["s32[]", "f32[2]", "f32[]"], error: "same element type" },
    ],
  },
  broadcast: {
    good: [
      {
        operands: ["f32[3]"],
        attrs: { dimensions: [1] },
        declared: "f32[2,3]",
        result: "f32[2,3]",
      },
      {
        operands: ["f32[<=3]"],
        attrs: { dimensions: [1] },
        declared: "f32[2,<=3]",
        result: "f32[2,<=3]",
      },
      {
        operands: ["f32[]"],
        attrs: { dimensions: [] },
        declared: "f32[<=4,2]",
        result: "f32[<=4,2]",
      },
    ],
    bad: [
      {
        operands: ["f32[3]"],
        attrs: { dimensions: [0] },
        declared: "f32[2,3]",
        error: "operand dim 0 (size 3) maps to result dim 0 of size 2",
      },
      {
        operands: ["f32[2,2]"],
        attrs: { dimensions: [1, 0] },
        declared: "f32[2,2]",
        error: "dimensions {1,0} must be sorted ascending",
      },
      {
        operands: ["f32[<=3]"],
        attrs: { dimensions: [1] },
        declared: "f32[2,3]",
        error: "differ in being dynamic",
      },
      {
        operands: ["f32[3]"],
        attrs: { dimensions: [1] },
        declared: "s32[2,3]",
        error: "the result element type s32 must be f32",
      },
      {
        operands: ["f32[3]"],
        attrs: { dimensions: [] },
        declared: "f32[3]",
        error: "must map each of the operand's 1 dims",
      },
    ],
  },
  bitcast: {
    good: [
      { operands: ["f32[2,3]{1,0}"], declared: "f32[3,2]{0,1}", result: "f32[3,2]" },
      { operands: ["s8[4]"], declared: "s8[2,2]", result: "s8[2,2]" },
    ],
    bad: [
      { operands: ["f32[2,3]"], declared: "f32[5]", error: "has 5 elements but the operand has 6" },
      { operands: ["f32[4]"], declared: "s32[4]", error: "must be f32 (use bitcast-convert)" },
      { operands: ["f32[<=4]"], declared: "f32[4]", error: "bitcast of a bounded-dynamic shape" },
    ],
  },
  reshape: {
    good: [
      { operands: ["f32[2,3]"], declared: "f32[6]", result: "f32[6]" },
      { operands: ["f32[<=6]"], declared: "f32[2,<=3]", result: "f32[2,<=3]" },
    ],
    bad: [
      {
        operands: ["f32[2,3]"],
        declared: "f32[5]",
        error: "the result f32[5] has 5 elements at its bounds but the operand has 6",
      },
      { operands: ["f32[2,3]"], declared: "s32[6]", error: "the result element type s32" },
    ],
  },
  transpose: {
    good: [
      { operands: ["f32[2,<=3,4]"], attrs: { dimensions: [2, 0, 1] }, result: "f32[4,2,<=3]" },
    ],
    bad: [
      { operands: ["f32[2,3,4]"], attrs: { dimensions: [0, 0, 1] }, error: "must not repeat" },
      { operands: ["f32[2,3]"], attrs: { dimensions: [0] }, error: "must be a permutation" },
    ],
  },
  slice: {
    good: [
      {
        operands: ["f32[10,<=8]"],
        attrs: {
          slice: [
            { start: 2, limit: 9, stride: 3 },
            { start: 0, limit: 8, stride: 1 },
          ],
        },
        result: "f32[3,<=8]",
      },
      {
        operands: ["f32[<=8]"],
        attrs: { slice: [{ start: 0, limit: 4, stride: 1 }] },
        result: "f32[<=4]",
      },
      {
        operands: ["f32[<=8]"],
        attrs: { slice: [{ start: 3, limit: 4, stride: 1 }] },
        result: "f32[1]",
      },
    ],
    bad: [
      {
        operands: ["f32[4]"],
        attrs: { slice: [{ start: 0, limit: 5, stride: 1 }] },
        error: "slice [0:5] of dim 0 (size 4) needs 0 <= start <= limit <= size",
      },
      {
        operands: ["f32[4]"],
        attrs: { slice: [{ start: 0, limit: 4, stride: 0 }] },
        error: "slice stride of dim 0 must be an integer >= 1",
      },
      { operands: ["f32[4,4]"], attrs: { slice: [] }, error: "slice has 0 entries" },
    ],
  },
  "dynamic-slice": {
    good: [
      {
        operands: ["f32[10,<=8]", "s32[]", "s32[]"],
        attrs: { dynamicSliceSizes: [2, 8] },
        result: "f32[2,8]",
      },
    ],
    bad: [
      {
        operands: ["f32[10,8]", "s32[]"],
        attrs: { dynamicSliceSizes: [2, 8] },
        error: "needs one scalar start index per operand dim (2), got 1",
      },
      {
        operands: ["f32[10,8]", "s32[]", "s64[]"],
        attrs: { dynamicSliceSizes: [2, 8] },
        error: "start indices must all have the same type",
      },
      {
        operands: ["f32[10,8]", "s32[]", "s32[]"],
        attrs: { dynamicSliceSizes: [2, 9] },
        error: "slice size 9 of dim 1 exceeds the operand's 8",
      },
      {
        operands: ["f32[10]", "f32[]"],
        attrs: { dynamicSliceSizes: [2] },
        error: "start index 0 must be an integer",
      },
    ],
  },
  "dynamic-update-slice": {
    good: [
      { operands: ["f32[10,<=8]", "f32[2,8]", "s32[]", "s32[]"], result: "f32[10,<=8]" },
      { operands: ["f32[10,8]", "f32[2,<=8]", "s32[]", "s32[]"], result: "f32[10,<=8]" },
      { operands: ["f32[10,8]", "f32[2,<=4]", "s32[]", "s32[]"], result: "f32[10,8]" },
    ],
    bad: [
      {
        operands: ["f32[10,8]", "f32[11,8]", "s32[]", "s32[]"],
        error: "update dim 0 (size 11) exceeds the operand's 10",
      },
      {
        operands: ["f32[10,8]", "s32[2,8]", "s32[]", "s32[]"],
        error: "the update's element type s32 must be f32",
      },
      { operands: ["f32[10,8]", "f32[2]", "s32[]", "s32[]"], error: "the update's rank 1" },
    ],
  },
  concatenate: {
    good: [
      { operands: ["f32[2,<=3]", "f32[4,3]"], attrs: { dimensions: [0] }, result: "f32[6,<=3]" },
      { operands: ["s32[<=2]"], attrs: { dimensions: [0] }, result: "s32[<=2]" },
    ],
    bad: [
      {
        operands: ["f32[2,3]", "f32[2,4]"],
        attrs: { dimensions: [0] },
        error: "operands may differ only in the concatenated dim 0; they differ in dim 1",
      },
      { operands: ["f32[2]", "f32[2]"], error: "needs attribute dimensions" },
      { operands: [], attrs: { dimensions: [0] }, error: "needs at least one operand" },
      { operands: ["f32[2]", "s32[2]"], attrs: { dimensions: [0] }, error: "same element type" },
    ],
  },
  pad: {
    good: [
      {
        operands: ["f32[3,<=4]", "f32[]"],
        attrs: {
          padding: [
            { low: 1, high: 2, interior: 1 },
            { low: -1, high: 0, interior: 0 },
          ],
        },
        result: "f32[8,<=3]",
      },
    ],
    bad: [
      {
        operands: ["f32[3]", "f32[]"],
        attrs: { padding: [{ low: 0, high: 0, interior: -1 }] },
        error: "interior padding of dim 0 must be an integer >= 0",
      },
      {
        operands: ["f32[3]", "f32[1]"],
        attrs: { padding: [{ low: 0, high: 0, interior: 0 }] },
        error: "padding value must be a scalar",
      },
      {
        operands: ["f32[3]", "f32[]"],
        attrs: { padding: [{ low: -2, high: -2, interior: 0 }] },
        error: "makes dim 0 negative",
      },
    ],
  },
  reverse: {
    good: [{ operands: ["f32[2,<=3]"], attrs: { dimensions: [1, 0] }, result: "f32[2,<=3]" }],
    bad: [
      { operands: ["f32[2,3]"], attrs: { dimensions: [1, 1] }, error: "must not repeat" },
      { operands: ["f32[2,3]"], attrs: { dimensions: [2] }, error: "out of range [0, 2)" },
    ],
  },
  dot: {
    good: [
      {
        operands: ["f32[2,3]", "f32[3,4]"],
        attrs: { dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] } },
        result: "f32[2,4]",
      },
      {
        operands: ["f32[<=5,2,3]", "f32[5,3,4]"],
        attrs: {
          dot: { lhsBatch: [0], rhsBatch: [0], lhsContracting: [2], rhsContracting: [1] },
        },
        result: "f32[<=5,2,4]",
      },
      {
        operands: ["f32[3,2]", "f32[4,<=3]"],
        attrs: { dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [0], rhsContracting: [1] } },
        result: "f32[2,4]",
      },
      {
        operands: ["bf16[2,3]", "bf16[3,4]"],
        attrs: { dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] } },
        declared: "f32[2,4]",
        result: "f32[2,4]",
      },
    ],
    bad: [
      {
        operands: ["f32[2,3]", "f32[4,5]"],
        attrs: { dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] } },
        error: "contracting dim sizes must match: lhs dim 1 is 3, rhs dim 0 is 4",
      },
      {
        operands: ["f32[5,2,3]", "f32[5,3,4]"],
        attrs: { dot: { lhsBatch: [0], rhsBatch: [], lhsContracting: [2], rhsContracting: [1] } },
        error: "the same number of batch dims",
      },
      {
        operands: ["f32[2,3]", "f32[3,4]"],
        attrs: { dot: { lhsBatch: [1], rhsBatch: [0], lhsContracting: [1], rhsContracting: [0] } },
        error: "must not repeat a dim",
      },
      {
        operands: ["f32[2,3]", "s32[3,4]"],
        attrs: { dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] } },
        error: "same element type",
      },
      {
        operands: ["s32[2,3]", "s32[3,4]"],
        attrs: { dot: { lhsBatch: [], rhsBatch: [], lhsContracting: [1], rhsContracting: [0] } },
        declared: "f32[2,4]",
        error: "the result type f32 cannot be produced from s32 operands",
      },
    ],
  },
  convolution: {
    good: [
      {
        operands: ["f32[1,5,5,2]", "f32[3,3,2,4]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 3,
            inputSpatial: [1, 2],
            kernelInputFeature: 2,
            kernelOutputFeature: 3,
            kernelSpatial: [0, 1],
            outputBatch: 0,
            outputFeature: 3,
            outputSpatial: [1, 2],
          },
          window: [win({ size: 3 }), win({ size: 3, stride: 2, padLow: 1, padHigh: 1 })],
        },
        result: "f32[1,3,3,4]",
      },
      {
        operands: ["f32[<=8,4,7]", "f32[6,2,3]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 1,
            inputSpatial: [2],
            kernelInputFeature: 1,
            kernelOutputFeature: 0,
            kernelSpatial: [2],
            outputBatch: 0,
            outputFeature: 1,
            outputSpatial: [2],
          },
          window: [win({ size: 3, windowDilation: 2, baseDilation: 2 })],
          featureGroupCount: 2,
        },
        // base 7 dilated by 2 is 13; window 3 dilated by 2 is 5; 13 - 5 + 1 = 9.
        result: "f32[<=8,6,9]",
      },
      {
        operands: ["f32[4,2,5]", "f32[6,2,1]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 1,
            inputSpatial: [2],
            kernelInputFeature: 1,
            kernelOutputFeature: 0,
            kernelSpatial: [2],
            outputBatch: 0,
            outputFeature: 1,
            outputSpatial: [2],
          },
          window: [win({ size: 1 })],
          batchGroupCount: 2,
        },
        result: "f32[2,6,5]",
      },
    ],
    bad: [
      {
        operands: ["f32[1,5,2]", "f32[3,2,4]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 2,
            inputSpatial: [1],
            kernelInputFeature: 1,
            kernelOutputFeature: 2,
            kernelSpatial: [0],
            outputBatch: 0,
            outputFeature: 2,
            outputSpatial: [1],
          },
          window: [win({ size: 2 })],
        },
        error: "window size 2 of spatial dim 0 must equal the kernel's spatial dim 0 (size 3)",
      },
      {
        operands: ["f32[1,5,3]", "f32[3,2,4]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 2,
            inputSpatial: [1],
            kernelInputFeature: 1,
            kernelOutputFeature: 2,
            kernelSpatial: [0],
            outputBatch: 0,
            outputFeature: 2,
            outputSpatial: [1],
          },
          window: [win({ size: 3 })],
        },
        error: "input features (3) must equal kernel input features (2) times featureGroupCount",
      },
      {
        operands: ["f32[2,5,2]", "f32[3,1,4]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 2,
            inputSpatial: [1],
            kernelInputFeature: 1,
            kernelOutputFeature: 2,
            kernelSpatial: [0],
            outputBatch: 0,
            outputFeature: 2,
            outputSpatial: [1],
          },
          window: [win({ size: 3 })],
          featureGroupCount: 2,
          batchGroupCount: 2,
        },
        error: "cannot both exceed 1",
      },
      {
        operands: ["f32[1,5,2]", "f32[3,2,4]"],
        attrs: {
          convDims: {
            inputBatch: 0,
            inputFeature: 2,
            inputSpatial: [1],
            kernelInputFeature: 1,
            kernelOutputFeature: 2,
            kernelSpatial: [0],
            outputBatch: 0,
            outputFeature: 2,
            outputSpatial: [1],
          },
          window: [win({ size: 3, stride: 0 })],
        },
        error: "window stride of dim 0 must be an integer >= 1",
      },
    ],
  },
  reduce: {
    good: [
      {
        operands: ["f32[4,<=5,6]", "f32[]"],
        attrs: { dimensions: [1] },
        called: [addF32],
        result: "f32[4,6]",
      },
      {
        operands: ["f32[4,<=5,6]", "f32[]"],
        attrs: { dimensions: [0, 2] },
        called: [addF32],
        result: "f32[<=5]",
      },
      {
        operands: ["f32[4,5]", "s32[4,5]", "f32[]", "s32[]"],
        attrs: { dimensions: [1] },
        called: [argmaxReducer],
        result: "(f32[4], s32[4])",
      },
    ],
    bad: [
      {
        operands: ["f32[4,5]", "f32[]", "f32[]"],
        attrs: { dimensions: [1] },
        called: [addF32],
        error: "needs N inputs followed by N init values",
      },
      {
        operands: ["f32[4,5]", "f32[4]"],
        attrs: { dimensions: [1] },
        called: [addF32],
        error: "init value 0 must be a scalar",
      },
      {
        operands: ["f32[4,5]", "f32[]"],
        attrs: { dimensions: [1] },
        called: [addS32],
        error: "accumulator 0 is s32 but init value 0 is f32",
      },
      {
        operands: ["f32[4,5]", "f32[]"],
        attrs: { dimensions: [1, 1] },
        called: [addF32],
        error: "must not repeat",
      },
      {
        operands: ["f32[4,5]", "f32[]"],
        attrs: { dimensions: [1] },
        called: [threeParams],
        error: "must take 2 scalar parameters",
      },
      {
        operands: ["f32[4,5]", "f32[]"],
        attrs: { dimensions: [1] },
        error: "needs exactly one called computation (to_apply), got 0",
      },
    ],
  },
  "reduce-window": {
    good: [
      {
        operands: ["f32[4,<=6]", "f32[]"],
        attrs: {
          window: [win({ size: 2, stride: 2 }), win({ size: 3, padLow: 1, padHigh: 1 })],
        },
        called: [addF32],
        result: "f32[2,<=6]",
      },
    ],
    bad: [
      {
        operands: ["f32[4,6]", "f32[]"],
        attrs: { window: [win({ size: 2 })] },
        called: [addF32],
        error: "the window has 1 dims but the base has 2",
      },
      {
        operands: ["f32[4]", "f32[]"],
        attrs: { window: [win({ size: 0 })] },
        called: [addF32],
        error: "window size of dim 0 must be an integer >= 1",
      },
      {
        operands: ["pred[4]", "pred[]"],
        attrs: { window: [win({ size: 2 })] },
        called: [addF32],
        error: "accumulator 0 is f32 but init value 0 is pred",
      },
    ],
  },
  gather: {
    good: [
      {
        operands: ["f32[10,8]", "s32[5]"],
        attrs: {
          gather: {
            offsetDims: [1],
            collapsedSliceDims: [0],
            startIndexMap: [0],
            indexVectorDim: 1,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [1, 8],
        },
        result: "f32[5,8]",
      },
      {
        operands: ["f32[10,<=8]", "s32[<=5,1]"],
        attrs: {
          gather: {
            offsetDims: [1],
            collapsedSliceDims: [0],
            startIndexMap: [0],
            indexVectorDim: 1,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [1, 8],
        },
        result: "f32[<=5,<=8]",
      },
      {
        operands: ["f32[3,10,8]", "s32[3,5,1]"],
        attrs: {
          gather: {
            offsetDims: [2],
            collapsedSliceDims: [1],
            startIndexMap: [1],
            indexVectorDim: 2,
            operandBatchingDims: [0],
            startIndicesBatchingDims: [0],
          },
          gatherSliceSizes: [1, 1, 8],
        },
        result: "f32[3,5,8]",
      },
      {
        operands: ["f32[10,8]", "s64[2,2]"],
        attrs: {
          gather: {
            offsetDims: [0, 2],
            collapsedSliceDims: [],
            startIndexMap: [0, 1],
            indexVectorDim: 0,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [3, 4],
        },
        result: "f32[3,2,4]",
      },
    ],
    bad: [
      {
        operands: ["f32[10,8]", "s32[5]"],
        attrs: {
          gather: {
            offsetDims: [1],
            collapsedSliceDims: [0],
            startIndexMap: [0],
            indexVectorDim: 1,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [2, 8],
        },
        error: "collapsed and batching dims need slice size <= 1; dim 0 is 2",
      },
      {
        operands: ["f32[10,8]", "s32[5,2]"],
        attrs: {
          gather: {
            offsetDims: [1],
            collapsedSliceDims: [0],
            startIndexMap: [0],
            indexVectorDim: 1,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [1, 8],
        },
        error: "startIndexMap {0} needs one entry per index vector element (2)",
      },
      {
        operands: ["f32[10,8]", "f32[5]"],
        attrs: {
          gather: {
            offsetDims: [1],
            collapsedSliceDims: [0],
            startIndexMap: [0],
            indexVectorDim: 1,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [1, 8],
        },
        error: "indices must have an integer type, got f32",
      },
      {
        operands: ["f32[3,10,8]", "s32[4,5,1]"],
        attrs: {
          gather: {
            offsetDims: [2],
            collapsedSliceDims: [1],
            startIndexMap: [1],
            indexVectorDim: 2,
            operandBatchingDims: [0],
            startIndicesBatchingDims: [0],
          },
          gatherSliceSizes: [1, 1, 8],
        },
        error: "batching dim sizes must match: operand dim 0 is 3, indices dim 0 is 4",
      },
      {
        operands: ["f32[10,8]", "s32[5]"],
        attrs: {
          gather: {
            offsetDims: [],
            collapsedSliceDims: [0],
            startIndexMap: [0],
            indexVectorDim: 1,
            operandBatchingDims: [],
            startIndicesBatchingDims: [],
          },
          gatherSliceSizes: [1, 8],
        },
        error: "offsetDims {} needs one entry per operand dim that is neither collapsed",
      },
    ],
  },
  scatter: {
    good: [
      {
        operands: ["f32[10,8]", "s32[5,1]", "f32[5,8]"],
        attrs: {
          scatter: {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
            inputBatchingDims: [],
            scatterIndicesBatchingDims: [],
          },
        },
        called: [addF32],
        result: "f32[10,8]",
      },
      {
        operands: ["f32[3,10,8]", "s32[3,5,1]", "f32[3,5,8]"],
        attrs: {
          scatter: {
            updateWindowDims: [2],
            insertedWindowDims: [1],
            scatterDimsToOperandDims: [1],
            indexVectorDim: 2,
            inputBatchingDims: [0],
            scatterIndicesBatchingDims: [0],
          },
        },
        called: [addF32],
        result: "f32[3,10,8]",
      },
      {
        operands: ["f32[10]", "s32[10]", "s32[5]", "f32[5]", "s32[5]"],
        attrs: {
          scatter: {
            updateWindowDims: [],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
            inputBatchingDims: [],
            scatterIndicesBatchingDims: [],
          },
        },
        called: [argmaxReducer],
        result: "(f32[10], s32[10])",
      },
    ],
    bad: [
      {
        operands: ["f32[10,8]", "s32[5,1]", "f32[4,8]"],
        attrs: {
          scatter: {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
            inputBatchingDims: [],
            scatterIndicesBatchingDims: [],
          },
        },
        called: [addF32],
        error: "update scatter dim 0 (size 4) must equal indices dim 0 (size 5)",
      },
      {
        operands: ["f32[10,8]", "s32[5,1]", "f32[5,9]"],
        attrs: {
          scatter: {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
            inputBatchingDims: [],
            scatterIndicesBatchingDims: [],
          },
        },
        called: [addF32],
        error: "update window dim 1 (size 9) exceeds input dim 1 (size 8)",
      },
      {
        operands: ["f32[10,8]", "s32[5,1]", "f32[5,8]"],
        attrs: {
          scatter: {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
            inputBatchingDims: [],
            scatterIndicesBatchingDims: [],
          },
        },
        called: [orPred],
        error: "accumulator 0 is pred but init value 0 is f32",
      },
      {
        operands: ["f32[10,8]", "s32[5,1]"],
        attrs: {
          scatter: {
            updateWindowDims: [1],
            insertedWindowDims: [0],
            scatterDimsToOperandDims: [0],
            indexVectorDim: 1,
            inputBatchingDims: [],
            scatterIndicesBatchingDims: [],
          },
        },
        called: [addF32],
        error: "an odd count >= 3",
      },
    ],
  },
  sort: {
    good: [
      {
        operands: ["f32[4,<=5]"],
        attrs: { dimensions: [1] },
        called: [lessF32],
        result: "f32[4,<=5]",
      },
      {
        operands: ["f32[4]", "s32[4]"],
        attrs: { dimensions: [0], isStable: true },
        called: [lessF32S32],
        result: "(f32[4], s32[4])",
      },
    ],
    bad: [
      {
        operands: ["f32[4]", "s32[4]"],
        attrs: { dimensions: [0] },
        called: [lessF32],
        error: "must take 4 scalar parameters (two per operand)",
      },
      {
        operands: ["f32[4]", "s32[5]"],
        attrs: { dimensions: [0] },
        called: [lessF32S32],
        error: "all operands must have the same dims",
      },
      {
        operands: ["f32[4]"],
        attrs: { dimensions: [1] },
        called: [lessF32],
        error: "dimension 1 is out of range [0, 1)",
      },
      {
        operands: ["f32[4]"],
        attrs: { dimensions: [0] },
        called: [addF32],
        error: "must return pred[]",
      },
    ],
  },
  tuple: {
    good: [
      { operands: ["f32[2]", "s32[<=3]"], result: "(f32[2], s32[<=3])" },
      { operands: [], result: "()" },
    ],
    bad: [{ operands: ["f32[2]"], called: [addF32], error: "calls no computation, got 1" }],
  },
  "get-tuple-element": {
    good: [{ operands: ["(f32[2], s32[<=3])"], attrs: { tupleIndex: 1 }, result: "s32[<=3]" }],
    bad: [
      { operands: ["(f32[2])"], attrs: { tupleIndex: 1 }, error: "tupleIndex 1 is out of range" },
      { operands: ["f32[2]"], attrs: { tupleIndex: 0 }, error: "the operand must be a tuple" },
    ],
  },
  fusion: {
    good: [
      {
        operands: ["f32[2]", "f32[2]"],
        attrs: { fusionKind: "kLoop" },
        called: [fusedAdd],
        result: "f32[2]",
      },
    ],
    bad: [
      {
        operands: ["f32[2]", "f32[3]"],
        attrs: { fusionKind: "kLoop" },
        called: [fusedAdd],
        error: "operand 1 must have shape f32[2]",
      },
      { operands: ["f32[2]", "f32[2]"], called: [fusedAdd], error: "needs attribute fusionKind" },
    ],
  },
  call: {
    good: [{ operands: ["f32[2]", "s32[]"], called: [callee], result: "f32[2]" }],
    bad: [
      {
        operands: ["f32[2]"],
        called: [callee],
        error: "takes 2 parameters but got 1 operands",
      },
      { operands: ["f32[<=2]", "s32[]"], called: [callee], error: "operand 0 must have shape" },
    ],
  },
  while: {
    good: [
      { operands: ["(s32[], f32[4])"], called: [whileCond, whileBody], result: "(s32[], f32[4])" },
    ],
    bad: [
      {
        operands: ["(s32[], f32[4])"],
        called: [whileCond, wrongBody],
        error: "must return the loop state's shape (s32[], f32[4])",
      },
      {
        operands: ["(s32[], f32[4])"],
        called: [stateToS32, whileBody],
        error: "must return pred[]",
      },
      {
        operands: ["(s32[], f32[4])"],
        called: [whileCond],
        error: "needs a condition and a body computation",
      },
      {
        operands: ["(s32[], f32[5])"],
        called: [whileCond, whileBody],
        error: "must take one parameter of the loop state's shape",
      },
    ],
  },
  conditional: {
    good: [
      {
        operands: ["pred[]", "f32[2]", "s32[]"],
        called: [branchF32, branchS32],
        result: "f32[2]",
      },
      {
        operands: ["s32[]", "f32[2]", "f32[2]", "s32[]"],
        called: [branchF32, branchDyn, branchS32],
        result: "f32[<=2]",
      },
      { operands: ["s32[]", "f32[2]"], called: [branchF32], result: "f32[2]" },
    ],
    bad: [
      {
        operands: ["pred[]", "f32[2]", "f32[2]", "f32[2]"],
        called: [branchF32, branchF32, branchF32],
        error: "a pred selector needs exactly 2 branches, got 3",
      },
      {
        operands: ["pred[]", "f32[2]", "f32[2]"],
        called: [branchF32, branchS32],
        error: "branch 1 computation (s32[]) -> f32[2] must take one parameter",
      },
      {
        operands: ["pred[]", "f32[2]", "f32[2]"],
        called: [branchF32, branchF32x3],
        error: "branch 1 returns f32[3] but branch 0 returns f32[2]",
      },
      {
        operands: ["f32[]", "f32[2]"],
        called: [branchF32],
        error: "the branch selector must be pred[] or s32[]",
      },
    ],
  },
  "get-dimension-size": {
    good: [{ operands: ["f32[<=4,3]"], attrs: { dimensions: [0] }, result: "s32[]" }],
    bad: [
      { operands: ["f32[4,3]"], attrs: { dimensions: [2] }, error: "out of range [0, 2)" },
      { operands: ["f32[4,3]"], error: "needs attribute dimensions" },
    ],
  },
  "set-dimension-size": {
    good: [
      { operands: ["f32[4,3]", "s32[]"], attrs: { dimensions: [0] }, result: "f32[<=4,3]" },
      { operands: ["f32[4,<=3]", "s32[]"], attrs: { dimensions: [1] }, result: "f32[4,<=3]" },
    ],
    bad: [
      {
        operands: ["f32[4,3]", "s64[]"],
        attrs: { dimensions: [0] },
        error: "the size must be s32[], got s64[]",
      },
      { operands: ["f32[4,3]", "s32[]"], attrs: { dimensions: [2] }, error: "out of range" },
    ],
  },
  "custom-call": {
    good: [
      {
        operands: ["f32[2]"],
        attrs: { customCallTarget: "my_kernel" },
        declared: "(f32[2], s32[])",
        result: "(f32[2], s32[])",
      },
    ],
    bad: [
      { operands: ["f32[2]"], declared: "f32[2]", error: "needs attribute customCallTarget" },
      {
        operands: ["f32[2]"],
        attrs: { customCallTarget: "k" },
        error: "the declared shape is required",
      },
    ],
  },
} satisfies { [K in Opcode]: Cases };

function run(op: Opcode, c: Good | Bad): Shape {
  return inferShape(
    op,
    c.operands.map(sh),
    c.attrs ?? {},
    c.called ?? [],
    c.declared !== undefined ? sh(c.declared) : undefined,
  );
}

describe("shape rules table", () => {
  it("has at least one good and one bad case for every opcode", () => {
    const table: Record<string, Cases | undefined> = CASES;
    for (const op of OPCODES) {
      expect(table[op]?.good.length ?? 0, op).toBeGreaterThan(0);
      expect(table[op]?.bad.length ?? 0, op).toBeGreaterThan(0);
    }
  });

  for (const op of OPCODES) {
    const cases: Cases = CASES[op];
    describe(op, () => {
      cases.good.forEach((c, k) => {
        it(`good ${k}: (${c.operands.join(", ")}) -> ${c.result}`, () => {
          expect(shapeToString(run(op, c))).toBe(c.result);
        });
      });
      cases.bad.forEach((c, k) => {
        it(`bad ${k}: ${c.error}`, () => {
          let caught: unknown;
          try {
            run(op, c);
          } catch (e) {
            caught = e;
          }
          expect(caught).toBeInstanceOf(ShapeError);
          const err = caught as ShapeError;
          expect(err.opcode).toBe(op);
          expect(err.message.startsWith(`${op}(${c.operands.join(", ")}): `)).toBe(true);
          expect(err.rule).toContain(c.error);
        });
      });
    });
  }
});

describe("shape rule helpers", () => {
  it("computationSignature lists parameters by number and the ROOT shape", () => {
    const sig = computationSignature(argmaxReducer);
    expect(signatureToString(sig)).toBe("(f32[], s32[], f32[], s32[]) -> (f32[], s32[])");
  });

  it("names the opcodes whose shape must be declared", () => {
    const declared = OPCODES.filter(needsDeclaredShape);
    expect(declared).toEqual([
      "parameter",
      "constant",
      "iota",
      "convert",
      "bitcast-convert",
      "broadcast",
      "reshape",
      "bitcast",
      "all-gather",
      "all-gather-start",
      "reduce-scatter",
      "recv",
      "infeed",
      "rng",
      "rng-bit-generator",
      "custom-call",
    ]);
  });

  it("an empty called computation is a ShapeError, not a crash", () => {
    const m = new ModuleBuilder("empty");
    const empty = m.module.addComputation("empty");
    expect(() => inferShape("call", [], {}, [empty])).toThrow(
      /call\(\): to_apply computation 'empty': computation 'empty' is empty/,
    );
  });
});

// ---- Properties ------------------------------------------------------------------------------

const dimsArb = fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 0, maxLength: 4 });
const flagsFor = (n: number) => fc.array(fc.boolean(), { minLength: n, maxLength: n });

describe("shape rule properties", () => {
  it("elementwise binary: same bounds in, same bounds out, dynamic where either is", () => {
    fc.assert(
      fc.property(
        dimsArb.chain((d) => fc.tuple(fc.constant(d), flagsFor(d.length), flagsFor(d.length))),
        ([dims, fa, fb]) => {
          const r = inferShape(
            "multiply",
            [arrayShape("f32", dims, fa), arrayShape("f32", dims, fb)],
            {},
            [],
          );
          expect(r).toEqual(
            arrayShape(
              "f32",
              dims,
              dims.map((_, i) => fa[i]! || fb[i]!),
            ),
          );
        },
      ),
    );
  });

  it("transpose by a permutation and then by its inverse is the identity", () => {
    fc.assert(
      fc.property(
        dimsArb.chain((d) =>
          fc.tuple(
            fc.constant(d),
            flagsFor(d.length),
            fc.shuffledSubarray(
              d.map((_, i) => i),
              { minLength: d.length, maxLength: d.length },
            ),
          ),
        ),
        ([dims, flags, perm]) => {
          const x = arrayShape("s32", dims, flags);
          const t = inferShape("transpose", [x], { dimensions: perm }, []);
          expect(t.kind === "array" && t.dims).toEqual(perm.map((p) => dims[p]));
          const inverse = perm.map((_, i) => perm.indexOf(i));
          expect(inferShape("transpose", [t], { dimensions: inverse }, [])).toEqual(x);
        },
      ),
    );
  });

  it("slice sizes are ceil((limit - start) / stride) and fit in the operand", () => {
    const dimSlice = fc
      .integer({ min: 0, max: 20 })
      .chain((n) =>
        fc.tuple(
          fc.constant(n),
          fc.integer({ min: 0, max: n }),
          fc.integer({ min: 0, max: n }),
          fc.integer({ min: 1, max: 5 }),
        ),
      )
      .map(([n, a, b, stride]) => ({ n, start: Math.min(a, b), limit: Math.max(a, b), stride }));
    fc.assert(
      fc.property(fc.array(dimSlice, { maxLength: 4 }), (ds) => {
        const x = arrayShape(
          "f32",
          ds.map((d) => d.n),
        );
        const r = inferShape("slice", [x], { slice: ds }, []);
        if (r.kind !== "array") throw new Error("slice gave a tuple");
        ds.forEach((d, i) => {
          let count = 0;
          for (let k = d.start; k < d.limit; k += d.stride) count++;
          expect(r.dims[i]).toBe(count);
          expect(r.dims[i]!).toBeLessThanOrEqual(d.n);
        });
      }),
    );
  });

  it("reduce-window output size equals the number of window positions, counted", () => {
    const arb = fc.record({
      base: fc.integer({ min: 0, max: 12 }),
      size: fc.integer({ min: 1, max: 4 }),
      stride: fc.integer({ min: 1, max: 3 }),
      padLow: fc.integer({ min: 0, max: 3 }),
      padHigh: fc.integer({ min: 0, max: 3 }),
      windowDilation: fc.integer({ min: 1, max: 3 }),
      baseDilation: fc.integer({ min: 1, max: 3 }),
    });
    fc.assert(
      fc.property(arb, (w) => {
        const window = [win({ ...w, size: w.size })];
        const r = inferShape("reduce-window", [sh(`f32[${w.base}]`), sh("f32[]")], { window }, [
          addF32,
        ]);
        const dilatedBase = w.base === 0 ? 0 : (w.base - 1) * w.baseDilation + 1;
        const padded = w.padLow + dilatedBase + w.padHigh;
        const span = (w.size - 1) * w.windowDilation + 1;
        let positions = 0;
        if (padded > 0) for (let s = 0; s + span <= padded; s += w.stride) positions++;
        expect(shapeToString(r)).toBe(`f32[${positions}]`);
      }),
    );
  });

  it("reshape accepts exactly the shapes with the same element count", () => {
    fc.assert(
      fc.property(dimsArb, dimsArb, (a, b) => {
        const count = (d: number[]) => d.reduce((x, y) => x * y, 1);
        const run = () =>
          inferShape("reshape", [arrayShape("f32", a)], {}, [], arrayShape("f32", b));
        if (count(a) === count(b)) expect(shapeToString(run())).toBe(`f32[${b.join(",")}]`);
        else expect(run).toThrow(ShapeError);
      }),
    );
  });
});
