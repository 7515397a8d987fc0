// Several independent size groups in one compiled program: dynamic dims of different sizes (a
// query length and a key length, decoder tokens and encoder frames) each get their own size and
// bucket, one program serves every pair of sizes in a pair of buckets, results equal eager at
// every pair, values that depend on both sizes (Tx + Ty) are read from both, products of sizes
// are specialized rather than fitted, and dims that were equal when traced split into two groups
// when they stop being equal.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { explainWith } from "../../compiler/explain.ts";
import { flatten } from "../../compiler/pytree.ts";
import { arange, cat, manualSeed, nn, ops, randint, randn, type Tensor } from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { expectClose } from "../fixtures/load.ts";
import { counted, takeCount } from "./fixtures/trace_count.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

function expectTreeClose(actual: unknown, expected: unknown, label: string): void {
  const a = flatten(actual);
  const e = flatten(expected);
  expect(a.spec).toEqual(e.spec);
  for (const [i, l] of a.leaves.entries()) {
    expectClose(l.value as Tensor, e.leaves[i]!.value as Tensor, { atol: 1e-5 }, label);
  }
}

/** pow2 bucket of a size: sizes 0, 1 and 2 are static programs of their own. */
function pow2Bucket(n: number): number {
  return n <= 2 ? -n : Math.ceil(Math.log2(n));
}

const DYN = { x: { 1: { max: 64 } }, y: { 1: { max: 64 } } } as const;

/** Pairs with tx !== ty: the bucket edges, 1 and 2, and a deterministic spread. */
function pairs(): [number, number][] {
  const edges = [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64];
  const out: [number, number][] = [];
  for (const [i, a] of edges.entries()) out.push([a, edges[(i * 5 + 3) % edges.length]!]);
  let s = 11;
  for (let k = 0; k < 14; k++) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const a = 1 + (s % 64);
    s = (s * 1103515245 + 12345) % 2 ** 31;
    out.push([a, 1 + (s % 64)]);
  }
  return out.filter(([a, b]) => a !== b);
}

/** The guards of kinds range/equal of each entry, as text. */
function sizeGuards(fast: { guards: readonly (readonly { kind: string; path: string;
  expected: unknown }[])[] }): string[][] {
  return fast.guards.map((gs) =>
    gs.filter((g) => g.kind === "range" || g.kind === "equal").map((g) =>
      g.kind === "range"
        ? `${(g.expected as number[])[0]} <= ${g.path} <= ${(g.expected as number[])[1]}`
        : `${g.path} == ${String(g.expected)}`,
    ),
  );
}

describe("size groups: f(x, y) with unrelated lengths", () => {
  const fn = (x: Tensor, y: Tensor) => {
    counted(0);
    const scores = x.matmul(y.transpose(1, 2)); // [B, Tx, Ty]
    const attn = ops.softmax(scores, -1).matmul(y); // cross-attention over Ty
    return { sx: x.sum(1), sy: y.mean(1), scores, attn };
  };

  it("one program per pair of buckets, equal to eager at every pair", () => {
    const fast = compile(fn, { dynamic: DYN });
    const seen = new Set<string>();
    for (const [tx, ty] of pairs()) {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
      seen.add(`${pow2Bucket(tx)},${pow2Bucket(ty)}`);
    }
    expect(fast.stats.compiles).toBe(seen.size);
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.recompiles.every((r) => r.guard.kind === "range" ||
      r.guard.kind === "shape")).toBe(true);
    // Every program with both dims in real buckets has two ranges and no equal guard.
    const both = sizeGuards(fast).filter((g) => g.length === 2);
    expect(both.length).toBeGreaterThan(0);
    for (const g of both) {
      expect(g[0]).toMatch(/^\d+ <= x\.shape\[1\] <= \d+$/);
      expect(g[1]).toMatch(/^\d+ <= y\.shape\[1\] <= \d+$/);
    }
  });

  it("the programs' sizes are independent: a call inside both buckets hits, any order", () => {
    const fast = compile(fn, { dynamic: DYN });
    for (const [tx, ty] of [[20, 9], [32, 16], [17, 10], [25, 12], [18, 15], [31, 11]]) {
      const x = randn(2, tx!, 8);
      const y = randn(2, ty!, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
    }
    expect(fast.stats.compiles).toBe(1);
    expect(sizeGuards(fast)).toEqual([["17 <= x.shape[1] <= 32", "9 <= y.shape[1] <= 16"]]);
  });

  it("traces: one group as before groups (3, 3 or 2), two groups 5 at most", () => {
    const one = (x: Tensor) => counted(x).exp().sum(1);
    const trace = (f: (...a: Tensor[]) => unknown, args: Tensor[]): number => {
      takeCount();
      f(...args);
      return takeCount();
    };
    // One group: this call, the top, the bottom; at the top: the bottom and the middle; at
    // the bottom: the top only.
    for (const [n, runs] of [[20, 3], [32, 3], [17, 2]] as const) {
      const c = compile(one, { dynamic: { x: { 1: {} } } });
      expect(trace(c, [randn(2, n)])).toBe(runs);
      expect(c.stats.compiles).toBe(1);
      expect(sizeGuards(c)).toEqual([["17 <= x.shape[1] <= 32"]]);
    }
    // Two groups: this call, both tops, each bottom with the other at its top, both middles.
    const two = compile(fn, { dynamic: DYN });
    expect(trace(two, [randn(2, 20, 8), randn(2, 10, 8)])).toBe(5);
    // At both tops this call is the top: each bottom and the middles.
    const tops = compile(fn, { dynamic: DYN });
    expect(trace(tops, [randn(2, 32, 8), randn(2, 16, 8)])).toBe(4);
  });

  it("code that rejects each group's top: each bucket ends where its code stops", () => {
    const tables = (x: Tensor, y: Tensor) => {
      if (x.shape[1]! > 24) throw new Error(`x is longer than 24`);
      if (y.shape[1]! > 12) throw new Error(`y is longer than 12`);
      return fn(x, y);
    };
    const fast = compile(tables, { dynamic: DYN });
    for (const [tx, ty] of [[20, 10], [24, 12], [17, 9], [22, 11]] as const) {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), tables(x, y), `(${tx}, ${ty})`);
    }
    expect(fast.stats.compiles).toBe(1);
    expect(sizeGuards(fast)).toEqual([["17 <= x.shape[1] <= 24", "9 <= y.shape[1] <= 12"]]);
    expect(() => fast(randn(2, 25, 8), randn(2, 10, 8))).toThrow(/x is longer than 24/);
  });

  it("explain() shows each dynamic dim with its own bucket", () => {
    const e = explainWith(fn, { dynamic: DYN }, randn(2, 20, 8), randn(2, 6, 8));
    expect(e.dynamicDims).toEqual([
      { path: "x.shape[1]", lo: 17, hi: 32 },
      { path: "y.shape[1]", lo: 5, hi: 8 },
    ]);
    expect(e.toString()).toContain("dynamic dims: x.shape[1] in [17, 32], y.shape[1] in [5, 8]");
  });
});

describe("size groups: values that depend on both sizes", () => {
  it("Tx + Ty as a number, a concatenated dim and arange(Tx + Ty): read from both sizes", () => {
    const fn = (x: Tensor, y: Tensor) => {
      const n = x.shape[1]! + y.shape[1]!;
      const both = cat([x, y], 1); // [B, Tx + Ty, 8]
      const pos = arange(n).to("float32").reshape(1, n, 1);
      const w = ops.softmax(both.add(pos.div(64)), 1);
      return { w, scaled: both.sum(1).mul(n - 3), count: arange(n).sum() };
    };
    const fast = compile(fn, { dynamic: DYN });
    const seen = new Set<string>();
    for (const [tx, ty] of [[20, 9], [25, 12], [32, 16], [17, 10], [6, 40], [8, 33], [5, 64],
      [1, 12], [12, 2]] as const) {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
      seen.add(`${pow2Bucket(tx)},${pow2Bucket(ty)}`);
    }
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.compiles).toBe(seen.size);
  });

  it("a product of the sizes (Tx * Ty) is specialized, not fitted, and stays eager-equal", () => {
    const number = (x: Tensor, y: Tensor) => x.sum().mul(x.shape[1]! * y.shape[1]!).add(y.sum());
    const flat = (x: Tensor, y: Tensor) => {
      const s = x.matmul(y.transpose(1, 2)); // [B, Tx, Ty] -> [B, Tx * Ty]
      return s.reshape(s.shape[0]!, -1).exp().sum(1);
    };
    for (const [f, why] of [
      [number, /a number passed to an op .* not an integer affine function of them/],
      [flat, /not a growing integer affine function of the sizes/],
    ] as const) {
      const fast = compile(f, { dynamic: DYN });
      for (const [tx, ty] of [[20, 9], [25, 12], [20, 9]] as const) {
        const x = randn(2, tx, 8);
        const y = randn(2, ty, 8);
        expectTreeClose(fast(x, y), f(x, y), `(${tx}, ${ty})`);
      }
      const s = fast.stats.specializations;
      expect(s.length).toBe(2);
      expect(s[0]!.reason).toMatch(/^x\.shape\[1\] = 20, y\.shape\[1\] = 9 are specialized: /);
      expect(s[0]!.reason).toMatch(why);
      expect(fast.stats.compiles).toBe(2);
    }
  });

  it("a reason that belongs to one group specializes that group only", () => {
    // x[:, :Tx-1] has no form over a dynamic dim; y's size still shares its bucket.
    const fn = (x: Tensor, y: Tensor) =>
      x.narrow(1, 0, x.shape[1]! - 1).sum(1).add(ops.softmax(y, 1).mul(y).sum(1));
    const fast = compile(fn, { dynamic: DYN });
    for (const [tx, ty] of [[20, 9], [20, 12], [20, 16], [21, 10]] as const) {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
    }
    expect(fast.stats.compiles).toBe(2);
    const s = fast.stats.specializations.map((r) => r.reason);
    expect(s.length).toBe(2);
    expect(s[0]).toMatch(/^x\.shape\[1\] = 20 is specialized: .*slices dim 1 as \[0:31\]/);
    expect(sizeGuards(fast)).toEqual([["9 <= y.shape[1] <= 16"], ["9 <= y.shape[1] <= 16"]]);
  });
});

describe("size groups: equal sizes share a group until they differ", () => {
  it("equal when traced: one group with an equal guard; unequal later: two groups", () => {
    const fn = (x: Tensor, y: Tensor) =>
      ops.softmax(x.matmul(y.transpose(1, 2)), -1).matmul(y).sum(1).add(x.mean(1));
    const fast = compile(fn, { dynamic: DYN });
    const run = (tx: number, ty: number) => {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
    };
    run(20, 20);
    run(27, 27);
    expect(fast.stats.compiles).toBe(1);
    expect(sizeGuards(fast)).toEqual([[
      "17 <= x.shape[1] <= 32",
      "17 <= y.shape[1] <= 32",
      "y.shape[1] == x.shape[1]",
    ]]);
    run(20, 25);
    expect(fast.stats.compiles).toBe(2);
    expect(fast.stats.recompiles.at(-1)!.reason).toBe(
      "y.shape[1] was equal to x.shape[1], now 25 vs 20: y.shape[1] and x.shape[1] are now " +
        "separate size groups",
    );
    expect(sizeGuards(fast)[1]).toEqual(["17 <= x.shape[1] <= 32", "17 <= y.shape[1] <= 32"]);
    for (const [tx, ty] of [[25, 20], [32, 17], [17, 17], [30, 30]] as const) run(tx, ty);
    expect(fast.stats.compiles).toBe(2);
  });

  it("a split group is outside recompileLimit, like a bucket miss", () => {
    const fn = (x: Tensor, y: Tensor) => x.sum(1).add(y.sum(1));
    const fast = compile(fn, { dynamic: DYN, recompileLimit: 1 });
    for (const [tx, ty] of [[20, 20], [20, 25], [40, 40], [40, 50], [5, 5], [5, 7]] as const) {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
    }
    expect(fast.stats.compiles).toBe(6);
    expect(fast.stats.fallbacks).toEqual([]);
  });

  it('"auto": two dims that change independently become two groups', () => {
    const fn = (x: Tensor, y: Tensor) => ops.softmax(x.matmul(y.transpose(1, 2)), -1).sum(2);
    const fast = compile(fn);
    const run = (tx: number, ty: number) => {
      const x = randn(2, tx, 8);
      const y = randn(2, ty, 8);
      expectTreeClose(fast(x, y), fn(x, y), `(${tx}, ${ty})`);
    };
    run(10, 12);
    run(11, 14);
    expect(fast.stats.recompiles[0]!.reason).toBe(
      "x.shape[1] was 10, now 11: dim 1 of x is now dynamic (<=16, bucket pow2); " +
        "dim 1 of y is now dynamic (<=16, bucket pow2)",
    );
    expect(sizeGuards(fast)[1]).toEqual(["9 <= x.shape[1] <= 16", "9 <= y.shape[1] <= 16"]);
    for (const [tx, ty] of [[16, 9], [9, 16], [13, 13], [12, 10]] as const) run(tx, ty);
    expect(fast.stats.compiles).toBe(2);
    run(12, 20); // y's next bucket only
    expect(fast.stats.compiles).toBe(3);
    expect(sizeGuards(fast)[2]).toEqual(["9 <= x.shape[1] <= 16", "17 <= y.shape[1] <= 32"]);
  });
});

/** Single-head attention of `q` over `kv` (projections, then scaled dot product). */
class Attention extends nn.Module {
  q = new nn.Linear(16, 16);
  k = new nn.Linear(16, 16);
  v = new nn.Linear(16, 16);

  forward(q: Tensor, kv: Tensor, causal: boolean): Tensor {
    return ops.scaledDotProductAttention(
      this.q.call(q),
      this.k.call(kv),
      this.v.call(kv),
      { isCausal: causal },
    );
  }
}

/** A decoder layer: causal self-attention over tokens, cross-attention over encoder states. */
class CrossDecoder extends nn.Module {
  embed = new nn.Embedding(50, 16);
  self_attn = new Attention();
  cross_attn = new Attention();
  norm = new nn.LayerNorm(16);

  forward(tokens: Tensor, states: Tensor): Tensor {
    const h = this.embed.call(tokens);
    const x = h.add(this.self_attn.call(h, h, true));
    return this.norm.call(x.add(this.cross_attn.call(x, states, false)));
  }
}

describe("size groups: encoder-decoder", () => {
  it("decoder tokens and encoder frames: one program per pair of buckets", () => {
    manualSeed(3);
    const dec = new CrossDecoder().eval();
    const fast = compile(dec, {
      dynamic: { tokens: { 1: { max: 32 } }, states: { 1: { max: 64 } } },
    });
    const seen = new Set<string>();
    for (const [t, s] of [[5, 20], [7, 30], [8, 17], [3, 40], [12, 60], [16, 33], [1, 24],
      [6, 2]] as const) {
      const tokens = randint(0, 50, [2, t]);
      const states = randn(2, s, 16);
      expectTreeClose(fast(tokens, states), dec.call(tokens, states), `(${t}, ${s})`);
      seen.add(`${pow2Bucket(t)},${pow2Bucket(s)}`);
    }
    expect(fast.stats.specializations).toEqual([]);
    expect(fast.stats.compiles).toBe(seen.size);
  });

  it("a stride-2 audio encoder into the decoder: frames specialized, tokens dynamic", () => {
    // Whisper's frontend: a stride-2 convolution gives ceil(frames / 2) positions, which is
    // not affine in the frames, so that group alone is specialized (with the reason) and the
    // tokens keep their bucket.
    manualSeed(4);
    const conv = new nn.Conv1d(8, 16, 3, { stride: 2, padding: 1 }).eval();
    const dec = new CrossDecoder().eval();
    const fn = (features: Tensor, tokens: Tensor) =>
      dec.call(tokens, ops.gelu(conv.call(features)).permute(0, 2, 1));
    const fast = compile(fn, {
      dynamic: { features: { 2: { max: 64 } }, tokens: { 1: { max: 32 } } },
    });
    for (const [f, t] of [[20, 5], [20, 7], [20, 8], [20, 6], [21, 6]] as const) {
      const features = randn(1, 8, f);
      const tokens = randint(0, 50, [1, t]);
      expectTreeClose(fast(features, tokens), fn(features, tokens), `(${f}, ${t})`);
    }
    expect(fast.stats.compiles).toBe(2);
    const s = fast.stats.specializations.map((r) => r.reason);
    expect(s[0]).toMatch(/^features\.shape\[2\] = 20 is specialized: dim 2 of convolution /);
    expect(s[0]).toContain("is 16 at features.shape[2] = 32, tokens.shape[1] = 8 but 9 at " +
      "features.shape[2] = 17, tokens.shape[1] = 8");
    expect(s[0]).toMatch(/not a growing integer affine function of the sizes$/);
    const tokens = ["5 <= tokens.shape[1] <= 8"];
    expect(sizeGuards(fast)).toEqual([tokens, tokens]);
  });
});
