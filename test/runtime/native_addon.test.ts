// The runtime addon (runtime/native/addon.ts, csrc/addon.c): built and loaded through the
// native library cache, then used on a small kernel library compiled here
// (fixtures/native/kernels.c): an elementwise add over [lo, hi) with byte offsets respected,
// sizes, serial and threaded calls at 1..3 threads (every iteration covered exactly once), the
// same bytes loaded once, and every way a load or a call can go wrong coming back as a JS error.
// It runs against a stand-in runtime (fixtures/native/runtime_standin.c) — the addon's own
// plumbing, whatever state the runtime library is in — and against the real one in csrc/.
// Also measures what the backend pays: addon load from the cache, and callKernel's overhead.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildNativeAddon,
  KILN_ABI_VERSION,
  loadNativeAddon,
  type NativeAddon,
  runtimeHeadersHash,
  type NativeLibrary,
} from "../../runtime/native/addon.ts";
import { defaultLibCache, LibCache } from "../../runtime/native/libcache.ts";
import {
  compileSharedObjects,
  findCompiler,
  nativeStatus,
} from "../../runtime/native/toolchain.ts";

const here = dirname(fileURLToPath(import.meta.url));
const fixtures = join(here, "fixtures", "native");
const csrc = join(here, "..", "..", "runtime", "native", "csrc");

const ci = process.env["CI"] !== undefined && !["", "0", "false"].includes(process.env["CI"]!);
const haveCompiler = findCompiler().ok;
const realRuntime = existsSync(join(csrc, "runtime.c"));

const worker = join(fixtures, "native_worker.ts");
type WorkerResult = { code: number | null; out: string; err: string };
function runWorker(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<WorkerResult> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", worker, ...args], {
      cwd: join(here, "..", ".."),
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

const ADD = 0;
const SCALE = 1;
const THREAD = 2;
const RUNTIME = 3;
const RANGES = 4;
const NO_SIZES = new BigInt64Array(0);

let work: string;
let kernelBytes: Uint8Array;

beforeAll(() => {
  if (!haveCompiler && !ci) return;
  work = mkdtempSync(join(tmpdir(), "kiln-native-addon-"));
  const kernelsSource = readFileSync(join(fixtures, "kernels.c"), "utf8");
  const noSymbol = "int kiln_nothing(void) { return 0; }\n";
  const wrongAbi =
    '#include "kiln_rt.h"\n' +
    "static const char* const n[] = {0};\nstatic const void* const f[] = {0};\n" +
    "KILN_EXPORT const KilnLibrary kiln_library_v1 = {KILN_ABI_VERSION + 1, 0, n, f, 0};\n";
  const undefinedSymbol =
    '#include "kiln_rt.h"\nextern int kiln_no_such_function(void);\n' +
    "int kiln_uses(void) { return kiln_no_such_function(); }\n" +
    "static const char* const n[] = {0};\nstatic const void* const f[] = {0};\n" +
    "KILN_EXPORT const KilnLibrary kiln_library_v1 = {KILN_ABI_VERSION, 0, n, f, 0};\n";
  const r = compileSharedObjects([
    { source: kernelsSource, out: join(work, "kernels.so") },
    { source: noSymbol, out: join(work, "nosym.so") },
    { source: wrongAbi, out: join(work, "abi.so") },
    { source: undefinedSymbol, out: join(work, "undef.so") },
  ]);
  for (const x of r) if (!x.ok) throw new Error(x.stderr);
  kernelBytes = readFileSync(join(work, "kernels.so"));
}, 180_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

function addonSuite(name: string, get: () => NativeAddon | { error: string }, isaSet: string[]) {
  describe(name, () => {
    let addon: NativeAddon;
    let lib: NativeLibrary;

    beforeAll(() => {
      const a = get();
      if ("error" in a) throw new Error(a.error);
      addon = a;
      lib = addon.loadLibrary(kernelBytes);
      // Building the real runtime (gemm.c, conv.c at -O3) takes seconds, more on a loaded machine.
    }, 180_000);

    afterAll(() => {
      addon?.setThreads(1);
    });

    it("reports its ABI, ISA and threads; 0 threads restores the default", () => {
      const info = addon.info();
      const def = addon.getThreads();
      addon.setThreads(def === 1 ? 2 : 1);
      expect(addon.getThreads()).not.toBe(def);
      addon.setThreads(0);
      expect(addon.getThreads()).toBe(def);
      expect(info.abi).toBe(KILN_ABI_VERSION);
      expect(isaSet).toContain(info.isa);
      expect(info.threads).toBeGreaterThanOrEqual(1);
      expect(addon.getThreads()).toBe(info.threads);
      expect(addon.key).toMatch(/^kiln-native-addon\/\d+ abi=\d+ toolchain=[0-9a-f]{64} /);
    });

    it("loads a library, names its kernels and runs its init once", () => {
      expect(lib.names).toEqual(["add", "scale", "thread", "runtime", "ranges"]);
      expect(lib.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(addon.loadLibrary(new Uint8Array(kernelBytes))).toBe(lib);
      const out = new BigInt64Array(3);
      addon.callKernel(lib.handle, RUNTIME, [out], NO_SIZES, 0, 1, false);
      expect(out[1]).toBe(1n); // init ran once
      expect(out[2]).toBe(BigInt(KILN_ABI_VERSION));
      expect(out[0]).toBe(BigInt(addon.getThreads()));
    });

    it("runs an elementwise add over [lo, hi), byte offsets respected", () => {
      const n = 1000;
      const x = Float32Array.from({ length: n }, (_, i) => i);
      const y = Float32Array.from({ length: n }, (_, i) => 2 * i + 0.5);
      const z = new Float32Array(n).fill(-1);
      addon.callKernel(lib.handle, ADD, [x, y, z], NO_SIZES, 100, 900, false);
      for (let i = 0; i < n; i++) expect(z[i]).toBe(i >= 100 && i < 900 ? 3 * i + 0.5 : -1);
      // views into bigger buffers: the kernel sees element 0 at the view's start
      const big = new Float32Array(3 * 64);
      const xs = big.subarray(0, 64).fill(1);
      const ys = big.subarray(64, 128).fill(2);
      const zs = big.subarray(128, 192);
      addon.callKernel(lib.handle, ADD, [xs, ys, zs], NO_SIZES, 0, 64, false);
      expect([...zs]).toEqual(new Array(64).fill(3));
      expect(big[127]).toBe(2);
      // an ArrayBuffer and a DataView are buffers too
      const xb = new Float32Array([1, 2, 3, 4]).buffer;
      const yb = new DataView(new Float32Array([0, 10, 20, 30, 40]).buffer, 4);
      const zb = new Float32Array(4);
      addon.callKernel(lib.handle, ADD, [xb, yb, zb], NO_SIZES, 0, 4, false);
      expect([...zb]).toEqual([11, 22, 33, 44]);
    });

    it("passes sizes", () => {
      const x = new Float32Array([1, 2, 3]);
      const z = new Float32Array(3);
      addon.callKernel(lib.handle, SCALE, [x, z], BigInt64Array.of(7n), 0, 3, false);
      expect([...z]).toEqual([7, 14, 21]);
    });

    it("takes more than 16 buffers", () => {
      const x = new Float32Array([5]);
      const z = new Float32Array(1);
      const extra = Array.from({ length: 20 }, () => new Float32Array(1));
      addon.callKernel(lib.handle, SCALE, [x, z, ...extra], BigInt64Array.of(3n), 0, 1, false);
      expect(z[0]).toBe(15);
    });

    for (const threads of [1, 2, 3]) {
      it(`runs threaded at ${threads} thread(s), covering every iteration once`, () => {
        addon.setThreads(threads);
        expect(addon.getThreads()).toBe(threads);
        const info = new BigInt64Array(3);
        addon.callKernel(lib.handle, RUNTIME, [info], NO_SIZES, 0, 1, false);
        expect(info[0]).toBe(BigInt(threads));

        const n = 5000;
        const x = Float32Array.from({ length: n }, (_, i) => i);
        const y = Float32Array.from({ length: n }, () => 1);
        const z = new Float32Array(n).fill(-1);
        addon.callKernel(lib.handle, ADD, [x, y, z], NO_SIZES, 17, n, true, 64);
        for (let i = 0; i < n; i++) if (z[i] !== (i >= 17 ? i + 1 : -1)) throw new Error(`z[${i}]`);

        // each iteration is covered by exactly one call, whose lo is the start of its range
        const r = new BigInt64Array(n).fill(-1n);
        addon.callKernel(lib.handle, RANGES, [r], NO_SIZES, 10, n, true, 100);
        expect(r[9]).toBe(-1n);
        let calls = 0;
        for (let i = 10; i < n; i++) {
          const lo = Number(r[i]);
          expect(lo >= 10 && lo <= i).toBe(true);
          if (lo === i) calls++;
          else expect(Number(r[i - 1])).toBe(lo);
        }
        expect(calls).toBeGreaterThanOrEqual(1);

        const t = new BigInt64Array(64);
        addon.callKernel(lib.handle, THREAD, [t], NO_SIZES, 0, 64, true, 4);
        const distinct = new Set(t).size;
        expect(distinct).toBeGreaterThanOrEqual(1);
        expect(distinct).toBeLessThanOrEqual(threads);
        if (threads === 1) expect(calls).toBe(1);
      });
    }

    it("turns every bad load into an Error with the reason", () => {
      expect(() => addon.loadLibrary(new Uint8Array([1, 2, 3]))).toThrow(/dlopen failed/);
      expect(() => addon.loadLibrary(new Uint8Array(0))).toThrow(/empty/);
      expect(() => addon.loadLibrary(readFileSync(join(work, "nosym.so")))).toThrow(
        /does not export kiln_library_v1/,
      );
      expect(() => addon.loadLibrary(readFileSync(join(work, "abi.so")))).toThrow(
        new RegExp(`runtime ABI ${KILN_ABI_VERSION + 1}, this runtime is ABI ${KILN_ABI_VERSION}`),
      );
      expect(() => addon.loadLibrary(readFileSync(join(work, "undef.so")))).toThrow(
        /undefined symbol: kiln_no_such_function/,
      );
      expect(() => addon.loadLibrary("not bytes" as unknown as Uint8Array)).toThrow(TypeError);
    });

    it("turns every bad call into an Error, never a crash", () => {
      const x = new Float32Array(4);
      const call = (...args: unknown[]) =>
        (addon.callKernel as unknown as (...a: unknown[]) => void)(...args);
      expect(() => call({}, ADD, [x, x, x], NO_SIZES, 0, 4, false)).toThrow(TypeError);
      expect(() => call(lib.handle, 99, [x, x, x], NO_SIZES, 0, 4, false)).toThrow(/out of range/);
      expect(() => call(lib.handle, -1, [x, x, x], NO_SIZES, 0, 4, false)).toThrow(/out of range/);
      expect(() => call(lib.handle, ADD, [x, 3, x], NO_SIZES, 0, 4, false)).toThrow(/buffer 1/);
      expect(() => call(lib.handle, ADD, "x", NO_SIZES, 0, 4, false)).toThrow(/array/);
      expect(() => call(lib.handle, ADD, [x, x, x], new Int32Array(1), 0, 4, false)).toThrow(
        /BigInt64Array/,
      );
      expect(() => call(lib.handle, ADD, [x, x, x], NO_SIZES, 4, 0, false)).toThrow(/hi < lo/);
      expect(() => call(lib.handle, ADD, [x, x, x], NO_SIZES, 0, 4)).toThrow(TypeError);
      expect(() => addon.setThreads(-1)).toThrow(TypeError);
      addon.callKernel(lib.handle, ADD, [x, x, x], NO_SIZES, 2, 2, true); // empty: nothing runs
    });

    it("costs little per call (measured)", () => {
      const x = new Float32Array(16);
      const bufs = [x, x, x];
      const h = lib.handle;
      const f = addon.callKernel;
      for (let i = 0; i < 20_000; i++) f(h, ADD, bufs, NO_SIZES, 0, 1, false);
      const n = 200_000;
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) f(h, ADD, bufs, NO_SIZES, 0, 1, false);
      const ns = Number(process.hrtime.bigint() - t0) / n;
      console.log(`[native addon, ${name}] callKernel overhead: ${ns.toFixed(0)} ns per call`);
      expect(ns).toBeLessThan(20_000);
    });
  });
}

describe.runIf(haveCompiler || ci)("the runtime addon", () => {
  addonSuite(
    "with the stand-in runtime",
    () => buildNativeAddon({ runtimeSources: [join(fixtures, "runtime_standin.c")] }),
    ["standin"],
  );

  it("is stored in the native library cache and loads from it in a new process", async () => {
    const a = buildNativeAddon({ runtimeSources: [join(fixtures, "runtime_standin.c")] });
    if ("error" in a) throw new Error(a.error);
    expect(buildNativeAddon({ runtimeSources: [join(fixtures, "runtime_standin.c")] })).toBe(a);
    const stored = defaultLibCache().get(a.key);
    expect(stored).toBeDefined();
    expect(Buffer.from(stored!.subarray(0, 4)).toString("latin1")).toBe("\x7fELF");
    const r = await runWorker(["addon", "standin"]);
    expect(r.code, r.err).toBe(0);
    const got = JSON.parse(r.out.trim().split("\n").pop()!) as Record<string, unknown>;
    expect(got).toMatchObject({ ok: true, key: a.key, isa: "standin", built: false });
    console.log(`[native addon] warm load in a new process: probe ${got["probeMs"]} ms, ` +
      `addon ${got["addonMs"]} ms`);
  }, 60_000);

  it("rebuilds a verified cache entry that no longer loads", async () => {
    const root = mkdtempSync(join(tmpdir(), "kiln-native-addon-stale-"));
    try {
      const env = { KILN_CACHE_DIR: root, KILN_LOGS: "backend" };
      const first = await runWorker(["addon", "standin"], env);
      expect(first.code, first.err).toBe(0);
      const key = (JSON.parse(first.out.trim().split("\n").pop()!) as { key: string }).key;
      // a valid entry (right secret, right key) whose bytes are not a loadable library
      const junk = new TextEncoder().encode("\x7fELF junk");
      new LibCache({ dir: join(root, "native") }).put(key, junk);
      const second = await runWorker(["addon", "standin"], env);
      expect(second.code, second.err).toBe(0);
      expect(JSON.parse(second.out.trim().split("\n").pop()!)).toMatchObject({ ok: true, key });
      expect(second.err).toMatch(/the cached runtime addon does not load .*; rebuilding/);
      const third = await runWorker(["addon", "standin"], env);
      expect(third.err).not.toMatch(/rebuilding/);
      expect(third.err).toMatch(/runtime addon ready .*; found in/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 60_000);

  it("hashes the runtime's headers for kernel library keys", () => {
    expect(runtimeHeadersHash()).toMatch(/^[0-9a-f]{64}$/);
    expect(runtimeHeadersHash()).toBe(runtimeHeadersHash());
  });

  it("names the file that failed to build", () => {
    const bad = join(work, "broken_runtime.c");
    writeFileSync(bad, "int this is not C;\n");
    const a = buildNativeAddon({ runtimeSources: [bad] });
    expect("error" in a && a.error).toMatch(
      /^the runtime addon failed to build: standin-broken_runtime\.c: .*error/,
    );
  });

  describe.runIf(realRuntime || ci)("with the real runtime (csrc/)", () => {
    addonSuite("with the real runtime", () => loadNativeAddon(), ["avx512", "avx2", "portable"]);

    it("loads from the cache in a new process (measured)", async () => {
      const a = loadNativeAddon();
      if ("error" in a) throw new Error(a.error);
      // A private cache: one process builds the addon into it, a second loads it. (In the
      // run's shared cache, with two test files running at once, the second process once
      // rebuilt instead; the cause is not known yet — see the session note.)
      const root = mkdtempSync(join(tmpdir(), "kiln-native-addon-warm-"));
      try {
        const env = { KILN_CACHE_DIR: root };
        const first = await runWorker(["addon", "real"], env);
        expect(first.code, first.err).toBe(0);
        const built = JSON.parse(first.out.trim().split("\n").pop()!) as Record<string, unknown>;
        expect(built).toMatchObject({ ok: true, key: a.key, built: true });
        const r = await runWorker(["addon", "real"], env);
        expect(r.code, r.err).toBe(0);
        const got = JSON.parse(r.out.trim().split("\n").pop()!) as Record<string, unknown>;
        expect(got).toMatchObject({ ok: true, key: a.key, built: false });
        console.log(`[native addon] real runtime, warm load in a new process: probe ` +
          `${got["probeMs"]} ms, addon ${got["addonMs"]} ms`);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    }, 120_000);

    it("is what nativeStatus() reports on", () => {
      const s = nativeStatus();
      expect(s.ok, s.ok ? "" : s.reason).toBe(true);
      if (!s.ok) return;
      expect(s.threads).toBeGreaterThanOrEqual(1);
      expect(s.isa).toBe(s.toolchain.isa);
      expect(loadNativeAddon()).toBe(loadNativeAddon());
    });
  });
});
