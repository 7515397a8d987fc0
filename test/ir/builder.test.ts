// The builder: each method makes the expected opcode, attributes and inferred shape (bounded
// dynamic dims included), metadata and parameter numbering work, and bad calls fail with a
// ShapeError that names the opcode, the operand shapes and the rule.

import { describe, expect, it } from "vitest";
import { ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { ShapeError, VerifyError } from "../../ir/errors.ts";
import { literal } from "../../ir/literal.ts";
import type { Instruction } from "../../ir/module.ts";
import { arrayShape, scalarShape, shapeToString, tupleShape } from "../../ir/shape.ts";

const f32 = (...dims: (number | string)[]) => arrayShape("f32", dims);
const s32 = (...dims: (number | string)[]) => arrayShape("s32", dims);
const str = (i: Instruction) => shapeToString(i.shape);

/** Runs fn inside a fresh entry computation and returns what it recorded. */
function inEntry<T>(fn: (b: ComputationBuilder, mb: ModuleBuilder) => T): T {
  const mb = new ModuleBuilder("t");
  let out: T | undefined;
  mb.entry("main", (b) => {
    out = fn(b, mb);
    return b.parameter(f32(), "sentinel");
  });
  return out!;
}

function shapeError(fn: () => unknown): ShapeError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ShapeError) return e;
    throw new Error(`expected a ShapeError, got ${String(e)}`);
  }
  throw new Error("expected a ShapeError, nothing was thrown");
}

describe("ModuleBuilder", () => {
  it("builds a verified module with a dynamic batch dim", () => {
    const mb = new ModuleBuilder("mlp");
    const add = mb.reducer("add", "f32");
    const max = mb.reducer("max", "f32");
    const entry = mb.entry("main", (b) => {
      const x = b.parameter(f32("<=16", 4), "x");
      const w = b.parameter(f32(4, 3), "w");
      const logits = b.dot(x, w, { lhsContracting: [1], rhsContracting: [0] });
      expect(str(logits)).toBe("f32[<=16,3]");
      const m = b.reduce(logits, b.scalar("f32", -Infinity), [1], max);
      expect(str(m)).toBe("f32[<=16]");
      const mb2 = b.broadcast(m, [16, 3], [0]);
      expect(str(mb2)).toBe("f32[<=16,3]");
      const e = b.exp(b.subtract(logits, mb2));
      const s = b.reduce(e, b.scalar("f32", 0), [1], add);
      return b.divide(e, b.broadcast(s, [16, 3], [0]));
    });
    const module = mb.build();
    expect(module.entry).toBe(entry);
    expect(str(entry.root)).toBe("f32[<=16,3]");
    expect(entry.parameters.map((p) => [p.name, p.attrs.parameterNumber])).toEqual([
      ["x", 0],
      ["w", 1],
    ]);
    expect(module.computations.map((c) => c.name)).toEqual(["add_f32", "max_f32", "main"]);
  });

  it("caches reducers per kind and element type", () => {
    const mb = new ModuleBuilder("r");
    const a = mb.reducer("add", "f32");
    expect(mb.reducer("add", "f32")).toBe(a);
    const b = mb.reducer("add", "s32");
    expect(b).not.toBe(a);
    expect(shapeToString(b.root.shape)).toBe("s32[]");
    expect(mb.reducer("or", "pred").root.opcode).toBe("or");
    expect(mb.reducer("mul", "f16").root.opcode).toBe("multiply");
    expect(mb.reducer("min", "s64").root.opcode).toBe("minimum");
    expect(mb.reducer("and", "u8").root.opcode).toBe("and");
  });

  it("rejects a reducer kind the element type does not support, leaving no computation", () => {
    const mb = new ModuleBuilder("r");
    const err = shapeError(() => mb.reducer("and", "f32"));
    expect(err.message).toBe(
      "and(f32[], f32[]): needs an integer or pred element type (pred, s4 ... s64, u4 ... u64), " +
        "got f32",
    );
    expect(mb.module.computations).toEqual([]);
  });

  it("build() runs the verifier", () => {
    const mb = new ModuleBuilder("no_entry");
    mb.computation("helper", (b) => b.parameter(f32(2)));
    expect(() => mb.build()).toThrow(VerifyError);
    expect(() => mb.build()).toThrow(/has no ENTRY/);
  });

  it("a root from another computation is rejected", () => {
    const mb = new ModuleBuilder("m");
    let stray: Instruction | undefined;
    mb.computation("a", (b) => (stray = b.parameter(f32(2))));
    expect(() => mb.entry("main", () => stray!)).toThrow(/cannot be ROOT of 'main'/);
    expect(mb.module.computations.map((c) => c.name)).toEqual(["a"]);
  });
});

describe("ComputationBuilder: elementwise", () => {
  it("maps method names to HLO opcodes and keeps shapes", () => {
    inEntry((b) => {
      const x = b.parameter(f32(2, "<=3"));
      const unary: [(v: Instruction) => Instruction, string][] = [
        [(v) => b.abs(v), "abs"],
        [(v) => b.negate(v), "negate"],
        [(v) => b.sign(v), "sign"],
        [(v) => b.exp(v), "exponential"],
        [(v) => b.expm1(v), "exponential-minus-one"],
        [(v) => b.log(v), "log"],
        [(v) => b.log1p(v), "log-plus-one"],
        [(v) => b.sqrt(v), "sqrt"],
        [(v) => b.rsqrt(v), "rsqrt"],
        [(v) => b.cbrt(v), "cbrt"],
        [(v) => b.tanh(v), "tanh"],
        [(v) => b.logistic(v), "logistic"],
        [(v) => b.sin(v), "sine"],
        [(v) => b.cos(v), "cosine"],
        [(v) => b.tan(v), "tan"],
        [(v) => b.erf(v), "erf"],
        [(v) => b.floor(v), "floor"],
        [(v) => b.ceil(v), "ceil"],
        [(v) => b.roundAfz(v), "round-nearest-afz"],
        [(v) => b.roundEven(v), "round-nearest-even"],
        [(v) => b.copy(v), "copy"],
      ];
      for (const [make, opcode] of unary) {
        const y = make(x);
        expect([y.opcode, str(y)]).toEqual([opcode, "f32[2,<=3]"]);
      }
      expect(str(b.isFinite(x))).toBe("pred[2,<=3]");
      const binary: [(p: Instruction, q: Instruction) => Instruction, string][] = [
        [(p, q) => b.add(p, q), "add"],
        [(p, q) => b.subtract(p, q), "subtract"],
        [(p, q) => b.multiply(p, q), "multiply"],
        [(p, q) => b.divide(p, q), "divide"],
        [(p, q) => b.remainder(p, q), "remainder"],
        [(p, q) => b.power(p, q), "power"],
        [(p, q) => b.maximum(p, q), "maximum"],
        [(p, q) => b.minimum(p, q), "minimum"],
        [(p, q) => b.atan2(p, q), "atan2"],
      ];
      for (const [make, opcode] of binary) {
        const y = make(x, x);
        expect([y.opcode, str(y)]).toEqual([opcode, "f32[2,<=3]"]);
      }
      const i = b.parameter(s32(4));
      const bits: [(p: Instruction, q: Instruction) => Instruction, string][] = [
        [(p, q) => b.and(p, q), "and"],
        [(p, q) => b.or(p, q), "or"],
        [(p, q) => b.xor(p, q), "xor"],
        [(p, q) => b.shiftLeft(p, q), "shift-left"],
        [(p, q) => b.shiftRightArithmetic(p, q), "shift-right-arithmetic"],
        [(p, q) => b.shiftRightLogical(p, q), "shift-right-logical"],
      ];
      for (const [make, opcode] of bits) {
        const y = make(i, i);
        expect([y.opcode, str(y)]).toEqual([opcode, "s32[4]"]);
      }
      expect(b.not(i).opcode).toBe("not");
    });
  });

  it("compare, select, clamp, convert and bitcast-convert", () => {
    inEntry((b) => {
      const x = b.parameter(f32("<=4"));
      const y = b.parameter(f32(4));
      const lt = b.compare(x, y, "LT", "TOTALORDER");
      expect([str(lt), lt.attrs.direction, lt.attrs.comparisonType]).toEqual([
        "pred[<=4]",
        "LT",
        "TOTALORDER",
      ]);
      expect(b.compare(x, y, "EQ").attrs.comparisonType).toBeUndefined();
      expect(str(b.select(lt, x, y))).toBe("f32[<=4]");
      expect(str(b.select(b.scalar("pred", true), y, y))).toBe("f32[4]");
      expect(str(b.clamp(b.scalar("f32", 0), x, b.scalar("f32", 6)))).toBe("f32[<=4]");
      expect(str(b.convert(x, "s32"))).toBe("s32[<=4]");
      expect(str(b.bitcastConvert(y, "s32"))).toBe("s32[4]");
      expect(str(b.bitcastConvert(y, "u8"))).toBe("u8[4,4]");
      expect(str(b.bitcastConvert(b.parameter(arrayShape("u8", [3, 2])), "f16"))).toBe("f16[3]");
    });
  });
});

describe("ComputationBuilder: leaves", () => {
  it("numbers parameters in call order and keeps given names", () => {
    inEntry((b) => {
      const p = b.parameter(f32(2), "first");
      const q = b.parameter(tupleShape([f32(2), s32()]));
      expect([p.name, p.attrs.parameterNumber]).toEqual(["first", 0]);
      expect(q.attrs.parameterNumber).toBe(1);
      expect(str(q)).toBe("(f32[2], s32[])");
    });
  });

  it("constants, scalars and iota", () => {
    inEntry((b) => {
      const c = b.constant(literal("s32", [2, 2], [1, 2, 3, 4]));
      expect([c.opcode, str(c)]).toEqual(["constant", "s32[2,2]"]);
      expect(str(b.scalar("pred", false))).toBe("pred[]");
      expect(str(b.scalar("s64", 5n))).toBe("s64[]");
      const io = b.iota(s32(3, "<=5"), 1);
      expect([str(io), io.attrs.iotaDimension]).toEqual(["s32[3,<=5]", 1]);
    });
  });

  it("a scalar the type cannot hold is a ShapeError of constant", () => {
    inEntry((b) => {
      const err = shapeError(() => b.scalar("u8", 300));
      expect(err.message).toBe(
        "constant(): literal(u8, []): value 0: 300 is out of range for u8 [0, 255]",
      );
    });
  });

  it("continues parameter numbers when wrapping an existing computation", () => {
    const mb = new ModuleBuilder("wrap");
    const c = mb.entry("main", (b) => b.add(b.parameter(f32(2)), b.parameter(f32(2))));
    const b = new ComputationBuilder(c);
    const p = b.parameter(f32(2));
    expect(p.attrs.parameterNumber).toBe(2);
    c.root = b.add(c.root, p);
    expect(() => mb.build()).not.toThrow();
  });
});

describe("ComputationBuilder: shape and data movement", () => {
  it("broadcast maps operand dims and carries their dynamism", () => {
    inEntry((b) => {
      const x = b.parameter(f32("<=8"));
      const bc = b.broadcast(x, [2, 8], [1]);
      expect([str(bc), bc.attrs.dimensions]).toEqual(["f32[2,<=8]", [1]]);
      expect(str(b.broadcast(b.scalar("f32", 1), ["<=4", 3], []))).toBe("f32[<=4,3]");
    });
  });

  it("reshape, transpose, reverse, slice", () => {
    inEntry((b) => {
      const x = b.parameter(f32(2, "<=3", 4));
      expect(str(b.reshape(x, [6, "<=4"]))).toBe("f32[6,<=4]");
      const t = b.transpose(x, [2, 0, 1]);
      expect([str(t), t.attrs.dimensions]).toEqual(["f32[4,2,<=3]", [2, 0, 1]]);
      expect(str(b.reverse(x, [0, 2]))).toBe("f32[2,<=3,4]");
      const s = b.slice(x, [0, 0, 1], [2, 3, 4], [1, 1, 2]);
      expect(s.attrs.slice).toEqual([
        { start: 0, limit: 2, stride: 1 },
        { start: 0, limit: 3, stride: 1 },
        { start: 1, limit: 4, stride: 2 },
      ]);
      expect(str(s)).toBe("f32[2,<=3,2]");
      expect(str(b.slice(x, [1, 1, 0], [2, 2, 4]))).toBe("f32[1,1,4]");
    });
  });

  it("dynamic-slice, dynamic-update-slice, concatenate, pad", () => {
    inEntry((b) => {
      const x = b.parameter(f32(10, "<=8"));
      const i = b.scalar("s32", 2);
      const ds = b.dynamicSlice(x, [i, i], [3, 8]);
      expect([str(ds), ds.operands.length]).toEqual(["f32[3,8]", 3]);
      expect(str(b.dynamicUpdateSlice(x, ds, [i, i]))).toBe("f32[10,<=8]");
      const cat = b.concatenate([x, b.parameter(f32(5, 8))], 0);
      expect([str(cat), cat.attrs.dimensions]).toEqual(["f32[15,<=8]", [0]]);
      const zero = b.scalar("f32", 0);
      const padded = b.pad(x, zero, [
        [1, 1],
        { low: 0, high: -2, interior: 1 },
      ]);
      expect(padded.attrs.padding).toEqual([
        { low: 1, high: 1, interior: 0 },
        { low: 0, high: -2, interior: 1 },
      ]);
      expect(str(padded)).toBe("f32[12,<=13]");
    });
  });

  it("set-dimension-size makes a dim dynamic and get-dimension-size reads it", () => {
    inEntry((b) => {
      const x = b.parameter(f32(4, 3));
      const n = b.parameter(s32());
      const d = b.setDimensionSize(x, n, 0);
      expect(str(d)).toBe("f32[<=4,3]");
      const size = b.getDimensionSize(d, 0);
      expect([str(size), size.attrs.dimensions]).toEqual(["s32[]", [0]]);
    });
  });
});

describe("ComputationBuilder: contractions", () => {
  it("dot defaults missing dim lists and honours a preferred type", () => {
    inEntry((b) => {
      const a = b.parameter(arrayShape("bf16", ["<=5", 2, 3]));
      const w = b.parameter(arrayShape("bf16", [5, 3, 4]));
      const d = b.dot(a, w, {
        lhsBatch: [0],
        rhsBatch: [0],
        lhsContracting: [2],
        rhsContracting: [1],
      });
      expect(str(d)).toBe("bf16[<=5,2,4]");
      const outer = b.dot(b.parameter(f32(2)), b.parameter(f32(3)), {});
      expect([str(outer), outer.attrs.dot]).toEqual([
        "f32[2,3]",
        { lhsBatch: [], rhsBatch: [], lhsContracting: [], rhsContracting: [] },
      ]);
      const dims = { lhsBatch: [0], rhsBatch: [0], lhsContracting: [2], rhsContracting: [1] };
      const wide = b.dot(a, w, dims, "f32");
      expect(str(wide)).toBe("f32[<=5,2,4]");
    });
  });

  it("convolution from dim labels, with defaults for the window", () => {
    inEntry((b) => {
      const img = b.parameter(f32("<=8", 9, 9, 4));
      const k = b.parameter(f32(3, 3, 2, 6));
      const conv = b.convolution(img, k, {
        window: [{ size: 3, stride: 2 }, { size: 3, padLow: 1, padHigh: 1 }],
        dims: "b01f_01io->b01f",
        featureGroupCount: 2,
      });
      expect(str(conv)).toBe("f32[<=8,4,9,6]");
      expect(conv.attrs.window![0]).toEqual({
        size: 3,
        stride: 2,
        padLow: 0,
        padHigh: 0,
        windowDilation: 1,
        baseDilation: 1,
        windowReversal: false,
      });
      expect([conv.attrs.featureGroupCount, conv.attrs.batchGroupCount]).toEqual([2, 1]);
    });
  });

  it("convolution errors name the opcode", () => {
    inEntry((b) => {
      const img = b.parameter(f32(1, 5, 2));
      const k = b.parameter(f32(3, 2, 4));
      const noSize = shapeError(() =>
        b.convolution(img, k, { window: [{}], dims: "b0f_0io->b0f" }),
      );
      expect(noSize.message).toBe("convolution(f32[1,5,2], f32[3,2,4]): window dim 0 needs a size");
      const bad = shapeError(() =>
        b.convolution(img, k, { window: [{ size: 3 }], dims: "bf_0io->b0f" }),
      );
      expect(bad.message).toMatch(/^convolution\(f32\[1,5,2\], f32\[3,2,4\]\): dim_labels/);
    });
  });
});

describe("ComputationBuilder: reductions, indexing, control flow", () => {
  it("reduce and reduce-window with one and two inputs", () => {
    const mb = new ModuleBuilder("red");
    const add = mb.reducer("add", "f32");
    const pairMax = mb.computation("pair_max", (b) => {
      const av = b.parameter(scalarShape("f32"));
      const ai = b.parameter(scalarShape("s32"));
      const bv = b.parameter(scalarShape("f32"));
      const bi = b.parameter(scalarShape("s32"));
      const ge = b.compare(av, bv, "GE");
      return b.tuple([b.select(ge, av, bv), b.select(ge, ai, bi)]);
    });
    mb.entry("main", (b) => {
      const x = b.parameter(f32("<=6", 8));
      const idx = b.iota(arrayShape("s32", ["<=6", 8]), 1);
      const r = b.reduce([x, idx], [b.scalar("f32", -1), b.scalar("s32", 0)], [1], pairMax);
      expect(str(r)).toBe("(f32[<=6], s32[<=6])");
      const rw = b.reduceWindow(x, b.scalar("f32", 0), [{ size: 2, stride: 2 }, { size: 8 }], add);
      expect(str(rw)).toBe("f32[<=3,1]");
      return b.getTupleElement(r, 0);
    });
    expect(() => mb.build()).not.toThrow();
  });

  it("gather and scatter default the optional dim lists", () => {
    const mb = new ModuleBuilder("gs");
    const add = mb.reducer("add", "f32");
    mb.entry("main", (b) => {
      const table = b.parameter(f32(10, 8));
      const ids = b.parameter(s32("<=5"));
      const g = b.gather(
        table,
        ids,
        { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0], indexVectorDim: 1 },
        [1, 8],
        true,
      );
      expect(str(g)).toBe("f32[<=5,8]");
      expect(g.attrs.gather!.operandBatchingDims).toEqual([]);
      expect(g.attrs.indicesAreSorted).toBe(true);
      const ids2 = b.parameter(s32(5, 1));
      const upd = b.parameter(f32(5, 8));
      const sc = b.scatter(
        table,
        ids2,
        upd,
        {
          updateWindowDims: [1],
          insertedWindowDims: [0],
          scatterDimsToOperandDims: [0],
          indexVectorDim: 1,
        },
        add,
        { uniqueIndices: true },
      );
      expect([str(sc), sc.attrs.uniqueIndices, sc.attrs.indicesAreSorted]).toEqual([
        "f32[10,8]",
        true,
        undefined,
      ]);
      expect(sc.attrs.scatter!.scatterIndicesBatchingDims).toEqual([]);
      return sc;
    });
    expect(() => mb.build()).not.toThrow();
  });

  it("sort, tuple, call, fusion, while, conditional, custom-call", () => {
    const mb = new ModuleBuilder("ctl");
    const less = mb.computation("less", (b) =>
      b.compare(b.parameter(scalarShape("f32")), b.parameter(scalarShape("f32")), "LT"),
    );
    const double = mb.computation("double", (b) => {
      const x = b.parameter(f32(4));
      return b.add(x, x);
    });
    const state = tupleShape([s32(), f32(4)]);
    const cond = mb.computation("cond", (b) =>
      b.compare(b.getTupleElement(b.parameter(state), 0), b.scalar("s32", 3), "LT"),
    );
    const body = mb.computation("body", (b) => {
      const s = b.parameter(state);
      const i = b.add(b.getTupleElement(s, 0), b.scalar("s32", 1));
      return b.tuple([i, b.getTupleElement(s, 1)]);
    });
    const neg = mb.computation("neg", (b) => b.negate(b.parameter(f32(4))));
    mb.entry("main", (b) => {
      const x = b.parameter(f32(4));
      const sorted = b.sort(x, 0, less, true);
      expect([str(sorted), sorted.attrs.isStable, sorted.attrs.dimensions]).toEqual([
        "f32[4]",
        true,
        [0],
      ]);
      const c = b.call([sorted], double);
      const f = b.fusion([c], double);
      expect([str(f), f.attrs.fusionKind]).toEqual(["f32[4]", "kLoop"]);
      expect(b.fusion([c], double, "kInput").attrs.fusionKind).toBe("kInput");
      const loop = b.while(b.tuple([b.scalar("s32", 0), f]), cond, body);
      expect(str(loop)).toBe("(s32[], f32[4])");
      const v = b.getTupleElement(loop, 1);
      const pick = b.conditional(b.scalar("pred", true), [v, v], [neg, double]);
      expect([str(pick), pick.called.map((k) => k.name)]).toEqual(["f32[4]", ["neg", "double"]]);
      const cc = b.customCall([pick], "my_target", tupleShape([f32(4), s32()]), "{}");
      expect([str(cc), cc.attrs.customCallTarget, cc.attrs.backendConfig]).toEqual([
        "(f32[4], s32[])",
        "my_target",
        "{}",
      ]);
      return cc;
    });
    expect(() => mb.build()).not.toThrow();
  });
});

describe("ComputationBuilder: errors", () => {
  it("names the opcode, the operand shapes and the rule", () => {
    inEntry((b) => {
      const x = b.parameter(f32(2, 3));
      const y = b.parameter(f32(3, 2));
      const err = shapeError(() => b.add(x, y));
      expect(err.message).toBe(
        "add(f32[2,3], f32[3,2]): operands must have the same dims (no implicit broadcasting " +
          "in HLO; use broadcast)",
      );
      expect([err.opcode, err.operandShapes]).toEqual(["add", ["f32[2,3]", "f32[3,2]"]]);
      expect(shapeError(() => b.exp(b.parameter(s32(2)))).message).toBe(
        "exponential(s32[2]): needs a floating-point element type (f16, bf16, f32), got s32",
      );
      expect(shapeError(() => b.transpose(x, [0, 0])).message).toBe(
        "transpose(f32[2,3]): dimensions {0,0} must not repeat a dim",
      );
    });
  });

  it("a failed call adds no instruction", () => {
    inEntry((b) => {
      const x = b.parameter(f32(2, 3));
      const before = b.computation.instructions.length;
      shapeError(() => b.reshape(x, [5]));
      expect(b.computation.instructions.length).toBe(before);
    });
  });

  it("rejects operands from another computation and callees from another module", () => {
    const mb = new ModuleBuilder("m");
    let outside: Instruction | undefined;
    mb.computation("other", (b) => (outside = b.parameter(f32(2))));
    const foreign = new ModuleBuilder("elsewhere").reducer("add", "f32");
    mb.entry("main", (b) => {
      const x = b.parameter(f32(2));
      const e1 = shapeError(() => b.add(x, outside!));
      expect(e1.rule).toBe(
        `operand 1 %${outside!.name} belongs to computation 'other', not 'main'`,
      );
      const e2 = shapeError(() => b.reduce(x, b.scalar("f32", 0), [0], foreign));
      expect(e2.rule).toBe("called computation 'add_f32' belongs to another module");
      return x;
    });
  });

  it("bad dims and declared shapes that disagree with the rule", () => {
    inEntry((b) => {
      const x = b.parameter(f32(3));
      expect(shapeError(() => b.broadcast(x, ["<=x", 3], [1])).message).toBe(
        "broadcast(f32[3]): arrayShape: bad dim '<=x' (expected a number or '<=N')",
      );
      expect(shapeError(() => b.broadcast(x, [3, 2], [1])).rule).toMatch(
        /operand dim 0 \(size 3\) maps to result dim 1 of size 2/,
      );
      expect(shapeError(() => b.slice(x, [0], [1, 2])).rule).toMatch(/one entry per dim/);
      expect(shapeError(() => b.op("negate", [x], {}, [], f32(4))).rule).toBe(
        "the declared shape f32[4] differs from the inferred f32[3]",
      );
      const kept = b.op("negate", [x], {}, [], arrayShape("f32", [3], undefined, [0]));
      expect(shapeToString(kept.shape)).toBe("f32[3]{0}");
    });
  });
});

describe("ComputationBuilder: metadata", () => {
  it("applies the current metadata and restores it after withMetadata", () => {
    inEntry((b) => {
      b.metadata = { sourceFile: "model.ts" };
      const x = b.parameter(f32(2));
      const inner = b.withMetadata({ opType: "relu", sourceLine: 7 }, () => {
        const nested = b.withMetadata({ opName: "block/relu" }, () => b.negate(x));
        expect(nested.metadata).toEqual({
          sourceFile: "model.ts",
          opType: "relu",
          sourceLine: 7,
          opName: "block/relu",
        });
        return b.abs(x);
      });
      expect(inner.metadata).toEqual({ sourceFile: "model.ts", opType: "relu", sourceLine: 7 });
      expect(b.abs(x).metadata).toEqual({ sourceFile: "model.ts" });
      expect(() =>
        b.withMetadata({ opType: "boom" }, () => {
          throw new Error("inside");
        }),
      ).toThrow("inside");
      expect(b.metadata).toEqual({ sourceFile: "model.ts" });
      expect(x.metadata).toEqual({ sourceFile: "model.ts" });
    });
  });
});
