// cacheStats() and the cache-only mode: counts for an eager op run twice, a compiled function
// over two sizes of one bucket (a shape-dynamic hit), a disk hit in a fresh process; and the
// demo-like flow — warm a disk cache up in one process, rerun in another with
// KILN_COMPILE=never (nothing compiles, it passes), then a size outside the buckets and an
// eager shape never seen (each fails, naming the key and the nearest cached entry).

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  cacheStats,
  compile,
  CompileNeverError,
  compileMode,
  exp,
  lazy,
  resetCacheStats,
  setCompileMode,
  type CacheStatistics,
  type Tensor,
  tensor,
} from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { findCompiler } from "../../runtime/native/toolchain.ts";
import { resetOpCache, setEagerBackend } from "../../tensor/dispatch.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const worker = join(here, "fixtures", "cache_only_worker.ts");
const ci = process.env["CI"] !== undefined && !["", "0", "false"].includes(process.env["CI"]!);
const haveCompiler = findCompiler().ok;

const filled = (rows: number, cols: number): Tensor =>
  tensor(Array.from({ length: rows }, (_, r) => Array.from({ length: cols }, (_, c) => r * c)));

let dir: string;
let programs: ProgramCache;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kiln-stats-"));
  programs = new ProgramCache({ disk: join(dir, "programs") });
  setDefaultProgramCache(programs);
  setEagerBackend("js");
  resetOpCache();
  resetCacheStats();
});

afterEach(() => {
  setCompileMode(undefined);
  setEagerBackend(undefined);
  setDefaultProgramCache(undefined);
  resetOpCache();
  rmSync(dir, { recursive: true, force: true });
});

describe("cacheStats()", () => {
  it("counts an eager op run twice: one compile, then one memory hit on the same entry", () => {
    const x = filled(3, 5);
    exp(x);
    exp(x);
    const s = cacheStats();
    expect(s.byKind.eager).toMatchObject({
      requests: 2,
      compiles: 1,
      hits: { memory: 1, disk: 0, shapeDynamic: 0 },
    });
    expect(s.byKind.eager.compileMs).toBeGreaterThan(0);
    const mine = s.entries.filter((e) => e.source === "exp");
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ kind: "eager", reads: 1, compiles: 1 });
    expect(JSON.parse(mine[0]!.key)).toMatchObject({ backend: "js" });
    // The totals add the kinds up.
    expect(s.requests).toBe(s.compiles + s.hits.memory + s.hits.disk + s.hits.shapeDynamic);
  });

  it("counts a compiled function over two sizes of one bucket as a shape-dynamic hit", () => {
    const fast = compile((ids: Tensor) => ids.mul(2).add(1).sum(1), {
      dynamic: { ids: { 1: {} } },
      cache: new ProgramCache({ disk: false }),
    });
    fast(filled(1, 5));
    fast(filled(1, 7)); // the pow2 bucket (4, 8] holds both
    const c = cacheStats().byKind.compiled;
    expect(c).toMatchObject({ requests: 2, compiles: 1, hits: { shapeDynamic: 1, memory: 0 } });
    const entry = cacheStats().entries.find((e) => e.kind === "compiled");
    expect(entry).toMatchObject({ reads: 1, compiles: 1, hits: { shapeDynamic: 1 } });
    // A third size in the bucket reads the same entry again; a static program's hit is memory.
    fast(filled(1, 6));
    expect(cacheStats().byKind.compiled.hits.shapeDynamic).toBe(2);
  });

  it("counts lazy regions: the second run of the same step is a memory hit", () => {
    const step = () => lazy(() => filled(2, 3).mul(3).add(1).sum()).item();
    step();
    step();
    expect(cacheStats().byKind.lazy).toMatchObject({ requests: 2, compiles: 1 });
    expect(cacheStats().byKind.lazy.hits.memory).toBe(1);
  });

  it("writes an eager op's program to disk after the task, and a new cache reads it", () => {
    const kprogs = () =>
      readdirSync(join(dir, "programs")).filter((n) => n.endsWith(".kprog")).length;
    exp(filled(2, 9));
    expect(kprogs()).toBe(0); // deferred: a loop of new shapes pays no write per op
    expect(programs.flushWrites()).toBe(1);
    expect(kprogs()).toBe(1);
    setDefaultProgramCache(new ProgramCache({ disk: join(dir, "programs") }));
    resetOpCache();
    resetCacheStats();
    exp(filled(2, 9));
    expect(cacheStats().byKind.eager).toMatchObject({
      requests: 1,
      compiles: 0,
      hits: { disk: 1 },
    });
  });

  it("resetCacheStats() zeroes the counters and forgets the entries", () => {
    exp(filled(2, 2));
    expect(cacheStats().requests).toBeGreaterThan(0);
    resetCacheStats();
    const s = cacheStats();
    expect(s.requests).toBe(0);
    expect(s.entries).toEqual([]);
    exp(filled(2, 2)); // a hit on an entry from before the reset counts from zero
    expect(cacheStats().entries.find((e) => e.source === "exp")).toMatchObject({ reads: 1 });
  });
});

describe("cache-only mode in process", () => {
  it("setCompileMode('never') makes an eager compile an error naming the nearest entry", () => {
    exp(filled(3, 5));
    setCompileMode("never");
    exp(filled(3, 5)); // cached: fine
    let err: unknown;
    try {
      exp(filled(3, 7));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CompileNeverError);
    const e = err as CompileNeverError;
    expect(e.message).toMatch(
      /^exp f32\[3,7\]: no cached program; nearest f32\[3,5\] \(dim 1: 7 vs 5\)/,
    );
    expect(e.message).toContain('setCompileMode("never")');
    expect(e.key).toMatch(/"backend":"js"/);
    expect(e.message).toContain(e.key);
    expect(cacheStats().byKind.eager.compiles).toBe(1);
  });

  it("a compiled function's new size outside every bucket names the bucket bound", () => {
    const fast = compile((ids: Tensor) => ids.mul(2).sum(1), {
      dynamic: { ids: { 1: {} } },
      cache: new ProgramCache({ disk: false }),
    });
    fast(filled(1, 5));
    setCompileMode("never");
    fast(filled(1, 6));
    expect(() => fast(filled(1, 129))).toThrow(
      /^compile\(.*\): no cached program; ids\.shape\[1\] 129 exceeds every cached bucket \(<=8\)/,
    );
  });

  it("KILN_COMPILE values other than never (or unset) are errors naming the allowed values", () => {
    expect(compileMode({})).toBe("auto");
    expect(compileMode({ KILN_COMPILE: "" })).toBe("auto");
    expect(compileMode({ KILN_COMPILE: "never" })).toBe("never");
    expect(() => compileMode({ KILN_COMPILE: "always" })).toThrow(
      /KILN_COMPILE=always is not a compile mode: set it to 'never' .* or leave it unset/,
    );
    // @ts-expect-error: a bad mode from untyped code
    expect(() => setCompileMode("sometimes")).toThrow(/not a compile mode .*"never", "auto"/);
  });
});

interface WorkerOut {
  stats: CacheStatistics;
  error?: { name: string; message: string };
}

function runWorker(cacheDir: string, args: string[], env: Record<string, string> = {}): WorkerOut {
  const r = spawnSync(process.execPath, ["--import", "tsx", worker, ...args], {
    cwd: repoRoot,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_NATIVE: "0", ...env },
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return lastJson(r.stdout);
}

function lastJson(stdout: string): WorkerOut {
  const line = stdout.trim().split("\n").at(-1)!;
  return JSON.parse(line) as WorkerOut;
}

describe("across processes", () => {
  it("warm up, then KILN_COMPILE=never passes from disk; new shapes fail with the message", () => {
    const cacheDir = join(dir, "shared");
    const warm = runWorker(cacheDir, ["5", "5", "6", "7"]);
    expect(warm.error).toBeUndefined();
    expect(warm.stats.compiles).toBeGreaterThan(0);
    expect(warm.stats.byKind.compiled.hits.shapeDynamic).toBe(2);

    // A fresh process: everything from disk, nothing compiled.
    const again = runWorker(cacheDir, ["5", "5", "6", "7"], { KILN_COMPILE: "never" });
    expect(again.error).toBeUndefined();
    expect(again.stats.compiles).toBe(0);
    expect(again.stats.hits.disk).toBe(warm.stats.compiles);
    for (const kind of ["eager", "lazy", "compiled"] as const) {
      expect(again.stats.byKind[kind].hits.disk).toBeGreaterThan(0);
    }
    expect(again.stats.byKind.compiled.hits.shapeDynamic).toBe(2);

    const longer = runWorker(cacheDir, ["5", "5", "6", "129"], { KILN_COMPILE: "never" });
    expect(longer.error?.name).toBe("CompileNeverError");
    const message = longer.error?.message ?? "";
    expect(message).toMatch(
      /^compile\(step\): no cached program; ids\.shape\[1\] 129 exceeds every cached bucket/,
    );
    expect(message).toMatch(
      /\(<=8\) \(cache-only mode, KILN_COMPILE=never: the program wasm [0-9a-f]{12} would compile;/,
    );

    const wider = runWorker(cacheDir, ["7", "5"], { KILN_COMPILE: "never" });
    expect(wider.error?.message).toMatch(
      /^exp f32\[3,7\]: no cached program; nearest f32\[3,5\] \(dim 1: 7 vs 5\)/,
    );

    const typo = runWorker(cacheDir, ["5", "5"], { KILN_COMPILE: "nevr" });
    expect(typo.error?.message).toMatch(/^KILN_COMPILE=nevr is not a compile mode/);
  });
});

describe("the demo", () => {
  it("after one warm-up run, a KILN_COMPILE=never run of examples/demo.ts passes", () => {
    const demo = (env: Record<string, string>) =>
      spawnSync(process.execPath, ["--import", "tsx", "examples/demo.ts"], {
        cwd: repoRoot,
        encoding: "utf8",
        env: { ...process.env, KILN_CACHE_DIR: join(dir, "demo"), KILN_NATIVE: "0", ...env },
        timeout: 180_000,
      });
    const warm = demo({});
    expect(warm.status, warm.stderr).toBe(0);
    const again = demo({ KILN_COMPILE: "never" });
    expect(again.stderr).not.toContain("CompileNeverError");
    expect(again.status, again.stderr).toBe(0);
    const tokens = (out: string) => out.split("\n").find((l) => l.startsWith("tokens: "));
    expect(tokens(warm.stdout)).toMatch(/^tokens: \[/);
    expect(tokens(again.stdout)).toBe(tokens(warm.stdout));
  });
});

describe.runIf(haveCompiler || ci)("cache-only mode on native", () => {
  it("a cached program whose kernel library is gone fails, and its entry is kept", () => {
    const cacheDir = join(dir, "native-run");
    const native = { KILN_NATIVE: "1" };
    const warm = runWorker(cacheDir, ["5", "5", "6"], native);
    expect(warm.error).toBeUndefined();
    expect(JSON.parse(warm.stats.entries[0]!.key)).toMatchObject({ backend: "native" });
    const programs = () =>
      readdirSync(join(cacheDir, "programs")).filter((n) => n.endsWith(".kprog"));
    const before = programs();
    // The kernel libraries (not the addon, not the probe's memo): the smaller .klib files
    // besides those two, which every process needs and which are the first and largest.
    const libs = join(cacheDir, "native");
    const klibs = readdirSync(libs).filter((n) => n.endsWith(".klib"));
    const sizes = klibs.map((n) => ({ n, bytes: statSync(join(libs, n)).size }));
    const addon = sizes.reduce((a, b) => (b.bytes > a.bytes ? b : a));
    const probe = sizes.reduce((a, b) => (b.bytes < a.bytes ? b : a));
    const kernels = sizes.filter((s) => s !== addon && s !== probe);
    expect(kernels.length).toBeGreaterThan(0);
    for (const k of kernels) rmSync(join(libs, k.n));
    const run = runWorker(cacheDir, ["5", "5", "6"], { ...native, KILN_COMPILE: "never" });
    expect(run.error?.name).toBe("CompileNeverError");
    expect(run.error?.message).toMatch(
      /^exp f32\[3,5\]: no cached program; its disk entry needs a native kernel library: /,
    );
    expect(run.error?.message).toContain("the library is not in the native library cache");
    expect(programs()).toEqual(before);
  });
});

describe("kiln cache info", () => {
  it("prints the compile mode and this process's statistics, and a bad KILN_COMPILE", () => {
    const kiln = (env: Record<string, string>, ...args: string[]) =>
      spawnSync(process.execPath, ["cli/kiln.js", "cache", "info", ...args], {
        cwd: repoRoot,
        encoding: "utf8",
        env: { ...process.env, KILN_CACHE_DIR: join(dir, "cli"), KILN_NATIVE: "0", ...env },
        timeout: 120_000,
      });
    const text = kiln({ KILN_COMPILE: "never" });
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain("compile mode:  never (cache-only: any compile is an error)\n");
    expect(text.stdout).toMatch(
      /\nstatistics: {4}requests 0, hits 0 memory, 0 disk, 0 shape-dynamic, compiles 0 /,
    );
    const json = kiln({}, "--json");
    const info = JSON.parse(json.stdout) as { stats: CacheStatistics };
    expect(info.stats).toMatchObject({ requests: 0, compiles: 0, entries: [] });
    expect(kiln({ KILN_COMPILE: "yes" }).stdout).toContain(
      "compile mode:  invalid: KILN_COMPILE=yes is not a compile mode",
    );
  });
});
