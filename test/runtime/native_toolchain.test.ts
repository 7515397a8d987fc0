// The native backend's toolchain (runtime/native/toolchain.ts): finding and probing the C
// compiler, CPU features and the ISA class, flags, Node-API headers, the toolchain key, parallel
// compiles (one job with a syntax error fails alone, with its stderr; nothing partial is left at
// any output), background compiles with a synchronous poll, the batch timeout, and
// nativeStatus() in fresh processes where no compiler, no headers or a broken compiler is all
// there is. CI machines have gcc: these tests are skipped only where no compiler exists and CI
// is unset.

import { spawn } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  compileSharedObjects,
  compileSharedObjectsAsync,
  type CpuInfo,
  describeCompiler,
  findCompiler,
  findNodeInclude,
  isaClass,
  startCompileSharedObjects,
  toolchain,
  toolchainKey,
  toolchainKeyOf,
  type ToolchainKeyParts,
  whichExecutable,
} from "../../runtime/native/toolchain.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const worker = join(here, "fixtures", "native", "native_worker.ts");

const ci = process.env["CI"] !== undefined && !["", "0", "false"].includes(process.env["CI"]!);
const haveCompiler = findCompiler().ok;

function runWorker(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", worker, ...args], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.stderr.on("data", (d: Buffer) => (err += d.toString()));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, out, err }));
  });
}

function lastJson(out: string): Record<string, unknown> {
  const line = out.trim().split("\n").pop() ?? "";
  return JSON.parse(line) as Record<string, unknown>;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kiln-native-tc-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("the toolchain's parts, without a compiler", () => {
  const cpu = (arch: string, flags: string[]): CpuInfo => ({
    arch,
    platform: "linux",
    flags,
    features: [],
    model: "",
    source: "cpuinfo",
  });

  it("classes the ISA from the CPU's flags and whether -march=native is on", () => {
    const avx512 = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"];
    expect(isaClass(cpu("x64", avx512), true)).toBe("avx512");
    expect(isaClass(cpu("x64", avx512), false)).toBe("portable");
    expect(isaClass(cpu("x64", ["avx2", "fma", "avx512f"]), true)).toBe("avx2");
    expect(isaClass(cpu("x64", ["avx2"]), true)).toBe("portable");
    expect(isaClass(cpu("x64", ["sse4_2"]), true)).toBe("portable");
    expect(isaClass(cpu("arm64", ["asimd", "avx512f"]), true)).toBe("portable");
  });

  it("keys on every part that changes the code a compile produces", () => {
    const base: ToolchainKeyParts = {
      compilerPath: "/usr/bin/cc",
      compilerVersion: "cc 12.2.0",
      cflags: ["-O3", "-march=native"],
      ldflags: ["-shared", "-lm"],
      cpuFlags: ["avx2", "fma"],
      cpuModel: "Some CPU",
      arch: "x64",
      platform: "linux",
      napiVersion: "9",
      modules: "115",
    };
    const key = toolchainKeyOf(base);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(toolchainKeyOf({ ...base })).toBe(key);
    const variants: Partial<ToolchainKeyParts>[] = [
      { compilerPath: "/usr/bin/gcc" },
      { compilerVersion: "cc 12.3.0" },
      { cflags: ["-O3"] },
      { ldflags: ["-shared"] },
      { cpuFlags: ["avx2"] },
      { cpuModel: "Other CPU" },
      { arch: "arm64" },
      { platform: "darwin" },
      { napiVersion: "8" },
      { modules: "108" },
    ];
    const keys = new Set([key, ...variants.map((v) => toolchainKeyOf({ ...base, ...v }))]);
    expect(keys.size).toBe(variants.length + 1);
  });

  it("reports where it looked for the Node-API headers", () => {
    const r = findNodeInclude({ KILN_NODE_INCLUDE: "/nonexistent/include" });
    expect(r).toEqual({
      ok: false,
      reason: "Node-API headers not found (looked in KILN_NODE_INCLUDE: /nonexistent/include)",
    });
  });

  it("says in words that no compiler was found", () => {
    expect(findCompiler({ PATH: dir })).toEqual({
      ok: false,
      reason: "no C compiler found (KILN_CC unset; cc, gcc, clang not on PATH)",
    });
    const r = findCompiler({ PATH: dir, KILN_CC: "/nonexistent/cc" });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(/^no C compiler found \(KILN_CC=\/nonexistent\/cc is not/);
  });
});

describe.runIf(haveCompiler || ci)("the toolchain", () => {
  it("finds and probes the compiler once", () => {
    const tc = toolchain();
    expect(tc.ok, tc.ok ? "" : tc.reason).toBe(true);
    if (!tc.ok) return;
    const c = tc.value.compiler;
    expect(existsSync(c.path)).toBe(true);
    expect(["gcc", "clang", "other"]).toContain(c.kind);
    expect(c.versionText).not.toBe("");
    expect(c.version).toMatch(/\d/);
    expect(describeCompiler(c)).toMatch(/^\S+ \d+/);
    expect(toolchain()).toBe(tc);
    expect(toolchainKey()).toBe(tc.value.key);
    expect(tc.value.key).toMatch(/^[0-9a-f]{64}$/);
  });

  it("honours KILN_CC as a command on PATH or a path", () => {
    const cc = findCompiler().ok ? (findCompiler() as { value: { path: string } }).value.path : "";
    const byPath = findCompiler({ ...process.env, KILN_CC: cc });
    expect(byPath.ok && byPath.value.path).toBe(cc);
    const name = cc.split("/").pop()!;
    const byName = findCompiler({ ...process.env, KILN_CC: name });
    expect(byName.ok && byName.value.name).toBe(name);
    expect(whichExecutable(name)).toBe(byName.ok ? byName.value.path : undefined);
  });

  it("builds with the fixed flags, and -march=native where the compiler takes it", () => {
    const tc = toolchain();
    if (!tc.ok) throw new Error(tc.reason);
    const { cflags, ldflags, marchNative, compiler, cpu, isa } = tc.value;
    for (const f of [
      "-O3",
      "-fPIC",
      "-std=gnu11",
      "-pthread",
      "-ffp-contract=fast",
      "-fno-math-errno",
      "-fvisibility=hidden",
    ]) {
      expect(cflags).toContain(f);
    }
    expect(ldflags).toContain("-shared");
    expect(ldflags.at(-1)).toBe("-lm");
    expect(cflags.includes("-march=native")).toBe(marchNative);
    if (compiler.kind !== "other" && (cpu.arch === "x64" || cpu.arch === "arm64")) {
      expect(marchNative).toBe(true);
    }
    expect(isa).toBe(isaClass(cpu, marchNative));
    if (process.platform === "linux") {
      expect(cpu.source).toBe("cpuinfo");
      expect(cpu.flags.length).toBeGreaterThan(0);
    }
    if (cpu.arch === "x64") expect(cpu.features).toContain("sse4_2");
    expect(existsSync(join(tc.value.nodeInclude, "node_api.h"))).toBe(true);
  });

  it("compiles three sources in parallel; the one with a syntax error fails alone", () => {
    const out = join(dir, "out");
    mkdirSync(out);
    const jobs = [
      { source: "int kiln_a(int x) { return x + 1; }\n", out: join(out, "a.so") },
      { source: "int kiln_b(int x) { return x * ; }\n", out: join(out, "b.so") },
      {
        source: '#include "kiln_rt.h"\nint kiln_c(void) { return KILN_ABI_VERSION; }\n',
        out: join(out, "c.so"),
      },
    ];
    const results = compileSharedObjects(jobs);
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    expect(results[1]!.stderr).toMatch(/error/);
    expect(results[1]!.stderr).toMatch(/expected expression|expected/);
    for (const r of results) expect(r.ms).toBeGreaterThanOrEqual(0);
    expect(readdirSync(out).sort()).toEqual(["a.so", "c.so"]);
  });

  it("takes extra flags and include directories (relative to the working directory)", () => {
    const inc = join(dir, "inc");
    mkdirSync(inc);
    writeFileSync(join(inc, "extra.h"), "#define EXTRA_VALUE 42\n");
    const [r] = compileSharedObjects(
      [
        {
          source: '#include "extra.h"\n#if !defined(KILN_FLAG)\n#error no flag\n#endif\n' +
            "int kiln_v(void) { return EXTRA_VALUE; }\n",
          out: join(dir, "v.so"),
        },
      ],
      // relative paths mean what they mean in the caller's working directory
      { includeDirs: [relative(process.cwd(), inc)], extraFlags: ["-DKILN_FLAG=1"], parallel: 1 },
    );
    expect(r!.ok, r!.stderr).toBe(true);
    expect(existsSync(join(dir, "v.so"))).toBe(true);
  });

  it("compiles in the background; synchronous code can poll for the end", async () => {
    const jobs = [
      { source: "int kiln_x(void) { return 1; }\n", out: join(dir, "x.so") },
      { source: "int kiln_y(void) { return ) }\n", out: join(dir, "y.so") },
    ];
    const bg = startCompileSharedObjects(jobs);
    const sleeper = new Int32Array(new SharedArrayBuffer(4));
    const deadline = Date.now() + 60_000;
    let polled = bg.poll();
    while (polled === undefined && Date.now() < deadline) {
      Atomics.wait(sleeper, 0, 0, 10);
      polled = bg.poll();
    }
    expect(polled?.map((r) => r.ok)).toEqual([true, false]);
    expect(existsSync(join(dir, "x.so"))).toBe(true);
    const awaited = await bg.promise;
    expect(awaited).toBe(polled);
    const again = await compileSharedObjectsAsync([
      { source: "int kiln_z(void) { return 3; }\n", out: join(dir, "z.so") },
    ]);
    expect(again.map((r) => r.ok)).toEqual([true]);
    expect(readdirSync(dir).sort()).toEqual(["x.so", "z.so"]);
  });

  it("stops a batch at its timeout and leaves no partial output", async () => {
    const cc = toolchain();
    if (!cc.ok) throw new Error(cc.reason);
    const slowCc = join(dir, "slow-cc");
    writeFileSync(
      slowCc,
      "#!/bin/sh\n" +
        'for a in "$@"; do case "$a" in *.c) ' +
        'if grep -q KILN_SLOW "$a" 2>/dev/null; then exec sleep 30; fi;; esac; done\n' +
        `exec '${cc.value.compiler.path}' "$@"\n`,
    );
    chmodSync(slowCc, 0o755);
    const out = join(dir, "out");
    mkdirSync(out);
    const r = await runWorker(["timeout", out], { KILN_CC: slowCc });
    expect(r.code, r.err).toBe(0);
    const got = lastJson(r.out) as {
      results: { ok: boolean; stderr: string }[];
      ms: number;
      files: string[];
    };
    expect(got.results.map((x) => x.ok)).toEqual([true, false]);
    expect(got.results[1]!.stderr).toMatch(/did not finish within 1500 ms/);
    expect(got.ms).toBeLessThan(15_000);
    expect(got.files).toEqual(["fast.so"]);
  }, 60_000);
});

describe("nativeStatus() where the native backend cannot work", () => {
  it("reports a missing compiler and does not throw", async () => {
    const r = await runWorker(["status"], { KILN_CC: "/nonexistent/cc", KILN_LOGS: "backend" });
    expect(r.code, r.err).toBe(0);
    const got = lastJson(r.out);
    expect(got["memoized"]).toBe(true);
    expect(got["status"]).toEqual({
      ok: false,
      reason:
        "no C compiler found (KILN_CC=/nonexistent/cc is not an executable file or " +
        "command on PATH)",
    });
    const logged = r.err.split("\n").filter((l) => l.startsWith("[kiln:backend]"));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/native: unavailable: no C compiler found/);
  }, 60_000);

  it("reports an empty PATH in words", async () => {
    const r = await runWorker(["status"], { PATH: dir, KILN_CC: "" });
    expect(r.code, r.err).toBe(0);
    expect(lastJson(r.out)["status"]).toEqual({
      ok: false,
      reason: "no C compiler found (KILN_CC unset; cc, gcc, clang not on PATH)",
    });
  }, 60_000);

  it.runIf(haveCompiler || ci)("reports missing Node-API headers", async () => {
    const r = await runWorker(["status"], { KILN_NODE_INCLUDE: join(dir, "none") });
    expect(r.code, r.err).toBe(0);
    const status = lastJson(r.out)["status"] as { ok: boolean; reason: string };
    expect(status.ok).toBe(false);
    expect(status.reason).toBe(
      `Node-API headers not found (looked in KILN_NODE_INCLUDE: ${join(dir, "none")})`,
    );
  }, 60_000);

  it.runIf(haveCompiler || ci)("reports a compiler that cannot build a shared object", async () => {
    const broken = join(dir, "broken-cc");
    writeFileSync(
      broken,
      "#!/bin/sh\n" +
        'case "$1" in\n' +
        '  --version) echo "brokencc 3.1.4"; exit 0;;\n' +
        "  -dumpversion) echo 3.1.4; exit 0;;\n" +
        "esac\n" +
        'echo "In file included from nowhere:" >&2\n' +
        'echo "error: this compiler is broken" >&2\n' +
        "exit 1\n",
    );
    chmodSync(broken, 0o755);
    const r = await runWorker(["status"], { KILN_CC: broken });
    expect(r.code, r.err).toBe(0);
    expect(lastJson(r.out)["status"]).toEqual({
      ok: false,
      reason: `broken-cc 3.1.4 could not build a shared object: error: this compiler is broken`,
    });
  }, 60_000);
});
