// The runtime addon: csrc/addon.c and the runtime library (every csrc/*.c) compiled into one
// Node-API shared object, once per toolchain and runtime source, stored in the native library
// cache (libcache.ts) and loaded from its verified bytes: written to a fresh file in a private
// 0700 directory, loaded with process.dlopen (RTLD_NOW, so a missing symbol is a load error,
// not a crash on first call), then unlinked. `loadNativeAddon()` is memoized and never throws:
// it returns the addon or the reason, in words. Kernel libraries are loaded through the
// addon's loadLibrary from bytes (memfd on Linux), once per distinct content.

import { createHash } from "node:crypto";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { constants as osConstants, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "../../util/log.ts";
import { defaultLibCache, type LibCache, nativeCacheDir } from "./libcache.ts";
import {
  firstErrorLine,
  privateTempDir,
  runCompilerCommands,
  type Toolchain,
  toolchain,
} from "./toolchain.ts";

// toolchain.ts imports this file for nativeStatus(), so nothing evaluated at load time here may
// read toolchain.ts's bindings (they are not initialized yet when toolchain.ts loads first).
const CSRC_DIR = fileURLToPath(new URL("./csrc/", import.meta.url));

/** Bumped when the way the addon is built or loaded changes (a cache key part). */
export const ADDON_FORMAT_VERSION = 1;

/** KILN_ABI_VERSION of csrc/kiln_rt.h: the addon and every kernel library must match it. */
export const KILN_ABI_VERSION = readAbiVersion();

function readAbiVersion(): number {
  const text = readFileSync(join(CSRC_DIR, "kiln_rt.h"), "utf8");
  const m = /#define\s+KILN_ABI_VERSION\s+(\d+)/.exec(text);
  if (!m) throw new Error("runtime/native/csrc/kiln_rt.h defines no KILN_ABI_VERSION");
  return Number(m[1]);
}

declare const libraryHandleBrand: unique symbol;
/** A loaded kernel library (a Node-API External); valid for the life of the process. */
export type LibraryHandle = { readonly [libraryHandleBrand]: true };

/** A buffer a kernel reads or writes: its data pointer is taken with byteOffset applied. */
export type KernelBuffer = ArrayBufferView | ArrayBuffer;

export interface AddonInfo {
  /** The runtime ABI the addon was built for (KILN_ABI_VERSION). */
  readonly abi: number;
  /** The runtime's micro-kernel ISA: "avx512", "avx2" or "portable". */
  readonly isa: string;
  readonly threads: number;
}

export interface NativeLibrary {
  readonly handle: LibraryHandle;
  /** The kernels' names, by index. */
  readonly names: readonly string[];
  /** SHA-256 (hex) of the library's bytes. */
  readonly hash: string;
}

/** What csrc/addon.c exports. */
interface RawAddon {
  info(): AddonInfo;
  setThreads(n: number): void;
  getThreads(): number;
  adviseHugePages(buffer: ArrayBuffer): number;
  loadLibrary(bytes: Uint8Array): LibraryHandle;
  libraryNames(handle: LibraryHandle): string[];
  callKernel(
    handle: LibraryHandle,
    index: number,
    buffers: readonly KernelBuffer[],
    sizes: BigInt64Array,
    lo: number,
    hi: number,
    threaded: boolean,
    grain?: number,
  ): void;
  createProgram(
    code: BigInt64Array,
    libs: readonly LibraryHandle[],
    indices: Int32Array,
    consts: readonly ArrayBufferView[],
  ): ProgramHandle;
  runProgram(
    program: ProgramHandle,
    params: readonly ArrayBufferView[],
    results: readonly ArrayBufferView[],
  ): void;
  programProfile(program: ProgramHandle): [Float64Array, BigInt64Array] | undefined;
}

declare const programHandleBrand: unique symbol;
/** A step-list program (csrc/program.c), freed when it is garbage collected. */
export type ProgramHandle = { readonly [programHandleBrand]: true };

export interface NativeAddon {
  info(): AddonInfo;
  /** Threads the runtime's pool runs (the calling thread included). */
  setThreads(n: number): void;
  getThreads(): number;
  /**
   * Asks for transparent huge pages behind a buffer that has not been written yet (csrc
   * runtime.c `kiln_advise_huge`: 4 MiB and up, Linux); the bytes advised, 0 where none.
   */
  adviseHugePages(buffer: ArrayBuffer): number;
  /**
   * Loads a kernel library from bytes the caller has verified (libcache's get/getOrBuild), and
   * runs its init with the runtime's API; the same bytes load once per process. Throws an Error
   * with the reason (dlopen's message, a missing kiln_library_v1, an ABI mismatch).
   */
  loadLibrary(bytes: Uint8Array): NativeLibrary;
  /**
   * Runs range kernel `index` of a library over [lo, hi): directly on this thread, or when
   * `threaded` through the runtime's parallel_for (ranges of at least `grain`, default 1).
   * The raw binding: no allocation for up to 16 buffers, nothing checked twice.
   */
  callKernel(
    handle: LibraryHandle,
    index: number,
    buffers: readonly KernelBuffer[],
    sizes: BigInt64Array,
    lo: number,
    hi: number,
    threaded: boolean,
    grain?: number,
  ): void;
  /** The addon's cache key (for `kiln cache info` and tests). */
  readonly key: string;
  /**
   * A program over an encoded step list (runtime/native/encode.ts): kernel i is kernel
   * `indices[i]` of library `libs[i]`; the constants are copied. Throws on a malformed header.
   */
  createProgram(
    code: BigInt64Array,
    libs: readonly LibraryHandle[],
    indices: Int32Array,
    consts: readonly ArrayBufferView[],
  ): ProgramHandle;
  /** Runs a program's ENTRY on the parameters' leaf buffers, writing the result buffers. */
  runProgram(
    program: ProgramHandle,
    params: readonly ArrayBufferView[],
    results: readonly ArrayBufferView[],
  ): void;
  /** Seconds and calls per step id, for a program made under KILN_NATIVE_PROFILE=1. */
  programProfile(program: ProgramHandle): [Float64Array, BigInt64Array] | undefined;
}

// ---- Building ----------------------------------------------------------------------------------

export interface AddonBuildOptions {
  /**
   * The runtime library's C files (default every csrc/*.c but addon.c). Tests pass a stand-in
   * here while the real runtime is being written; the real build never uses one.
   */
  readonly runtimeSources?: readonly string[];
  readonly cache?: LibCache;
}

interface AddonSources {
  /** Every csrc file (headers included), by name: the bytes the key is computed over. */
  readonly csrc: ReadonlyMap<string, Buffer>;
  /** The C files compiled in, by name: addon.c first, then the runtime's. */
  readonly compiled: readonly { readonly name: string; readonly bytes: Buffer }[];
  /** SHA-256 over all of the above. */
  readonly hash: string;
}

// The sources are read once and compiled from a private copy, so the key always describes the
// bytes that were built, even while someone edits csrc/ during a build.
function addonSources(
  runtimeSources: readonly string[] | undefined,
): AddonSources | { error: string } {
  const names = readdirSync(CSRC_DIR)
    .filter((n) => statSync(join(CSRC_DIR, n)).isFile())
    .sort();
  const csrc = new Map(names.map((n) => [n, readFileSync(join(CSRC_DIR, n))] as const));
  if (!csrc.has("addon.c")) return { error: "runtime/native/csrc/addon.c is missing" };
  // The addon proper: its Node-API face and the step-list interpreter (program.c).
  const own = ["addon.c", "program.c"].filter((n) => csrc.has(n));
  const compiled = own.map((n) => ({ name: n, bytes: csrc.get(n)! }));
  if (runtimeSources !== undefined) {
    for (const p of runtimeSources) {
      compiled.push({ name: `standin-${basename(p)}`, bytes: readFileSync(p) });
    }
  } else {
    if (!csrc.has("runtime.c")) {
      return {
        error: "the runtime library is incomplete (runtime/native/csrc/runtime.c is missing)",
      };
    }
    for (const [n, bytes] of csrc) {
      if (n.endsWith(".c") && !own.includes(n)) compiled.push({ name: n, bytes });
    }
  }
  const h = createHash("sha256");
  const add = (label: string, bytes: Buffer): void => {
    h.update(`${label}\0${bytes.length}\0`).update(bytes);
  };
  for (const [n, bytes] of csrc) add(`csrc/${n}`, bytes);
  for (const c of compiled) add(`compiled/${c.name}`, c.bytes);
  return { csrc, compiled, hash: h.digest("hex") };
}

/**
 * SHA-256 (hex) of the runtime's headers (csrc/*.h: kiln_rt.h, kiln_math.h, ...), by name: a
 * kernel library that includes them has this in its cache key, next to toolchainKey().
 */
export function runtimeHeadersHash(): string {
  const h = createHash("sha256");
  for (const n of readdirSync(CSRC_DIR).filter((x) => x.endsWith(".h")).sort()) {
    const bytes = readFileSync(join(CSRC_DIR, n));
    h.update(`${n}\0${bytes.length}\0`).update(bytes);
  }
  return h.digest("hex");
}

/** The addon's cache key: toolchain, every source byte, the addon format. */
export function addonKey(tc: Toolchain, sourceHash: string): string {
  return `kiln-native-addon/${ADDON_FORMAT_VERSION} abi=${KILN_ABI_VERSION} ` +
    `toolchain=${tc.key} sources=${sourceHash}`;
}

class BuildError extends Error {}

// Each C file to an object in parallel, then one link; the bytes of the linked addon.
function buildAddonBytes(tc: Toolchain, sources: AddonSources): Uint8Array {
  const dir = privateTempDir("addon");
  try {
    const src = join(dir, "src");
    mkdirSync(src);
    for (const [n, bytes] of sources.csrc) writeFileSync(join(src, n), bytes);
    for (const c of sources.compiled) writeFileSync(join(src, c.name), c.bytes);
    const includes = [`-I${src}`, `-I${tc.nodeInclude}`];
    const objects = sources.compiled.map((_, i) => join(dir, `o${i}.o`));
    const compiled = runCompilerCommands(
      sources.compiled.map((c, i) => ({
        args: ["-c", ...tc.cflags, ...includes, join(src, c.name)],
        out: objects[i]!,
      })),
    );
    compiled.forEach((r, i) => {
      if (!r.ok) {
        const name = sources.compiled[i]!.name;
        throw new BuildError(
          `the runtime addon failed to build: ${name}: ${firstErrorLine(r.stderr)}`,
        );
      }
    });
    const out = join(dir, "kiln_addon.node");
    const link = { args: [...tc.cflags, ...objects, ...tc.ldflags], out };
    const [linked] = runCompilerCommands([link]);
    if (!linked!.ok) {
      throw new BuildError(`the runtime addon failed to link: ${firstErrorLine(linked!.stderr)}`);
    }
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// process.dlopen needs a path: a fresh file in a private directory, unlinked once loaded (the
// mapping stays). Where the temp directory is mounted noexec, the cache directory is tried.
function dlopenBytes(bytes: Uint8Array, name: string): RawAddon {
  const module = { exports: {} as Record<string, unknown> };
  const parents = [tmpdir(), nativeCacheDir()];
  let firstError: unknown;
  for (const parent of parents) {
    let dir: string;
    try {
      dir = mkdtempSync(join(parent, `kiln-${process.getuid?.() ?? "user"}-load-`));
    } catch (e) {
      firstError ??= e;
      continue;
    }
    try {
      const file = join(dir, name);
      writeFileSync(file, bytes, { mode: 0o700, flag: "wx" });
      process.dlopen(module, file, osConstants.dlopen.RTLD_NOW);
      return checkExports(module.exports);
    } catch (e) {
      firstError ??= e;
      const msg = e instanceof Error ? e.message : String(e);
      if (!/failed to map segment|operation not permitted/i.test(msg)) break;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  throw firstError;
}

const EXPORTS = [
  "info",
  "setThreads",
  "getThreads",
  "adviseHugePages",
  "loadLibrary",
  "libraryNames",
  "callKernel",
];

function checkExports(exports: Record<string, unknown>): RawAddon {
  for (const name of EXPORTS) {
    if (typeof exports[name] !== "function") throw new Error(`the addon does not export ${name}()`);
  }
  return exports as unknown as RawAddon;
}

function wrap(raw: RawAddon, key: string): NativeAddon {
  const libraries = new Map<string, NativeLibrary>();
  return {
    key,
    info: () => raw.info(),
    setThreads: (n) => raw.setThreads(n),
    getThreads: () => raw.getThreads(),
    adviseHugePages: (b) => raw.adviseHugePages(b),
    loadLibrary(bytes: Uint8Array): NativeLibrary {
      const hash = createHash("sha256").update(bytes).digest("hex");
      const known = libraries.get(hash);
      if (known !== undefined) return known;
      const handle = raw.loadLibrary(bytes);
      const lib: NativeLibrary = { handle, names: raw.libraryNames(handle), hash };
      libraries.set(hash, lib);
      return lib;
    },
    callKernel: raw.callKernel,
    createProgram: (code, libs, indices, consts) => raw.createProgram(code, libs, indices, consts),
    runProgram: raw.runProgram,
    programProfile: (p) => raw.programProfile(p),
  };
}

const built = new Map<string, NativeAddon | { error: string }>();

/**
 * Builds (or finds in the cache) and loads an addon; the real one is `loadNativeAddon()`.
 * Memoized by key; never throws.
 */
export function buildNativeAddon(opts: AddonBuildOptions = {}): NativeAddon | { error: string } {
  const tc = toolchain();
  if (!tc.ok) return { error: tc.reason };
  let sources: AddonSources | { error: string };
  try {
    sources = addonSources(opts.runtimeSources);
  } catch (e) {
    return { error: `the runtime sources cannot be read: ${e instanceof Error ? e.message : e}` };
  }
  if ("error" in sources) return sources;
  const key = addonKey(tc.value, sources.hash);
  const known = built.get(key);
  if (known !== undefined) return known;
  const cache = opts.cache ?? defaultLibCache();
  let result: NativeAddon | { error: string };
  const t0 = performance.now();
  let bytes: Uint8Array;
  let fresh = false;
  const build = (): Uint8Array => {
    fresh = true;
    return buildAddonBytes(tc.value, sources);
  };
  try {
    bytes = cache.getOrBuild(key, build);
  } catch (e) {
    result = {
      error: e instanceof BuildError ? e.message : `the runtime addon failed to build: ${e}`,
    };
    built.set(key, result);
    log("backend", `native: ${result.error}`);
    return result;
  }
  const t1 = performance.now();
  const name = `kiln-addon-${sources.hash.slice(0, 12)}.node`;
  try {
    let raw: RawAddon;
    try {
      raw = dlopenBytes(bytes, name);
    } catch (e) {
      // A verified entry that no longer loads (the system's libraries changed under it) is
      // rebuilt once; a fresh build that does not load is the answer.
      if (fresh) throw e;
      log("backend", `native: the cached runtime addon does not load (${e}); rebuilding`);
      bytes = build();
      cache.put(key, bytes);
      raw = dlopenBytes(bytes, name);
    }
    const info = raw.info();
    if (info.abi !== KILN_ABI_VERSION) {
      throw new Error(
        `it was built for runtime ABI ${info.abi}, kiln_rt.h says ${KILN_ABI_VERSION}`,
      );
    }
    result = wrap(raw, key);
    log("backend", () => {
      const t2 = performance.now();
      const how = fresh ? "built" : "found";
      return `native: runtime addon ready (${bytes.length} bytes; ${how} in ` +
        `${(t1 - t0).toFixed(0)} ms, loaded in ${(t2 - t1).toFixed(1)} ms; isa ${info.isa}, ` +
        `${info.threads} threads)`;
    });
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    result = { error: `the runtime addon failed to load: ${msg}` };
    log("backend", `native: ${result.error}`);
  }
  built.set(key, result);
  return result;
}

let memo: NativeAddon | { error: string } | undefined;

/** The runtime addon of this process (the real csrc/ runtime), or why there is none. */
export function loadNativeAddon(): NativeAddon | { error: string } {
  return (memo ??= buildNativeAddon());
}
