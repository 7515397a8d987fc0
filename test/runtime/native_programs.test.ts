// The native backend's programs as a user meets them across processes: compiled through the
// disk cache in one process and loaded in another without running the C compiler, recompiled
// (never trusted) when their kernel libraries were evicted or damaged; bitwise equal results at
// 1, 2 and 3 threads (every output element is computed by one thread, in one order); and the
// fallback when no compiler can be found — native drops out of the backend list, js is the
// default, and KILN_LOGS=backend says why. Each case runs in fresh processes
// (fixtures/native/program_worker.ts) with its own cache directory.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { evaluate } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { backendNames, compileModule, getBackend, ProgramCache } from "../../runtime/index.ts";

const here = dirname(fileURLToPath(import.meta.url));
const worker = join(here, "fixtures", "native", "program_worker.ts");
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "kiln-native-programs-"));
  dirs.push(d);
  return d;
}

function run(args: string[], env: NodeJS.ProcessEnv) {
  const r = spawnSync(process.execPath, ["--import", "tsx", worker, ...args], {
    cwd: join(here, "..", ".."),
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 240_000,
  });
  if (r.status !== 0) throw new Error(`worker failed (${r.status}):\n${r.stderr}`);
  return { out: JSON.parse(r.stdout.trim().split("\n").pop()!) as Record<string, unknown>,
    err: r.stderr };
}

const native = backendNames().includes("native");
// CI machines have a C compiler: there these tests must run (never skipped).
const maybe = native || process.env["CI"] ? describe : describe.skip;

maybe("native programs across processes", () => {
  // The addon is built once into this cache (a fresh KILN_CACHE_DIR would rebuild it per case).
  const shared = { KILN_CACHE_DIR: process.env["KILN_CACHE_DIR"] ?? tempDir() };

  it("a second process loads the programs from the disk cache and runs no compiler", () => {
    const programs = join(tempDir(), "programs");
    const first = run(["compile", programs], { ...shared, KILN_LOGS: "backend" });
    const second = run(["compile", programs], { ...shared, KILN_LOGS: "backend" });
    for (const [name, r] of Object.entries(second.out) as [string, { hit: string; digest: string;
      backend: string }][]) {
      expect(r.hit, name).toBe("disk");
      expect(r.backend).toBe("native");
      expect(r.digest, name).toBe((first.out[name] as { digest: string }).digest);
    }
    expect(second.err).not.toMatch(/native: compiled \d+ kernel/);
  }, 300_000);

  it("a program whose kernel libraries are gone or damaged is recompiled, not loaded", () => {
    const root = tempDir();
    const programs = join(root, "programs");
    const env = { KILN_CACHE_DIR: root, KILN_LOGS: "backend,cache" };
    const first = run(["compile", programs], env);
    const libs = join(root, "native");
    const entries = readdirSync(libs).filter((n) => n.endsWith(".klib"));
    expect(entries.length).toBeGreaterThan(1);
    // Damage every kernel library's body (one byte): their MACs fail, so they are discarded.
    for (const n of entries) {
      const p = join(libs, n);
      const b = readFileSync(p);
      b[b.length - 40] ^= 0x5a;
      writeFileSync(p, b);
    }
    const second = run(["compile", programs], env);
    for (const [name, r] of Object.entries(second.out) as [string, { hit: string; digest: string }][]) {
      expect(r.hit, name).toBe("miss");
      expect(r.digest, name).toBe((first.out[name] as { digest: string }).digest);
    }
    expect(second.err).toMatch(/undecodable|discard/);
  }, 300_000);

  it("a stored program runs and checks its arguments without decoding its module", () => {
    // 100 parameters, as a model's weights are, all read by one fused kernel (more buffers and
    // sizes than the step interpreter once took).
    const n = 100;
    const params = Array.from({ length: n }, (_, i) => `  p${i} = f32[3] parameter(${i})`);
    const sums = Array.from({ length: n - 1 }, (_, i) =>
      `  s${i + 1} = f32[3] add(${i === 0 ? "p0" : `s${i}`}, p${i + 1})`);
    const text = `HloModule many\n\nENTRY e {\n${[...params, ...sums].join("\n")}\n` +
      `  ROOT r = f32[3] multiply(s${n - 1}, p0)\n}\n`;
    const module = parseHlo(text);
    const cache = new ProgramCache({ disk: join(tempDir(), "programs") });
    const cold = compileModule(module, { backend: "native", cache });
    expect(cold.executable.backend).toBe("native");
    const native = getBackend("native");
    const payload = native.serialize!(cold.executable);
    let decodes = 0;
    const exe = native.deserializeDeferred!(() => {
      decodes++;
      return cold.executable.module;
    }, payload);
    const inputs = Array.from({ length: n }, (_, i) =>
      new Literal("f32", [3], Float32Array.from([i, -i, 0.5 * i])));
    const want = evaluate(module, inputs) as Literal;
    const got = exe.run(inputs) as Literal;
    expect(Array.from(got.data as Float32Array)).toEqual(Array.from(want.data as Float32Array));
    expect(decodes).toBe(0);
    expect(() => exe.run(inputs.slice(1))).toThrow(/takes 100 argument\(s\), got 99/);
    const wrong = [...inputs];
    wrong[7] = new Literal("f32", [4], new Float32Array(4));
    expect(() => exe.run(wrong)).toThrow(/argument 7 of 'many' does not match f32\[3\]/);
  });

  it("gives bitwise equal results at 1, 2 and 3 threads", () => {
    const { out } = run(["threads"], shared);
    for (const [name, ds] of Object.entries(out) as [string, string[]][]) {
      expect(new Set(ds).size, name).toBe(1);
    }
  }, 300_000);

  it("a compiler that rejects the kernels leaves programs and eager ops to js, and says why", () => {
    const real = spawnSync("sh", ["-c", "command -v cc || command -v gcc || command -v clang"],
      { encoding: "utf8" }).stdout.trim();
    expect(real).not.toBe("");
    const dir = tempDir();
    const wrapper = join(dir, "picky-cc");
    // Builds the runtime addon and the probe; fails on kernel units (built with -fopenmp-simd).
    writeFileSync(wrapper, `#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp-simd ] && ` +
      `{ echo "picky-cc: refusing kernels" >&2; exit 1; }; done\nexec ${real} "$@"\n`,
      { mode: 0o755 });
    const { out, err } = run(["badcc"], {
      KILN_CACHE_DIR: join(dir, "cache"),
      KILN_CC: wrapper,
      KILN_LOGS: "backend",
    });
    expect(out["default"]).toBe("native");
    for (const name of ["mlp", "softmax"]) {
      const r = out[name] as { fallback: string | null; same: boolean };
      expect(r.fallback, name).toMatch(/the C compiler failed on its kernels: .*picky-cc/s);
      expect(r.same, name).toBe(true);
    }
    expect(out["eager"]).toBe(20);
    expect(err).toMatch(/runs on js: the C compiler failed on its kernels/);
  }, 300_000);

  it("with no compiler found, native is not listed, wasm is the default, the log says why", () => {
    const { out, err } = run(["backends"], {
      ...shared,
      KILN_CC: "/nonexistent/cc",
      KILN_LOGS: "backend",
    });
    expect(out["names"]).toEqual(["wasm", "js", "interpreter"]);
    expect(out["default"]).toBe("wasm");
    expect(err).toMatch(/native: not available \(no C compiler found \(KILN_CC=\/nonexistent\/cc/);
  }, 120_000);
});
