// Lazy mode's graph cuts (tensor/lazy.ts): a loop that observes nothing is cut where its body
// repeats, so every iteration runs one cached program (compile counts asserted, values equal
// to eager on an exact backend); KILN_LOGS=lazy names each cut and its reason; markStep() cuts
// where it is called and is a no-op with nothing pending; maxOps bounds a region; cutRepeats:
// false keeps one program per observation; and GPT-2's generation under lazy() (static and
// growing KV cache) gives eager's tokens with a compile count that does not grow with the
// number of tokens; a training step (forward, backward, optimizer) is one program per
// observation, not cut at the backward's or the update's repeated ops.

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { compile } from "../../compiler/index.ts";
import { lazyStep, lmStep } from "../../examples/training.ts";
import { GPT2, tinyConfig } from "../../models/gpt2.ts";
import { AdamW } from "../../optim/index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { setEagerBackend } from "../../tensor/dispatch.ts";
import {
  clearLazyGraphs,
  Generator,
  isPending,
  lazy,
  lazyStats,
  manualSeed,
  markStep,
  randint,
  randn,
  resetLazyStats,
  type Tensor,
} from "../../tensor/index.ts";
import { setLogTopics } from "../../util/log.ts";

beforeAll(() => {
  setEagerBackend("js"); // exact tier: lazy must equal eager bit for bit
});
afterAll(() => {
  setEagerBackend(undefined);
  setDefaultProgramCache(undefined);
});
beforeEach(() => {
  // A fresh memory-only cache per test, so `compiled` counts this test's compiles.
  setDefaultProgramCache(new ProgramCache({ disk: false }));
  clearLazyGraphs();
  resetLazyStats();
});
afterEach(() => {
  setLogTopics(undefined);
});

function expectSame(a: Tensor, b: Tensor): void {
  expect(a.shape).toEqual(b.shape);
  expect(Array.from(a.data() as Float32Array)).toEqual(Array.from(b.data() as Float32Array));
}

/** A residual block of 8 ops, repeated `n` times on x [4, 8], after a 2-op preamble. */
function blocks(x: Tensor, w: Tensor, n: number): Tensor {
  let h = x.mul(0.5).add(1);
  for (let i = 0; i < n; i++) {
    const y = h.matmul(w).add(0.1).tanh().mul(h).sub(h.mean(-1, true)).relu().add(h);
    h = y.div(2);
  }
  return h;
}

describe("repeat cuts", () => {
  const x = randn([4, 8], { generator: new Generator(1) });
  const w = randn([8, 8], { generator: new Generator(2) });

  it("cut a loop into iterations that share one cached program, with eager's values", () => {
    const want = blocks(x, w, 40);
    const got = lazy(() => blocks(x, w, 40));
    expectSame(got, want);
    const s = lazyStats();
    expect(s.repeatCuts).toBeGreaterThanOrEqual(10);
    expect(s.depthCuts).toBe(0);
    // The first region (with the preamble), the steady body, and the last one (the rest).
    expect(s.compiled).toBeLessThanOrEqual(3);
    expect(s.graphs).toBe(s.repeatCuts + 1);
    // Doubling the iterations adds programs but no compiles.
    resetLazyStats();
    expectSame(lazy(() => blocks(x, w, 80)), blocks(x, w, 80));
    expect(lazyStats().compiled).toBeLessThanOrEqual(1);
  });

  it("with cutRepeats: false, the same loop is one program per observation", () => {
    const got = lazy(() => blocks(x, w, 10), { cutRepeats: false });
    expectSame(got, blocks(x, w, 10));
    expect(lazyStats()).toMatchObject({ graphs: 1, repeatCuts: 0 });
  });

  it("a short scope is not cut", () => {
    expectSame(lazy(() => blocks(x, w, 1)), blocks(x, w, 1));
    expect(lazyStats()).toMatchObject({ graphs: 1, repeatCuts: 0 });
  });

  it("a program that fails leaves the region: a later loop's cuts do not take its ops", () => {
    class Failing extends ProgramCache {
      override getOrCompile(): never {
        throw new Error("no compiler here");
      }
    }
    const failing = { cache: new Failing({ disk: false }) };
    expect(() => lazy(() => x.add(1).exp(), failing).data()).toThrow(/no compiler here/);
    expectSame(lazy(() => blocks(x, w, 40)), blocks(x, w, 40));
    expect(lazyStats().repeatCuts).toBeGreaterThanOrEqual(10);
  });

  it("KILN_LOGS=lazy says where each cut is and why", () => {
    setLogTopics(["lazy"]);
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      lazy(() => blocks(x, w, 6)).data();
      lazy(() => x.add(1).exp(), { maxOps: 1 }).data();
      lazy(() => {
        const y = x.add(1);
        markStep();
        return y.exp();
      }).data();
    } finally {
      spy.mockRestore();
    }
    const cuts = lines.filter((l) => l.startsWith("[kiln:lazy] cut:"));
    expect(cuts.some((l) => /ops \d+\.\. of the region repeat .*loop's next iteration/.test(l)))
      .toBe(true);
    expect(cuts.some((l) => /the region reached maxOps \(1\)/.test(l))).toBe(true);
    expect(cuts.some((l) => /cut: 1 op: markStep\(\) \(1 result\)/.test(l))).toBe(true);
  });
});

describe("markStep and maxOps", () => {
  const x = randn([3, 5], { generator: new Generator(3) });

  it("markStep runs what is pending now; later ops start a new program", () => {
    let before: Tensor | undefined;
    const out = lazy(() => {
      const a = x.exp().sum(-1);
      before = a;
      markStep();
      return a.mul(2).add(x.sum(-1));
    });
    expect(isPending(before!)).toBe(false);
    expect(isPending(out)).toBe(true);
    expect(lazyStats()).toMatchObject({ graphs: 1, stepCuts: 1 });
    expectSame(out, x.exp().sum(-1).mul(2).add(x.sum(-1)));
    expect(lazyStats().graphs).toBe(2);
  });

  it("markStep with nothing pending does nothing, and is never needed for values", () => {
    markStep();
    lazy(() => {
      markStep();
      return x.add(1);
    }).data();
    markStep();
    expect(lazyStats()).toMatchObject({ graphs: 1, stepCuts: 0 });
  });

  it("maxOps bounds the pending region", () => {
    const f = () => {
      let y = x;
      for (let i = 0; i < 25; i++) y = i % 2 === 0 ? y.add(i) : y.mul(0.9);
      return y;
    };
    expectSame(lazy(f, { maxOps: 10, cutRepeats: false }), f());
    expect(lazyStats()).toMatchObject({ sizeCuts: 2, graphs: 3 });
    expect(() => lazy(f, { maxOps: 0 })).toThrow(/lazy: maxOps must be an integer >= 1, got 0/);
  });
});

/** How many of compile()'s pow2 buckets (docs/dynamic-shapes.md) the sizes lo..hi fall in. */
function bucketsOf(lo: number, hi: number): number {
  const tops = new Set<number>();
  for (let n = lo; n <= hi; n++) tops.add(n <= 1 ? n : 2 ** Math.ceil(Math.log2(n)));
  return tops.size;
}

describe("GPT-2 generation under lazy()", () => {
  manualSeed(0);
  // 64 positions, so 40 new tokens fit after the prompt.
  const model = new GPT2({ ...tinyConfig, nPositions: 64 });
  model.eval();
  const P = 5;
  const prompt = randint(0, tinyConfig.vocabSize, [1, P], { generator: new Generator(4) });

  /** Generates n tokens lazily from empty caches: eager's tokens; the statistics. */
  const generate = (n: number, opts: Record<string, unknown>) => {
    setDefaultProgramCache(new ProgramCache({ disk: false }));
    clearLazyGraphs();
    resetLazyStats();
    const got = lazy(() => model.generate(prompt, { ...opts, maxNewTokens: n }));
    expect(got.toArray()).toEqual(model.generate(prompt, { ...opts, maxNewTokens: n }).toArray());
    const s = lazyStats();
    // One program per step: cut where the next step's ops begin (never inside the model's
    // call, at its repeated blocks); the last step ends at the observation.
    expect(s.graphs).toBe(n);
    expect(s.repeatCuts).toBe(n - 1);
    expect(s.depthCuts).toBe(0);
    return s;
  };

  for (const n of [24, 40]) {
    it(`growing cache, ${n} tokens: one program per bucket of the cache's length`, () => {
      const s = generate(n, {});
      // The steps see caches of P .. P + n - 2 positions. The prompt and the first step
      // compile at their sizes; from the second step on, the step's sizes are on a line in the
      // cache's length and each bucket of it compiles one padded program.
      expect(s.compiled).toBeLessThanOrEqual(bucketsOf(P, P + n - 2) + 2);
      expect(s.eagerOps).toBe(0);
    });
  }

  it("static cache: only the ids grow, one program per bucket of their length", () => {
    const s = generate(26, { staticCache: true, cacheLength: 31 });
    expect(s.compiled).toBeLessThanOrEqual(bucketsOf(P, P + 26 - 2) + 2);
    expect(s.eagerOps).toBe(0);
  });

  it("a second generation compiles nothing", () => {
    generate(24, {});
    resetLazyStats();
    const again = lazy(() => model.generate(prompt, { maxNewTokens: 24 }));
    expect(again.toArray()).toEqual(model.generate(prompt, { maxNewTokens: 24 }).toArray());
    expect(lazyStats()).toMatchObject({ compiled: 0, graphs: 24 });
  });
});

describe("a training step under lazy()", () => {
  // Forward, cross-entropy, backward, AdamW, zeroGrad (examples/training.ts): the backward
  // sweep repeats the same ops per layer and the update the same ops per parameter, but neither
  // is a loop's iterations — cut there, one step became dozens of programs, each recomputing the
  // forward values its layer's backward needs (GPT-2 small trained 9x slower than eager).
  const train = (nLayer: number, steps: number, mode: "eager" | "lazy") => {
    manualSeed(7);
    const model = new GPT2({
      ...tinyConfig,
      nLayer,
      embdPdrop: 0,
      attnPdrop: 0,
      residPdrop: 0,
    }).train();
    const opt = new AdamW([...model.parameters()], { lr: 1e-2 });
    const x = randint(0, tinyConfig.vocabSize, [2, 8], { generator: new Generator(8) });
    const y = randint(0, tinyConfig.vocabSize, [2, 8], { generator: new Generator(9) });
    const losses: number[] = [];
    const perStep: ReturnType<typeof lazyStats>[] = [];
    for (let i = 0; i < steps; i++) {
      resetLazyStats();
      const step = () => lmStep(model, opt, x, y);
      losses.push(mode === "lazy" ? lazyStep(model, opt, step) : (step().item() as number));
      perStep.push(lazyStats());
    }
    const params = [...model.parameters()].map((p) => Array.from(p.data() as Float32Array));
    return { losses, params, perStep };
  };

  it("is one program per observation, with eager's values; later steps compile nothing", () => {
    const want = train(4, 3, "eager");
    const got = train(4, 3, "lazy");
    // The js backend is the exact tier: the same losses and parameters, bit for bit.
    expect(got.losses).toEqual(want.losses);
    expect(got.params).toEqual(want.params);
    for (const s of got.perStep) {
      expect(s.repeatCuts).toBe(0);
      expect(s.depthCuts).toBe(0);
    }
    expect(got.perStep[1]!.compiled).toBe(0);
    expect(got.perStep[2]!.compiled).toBe(0);
    // Twice the layers: the same number of programs per step.
    const deeper = train(8, 2, "lazy");
    expect(deeper.perStep[1]!.graphs).toBe(got.perStep[1]!.graphs);
    expect(deeper.perStep[1]!.compiled).toBe(0);
  });
});

describe("compile() beside lazy()", () => {
  it("a compiled function's trace leaves no ops for a later lazy() scope to run", () => {
    manualSeed(3);
    const model = new GPT2(tinyConfig).eval();
    const ids = randint(0, tinyConfig.vocabSize, [1, 8], { generator: new Generator(5) });
    const f = () => model.call(ids).logits;
    const want = f();
    // The first call traces (in lazy mode, under the hood) and runs the compiled program.
    const cf = compile(f, { backend: "js" });
    expectSame(cf(), want);
    for (let i = 0; i < 3; i++) {
      resetLazyStats();
      expectSame(lazy(() => f()), want);
      // One program of this scope's own ops: never the trace's left-over ones as well.
      expect(lazyStats()).toMatchObject({ graphs: 1, repeatCuts: 0, nodesRealized: lazyStats().opsRecorded });
    }
  });
});
