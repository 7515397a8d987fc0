// The `native` backend: the kernel layer rendered as C. A module is lowered to its step list
// (runtime/kernel/program.ts); each distinct kernel becomes one C function (render_c.ts) —
// identical kernels (a model's 12 identical layers, every shape of an eager op) are rendered,
// compiled and loaded once per process, keyed by their source; kernels not built yet are
// batched into a few translation units compiled in parallel by the system C compiler and kept
// in the verified native library cache (libcache.ts), so a new process loads them instead of
// compiling. The step list itself is data run by the addon's interpreter (csrc/program.c), with
// one arena per executable: no compiler run per program. Eager one-op modules are lowered
// shape-generic (dims are run-time sizes), so the compiler runs once per (op, dtypes, rank,
// attributes), never per shape. The `tolerance` tier (runtime/tiers.ts): float sums may be
// reassociated, contracted to FMA, split across threads; integer semantics are exact.
//
// What it cannot compile natively (a kernel the lowering declines, an integer dot, a module with
// bounded dynamic dims) runs on `js` instead, said under KILN_LOGS=backend — never an error,
// never a wrong result. The backend is registered only where nativeStatus() says a compiler
// and the runtime addon work; elsewhere `js` stays the default and the reason is logged.

import { createHash } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { EvalValue } from "../../ir/evaluate.ts";
import { elementInfo } from "../../ir/element_types.ts";
import { Literal, type LiteralData } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { isDynamic, type Shape, shapeToString } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import { log } from "../../util/log.ts";
import {
  type Backend,
  type CompileHints,
  type Executable,
  registerBackend,
  UnsupportedError,
} from "../backend.ts";
import type { Kernel } from "../kernel/kir.ts";
import { lowerProgram, type Program, type Step } from "../kernel/program.ts";
import { scheduleKernel } from "../kernel/schedule.ts";
import { jsBackend } from "../js/backend.ts";
import {
  type LibraryHandle,
  loadNativeAddon,
  type NativeAddon,
  type ProgramHandle,
  runtimeHeadersHash,
} from "./addon.ts";
import { encodeProgram } from "./encode.ts";
import { defaultLibCache } from "./libcache.ts";
import { CKernelRenderer, renderLibrary, renderSortKernel } from "./render_c.ts";
import { compileSharedObjects, nativeStatus, privateTempDir, toolchain } from "./toolchain.ts";

/** Bumped when generated kernels or the program encoding change meaning (cache keys). */
export const NATIVE_CODEGEN_VERSION = 1;

/** Flags kernels are built with on top of the toolchain's (part of every kernel key). */
const KERNEL_FLAGS = ["-fopenmp-simd", "-fno-strict-aliasing"] as const;

/** Kernels per translation unit at most (more units compile in parallel). */
const MAX_KERNELS_PER_TU = 48;

export interface NativeExecutable extends Executable {
  /** The C source of the kernels this executable calls (for debugging). */
  readonly source: string;
  /** True when the executable is `js` standing in (a module native declines). */
  readonly fallback?: string;
}

interface LoadedFn {
  readonly lib: LibraryHandle;
  readonly index: number;
  readonly source: string;
}

/** Every kernel function loaded in this process, by the hash of its source. */
const loaded = new Map<string, LoadedFn>();

function sha256(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

function addon(): NativeAddon {
  const a = loadNativeAddon();
  if ("error" in a) throw new Error(`native: the runtime addon is unavailable: ${a.error}`);
  return a;
}

/** A kernel function to build: its body (named KILN_FN), hash, and what it implements. */
interface FnSource {
  readonly key: string;
  readonly body: string;
  /** The instruction or fusion it was first made for (a comment; not part of its key). */
  readonly comment: string;
}

const FN_PLACEHOLDER = "KILN_FN";

function fnName(key: string): string {
  return `kiln_${key.slice(0, 24)}`;
}

/** The C functions of a program's kernels, and each kernel's position in that list. */
function kernelSources(program: Program): { fns: FnSource[]; index: Map<object, number> } {
  const r = new CKernelRenderer();
  const fns: FnSource[] = [];
  const byKey = new Map<string, number>();
  const index = new Map<object, number>();
  const add = (owner: object, body: string, comment: string) => {
    const key = sha256(body);
    let i = byKey.get(key);
    if (i === undefined) {
      i = fns.length;
      fns.push({ key, body, comment });
      byKey.set(key, i);
    }
    index.set(owner, i);
  };
  const kernel = (k: Kernel) => {
    if (index.has(k)) return;
    add(k, r.render(scheduleKernel(k), FN_PLACEHOLDER), k.comment);
  };
  const visit = (s: Step) => {
    switch (s.kind) {
      case "kernel":
        kernel(s.call.kernel);
        return;
      case "dot":
      case "conv":
        if (s.epilogue?.perTile) kernel(s.epilogue.call.kernel);
        else if (s.epilogue) kernel(s.epilogue.call.kernel);
        return;
      case "sort":
        add(s, renderSortKernel(s, FN_PLACEHOLDER), `sort %${s.name}`);
        return;
      default:
        return;
    }
  };
  for (const c of program.computations) for (const s of c.steps) visit(s);
  return { fns, index };
}

/** Builds (or loads from the library cache) every kernel not loaded yet. */
function ensureLoaded(fns: readonly FnSource[]): void {
  const missing = [...new Map(fns.filter((f) => !loaded.has(f.key)).map((f) => [f.key, f]))
    .values()].sort((a, b) => (a.key < b.key ? -1 : 1));
  if (missing.length === 0) return;
  const tc = toolchain();
  if (!tc.ok) throw new Error(`native: ${tc.reason}`);
  const a = addon();
  const cache = defaultLibCache();
  // Deterministic units: the same missing set always makes the same units (cache hits).
  const units = Math.max(1, Math.ceil(missing.length / MAX_KERNELS_PER_TU));
  const perUnit = Math.ceil(missing.length / units);
  const tus: { fns: FnSource[]; source: string; key: string }[] = [];
  for (let u = 0; u < units; u++) {
    const part = missing.slice(u * perUnit, (u + 1) * perUnit);
    if (part.length === 0) continue;
    const source = renderLibrary(
      part.map((f) => ({
        name: fnName(f.key),
        source: f.body.replace(FN_PLACEHOLDER, fnName(f.key)),
        comment: f.comment,
      })),
    );
    const key =
      `kiln-native-kernels/${NATIVE_CODEGEN_VERSION} toolchain=${tc.value.key} ` +
      `headers=${runtimeHeadersHash()} flags=${KERNEL_FLAGS.join(",")} src=${sha256(source)}`;
    tus.push({ fns: part, source, key });
  }
  const bytes = new Map<string, Uint8Array>();
  const toBuild = tus.filter((t) => {
    const b = cache.get(t.key);
    if (b) bytes.set(t.key, b);
    return !b;
  });
  if (toBuild.length > 0) {
    const t0 = performance.now();
    const dir = privateTempDir("kernels");
    try {
      const jobs = toBuild.map((t, i) => ({ source: t.source, out: join(dir, `tu${i}.so`) }));
      const results = compileSharedObjects(jobs, { extraFlags: [...KERNEL_FLAGS] });
      results.forEach((r, i) => {
        if (!r.ok) {
          throw new Error(`native: the C compiler failed on generated kernels: ${r.stderr.trim()
            .split("\n").slice(0, 6).join("\n")}`);
        }
        const b = new Uint8Array(readFileSync(jobs[i]!.out));
        cache.put(toBuild[i]!.key, b);
        bytes.set(toBuild[i]!.key, b);
      });
      log("backend", () => `native: compiled ${missing.length} kernel(s) in ${toBuild.length} ` +
        `unit(s) in ${(performance.now() - t0).toFixed(0)} ms`);
      log("ir", () => `native kernels compiled:\n${toBuild.map((t) => t.source).join("\n")}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  for (const t of tus) {
    const lib = a.loadLibrary(bytes.get(t.key)!);
    t.fns.forEach((f) => {
      const index = lib.names.indexOf(fnName(f.key));
      if (index < 0) throw new Error(`native: a kernel library lacks ${fnName(f.key)}`);
      loaded.set(f.key, { lib: lib.handle, index, source: f.body });
    });
  }
}

function leaves(v: EvalValue, out: LiteralData[]): void {
  if (Array.isArray(v)) v.forEach((e) => leaves(e, out));
  else out.push(v.data);
}

function allocResults(s: Shape, out: LiteralData[]): void {
  if (s.kind === "tuple") {
    s.elements.forEach((e) => allocResults(e, out));
    return;
  }
  const n = s.dims.reduce((a, b) => a * b, 1);
  const ctor = globalThis[elementInfo(s.type).storage] as unknown as new (n: number) => LiteralData;
  out.push(new ctor(n));
}

function resultValue(s: Shape, bufs: readonly LiteralData[], at: { i: number }): EvalValue {
  if (s.kind === "tuple") return s.elements.map((e) => resultValue(e, bufs, at));
  return new Literal(s.type, s.dims, bufs[at.i++]!);
}

function conformance(v: EvalValue, s: Shape): string | null {
  if (s.kind === "tuple") {
    if (!Array.isArray(v) || v.length !== s.elements.length) {
      return `expected a tuple ${shapeToString(s, false)}`;
    }
    for (let i = 0; i < v.length; i++) {
      const p = conformance(v[i]!, s.elements[i]!);
      if (p !== null) return `tuple element ${i}: ${p}`;
    }
    return null;
  }
  if (Array.isArray(v)) return `expected an array ${shapeToString(s, false)}, got a tuple`;
  if (v.type !== s.type) return `element type ${v.type} is not ${s.type}`;
  if (v.dims.length !== s.dims.length || v.dims.some((d, i) => d !== s.dims[i])) {
    return `dims [${v.dims.join(",")}] are not [${s.dims.join(",")}]`;
  }
  return null;
}

/**
 * Programs computing fewer elements than this (over all their instructions) are lowered
 * shape-generic like eager ops: their speed is the call's overhead, not the kernels', and their
 * kernels then serve every other size of the same program (a bucket of a dynamic dim, a test's
 * next shape) without another compiler run.
 */
const GENERIC_BELOW_ELEMENTS = 1 << 16;

/** Test seam: force shape-generic ("always") or static ("never") lowering of programs. */
export const nativeTesting: { generic: "auto" | "always" | "never" } = { generic: "auto" };

function smallProgram(module: Module): boolean {
  if (nativeTesting.generic !== "auto") return nativeTesting.generic === "always";
  let n = 0;
  for (const i of module.entry.instructions) {
    const s = i.shape;
    if (s.kind === "array") n += s.dims.reduce((a, b) => a * b, 1);
    if (n >= GENERIC_BELOW_ELEMENTS) return false;
  }
  return true;
}

/** How native lowers: threads want rows, the runtime's GEMM and convolution take f32 only. */
function nativeLowering(hints: CompileHints | undefined, module: Module) {
  return {
    backend: "native",
    minRows: 16,
    generic: hints?.purpose === "eager" || smallProgram(module),
    libraryContraction: (op: "dot" | "convolution", t: string, batchGroups: number) =>
      t === "f32" && (op === "dot" || batchGroups === 1),
  };
}

function fallbackTo(module: Module, why: string): NativeExecutable {
  log("backend", `native: module '${module.name}' runs on js: ${why}`);
  const exe = jsBackend.compile(module);
  return {
    backend: "native",
    get module() {
      return exe.module;
    },
    source: `// runs on js: ${why}`,
    fallback: why,
    run: (inputs) => exe.run(inputs),
  };
}

function compileNative(module: Module, hints?: CompileHints): NativeExecutable {
  verifyModule(module);
  for (const c of module.computations) {
    for (const i of c.instructions) {
      if (isDynamic(i.shape)) return fallbackTo(module, "it has bounded dynamic dims");
    }
  }
  const t0 = performance.now();
  let program: Program;
  try {
    program = lowerProgram(module, nativeLowering(hints, module));
  } catch (e) {
    if (e instanceof UnsupportedError) return fallbackTo(module, e.message);
    throw e;
  }
  const { fns, index } = kernelSources(program);
  ensureLoaded(fns);
  let encoded;
  try {
    encoded = encodeProgram(program, (k) => {
      const i = index.get(k);
      if (i === undefined) throw new Error("native: a step's kernel was not rendered");
      return i;
    });
  } catch (e) {
    if (e instanceof UnsupportedError) return fallbackTo(module, e.message);
    throw e;
  }
  const a = addon();
  const libs = fns.map((f) => loaded.get(f.key)!.lib);
  const indices = Int32Array.from(fns.map((f) => loaded.get(f.key)!.index));
  const handle: ProgramHandle = a.createProgram(encoded.code, libs, indices, encoded.consts);
  const params = module.entry.parameters.map((p) => p.shape);
  const root = module.entry.root.shape;
  log("perf", () => `native: compiled '${module.name}' in ${(performance.now() - t0).toFixed(1)} ms`);
  return {
    backend: "native",
    module,
    get source(): string {
      return fns
        .map((f) => `/* ${f.comment} */\n${f.body.replace(FN_PLACEHOLDER, fnName(f.key))}`)
        .join("\n\n");
    },
    run(inputs: readonly EvalValue[]): EvalValue {
      if (inputs.length !== params.length) {
        throw new Error(`native: module '${module.name}' takes ${params.length} argument(s), ` +
          `got ${inputs.length}`);
      }
      params.forEach((s, i) => {
        const problem = conformance(inputs[i]!, s);
        if (problem !== null) {
          throw new Error(`native: argument ${i} of '${module.name}' does not match ` +
            `${shapeToString(s, false)}: ${problem}`);
        }
      });
      const args: LiteralData[] = [];
      for (const v of inputs) leaves(v, args);
      const results: LiteralData[] = [];
      allocResults(root, results);
      a.runProgram(handle, args, results);
      return resultValue(root, results, { i: 0 });
    },
  };
}

/**
 * Builds, in one batch of parallel compiler runs, every kernel the given modules need (what
 * compile would build one module at a time). For tests and warm-ups that compile many small
 * modules; modules native declines are skipped (compile will run them on js).
 */
export function prepareNative(modules: readonly Module[], hints?: CompileHints): number {
  const all: FnSource[] = [];
  for (const m of modules) {
    try {
      verifyModule(m);
      if (m.computations.some((c) => c.instructions.some((i) => isDynamic(i.shape)))) continue;
      const program = lowerProgram(m, nativeLowering(hints, m));
      all.push(...kernelSources(program).fns);
    } catch (e) {
      if (!(e instanceof UnsupportedError)) throw e;
    }
  }
  ensureLoaded(all);
  return all.length;
}

/** Threads the native runtime uses (the calling thread included); 0 restores the default. */
export function setNativeThreads(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new Error(`native threads must be >= 0, got ${n}`);
  addon().setThreads(n);
}

export function nativeThreads(): number {
  return addon().getThreads();
}

/** Whether `native` can run here (KILN_NATIVE=0 turns it off); logs why not once. */
function nativeAvailable(): boolean {
  if (process.env["KILN_NATIVE"] === "0") {
    log("backend", "native: disabled by KILN_NATIVE=0; the default backend is js");
    return false;
  }
  const st = nativeStatus();
  if (!st.ok) {
    log("backend", `native: not available (${st.reason}); the default backend is js`);
    return false;
  }
  return true;
}

export const nativeBackend: Backend = {
  name: "native",
  priority: 20,
  tier: "tolerance",
  available: nativeAvailable,
  compile: compileNative,
};

registerBackend(nativeBackend);

