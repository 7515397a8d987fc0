// expectMaxCompiles (cli/testing.ts): passes within the budget, and above it throws naming the
// count and each recompile's reason as compile() recorded it; like `kiln recompiles`, a call
// that ran in replay mode or eagerly fails it unless allowFallback, and the message says why.

import { describe, expect, it } from "vitest";
import { CompileBudgetError, expectMaxCompiles } from "../../cli/testing.ts";
import { compile } from "../../compiler/index.ts";
import { randn, type Tensor } from "../../index.ts";

function breaks(x: Tensor): Tensor {
  const h = x.mul(2);
  if ((h.amax().item() as number) > 100) return h.div(10);
  return h.add(1);
}

function rows(x: Tensor): Tensor {
  if (x.shape[0]! > 3) return x.mul(2);
  return x.add(1);
}

function double(x: Tensor): Tensor {
  return x.mul(2);
}

describe("expectMaxCompiles", () => {
  it("holds within the budget and fails above it with the reasons", () => {
    const fast = compile(double, { cache: "memory", dynamic: false });
    fast(randn(2, 3));
    fast(randn(2, 3));
    expect(() => expectMaxCompiles(fast, 1)).not.toThrow();
    fast(randn(4, 3));
    expect(fast.stats.compiles).toBe(2);
    expect(() => expectMaxCompiles(fast, 2)).not.toThrow();
    let err: unknown;
    try {
      expectMaxCompiles(fast, 1);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CompileBudgetError);
    const msg = (err as Error).message;
    expect(msg).toContain("expected at most 1 compile(s), got 2 over 3 call(s)");
    expect(msg).toContain(`call 3: ${fast.stats.recompiles[0]!.reason}`);
    expect(() => expectMaxCompiles(fast, -1)).toThrow(/non-negative integer/);
  });

  it("replay mode fails it at 0 compiles, with the replay reason; allowFallback accepts it", () => {
    const fast = compile(breaks, { cache: "memory" });
    fast(randn(2, 3));
    fast(randn(2, 3));
    expect(fast.stats.compiles).toBe(0);
    let msg = "";
    try {
      expectMaxCompiles(fast, 0);
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toMatch(/^2 call\(s\) ran in replay mode, not as a compiled program/);
    expect(msg).toMatch(/replay mode: .*testing\.test\.ts:\d+:\d+: graph break: item\(\)/);
    expect(() => expectMaxCompiles(fast, 0, { allowFallback: true })).not.toThrow();
  });

  it("eager calls past the recompile limit fail it, each with its reason", () => {
    const fast = compile(double, { cache: "memory", dynamic: false, recompileLimit: 1 });
    const warn = console.warn;
    console.warn = () => {};
    try {
      fast(randn(2, 3));
      fast(randn(3, 3));
    } finally {
      console.warn = warn;
    }
    expect(() => expectMaxCompiles(fast, 1)).toThrow(
      /1 call\(s\) ran eagerly, not compiled[^]*call 2: ran eagerly past the recompile limit: x\.shape\[0\] was 2, now 3/,
    );
    expect(() => expectMaxCompiles(fast, 1, { allowFallback: true })).not.toThrow();
  });

  it("says which sizes were kept static and why", () => {
    const fast = compile(rows, { cache: "memory" });
    for (const n of [2, 3, 4]) fast(randn(n, 2));
    expect(() => expectMaxCompiles(fast, 1)).toThrow(
      /call 2: x\.shape\[0\] = 3 is specialized: kept static: the code branches on a size at .*testing\.test\.ts:/,
    );
  });
});
