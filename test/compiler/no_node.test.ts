// compile() where Node's built-ins are not there (a browser, or a runtime without
// node:inspector): compiler/ reaches them only through compiler/node_builtins.ts, lazily, so
// the compiler still loads and compiles; with no inspector the static size-branch oracle keeps
// every dynamic dim static, and results are eager's. Simulated here by hiding every built-in
// from process.getBuiltinModule before the compiler is first imported (this file runs in its
// own module registry).

import { expect, it } from "vitest";
import type { Tensor } from "../../index.ts";
import { expectTreeClose as expectClose } from "./fixtures/close.ts";

it("without Node's built-ins the compiler loads, compiles, keeps dynamic dims static", async () => {
  const saved = process.getBuiltinModule;
  process.getBuiltinModule = (() => undefined) as unknown as typeof process.getBuiltinModule;
  try {
    const { compile } = await import("../../compiler/index.ts");
    const { sizeBranchOracle } = await import("../../compiler/size_oracle.ts");
    const { inspectorUnavailable } = await import("../../compiler/inspector.ts");
    const { randn } = await import("../../index.ts");
    expect(inspectorUnavailable()).toBe("node:inspector is not available here");
    expect(sizeBranchOracle().kind).toBe("static");
    const fn = (x: Tensor) => x.exp().mul(2).sum(0);
    const fast = compile(fn, { dynamic: { x: { 0: {} } }, cache: "memory" });
    for (const n of [40, 50, 40]) {
      const x = randn(n, 3);
      expectClose(fast(x), fn(x));
    }
    expect(fast.stats.compiles).toBe(2);
    expect(fast.stats.cacheHits).toBe(1);
    expect(fast.stats.specializations[0]!.reason).toBe(
      "x.shape[0] = 40 is specialized: kept static: whether the code branches on a size is " +
        "not checked here (no node:inspector: node:inspector is not available here)",
    );
  } finally {
    process.getBuiltinModule = saved;
  }
});
