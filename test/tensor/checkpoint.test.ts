// Activation checkpointing (tensor/checkpoint.ts): a checkpointed module's forward keeps no
// activations (one node on its outputs) and runs again in backward; the gradients of its inputs,
// its parameters and everything before it equal the plain run's, dropout's mask included (the
// generator's state is restored for the recomputation), and a second backward is refused as
// for any freed graph.

import { describe, expect, it } from "vitest";
import { manualSeed, nn, randn, Generator, type Tensor } from "../../index.ts";

class Block extends nn.Module {
  fc1 = new nn.Linear(6, 12);
  fc2 = new nn.Linear(12, 6);
  drop = new nn.Dropout(0.25);
  calls = 0;
  forward(x: Tensor): Tensor {
    this.calls++;
    return this.fc2.forward(this.drop.call(this.fc1.forward(x).tanh())).add(x);
  }
}

function make() {
  const g = new Generator().manualSeed(3);
  const pre = new nn.Linear(4, 6);
  const block = new Block();
  for (const p of [...pre.parameters(), ...block.parameters()]) {
    p.impl = randn([...p.shape], { generator: g }).mul(0.4).impl;
  }
  const x = randn([5, 4], { generator: g });
  return { pre, block, x };
}

const flat = (t: Tensor | null) => Array.from((t as Tensor).data() as Float32Array);

function close(a: number[], b: number[]): void {
  a.forEach((v, i) => expect(Math.abs(v - b[i]!)).toBeLessThanOrEqual(1e-6 * (1 + Math.abs(b[i]!))));
}

describe("nn.checkpoint", () => {
  it("gives the plain run's gradients, recomputing the forward in backward", () => {
    const plain = make();
    manualSeed(9);
    plain.block.call(plain.pre.forward(plain.x)).pow(2).sum().backward();
    const ck = make();
    nn.checkpoint(ck.block);
    manualSeed(9);
    const y = ck.block.call(ck.pre.forward(ck.x));
    expect(y.gradFn?.name).toBe("CheckpointBackward");
    expect(ck.block.calls).toBe(1);
    y.pow(2).sum().backward();
    expect(ck.block.calls).toBe(2); // the recomputation
    close(flat(ck.block.fc1.weight.grad), flat(plain.block.fc1.weight.grad));
    close(flat(ck.block.fc2.bias!.grad), flat(plain.block.fc2.bias!.grad));
    close(flat(ck.pre.weight.grad), flat(plain.pre.weight.grad)); // through the input
  });

  it("keeps no graph inside: the block's outputs have one node whose edges are the input and the parameters", () => {
    const { pre, block, x } = make();
    nn.checkpoint(block);
    const y = block.call(pre.forward(x));
    const next = (y.gradFn as unknown as { nextFunctions: readonly unknown[] }).nextFunctions;
    expect(next.length).toBe(1 + block.parameters().length);
    // The input comes from pre's last op; the parameters are leaves (null, as PyTorch's).
    expect(next[0]).not.toBeNull();
    expect(next.slice(1).every((n) => n === null)).toBe(true);
  });

  it("a second backward without retainGraph is refused; eval / noGrad run the module as usual", () => {
    const { pre, block, x } = make();
    nn.checkpoint(block);
    const loss = block.call(pre.forward(x)).sum();
    loss.backward();
    expect(() => loss.backward()).toThrow(/second time|retainGraph/);
    nn.uncheckpoint(block);
    const y = block.call(pre.forward(x));
    expect(y.gradFn?.name).not.toBe("CheckpointBackward");
  });
});
