// Lazy mode (tensor/lazy.ts): random chains of elementwise ops and reductions give values
// bit-identical to eager execution (the eager one-op programs are the reference: the same
// lowerings, run op by op), on the default backend and the interpreter, in float32 and
// float16; the same step twice compiles once (also on new data and new scalar values); the
// tensors a scope returns are computed by one program; printing and eager use realize lazy
// tensors; concrete tensors enter graphs as parameters; a bad op fails when it is recorded,
// naming the op; nested scopes, the global switch, deep chains cut at maxDepth, and the kernel
// count of a softmax-like chain (one fused kernel). A memory-only program cache keeps the
// tests off the disk.

import { inspect } from "node:util";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { fusionSummary } from "../../passes/index.ts";
import { backendNames, backendTier } from "../../runtime/index.ts";
import { EPS, PROGRAM_EPS_FACTOR, PROGRAM_ULPS, ulp } from "../../runtime/tiers.ts";
import { registeredOps, setEagerBackend } from "../../tensor/dispatch.ts";
import { baseMessage } from "../../util/user_frame.ts";
import {
  type Backend,
  ProgramCache,
  registerBackend,
  setDefaultProgramCache,
  UnsupportedError,
} from "../../runtime/index.ts";
import {
  clearLazyGraphs,
  isLazy,
  isPending,
  lastLazyGraph,
  lazy,
  lazyStats,
  manualSeed,
  OpError,
  ops,
  randn,
  realizeAll,
  resetLazyStats,
  setLazy,
  type Tensor,
  tensor,
  where,
} from "../../tensor/index.ts";

beforeAll(() => {
  setDefaultProgramCache(new ProgramCache({ disk: false }));
});
afterAll(() => {
  setDefaultProgramCache(undefined);
});
beforeEach(() => {
  resetLazyStats();
});
afterEach(() => {
  setLazy(false);
});

/**
 * Bit-for-bit comparisons of lazy with eager hold on an exact backend (js, the interpreter);
 * the blocks that make them run eager (and so lazy) on js whatever the default is. A
 * tolerance-tier default (native) has its own property below, within its tier.
 */
function onExactBackend(): void {
  beforeAll(() => setEagerBackend("js"));
  afterAll(() => setEagerBackend(undefined));
}

/** Element-by-element identity (Object.is: NaN equals NaN, -0 differs from +0). */
function expectIdentical(actual: Tensor, expected: Tensor): void {
  expect(actual.dtype).toBe(expected.dtype);
  expect(actual.shape).toEqual(expected.shape);
  const a = Array.from(actual.data() as Float32Array);
  const e = Array.from(expected.data() as Float32Array);
  const bad = a.findIndex((v, i) => !Object.is(v, e[i]));
  expect(bad, `element ${bad}: ${a[bad]} vs ${e[bad]}`).toBe(-1);
}

/** Within the tolerance tier's multi-op bound (runtime/tiers.ts) of the exact result. */
function expectWithinTier(actual: Tensor, expected: Tensor, inputs: readonly Tensor[]): void {
  expect(actual.dtype).toBe(expected.dtype);
  expect(actual.shape).toEqual(expected.shape);
  const a = actual.data() as Float32Array;
  const e = expected.data() as Float32Array;
  let scale = 0;
  for (const x of [e, ...inputs.map((t) => t.data() as Float32Array)]) {
    for (const v of x) if (Number.isFinite(v)) scale = Math.max(scale, Math.abs(v));
  }
  for (let i = 0; i < e.length; i++) {
    if (Number.isNaN(e[i]!) || !Number.isFinite(e[i]!)) {
      expect(Object.is(a[i], e[i]) || (Number.isNaN(a[i]!) && Number.isNaN(e[i]!)),
        `element ${i}: ${a[i]} vs ${e[i]}`).toBe(true);
      continue;
    }
    const bound = PROGRAM_ULPS * ulp(e[i]!, "f32") + PROGRAM_EPS_FACTOR * EPS.f32 * scale;
    expect(Math.abs(a[i]! - e[i]!), `element ${i}: ${a[i]} vs ${e[i]}`).toBeLessThanOrEqual(bound);
  }
}

/** Same dtype, shape and elements (Object.is, so bigints, booleans and NaN compare too). */
function sameValues(a: Tensor, b: Tensor): boolean {
  if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) return false;
  const u = a.data();
  const v = b.data();
  for (let i = 0; i < u.length; i++) if (!Object.is(u[i], v[i])) return false;
  return true;
}

/** x - mean(x), exp, normalized by the row sums: a softmax made of core ops. */
function softmaxLike(x: Tensor): Tensor {
  const e = x.sub(x.mean(-1, true)).exp();
  return e.div(e.sum(-1, true));
}

// ---- Random chains --------------------------------------------------------------------------

type Step =
  | { kind: "unary"; op: "neg" | "exp" | "relu"; i: number }
  | { kind: "binary"; op: "add" | "sub" | "mul" | "div" | "maximum"; i: number; j: number }
  | { kind: "scalar"; op: "add" | "mul" | "div"; i: number; s: number }
  | { kind: "reduce"; op: "sum" | "mean"; i: number; dim: 0 | 1 }
  | { kind: "where"; i: number; j: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant("unary" as const),
    op: fc.constantFrom("neg" as const, "exp" as const, "relu" as const),
    i: fc.nat(),
  }),
  fc.record({
    kind: fc.constant("binary" as const),
    op: fc.constantFrom(
      "add" as const,
      "sub" as const,
      "mul" as const,
      "div" as const,
      "maximum" as const,
    ),
    i: fc.nat(),
    j: fc.nat(),
  }),
  fc.record({
    kind: fc.constant("scalar" as const),
    op: fc.constantFrom("add" as const, "mul" as const, "div" as const),
    i: fc.nat(),
    s: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.double({ min: -4, max: 4, noNaN: true })),
  }),
  fc.record({
    kind: fc.constant("reduce" as const),
    op: fc.constantFrom("sum" as const, "mean" as const),
    i: fc.nat(),
    dim: fc.constantFrom(0 as const, 1 as const),
  }),
  fc.record({ kind: fc.constant("where" as const), i: fc.nat(), j: fc.nat() }),
);

/**
 * Runs a chain over a pool that starts with the inputs; every value stays broadcastable to
 * [3,5] (shapes [3,5], [1,5], [3,1], [5]). Returns the last two values.
 */
function runChain(inputs: readonly Tensor[], steps: readonly Step[]): Tensor[] {
  const pool = [...inputs];
  const at = (k: number) => pool[k % pool.length]!;
  for (const s of steps) {
    switch (s.kind) {
      case "unary":
        pool.push(at(s.i)[s.op]());
        break;
      case "binary":
        pool.push(at(s.i)[s.op](at(s.j)));
        break;
      case "scalar":
        pool.push(at(s.i)[s.op](s.s));
        break;
      case "reduce": {
        const x = at(s.i);
        if (x.ndim < 2) pool.push(x[s.op](-1, true).add(x));
        else pool.push(x[s.op](s.dim, true));
        break;
      }
      case "where":
        pool.push(where(at(s.i).lt(at(s.j)), at(s.i), at(s.j)));
        break;
      default: {
        const never: never = s;
        throw new Error(`unknown step ${String(never)}`);
      }
    }
  }
  return pool.slice(-2);
}

function chainInputs(seed: number, dtype: "float32" | "float16"): Tensor[] {
  manualSeed(seed);
  const xs = [randn(3, 5), randn(3, 1), randn(1, 5), randn(5)];
  return xs.map((x) => x.mul(3).to(dtype));
}

describe("lazy mode gives eager's values, bit for bit", () => {
  onExactBackend();
  it.each(["js", "interpreter"] as const)(
    "random float32 chains of elementwise ops and reductions (%s backend)",
    (backend) => {
      fc.assert(
        fc.property(fc.array(stepArb, { minLength: 1, maxLength: 10 }), fc.nat(), (steps, seed) => {
          const inputs = chainInputs(seed, "float32");
          const eager = runChain(inputs, steps);
          const options = backend === "interpreter" ? { backend } : {};
          if (backend === "interpreter") setEagerBackend("interpreter");
          const lz = lazy(() => runChain(inputs, steps), options);
          expect(lz.filter((t) => !inputs.includes(t)).every(isPending)).toBe(true);
          setEagerBackend("js");
          for (const [k, t] of lz.entries()) expectIdentical(t, eager[k]!);
        }),
        { numRuns: backend === "js" ? 40 : 15, seed: 7 },
      );
    },
  );

  it.each(backendNames().filter((b) => backendTier(b) === "tolerance"))(
    "random float32 chains on %s: lazy and eager within the tolerance tier of the evaluator",
    (backend) => {
      setEagerBackend(backend);
      try {
        fc.assert(
          fc.property(fc.array(stepArb, { minLength: 1, maxLength: 10 }), fc.nat(), (steps, seed) => {
            const inputs = chainInputs(seed, "float32");
            setEagerBackend("interpreter");
            const exact = runChain(inputs, steps);
            setEagerBackend(backend);
            const eager = runChain(inputs, steps);
            const lz = lazy(() => runChain(inputs, steps));
            for (const [k, t] of lz.entries()) {
              expectWithinTier(t, exact[k]!, inputs);
              expectWithinTier(eager[k]!, exact[k]!, inputs);
            }
          }),
          { numRuns: 20, seed: 7 },
        );
      } finally {
        setEagerBackend("js");
      }
    },
  );

  it("random float16 chains (rounded after every op, in both modes)", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 8 }), fc.nat(), (steps, seed) => {
        const inputs = chainInputs(seed, "float16");
        const eager = runChain(inputs, steps);
        const lz = lazy(() => runChain(inputs, steps));
        for (const [k, t] of lz.entries()) expectIdentical(t, eager[k]!);
      }),
      { numRuns: 20, seed: 11 },
    );
  });

  it("a softmax-like chain is one fused kernel with eager's values", () => {
    manualSeed(3);
    const x = randn(4, 16);
    const y = lazy(() => softmaxLike(x));
    expectIdentical(y, softmaxLike(x));
    const g = lastLazyGraph()!;
    expect(g.ops).toBe(5); // mean, sub, exp, sum, div
    const summary = fusionSummary(g.module);
    expect(summary.kernels).toBe(1);
    expect(summary.byKind.kInput).toBe(1);
  });
});

describe("every registered op, lazily", () => {
  onExactBackend();
  // The same error, but each names its own call's line (test/tensor/user_line.test.ts).
  const withoutLocation = (e: unknown) =>
    e instanceof Error ? `${e.name}: ${baseMessage(e)}` : String(e);

  it("gives eager's results (or eager's error) for f(x), f(x, y) and f(x, 2)", () => {
    manualSeed(9);
    const x = randn(3, 4).mul(2);
    const y = randn(3, 4);
    const forms: [string, unknown[]][] = [
      ["f(x)", [x]],
      ["f(x, y)", [x, y]],
      ["f(x, 2)", [x, 2]],
    ];
    const table = ops as unknown as Record<string, (...args: unknown[]) => Tensor | Tensor[]>;
    const flat = (r: Tensor | Tensor[]) => (Array.isArray(r) ? r : [r]);
    let compared = 0;
    for (const name of registeredOps().keys()) {
      const fn = table[name];
      if (typeof fn !== "function") continue;
      const eager = forms.map(([, args]) => {
        try {
          return { ok: flat(fn(...args)) };
        } catch (e) {
          return { error: withoutLocation(e) };
        }
      });
      // Random ops (dropout) draw new values per call; the comparison needs a deterministic op.
      const again = forms.map(([, args]) => {
        try {
          return flat(fn(...args));
        } catch {
          return undefined;
        }
      });
      const deterministic = eager.every((r, k) => {
        if (!("ok" in r) || r.ok === undefined) return true;
        const b = again[k];
        return b !== undefined && r.ok.every((t, i) => sameValues(t, b[i]!));
      });
      if (!deterministic) continue;
      const lazyResults = lazy(() =>
        forms.map(([, args]) => {
          try {
            return { ok: flat(fn(...args)) };
          } catch (e) {
            return { error: withoutLocation(e) };
          }
        }),
      );
      for (const [k, r] of lazyResults.entries()) {
        const e = eager[k]!;
        const what = `${name} ${forms[k]![0]}`;
        if ("error" in e) {
          expect("error" in r ? r.error : "no error", what).toBe(e.error);
          continue;
        }
        expect("ok" in r, `${what}: ${"error" in r ? r.error : ""}`).toBe(true);
        const got = (r as { ok: Tensor[] }).ok;
        expect(got.length, what).toBe(e.ok!.length);
        for (const [i, t] of got.entries()) {
          expect(sameValues(t, e.ok![i]!), `${what} result ${i}`).toBe(true);
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(50);
  });
});

describe("the program cache", () => {
  it("compiles the same step once: a second step, new data and new scalars are hits", () => {
    clearLazyGraphs();
    const step = (x: Tensor, lr: number) => softmaxLike(x).mul(lr).sum();
    manualSeed(1);
    const x1 = randn(8, 8);
    const x2 = randn(8, 8);
    const a = lazy(() => step(x1, 0.5));
    expect(a.item()).toBe(step(x1, 0.5).item());
    expect(lazyStats()).toMatchObject({ graphs: 1, compiled: 1, cacheHits: 0 });
    const b = lazy(() => step(x1, 0.5));
    expect(b.item()).toBe(a.item());
    const c = lazy(() => step(x2, 0.25)); // new data and a new scalar: the same program
    expect(c.item()).toBe(step(x2, 0.25).item());
    expect(lazyStats()).toMatchObject({ graphs: 3, compiled: 1, cacheHits: 2 });
    expect(lastLazyGraph()!.hit).toBe("graph");
    // Without the graph memo the module is rebuilt and the program cache answers by fingerprint.
    clearLazyGraphs();
    expect(lazy(() => step(x2, 0.25)).item()).toBe(c.item());
    expect(lastLazyGraph()!.hit).toBe("memory");
    expect(lazyStats().compiled).toBe(1);
    // Another shape is another program.
    lazy(() => step(randn(4, 8), 0.5)).item();
    expect(lazyStats().compiled).toBe(2);
  });

  it("concrete tensors and scalars are parameters, never constants", () => {
    const x = tensor([1, 2, 3]);
    lazy(() => x.mul(7).add(x)).toArray();
    const g = lastLazyGraph()!;
    expect(g.parameters).toBe(2); // x once (shared), the scalar 7
    const entry = g.module.entry;
    expect(entry.instructions.filter((i) => i.opcode === "constant")).toEqual([]);
  });

  it("cache: false compiles every graph", () => {
    const x = tensor([1, 2, 3]);
    lazy(() => x.exp(), { cache: false }).toArray();
    lazy(() => x.exp(), { cache: false }).toArray();
    expect(lazyStats()).toMatchObject({ graphs: 2, compiled: 2, cacheHits: 0 });
  });
});

describe("what a program computes", () => {
  it("observing one of two returned tensors computes both in one program", () => {
    manualSeed(2);
    const x = randn(3, 4);
    const [s, m] = lazy(() => {
      const h = x.exp().add(1);
      return [h.sum(), h.mul(x)];
    });
    expect(isPending(s!) && isPending(m!)).toBe(true);
    expect(s!.item()).toBe(x.exp().add(1).sum().item());
    expect(lazyStats().graphs).toBe(1);
    expect(lastLazyGraph()).toMatchObject({ ops: 4, outputs: 2 });
    expect(isPending(m!)).toBe(false);
    expectIdentical(m!, x.exp().add(1).mul(x));
    expect(lazyStats().graphs).toBe(1); // m was computed by the first program
  });

  it("returned objects and nested arrays count as returned tensors", () => {
    const x = tensor([1, -2, 3]);
    const out = lazy(() => ({ a: x.relu(), rest: [x.neg(), { b: x.exp() }], n: 3 }));
    out.a.toArray();
    expect(lastLazyGraph()!.outputs).toBe(3);
    expect([out.a, out.rest[0] as Tensor].some(isPending)).toBe(false);
  });

  it("without a scope's return value, a program computes what the observed tensor needs", () => {
    setLazy(true);
    const x = tensor([1, 2, 3]);
    const h = x.exp();
    const a = h.sum();
    const b = h.mul(2);
    setLazy(false);
    expect(a.item()).toBe(tensor([1, 2, 3]).exp().sum().item());
    expect(lastLazyGraph()).toMatchObject({ ops: 2, outputs: 1 });
    expect(isPending(b)).toBe(true);
    expect(isPending(h)).toBe(true); // an intermediate, recomputed if needed again
    realizeAll([b, h]);
    expect(lastLazyGraph()).toMatchObject({ ops: 2, outputs: 2 });
    expect(isPending(b) || isPending(h)).toBe(false);
    expectIdentical(b, x.exp().mul(2));
  });

  it("printing a lazy tensor realizes it", () => {
    const x = tensor([
      [1, 2],
      [3, 4],
    ]);
    const y = lazy(() => x.div(3).exp());
    const expected = x.div(3).exp().toString();
    expect(String(y)).toBe(expected);
    expect(inspect(lazy(() => x.div(3).exp()))).toBe(expected);
    expect(y.shape).toEqual([2, 2]); // shape and dtype never needed a program
    expect(lazyStats().graphs).toBe(2);
  });

  it("mixes eager and lazy tensors both ways", () => {
    const x = tensor([0.5, -1, 2]);
    const y = lazy(() => x.mul(x).add(1)); // eager x inside: a parameter
    expect(isPending(y)).toBe(true);
    expect(isLazy()).toBe(false);
    const z = y.sub(x); // an eager op on a lazy tensor realizes it first
    expect(isPending(z)).toBe(false);
    expect(isPending(y)).toBe(false);
    expectIdentical(z, x.mul(x).add(1).sub(x));
    // A realized lazy tensor used in a later lazy scope is a parameter of the new graph.
    const w = lazy(() => y.mul(z));
    w.toArray();
    expect(lastLazyGraph()).toMatchObject({ ops: 1, parameters: 2 });
  });

  it("a lazy tensor escaping one scope feeds another scope's graph while still pending", () => {
    const x = tensor([1, 2, 3, 4]);
    const a = lazy(() => x.exp());
    const b = lazy(() => a.add(x).sum());
    expect(b.item()).toBe(x.exp().add(x).sum().item());
    expect(lastLazyGraph()).toMatchObject({ ops: 3, outputs: 1 });
    expect(isPending(a)).toBe(true); // not a return value of b's scope
  });
});

describe("errors", () => {
  it("an invalid op fails when it is recorded, naming the op and the shapes", () => {
    const x = tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    const y = tensor([1, 2, 3, 4]);
    const before = lazyStats().opsRecorded;
    let err: unknown;
    lazy(() => {
      const h = x.exp(); // recorded
      try {
        h.add(y);
      } catch (e) {
        err = e;
      }
      return h;
    });
    expect(err).toBeInstanceOf(OpError);
    expect((err as OpError).op).toBe("add");
    expect(String(err)).toMatch(/^OpError: add: .*\[2,3\].*\[4\]/);
    expect(lazyStats().opsRecorded).toBe(before + 1);
    expect(lazyStats().graphs).toBe(0);
    expect(() => lazy(() => x.matmul(y))).toThrow(/^matmul: /);
    expect(() => lazy(() => x.sum(5))).toThrow(/^sum: /);
  });

  it("bad options fail when the scope starts", () => {
    expect(() => lazy(() => tensor([1]).exp(), { maxDepth: 0 })).toThrow(
      /lazy: maxDepth must be an integer >= 1, got 0/,
    );
    expect(() => lazy(() => tensor([1]).exp(), { backend: "nope" })).toThrow(
      /unknown backend 'nope'; available: /,
    );
    expect(isLazy()).toBe(false);
  });

  it("a lazy scope must be synchronous", () => {
    expect(() => lazy(async () => tensor([1]).exp())).toThrow(/lazy\(fn\): fn returned a Promise/);
    expect(isLazy()).toBe(false);
  });

  it("an exception inside a scope restores the mode", () => {
    expect(() =>
      lazy(() => {
        throw new Error("boom");
      }),
    ).toThrow("boom");
    expect(isLazy()).toBe(false);
  });
});

describe("backends", () => {
  // One declines every module; the other compiles, then fails when run.
  const declines: Backend = {
    name: "test-declines",
    priority: -1,
    compile(module) {
      throw new UnsupportedError("test-declines", "declines everything", module.entry.root.name);
    },
  };
  const broken: Backend = {
    name: "test-broken",
    priority: -1,
    compile: (module) => ({
      backend: "test-broken",
      module,
      run: () => {
        throw new Error("the device caught fire");
      },
    }),
  };
  registerBackend(declines);
  registerBackend(broken);

  it("a graph the backend declines runs on the interpreter, with the same values", () => {
    const x = tensor([0.25, -3, 8]);
    const y = lazy(() => x.exp().add(x), { backend: "test-declines" });
    expectIdentical(y, x.exp().add(x));
    expect(lastLazyGraph()!.backend).toBe("interpreter");
  });

  it("a failure while running a graph names the graph's ops", () => {
    const x = tensor([1, 2]);
    const y = lazy(() => x.exp().add(1).exp(), { backend: "test-broken", cache: false });
    let err: unknown;
    try {
      y.toArray();
    } catch (e) {
      err = e;
    }
    expect(String(err)).toMatch(
      /a lazy graph of 3 ops \(exp x2, add\) failed: the device caught fire/,
    );
    expect((err as Error).cause).toBeInstanceOf(Error);
    expect(isPending(y)).toBe(true); // nothing was half-written
  });
});

describe("scopes and switches", () => {
  onExactBackend();
  it("nested scopes: inner results feed the outer graph; modes restore on the way out", () => {
    manualSeed(5);
    const x = randn(2, 6);
    const out = lazy(() => {
      const a = x.exp();
      const inner = lazy(() => a.sum(1, true));
      expect(isLazy()).toBe(true);
      expect(isPending(inner)).toBe(true);
      return a.div(inner);
    });
    expect(isLazy()).toBe(false);
    expectIdentical(out, x.exp().div(x.exp().sum(1, true)));
    expect(lastLazyGraph()).toMatchObject({ ops: 3, outputs: 1 });
  });

  it("a nested scope inherits the outer options", () => {
    const x = tensor([1, 2, 3]);
    const y = lazy(() => lazy(() => x.exp()), { backend: "interpreter" });
    y.toArray();
    expect(lastLazyGraph()!.backend).toBe("interpreter");
  });

  it("setLazy switches every op until it is turned off", () => {
    const x = tensor([1, 2, 3]);
    setLazy(true);
    expect(isLazy()).toBe(true);
    const y = x.add(1).mul(2);
    expect(isPending(y)).toBe(true);
    setLazy(false);
    expect(isLazy()).toBe(false);
    expect(isPending(x.add(1))).toBe(false);
    expect(y.toArray()).toEqual([4, 6, 8]);
  });

  it("a chain deeper than maxDepth is cut into several programs with the same values", () => {
    const x = tensor([0.1, 0.2, 0.3]);
    const chain = (t: Tensor) => {
      let v = t;
      for (let i = 0; i < 10; i++) v = v.mul(1.5).add(i);
      return v;
    };
    const y = lazy(() => chain(x), { maxDepth: 6 });
    expectIdentical(y, chain(x));
    const s = lazyStats();
    expect(s.depthCuts).toBeGreaterThan(0);
    expect(s.graphs).toBe(s.depthCuts + 1);
    expect(s.opsPerGraph.max).toBeLessThanOrEqual(6);
    expect(s.nodesRealized).toBe(20);
  });
});
