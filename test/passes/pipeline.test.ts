// Tests of the pass pipeline: fixpoint groups stop when nothing changes and report passes that
// keep changing past maxIterations, passes are disabled by name, dumps land in a directory with
// the expected file names, the timing report is filled in (and printed with KILN_LOGS=passes),
// failures name the pass, the verifier runs after every pass, and the default pipeline
// simplifies and takes extra passes after its simplification group.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Module } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";
import { scalarShape } from "../../ir/shape.ts";
import type { Pass } from "../../passes/pass.ts";
import {
  defaultPipeline,
  fixpoint,
  PassError,
  Pipeline,
  simplificationGroup,
} from "../../passes/pipeline.ts";
import { setLogTopics } from "../../util/log.ts";
import { compareModules, normalize } from "./support.ts";

const TEXT = `HloModule m
ENTRY main {
  x = f32[2,3] parameter(0)
  one = f32[] constant(1)
  ones = f32[2,3] broadcast(one), dimensions={}
  m = f32[2,3] multiply(x, ones)
  e1 = f32[2,3] exponential(m)
  e2 = f32[2,3] exponential(x)
  t1 = f32[3,2] transpose(e1), dimensions={1,0}
  t2 = f32[2,3] transpose(t1), dimensions={1,0}
  ROOT s = f32[2,3] add(t2, e2)
}
`;

/** A pass that reports a change on its first `n` runs (and changes nothing real). */
function changesTimes(name: string, n: number): Pass & { runs: number } {
  return {
    name,
    runs: 0,
    run() {
      this.runs++;
      return this.runs <= n;
    },
  };
}

afterEach(() => setLogTopics(undefined));

describe("fixpoint groups", () => {
  it("repeat until a round changes nothing", () => {
    const a = changesTimes("a", 3);
    const b = changesTimes("b", 1);
    const p = new Pipeline("p", [fixpoint("g", [a, b])], { verify: false });
    expect(p.run(parseHlo(TEXT))).toBe(true);
    expect(a.runs).toBe(4); // three changing rounds and one quiet round
    expect(b.runs).toBe(4);
    const g = p.report.find((r) => r.name === "g")!;
    expect(g).toMatchObject({ kind: "fixpoint", iterations: 4, changed: true });
    expect(g.keptChanging).toBeUndefined();
    expect(p.report.find((r) => r.name === "a")).toMatchObject({
      kind: "pass",
      group: "g",
      iterations: 4,
      changed: true,
    });
    expect(p.warnings).toEqual([]);
  });

  it("stop after maxIterations and report the passes that kept changing", () => {
    const always = changesTimes("always", Infinity);
    const quiet = changesTimes("quiet", 0);
    const p = new Pipeline("p", [fixpoint("g", [always, quiet], 5)], { verify: false });
    expect(p.run(parseHlo(TEXT))).toBe(true);
    expect(always.runs).toBe(5);
    const g = p.report.find((r) => r.name === "g")!;
    expect(g.iterations).toBe(5);
    expect(g.keptChanging).toEqual(["always"]);
    expect(p.warnings).toHaveLength(1);
    expect(p.warnings[0]).toMatch(/fixpoint 'g' still changed the module after 5 iterations/);
    expect(p.warnings[0]).toMatch(/kept changing it: always/);
  });

  it("throw a PassError at maxIterations when asked to", () => {
    const p = new Pipeline("p", [fixpoint("g", [changesTimes("loop", Infinity)], 3)], {
      verify: false,
      onNoFixpoint: "error",
    });
    expect(() => p.run(parseHlo(TEXT))).toThrow(PassError);
    expect(() =>
      new Pipeline("p", [fixpoint("g", [changesTimes("loop", Infinity)], 3)], {
        verify: false,
        onNoFixpoint: "error",
      }).run(parseHlo(TEXT)),
    ).toThrow(/pass 'g': fixpoint 'g' still changed .* kept changing it: loop/);
  });

  it("nest: an inner group's change counts as a change of the outer round", () => {
    const inner = changesTimes("inner", 2);
    const p = new Pipeline("p", [fixpoint("outer", [fixpoint("inner-g", [inner])])], {
      verify: false,
    });
    p.run(parseHlo(TEXT));
    // round 1: inner-g runs inner 3 times (2 changes + quiet); round 2: inner once, quiet.
    expect(inner.runs).toBe(4);
    expect(p.report.find((r) => r.name === "outer")!.iterations).toBe(2);
    expect(p.report.find((r) => r.name === "inner-g")!.group).toBe("outer");
  });

  it("reject a bad maxIterations", () => {
    expect(() => fixpoint("g", [], 0)).toThrow(/maxIterations must be an integer >= 1/);
  });
});

describe("pipeline options", () => {
  it("disable skips passes and groups by name", () => {
    const a = changesTimes("a", 1);
    const b = changesTimes("b", 1);
    const p = new Pipeline("p", [a, fixpoint("g", [b])], { verify: false, disable: ["a", "g"] });
    expect(p.run(parseHlo(TEXT))).toBe(false);
    expect(a.runs + b.runs).toBe(0);
    expect(p.report).toEqual([]);
  });

  it("disabling cse in the default pipeline keeps the duplicate exponentials", () => {
    const m = parseHlo(TEXT);
    defaultPipeline({ disable: ["cse"] }).run(m);
    expect(normalize(m).match(/exponential\(/g)).toHaveLength(2);
    const all = parseHlo(TEXT);
    defaultPipeline().run(all);
    expect(normalize(all).match(/exponential\(/g)).toHaveLength(1);
  });

  it("writes 000-input.hlo and one NNN-<pass>.hlo per pass that changed the module", () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-dump-"));
    try {
      const p = new Pipeline(
        "p",
        [changesTimes("no-change", 0), defaultPipeline({}), changesTimes("odd name/x", 1)],
        { dumpDir: dir },
      );
      expect(p.verify).toBe(true); // dumping turns verification on
      p.run(parseHlo(TEXT));
      const files = readdirSync(dir).sort();
      expect(files[0]).toBe("000-input.hlo");
      expect(files).toContain("001-algebraic-simplifier.hlo");
      expect(files[files.length - 1]).toMatch(/^\d{3}-odd_name_x\.hlo$/);
      expect(files.some((f) => f.includes("no-change"))).toBe(false);
      files.forEach((f, k) => expect(f.startsWith(String(k).padStart(3, "0"))).toBe(true));
      // Every dump is a module the parser reads back.
      for (const f of files) parseHlo(readFileSync(join(dir, f), "utf8"));
      expect(normalize(readFileSync(join(dir, "000-input.hlo"), "utf8"))).toBe(normalize(TEXT));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes the dump directory from KILN_DUMP_DIR", () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-dump-env-"));
    vi.stubEnv("KILN_DUMP_DIR", dir);
    try {
      const p = defaultPipeline();
      expect(p.dumpDir).toBe(dir);
      p.run(parseHlo(TEXT));
      expect(readdirSync(dir)).toContain("000-input.hlo");
    } finally {
      vi.unstubAllEnvs();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("verifies by default under vitest, and can be turned off", () => {
    expect(defaultPipeline().verify).toBe(true);
    expect(defaultPipeline({ verify: false }).verify).toBe(false);
  });
});

describe("report and logging", () => {
  it("collects name, ms, changed and iterations for every pass and group", () => {
    const p = defaultPipeline();
    p.run(parseHlo(TEXT));
    const names = p.report.map((r) => r.name);
    expect(names).toEqual(["simplify", "algebraic-simplifier", "constant-folding", "cse", "dce"]);
    for (const r of p.report) {
      expect(r.ms).toBeGreaterThanOrEqual(0);
      expect(r.iterations).toBeGreaterThanOrEqual(1);
    }
    expect(p.report.find((r) => r.name === "algebraic-simplifier")!.changed).toBe(true);
    expect(p.report.find((r) => r.name === "cse")!.changed).toBe(true);
    expect(p.formatReport()).toMatch(/^pipeline 'default':\nsimplify\s+\d+\.\d\d ms/);
  });

  it("prints the report when KILN_LOGS includes passes, and nothing otherwise", () => {
    const writes: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      writes.push(String(chunk));
      return true;
    });
    try {
      setLogTopics([]);
      defaultPipeline().run(parseHlo(TEXT));
      expect(writes).toEqual([]);
      setLogTopics(["passes"]);
      defaultPipeline().run(parseHlo(TEXT));
      const text = writes.join("");
      expect(text).toMatch(/\[kiln:passes\] pipeline 'default':/);
      expect(text).toMatch(/\[kiln:passes\]\s+cse\s+\d+\.\d\d ms {2}changed/);
      expect(text).toMatch(/algebraic-simplifier: .*transpose-transpose x1/);
    } finally {
      spy.mockRestore();
    }
  });
});

describe("failures name the pass", () => {
  it("an exception inside a pass is rethrown as a PassError naming it", () => {
    const boom: Pass = {
      name: "boom",
      run() {
        throw new TypeError("undefined is not a function");
      },
    };
    const p = new Pipeline("p", [fixpoint("g", [changesTimes("ok", 0), boom])]);
    let caught: unknown;
    try {
      p.run(parseHlo(TEXT));
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(PassError);
    expect((caught as PassError).pass).toBe("boom");
    expect((caught as PassError).message).toBe("pass 'boom': failed: undefined is not a function");
    expect((caught as PassError).cause).toBeInstanceOf(TypeError);
    // The report still shows what ran before the failure.
    expect(p.report.map((r) => r.name)).toEqual(["g", "ok", "boom"]);
  });

  it("a pass that leaves an invalid module is caught by the verifier and named", () => {
    const corrupt: Pass = {
      name: "corrupt",
      run(m: Module) {
        // Claims the ROOT is a scalar: the stored shape no longer follows the shape rule.
        m.entry.root.shape = scalarShape("f32");
        return true;
      },
    };
    const p = new Pipeline("p", [corrupt]);
    expect(() => p.run(parseHlo(TEXT))).toThrow(
      /pass 'corrupt': left an invalid module \(verifier ran after it\): verifier: %s in main/,
    );
    // Without verification nothing checks it.
    expect(() => new Pipeline("p", [corrupt], { verify: false }).run(parseHlo(TEXT))).not.toThrow();
  });

  it("an invalid input module is reported before any pass runs", () => {
    const m = parseHlo(TEXT);
    m.entry.root.shape = scalarShape("f32");
    const a = changesTimes("a", 0);
    expect(() => new Pipeline("p", [a]).run(m)).toThrow(
      /pass 'input': the input module is invalid/,
    );
    expect(a.runs).toBe(0);
  });
});

describe("defaultPipeline", () => {
  it("simplifies, folds, merges and cleans up, keeping the values", () => {
    const before = parseHlo(TEXT);
    const m = parseHlo(TEXT);
    expect(defaultPipeline().run(m)).toBe(true);
    expect(normalize(m)).toBe(
      normalize(`HloModule m
ENTRY main {
  x = f32[2,3] parameter(0)
  e1 = f32[2,3] exponential(x)
  ROOT s = f32[2,3] add(e1, e1)
}`),
    );
    expect(compareModules(before, m, 7)).toBeNull();
  });

  it("appends extra passes after the simplification group", () => {
    const seen: string[] = [];
    const extra: Pass = {
      name: "fuse-test",
      run(m: Module) {
        seen.push(normalize(m));
        return false;
      },
    };
    const p = defaultPipeline({}, [extra]);
    expect(p.items[0]!.name).toBe("simplify");
    p.run(parseHlo(TEXT));
    expect(seen).toHaveLength(1);
    expect(seen[0]).not.toContain("transpose"); // simplified before the extra pass ran
    expect(p.report[p.report.length - 1]!.name).toBe("fuse-test");
  });

  it("runs a nested pipeline inline, with one dump sequence and one report", () => {
    const inner = new Pipeline("inner", [simplificationGroup()], { verify: false });
    const outer = new Pipeline("outer", [inner, changesTimes("after", 0)]);
    outer.run(parseHlo(TEXT));
    expect(outer.report.map((r) => r.name)).toContain("simplify");
    expect(outer.report[outer.report.length - 1]!.name).toBe("after");
  });

  it("is idempotent: a second run changes nothing", () => {
    const m = parseHlo(TEXT);
    defaultPipeline().run(m);
    const once = normalize(m);
    expect(defaultPipeline().run(m)).toBe(false);
    expect(normalize(m)).toBe(once);
  });
});
