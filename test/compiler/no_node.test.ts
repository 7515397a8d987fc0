// compile() where Node's built-ins are not there (a runtime without node:module or
// node:inspector): compiler/ reaches them only through compiler/node_builtins.ts, lazily, so
// the compiler still loads and compiles, and with no inspector the static size-branch oracle is
// the one asked. Here ts-morph cannot be loaded either (no `require`), so the source analysis
// fails, and without an inspector nothing else can see what the code reads: compile() runs it
// in replay mode (its code on every call), never a program that may keep a stale value. The
// browser build bundles the analysis (test/browser/bundle.test.ts runs graph mode there).
// Simulated by hiding every built-in from process.getBuiltinModule before the compiler is
// first imported (this file runs in its own module registry).

import { expect, it } from "vitest";
import type { Tensor } from "../../index.ts";
import { expectTreeClose as expectClose } from "./fixtures/close.ts";

it("without Node's built-ins the compiler loads, and runs code it cannot analyse in replay mode", async () => {
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
    expect(fast.stats.mode).toBe("replay");
    expect(fast.stats.replayReasons.map((r) => r.reason)).toEqual([
      "the source analysis failed (ts-morph cannot be loaded here (no node:module)) and " +
        "compile() cannot tell what the code reads here (node:inspector is not available here)",
    ]);
  } finally {
    process.getBuiltinModule = saved;
  }
});
