// Cold compile against warm load for a real model graph: the forward pass of GPT-2 small
// (models/gpt2.ts, fullConfig: 12 layers, 768 wide, 12 heads, vocabulary 50257) on token ids
// [1, 128], captured in lazy mode and compiled for the `js` backend through compileModule.
// Cold: a fresh ProgramCache on an empty directory (the optimization pipeline, then js codegen
// and `new Function`). Warm: a fresh ProgramCache on the populated directory (fingerprint, read
// and checksum the entry, decode the stored optimized module, rebuild the program from the js
// payload), and a genuinely new process (this script re-run as a child, timing compileModule
// inside it; the key module reaches the child as a proto file, standing in for the child's own
// capture). Prints the median of --reps runs, the warm path's parts and the ratio; the goal is
// warm >= 10x faster than cold.
//
// The weights are GPT-2's own random init (about 124M values; the slow part of a run). The
// graph is captured without running it: a ProgramCache subclass records the module lazy mode
// hands to compileModule and stops there, so no 30-GFLOP forward pass is needed for a figure.
//
//   npm run bench:compile          (or: npx tsx bench/compile.ts [--reps 5] [--seq 128] [--run])
//
// --run also runs the cold and the warm executable once on the same inputs and checks the
// results are bit-identical (slow: one forward pass each).
//
// bench/peers/run.ts's compile-time tables use two modes of this script as their new process:
// `--child KEY DIR [BACKEND]` (compileModule on KEY's module through DIR's program cache, ""
// for none, on BACKEND, default js) and `--native-addon` (only builds or loads the native
// runtime addon into $KILN_CACHE_DIR, so a cold cache directory can start with it).

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cloneModule } from "../ir/clone.ts";
import { fingerprint } from "../ir/fingerprint.ts";
import { Literal, literalsIdentical } from "../ir/literal.ts";
import type { Module } from "../ir/module.ts";
import { moduleFromProto, moduleToProto } from "../ir/proto.ts";
import { fullConfig, GPT2, inputs } from "../models/gpt2.ts";
import { optimizationPipeline } from "../passes/index.ts";
import { decodeEntry, SECRET_NAME } from "../runtime/cache_disk.ts";
import type { CacheKeyOptions, CacheResult } from "../runtime/cache.ts";
import { compileKeyOptions, compileModule } from "../runtime/compile.ts";
import {
  type Executable,
  getBackend,
  jsBackend,
  type JsExecutable,
  ProgramCache,
  setDefaultProgramCache,
  single,
} from "../runtime/index.ts";
import { lazy } from "../tensor/lazy.ts";
import { setGradEnabled } from "../tensor/autograd.ts";

// Inference only: no autograd recording (as PyTorch benchmarks run under no_grad), so
// parameters that require grad do not keep every activation of a forward alive.
setGradEnabled(false);


function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const BACKEND = "js";
const self = fileURLToPath(import.meta.url);

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const r = fn();
  return [r, performance.now() - t0];
}

function fmt(ms: number): string {
  return ms < 10 ? ms.toFixed(2) : ms.toFixed(1);
}

class Captured extends Error {
  constructor(readonly module: Module) {
    super("bench: graph captured");
  }
}

/** Records the module compileModule is asked for, and stops before compiling it. */
class CapturingCache extends ProgramCache {
  override getOrCompile(module: Module): CacheResult {
    throw new Captured(module);
  }
}

/** GPT-2 small's forward graph on ids [1, seq], as lazy mode builds it (before any pass). */
function captureGpt2(seq: number): { module: Module; initMs: number; captureMs: number } {
  const [model, initMs] = timed(() => {
    const m = new GPT2(fullConfig);
    m.eval(); // no dropout: the inference graph
    return m;
  });
  const [ids] = inputs({ batch: 1, seq }, "full");
  const t0 = performance.now();
  try {
    // One graph for the whole forward pass: no depth or repeat cut.
    const cache = new CapturingCache({ disk: false });
    const opts = { backend: BACKEND, cache, maxDepth: 1e9, cutRepeats: false };
    lazy(() => model.call(ids).logits, opts).toArray();
  } catch (e) {
    const c = e instanceof Captured ? e : e instanceof Error ? e.cause : undefined;
    if (!(c instanceof Captured)) throw e;
    return { module: c.module, initMs, captureMs: performance.now() - t0 };
  }
  throw new Error("bench: lazy mode compiled nothing");
}

function instructionCount(m: Module): number {
  return m.computations.reduce((n, c) => n + c.instructions.length, 0);
}

const OPTIONS: CacheKeyOptions = compileKeyOptions({});

/** compileModule through a fresh ProgramCache on `dir` ("" for a memory-only cache). */
function compileIn(module: Module, dir: string): [CacheResult, number] {
  const cache = new ProgramCache({ disk: dir === "" ? false : dir });
  return timed(() => compileModule(module, { backend: BACKEND, cache }));
}

interface ChildReport {
  hit: string;
  ms: number;
}

/**
 * This script as a new process: decode the key module, compile it through `dir`'s cache (or
 * a memory-only one for ""), report the hit and the time compileModule took.
 */
function child(keyFile: string, dir: string): ChildReport & { wallMs: number } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", self, "--child", keyFile, dir], {
    encoding: "utf8",
  });
  const wallMs = performance.now() - t0;
  if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
  const report = JSON.parse(r.stdout.trim().split("\n").pop()!) as ChildReport;
  return { ...report, wallMs };
}

/**
 * `--child KEY DIR [BACKEND]` (bench/peers/run.ts uses it for js and native): the backend is
 * looked up before the clock starts, so native's runtime addon (built or loaded when the
 * backend's availability is first asked) is not counted as the model's compile.
 */
function runChild(): void {
  const i = process.argv.indexOf("--child");
  const module = moduleFromProto(readFileSync(process.argv[i + 1]!));
  const backend = process.argv[i + 3] ?? BACKEND;
  getBackend(backend);
  const cache = new ProgramCache({ disk: process.argv[i + 2] || false });
  const [r, ms] = timed(() => compileModule(module, { backend, cache }));
  process.stdout.write(`${JSON.stringify({ hit: r.hit, ms })}\n`);
}

/** The warm path's parts, timed one by one on the entry `dir` holds for `module`. */
function warmParts(module: Module, dir: string): [string, number][] {
  const key = new ProgramCache({ disk: false }).keyFor(module, BACKEND, OPTIONS);
  const [, fpMs] = timed(() => fingerprint(module));
  const file = readdirSync(dir).find((n) => n.endsWith(".kprog"));
  if (!file) throw new Error(`bench: no entry in ${dir}`);
  const [entry, readMs] = timed(() => {
    const bytes = readFileSync(join(dir, file));
    const secret = readFileSync(join(dir, SECRET_NAME));
    const d = decodeEntry(secret, bytes, key); // includes the MAC over key, header and body
    if (!d.ok) throw new Error(`bench: entry unreadable: ${d.reason}: ${d.detail}`);
    return { ...d, size: bytes.length };
  });
  const proto = entry.moduleProto;
  const [exe, loadMs] = timed(() =>
    jsBackend.deserializeDeferred!(() => moduleFromProto(proto), entry.payload),
  );
  const [, protoMs] = timed(() => exe.module);
  const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
  return [
    [`fingerprint of the key module`, fpMs],
    [`read + SHA-256 of the entry (${kib(entry.size)})`, readMs],
    [`js load: payload + new Function (${kib(entry.payload.length)})`, loadMs],
    [`(deferred) decode the optimized module (${kib(proto.length)})`, protoMs],
  ];
}

/** Deterministic inputs for --run: ids in [0, 1000), floats in [-0.02, 0.02). */
function inputsFor(module: Module): Literal[] {
  let s = 12345;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
  return module.entry.parameters.map((p) => {
    if (p.shape.kind !== "array") throw new Error("bench: tuple parameter");
    const { type, dims } = p.shape;
    const n = dims.reduce((a, d) => a * d, 1);
    if (type === "s64") return new Literal(type, dims, BigInt64Array.from({ length: n }, () =>
      BigInt(next() % 1000)));
    if (type !== "f32") throw new Error(`bench: no inputs of type ${type}`);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = (next() / 2 ** 31 - 1) * 0.02;
    return new Literal(type, dims, data);
  });
}

function verdict(x: number): string {
  return `${x.toFixed(1)}x${x >= 10 ? " (target 10x met)" : " (below the 10x target)"}`;
}

function main(): void {
  // Nothing in here may touch the user's own cache directory.
  setDefaultProgramCache(new ProgramCache({ disk: false }));
  const reps = arg("reps", 5);
  const seq = arg("seq", 128);
  const { module, initMs, captureMs } = captureGpt2(seq);
  console.log(
    `GPT-2 small forward, ids [1, ${seq}]: ${instructionCount(module)} instructions, ` +
      `${module.entry.parameters.length} parameters (random init ${fmt(initMs)} ms, ` +
      `capture ${fmt(captureMs)} ms)`,
  );
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-compile-"));
  try {
    const keyFile = join(dir, "key.pb");
    writeFileSync(keyFile, moduleToProto(module));

    // In this process (code warmed up by the first run).
    const colds: number[] = [];
    const memoryColds: number[] = [];
    let cold: Executable | undefined;
    for (let i = 0; i < reps; i++) {
      const [r, ms] = compileIn(module, join(dir, `cold${i}`));
      const [m, memoryMs] = compileIn(module, "");
      if (r.hit !== "miss" || m.hit !== "miss") throw new Error("bench: a cold run was a hit");
      colds.push(ms);
      memoryColds.push(memoryMs);
      cold ??= r.executable;
    }
    const warmDir = join(dir, "cold0");
    const warms: number[] = [];
    let warm: Executable | undefined;
    for (let i = 0; i < reps; i++) {
      const [r, ms] = compileIn(module, warmDir);
      if (r.hit !== "disk") throw new Error(`bench: warm run was a ${r.hit}`);
      warms.push(ms);
      warm = r.executable;
    }
    if ((warm as JsExecutable).source !== (cold as JsExecutable).source) {
      throw new Error("bench: the program loaded from disk is not the one compiled");
    }
    // Where the time goes: the passes, codegen (+ new Function), the warm path's parts.
    const passes: number[] = [];
    const codegen: number[] = [];
    for (let i = 0; i < reps; i++) {
      const copy = cloneModule(module);
      passes.push(timed(() => optimizationPipeline().run(copy))[1]);
      codegen.push(timed(() => getBackend(BACKEND).compile(copy))[1]);
    }
    const parts = Array.from({ length: reps }, () => warmParts(module, warmDir));

    // New processes: nothing warmed up, as for a user's next run.
    const coldChildren = Array.from({ length: reps }, (_, i) =>
      child(keyFile, join(dir, `child${i}`)),
    );
    const memoryChildren = Array.from({ length: reps }, () => child(keyFile, ""));
    const warmChildren = Array.from({ length: reps }, () => child(keyFile, join(dir, "child0")));
    if (
      [...coldChildren, ...memoryChildren].some((c) => c.hit !== "miss") ||
      warmChildren.some((c) => c.hit !== "disk")
    ) {
      throw new Error("bench: child runs were not all misses, then all disk hits");
    }

    const m = (xs: readonly number[]) => median(xs);
    const coldMs = m(colds);
    const memoryColdMs = m(memoryColds);
    const warmMs = m(warms);
    const childCold = m(coldChildren.map((c) => c.ms));
    const childMemoryCold = m(memoryChildren.map((c) => c.ms));
    const childWarm = m(warmChildren.map((c) => c.ms));
    const rows: [string, string][] = [
      ["this process:", ""],
      ["cold compile, disk cache (passes, codegen, store)", fmt(coldMs)],
      ["cold compile, memory-only cache (no store)", fmt(memoryColdMs)],
      ["  optimization pipeline", fmt(m(passes))],
      ["  js codegen + new Function", fmt(m(codegen))],
      ["warm load, fresh cache on the populated dir", fmt(warmMs)],
      ...parts[0]!.map(([name], k): [string, string] => [
        `  ${name}`,
        fmt(m(parts.map((p) => p[k]![1]))),
      ]),
      ["new process (compileModule only):", ""],
      ["cold compile, disk cache", fmt(childCold)],
      ["cold compile, memory-only cache (no store)", fmt(childMemoryCold)],
      ["warm load from disk", fmt(childWarm)],
      ["new process, wall (Node + tsx + module + compile):", ""],
      ["cold", fmt(m(coldChildren.map((c) => c.wallMs)))],
      ["warm", fmt(m(warmChildren.map((c) => c.wallMs)))],
    ];
    const w = Math.max(...rows.map((r) => r[0].length));
    console.log(`${"".padEnd(w)}  ms (median of ${reps})`);
    for (const [name, v] of rows) console.log(`${name.padEnd(w)}  ${v.padStart(9)}`);
    console.log("speedup (cold / warm):");
    console.log(`  new process, disk cache:        ${verdict(childCold / childWarm)}`);
    console.log(`  new process, no store in cold:  ${verdict(childMemoryCold / childWarm)}`);
    console.log(`  this process, disk cache:       ${verdict(coldMs / warmMs)}`);
    console.log(`  this process, no store in cold: ${verdict(memoryColdMs / warmMs)}`);

    if (process.argv.includes("--run")) {
      const ins = inputsFor(module);
      const a = single(cold!.run(ins));
      const b = single(warm!.run(ins));
      if (!literalsIdentical(a, b)) throw new Error("bench: cold and warm results differ");
      console.log("--run: cold and warm executables agree bit for bit");
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === self) {
  if (process.argv.includes("--child")) runChild();
  else if (process.argv.includes("--native-addon")) getBackend("native"); // fills KILN_CACHE_DIR
  else main();
}
