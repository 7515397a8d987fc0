// Functional transforms (tensor/func.ts; torch.func / JAX): grad, valueAndGrad, vjp and jvp
// against closed-form derivatives, their composition (grad of grad, jvp of a grad), argnums
// and hasAux, the errors they raise, and the same transforms inside compile() (one program)
// and under lazy(). Also the aliasing case every mode must get right: one value passed as both
// operands of an op (x * x), which a traced or lazy graph holds as ONE instruction.

import { describe, expect, it } from "vitest";
import {
  autograd,
  compile,
  defineOp,
  func,
  lazy,
  nn,
  OpError,
  tensor,
  type Tensor,
} from "../../index.ts";
import { p } from "../../tensor/args.ts";

const arr = (t: Tensor) => Array.from(t.data() as Float32Array);

function close(got: readonly number[], want: readonly number[], tol = 1e-5): void {
  expect(got.length).toBe(want.length);
  got.forEach((v, i) => expect(Math.abs(v - want[i]!)).toBeLessThanOrEqual(tol * (1 + Math.abs(want[i]!))));
}

const xs = [0.5, -1.25, 2];
const cube = (x: Tensor) => x.mul(x).mul(x).sum(); // d/dx = 3x^2, d2/dx2 = 6x

describe("func transforms", () => {
  it("grad: the gradient of a scalar function; grad of grad: the second derivative", () => {
    const x = tensor(xs);
    close(arr(func.grad(cube)(x) as Tensor), xs.map((v) => 3 * v * v));
    const second = func.grad((y: Tensor) => (func.grad(cube)(y) as Tensor).sum());
    close(arr(second(x) as Tensor), xs.map((v) => 6 * v));
    // The input is not changed and does not start requiring grad.
    expect(x.requiresGrad).toBe(false);
    expect(x.grad).toBeNull();
  });

  it("valueAndGrad with argnums and hasAux", () => {
    const a = tensor(xs);
    const b = tensor([3, 4, 5]);
    const f = (p: Tensor, q: Tensor) => [p.mul(q).sum(), p.add(q)] as const;
    const [[value, aux], gs] = func.valueAndGrad(f, { argnums: [0, 1], hasAux: true })(a, b) as [
      [Tensor, Tensor],
      Tensor[],
    ];
    expect(value.item()).toBeCloseTo(0.5 * 3 - 1.25 * 4 + 2 * 5, 5);
    expect(value.requiresGrad).toBe(false);
    close(arr(aux), [3.5, 2.75, 7]);
    close(arr(gs[0]!), [3, 4, 5]);
    close(arr(gs[1]!), xs);
    // A single argnum gives one tensor; an unused argument's gradient is zeros.
    const g1 = func.grad((p: Tensor, _q: Tensor) => p.sum(), { argnums: 1 })(a, b) as Tensor;
    expect(arr(g1)).toEqual([0, 0, 0]);
  });

  it("vjp: pulls cotangents back, more than once; several outputs", () => {
    const x = tensor(xs);
    const [out, pull] = func.vjp((y: Tensor) => [y.exp(), y.mul(2)], x);
    close(arr((out as Tensor[])[0]!), xs.map(Math.exp));
    const g = pull([tensor([1, 0, 2]), tensor([1, 1, 1])])[0]!;
    close(arr(g), xs.map((v, i) => [1, 0, 2][i]! * Math.exp(v) + 2));
    const again = pull([tensor([0, 0, 0]), tensor([1, 1, 1])])[0]!;
    close(arr(again), [2, 2, 2]);
    expect(() => pull([tensor([1, 1])])).toThrow(/expected 2 cotangent/);
  });

  it("jvp: the directional derivative (forward mode), and jvp of a gradient (a Hessian-vector product)", () => {
    const x = tensor(xs);
    const t = tensor([1, -2, 0.5]);
    const f = (y: Tensor) => y.mul(y).sin();
    const [y, jt] = func.jvp(f, [x], [t]) as [Tensor, Tensor];
    close(arr(y), xs.map((v) => Math.sin(v * v)));
    close(arr(jt), xs.map((v, i) => Math.cos(v * v) * 2 * v * [1, -2, 0.5][i]!));
    // Hessian of cube is diag(6x): H t = 6 x t.
    const [, hvp] = func.jvp((y2: Tensor) => func.grad(cube)(y2) as Tensor, [x], [t]) as [Tensor, Tensor];
    close(arr(hvp), xs.map((v, i) => 6 * v * [1, -2, 0.5][i]!));
  });

  it("says what is wrong: a non-scalar value, an integer input, a tangent of another shape", () => {
    const x = tensor(xs);
    expect(() => func.grad((y: Tensor) => y.mul(2))(x)).toThrow(OpError);
    expect(() => func.grad((y: Tensor) => y.mul(2))(x)).toThrow(/one-element tensor.*shape \[3\]/);
    expect(() => func.grad((y: Tensor) => y.sum())(tensor([1, 2], { dtype: "int32" }))).toThrow(
      /floating-point/,
    );
    expect(() => func.jvp(cube, [x], [tensor([1, 2])])).toThrow(/tangent 0 must be a tensor of primal 0's shape \[3\]/);
    expect(() => func.grad(cube, { argnums: 2 })(x)).toThrow(/argnums 2 is out of range/);
  });

  it("inside compile(): one program computing the gradient, right for every input", () => {
    const g = compile((x: Tensor) => func.grad(cube)(x) as Tensor);
    close(arr(g(tensor(xs))), xs.map((v) => 3 * v * v));
    close(arr(g(tensor([2, 2, 2]))), [12, 12, 12]);
    expect(g.stats.mode).toBe("graph");
    expect(g.stats.compiles).toBe(1);
    // cube is scalar-valued: its jvp is the scalar <3x^2, t>.
    const h = compile((x: Tensor, t: Tensor) => func.jvp(cube, [x], [t])[1] as Tensor);
    close(arr(h(tensor(xs), tensor([1, 1, 1]))), [xs.reduce((a, v) => a + 3 * v * v, 0)]);
  });

  it("under lazy(): the same gradients", () => {
    const got = lazy(() => arr(func.grad(cube)(tensor(xs)) as Tensor));
    close(got, xs.map((v) => 3 * v * v));
  });
});

describe("one value as two operands (x * x)", () => {
  // A traced or lazy graph holds x once: each operand position must still get its own gradient
  // (d(x*x)/dx = 2x, not 4x).
  const square = (a: Tensor) => {
    const y = a.detach().requiresGrad_();
    return autograd.grad(y.mul(y).sum(), y)[0]!;
  };
  const mixed = (a: Tensor) => {
    const y = a.detach().requiresGrad_();
    return autograd.grad(y.mul(a).sum(), y)[0]!; // a is y's value, but only y requires grad
  };
  for (const [name, run] of [
    ["eager", (f: (a: Tensor) => Tensor, x: Tensor) => arr(f(x))],
    ["lazy", (f: (a: Tensor) => Tensor, x: Tensor) => lazy(() => arr(f(x)))],
    ["compiled", (f: (a: Tensor) => Tensor, x: Tensor) => arr(compile(f)(x))],
  ] as const) {
    it(name, () => {
      close(run(square, tensor(xs)), xs.map((v) => 2 * v));
      close(run(mixed, tensor(xs)), xs);
    });
  }
});

describe("autograd.gradCheck", () => {
  it("holds for a composite function (f64 rules vs differences, float32 autograd vs f64)", () => {
    const x = tensor([[0.3, -0.2, 0.5], [1.1, 0.4, -0.7]]).requiresGrad_();
    const w = tensor([[0.2, -0.5], [0.1, 0.3], [-0.4, 0.6]]).requiresGrad_();
    const f = (a: Tensor, b: Tensor) => nn.functional.softmax(a.matmul(b).tanh(), -1).mul(a.sum(1, true));
    expect(autograd.gradCheck(f, [x, w])).toBe(true);
    // Only the inputs that require grad are checked; integers never are.
    const idx = tensor([1, 0], { dtype: "int64" });
    expect(autograd.gradCheck((a: Tensor, i: Tensor) => a.indexSelect(0, i).exp(), [x, idx])).toBe(true);
    // sort and prod: their own derivatives (no IR rule yet), checked against the differences.
    expect(autograd.gradCheck((a: Tensor) => [a.sort(1).values.mul(a.prod(1, true))], [x])).toBe(true);
  });

  it("catches an op whose own derivative is wrong, naming the input and element", () => {
    // 2x as the op's value, but a vjp that gives 3·ct: the eager (float32) check fails.
    const twice = defineOp({
      name: "testWrongVjpTwice",
      signature: [p.tensor("input")] as const,
      lower: (b, [x]) => b.add(x!, x!),
      vjp: (b, _inputs, _outputs, [ct]) => [b.multiply(ct!, b.broadcast(b.scalar("f32", 3), [...(ct!.shape as unknown as { dims: number[] }).dims], []))],
    });
    const x = tensor([0.5, -1, 2]).requiresGrad_();
    expect(() => autograd.gradCheck((a: Tensor) => twice(a), [x])).toThrow(autograd.GradCheckError);
    expect(() => autograd.gradCheck((a: Tensor) => twice(a), [x])).toThrow(
      /input 0, element 0: autograd \(float32\) gives .*the f64 derivative/,
    );
    expect(autograd.gradCheck((a: Tensor) => twice(a), [x], { raiseException: false })).toBe(false);
    // The IR rules alone (f64) are right for it.
    expect(autograd.gradCheck((a: Tensor) => twice(a), [x], { checkEager: false })).toBe(true);
  });
});
