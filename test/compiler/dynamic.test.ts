// Bounded dynamism in compile(): a dim declared dynamic (option, markDynamic) or made dynamic
// automatically compiles once per bucket, and every result equals the eager model's at every
// size; code that depends on a size is specialized, never guessed at; bad declarations and
// sizes outside a declared range are clear errors.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { DynamicShapeError, markDynamic } from "../../compiler/dynamic.ts";
import createBert, { inputs as bertInputs } from "../../models/bert.ts";
import createGpt2, {
  type GPT2Output,
  type KVCache, tinyConfig as gpt2Tiny } from "../../models/gpt2.ts";
import {
  arange,
  Generator,
  manualSeed,
  nn,
  ops,
  randint,
  randn,
  type Tensor,
} from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { EPS, SUM_FACTOR } from "../../runtime/tiers.ts";
import { readFileSync } from "node:fs";
import * as sizes from "./fixtures/sizes.ts";
import { expectTreeClose } from "./fixtures/close.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));



/** pow2 bucket index of a size (sizes 0 and 1 are their own). */
function pow2Bucket(n: number): number {
  return n <= 1 ? -1 - n : Math.ceil(Math.log2(n));
}

/** A small deterministic PRNG for the lengths. */
function lengths(seed: number, count: number, max: number): number[] {
  let s = seed;
  return Array.from({ length: count }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return 1 + (s % max);
  });
}

describe("dynamic dims: BERT tiny", () => {
  it("declared dims: one program per pow2 bucket, equal to eager at every length", () => {
    manualSeed(0);
    const model = createBert("tiny").eval();
    const fast = compile(model, {
      dynamic: { inputIds: { 1: { max: 64 } }, "options.attentionMask": { 1: { max: 64 } } },
    });
    const seen = new Set<number>();
    for (const seq of [...lengths(7, 14, 64), 64, 33, 2, 1]) {
      const [ids, o] = bertInputs({ batch: 2, seq });
      expectTreeClose(fast(ids, o), model.call(ids, o));
      seen.add(pow2Bucket(seq));
    }
    expect(fast.stats.compiles).toBe(seen.size);
    expect(fast.stats.specializations).toEqual([]);
    const ranged = fast.guards.filter((gs) => gs.some((g) => g.kind === "range"));
    expect(ranged.length).toBe(seen.size - 2); // sizes 1 and 2 are static programs
    expect(ranged[0]!.filter((g) => g.kind === "range").map((g) => g.path)).toEqual([
      "inputIds.shape[1]",
      "options.attentionMask.shape[1]",
    ]);
  });

  it("auto (the default): the second size makes the dim dynamic and says so", () => {
    manualSeed(1);
    const model = createBert("tiny").eval();
    const fast = compile(model);
    const seen = new Set<number>();
    const sizes = [16, 17, 20, 32, 5, 7, 8, 40, 64, 33];
    for (const seq of sizes) {
      const [ids, o] = bertInputs({ batch: 1, seq });
      expectTreeClose(fast(ids, o), model.call(ids, o));
      if (seq !== 16) seen.add(pow2Bucket(seq));
    }
    // The first call is static (16); then one program per bucket.
    expect(fast.stats.compiles).toBe(1 + seen.size);
    expect(fast.stats.recompiles[0]!.reason).toBe(
      "inputIds.shape[1] was 16, now 17: dim 1 of inputIds is now dynamic (<=32, bucket pow2); " +
        "dim 1 of options.attentionMask is now dynamic (<=32, bucket pow2)",
    );
    expect(fast.stats.recompiles[1]!.reason).toBe("inputIds.shape[1] was in [17, 32], now 5");
  });
});

describe("dynamic dims: what the program reads from the size", () => {
  it("mean over a dynamic dim, arange(T), T as a number, T-1 slices of a concat", () => {
    const fn = (x: Tensor) => {
      const t = x.shape[1]!;
      const pos = arange(t).to("float32");
      return x.mean(1).add(x.add(pos).sum(1).div(t)).add(x.sum(1).mul(t - 1));
    };
    const fast = compile(fn, { dynamic: { x: { 1: {} } } });
    for (const n of [5, 6, 7, 8, 9, 16, 12]) {
      const x = randn(3, n);
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.compiles).toBe(2);
  });

  it("code that branches on the size is specialized, with correct results on both sides", () => {
    const fn = (x: Tensor) => (x.shape[0]! > 6 ? x.exp().sum() : x.mul(2).sum());
    const fast = compile(fn, { dynamic: { 0: { 0: {} } } });
    for (const n of [5, 8, 6, 7]) {
      const x = randn(n);
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.specializations.length).toBeGreaterThan(0);
    const reason = fast.stats.specializations[0]!.reason;
    expect(reason).toMatch(/^x\.shape\[0\] = 5 is specialized: kept static: the code branches /);
    expect(reason).toMatch(/ at .*dynamic\.test\.ts:\d+:\d+ \(\?: `x\.shape\[0\]! > 6`\)$/);
  });

  it("dims compiled as one size must stay equal: unequal sizes recompile, never misread", () => {
    // The program reads y's size through x's (one size per program); a call where they differ
    // inside the same bucket must fail a guard, not run with x's size standing in for y's.
    const fn = (x: Tensor, y: Tensor) => x.sum().mul(y.shape[1]!).add(y.sum());
    const fast = compile(fn, { dynamic: { x: { 1: { max: 64 } }, y: { 1: { max: 64 } } } });
    for (const [a, b] of [[20, 20], [21, 21], [22, 30], [30, 22], [25, 25]] as const) {
      const x = randn(1, a);
      const y = randn(1, b);
      expectTreeClose(fast(x, y), fn(x, y));
    }
    const equal = fast.guards[0]!.find((g) => g.kind === "equal");
    expect(equal).toEqual({ kind: "equal", path: "y.shape[1]", expected: "x.shape[1]" });
    expect(fast.stats.recompiles[0]!.reason).toBe(
      "y.shape[1] was equal to x.shape[1], now 30 vs 22: y.shape[1] and x.shape[1] are now " +
        "separate size groups",
    );
    // The second program has x and y in two size groups, so it also serves [30, 22].
    expect(fast.stats.compiles).toBe(2);
  });

  it("a float that depends on the size (1/T) is specialized, not fitted", () => {
    const fn = (x: Tensor) => x.mul(1 / x.shape[0]!).sum();
    const fast = compile(fn, { dynamic: { x: { 0: {} } } });
    for (const n of [5, 7, 8]) {
      const x = randn(n);
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.specializations[0]!.reason).toMatch(/not an integer affine function/);
  });
});

describe("dynamic dims: slices along a dynamic dim", () => {
  it("split along a static dim takes the dynamic dim whole: one program per bucket", () => {
    const fn = (x: Tensor) => {
      const [a, b, c] = x.split(4, 1) as [Tensor, Tensor, Tensor];
      return a.mul(b).add(c.exp()).sum(1);
    };
    const fast = compile(fn, { dynamic: { x: { 0: {} } } });
    const ns = [5, 6, 7, 8, 9, 13, 16];
    for (const n of ns) {
      const x = randn(n, 12);
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.compiles).toBe(new Set(ns.map(pow2Bucket)).size);
  });

  it("a slice that stops short of the end (x[:T-1]) is specialized, with its reason", () => {
    const fn = (x: Tensor) => x.narrow(0, 0, x.shape[0]! - 1).exp().sum();
    const fast = compile(fn, { dynamic: { x: { 0: {} } } });
    for (const n of [5, 7, 8]) {
      const x = randn(n, 3);
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.specializations.length).toBeGreaterThan(0);
    expect(fast.stats.specializations[0]!.reason).toMatch(
      /slices dim 0 as \[0:7\] of 8 and as \[0:\d\] of \d.*only a slice of the whole dim/,
    );
  });
});

describe("dynamic dims: GPT-2 tiny forward without a cache, growing length", () => {
  it("compiles once per pow2 bucket (plus the first static length), logits equal eager", () => {
    manualSeed(3);
    const model = createGpt2("tiny").eval();
    const forward = (ids: Tensor): Tensor => model.call(ids).logits;
    const fast = compile(forward);
    const gen = new Generator(1);
    const ns: number[] = [];
    for (let n = 5; n <= 29; n++) {
      const ids = randint(0, gpt2Tiny.vocabSize, [1, n], { generator: gen });
      expectTreeClose(fast(ids), forward(ids));
      ns.push(n);
    }
    expect(fast.stats.specializations).toEqual([]);
    // Length 5 alone (static, before the dim is seen to move), then buckets 5-8, 9-16, 17-32.
    expect(fast.stats.compiles).toBe(1 + new Set(ns.map(pow2Bucket)).size);
  });
});

describe("dynamic dims: markDynamic and bucket policies", () => {
  const fn = (x: Tensor) => x.softmax(-1).mul(x.shape[1]!);

  it("markDynamic makes the dim dynamic from the first call", () => {
    const fast = compile(fn, { dynamic: false });
    for (const n of [9, 10, 16]) {
      const x = markDynamic(randn(2, n), 1, { max: 100 });
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.compiles).toBe(1);
    expect(fast.guards[0]!.find((g) => g.kind === "range")).toEqual({
      kind: "range",
      path: "x.shape[1]",
      expected: [9, 16],
    });
  });

  it("an explicit list, { multiple }, and none", () => {
    const run = (buckets: Parameters<typeof compile>[1] extends infer O
      ? O extends { buckets?: infer B } ? B : never : never, sizes: number[]) => {
      const fast = compile(fn, { dynamic: { x: { 1: { max: 48 } } }, buckets });
      for (const n of sizes) {
        const x = randn(2, n);
        expectTreeClose(fast(x), fn(x));
      }
      return fast.stats.compiles;
    };
    expect(run([10, 20, 48], [3, 10, 11, 20, 21, 48])).toBe(3);
    expect(run({ multiple: 16 }, [3, 16, 17, 32, 33, 48])).toBe(3);
    expect(run("none", [3, 16, 17, 32, 33, 48])).toBe(1);
  });
});

describe("dynamic dims: bad input", () => {
  const fn = (x: Tensor) => x.sum(0);

  it("rejects min > max, a list that is not increasing, a bad multiple", () => {
    expect(() => compile(fn, { dynamic: { x: { 0: { min: 9, max: 4 } } } })).toThrow(
      /dynamic\.x\[0\]: min \(9\) > max \(4\)/,
    );
    expect(() => compile(fn, { buckets: [16, 8] })).toThrow(
      /strictly increasing, but edge 1 \(8\) <= edge 0 \(16\)/,
    );
    expect(() => compile(fn, { buckets: { multiple: 0 } })).toThrow(DynamicShapeError);
    expect(() => compile(fn, { buckets: "none" })).toThrow(/declare the dims/);
    expect(() => markDynamic(randn(3), 2)).toThrow(/dim 2 is out of range/);
    expect(() => markDynamic(randn(3), 0, { min: 5, max: 2 })).toThrow(/min \(5\) > max \(2\)/);
  });

  it("a size outside the declared range: an error, or a specialization when asked", () => {
    const strict = compile(fn, { dynamic: { x: { 0: { min: 2, max: 8 } } } });
    strict(randn(5));
    expect(() => strict(randn(9))).toThrow(
      /x\.shape\[0\] is 9, outside its declared range \[2, 8\]/,
    );
    const lenient = compile(fn, {
      dynamic: { x: { 0: { min: 2, max: 8 } } },
      outOfRange: "recompile",
    });
    lenient(randn(5));
    const x = randn(9);
    expectTreeClose(lenient(x), fn(x));
    expect(lenient.stats.specializations[0]!.reason).toMatch(/outside its declared range/);
  });
});

describe("dynamic dims: GPT-2 generation with a growing KV cache", () => {
  it("compiles once per cache-length bucket for a whole generation, tokens equal eager", () => {
    manualSeed(2);
    const model = createGpt2({ ...gpt2Tiny, nPositions: 64 }).eval();
    const fast = compile(model);
    const prompt = randint(0, 100, [1, 5], { generator: new Generator(0) });
    let ids = prompt;
    let next = prompt;
    let past: KVCache | null = null;
    for (let step = 0; step < 40; step++) {
      const out: GPT2Output = fast(next, { pastKeyValues: past, useCache: true });
      past = out.pastKeyValues;
      const last = out.logits.narrow(1, out.logits.size(1) - 1, 1);
      next = ops.argmax(last, -1).to(ids.dtype);
      ids = ops.cat([ids, next], 1);
    }
    expect(ids.toArray()).toEqual(model.generate(prompt, { maxNewTokens: 40 }).toArray());
    // The prompt, the first step (cache length 5), then cache lengths 6-8, 9-16, 17-32, 33-63
    // (the bucket ends where the model's context length does).
    expect(fast.stats.compiles).toBe(6);
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.recompiles.at(-1)!.reason).toBe(
      "options.pastKeyValues[0][0].shape[2] was in [17, 32], now 33",
    );
  });
});

describe("dynamic dims: code that branches on a size is kept static", () => {
  const SIZES = new URL("./fixtures/sizes.ts", import.meta.url);
  /** The 1-based line of the fixture that ends in `// @tag`. */
  const line = (tag: string): number =>
    readFileSync(SIZES, "utf8").split("\n").findIndex((l) => l.endsWith(`// @${tag}`)) + 1;

  // Each of these flips between sizes that tracing at a bucket's edges does not see (37 inside
  // [33, 64]; parity; 40 inside [33, 64]): without the source check, a bucket program traced
  // on one side would serve sizes on the other.
  const cases = [
    ["T % 2 === 0", sizes.parity, "parity"],
    ["T === 37", sizes.exactly37, "exact"],
    ["n > 40 through a flag", sizes.threshold, "threshold"],
  ] as const;
  for (const [title, fn, tag] of cases) {
    it(`${title}: equal to eager at every length 1..64, and the reason names the line`, () => {
      const fast = compile(fn, { dynamic: { x: { 0: {} } }, recompileLimit: 100 });
      for (let n = 1; n <= 64; n++) {
        const x = randn(n);
        expectTreeClose(fast(x), fn(x));
      }
      expect(fast.stats.compiles).toBe(64);
      const reason = fast.stats.specializations[0]!.reason;
      expect(reason).toContain("kept static: the code branches on a size at ");
      expect(reason).toContain(`fixtures/sizes.ts:${line(tag)}:`);
    });
  }

  it("a submodule's method branching on a size passed to it keeps the model static", () => {
    const model = new sizes.Outer();
    const fast = compile(model, { dynamic: { x: { 1: {} } }, recompileLimit: 100 });
    for (const n of [33, 49, 40, 64, 47, 48]) {
      const x = randn(2, n);
      expectTreeClose(fast(x), model.call(x));
    }
    expect(fast.stats.compiles).toBe(6);
    expect(fast.stats.specializations[0]!.reason).toContain(
      `fixtures/sizes.ts:${line("method")}:`,
    );
    expect(fast.stats.specializations[0]!.reason).toContain("in this.scale");
  });

  it("range guards that only throw, rank checks and loops over a shape still share buckets", () => {
    const fast = compile((x: Tensor) => sizes.guarded(x, 64), { dynamic: { x: { 1: {} } } });
    for (const n of [33, 40, 64, 37, 50]) {
      const x = randn(2, n);
      const want = sizes.guarded(x, 64);
      // A sum of 2n terms (x * (2 + n)), compiled and eager in different orders: the tolerance
      // tier's summation bound, SUM_FACTOR * length * eps * sum |term| (runtime/tiers.ts), as a
      // fraction of 1 + |sum| (what expectTreeClose divides by).
      const terms = (x.abs().sum().item() as number) * (2 + n);
      const bound = (SUM_FACTOR * 2 * n * EPS.f32 * terms) / (1 + Math.abs(want.item() as number));
      expectTreeClose(fast(x), want, Math.max(1e-5, bound));
    }
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.compiles).toBe(1);
  });

  it("Kiln's own layers (nn.MultiheadAttention, which checks sizes) share buckets", () => {
    // Kiln's layers are shape-generic by construction; their argument checks are not branches
    // of the user's code. (Under tsx their transformed text must still be matched to the file.)
    const mha = new nn.MultiheadAttention(16, 2, { batchFirst: true }).eval();
    const fn = (x: Tensor) => mha.call(x, x, x, { needWeights: false })[0];
    const fast = compile(fn, { dynamic: { x: { 1: {} } } });
    for (const n of [33, 40, 64, 37]) {
      const x = randn(2, n, 16);
      expectTreeClose(fast(x), fn(x));
    }
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.compiles).toBe(1);
  });
});
