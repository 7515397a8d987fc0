import { describe, expect, it } from "vitest";
import { ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { arrayShape, type ArrayShape } from "../../ir/shape.ts";
import { AutodiffError, valueAndGradModule, vjpModule } from "../../passes/index.ts";
import { rng } from "./support.ts";


type Range = [number, number];
const f32 = (...dims: number[]): ArrayShape => arrayShape("f32", dims);
const size = (s: ArrayShape): number => s.dims.reduce((a, d) => a * d, 1);

function leaves(v: EvalValue): Literal[] {
  return Array.isArray(v) ? v.flatMap(leaves) : [v];
}

function randomLit(s: ArrayShape, r: () => number, [lo, hi]: Range): Literal {
  return literal(s.type, s.dims, Array.from({ length: size(s) }, () => lo + (hi - lo) * r()));
}

type Body = (b: ComputationBuilder, ps: Instruction[]) => Instruction;
function build(shapes: ArrayShape[], fn: Body): Module {
  const mb = new ModuleBuilder("f");
  mb.entry("main", (b) => fn(b, shapes.map((s) => b.parameter(s))));
  return mb.build();
}

/**
 * Checks vjpModule against central differences of L(x) = sum(ct * f(x)) in f64 over the f32
 * outputs, with eps 1e-2 (truncation ~1e-4, f32 rounding ~1e-5 relative to |L|).
 */
function checkGrad(m: Module, shapes: ArrayShape[], ranges: Range[], seed = 1, tol = 5e-3): void {
  const r = rng(seed);
  const xs = shapes.map((s, k) => randomLit(s, r, ranges[k] ?? [-1, 1]));
  const outs = leaves(evaluate(m, xs));
  const cts = outs.map((o) => randomLit(o.shape, r, [-1, 1]));
  const loss = (args: Literal[]): number => {
    const ys = leaves(evaluate(m, args));
    let acc = 0;
    ys.forEach((y, k) => y.toNumbers().forEach((v, j) => (acc += v * cts[k]!.toNumbers()[j]!)));
    return acc;
  };
  const vjp = vjpModule(m);
  const grads = leaves(evaluate(vjp, [...xs, ...cts]));
  expect(grads.length).toBe(shapes.length);
  shapes.forEach((s, k) => expect(grads[k]!.dims).toEqual(s.dims));
  expectMatchesFd(loss, xs, grads, shapes.map((_, k) => k), tol);
}

/**
 * Each element of grads[k] equals the central difference (eps 1e-2) of `loss` in args[at[k]],
 * within tol * (1 + |fd|).
 */
function expectMatchesFd(
  loss: (args: Literal[]) => number,
  args: readonly Literal[],
  grads: readonly Literal[],
  at: readonly number[],
  tol: number,
): void {
  const eps = 1e-2;
  at.forEach((a, k) => {
    const x0 = args[a]!;
    const base = x0.toNumbers();
    for (let j = 0; j < base.length; j++) {
      const shifted = (d: number): number => {
        const p = [...base];
        p[j] = p[j]! + d;
        const moved = [...args];
        moved[a] = literal("f32", x0.dims, p);
        return loss(moved);
      };
      const fd = (shifted(eps) - shifted(-eps)) / (2 * eps);
      const ad = grads[k]!.toNumbers()[j]!;
      expect(Math.abs(ad - fd), `param ${a} elem ${j}: ad ${ad} fd ${fd}`).toBeLessThanOrEqual(
        tol * (1 + Math.abs(fd)),
      );
    }
  });
}

const unary: [string, (b: ComputationBuilder, x: Instruction) => Instruction, Range][] = [
  ["negate", (b, x) => b.negate(x), [-1, 1]],
  ["exp", (b, x) => b.exp(x), [-1, 1]],
  ["log", (b, x) => b.log(x), [0.5, 2]],
  ["tanh", (b, x) => b.tanh(x), [-1, 1]],
  ["logistic", (b, x) => b.logistic(x), [-2, 2]],
  ["sqrt", (b, x) => b.sqrt(x), [0.5, 2]],
  ["rsqrt", (b, x) => b.rsqrt(x), [0.5, 2]],
  ["abs", (b, x) => b.abs(x), [0.2, 1]],
  ["abs (negative side)", (b, x) => b.abs(x), [-1, -0.2]],
  ["copy", (b, x) => b.copy(x), [-1, 1]],
  ["convert f32->f32 via multiply", (b, x) => b.convert(b.multiply(x, x), "f32"), [-1, 1]],
];

describe("vjpModule: elementwise rules vs central differences", () => {
  for (const [name, f, range] of unary) {
    it(name, () => checkGrad(build([f32(2, 3)], (b, [x]) => f(b, x!)), [f32(2, 3)], [range]));
  }
  const binary: [string, (b: ComputationBuilder, x: Instruction, y: Instruction) => Instruction][] =
    [
      ["add", (b, x, y) => b.add(x, y)],
      ["subtract", (b, x, y) => b.subtract(x, y)],
      ["multiply", (b, x, y) => b.multiply(x, y)],
      ["divide", (b, x, y) => b.divide(x, y)],
      ["maximum", (b, x, y) => b.maximum(x, y)],
      ["minimum", (b, x, y) => b.minimum(x, y)],
    ];
  for (const [name, f] of binary) {
    it(name, () => {
      const s = [f32(2, 3), f32(2, 3)];
      // Disjoint ranges keep maximum/minimum away from ties and divisors away from 0.
      checkGrad(build(s, (b, [x, y]) => f(b, x!, y!)), s, [[-1, 1], [1.2, 2]]);
      checkGrad(build(s, (b, [x, y]) => f(b, x!, y!)), s, [[1.2, 2], [-2, -1.2]], 2);
    });
  }
  it("select", () => {
    const s = [f32(2, 3), f32(2, 3)];
    const m = build(s, (b, [x, y]) => b.select(b.compare(x!, y!, "GT"), b.exp(x!), b.tanh(y!)));
    checkGrad(m, s, [[-1, 1], [-1, 1]], 3);
  });
  it("maximum ties go to the first operand", () => {
    const m = build([f32(2), f32(2)], (b, [x, y]) => b.maximum(x!, y!));
    const x = literal("f32", [2], [1, 2]);
    const g = leaves(evaluate(vjpModule(m), [x, x, literal("f32", [2], [3, 4])]));
    expect(g[0]!.toNumbers()).toEqual([3, 4]);
    expect(g[1]!.toNumbers()).toEqual([0, 0]);
  });
});

describe("vjpModule: movement, reduce and dot", () => {
  it("broadcast and reshape", () => {
    const m = build([f32(3, 2)], (b, [x]) =>
    {
      const y = b.broadcast(x!, [3, 4, 2], [0, 2]);
      return b.reshape(b.multiply(y, b.exp(y)), [8, 3]);
    });
    checkGrad(m, [f32(3, 2)], [[-1, 1]]);
  });
  it("transpose", () => {
    const m = build([f32(2, 3, 4)], (b, [x]) => b.exp(b.transpose(x!, [1, 2, 0])));
    checkGrad(m, [f32(2, 3, 4)], [[-1, 1]]);
  });
  it("reduce add (with a gradient to the init value)", () => {
    const s = [f32(2, 3, 4), f32()];
    const m = build(s, (b, [x, init]) => {
      const add = b.moduleBuilder!.reducer("add", "f32");
      return b.reduce(b.multiply(x!, x!), init!, [0, 2], add);
    });
    checkGrad(m, s, [[-1, 1], [-1, 1]]);
  });
  it("dot: matmul", () => {
    const s = [f32(2, 3), f32(3, 4)];
    checkGrad(build(s, (b, [x, y]) => b.dot(x!, y!, { lhsContracting: [1], rhsContracting: [0] })),
      s, [[-1, 1], [-1, 1]]);
  });
  it("dot: batch dims, contracting not last, free dims on both sides", () => {
    const s = [f32(3, 2, 4, 2), f32(2, 5, 3, 2)];
    const m = build(s, (b, [x, y]) =>
      b.dot(x!, y!, {
        lhsBatch: [3, 0],
        rhsBatch: [0, 2],
        lhsContracting: [1],
        rhsContracting: [3],
      }),
    );
    checkGrad(m, s, [[-1, 1], [-1, 1]]);
  });
  it("tuple root and get-tuple-element fan-out", () => {
    const s = [f32(2, 2), f32(2, 2)];
    const m = build(s, (b, [x, y]) => {
      const t = b.tuple([b.multiply(x!, y!), b.exp(x!)]);
      const u = b.add(b.getTupleElement(t, 0), b.getTupleElement(t, 1));
      return b.tuple([u, b.getTupleElement(t, 0)]);
    });
    checkGrad(m, s, [[-1, 1], [-1, 1]]);
  });
});

describe("composite programs", () => {
  it("MLP with softmax cross-entropy: valueAndGradModule vs central differences", () => {
    const B = 2, I = 3, H = 4, C = 3;
    const shapes = [f32(B, I), f32(I, H), f32(H), f32(H, C), f32(B, C)];
    const m = build(shapes, (b, [x, w1, b1, w2, onehot]) => {
      const add = b.moduleBuilder!.reducer("add", "f32");
      const h0 = b.dot(x!, w1!, { lhsContracting: [1], rhsContracting: [0] });
      const h = b.tanh(b.add(h0, b.broadcast(b1!, [B, H], [1])));
      const z = b.dot(h, w2!, { lhsContracting: [1], rhsContracting: [0] });
      // Unshifted logsumexp: the logits stay small here (reduce max comes with stage 2).
      const e = b.exp(z);
      const lse = b.log(b.reduce(e, b.scalar("f32", 0), [1], add));
      const zy = b.reduce(b.multiply(z, onehot!), b.scalar("f32", 0), [1], add);
      const nll = b.subtract(lse, zy);
      const total = b.reduce(nll, b.scalar("f32", 0), [0], add);
      return b.multiply(total, b.scalar("f32", 1 / B));
    });
    const r = rng(7);
    const xs = shapes.slice(0, 4).map((s) => randomLit(s, r, [-1, 1]));
    const onehot = literal("f32", [B, C], [1, 0, 0, 0, 0, 1]);
    const args = [...xs, onehot];
    const vg = valueAndGradModule(m, { wrt: [0, 1, 2, 3] });
    const [value, ...grads] = leaves(evaluate(vg, args));
    expect(value!.toNumbers()[0]).toBeCloseTo(leaves(evaluate(m, args))[0]!.toNumbers()[0]!, 6);
    expect(grads.length).toBe(4);
    const value0 = (a: Literal[]) => leaves(evaluate(m, a))[0]!.toNumbers()[0]!;
    expectMatchesFd(value0, args, grads, [0, 1, 2, 3], 5e-3);
  });

  it("wrt selects params; a param with no dependence gets zeros of its shape", () => {
    const s = [f32(2), f32(3), f32(2)];
    const m = build(s, (b, [x, _y, z]) => b.multiply(x!, z!));
    const vjp = vjpModule(m, { wrt: [1, 2] });
    const x = literal("f32", [2], [2, 3]);
    const y = literal("f32", [3], [1, 1, 1]);
    const z = literal("f32", [2], [5, 7]);
    const g = leaves(evaluate(vjp, [x, y, z, literal("f32", [2], [1, 10])]));
    expect(g.map((l) => l.toNumbers())).toEqual([[0, 0, 0], [2, 30]]);
    expect(vjp.entry.parameters.length).toBe(4);
  });
});

describe("AutodiffError", () => {
  it("names the opcode, the instruction and its metadata", () => {
    const m = build([f32(4)], (b, [x]) =>
      b.withMetadata({ opType: "myCustom", sourceFile: "model.ts", sourceLine: 42 }, () =>
        b.customCall([x!], "my_target", f32(4)),
      ),
    );
    expect(() => vjpModule(m)).toThrow(AutodiffError);
    expect(() => vjpModule(m)).toThrow(/custom-call %\S+ \(op_type=myCustom.*model\.ts:42/);
  });
  it("backward instructions keep the forward metadata", () => {
    const m = build([f32(2)], (b, [x]) =>
      b.withMetadata({ opType: "gelu_ish", sourceLine: 9 }, () => b.tanh(x!)),
    );
    const vjp = vjpModule(m);
    const back = vjp.entry.instructions.filter((i) => i.opcode === "multiply");
    expect(back.length).toBeGreaterThan(0);
    for (const i of back) expect(i.metadata.opType).toBe("gelu_ish");
  });
});
