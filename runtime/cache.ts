// The program cache: compiled executables keyed by the module's fingerprint, the backend, the
// Kiln version and a hash of every option that changes generated code; kept in memory (LRU by
// entry count) and on disk (runtime/cache_disk.ts: a directory only the user can write, entries
// MAC'd under a per-user secret, atomic writes, LRU by mtime within a byte budget). An entry
// stores the compiled module's proto next to the backend's payload (unless it is the key's
// module itself), so a caller can key on the module before its passes and hand them over as
// `prepare`: a hit, in memory or on disk, runs neither the passes nor codegen. Disk failures
// never fail a compile: an untrusted directory is not used (a warning says why), a directory
// that refuses writes or mtime updates still serves reads, and the cache carries on in memory.
// KILN_LOGS=cache narrates hits, misses, writes, evictions and discards with reasons.

import type { Stats } from "node:fs";
import { fingerprint } from "../ir/fingerprint.ts";
import type { Module } from "../ir/module.ts";
import { moduleFromProto, moduleToProto } from "../ir/proto.ts";
import { sha256Hex } from "../util/hash.ts";
import { log } from "../util/log.ts";
import { type Backend, type CompileHints, type Executable, getBackend } from "./backend.ts";
import {
  DISCARD_REASONS,
  type DiscardReason,
  type DiskEntry,
  DiskStore,
  defaultProgramDir,
  diskCacheUnavailable,
  entryFileName,
  errorCode,
  FORMAT_VERSION,
  isReadOnlyError,
  keyText,
  kilnCacheRoot,
  type ProgramKey,
  type ReadResult,
  readKilnVersion,
} from "./cache_disk.ts";
import {
  CompileNeverError,
  compileMode,
  nearestCached,
  noteProgramRequest,
  type ProgramOrigin,
} from "./cache_stats.ts";

export { DISCARD_REASONS, FORMAT_VERSION, defaultProgramDir, kilnCacheRoot };
export type { DiscardReason, DiskEntry, ProgramKey };

/**
 * The running Kiln: its version and build id (runtime/build_id.ts), as `0.1.0+<16 hex>`. Part of
 * every cache key, so neither an upgrade nor a changed pass or code generator between releases
 * ever runs another build's programs: their entries are stale.
 */
export const KILN_VERSION = readKilnVersion();

/** The default disk budget. */
export const DEFAULT_MAX_BYTES = 512 * 1024 * 1024;
/** The default number of executables kept in memory. */
export const DEFAULT_MAX_MEMORY_ENTRIES = 1024;


// ---- Options hashing -------------------------------------------------------------------------

/** The compile options that go into the key: plain data only (it is hashed, not interpreted). */
export type CacheKeyOptions = Readonly<Record<string, unknown>>;

// A canonical text for plain data: object keys sorted, undefined members dropped (an option
// left out and an option set to undefined mean the same), -0, NaN and bigints kept distinct.
function canonical(v: unknown, path: string, seen: Set<object>): string {
  switch (typeof v) {
    case "undefined":
      return "undefined";
    case "boolean":
      return v ? "true" : "false";
    case "number":
      return Object.is(v, -0) ? "-0" : String(v);
    case "bigint":
      return `${v}n`;
    case "string":
      return JSON.stringify(v);
    case "object": {
      if (v === null) return "null";
      if (seen.has(v)) throw new Error(`program cache: option '${path}' is cyclic`);
      seen.add(v);
      let out: string;
      if (Array.isArray(v)) {
        out = `[${v.map((x, i) => canonical(x, `${path}[${i}]`, seen)).join(",")}]`;
      } else {
        const proto: unknown = Object.getPrototypeOf(v);
        if (proto !== Object.prototype && proto !== null) {
          const what = (v as { constructor?: { name?: unknown } }).constructor?.name;
          throw new Error(
            `program cache: option '${path}' is a ${typeof what === "string" ? what : "class"} ` +
              `instance; cache options must be plain data (objects, arrays, primitives)`,
          );
        }
        const rec = v as Record<string, unknown>;
        const parts = Object.keys(rec)
          .filter((k) => rec[k] !== undefined)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canonical(rec[k], path ? `${path}.${k}` : k, seen)}`);
        out = `{${parts.join(",")}}`;
      }
      seen.delete(v);
      return out;
    }
    case "function":
    case "symbol":
      throw new Error(
        `program cache: option '${path}' is a ${typeof v}; cache options must be plain data ` +
          `(objects, arrays, primitives)`,
      );
    default:
      // typeof has no other results today; unknown does not narrow to never, so say so plainly
      throw new Error(`program cache: option '${path}' has an unsupported type ${typeof v}`);
  }
}

/** A stable SHA-256 of an options record: equal for equal data, whatever the key order. */
export function optionsHash(options: CacheKeyOptions): string {
  return sha256Hex(canonical(options, "", new Set()));
}

// ---- The cache -------------------------------------------------------------------------------

export interface ProgramCacheOptions {
  /** Keep executables in memory (default true). */
  memory?: boolean;
  /** Keep entries on disk: true for defaultProgramDir(), a directory, or false (default true). */
  disk?: boolean | string;
  /** The disk budget in bytes; least recently used entries go first (default 512 MiB). */
  maxBytes?: number;
  /** How many executables memory keeps, least recently used dropped first (default 1024). */
  maxMemoryEntries?: number;
  /** The version written into keys (default KILN_VERSION); tests use it to simulate upgrades. */
  kilnVersion?: string;
  /** Where disk problems are reported (default: process.emitWarning, code KILN_CACHE). */
  onWarning?: (message: string) => void;
  /** How a disk hit's mtime is refreshed (default utimesSync); tests simulate EROFS with it. */
  touch?: (path: string, seconds: number) => void;
}

export type CacheHit = "memory" | "disk" | "miss";

/** How one getOrCompile request is served and reported. */
export interface RequestOptions {
  /** Passed to the backend's compile (eager one-op programs say so). */
  readonly hints?: CompileHints;
  /** Keep the executable in this cache's memory (default true; eager ops keep their own). */
  readonly memory?: boolean;
  /** Who asks, for cacheStats() and the cache-only mode's error (default: a plain program). */
  readonly origin?: ProgramOrigin;
  /**
   * Write a compiled program to disk later (once the current JS task ends, or at exit) rather
   * than now: eager ops compile many small programs, each cheaper than a durable write.
   */
  readonly deferWrite?: boolean;
}

export interface CacheResult {
  readonly executable: Executable;
  readonly hit: CacheHit;
  /** The full key (JSON text): Kiln version, backend, module fingerprint, options hash. */
  readonly key: string;
}

export interface CacheStats {
  memoryHits: number;
  diskHits: number;
  misses: number;
  /** Entries written to disk. */
  writes: number;
  /** Disk entries deleted to stay within maxBytes. */
  evictions: number;
  /** Executables dropped from memory to stay within maxMemoryEntries. */
  memoryEvictions: number;
  /** Disk entries found bad and deleted, in all and by reason. */
  discarded: number;
  discardReasons: Record<DiscardReason, number>;
}

export interface CacheInfo {
  readonly kilnVersion: string;
  readonly formatVersion: number;
  readonly memory: boolean;
  readonly memoryEntries: number;
  readonly maxMemoryEntries: number;
  /** The entry directory, when disk caching was asked for (even if since turned off). */
  readonly dir: string | undefined;
  /** Whether the disk is in use now. */
  readonly disk: boolean;
  /** Why the disk is not in use, when it was asked for and failed (or is not trusted). */
  readonly diskDisabled: string | undefined;
  /** Why new entries are not written, when the disk serves reads only. */
  readonly diskWritesDisabled: string | undefined;
  readonly maxBytes: number;
  readonly diskEntries: number;
  readonly diskBytes: number;
}

function zeroReasons(): Record<DiscardReason, number> {
  const r = {} as Record<DiscardReason, number>;
  for (const reason of DISCARD_REASONS) r[reason] = 0;
  return r;
}

function describeKey(key: ProgramKey): string {
  return `${key.backend} ${key.fingerprint.slice(0, 12)} (options ${key.options.slice(0, 8)})`;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class ProgramCache {
  readonly kilnVersion: string;
  private readonly useMemory: boolean;
  private readonly maxMemoryEntries: number;
  private readonly maxBytes: number;
  private readonly store: DiskStore | undefined;
  private diskDisabled: string | undefined;
  private writesDisabled: string | undefined;
  private readonly memoryMap = new Map<string, Executable>();
  private pendingWrites: { key: ProgramKey; backend: Backend; exe: Executable; module: Module }[] =
    [];
  private flushScheduled = false;
  private exitHook = false;
  private readonly warned = new Set<string>();
  private readonly warn: (message: string) => void;
  private readonly counters: CacheStats = {
    memoryHits: 0,
    diskHits: 0,
    misses: 0,
    writes: 0,
    evictions: 0,
    memoryEvictions: 0,
    discarded: 0,
    discardReasons: zeroReasons(),
  };

  constructor(opts: ProgramCacheOptions = {}) {
    this.kilnVersion = opts.kilnVersion ?? KILN_VERSION;
    this.useMemory = opts.memory ?? true;
    this.maxMemoryEntries = opts.maxMemoryEntries ?? DEFAULT_MAX_MEMORY_ENTRIES;
    this.maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
    if (!(this.maxBytes >= 0) || !(this.maxMemoryEntries >= 1)) {
      throw new Error(
        `ProgramCache: maxBytes must be >= 0 and maxMemoryEntries >= 1, got ` +
          `${this.maxBytes} and ${this.maxMemoryEntries}`,
      );
    }
    const disk = opts.disk ?? true;
    // Where there is no file system (the browser build) the default is memory only; a directory
    // asked for by name is refused there with DiskStore's error.
    const dir =
      disk === true
        ? diskCacheUnavailable === undefined ? defaultProgramDir() : undefined
        : disk === false ? undefined : disk;
    this.store = dir !== undefined ? new DiskStore(dir, this.maxBytes, opts.touch) : undefined;
    this.warn =
      opts.onWarning ?? ((m: string) => process.emitWarning(m, { code: "KILN_CACHE" }));
  }

  /** Counters since construction (a copy). */
  get stats(): CacheStats {
    return { ...this.counters, discardReasons: { ...this.counters.discardReasons } };
  }

  /** The key `getOrCompile` would use, without compiling or touching the disk. */
  keyFor(module: Module, backend: Backend | string, options: CacheKeyOptions = {}): ProgramKey {
    const b = typeof backend === "string" ? getBackend(backend) : backend;
    const target = b.cacheKeyParts?.();
    return {
      kiln: this.kilnVersion,
      backend: b.name,
      fingerprint: fingerprint(module),
      options: optionsHash(target === undefined ? options : { ...options, target }),
    };
  }

  /**
   * The executable for `module` on `backend`: from memory, from disk, or compiled (then stored).
   * `options` are every setting that changes the generated code (the pass pipeline's options,
   * backend flags); they are hashed into the key. `prepare`, run on a miss only, turns the
   * module into the one the backend compiles (the pass pipeline); the key is the module before
   * it, so a hit skips the passes too.
   */
  getOrCompile(
    module: Module,
    backend: Backend | string,
    options: CacheKeyOptions = {},
    prepare?: (module: Module) => Module,
    request: RequestOptions = {},
  ): CacheResult {
    const b = typeof backend === "string" ? getBackend(backend) : backend;
    const key = this.keyFor(module, b, options);
    const text = keyText(key);
    const origin = request.origin ?? { kind: "program", source: module.name };
    // Read on every request, so a bad KILN_COMPILE fails at once, not at the first miss.
    const mode = compileMode();
    const memory = this.useMemory && request.memory !== false;

    const inMemory = memory ? this.memoryMap.get(text) : undefined;
    if (inMemory) {
      this.memoryMap.delete(text);
      this.memoryMap.set(text, inMemory);
      this.counters.memoryHits++;
      log("cache", () => `hit memory ${describeKey(key)}`);
      noteProgramRequest(text, inMemory, origin, "memory");
      return { executable: inMemory, hit: "memory", key: text };
    }

    let fromDisk: Executable | undefined;
    try {
      fromDisk = this.loadFromDisk(key, b, module);
    } catch (e) {
      // Cache-only mode: the entry is good but loading it would build (native kernels).
      if (!(e instanceof CompileNeverError)) throw e;
      throw new CompileNeverError(text, origin, `its disk entry needs ${e.source}: ${e.nearest}`);
    }
    if (fromDisk) {
      if (memory) this.remember(text, fromDisk);
      this.counters.diskHits++;
      noteProgramRequest(text, fromDisk, origin, "disk");
      return { executable: fromDisk, hit: "disk", key: text };
    }

    if (mode === "never") throw new CompileNeverError(text, origin, nearestCached(origin));
    this.counters.misses++;
    const t0 = performance.now();
    const exe = b.compile(prepare ? prepare(module) : module, request.hints);
    const ms = performance.now() - t0;
    log("cache", () => `miss ${describeKey(key)}: compiled in ${ms.toFixed(1)} ms`);
    if (memory) this.remember(text, exe);
    if (request.deferWrite === true) this.deferSave(key, b, exe, module);
    else this.saveToDisk(key, b, exe, module);
    noteProgramRequest(text, exe, origin, "compile", ms);
    return { executable: exe, hit: "miss", key: text };
  }

  /**
   * Stores an executable compiled elsewhere (an ahead-of-time build, a warm-up script) under
   * the key of `module` and `options`, in memory and on disk, replacing what was there.
   */
  put(
    module: Module,
    backend: Backend | string,
    executable: Executable,
    options: CacheKeyOptions = {},
  ): string {
    const b = typeof backend === "string" ? getBackend(backend) : backend;
    if (executable.backend !== b.name) {
      throw new Error(
        `ProgramCache.put: the executable is from backend '${executable.backend}', ` +
          `not '${b.name}'`,
      );
    }
    const key = this.keyFor(module, b, options);
    const text = keyText(key);
    this.remember(text, executable);
    this.saveToDisk(key, b, executable, module);
    return text;
  }

  /** Writes the programs whose disk writes were deferred (`deferWrite`); returns how many. */
  flushWrites(): number {
    const batch = this.pendingWrites;
    this.pendingWrites = [];
    this.flushScheduled = false;
    for (const w of batch) this.saveToDisk(w.key, w.backend, w.exe, w.module);
    return batch.length;
  }

  private deferSave(key: ProgramKey, b: Backend, exe: Executable, module: Module): void {
    if (!this.diskFor(b)) return;
    this.pendingWrites.push({ key, backend: b, exe, module });
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // After the current task (a synchronous loop of eager ops pays for its writes once it
    // yields), and at exit for a process that never yields.
    setImmediate(() => this.flushWrites()).unref();
    if (!this.exitHook) {
      this.exitHook = true;
      process.once("exit", () => this.flushWrites());
    }
  }

  /** The disk entries, most recently used first, with any problem their header shows. */
  entries(): DiskEntry[] {
    this.flushWrites();
    const store = this.usableStore();
    if (!store) return [];
    try {
      return store.list(this.kilnVersion);
    } catch (e) {
      this.disableDisk("cannot list", e);
      return [];
    }
  }

  /** Empties memory and deletes this cache's entry files; returns how many of each went. */
  clear(): { memory: number; disk: number } {
    this.pendingWrites = [];
    const memory = this.memoryMap.size;
    this.memoryMap.clear();
    let disk = 0;
    const store = this.usableStore();
    if (store) {
      try {
        disk = store.clear();
      } catch (e) {
        this.disableDisk("cannot clear", e);
      }
    }
    log("cache", `clear: ${memory} in memory, ${disk} on disk`);
    return { memory, disk };
  }

  info(): CacheInfo {
    this.flushWrites();
    let usage = { entries: 0, bytes: 0 };
    const store = this.usableStore();
    if (store) {
      try {
        usage = store.usage();
      } catch (e) {
        this.disableDisk("cannot read", e);
      }
    }
    return {
      kilnVersion: this.kilnVersion,
      formatVersion: FORMAT_VERSION,
      memory: this.useMemory,
      memoryEntries: this.memoryMap.size,
      maxMemoryEntries: this.maxMemoryEntries,
      dir: this.store?.dir,
      disk: this.store !== undefined && this.diskDisabled === undefined,
      diskDisabled: this.diskDisabled,
      diskWritesDisabled: this.writesDisabled,
      maxBytes: this.maxBytes,
      diskEntries: usage.entries,
      diskBytes: usage.bytes,
    };
  }

  private remember(text: string, exe: Executable): void {
    if (!this.useMemory) return;
    this.memoryMap.delete(text);
    this.memoryMap.set(text, exe);
    while (this.memoryMap.size > this.maxMemoryEntries) {
      const oldest = this.memoryMap.keys().next().value;
      if (oldest === undefined) break;
      this.memoryMap.delete(oldest);
      this.counters.memoryEvictions++;
    }
  }

  // The store, once its directory is trusted (checked, and its secret read, on first use);
  // an untrusted directory turns the disk off for this cache with a warning saying why.
  private usableStore(): DiskStore | undefined {
    if (!this.store || this.diskDisabled !== undefined) return undefined;
    const t = this.store.trust();
    if (!t.ok) {
      this.diskDisabled = `not trusted: ${t.why}`;
      log("cache", `disk off: ${this.store.dir}: ${t.why}`);
      this.warnOnce(
        "disk",
        `Kiln program cache: the directory ${this.store.dir} is not used: ${t.why}; caching ` +
          `in memory only for this process (the directory must be the user's own and not ` +
          `writable by group or others)`,
      );
      return undefined;
    }
    return this.store;
  }

  private warnOnce(id: string, message: string): void {
    if (this.warned.has(id)) return;
    this.warned.add(id);
    this.warn(message);
  }

  private diskFor(b: Backend): DiskStore | undefined {
    if (!b.serialize || !b.deserialize) {
      if (this.store && !this.warned.has(`noserialize:${b.name}`)) {
        this.warned.add(`noserialize:${b.name}`);
        log("cache", `backend '${b.name}' has no serialize/deserialize: memory only`);
      }
      return undefined;
    }
    return this.usableStore();
  }

  private loadFromDisk(key: ProgramKey, b: Backend, keyModule: Module): Executable | undefined {
    const store = this.diskFor(b);
    if (!store || !b.deserialize) return undefined;
    const name = entryFileName(key);
    let r: ReadResult;
    try {
      r = store.read(name, key);
    } catch (e) {
      this.disableDisk("cannot read", e);
      return undefined;
    }
    if (r.kind === "missing") return undefined;
    if (r.kind === "bad") {
      if (r.reason === "untrusted") {
        this.warnOnce(
          `entry:${store.path(name)}`,
          `Kiln program cache: the entry ${store.path(name)} is not used: ${r.detail}; it is ` +
            `deleted and the program compiled again`,
        );
      }
      this.discard(store, name, r.stat, r.reason, r.detail);
      return undefined;
    }
    let exe: Executable;
    try {
      // No module stored: the program was compiled from the key's module itself, which the
      // caller holds (equal up to names, as the fingerprint matched), so skip decoding one.
      if (r.moduleProto.length === 0) {
        exe = b.deserialize(keyModule, r.payload);
      } else if (b.deserializeDeferred) {
        // A copy, so the executable does not keep the whole entry file alive.
        const proto = new Uint8Array(r.moduleProto);
        let compiled: Module | undefined;
        exe = b.deserializeDeferred(() => (compiled ??= moduleFromProto(proto)), r.payload);
      } else {
        exe = b.deserialize(moduleFromProto(r.moduleProto), r.payload);
      }
    } catch (e) {
      // Not the entry's fault: it stays for a process that may build.
      if (e instanceof CompileNeverError) throw e;
      // The bytes are what was written (the MAC matched), but this build cannot load them.
      this.discard(store, name, r.stat, "undecodable", errText(e));
      return undefined;
    }
    try {
      store.touch(name);
    } catch (e) {
      // A read-only filesystem (EROFS) or a file the user may not stamp costs LRU accuracy
      // only: the entry was read and verified, and later reads work the same.
      const why = errorCode(e) ?? errText(e);
      log("cache", `cannot refresh the mtime of ${store.path(name)}: ${why}`);
    }
    log("cache", () => `hit disk ${describeKey(key)} ${store.path(name)}`);
    return exe;
  }

  private discard(
    store: DiskStore,
    name: string,
    stat: Stats,
    reason: DiscardReason,
    detail: string,
  ): void {
    this.counters.discarded++;
    this.counters.discardReasons[reason]++;
    log("cache", `discard ${store.path(name)}: ${reason}: ${detail}`);
    try {
      store.discard(name, stat);
    } catch (e) {
      // A read-only directory keeps the bad entry; it is discarded again on every read, never
      // used, and reads of good entries go on.
      log("cache", `cannot delete ${store.path(name)}: ${errorCode(e) ?? errText(e)}`);
    }
  }

  private saveToDisk(key: ProgramKey, b: Backend, exe: Executable, keyModule: Module): void {
    const store = this.diskFor(b);
    if (!store || !b.serialize || this.writesDisabled !== undefined) return;
    let bytes: Uint8Array;
    try {
      // An empty module proto is no valid module (it has no entry), so it can mean "the key's".
      const moduleBytes = exe.module === keyModule ? new Uint8Array(0) : moduleToProto(exe.module);
      bytes = store.encode(keyText(key), moduleBytes, b.serialize(exe));
    } catch (e) {
      // A program the backend cannot serialize still runs; it just is not kept on disk.
      this.warnOnce(
        `serialize:${b.name}`,
        `Kiln program cache: cannot serialize a '${b.name}' program for the disk ` +
          `cache (${errText(e)}); such programs are cached in memory only`,
      );
      return;
    }
    const name = entryFileName(key);
    if (bytes.length > this.maxBytes) {
      log("cache", `skip write ${describeKey(key)}: ${bytes.length} bytes > ${this.maxBytes}`);
      return;
    }
    try {
      store.write(name, bytes);
      this.counters.writes++;
      log("cache", () => `write ${store.path(name)} (${bytes.length} bytes)`);
      for (const gone of store.evict(name)) {
        this.counters.evictions++;
        log("cache", `evict ${store.path(gone)} (least recently used, over ${this.maxBytes} B)`);
      }
    } catch (e) {
      this.disableWrites(e);
    }
  }

  // A directory that refuses writes (read-only filesystem, no permission, full disk) still
  // serves the entries it has: only writing stops.
  private disableWrites(e: unknown): void {
    const dir = this.store?.dir ?? "?";
    const code = errorCode(e);
    const why = `${code !== undefined ? `${code}: ` : ""}${errText(e)}`;
    this.writesDisabled = `cannot write ${dir}: ${why}`;
    log("cache", `disk writes off: ${this.writesDisabled}`);
    this.warnOnce(
      "writes",
      `Kiln program cache: ${this.writesDisabled}; its entries are still read, new programs ` +
        `are cached in memory only for this process` +
        (isReadOnlyError(e) ? "" : " (set KILN_CACHE_DIR to a writable directory)"),
    );
  }

  private disableDisk(what: string, e: unknown): void {
    const dir = this.store?.dir ?? "?";
    const code = errorCode(e);
    this.diskDisabled = `${what} ${dir}: ${code !== undefined ? `${code}: ` : ""}${errText(e)}`;
    log("cache", `disk off: ${this.diskDisabled}`);
    this.warnOnce(
      "disk",
      `Kiln program cache: ${this.diskDisabled}; caching in memory only for this process ` +
        `(set KILN_CACHE_DIR to a writable directory, or turn the disk cache off)`,
    );
  }
}

let defaultCache: ProgramCache | undefined;

/**
 * The process-wide cache: memory plus disk at defaultProgramDir(); KILN_CACHE_DISK=0 (or off,
 * false) keeps it in memory.
 */
export function defaultProgramCache(): ProgramCache {
  if (!defaultCache) {
    const flag = (process.env["KILN_CACHE_DISK"] ?? "").toLowerCase();
    const diskOff = flag === "0" || flag === "off" || flag === "false";
    defaultCache = new ProgramCache({ disk: !diskOff });
  }
  return defaultCache;
}

/** Replaces the process-wide cache (the CLI and tests); undefined rebuilds it on next use. */
export function setDefaultProgramCache(cache: ProgramCache | undefined): void {
  defaultCache = cache;
}
