// The size-branch oracle (compiler/size_oracle.ts): the static oracle, for environments
// without node:inspector or forced with KILN_SIZE_ORACLE=static, keeps every dynamic dim
// static and never changes a result; the coverage oracle records over the one shared
// inspector session, so another stage's use of the inspector (the source analysis locating a
// function, a free-variable read) during a recording does not wipe V8's block counters.

import { runInThisContext } from "node:vm";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { locateOriginal } from "../../compiler/analyze_locate.ts";
import { coverageUnavailable, TraceCoverage } from "../../compiler/coverage.ts";
import { readFreeVariables } from "../../compiler/freevars.ts";
import { debuggerIsOn } from "../../compiler/inspector.ts";
import { sizeBranchOracle, staticOracle } from "../../compiler/size_oracle.ts";
import { nn, randn, type Tensor } from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { expectTreeClose as expectClose } from "./fixtures/close.ts";
import { taggedLines, withEnv } from "./fixtures/tagged.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

const { point } = taggedLines(import.meta.url);

const STATIC_REASON =
  "kept static: whether the code branches on a size is not checked here " +
  "(KILN_SIZE_ORACLE=static)";

describe("the static oracle", () => {
  it("answers 'it branches' without building anything", () => {
    const q = staticOracle("testing").ask({ name: "f", fn: undefined, modules: () => [] });
    let built = false;
    const r = q.decide(() => {
      built = true;
      return { ok: true };
    });
    q.close();
    expect(built).toBe(false);
    expect(r).toEqual({
      ok: false,
      why: "kept static: whether the code branches on a size is not checked here (testing)",
    });
  });

  it("KILN_SIZE_ORACLE=static: a declared dynamic dim compiles per size, results eager's", () => {
    const fn = (x: Tensor) => x.exp().mul(x.shape[0]!).sum(0);
    const sizes = [40, 50, 33, 64];
    const shared = compile(fn, { dynamic: { x: { 0: {} } } });
    const exact = compile(fn, { dynamic: { x: { 0: {} } }, recompileLimit: 100 });
    withEnv("KILN_SIZE_ORACLE", "static", () => {
      expect(sizeBranchOracle().kind).toBe("static");
      for (const n of sizes) {
        const x = randn(n);
        expectClose(exact(x), fn(x));
      }
    });
    for (const n of sizes) {
      const x = randn(n);
      expectClose(shared(x), fn(x));
    }
    // The default oracle shares one program over [33, 64]; the static one compiles each size.
    expect(shared.stats.compiles).toBe(1);
    expect(exact.stats.compiles).toBe(sizes.length);
    expect(exact.stats.specializations.map((s) => s.reason)).toEqual(
      sizes.map((n) => `x.shape[0] = ${n} is specialized: ${STATIC_REASON}`),
    );
  });

  it("automatic dynamism of a module: every new size is its own exact program", () => {
    const model = new nn.Sequential(new nn.Linear(8, 8), new nn.ReLU()).eval();
    const fast = compile(model, { recompileLimit: 100 });
    withEnv("KILN_SIZE_ORACLE", "static", () => {
      for (const n of [8, 9, 13, 9, 16]) {
        const x = randn(n, 8);
        expectClose(fast(x), model.call(x));
      }
    });
    // 8, then 9 (now dynamic, kept static), 13 and 16; the second 9 hits its exact entry.
    expect(fast.stats.compiles).toBe(4);
    expect(fast.stats.cacheHits).toBe(1);
    expect(fast.guards.flat().some((g) => g.kind === "range")).toBe(false);
    expect(fast.stats.specializations[0]!.reason).toBe(
      `input.shape[0] = 9 is specialized: ${STATIC_REASON}`,
    );
  });

  it("a bad KILN_SIZE_ORACLE names the variable and its values", () => {
    withEnv("KILN_SIZE_ORACLE", "sometimes", () =>
      expect(() => sizeBranchOracle()).toThrow(
        'KILN_SIZE_ORACLE must be "static" or "coverage", got "sometimes"',
      ));
    withEnv("KILN_SIZE_ORACLE", "coverage", () =>
      expect(sizeBranchOracle().kind).toBe("coverage"));
  });
});

// ---- the coverage oracle's counters ---------------------------------------------------------

function probeNeverRun(n: number): number {
  if (n > 3) return 1; // @never
  return 2;
}

function probeRun(n: number): number {
  if (n > 3) return 1; // @run
  return 2;
}

describe("the coverage oracle over one shared inspector session", () => {
  const recording = coverageUnavailable() === undefined;

  it("keeps its counters while the analysis and free-variable reads use the inspector", () => {
    const started = TraceCoverage.start([point("never", "n > 3"), point("run", "n > 3")]);
    if (!recording) {
      expect(started.kind).toBe("unavailable");
      return;
    }
    if (started.kind !== "recording") throw new Error(JSON.stringify(started));
    const c = started.coverage;
    try {
      probeRun(5);
      // A function in a script the inspector has not named yet: locating it turns the
      // Debugger domain on (to replay scriptParsed); turning it off must wait for the
      // recording, or V8 would drop every block counter.
      const file = join(mkdtempSync(join(tmpdir(), "kiln-oracle-")), "fresh.js");
      const text = "(function kilnFresh(a) { return a + 1; })";
      writeFileSync(file, text);
      const fresh: unknown = runInThisContext(text, { filename: file });
      expect(locateOriginal(fresh as Function)?.file).toBe(file);
      expect(debuggerIsOn()).toBe(true);
      let scale = 2;
      const closure = (x: number) => x * scale;
      scale = 3;
      expect(readFreeVariables(closure, ["scale"]).values).toEqual([3]);
      expect(c.check([point("never", "n > 3"), point("run", "n > 3")])).toEqual([
        "not executed",
        "executed",
      ]);
      expect(c.spoiledBy).toBeUndefined();
    } finally {
      c.stop();
    }
    // The recording over, the domain is off again.
    expect(debuggerIsOn()).toBe(false);
  });
});
