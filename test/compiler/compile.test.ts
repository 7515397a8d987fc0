// compile() on functions and small modules: results equal eager execution, a second call with
// the same shapes runs the cached program (no trace), guards fail exactly when they should
// (shape, dtype, primitive arguments, argument structure, train()/eval(), a changed config
// value, a changed closure variable) with the right reason text, loadStateDict after compiling
// changes the results without recompiling, two instances share one program, recompile limits
// and errorOnRecompile, and bad input (non-functions, errors thrown by user code, throwing
// guards) leaves no half-made entry. Eager results are the reference throughout.

import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { compile, RecompileError } from "../../compiler/index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import {
  lazyStats,
  nn,
  ops,
  randn,
  type Tensor,
  tensor,
} from "../../index.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

function expectClose(actual: unknown, expected: unknown, tol = 1e-5): void {
  const a = actual as Tensor;
  const e = expected as Tensor;
  expect(a.dtype).toBe(e.dtype);
  expect(a.shape).toEqual(e.shape);
  const x = Array.from(a.data() as Float32Array);
  const y = Array.from(e.data() as Float32Array);
  for (let i = 0; i < x.length; i++) {
    expect(Math.abs(x[i]! - y[i]!)).toBeLessThanOrEqual(tol * (1 + Math.abs(y[i]!)));
  }
}

class Net extends nn.Module {
  fc1 = new nn.Linear(4, 8);
  fc2 = new nn.Linear(8, 3);
  drop = new nn.Dropout(0.5);
  scale = 2;

  forward(x: Tensor): Tensor {
    return this.fc2.call(this.drop.call(this.fc1.call(x).relu())).mul(this.scale);
  }
}

describe("compile(fn)", () => {
  it("matches eager and runs the cached program on the second call", () => {
    const fn = (x: Tensor, y: Tensor) => x.mul(y).add(1).relu().sum(1);
    const fast = compile(fn);
    const x = randn(3, 5);
    const y = randn(3, 5);
    expectClose(fast(x, y), fn(x, y));
    const recorded = lazyStats().opsRecorded;
    const x2 = randn(3, 5);
    expectClose(fast(x2, y), fn(x2, y));
    // No user JS ran on the second call: nothing was recorded by lazy mode.
    expect(lazyStats().opsRecorded).toBe(recorded);
    expect(fast.stats).toMatchObject({ calls: 2, compiles: 1, cacheHits: 1, mode: "graph" });
    expect(fast.stats.recompiles).toEqual([]);
  });

  it("recompiles on a new shape, naming the dim, and on a new dtype", () => {
    const fast = compile((x: Tensor) => x.exp().sum());
    fast(randn(2, 128));
    fast(randn(2, 129));
    fast(randn(2, 129).to("float16"));
    fast(randn(2, 129, 1));
    const reasons = fast.stats.recompiles.map((r) => r.reason);
    expect(reasons[0]).toBe(
      "x.shape[1] was 128, now 129: dim 1 of x is now dynamic (<=256, bucket pow2)",
    );
    expect(reasons[1]).toBe("x.dtype was float32, now float16");
    expect(reasons[2]).toMatch(/^x\.ndim was 2, now 3/);
    expect(fast.stats.compiles).toBe(4);
    expect(fast.stats.recompiles[0]!.guard).toEqual({
      kind: "shape",
      path: "x",
      expected: [2, 128],
    });
  });

  it("guards primitive arguments by value and nested argument structure", () => {
    const fn = (x: Tensor, opts: { scale: number; shift?: Tensor }) => {
      const y = x.mul(opts.scale);
      return opts.shift ? y.add(opts.shift) : y;
    };
    const fast = compile(fn);
    const x = randn(4);
    const shift = randn(4);
    expectClose(fast(x, { scale: 2 }), fn(x, { scale: 2 }));
    expectClose(fast(x, { scale: 3 }), fn(x, { scale: 3 }));
    expectClose(fast(x, { scale: 3, shift }), fn(x, { scale: 3, shift }));
    expect(fast.stats.recompiles.map((r) => r.reason)).toEqual([
      "opts.scale was 2, now 3",
      `Object.keys(opts) was "scale", now "scale,shift"`,
    ]);
    // Back to an earlier structure: an existing entry answers.
    const x2 = randn(4);
    expectClose(fast(x2, { scale: 2 }), fn(x2, { scale: 2 }));
    expect(fast.stats.compiles).toBe(3);
  });

  it("returns nested outputs (arrays, objects, passthrough inputs, primitives)", () => {
    const fn = (x: Tensor, n: number) => ({
      out: [x.add(1), x.mul(2)],
      same: x,
      n: n + 1,
      label: "ok",
      first: x.add(1),
    });
    const fast = compile(fn);
    const x = randn(2, 2);
    for (let i = 0; i < 2; i++) {
      const got = fast(x, 5) as ReturnType<typeof fn>;
      const want = fn(x, 5);
      expectClose(got.out[0], want.out[0]);
      expectClose(got.out[1], want.out[1]);
      expectClose(got.first, want.first);
      expect(got.same).toBe(x);
      expect(got.n).toBe(6);
      expect(got.label).toBe("ok");
    }
    expect(fast.stats.cacheHits).toBe(1);
  });

  it("recompiles when a closure variable changes, naming it", () => {
    let factor = 2;
    const fast = compile((x: Tensor) => x.mul(factor));
    const x = tensor([1, 2, 3]);
    expect(fast(x).toArray()).toEqual([2, 4, 6]);
    expect(fast(x).toArray()).toEqual([2, 4, 6]);
    factor = 5;
    expect(fast(x).toArray()).toEqual([5, 10, 15]);
    expect(fast.stats.recompiles.map((r) => r.reason)).toEqual(["factor was 2, now 5"]);
  });

  it("guards a const closure object's fields", () => {
    const config = { eps: 1, mode: "add" };
    const fast = compile((x: Tensor) => (config.mode === "add" ? x.add(config.eps) : x));
    const x = tensor([1, 2]);
    expect(fast(x).toArray()).toEqual([2, 3]);
    config.eps = 10;
    expect(fast(x).toArray()).toEqual([11, 12]);
    expect(fast.stats.recompiles.map((r) => r.reason)).toEqual(["config.eps was 1, now 10"]);
  });

  it("errorOnRecompile throws the reason; recompileLimit falls back to eager once warned", () => {
    const strict = compile((x: Tensor) => x.neg(), { errorOnRecompile: true });
    strict(randn(2));
    expect(() => strict(randn(3))).toThrow(RecompileError);
    expect(() => strict(randn(3))).toThrow(/x\.shape\[0\] was 2, now 3/);

    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const fn = (x: Tensor) => x.add(1);
      const limited = compile(fn, { recompileLimit: 2, dynamic: false });
      for (let n = 2; n <= 6; n++) {
        const x = randn(n);
        expectClose(limited(x), fn(x));
      }
      expect(limited.stats.compiles).toBe(2);
      expect(limited.stats.fallbacks.length).toBe(3);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]![0])).toMatch(
        /recompile limit \(2\).*x\.shape\[0\] was 3, now 4/,
      );
    } finally {
      warn.mockRestore();
    }
  });
});

describe("compile(module)", () => {
  it("matches eager, guards train()/eval() and a config value", () => {
    const net = new Net().eval();
    const fast = compile(net);
    const x = randn(5, 4);
    expectClose(fast(x), net.call(x));
    expectClose(fast(x), net.call(x));
    expect(fast.stats).toMatchObject({ compiles: 1, cacheHits: 1 });
    net.scale = 3;
    expectClose(fast(x), net.call(x));
    net.train();
    fast(x);
    const reasons = fast.stats.recompiles.map((r) => r.reason);
    expect(reasons[0]).toBe("this.scale was 2, now 3");
    expect(reasons[1]).toMatch(/^this(\.\w+)?\.training was false, now true$/);
  });

  it("loadStateDict after compiling changes the results without recompiling", () => {
    const a = new Net().eval();
    const b = new Net().eval();
    const fast = compile(a);
    const x = randn(2, 4);
    const before = fast(x);
    a.loadStateDict(b.stateDict());
    const after = fast(x);
    expectClose(after, b.call(x));
    const data = (t: Tensor) => Array.from(t.data() as Float32Array);
    expect(data(after)).not.toEqual(data(before));
    expect(fast.stats).toMatchObject({ compiles: 1, recompiles: [] });
  });

  it("two instances of one architecture share the compiled program", () => {
    const cache = new ProgramCache({ disk: false });
    const fa = compile(new Net().eval(), { cache });
    const fb = compile(new Net().eval(), { cache });
    fa(randn(2, 4));
    fb(randn(2, 4));
    expect(fa.stats.programCacheHits).toBe(0);
    expect(fb.stats.programCacheHits).toBe(1);
    expect(cache.stats.misses).toBe(1);
  });

  it("replays writes of tensors to modules (BatchNorm running statistics)", () => {
    class BN extends nn.Module {
      bn = new nn.BatchNorm2d(3);
      forward(x: Tensor): Tensor {
        return this.bn.call(x);
      }
    }
    const eager = new BN();
    const compiled = new BN();
    const fast = compile(compiled);
    for (let i = 0; i < 3; i++) {
      const x = randn(2, 3, 4, 4);
      expectClose(fast(x), eager.call(x));
      expectClose(compiled.bn.running_mean, eager.bn.running_mean);
      expectClose(compiled.bn.running_var, eager.bn.running_var);
    }
    expect(fast.stats).toMatchObject({ compiles: 1, cacheHits: 2, mode: "graph" });
  });
});

describe("closures over modules, nesting, cache options", () => {
  it("a module held by a const closure variable: weights are inputs, train() is guarded", () => {
    const net = new Net().eval();
    const head = (x: Tensor) => net.call(x).sum(1);
    const fast = compile(head);
    const x = randn(3, 4);
    expectClose(fast(x), head(x));
    net.loadStateDict(new Net().stateDict());
    expectClose(fast(x), head(x));
    expect(fast.stats).toMatchObject({ compiles: 1, cacheHits: 1 });
    net.train();
    fast(x);
    expect(fast.stats.recompiles[0]!.reason).toMatch(/^net(\.\w+)*\.training was false, now true$/);
  });

  it("a compiled function called inside another's trace is inlined", () => {
    const inner = compile((x: Tensor) => x.mul(3));
    const outer = compile((x: Tensor) => inner(x).add(1));
    const x = tensor([1, 2]);
    expect(outer(x).toArray()).toEqual([4, 7]);
    expect(outer(tensor([0, 1])).toArray()).toEqual([1, 4]);
    expect(outer.stats).toMatchObject({ compiles: 1, cacheHits: 1, mode: "graph" });
    expect(inner.stats.compiles).toBe(0);
  });

  it("cache: off compiles every program anew; memory shares within the process", () => {
    const off = compile((x: Tensor) => x.add(2), { cache: "off" });
    off(tensor([1]));
    expect(off.stats.programCacheHits).toBe(0);
    const a = compile((x: Tensor) => x.sub(7).abs(), { cache: "memory" });
    const b = compile((x: Tensor) => x.sub(7).abs(), { cache: "memory" });
    a(tensor([1]));
    b(tensor([1]));
    expect(b.stats.programCacheHits).toBe(1);
    expect(() => compile((x: Tensor) => x, { cache: "bogus" as never })).toThrow(/cache must be/);
  });
});

describe("bad input", () => {
  it("rejects non-functions and bad options", () => {
    expect(() => compile(42 as never)).toThrow(/expected a function or an nn\.Module, got 42/);
    expect(() => compile((x: Tensor) => x, { recompileLimit: 0 })).toThrow(/recompileLimit/);
    expect(() => compile((x: Tensor) => x, { backend: "nope" })).toThrow(/unknown backend/);
  });

  it("an error in user code surfaces unchanged and leaves no entry", () => {
    const boom = new Error("boom");
    let fail = true;
    const fast = compile((x: Tensor) => {
      if (fail) throw boom;
      return x.add(1);
    });
    expect(() => fast(randn(2))).toThrow(boom);
    expect(fast.stats.entries).toBe(0);
    fail = false;
    expect(fast(tensor([1, 2])).toArray()).toEqual([2, 3]);
    expect(fast.stats.entries).toBe(1);
  });

  it("a wrong kind of argument fails like eager code does, with no entry", () => {
    const fn = (x: Tensor, y: Tensor) => ops.matmul(x, y);
    const fast = compile(fn);
    let eagerError: unknown;
    try {
      fn(randn(2, 3), randn(4, 5));
    } catch (e) {
      eagerError = e;
    }
    expect(() => fast(randn(2, 3), randn(4, 5))).toThrow((eagerError as Error).message);
    expect(() => fast(randn(2, 3), 7 as never)).toThrow();
    expect(fast.stats.entries).toBe(0);
    const x = randn(2, 3);
    const y = randn(3, 4);
    expectClose(fast(x, y), fn(x, y));
    expect(fast.stats.entries).toBe(1);
  });

  it("a throwing guard counts as failing; the retrace surfaces the error, no entry is made", () => {
    let throwing = false;
    const opts = {
      get k(): number {
        if (throwing) throw new Error("k unavailable");
        return 2;
      },
    };
    const fn = (x: Tensor, o: { k: number }) => x.mul(o.k);
    const fast = compile(fn);
    const x = randn(3);
    expectClose(fast(x, opts), fn(x, opts));
    throwing = true;
    expect(() => fast(x, opts)).toThrow("k unavailable");
    expect(fast.stats.entries).toBe(1);
    throwing = false;
    expectClose(fast(x, opts), fn(x, opts));
    expect(fast.stats).toMatchObject({ compiles: 1, cacheHits: 1 });
  });
});
