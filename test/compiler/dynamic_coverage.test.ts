// A branch on a size keeps a bucketed dim static only when the traces compile() ran EVALUATED
// its condition (V8 block coverage, compiler/coverage.ts): a size check in a method the call
// never runs, or in an `else` it never takes, no longer costs the bucket its shared program,
// and results still equal eager's. When coverage cannot be used (KILN_NO_COVERAGE,
// NODE_V8_COVERAGE, someone else recording) every size branch keeps the dim static, as before.
// Each fixture below is run for the first time by the test that uses it: V8 gives block
// counts only for code it compiles while recording.

import { Session } from "node:inspector";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { coverageUnavailable, TraceCoverage, type SourcePoint } from "../../compiler/coverage.ts";
import { nn, randn, type Tensor } from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { expectTreeClose as expectClose } from "./fixtures/close.ts";
import { taggedLines, withEnv } from "./fixtures/tagged.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

const { line, point } = taggedLines(import.meta.url);

/** Whether this run can record coverage (not under `vitest --coverage`, NODE_V8_COVERAGE...). */
const recording = coverageUnavailable() === undefined;

// ---- fixtures --------------------------------------------------------------------------------

/** A size check in a helper method that forward calls only when `wide` is set. */
class Gated extends nn.Module {
  wide = false;
  proj = new nn.Linear(4, 4);

  forward(x: Tensor): Tensor {
    const y = this.proj.call(x);
    if (this.wide) return this.widen(y);
    return y.softmax(1).mul(y).sum(1);
  }

  widen(y: Tensor): Tensor {
    const T = y.shape[1]!;
    if (T > 64) return y.sum(1); // @widen
    return y.mean(1);
  }
}

/** The same as free functions. */
function gatedFn(x: Tensor, wide: boolean): Tensor {
  if (wide) return wideFn(x);
  return x.exp().sum(0);
}

function wideFn(x: Tensor): Tensor {
  return x.shape[0]! > 40 ? x.sum(0) : x.mul(2).sum(0); // @wideFn
}

/** A size check in an `else` the call never takes. */
function branchy(x: Tensor, mode: string): Tensor {
  if (mode === "plain") {
    return x.mul(2).add(x.mean(0)).sum(0);
  } else {
    const T = x.shape[0]!;
    if (T % 2 === 0) return x.exp().sum(0); // @else
    return x.sum(0);
  }
}

/** For the fallback: would share buckets with coverage (fallbackWide never runs). */
function fallbackGate(x: Tensor, wide: boolean): Tensor {
  return wide ? fallbackWide(x) : x.neg().sum(0);
}

function fallbackWide(x: Tensor): Tensor {
  return x.shape[0]! > 40 ? x.sum(0) : x.mul(3).sum(0); // @fallback
}

/** For the recording's own tests: called, never called, and a throw on one size. */
function probeCalled(n: number): number {
  if (n > 3) return 1; // @called
  return 2;
}

function probeNever(n: number): number {
  if (n > 3) return 1; // @never
  return 2;
}

function probeEarly(n: number): number {
  if (n > 3) return 1; // @early
  return 2;
}

function probeSpoiled(n: number): number {
  if (n > 3) return 1; // @spoiled
  return 2;
}

function throwsAt50(x: Tensor): Tensor {
  if (x.shape[0]! === 50) throw new Error("fifty"); // @throws
  return x.sum(0);
}

// ---- tests -----------------------------------------------------------------------------------

describe("a size branch the trace never executed does not keep the dim static", () => {
  it("a module's helper method run only under a flag: off shares buckets, on stays static", () => {
    const off = new Gated();
    const fast = compile(off, { dynamic: { x: { 1: {} } } });
    const lengths = [40, 33, 64, 47, 65, 100, 128];
    for (const n of lengths) {
      const x = randn(2, n, 4);
      expectClose(fast(x), off.call(x));
    }
    expect(coverageUnavailable() ?? "").not.toMatch(/already being recorded/); // it stopped
    if (recording) {
      // One program for [33, 64] and one for [65, 128]: widen() never ran in either trace.
      expect(fast.stats.specializations).toEqual([]);
      expect(fast.stats.compiles).toBe(2);
    } else {
      expect(fast.stats.compiles).toBe(lengths.length);
    }

    const on = new Gated();
    on.wide = true;
    const fastOn = compile(on, { dynamic: { x: { 1: {} } }, recompileLimit: 100 });
    for (const n of [40, 50, 70]) {
      const x = randn(2, n, 4);
      expectClose(fastOn(x), on.call(x));
    }
    expect(fastOn.stats.compiles).toBe(3);
    const reason = fastOn.stats.specializations[0]!.reason;
    expect(reason).toMatch(/^x\.shape\[1\] = 40 is specialized: kept static: the code branches/);
    expect(reason).toContain(`dynamic_coverage.test.ts:${line("widen")}:`);
    expect(reason).toContain("in this.widen (if `T > 64`)");
  });

  it("the same with free functions: the helper that is never called does not count", () => {
    const fn = (x: Tensor) => gatedFn(x, false);
    const fast = compile(fn, { dynamic: { x: { 0: {} } } });
    for (const n of [40, 34, 64, 41, 50]) {
      const x = randn(n);
      expectClose(fast(x), fn(x));
    }
    if (recording) {
      expect(fast.stats.specializations).toEqual([]);
      expect(fast.stats.compiles).toBe(1);
    } else {
      expect(fast.stats.compiles).toBe(5);
    }

    const fnOn = (x: Tensor) => gatedFn(x, true);
    const fastOn = compile(fnOn, { dynamic: { x: { 0: {} } }, recompileLimit: 100 });
    for (const n of [40, 41, 64]) {
      const x = randn(n);
      expectClose(fastOn(x), fnOn(x));
    }
    expect(fastOn.stats.compiles).toBe(3);
    expect(fastOn.stats.specializations[0]!.reason).toContain(
      `dynamic_coverage.test.ts:${line("wideFn")}:`,
    );
  });

  it("a branch in an `else` the call does not take: the first bucket shares one program", () => {
    const fn = (x: Tensor) => branchy(x, "plain");
    const fast = compile(fn, { dynamic: { x: { 0: {} } }, recompileLimit: 100 });
    // The first call compiles branchy() while recording, so V8 counts its blocks: the `else`
    // never ran. Eager runs only after it, so that it is still fresh code then.
    const first = randn(40);
    const got = fast(first);
    expectClose(got, fn(first));
    for (const n of [33, 64, 51, 38]) {
      const x = randn(n);
      expectClose(fast(x), fn(x));
    }
    if (recording) {
      expect(fast.stats.specializations).toEqual([]);
      expect(fast.stats.compiles).toBe(1);
    } else {
      expect(fast.stats.compiles).toBe(5);
    }
    // A later bucket sees branchy() as a whole function that ran (V8 dropped its block
    // counts when the first recording stopped), so its branch counts as executed: static.
    for (const n of [65, 90]) {
      const x = randn(n);
      expectClose(fast(x), fn(x));
    }
    const last = fast.stats.specializations.at(-1)!.reason;
    expect(last).toMatch(/^x\.shape\[0\] = 90 is specialized: kept static/);
    expect(last).toContain(`dynamic_coverage.test.ts:${line("else")}:`);
  });

  it("a trace that throws still stops the recording", () => {
    const fast = compile((x: Tensor) => throwsAt50(x), { dynamic: { x: { 0: {} } } });
    expect(() => fast(randn(50))).toThrow("fifty");
    expect(coverageUnavailable() ?? "").not.toMatch(/already being recorded/);
  });
});

describe("without coverage, every size branch keeps the dim static", () => {
  it("KILN_NO_COVERAGE=1: the branch is never run, yet the dim is specialized", () => {
    withEnv("KILN_NO_COVERAGE", "1", () => {
      expect(coverageUnavailable()).toBe("KILN_NO_COVERAGE is set");
      const fn = (x: Tensor) => fallbackGate(x, false);
      const fast = compile(fn, { dynamic: { x: { 0: {} } }, recompileLimit: 100 });
      for (const n of [40, 50]) {
        const x = randn(n);
        expectClose(fast(x), fn(x));
      }
      expect(fast.stats.compiles).toBe(2);
      expect(fast.stats.specializations[0]!.reason).toContain(
        `dynamic_coverage.test.ts:${line("fallback")}:`,
      );
    });
  });

  it("another recorder is never disturbed: NODE_V8_COVERAGE, vitest --coverage", () => {
    withEnv("KILN_NO_COVERAGE", undefined, () =>
      withEnv("NODE_V8_COVERAGE", "/tmp/kiln-unused", () => {
        expect(coverageUnavailable()).toMatch(/^NODE_V8_COVERAGE is set/);
        const started = TraceCoverage.start([point("never", "n > 3")]);
        expect(started.kind === "unavailable" && started.why).toMatch(/^NODE_V8_COVERAGE is set/);
      }),
    );
    const state = (globalThis as Record<string, unknown>)["__vitest_worker__"] as
      | { config: { coverage: unknown } }
      | undefined;
    if (state) {
      const saved = state.config.coverage;
      state.config.coverage = { enabled: true, provider: "v8" };
      try {
        withEnv("KILN_NO_COVERAGE", undefined, () =>
          withEnv("NODE_V8_COVERAGE", undefined, () =>
            expect(coverageUnavailable()).toBe("vitest records coverage (provider v8)")));
      } finally {
        state.config.coverage = saved;
      }
    }
  });
});

describe("TraceCoverage", () => {
  /** A recording, or (where this run cannot record) a check that start says why. */
  const begin = (points: SourcePoint[]): TraceCoverage | undefined => {
    const c = TraceCoverage.start(points);
    if (!recording) {
      expect(c).toEqual({ kind: "unavailable", why: coverageUnavailable() });
      return undefined;
    }
    if (c.kind !== "recording") throw new Error(JSON.stringify(c));
    return c.coverage;
  };

  it("tells a condition that ran from one in a function that never ran", () => {
    const c = begin([point("called", "n > 3"), point("never", "n > 3")]);
    if (!c) return;
    try {
      expect(coverageUnavailable()).toMatch(/already being recorded/);
      probeCalled(5);
      expect(c.check([point("called", "n > 3"), point("never", "n > 3")])).toEqual([
        "executed",
        "not executed",
      ]);
      // Counts restart at every take; what was seen stays seen.
      expect(c.check([point("called", "n > 3")])).toEqual(["executed"]);
      // A point whose text is not what runs there cannot be mapped: unknown, never "not".
      expect(c.check([{ ...point("never", "n > 3"), text: "m > 3" }])).toEqual(["unknown"]);
    } finally {
      c.stop();
    }
    expect(coverageUnavailable()).toBeUndefined();
  });

  it("records nothing when a point could only count as executed", () => {
    probeEarly(1);
    const early = TraceCoverage.start([point("never", "n > 3"), point("early", "n > 3")]);
    const bad = TraceCoverage.start([{ ...point("never", "n > 3"), text: "m > 3" }]);
    if (recording) {
      const ranBefore = "its function ran before the trace";
      expect(early).toEqual({ kind: "executed", index: 1, why: ranBefore });
      expect(bad).toEqual({ kind: "executed", index: 0, why: "it cannot be mapped" });
    } else {
      expect(early.kind).toBe("unavailable");
    }
    expect(coverageUnavailable() ?? "").not.toMatch(/already being recorded/);
  });

  it("rules nothing out once another session turns the Debugger off mid-recording", () => {
    const c = begin([point("spoiled", "n > 3")]);
    if (!c) return;
    try {
      const other = new Session();
      other.connect();
      other.post("Debugger.enable");
      other.post("Debugger.disable");
      other.disconnect();
      expect(c.check([point("spoiled", "n > 3")])).toEqual(["unknown"]);
      expect(c.spoiledBy).toMatch(/dropped its block counters/);
    } finally {
      c.stop();
    }
  });
});
