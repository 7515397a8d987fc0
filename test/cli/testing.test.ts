// expectMaxCompiles (cli/testing.ts): passes within the budget, and above it throws naming the
// count and each recompile's reason as compile() recorded it.

import { describe, expect, it } from "vitest";
import { CompileBudgetError, expectMaxCompiles } from "../../cli/testing.ts";
import { compile } from "../../compiler/index.ts";
import { randn, type Tensor } from "../../index.ts";

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
});
