// The wasm backend's threads (runtime/wasm/threads.ts, issue #17): every op case and the GEMM,
// fused softmax / layer norm and control flow at 1, 2 and 3 threads, against the evaluator
// within the tolerance tier and bitwise equal across thread counts (parallel loops are split,
// reductions never are, and each output element is computed the same way whoever computes
// it). The split threshold is set to 0 here so even the op cases' small shapes are split, and
// every run starts from a memory of 0xFF bytes (a row no thread wrote cannot pass). Also:
// a worker that fails gives an Error (not a hang), the pool does not keep a process alive, and
// without SharedArrayBuffer the backend runs single-threaded and says why.

import { spawnSync } from "node:child_process";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { compile, explainWith, matmul, tanh, tensor, type Tensor } from "../../index.ts";
import { ModuleBuilder } from "../../ir/builder.ts";
import { cloneModule } from "../../ir/clone.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { type Literal, literal } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { OPCODES } from "../../ir/opcodes.ts";
import { printHlo } from "../../ir/print.ts";
import { arrayShape, scalarShape } from "../../ir/shape.ts";
import { optimizationPipeline } from "../../passes/index.ts";
import { getBackend } from "../../runtime/index.ts";
import { toleranceProblem } from "../../runtime/tiers.ts";
import { type WasmExecutable, wasmTesting } from "../../runtime/wasm/backend.ts";
import {
  setWasmThreads,
  shutdownWasmPool,
  wasmPoolStats,
  wasmThreads,
  wasmThreadsTesting,
  wasmThreadsUnavailable,
  withWasmThreads,
} from "../../runtime/wasm/threads.ts";
import { type Case, CASES, describeValue, UNSUPPORTED } from "./fixtures/op_cases.ts";

const COUNTS = [1, 2, 3] as const;
const repoRoot = join(import.meta.dirname, "..", "..");
const child = join(import.meta.dirname, "fixtures", "wasm", "threads_child.ts");

beforeAll(() => {
  wasmThreadsTesting.minWork = 0;
  wasmTesting.poison = true;
});
afterAll(() => {
  wasmThreadsTesting.minWork = undefined;
  wasmTesting.poison = false;
  shutdownWasmPool();
});
afterEach(() => {
  wasmThreadsTesting.fault = undefined;
  setWasmThreads(0);
});

function leaves(v: EvalValue): Literal[] {
  return Array.isArray(v) ? v.flatMap(leaves) : [v];
}

function bytesOf(v: EvalValue): Uint8Array[] {
  return leaves(v).map((l) => new Uint8Array(l.data.buffer, l.data.byteOffset,
    l.data.byteLength).slice());
}

/**
 * Runs `m` on wasm at 1, 2 and 3 threads: each within the tier of the evaluator, all three
 * bitwise equal. Returns the pool steps the runs took (so a test can see the split happened).
 */
function checkCounts(m: Module, inputs: EvalValue[], label: string, exe?: WasmExecutable): number {
  const e = exe ?? (getBackend("wasm").compile(m) as WasmExecutable);
  const want = evaluate(m, inputs);
  const steps0 = wasmPoolStats.steps;
  let first: Uint8Array[] | undefined;
  for (const n of COUNTS) {
    const got = withWasmThreads(n, () => e.run(inputs));
    const why = toleranceProblem(m, inputs, got, want);
    if (why !== null) {
      throw new Error(`${label}: wasm at ${n} threads differs from the evaluator: ${why}\n` +
        `${printHlo(m)}\ninputs: ${inputs.map(describeValue).join("; ")}\n` +
        `want ${describeValue(want)}\ngot ${describeValue(got)}`);
    }
    const b = bytesOf(got);
    if (first === undefined) first = b;
    else {
      b.forEach((x, i) => {
        if (!x.every((v, j) => v === first![i]![j])) {
          throw new Error(`${label}: result ${i} at ${n} threads is not bitwise equal to 1 thread's`);
        }
      });
    }
  }
  return wasmPoolStats.steps - steps0;
}

function optimized(m: Module): Module {
  const opt = cloneModule(m);
  optimizationPipeline().run(opt);
  return opt;
}

/** Deterministic f32 values. */
function values(n: number, seed: number, scale = 4): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * scale;
  }
  return out;
}

describe("wasm threads: the thread count", () => {
  it("defaults to the cores, and setWasmThreads / withWasmThreads set it", () => {
    expect(wasmThreadsUnavailable()).toBeUndefined();
    setWasmThreads(3);
    expect(wasmThreads()).toBe(3);
    expect(withWasmThreads(2, () => wasmThreads())).toBe(2);
    expect(wasmThreads()).toBe(3);
    setWasmThreads(100000);
    expect(wasmThreads()).toBe(512);
    expect(() => setWasmThreads(-1)).toThrow(/wasm threads must be an integer >= 0, got -1/);
    expect(() => setWasmThreads(1.5)).toThrow(/integer >= 0/);
    expect(() => withWasmThreads(0, () => 0)).toThrow(/integer >= 1, got 0/);
  });
});

describe("wasm threads: compile(fn, { threads })", () => {
  it("runs each call at that count on wasm (1: no pool step), the same bits", () => {
    setWasmThreads(3);
    const f = (a: Tensor, b: Tensor) => tanh(matmul(a, b));
    const a = tensor(values(48 * 40, 1), { shape: [48, 40] });
    const b = tensor(values(40 * 56, 2), { shape: [40, 56] });
    const one = compile(f, { backend: "wasm", threads: 1 });
    const two = compile(f, { backend: "wasm", threads: 2 });
    let steps = wasmPoolStats.steps;
    const x = one(a, b) as Tensor;
    expect(wasmPoolStats.steps).toBe(steps);
    steps = wasmPoolStats.steps;
    const y = two(a, b) as Tensor;
    expect(wasmPoolStats.steps).toBeGreaterThan(steps);
    expect(Array.from(y.data() as Float32Array)).toEqual(Array.from(x.data() as Float32Array));
    expect(wasmThreads()).toBe(3); // the process setting is back after each call
  });
});

describe("wasm threads: every op case at 1, 2 and 3 threads", () => {
  // Four samples per opcode (the wasm row of backend_ops runs 24 at one thread).
  const RUNS = 4;
  for (const [k, op] of OPCODES.entries()) {
    const c = CASES[op];
    if (c === UNSUPPORTED) continue;
    it(op, () => {
      const cases: Case[] = fc.sample(c, { numRuns: RUNS, seed: 7000 + k });
      for (const [i, kc] of cases.entries()) checkCounts(kc.module, kc.inputs, `${op} #${i}`);
    });
  }
});

describe("wasm threads: GEMM", () => {
  it("shapes that miss the tile edges, batched, transposed, split by rows and by columns", () => {
    const shapes: [number, number, number, number][] = [
      // M, N, K, batch
      [1, 1, 1, 1], [5, 7, 3, 1], [33, 65, 17, 1], [33, 65, 17, 3], [2, 300, 40, 1],
      [4, 9, 5, 2], [130, 8, 33, 1], [64, 64, 64, 2], [3, 1, 7, 1], [37, 0, 5, 1],
    ];
    let steps = 0;
    for (const [M, N, K, B] of shapes) {
      for (const [ta, tb] of [[false, false], [true, false], [false, true], [true, true]]) {
        const mb = new ModuleBuilder(`threads_dot_${M}_${N}_${K}_${B}`);
        const aDims = ta ? [B, K, M] : [B, M, K];
        const bDims = tb ? [B, N, K] : [B, K, N];
        mb.entry("main", (b) => {
          const x = b.parameter(arrayShape("f32", aDims));
          const y = b.parameter(arrayShape("f32", bDims));
          return b.dot(x, y, {
            lhsBatch: [0], rhsBatch: [0], lhsContracting: [ta ? 1 : 2],
            rhsContracting: [tb ? 2 : 1],
          });
        });
        const m = mb.build();
        const inputs = [
          literal("f32", aDims, values(B * M * K, M * 31 + K)),
          literal("f32", bDims, values(B * K * N, N * 17 + K)),
        ];
        steps += checkCounts(m, inputs, `dot ${M}x${N}x${K} batch ${B} ta=${ta} tb=${tb}`);
      }
    }
    expect(steps).toBeGreaterThan(0);
  });

  it("a matmul with a bias and GELU epilogue (kOutput fusion) split by rows", () => {
    for (const [M, N, K] of [[70, 45, 19], [3, 200, 16]] as const) {
      const mb = new ModuleBuilder(`threads_epilogue_${M}`);
      mb.entry("main", (b) => {
        const x = b.parameter(arrayShape("f32", [M, K]));
        const w = b.parameter(arrayShape("f32", [K, N]));
        const bias = b.parameter(arrayShape("f32", [N]));
        const d = b.dot(x, w, { lhsContracting: [1], rhsContracting: [0] });
        const y = b.add(d, b.broadcast(bias, [M, N], [1]));
        return b.multiply(y, b.logistic(b.multiply(y, b.broadcast(b.scalar("f32", 1.702), [M, N], []))));
      });
      const m = mb.build();
      const opt = optimized(m);
      const inputs = [literal("f32", [M, K], values(M * K, 1)),
        literal("f32", [K, N], values(K * N, 2)), literal("f32", [N], values(N, 3))];
      const exe = getBackend("wasm").compile(opt) as WasmExecutable;
      expect(exe.fallback).toBeUndefined();
      expect(checkCounts(m, inputs, `epilogue ${M}x${N}x${K}`, exe)).toBeGreaterThan(0);
    }
  });
});

describe("wasm threads: fused programs and control flow", () => {
  it("a fused softmax and a layer norm", () => {
    for (const [rows, cols] of [[1, 1], [5, 33], [37, 130], [3, 1000]] as const) {
      const mb = new ModuleBuilder(`threads_softmax_${rows}_${cols}`);
      const add = mb.reducer("add", "f32");
      const max = mb.reducer("max", "f32");
      mb.entry("main", (b) => {
        const x = b.parameter(arrayShape("f32", [rows, cols]));
        const zero = b.scalar("f32", 0);
        const mx = b.reduce(x, b.scalar("f32", -Infinity), [1], max);
        const e = b.exp(b.subtract(x, b.broadcast(mx, [rows, cols], [0])));
        const soft = b.divide(e, b.broadcast(b.reduce(e, zero, [1], add), [rows, cols], [0]));
        const n = b.broadcast(b.scalar("f32", cols), [rows], []);
        const mean = b.divide(b.reduce(x, zero, [1], add), n);
        const xc = b.subtract(x, b.broadcast(mean, [rows, cols], [0]));
        const v = b.divide(b.reduce(b.multiply(xc, xc), zero, [1], add), n);
        const inv = b.rsqrt(b.add(v, b.broadcast(b.scalar("f32", 1e-5), [rows], [])));
        const ln = b.multiply(xc, b.broadcast(inv, [rows, cols], [0]));
        return b.tuple([soft, ln]);
      });
      const m = mb.build();
      const inputs = [literal("f32", [rows, cols], values(rows * cols, rows + cols))];
      const exe = getBackend("wasm").compile(optimized(m)) as WasmExecutable;
      expect(exe.fallback).toBeUndefined();
      const steps = checkCounts(m, inputs, `softmax/layer norm ${rows}x${cols}`, exe);
      if (rows > 1) expect(steps).toBeGreaterThan(0);
    }
  });

  it("a while loop and a conditional whose bodies run split kernels", () => {
    const mb = new ModuleBuilder("threads_control");
    const state = [arrayShape("s32", []), arrayShape("f32", [9, 21])];
    const cond = mb.computation("cond", (b) => {
      const s = b.parameter({ kind: "tuple", elements: state });
      return b.compare(b.getTupleElement(s, 0), b.scalar("s32", 5), "LT");
    });
    const body = mb.computation("body", (b) => {
      const s = b.parameter({ kind: "tuple", elements: state });
      const i = b.getTupleElement(s, 0);
      const x = b.getTupleElement(s, 1);
      const y = b.tanh(b.add(b.multiply(x, x), b.broadcast(b.scalar("f32", 0.25), [9, 21], [])));
      return b.tuple([b.add(i, b.scalar("s32", 1)), y]);
    });
    const yes = mb.computation("yes", (b) => {
      const x = b.parameter(arrayShape("f32", [9, 21]));
      return b.exp(x);
    });
    const no = mb.computation("no", (b) => {
      const x = b.parameter(arrayShape("f32", [9, 21]));
      return b.negate(x);
    });
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [9, 21]));
      const p = b.parameter(scalarShape("pred"));
      const w = b.while(b.tuple([b.scalar("s32", 0), x]), cond, body);
      const r = b.getTupleElement(w, 1);
      return b.conditional(p, [r, r], [yes, no]);
    });
    const m = mb.build();
    for (const p of [true, false]) {
      const inputs = [literal("f32", [9, 21], values(189, 4)), literal("pred", [], [p])];
      const exe = getBackend("wasm").compile(optimized(m)) as WasmExecutable;
      expect(exe.fallback).toBeUndefined();
      expect(checkCounts(m, inputs, `control p=${p}`, exe)).toBeGreaterThan(0);
    }
  });
});

describe("wasm threads: failures and the process", () => {
  const faultModule = () => {
    const mb = new ModuleBuilder("threads_fault");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [40, 40]));
      return b.tanh(b.dot(x, x, { lhsContracting: [1], rhsContracting: [0] }));
    });
    return mb.build();
  };

  for (const fault of ["throw", "exit"] as const) {
    it(`a worker that ${fault === "throw" ? "throws" : "exits"} gives an Error, then one thread`, () => {
      const m = faultModule();
      const inputs = [literal("f32", [40, 40], values(1600, 9))];
      const exe = getBackend("wasm").compile(m);
      const want = withWasmThreads(1, () => exe.run(inputs));
      wasmThreadsTesting.fault = fault;
      const t0 = Date.now();
      expect(() => withWasmThreads(2, () => exe.run(inputs))).toThrow(
        fault === "throw" ? /wasm threads: worker thread 1 failed: .*injected worker fault/
          : /wasm threads: worker thread 1 exited/);
      expect(Date.now() - t0).toBeLessThan(20_000);
      // The pool is retired: the backend says why and runs single-threaded, with the same bits.
      expect(wasmThreadsUnavailable()).toMatch(fault === "throw" ? /failed/ : /exited/);
      expect(withWasmThreads(2, () => wasmThreads())).toBe(1);
      const again = withWasmThreads(2, () => exe.run(inputs));
      expect(bytesOf(again)).toEqual(bytesOf(want));
      shutdownWasmPool();
      expect(wasmThreadsUnavailable()).toBeUndefined();
      const steps = wasmPoolStats.steps;
      expect(bytesOf(withWasmThreads(2, () => exe.run(inputs)))).toEqual(bytesOf(want));
      expect(wasmPoolStats.steps).toBeGreaterThan(steps);
    });
  }

  const runChild = (env: Record<string, string>, args: string[] = []) => {
    const r = spawnSync(process.execPath, ["--import", "tsx", child, ...args], {
      cwd: repoRoot,
      encoding: "utf8",
      env: { ...process.env, KILN_NATIVE: "0", KILN_CACHE_DISK: "0", ...env },
      timeout: 60_000,
    });
    expect(r.signal, `the child was killed (it did not exit by itself): ${r.stderr}`).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    return { out: JSON.parse(r.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>,
      stderr: r.stderr };
  };

  it("the pool does not keep a process alive (KILN_NUM_THREADS=2)", () => {
    const { out } = runChild({ KILN_NUM_THREADS: "2" });
    expect(out).toMatchObject({ threads: 2, why: null, workers: 1, problem: null, fallback: null });
    expect(out["steps"]).toBeGreaterThan(0);
  });

  it("KILN_NUM_THREADS=1 runs on the calling thread alone", () => {
    const { out } = runChild({ KILN_NUM_THREADS: "1" });
    expect(out).toMatchObject({ threads: 1, steps: 0, workers: 0, problem: null });
  });

  it("without SharedArrayBuffer: single-threaded, said under KILN_LOGS=backend", () => {
    const { out, stderr } = runChild({ KILN_NUM_THREADS: "2", KILN_LOGS: "backend" },
      ["--hide-sab"]);
    expect(out).toMatchObject({ threads: 1, steps: 0, workers: 0, problem: null, fallback: null });
    expect(out["why"]).toMatch(/SharedArrayBuffer is not available/);
    expect(stderr).toMatch(/wasm: runs single-threaded: SharedArrayBuffer is not available/);
  });

  it("explain() says why wasm runs single-threaded", () => {
    const f = (a: Tensor) => tanh(matmul(a, a));
    const a = tensor(values(24 * 24, 5), { shape: [24, 24] });
    expect(explainWith(f, { backend: "wasm" }, a).backend.note ?? "").not.toMatch(/single/);
    wasmThreadsTesting.hideSharedMemory = true;
    try {
      const e = explainWith(f, { backend: "wasm" }, a);
      expect(e.backend.note).toMatch(/runs single-threaded: SharedArrayBuffer is not available/);
      expect(e.toString()).toMatch(/backend: wasm \(tolerance tier\); .*runs single-threaded/);
    } finally {
      wasmThreadsTesting.hideSharedMemory = false;
    }
  });

  it("the in-process probe: a hidden shared memory gives unshared modules and one thread", () => {
    wasmThreadsTesting.hideSharedMemory = true;
    try {
      expect(wasmThreadsUnavailable()).toMatch(/SharedArrayBuffer is not available/);
      expect(withWasmThreads(3, () => wasmThreads())).toBe(1);
      const m = faultModule();
      const inputs = [literal("f32", [40, 40], values(1600, 11))];
      const steps = wasmPoolStats.steps;
      const got = withWasmThreads(3, () => getBackend("wasm").compile(m).run(inputs));
      expect(wasmPoolStats.steps).toBe(steps);
      expect(toleranceProblem(m, inputs, got, evaluate(m, inputs))).toBeNull();
    } finally {
      wasmThreadsTesting.hideSharedMemory = false;
    }
  });
});
