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
// What it cannot compile natively (a kernel the lowering declines, a module with bounded
// dynamic dims, kernels the C compiler rejects) runs on `js` instead, said under
// KILN_LOGS=backend and in explain() — never an error, never a wrong result. Dots and
// convolutions of f32 call the runtime's GEMM; other types get generated contraction kernels. The backend is registered only where nativeStatus() says a compiler
// and the runtime addon work; elsewhere `js` stays the default and the reason is logged.

import { createHash } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { EvalValue } from "../../ir/evaluate.ts";
import { ELEMENT_TYPE_INFO } from "../../ir/element_types.ts";
import { conformanceProblem } from "../../ir/evaluate_support.ts";
import type { LiteralData } from "../../ir/literal.ts";
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
import { canonicalInstructions } from "../js/payload.ts";
import {
  type LibraryHandle,
  loadNativeAddon,
  type NativeAddon,
  type ProgramHandle,
  runtimeHeadersHash,
} from "./addon.ts";
import { CompileNeverError, compileMode } from "../cache_stats.ts";
import { encodeProgram } from "./encode.ts";
import { defaultLibCache } from "./libcache.ts";
import { CKernelRenderer, renderLibrary, renderSortKernel } from "./render_c.ts";
import { compileSharedObjects, nativeStatus, privateTempDir, toolchain } from "./toolchain.ts";
import { allocResults, leafData, resultValue, type ResultAllocator } from "../kernel/io.ts";

/** Bumped when generated kernels or the program encoding change meaning (cache keys). */
export const NATIVE_CODEGEN_VERSION = 3;

/**
 * Flags kernels are built with on top of the toolchain's (part of every kernel key):
 * `omp simd` pragmas honoured (the sums the tolerance tier may reorder), no type-based alias
 * assumptions (buffers of in-place kernels alias across types), and on AVX-512 machines full
 * 512-bit vectors (gcc prefers 256 by default, halving the exp/tanh/erf loops' throughput).
 */
function kernelFlags(isa: string): string[] {
  const flags = ["-fopenmp-simd", "-fno-strict-aliasing"];
  if (isa === "avx512") flags.push("-mprefer-vector-width=512");
  return flags;
}

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
  /** The library cache key of the translation unit it was built in. */
  readonly tu: string;
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

/**
 * The C compiler could not build a program's kernels (or no compiler works): the module runs
 * on js instead, with this message as the reason.
 */
export class KernelBuildError extends Error {}

/** Builds (or loads from the library cache) every kernel not loaded yet. */
function ensureLoaded(fns: readonly FnSource[]): void {
  const missing = [...new Map(fns.filter((f) => !loaded.has(f.key)).map((f) => [f.key, f]))
    .values()].sort((a, b) => (a.key < b.key ? -1 : 1));
  if (missing.length === 0) return;
  const tc = toolchain();
  if (!tc.ok) throw new KernelBuildError(`native: ${tc.reason}`);
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
      `headers=${runtimeHeadersHash()} flags=${kernelFlags(tc.value.isa).join(",")} ` +
      `src=${sha256(source)}`;
    tus.push({ fns: part, source, key });
  }
  const bytes = new Map<string, Uint8Array>();
  const toBuild = tus.filter((t) => {
    const b = cache.get(t.key);
    if (b) bytes.set(t.key, b);
    return !b;
  });
  if (toBuild.length > 0 && compileMode() === "never") {
    // Cache-only mode: a kernel the library cache lacks would run the C compiler.
    throw new CompileNeverError(
      toBuild[0]!.key,
      { kind: "program", source: "a native kernel library" },
      `${toBuild.length} of ${tus.length} kernel libraries are not in the native library ` +
        `cache (${cache.info().dir})`,
    );
  }
  if (toBuild.length > 0) {
    const t0 = performance.now();
    const dir = privateTempDir("kernels");
    try {
      const jobs = toBuild.map((t, i) => ({ source: t.source, out: join(dir, `tu${i}.so`) }));
      const results = compileSharedObjects(jobs, { extraFlags: kernelFlags(tc.value.isa) });
      results.forEach((r, i) => {
        if (!r.ok) {
          throw new KernelBuildError(`the C compiler failed on its kernels: ${r.stderr.trim()
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
    unitsLoaded.set(t.key, { handle: lib.handle, names: lib.names });
    t.fns.forEach((f) => {
      const index = lib.names.indexOf(fnName(f.key));
      if (index < 0) throw new Error(`native: a kernel library lacks ${fnName(f.key)}`);
      loaded.set(f.key, { lib: lib.handle, index, source: f.body, tu: t.key });
    });
  }
}

/** Translation units loaded in this process, by library cache key. */
const unitsLoaded = new Map<string, { handle: LibraryHandle; names: readonly string[] }>();

/**
 * Loads translation unit `key` from the library cache (verified by its MAC before it is
 * loaded); throws when it is not there, so a cached program whose libraries were evicted is
 * recompiled by the program cache.
 */
function unit(key: string): { handle: LibraryHandle; names: readonly string[] } {
  const known = unitsLoaded.get(key);
  if (known) return known;
  const bytes = defaultLibCache().get(key);
  if (!bytes) {
    // Cache-only mode: recompiling the program would build the library; keep the entry.
    if (compileMode() === "never") {
      throw new CompileNeverError(
        key,
        { kind: "program", source: "a native kernel library" },
        `the library is not in the native library cache (${defaultLibCache().info().dir})`,
      );
    }
    throw new Error(`native: a kernel library of this program is not in the cache`);
  }
  const lib = addon().loadLibrary(bytes);
  const u = { handle: lib.handle, names: lib.names };
  unitsLoaded.set(key, u);
  return u;
}





/**
 * Programs computing fewer elements than this (over all their instructions) are lowered
 * shape-generic like eager ops: their speed is the call's overhead, not the kernels', and their
 * kernels then serve every other size of the same program (a bucket of a dynamic dim, a test's
 * next shape) without another compiler run.
 */
const GENERIC_BELOW_ELEMENTS = 1 << 16;

/** Test seam: force shape-generic ("always") or static ("never") lowering of programs. */
export const nativeTesting: {
  generic: "auto" | "always" | "never";
  /** The result allocator programs use (undefined: a fresh zeroed typed array). */
  readonly resultBuffer: ResultAllocator;
  /** The addon's huge-page advice (bytes advised). */
  readonly adviseHugePages: (buffer: ArrayBuffer) => number;
} = {
  generic: "auto",
  resultBuffer: (bytes) => uninitializedResult(bytes),
  adviseHugePages: (buffer) => addon().adviseHugePages(buffer),
};

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

/** Executables that are js standing in, and why (serialized as just that). */
const fallbacks = new WeakMap<Executable, string>();

function fallbackTo(module: Module, why: string): NativeExecutable {
  log("backend", `native: module '${module.name}' runs on js: ${why}`);
  const exe = jsBackend.compile(module);
  const out: NativeExecutable = {
    backend: "native",
    get module() {
      return exe.module;
    },
    source: `// runs on js: ${why}`,
    fallback: why,
    run: (inputs) => exe.run(inputs),
  };
  fallbacks.set(out, why);
  return out;
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
  try {
    ensureLoaded(fns);
  } catch (e) {
    // Never a crash: a compiler that rejects the kernels leaves the module to js.
    if (e instanceof KernelBuildError) return fallbackTo(module, e.message);
    throw e;
  }
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
  const libs = fns.map((f) => loaded.get(f.key)!.lib);
  const indices = Int32Array.from(fns.map((f) => loaded.get(f.key)!.index));
  const exe = instantiate(module, encoded, libs, indices, () =>
    fns.map((f) => `/* ${f.comment} */\n${f.body.replace(FN_PLACEHOLDER, fnName(f.key))}`)
      .join("\n\n"),
  );
  stored.set(exe, {
    code: encoded.code,
    consts: encoded.consts,
    steps: encoded.steps,
    fns: fns.map((f) => ({ unit: loaded.get(f.key)!.tu, name: fnName(f.key) })),
  });
  log("perf", () => `native: compiled '${module.name}' in ${(performance.now() - t0).toFixed(1)} ms`);
  return exe;
}

/** An executable over an encoded program and its kernel functions. */
/**
 * Results of at least this many bytes are allocated without clearing: a program writes every
 * element of every result, and a zero-filled 16 MiB result cost the elementwise chain a third of
 * its call (the allocator clears memory it reuses, at memory bandwidth, before the kernel
 * overwrites it). Buffer.allocUnsafe gives an ArrayBuffer of its own above 4 KiB, owned and freed
 * by V8 like any other. KILN_NATIVE_UNINIT_MIN (bytes) overrides the size; the tests set it to 0
 * with KILN_NATIVE_POISON_RESULTS=1 (each such buffer filled with 0xFF bytes, a NaN or -1 in every
 * element) to show that no program leaves a result element unwritten. Results of 4 MiB and up
 * are backed by transparent huge pages where the system offers them (madvise, before the
 * program's first write): the page faults of writing fresh memory were most of the cost of a
 * large result (a [50257,768] weight gradient: 60 ms of faults for 4 KiB pages, 9.5 with 2 MiB).
 */
const UNINIT_MIN_BYTES = 64 * 1024;
/** csrc/runtime_internal.h KILN_HUGE_MIN_BYTES. */
const HUGE_MIN_BYTES = 4 << 20;
let uninitMin: number | undefined;
let poison = false;
const uninitializedResult: ResultAllocator = (bytes) => {
  if (uninitMin === undefined) {
    const v = process.env["KILN_NATIVE_UNINIT_MIN"];
    uninitMin = v !== undefined && /^\d+$/.test(v) ? Number(v) : UNINIT_MIN_BYTES;
    poison = process.env["KILN_NATIVE_POISON_RESULTS"] === "1";
  }
  if (bytes < uninitMin || bytes === 0) return undefined;
  // Under 4 KiB allocUnsafe slices a shared pool: never hand that out as a result's buffer.
  if (bytes < 4096 || typeof Buffer === "undefined") {
    return poison ? new Uint8Array(bytes).fill(0xff).buffer : undefined;
  }
  const b = Buffer.allocUnsafe(bytes);
  if (b.byteOffset !== 0 || b.buffer.byteLength !== bytes) return undefined;
  const buffer = b.buffer as ArrayBuffer;
  if (bytes >= HUGE_MIN_BYTES) addon().adviseHugePages(buffer);
  if (poison) new Uint8Array(buffer).fill(0xff);
  return buffer;
};

function instantiate(
  module: Module | (() => Module),
  encoded: { code: BigInt64Array; consts: readonly ArrayBufferView[]; steps: readonly string[] },
  libs: readonly LibraryHandle[],
  indices: Int32Array,
  source: () => string,
  shapes?: { params: readonly Shape[]; root: Shape },
): NativeExecutable {
  const a = addon();
  const handle: ProgramHandle = a.createProgram(encoded.code, libs, indices, encoded.consts);
  const getModule = typeof module === "function" ? module : () => module;
  const name = () => getModule().name;
  if (process.env["KILN_NATIVE_PROFILE"] === "1") {
    // A program from the disk cache is named without decoding its stored module.
    const label = typeof module === "function" ? "(from the cache)" : module.name;
    profiled.push({ name: label, handle, steps: encoded.steps });
  }
  const params = shapes?.params ?? getModule().entry.parameters.map((p) => p.shape);
  const root = shapes?.root ?? getModule().entry.root.shape;
  return {
    backend: "native",
    get module(): Module {
      return getModule();
    },
    get source(): string {
      return source();
    },
    run(inputs: readonly EvalValue[]): EvalValue {
      if (inputs.length !== params.length) {
        throw new Error(`native: module '${name()}' takes ${params.length} argument(s), ` +
          `got ${inputs.length}`);
      }
      params.forEach((s, i) => {
        const problem = conformanceProblem(inputs[i]!, s);
        if (problem !== null) {
          throw new Error(`native: argument ${i} of '${name()}' does not match ` +
            `${shapeToString(s, false)}: ${problem}`);
        }
      });
      const args: LiteralData[] = [];
      for (const v of inputs) leafData(v, args);
      return resultValue(root, runLeaves(args), { i: 0 });
    },
    runLeaves,
  };

  function runLeaves(args: readonly LiteralData[]): LiteralData[] {
    const results: LiteralData[] = [];
    allocResults(root, results, uninitializedResult);
    a.runProgram(handle, args, results);
    return results;
  }
}

// ---- The disk cache --------------------------------------------------------------------------

/** What serialize needs of an executable this backend made. */
interface StoredProgram {
  readonly code: BigInt64Array;
  readonly consts: readonly ArrayBufferView[];
  readonly steps: readonly string[];
  /** Each kernel function: its translation unit's library cache key and symbol name. */
  readonly fns: readonly { unit: string; name: string }[];
}

const stored = new WeakMap<Executable, StoredProgram>();

/** Constants up to this many bytes are stored in the payload; larger ones are re-read. */
const INLINE_CONSTANT_BYTES = 16 * 1024;

const PAYLOAD_MAGIC = "KILNNTPG";

/**
 * The program cache's payload of a native executable: the encoded step list, the kernels by
 * translation unit (kept in the library cache) and symbol, the constants (small ones inline,
 * large ones by their position in the module's canonical order), all behind the toolchain key
 * it was built with. A load compiles nothing: it verifies and loads the units and makes the
 * program.
 */
function serializeNative(exe: Executable): Uint8Array {
  if (fallbacks.has(exe)) {
    // A js stand-in: the load decides again (cheaply) on the module.
    return new TextEncoder().encode(JSON.stringify({ format: PAYLOAD_MAGIC, fallback: true }));
  }
  const s = stored.get(exe);
  if (!s) throw new Error("native: serialize got an executable native did not compile");
  const tc = toolchain();
  if (!tc.ok) throw new KernelBuildError(`native: ${tc.reason}`);
  const positions = new Map<object, number>();
  canonicalInstructions(exe.module).forEach((i, k) => {
    const lit = i.opcode === "constant" ? i.attrs.literal : undefined;
    if (lit && !positions.has(lit.data)) positions.set(lit.data, k);
  });
  const blobs: Uint8Array[] = [];
  let blobBytes = 0;
  const consts = s.consts.map((c) => {
    const bytes = new Uint8Array(c.buffer, c.byteOffset, c.byteLength);
    const at = positions.get(c);
    if (bytes.length > INLINE_CONSTANT_BYTES && at !== undefined) return { at };
    blobs.push(bytes.slice());
    const off = blobBytes;
    blobBytes += bytes.length;
    return { blob: off, bytes: bytes.length, type: c.constructor.name };
  });
  const meta = {
    format: PAYLOAD_MAGIC,
    version: NATIVE_CODEGEN_VERSION,
    toolchain: tc.value.key,
    fns: s.fns,
    consts,
    steps: s.steps,
    // The signature, so that a load checks arguments without decoding the stored module.
    params: exe.module.entry.parameters.map((p) => p.shape),
    root: exe.module.entry.root.shape,
  };
  const metaBytes = new TextEncoder().encode(JSON.stringify(meta));
  const code = new Uint8Array(s.code.buffer, s.code.byteOffset, s.code.byteLength);
  const out = new Uint8Array(12 + metaBytes.length + code.length + blobBytes);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, metaBytes.length, true);
  dv.setUint32(4, code.length, true);
  dv.setUint32(8, blobBytes, true);
  out.set(metaBytes, 12);
  out.set(code, 12 + metaBytes.length);
  let at = 12 + metaBytes.length + code.length;
  for (const b of blobs) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

const TYPED: Record<string, new (b: ArrayBuffer) => ArrayBufferView> = {
  Float32Array,
  Int32Array,
  BigInt64Array,
  Uint8Array,
};

/** A shape as JSON.stringify wrote it (a stored signature). */
function isShape(v: unknown, depth = 0): boolean {
  if (typeof v !== "object" || v === null || depth > 64) return false;
  const o = v as Record<string, unknown>;
  if (o["kind"] === "tuple") {
    return Array.isArray(o["elements"]) && o["elements"].every((e) => isShape(e, depth + 1));
  }
  const dims = o["dims"], dynamic = o["dynamic"], layout = o["layout"];
  return o["kind"] === "array" && typeof o["type"] === "string" && Object.hasOwn(ELEMENT_TYPE_INFO, o["type"]) &&
    Array.isArray(dims) && dims.every((d) => Number.isInteger(d) && d >= 0) &&
    Array.isArray(dynamic) && dynamic.length === dims.length &&
    dynamic.every((d) => typeof d === "boolean") &&
    (layout === undefined || (Array.isArray(layout) && layout.every(Number.isInteger)));
}

function deserializeNative(module: Module, payload: Uint8Array): NativeExecutable {
  return loadNative(() => module, payload);
}

function loadNative(module: () => Module, payload: Uint8Array): NativeExecutable {
  const bad = (why: string): never => {
    throw new Error(`native cache payload: ${why}`);
  };
  if (payload[0] === 0x7b /* { */) {
    const m = JSON.parse(new TextDecoder().decode(payload)) as { format?: string; fallback?: boolean };
    if (m.format !== PAYLOAD_MAGIC || m.fallback !== true) bad("not a native program");
    return compileNative(module());
  }
  if (payload.length < 12) bad("too short");
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const metaLen = dv.getUint32(0, true);
  const codeLen = dv.getUint32(4, true);
  const blobLen = dv.getUint32(8, true);
  if (12 + metaLen + codeLen + blobLen !== payload.length || codeLen % 8 !== 0) bad("lengths");
  const meta = JSON.parse(new TextDecoder().decode(payload.subarray(12, 12 + metaLen))) as {
    format: string;
    version: number;
    toolchain: string;
    fns: { unit: string; name: string }[];
    consts: ({ at: number } | { blob: number; bytes: number; type: string })[];
    steps: string[];
    params: unknown;
    root: unknown;
  };
  if (meta.format !== PAYLOAD_MAGIC) bad("not a native program");
  if (meta.version !== NATIVE_CODEGEN_VERSION) bad(`codegen version ${meta.version}`);
  const tc = toolchain();
  if (!tc.ok || tc.value.key !== meta.toolchain) bad("built with another toolchain");
  // Copies (new Uint8Array(view)): the payload may be a Buffer view into the whole entry file,
  // and a Buffer's slice() shares its memory.
  const code = new BigInt64Array(
    new Uint8Array(payload.subarray(12 + metaLen, 12 + metaLen + codeLen)).buffer,
  );
  const blob = payload.subarray(12 + metaLen + codeLen);
  let instrs: ReturnType<typeof canonicalInstructions> | undefined;
  const consts = meta.consts.map((c) => {
    if ("at" in c) {
      instrs ??= canonicalInstructions(module());
      const lit = instrs[c.at]?.attrs.literal;
      if (!lit) bad(`constant position ${c.at}`);
      return lit!.data;
    }
    const ctor = TYPED[c.type];
    if (!ctor || c.blob + c.bytes > blob.length) bad("a constant");
    return new ctor!(new Uint8Array(blob.subarray(c.blob, c.blob + c.bytes)).buffer);
  });
  const libs: LibraryHandle[] = [];
  const indices = new Int32Array(meta.fns.length);
  meta.fns.forEach((f, i) => {
    const u = unit(f.unit);
    const index = u.names.indexOf(f.name);
    if (index < 0) bad(`kernel ${f.name} is not in its library`);
    libs.push(u.handle);
    indices[i] = index;
  });
  if (!Array.isArray(meta.params) || !meta.params.every((p) => isShape(p)) || !isShape(meta.root)) {
    bad("the signature");
  }
  const shapes = { params: meta.params as Shape[], root: meta.root as Shape };
  const encoded = { code, consts, steps: meta.steps };
  const exe = instantiate(module, encoded, libs, indices, () => "// loaded from the cache", shapes);
  stored.set(exe, { code, consts, steps: meta.steps, fns: meta.fns });
  return exe;
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

const profiled: { name: string; handle: ProgramHandle; steps: readonly string[] }[] = [];

/**
 * Where the programs' time went (KILN_NATIVE_PROFILE=1): per step of every native program
 * made since, its total seconds and calls, heaviest first.
 */
export function nativeProfile(): { program: string; step: string; ms: number; calls: number }[] {
  const out: { program: string; step: string; ms: number; calls: number }[] = [];
  for (const p of profiled) {
    const r = addon().programProfile(p.handle);
    if (!r) continue;
    const [s, n] = r;
    for (let i = 0; i < s.length; i++) {
      if (n[i]! > 0n) {
        out.push({ program: p.name, step: p.steps[i]!, ms: s[i]! * 1000, calls: Number(n[i]!) });
      }
    }
  }
  return out.sort((a, b) => b.ms - a.ms);
}

if (process.env["KILN_NATIVE_PROFILE"] === "1") {
  process.on("exit", () => {
    const rows = nativeProfile();
    if (rows.length === 0) return;
    const total = rows.reduce((t, r) => t + r.ms, 0);
    const lines = rows.slice(0, 40).map(
      (r) =>
        `${r.ms.toFixed(2).padStart(10)} ms ${((100 * r.ms) / total).toFixed(1).padStart(5)}% ` +
        `${String(r.calls).padStart(6)}x  ${r.program}: ${r.step}`,
    );
    process.stderr.write(`[kiln:native profile] ${total.toFixed(1)} ms in all\n${lines.join("\n")}\n`);
  });
}

/** Threads the native runtime uses (the calling thread included); 0 restores the default. */
export function setNativeThreads(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new Error(`native threads must be >= 0, got ${n}`);
  addon().setThreads(n);
}

export function nativeThreads(): number {
  return addon().getThreads();
}

/**
 * Runs `fn` with the native pool at `n` threads, then restores the previous count (a compiled
 * function's `threads` option). Where native cannot run, just runs `fn`.
 */
export function withNativeThreads<T>(n: number, fn: () => T): T {
  if (!nativeAvailable()) return fn();
  const a = addon();
  const before = a.getThreads();
  if (before === n) return fn();
  a.setThreads(n);
  try {
    return fn();
  } finally {
    a.setThreads(before);
  }
}

let availableMemo: boolean | undefined;

/** "disabled by KILN_NATIVE=0" where the environment turns native off (0, off, false). */
export function nativeDisabledByEnv(): string | undefined {
  const v = process.env["KILN_NATIVE"];
  const flag = (v ?? "").toLowerCase();
  return flag === "0" || flag === "off" || flag === "false" ? `disabled by KILN_NATIVE=${v}` : undefined;
}

/** Why `native` cannot run here, or undefined when it can (KILN_NATIVE=0 turns it off). */
export function nativeUnavailableReason(): string | undefined {
  const off = nativeDisabledByEnv();
  if (off !== undefined) return off;
  const st = nativeStatus();
  return st.ok ? undefined : st.reason;
}

/** Whether `native` can run here; logs why not, once. */
function nativeAvailable(): boolean {
  if (availableMemo === undefined) {
    const why = nativeUnavailableReason();
    availableMemo = why === undefined;
    if (why !== undefined) {
      log("backend", `native: not available (${why}); the default is wasm ` +
        `(js where WebAssembly is off)`);
    }
  }
  return availableMemo;
}

export const nativeBackend: Backend = {
  name: "native",
  priority: 20,
  tier: "tolerance",
  available: nativeAvailable,
  compile: compileNative,
  cacheKeyParts: () => {
    const tc = toolchain();
    return tc.ok ? `native/${NATIVE_CODEGEN_VERSION} ${tc.value.key}` : "native/unavailable";
  },
  serialize: serializeNative,
  deserialize: deserializeNative,
  deserializeDeferred: loadNative,
};

registerBackend(nativeBackend);

