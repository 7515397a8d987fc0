// Eager autograd (tensor/autograd.ts): PyTorch's model over the IR's derivative rules. Values are
// checked against closed forms (the per-rule checks against finite differences live in
// test/passes/autodiff*.test.ts); what is asserted here is the engine: which tensors get which
// gradient, accumulation, broadcasting, the graph's lifetime, grad modes, higher order, errors,
// and that eager, lazy and the interpreter agree.

import { afterEach, describe, expect, it } from "vitest";
import {
  autograd,
  defineOp,
  detectAnomaly,
  enableGrad,
  isGradEnabled,
  lazy,
  nn,
  noGrad,
  OpError,
  ops,
  Parameter,
  setEagerBackend,
  tensor,
  type Tensor,
} from "../../index.ts";
import { backendNames } from "../../runtime/index.ts";
import { p } from "../../tensor/args.ts";

afterEach(() => setEagerBackend(undefined));

const close = (t: Tensor | null, want: number[] | number[][], tol = 1e-5) => {
  expect(t).not.toBeNull();
  const got = (t!.toArray() as number[] | number[][]).flat(3) as number[];
  const w = (want as number[][]).flat(3) as number[];
  expect(got.length).toBe(w.length);
  got.forEach((v, i) => expect(Math.abs(v - w[i]!)).toBeLessThanOrEqual(tol * (1 + Math.abs(w[i]!))));
};

describe("backward", () => {
  it("matmul, exp and sum: the chain rule, into every leaf", () => {
    const x = tensor([[1, 2], [3, 4]]).requiresGrad_();
    const w = tensor([[0.5, -1], [0.2, 0.25]]).requiresGrad_();
    const y = x.matmul(w).exp().sum();
    expect(y.gradFn?.name).toBe("SumBackward");
    y.backward();
    // dy/dx = exp(xw) w^T, dy/dw = x^T exp(xw)
    const e = [[Math.exp(0.9), Math.exp(-0.5)], [Math.exp(2.3), Math.exp(-2)]];
    close(x.grad, [
      [e[0]![0]! * 0.5 - e[0]![1]!, e[0]![0]! * 0.2 + e[0]![1]! * 0.25],
      [e[1]![0]! * 0.5 - e[1]![1]!, e[1]![0]! * 0.2 + e[1]![1]! * 0.25],
    ]);
    close(w.grad, [
      [e[0]![0]! + 3 * e[1]![0]!, e[0]![1]! + 3 * e[1]![1]!],
      [2 * e[0]![0]! + 4 * e[1]![0]!, 2 * e[0]![1]! + 4 * e[1]![1]!],
    ]);
  });

  it("a broadcast operand's gradient is summed back to its shape; a JS scalar gets none", () => {
    const x = tensor([[1, 2, 3], [4, 5, 6]]).requiresGrad_();
    const b = tensor([10, 20, 30]).requiresGrad_();
    x.add(b).mul(2).sum().backward();
    expect(b.grad!.shape).toEqual([3]);
    close(b.grad, [4, 4, 4]);
    close(x.grad, [[2, 2, 2], [2, 2, 2]]);
  });

  it("fan-out adds the gradients of every use", () => {
    const x = tensor([1, 2, 3]).requiresGrad_();
    const y = x.mul(x).add(x.exp()).sum();
    y.backward();
    close(x.grad, [1, 2, 3].map((v) => 2 * v + Math.exp(v)));
  });

  it("accumulates into .grad across backward calls, and zeroGrad-style reset works", () => {
    const x = tensor([1, -2]).requiresGrad_();
    x.mul(3).sum().backward();
    x.mul(x).sum().backward();
    close(x.grad, [3 + 2, 3 - 4]);
    x.grad = null;
    x.mul(5).sum().backward();
    close(x.grad, [5, 5]);
  });

  it("a non-scalar needs a gradient of its shape and dtype", () => {
    const x = tensor([1, 2, 3]).requiresGrad_();
    const y = x.mul(2);
    expect(() => y.backward()).toThrow(/implicit only for a one-element output.*\[3\]/);
    expect(() => y.backward(tensor([1, 1]))).toThrow(/gradient 0 has shape \[2\].*\[3\]/);
    y.backward(tensor([1, 0.5, -1]));
    close(x.grad, [2, 1, -2]);
  });

  it("frees the graph after backward unless retainGraph", () => {
    const x = tensor([1, 2]).requiresGrad_();
    const y = x.exp().sum();
    y.backward();
    expect(() => y.backward()).toThrow(/second time.*retainGraph: true/);
    const z = x.exp().sum();
    x.grad = null;
    z.backward(undefined, { retainGraph: true });
    z.backward();
    close(x.grad, [2 * Math.exp(1), 2 * Math.exp(2)]);
  });

  it("differentiates the values the op saw, not a later update of the leaf", () => {
    const w = new Parameter(tensor([1, 2]));
    const y = w.mul(w).sum();
    w.impl = tensor([100, 200]).impl; // what an optimizer step does
    y.backward();
    close(w.grad, [2, 4]);
  });

  it("backward({inputs}) accumulates only into the named leaves", () => {
    const a = tensor([1, 2]).requiresGrad_();
    const b = tensor([3, 4]).requiresGrad_();
    a.mul(b).sum().backward(undefined, { inputs: [b] });
    expect(a.grad).toBeNull();
    close(b.grad, [1, 2]);
  });
  it("several outputs of one op: a gradient through the values, none through the indices", () => {
    const x = tensor([[1, 5, 3], [7, 2, 4]]).requiresGrad_();
    const [values, indices] = x.max(1) as unknown as [Tensor, Tensor];
    expect(indices.requiresGrad).toBe(false);
    values.mul(tensor([2, 3])).sum().backward();
    close(x.grad, [[0, 2, 0], [3, 0, 0]]);
  });

  it("max(dim, keepdim) and min over the whole tensor: the gradient goes to the returned index", () => {
    const x = tensor([[1, 5, 5], [7, 2, 7]]).requiresGrad_();
    const [v] = x.max(1, true) as unknown as [Tensor, Tensor];
    v.sum().backward();
    // Ties: PyTorch's max(dim) returns (and differentiates) one index per row.
    const g = x.grad!.toArray() as number[][];
    expect(g.map((r) => r.reduce((a, b) => a + b, 0))).toEqual([1, 1]);
    const [, i] = x.max(1, true) as unknown as [Tensor, Tensor];
    (i.toArray() as number[][]).forEach(([k], r) => expect(g[r]![k!]).toBe(1));
    const y = tensor([3, -1, 2]).requiresGrad_();
    y.min().mul(4).backward();
    close(y.grad, [0, 4, 0]);
  });

  it("relu and relu6 have PyTorch's gradients at their kinks (the ops' own vjp)", () => {
    const x = tensor([-1, 0, 0.5, 6, 7]).requiresGrad_();
    x.relu().sum().backward();
    close(x.grad, [0, 0, 1, 1, 1]);
    x.grad = null;
    ops.relu6(x).sum().backward();
    close(x.grad, [0, 0, 1, 0, 0]);
    // Through createGraph: relu's derivative is itself differentiable (zero second derivative).
    const [g] = autograd.grad(x.relu().mul(x).sum(), x, undefined, { createGraph: true });
    close(g!, [0, 0, 1, 12, 14]);
  });

  it("piecewise-constant ops pass a zero gradient, as PyTorch's", () => {
    const x = tensor([0.5, -1.5, 2.2]).requiresGrad_();
    x.floor().add(x.round()).add(x.sign()).add(x.mul(2)).sum().backward();
    close(x.grad, [2, 2, 2]);
  });

});

describe("leaves, modes and detach", () => {
  it("requiresGrad: leaves, results, ints and detach", () => {
    const x = tensor([1, 2]);
    expect(x.requiresGrad).toBe(false);
    expect(x.isLeaf).toBe(true);
    x.requiresGrad = true;
    const y = x.mul(2);
    expect(y.requiresGrad).toBe(true);
    expect(y.isLeaf).toBe(false);
    expect(() => (y.requiresGrad = false)).toThrow(/cannot stop requiring grad.*detach/);
    const d = y.detach();
    expect(d.requiresGrad).toBe(false);
    expect(d.gradFn).toBeNull();
    expect(d.toArray()).toEqual([2, 4]);
    expect(() => tensor([1, 2], { dtype: "int32" }).requiresGrad_()).toThrow(
      /only floating-point tensors can require grad, got int32/,
    );
    // A comparison's bool result never requires grad.
    expect(x.gt(1).requiresGrad).toBe(false);
  });

  it("noGrad records nothing; enableGrad records inside it", () => {
    const x = tensor([1, 2]).requiresGrad_();
    expect(isGradEnabled()).toBe(true);
    const y = noGrad(() => {
      expect(isGradEnabled()).toBe(false);
      const inner = enableGrad(() => x.mul(3));
      expect(inner.requiresGrad).toBe(true);
      return x.mul(2);
    });
    expect(y.requiresGrad).toBe(false);
    expect(isGradEnabled()).toBe(true);
    expect(() => y.sum().backward()).toThrow(/does not require grad/);
  });

  it("retainGrad keeps a non-leaf's gradient", () => {
    const x = tensor([1, 2, 3]).requiresGrad_();
    const h = x.mul(2);
    h.retainGrad();
    const k = x.mul(4);
    h.mul(h).sum().add(k.sum()).backward();
    close(h.grad, [4, 8, 12]);
    expect(k.grad).toBeNull();
    close(x.grad, [8 + 4, 16 + 4, 24 + 4]);
  });

  it("Parameters require grad (floating point only); nn.Linear gets its gradients", () => {
    const lin = new nn.Linear(3, 2);
    expect(lin.weight.requiresGrad).toBe(true);
    expect(new Parameter(tensor([1, 2], { dtype: "int64" })).requiresGrad).toBe(false);
    const xin = tensor([[1, 2, 3], [0, -1, 2]]);
    const out = lin.forward(xin);
    out.sum().backward();
    // d(sum(x W^T + b))/dW[j, i] = sum over rows of x[:, i]; d/db = rows.
    close(lin.weight.grad, [[1, 1, 5], [1, 1, 5]]);
    close(lin.bias!.grad, [2, 2]);
  });
});

describe("autograd.grad", () => {
  it("returns gradients without touching .grad, also for an intermediate input", () => {
    const x = tensor([1, 2]).requiresGrad_();
    const h = x.exp();
    const y = h.mul(h).sum();
    const [gx, gh] = autograd.grad(y, [x, h]);
    close(gh!, [2 * Math.exp(1), 2 * Math.exp(2)]);
    close(gx!, [2 * Math.exp(2), 2 * Math.exp(4)]);
    expect(x.grad).toBeNull();
  });

  it("an unused input is an error unless allowUnused", () => {
    const x = tensor([1, 2]).requiresGrad_();
    const z = tensor([3]).requiresGrad_();
    const y = x.sum();
    expect(() => autograd.grad(y, [x, z], undefined, { retainGraph: true })).toThrow(
      /input 1 was not used.*allowUnused/,
    );
    const [gx, gz] = autograd.grad(y, [x, z], undefined, { allowUnused: true });
    close(gx!, [1, 1]);
    expect(gz).toBeNull();
  });

  it("createGraph gives higher-order derivatives: d2/dx2 of x^3 = 6x", () => {
    const x = tensor([1, 2, -3]).requiresGrad_();
    const y = x.mul(x).mul(x).sum();
    const [g] = autograd.grad(y, x, undefined, { createGraph: true });
    close(g!, [3, 12, 27]);
    expect(g!.requiresGrad).toBe(true);
    const [gg] = autograd.grad(g!.sum(), x);
    close(gg!, [6, 12, -18]);
  });

  it("createGraph through tanh: the second derivative", () => {
    const xs = [0.3, -1.2];
    const x = tensor(xs).requiresGrad_();
    const [g] = autograd.grad(x.tanh().sum(), x, undefined, { createGraph: true });
    g!.sum().backward();
    close(x.grad, xs.map((v) => -2 * Math.tanh(v) * (1 - Math.tanh(v) ** 2)));
  });
});

describe("errors", () => {
  const bits = defineOp({
    name: "testBitsRoundTrip",
    signature: [p.tensor("input")] as const,
    lower: (b, [x]) => b.bitcastConvert(b.bitcastConvert(x!, "s32"), "f32"),
  });

  it("an op without a derivative is named, with the user's line", () => {
    const x = tensor([1, 2]).requiresGrad_();
    const y = bits(x).sum();
    let err: unknown;
    try {
      y.backward();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(OpError);
    const msg = (err as Error).message;
    expect(msg).toMatch(/TestBitsRoundTripBackward: cannot differentiate 'testBitsRoundTrip'/);
    expect(msg).toMatch(/no derivative for bitcast-convert/);
    expect(msg).toMatch(/detectAnomaly/);
    expect(msg).toMatch(/autograd\.test\.ts:\d+:\d+/);
  });

  it("under detectAnomaly the message names the line that ran the op", () => {
    const x = tensor([1, 2]).requiresGrad_();
    const y = detectAnomaly(() => bits(x).sum());
    expect(() => y.backward()).toThrow(/the op ran at .*autograd\.test\.ts:\d+/);
  });
});

describe("the same gradients in every mode", () => {
  const program = (x: Tensor, w: Tensor) =>
    x.matmul(w).tanh().mul(x.sum(1, true)).softmax(-1).log().mean();

  const grads = () => {
    const x = tensor([[0.1, -0.4, 0.3], [0.9, 0.2, -0.5]]).requiresGrad_();
    const w = tensor([[0.5, -0.2], [0.1, 0.4], [-0.3, 0.8]]).requiresGrad_();
    program(x, w).backward();
    return [x.grad!.toArray() as number[][], w.grad!.toArray() as number[][]];
  };

  it("eager on the interpreter, js and native, and lazy, agree", () => {
    setEagerBackend("interpreter");
    const ref = grads();
    // native where this machine has it (not under KILN_NATIVE=0)
    for (const backend of ["js", "native"].filter((b) => backendNames().includes(b))) {
      setEagerBackend(backend);
      const got = grads();
      got.forEach((g, k) => close(tensor(g), ref[k]!, 1e-5));
    }
    setEagerBackend(undefined);
    const lz = lazy(() => grads());
    lz.forEach((g, k) => close(tensor(g), ref[k]!, 1e-5));
  });
});
