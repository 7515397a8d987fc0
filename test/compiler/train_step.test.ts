// compile() of a training step (forward, backward(), an optimizer step): until such a step is
// captured as one program, the trace must see what a program would not repeat — gradients
// accumulated into .grad, parameters updated in place — and run the step in replay mode, so a
// compiled step trains exactly as the eager one does (never a program that silently skips the
// update, which is what it did before autograd existed to make the pattern common).

import { describe, expect, it } from "vitest";
import { compile, explain, nn, optim, randn, Generator, type Tensor } from "../../index.ts";

function setup() {
  const g = new Generator().manualSeed(7);
  const l1 = new nn.Linear(4, 8);
  const l2 = new nn.Linear(8, 1);
  for (const p of [...l1.parameters(), ...l2.parameters()]) p.impl = randn([...p.shape], { generator: g }).mul(0.5).impl;
  const x = randn([16, 4], { generator: g });
  const y = x.sum(1, true).tanh();
  const opt = new optim.SGD([...l1.parameters(), ...l2.parameters()], { lr: 0.1, momentum: 0.9 });
  const step = (xb: Tensor, yb: Tensor) => {
    const out = l2.forward(l1.forward(xb).tanh());
    const loss = out.sub(yb).mul(out.sub(yb)).mean();
    loss.backward();
    opt.step();
    opt.zeroGrad();
    return loss;
  };
  return { l1, l2, x, y, step };
}

describe("compile(trainStep)", () => {
  it("trains as the eager step does, call after call, in replay mode", () => {
    const eager = setup();
    const want = Array.from({ length: 4 }, () => eager.step(eager.x, eager.y).item());
    const comp = setup();
    const cs = compile(comp.step);
    const got = Array.from({ length: 4 }, () => cs(comp.x, comp.y).item());
    // Replay mode runs the step's tensor work as fused lazy programs: the tolerance tier's
    // float32 differences from eager, not the same bits.
    const near = (a: number[], b: number[]) =>
      a.forEach((v, i) => expect(Math.abs(v - b[i]!)).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(b[i]!))));
    near(got, want);
    expect(want[3]).toBeLessThan(want[0]! / 2);
    near(comp.l2.bias!.toArray() as number[], eager.l2.bias!.toArray() as number[]);
    near((comp.l1.weight.toArray() as number[][]).flat(), (eager.l1.weight.toArray() as number[][]).flat());
  });

  it("explain() says why: the backward call and the in-place updates", () => {
    const { x, y, step } = setup();
    const info = explain(step as (a: Tensor, b: Tensor) => Tensor, x, y);
    expect(info.mode).toBe("replay");
    const reasons = info.replayReasons.map((r: { reason: string }) => r.reason).join("\n");
    expect(reasons).toMatch(/computes gradients \(backward\(\)\)/);
    expect(reasons).toMatch(/updates the value of l\d\.(weight|bias), .* and 1 more in place \(the impl: an optimizer step\)/);
  });

  it("a manual in-place update without backward is repeated too", () => {
    const lin = new nn.Linear(2, 2);
    const before = lin.weight.toArray() as number[][];
    const decay = compile(() => {
      lin.weight.impl = lin.weight.mul(0.5).impl;
    });
    decay();
    decay();
    const after = lin.weight.toArray() as number[][];
    after.flat().forEach((v, i) => expect(v).toBeCloseTo(before.flat()[i]! * 0.25, 6));
  });

  it("a .grad written by hand is repeated too, and named in explain()", () => {
    const lin = new nn.Linear(2, 1);
    const setGrad = () => {
      lin.bias!.grad = lin.bias!.mul(2);
    };
    const info = explain(setGrad);
    expect(info.mode).toBe("replay");
    expect(info.replayReasons.map((r: { reason: string }) => r.reason).join("\n")).toMatch(
      /sets lin\.bias\.grad/,
    );
    lin.bias!.grad = null;
    const cs = compile(setGrad);
    cs();
    expect(lin.bias!.grad).not.toBeNull();
    expect((lin.bias!.grad as unknown as Tensor).toArray()).toEqual(
      (lin.bias!.toArray() as number[]).map((v) => v * 2),
    );
  });
});
