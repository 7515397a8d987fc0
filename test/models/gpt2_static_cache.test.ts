// GPT-2's static KV cache (issue 6): the dynamicUpdateSlice op it writes with (against a plain-JS
// reference), the static forward against the growing cache, greedy generate's tokens (PyTorch's
// fixture and the growing cache's), errors, and the point of it all: under compile() a static-
// cache generation compiles twice (prompt and step) whatever the number of tokens.

import { describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { GPT2, tinyConfig } from "../../models/gpt2.ts";
import { Generator, ops, randint, randn, type Tensor, tensor } from "../../index.ts";
import { asTensor, expectClose, getCase, loadPyTorch, modelCases } from "./fixtures.ts";

const cases = modelCases("gpt2");
const model = loadPyTorch("gpt2", new GPT2(tinyConfig), tinyConfig, cases);

/** Plain-JS dynamic_update_slice on row-major data (starts already in range). */
function referenceDus(
  x: number[],
  xs: number[],
  u: number[],
  us: number[],
  starts: number[],
): number[] {
  const out = [...x];
  const strides = xs.map((_, k) => xs.slice(k + 1).reduce((a, b) => a * b, 1));
  for (let i = 0; i < u.length; i++) {
    let rest = i;
    let flat = 0;
    for (let k = us.length - 1; k >= 0; k--) {
      const c = rest % us[k]!;
      rest = Math.floor(rest / us[k]!);
      flat += (c + starts[k]!) * strides[k]!;
    }
    out[flat] = u[i]!;
  }
  return out;
}

describe("ops.dynamicUpdateSlice", () => {
  it("writes the update at the starts, as a plain-JS reference does", () => {
    const gen = new Generator(3);
    const shapes: [number[], number[]][] = [
      [[5], [2]],
      [[3, 4], [1, 4]],
      [[2, 3, 6, 2], [2, 3, 1, 2]],
      [[2, 3, 4], [1, 2, 3]],
    ];
    for (const [xs, us] of shapes) {
      for (let trial = 0; trial < 3; trial++) {
        const x = randn(xs, { generator: gen });
        const u = randn(us, { generator: gen });
        const starts = xs.map((n, k) => (trial * 7 + k * 3) % (n - us[k]! + 1));
        for (const dtype of ["int64", "int32"] as const) {
          const got = ops.dynamicUpdateSlice(x, u, tensor(starts, { dtype }));
          expect(got.shape).toEqual(xs);
          const want = referenceDus(
            x.flatten().toArray() as number[],
            xs,
            u.flatten().toArray() as number[],
            us,
            starts,
          );
          expect(got.flatten().toArray()).toEqual(want);
        }
      }
    }
  });

  it("rejects starts that leave the input, bad starts shapes and mismatched updates", () => {
    const x = ops.zeros([2, 5]);
    const u = ops.ones([2, 2]);
    expect(() => ops.dynamicUpdateSlice(x, u, tensor([0n, 4n]))).toThrow(
      /dynamicUpdateSlice: start 4 of dim 1 .*\[0, 3\]/,
    );
    expect(() => ops.dynamicUpdateSlice(x, u, tensor([0n, -1n]))).toThrow(/start -1 of dim 1/);
    expect(() => ops.dynamicUpdateSlice(x, u, tensor([0n]))).toThrow(
      /dynamicUpdateSlice: starts must be a 1-D tensor .*\[2\]/,
    );
    expect(() => ops.dynamicUpdateSlice(x, u, tensor([0.0, 1.0]))).toThrow(/int64 or int32/);
    expect(() => ops.dynamicUpdateSlice(x, ops.ones([3, 1]), tensor([0n, 0n]))).toThrow(
      /fit inside it \(input \[2,5\], update \[3,1\]\)/,
    );
    expect(() => ops.dynamicUpdateSlice(x, u.to("int32"), tensor([0n, 0n]))).toThrow(/dtype/);
  });
});

describe("GPT2 with a static KV cache", () => {
  it("gives the growing cache's logits, and keeps the cache at its full length", () => {
    const ids = randint(0, 100, [2, 9], { generator: new Generator(5) });
    const prompt = ids.narrow(1, 0, 5);
    let grow = model.call(prompt, { useCache: true });
    let stat = model.call(prompt, { staticCache: model.createStaticCache(2, 12) });
    expectClose(stat.logits, grow.logits, { atol: 1e-5, rtol: 1e-5 });
    for (let i = 5; i < 9; i++) {
      const next = ids.narrow(1, i, 1);
      grow = model.call(next, { pastKeyValues: grow.pastKeyValues, useCache: true });
      stat = model.call(next, {
        staticCache: stat.pastKeyValues!,
        cachePosition: tensor(BigInt(i)),
      });
      expectClose(stat.logits, grow.logits, { atol: 1e-5, rtol: 1e-5 });
    }
    for (const [l, [k, v]] of stat.pastKeyValues!.entries()) {
      expect(k.shape).toEqual([2, 4, 12, 8]);
      // The written positions hold the growing cache's keys and values; the rest stay zero.
      const [gk, gv] = grow.pastKeyValues![l]!;
      expectClose(k.narrow(2, 0, 9), gk, { atol: 1e-6, rtol: 1e-6 });
      expectClose(v.narrow(2, 0, 9), gv, { atol: 1e-6, rtol: 1e-6 });
      expect(k.narrow(2, 9, 3).abs().sum().item()).toBe(0);
    }
  });

  it("generates PyTorch's greedy tokens, the same as the growing cache", () => {
    const c = getCase(cases, "generate");
    const prompt = asTensor(c.args[0]);
    const maxNewTokens = c.args[1] as number;
    const tokens = model.generate(prompt, { maxNewTokens, staticCache: true });
    expectClose(tokens, asTensor(c.out));
    const longer = model.generate(prompt, { maxNewTokens, staticCache: true, cacheLength: 32 });
    expectClose(longer, tokens);
    const int32 = model.generate(prompt.to("int32"), { maxNewTokens, staticCache: true });
    expectClose(int32, tokens.to("int32"));
  });

  it("compiles twice (prompt, then step) for any number of generated tokens", () => {
    const prompt = randint(0, 100, [1, 4], { generator: new Generator(9) });
    const compiles: number[] = [];
    let tokens: Tensor | undefined;
    for (const maxNewTokens of [6, 20]) {
      const fast = compile(model);
      tokens = model.generate(prompt, { maxNewTokens, staticCache: true, forward: fast });
      compiles.push(fast.stats.compiles);
      expect(fast.stats.calls).toBe(maxNewTokens);
      expect(fast.stats.cacheHits).toBe(maxNewTokens - 2);
    }
    expect(compiles).toEqual([2, 2]);
    expectClose(tokens!, model.generate(prompt, { maxNewTokens: 20 }));
  });

  it("rejects a cache that does not fit and mixed cache kinds", () => {
    expect(() => model.createStaticCache(1, 33)).toThrow(/maxLen 33 exceeds the context/);
    expect(() => model.createStaticCache(0, 8)).toThrow(/batch must be an integer >= 1/);
    const ids = ops.zeros([1, 3], { dtype: "int64" });
    const cache = model.createStaticCache(1, 4);
    expect(() => model.call(ids, { staticCache: cache, cachePosition: 2 })).toThrow(
      /cachePosition 2 \+ 3 new positions do not fit the static cache's 4/,
    );
    expect(() => model.call(ids, { staticCache: cache, cachePosition: tensor(2n) })).toThrow(
      /dynamicUpdateSlice: start 2 of dim 2/,
    );
    expect(() => model.call(ids, { staticCache: cache.slice(1) })).toThrow(/has 1 layers/);
    const grown = model.call(ids, { useCache: true }).pastKeyValues;
    expect(() => model.call(ids, { staticCache: cache, pastKeyValues: grown })).toThrow(
      /either pastKeyValues .* or staticCache/,
    );
    expect(() => model.generate(ids, { maxNewTokens: 40, staticCache: true })).toThrow(
      /exceeds the context length/,
    );
  });
});
