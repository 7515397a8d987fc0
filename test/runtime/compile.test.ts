// compileModule (runtime/compile.ts): the optimization pipeline runs on a clone and only on a
// cache miss (a memory or disk hit runs neither passes nor codegen), the caller's module is
// never changed, the optimized program computes exactly what the reference evaluator computes
// on the original, the settings that change code change the key and the ones that only
// observe do not, backends are chosen by name, `cache: false` compiles every time, and
// KILN_LOGS=perf reports compile times. Disk caches live in fresh temp dirs.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { type Literal, literalsIdentical } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import { fusionSummary } from "../../passes/index.ts";
import { compileKeyOptions, compileModule } from "../../runtime/compile.ts";
import {
  backendNames,
  backendTier,
  getBackend,
  ProgramCache,
  registerBackend,
} from "../../runtime/index.ts";
import { toleranceProblem } from "../../runtime/tiers.ts";
import { setLogTopics } from "../../util/log.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { FakeBackend } from "./fixtures/fake_backend.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kiln-compile-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  setLogTopics(undefined);
  vi.restoreAllMocks();
});

function corpus(name: string): Module {
  return CORPUS[name]!.build();
}

function sameResult(a: EvalValue, b: EvalValue): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameResult(x, b[i]!));
  }
  return literalsIdentical(a as Literal, b as Literal);
}

const memoryCache = () => new ProgramCache({ disk: false });

// The fake backend counts compiles and serializes for the disk cache.
const fake = new FakeBackend("compile-test");
registerBackend(fake);

describe("compileModule", () => {
  it("optimizes a clone on a miss and skips the passes and codegen on a hit", () => {
    const cache = memoryCache();
    const m = corpus("softmax");
    const before = printHlo(m);
    const before0 = fake.compiles;
    const first = compileModule(m, { backend: "fake", cache });
    expect(first.hit).toBe("miss");
    expect(fake.compiles).toBe(before0 + 1);
    expect(printHlo(m)).toBe(before); // the caller's module is untouched
    expect(first.executable.module).not.toBe(m);
    expect(fusionSummary(first.executable.module).byKind.kInput).toBeGreaterThan(0);
    expect(fusionSummary(m).list.some((k) => k.kind !== "unfused")).toBe(false);

    const second = compileModule(corpus("softmax"), { backend: "fake", cache });
    expect(second.hit).toBe("memory");
    expect(second.key).toBe(first.key);
    expect(second.executable).toBe(first.executable);
    expect(fake.compiles).toBe(before0 + 1);
  });

  it("a disk hit in a fresh cache runs neither the passes nor the backend's compile", () => {
    const m = corpus("layer_norm");
    const first = compileModule(m, { backend: "fake", cache: new ProgramCache({ disk: dir }) });
    expect(first.hit).toBe("miss");
    const compiles = fake.compiles;
    setLogTopics(["passes"]);
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((s: string | Uint8Array) => {
      lines.push(String(s));
      return true;
    });
    const again = compileModule(m, { backend: "fake", cache: new ProgramCache({ disk: dir }) });
    expect(again.hit).toBe("disk");
    expect(fake.compiles).toBe(compiles);
    expect(lines.filter((l) => l.includes("[kiln:passes]"))).toEqual([]);
    // The stored program is the optimized one, and it still computes the original's values.
    expect(printHlo(again.executable.module)).toBe(printHlo(first.executable.module));
    const inputs = CORPUS["layer_norm"]!.inputs();
    expect(sameResult(again.executable.run(inputs), evaluate(m, inputs))).toBe(true);
  });

  it.each(Object.keys(CORPUS))(
    "%s: the optimized program on every backend matches the evaluator on the original",
    (name) => {
      const entry = CORPUS[name]!;
      const m = entry.build();
      const inputs = entry.inputs();
      const expected = evaluate(m, inputs);
      for (const backend of backendNames()) {
        let r;
        try {
          r = compileModule(m, { backend, cache: false });
        } catch (e) {
          // The js backend declines bounded dynamic shapes by design (it names the reason).
          expect(String(e)).toMatch(/cannot compile/);
          continue;
        }
        expect(r.executable.backend).toBe(backend);
        const got = r.executable.run(inputs);
        // In the backend's tier: bit-identical, or within the tolerance tier's bound.
        if (backendTier(backend) === "exact") {
          expect(sameResult(got, expected), `${name} on ${backend}`).toBe(true);
        } else {
          expect(toleranceProblem(m, inputs, got, expected), `${name} on ${backend}`).toBeNull();
        }
      }
    },
  );

  it("optimize: false compiles the module as given, under a different key", () => {
    const cache = memoryCache();
    const m = corpus("mlp");
    const plain = compileModule(m, { backend: "interpreter", cache, optimize: false });
    expect(plain.executable.module).toBe(m);
    const optimized = compileModule(m, { backend: "interpreter", cache });
    expect(optimized.hit).toBe("miss");
    expect(optimized.key).not.toBe(plain.key);
    expect(fusionSummary(optimized.executable.module).kernels).toBeLessThan(
      fusionSummary(m).kernels,
    );
  });

  it("keys on the settings that change code, not on those that only observe", () => {
    const cache = memoryCache();
    const m = corpus("softmax");
    const base = compileModule(m, { backend: "interpreter", cache });
    const verified = compileModule(m, {
      backend: "interpreter",
      cache,
      pipeline: { verify: true, dumpDir: join(dir, "dump") },
    });
    expect(verified.hit).toBe("memory");
    expect(verified.key).toBe(base.key);
    const noFusion = compileModule(m, {
      backend: "interpreter",
      cache,
      pipeline: { disable: ["fuse-reductions", "fuse-elementwise"] },
    });
    expect(noFusion.hit).toBe("miss");
    expect(noFusion.key).not.toBe(base.key);
    expect(fusionSummary(noFusion.executable.module).byKind.kInput).toBe(0);
    // disable lists are sets: order and repeats do not matter
    expect(compileKeyOptions({ pipeline: { disable: ["b", "a", "b"] } })).toEqual(
      compileKeyOptions({ pipeline: { disable: ["a", "b"] } }),
    );
  });

  it("chooses the backend by name, the default without one, and names unknown ones", () => {
    const m = corpus("softmax");
    const r = compileModule(m, { cache: false });
    expect(r.executable.backend).toBe(getBackend().name);
    expect(compileModule(m, { backend: "interpreter", cache: false }).executable.backend).toBe(
      "interpreter",
    );
    expect(() => compileModule(m, { backend: "nope", cache: false })).toThrow(
      /unknown backend 'nope'; available: .*interpreter/,
    );
  });

  it("cache: false compiles every time", () => {
    const m = corpus("mlp");
    const n = fake.compiles;
    expect(compileModule(m, { backend: "fake", cache: false }).hit).toBe("miss");
    expect(compileModule(m, { backend: "fake", cache: false }).hit).toBe("miss");
    expect(fake.compiles).toBe(n + 2);
  });

  it("KILN_LOGS=perf reports compile and hit times", () => {
    setLogTopics(["perf"]);
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((s: string | Uint8Array) => {
      lines.push(String(s));
      return true;
    });
    const cache = memoryCache();
    compileModule(corpus("softmax"), { backend: "interpreter", cache });
    compileModule(corpus("softmax"), { backend: "interpreter", cache });
    const perf = lines.filter((l) => l.startsWith("[kiln:perf] compile"));
    expect(perf[0]).toMatch(/compile softmax on 'interpreter': [\d.]+ ms \(passes [\d.]+ ms/);
    expect(perf[1]).toMatch(/compile softmax on 'interpreter': memory hit in [\d.]+ ms/);
  });
});
