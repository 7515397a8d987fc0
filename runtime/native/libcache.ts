// The on-disk store of compiled shared objects (the runtime addon and kernel libraries), in
// `<kilnCacheRoot()>/native/`. What it hands back gets loaded as machine code, so it is built to
// be trusted the way ccache's and Python's bytecode caches are, plus a MAC: the directory is the
// user's own (0700, not writable by group or others, not a symlink), and every entry carries an
// HMAC-SHA256, keyed by a per-user secret in the directory, over the key it is read for, its
// header and its body (the directory check and the secret are runtime/cache_disk.ts's, shared
// with the program cache). Without the secret nobody can make an entry this store accepts, and an
// entry written for one key never serves another. A damaged, truncated, foreign, stale or
// forged entry is counted by reason, deleted and rebuilt, never returned. The secret is read
// once and kept in memory, so a directory swapped after the check cannot bring its own.
// Callers load the returned bytes from memory (the addon's loadLibrary), so what was verified
// is what runs: there is no path to race. Writes are atomic (temp file in the same directory,
// fsync, rename); recency is the file's mtime (refreshed on a hit: a filesystem that refuses
// that still serves), within a byte budget (KILN_NATIVE_CACHE_MAX_BYTES, default 1 GiB).
// `getOrBuild` takes a per-key lock file, so processes starting together build a library once.
// When the directory cannot be trusted the store warns once and keeps its entries in memory.

import { createHash, timingSafeEqual } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  futimesSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
  type Stats,
} from "node:fs";
import { join } from "node:path";
import { log } from "../../util/log.ts";
import { kilnCacheRoot } from "../cache.ts";
import {
  type EntryFile,
  errorCode,
  evictEntryFiles,
  keyedMac,
  nextStamp,
  scanEntryFiles,
  SECRET_TEMP_NAME,
  type Trust,
  trustDirectory,
  untrustedBecause,
  writeEntryFile,
} from "../cache_disk.ts";

/** Bumped whenever the layout of an entry changes; older entries read as stale. */
export const LIB_FORMAT_VERSION = 1;
export const DEFAULT_NATIVE_CACHE_MAX_BYTES = 1024 * 1024 * 1024;
export const LIB_SUFFIX = ".klib";

const MAGIC = Buffer.from("KILNLIB\0", "latin1");
// magic (8) + format (u32) + key length (u32)
const FIXED_HEADER = 16;
const MAC_BYTES = 32;
const MAX_KEY_BYTES = 64 * 1024;
// Beyond the budget's own limit, a file this large is not an entry anyone wrote.
const MAX_ENTRY_BYTES = 4 * 1024 * 1024 * 1024;
const MAC_DOMAIN = Buffer.from("kiln-native-library\0", "latin1");
const TEMP_MAX_AGE_MS = 10 * 60 * 1000;
// A lock older than this belongs to a build that died or hung; the compile timeout is 10 min.
const LOCK_STALE_MS = 11 * 60 * 1000;
const LOCK_POLL_MS = 20;

const ENTRY_NAME = /^[0-9a-f]{64}\.klib$/;
const TEMP_NAME = /^\.[0-9a-f]{64}\.klib\.\d+\.[0-9a-f]{16}\.tmp$/;
const LOCK_NAME = /^[0-9a-f]{64}\.klib\.lock$/;

/** Why an entry was thrown away. */
export type LibDiscardReason =
  | "header-garbage"
  | "truncated"
  | "trailing-bytes"
  | "stale"
  | "foreign"
  | "mac"
  | "untrusted";

export const LIB_DISCARD_REASONS: readonly LibDiscardReason[] = [
  "header-garbage",
  "truncated",
  "trailing-bytes",
  "stale",
  "foreign",
  "mac",
  "untrusted",
];

export interface LibCacheOptions {
  /** The directory (default `<kilnCacheRoot()>/native`). */
  readonly dir?: string;
  /** The byte budget (default KILN_NATIVE_CACHE_MAX_BYTES, else 1 GiB). */
  readonly maxBytes?: number;
  /** Where trust and disk problems are reported (default process.emitWarning, KILN_CACHE). */
  readonly onWarning?: (message: string) => void;
  /** How a hit's mtime is refreshed (default futimesSync); tests simulate EROFS with it. */
  readonly touch?: (fd: number, seconds: number) => void;
}

export interface LibCacheInfo {
  readonly dir: string;
  readonly entries: number;
  readonly bytes: number;
  readonly maxBytes: number;
  readonly discarded: Record<LibDiscardReason, number>;
  /** Whether the disk is used; when it is not, `why` says why. */
  readonly trusted: boolean;
  readonly why?: string;
}

type Bad = { ok: false; reason: LibDiscardReason; detail: string };
export type DecodedLib = { ok: true; body: Uint8Array } | Bad;

function bad(reason: LibDiscardReason, detail: string): Bad {
  return { ok: false, reason, detail };
}

/** An entry's file name: the SHA-256 of its key. */
export function libEntryName(key: string): string {
  return `${createHash("sha256").update(key, "utf8").digest("hex")}${LIB_SUFFIX}`;
}

const mac = (secret: Uint8Array, key: string, signed: Uint8Array): Buffer =>
  keyedMac(secret, MAC_DOMAIN, key, signed);

/**
 * An entry:
 *   "KILNLIB\0" | format u32 LE | key length u32 LE | key (UTF-8) | body length u64 LE | body |
 *   HMAC-SHA256(secret, domain | key length | key | everything before the MAC)
 */
export function encodeLibEntry(secret: Uint8Array, key: string, body: Uint8Array): Buffer {
  const keyBytes = Buffer.from(key, "utf8");
  const head = FIXED_HEADER + keyBytes.length + 8;
  const out = Buffer.alloc(head + body.length + MAC_BYTES);
  MAGIC.copy(out, 0);
  out.writeUInt32LE(LIB_FORMAT_VERSION, 8);
  out.writeUInt32LE(keyBytes.length, 12);
  keyBytes.copy(out, FIXED_HEADER);
  out.writeBigUInt64LE(BigInt(body.length), FIXED_HEADER + keyBytes.length);
  out.set(body, head);
  mac(secret, key, out.subarray(0, head + body.length)).copy(out, head + body.length);
  return out;
}

/** Checks an entry's bytes for `key`; the body is returned only once its MAC matches. */
export function decodeLibEntry(secret: Uint8Array, key: string, bytes: Buffer): DecodedLib {
  const m = Math.min(bytes.length, MAGIC.length);
  if (!bytes.subarray(0, m).equals(MAGIC.subarray(0, m))) {
    return bad("header-garbage", "the file does not start with the KILNLIB magic");
  }
  if (bytes.length < FIXED_HEADER) {
    return bad("truncated", `${bytes.length} bytes, shorter than the ${FIXED_HEADER}-byte header`);
  }
  const format = bytes.readUInt32LE(8);
  if (format !== LIB_FORMAT_VERSION) {
    return bad("stale", `entry format ${format}, this Kiln reads format ${LIB_FORMAT_VERSION}`);
  }
  const keyLength = bytes.readUInt32LE(12);
  if (keyLength > MAX_KEY_BYTES) return bad("header-garbage", `key length ${keyLength}`);
  const head = FIXED_HEADER + keyLength + 8;
  if (bytes.length < head) {
    return bad("truncated", `${bytes.length} bytes, shorter than its ${head}-byte header`);
  }
  const stored = bytes.toString("utf8", FIXED_HEADER, FIXED_HEADER + keyLength);
  if (stored !== key) {
    return bad("foreign", `the entry is for ${JSON.stringify(stored.slice(0, 200))}`);
  }
  const bodyLength = bytes.readBigUInt64LE(FIXED_HEADER + keyLength);
  const actual = BigInt(bytes.length - head - MAC_BYTES);
  if (actual < bodyLength) {
    return bad("truncated", `body and MAC are ${bytes.length - head} bytes, the header says ` +
      `${bodyLength} + ${MAC_BYTES}`);
  }
  if (actual > bodyLength) {
    return bad("trailing-bytes", `${actual - bodyLength} bytes past the body and MAC`);
  }
  const end = head + Number(bodyLength);
  const want = mac(secret, key, bytes.subarray(0, end));
  if (!timingSafeEqual(want, bytes.subarray(end, end + MAC_BYTES))) {
    return bad("mac", "the MAC does not match (not written by this user's Kiln for this key)");
  }
  return { ok: true, body: bytes.subarray(head, end) };
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function sleepMs(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

function zeroReasons(): Record<LibDiscardReason, number> {
  const r = {} as Record<LibDiscardReason, number>;
  for (const reason of LIB_DISCARD_REASONS) r[reason] = 0;
  return r;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

// ---- The store -------------------------------------------------------------------------------

export class LibCache {
  readonly dir: string;
  readonly maxBytes: number;
  private trust: Trust | undefined;
  private readonly warned = new Set<string>();
  private readonly warn: (message: string) => void;
  private readonly touchFd: (fd: number, seconds: number) => void;
  private readonly discarded = zeroReasons();
  // Entries that could not go to disk (untrusted directory, failed write), by key.
  private readonly memory = new Map<string, Uint8Array>();
  private memoryBytes = 0;

  constructor(opts: LibCacheOptions = {}) {
    this.dir = opts.dir ?? nativeCacheDir();
    this.maxBytes = opts.maxBytes ?? nativeCacheMaxBytes();
    if (!(this.maxBytes >= 0)) {
      throw new Error(`LibCache: maxBytes must be >= 0, got ${this.maxBytes}`);
    }
    this.warn = opts.onWarning ?? ((m: string) => process.emitWarning(m, { code: "KILN_CACHE" }));
    this.touchFd = opts.touch ?? ((fd, t) => futimesSync(fd, t, t));
  }

  private path(name: string): string {
    return join(this.dir, name);
  }

  private warnOnce(id: string, message: string): void {
    if (this.warned.has(id)) return;
    this.warned.add(id);
    log("cache", `native: ${message}`);
    this.warn(message);
  }

  // The directory check and the secret, once per store: later reads verify entries with the
  // secret held in memory, so nothing on disk is trusted on its path alone.
  private trusted(): Trust {
    if (this.trust === undefined) {
      this.trust = trustDirectory(this.dir);
      if (!this.trust.ok) {
        this.warnOnce(
          "trust",
          `the native library cache ${this.dir} is not used: ${this.trust.why}; ` +
            `compiled libraries are kept in memory for this process only`,
        );
      }
    }
    return this.trust;
  }

  private count(reason: LibDiscardReason, name: string, detail: string): void {
    this.discarded[reason]++;
    log("cache", `native: discarded ${name}: ${reason}: ${detail}`);
  }

  /** The verified bytes stored for `key`, or undefined. Never throws. */
  get(key: string): Uint8Array | undefined {
    const t = this.trusted();
    if (!t.ok) return this.memory.get(key);
    const mem = this.memory.get(key);
    if (mem !== undefined) return mem;
    const name = libEntryName(key);
    const p = this.path(name);
    let fd: number;
    try {
      fd = openSync(p, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (e) {
      const code = errorCode(e);
      if (code === "ENOENT") return undefined;
      if (code === "ELOOP") {
        this.untrustedEntry(p, name, "it is a symbolic link");
        this.unlinkQuietly(p);
        return undefined;
      }
      this.warnOnce(`read:${code}`, `cannot read native library cache entry ${p}: ${errText(e)}`);
      return undefined;
    }
    try {
      const st = fstatSync(fd);
      const why = untrustedBecause(st, "file", 0o022);
      if (why !== undefined) {
        this.untrustedEntry(p, name, why);
        this.discard(p, st);
        return undefined;
      }
      if (st.size > MAX_ENTRY_BYTES) {
        this.count("header-garbage", name, `${st.size} bytes`);
        this.discard(p, st);
        return undefined;
      }
      const bytes = readFileSync(fd);
      const d = decodeLibEntry(t.secret, key, bytes);
      if (!d.ok) {
        this.count(d.reason, name, d.detail);
        this.discard(p, st);
        return undefined;
      }
      this.touch(fd, p);
      log("cache", () => `native: hit ${name.slice(0, 16)} (${d.body.length} bytes)`);
      return d.body;
    } catch (e) {
      const why = `cannot read native library cache entry ${p}: ${errText(e)}`;
      this.warnOnce(`read:${errorCode(e)}`, why);
      return undefined;
    } finally {
      closeSync(fd);
    }
  }

  private untrustedEntry(p: string, name: string, why: string): void {
    this.count("untrusted", name, why);
    this.warnOnce(`entry:${p}`, `native library cache entry ${p} is not used: ${why}`);
  }

  // A failing mtime update (read-only filesystem, EPERM) only costs LRU accuracy.
  private touch(fd: number, p: string): void {
    try {
      this.touchFd(fd, nextStamp() / 1000);
    } catch (e) {
      log("cache", `native: cannot refresh the mtime of ${p}: ${errorCode(e) ?? errText(e)}`);
    }
  }

  private unlinkQuietly(p: string): void {
    try {
      unlinkSync(p);
    } catch {
      // gone already, or a read-only directory: it stays unused either way
    }
  }

  // Deletes a bad entry unless another process has replaced it since it was read.
  private discard(p: string, seen: Stats): void {
    try {
      const now = lstatSync(p);
      if (now.ino !== seen.ino || now.size !== seen.size || now.mtimeMs !== seen.mtimeMs) return;
      unlinkSync(p);
    } catch {
      // gone already, or a read-only directory
    }
  }

  private remember(key: string, bytes: Uint8Array): void {
    const old = this.memory.get(key);
    if (old !== undefined) {
      this.memoryBytes -= old.length;
      this.memory.delete(key);
    }
    this.memory.set(key, bytes);
    this.memoryBytes += bytes.length;
    for (const [k, v] of this.memory) {
      if (this.memoryBytes <= this.maxBytes || k === key) break;
      this.memory.delete(k);
      this.memoryBytes -= v.length;
    }
  }

  /** Stores `bytes` for `key` (atomically; in memory when the disk is not usable). */
  put(key: string, bytes: Uint8Array): void {
    const t = this.trusted();
    if (!t.ok) {
      this.remember(key, bytes);
      return;
    }
    const name = libEntryName(key);
    try {
      this.write(name, encodeLibEntry(t.secret, key, bytes));
    } catch (e) {
      this.warnOnce(
        `write:${errorCode(e)}`,
        `cannot write to the native library cache ${this.dir}: ${errText(e)}; ` +
          `libraries that cannot be written are kept in memory`,
      );
      this.remember(key, bytes);
      return;
    }
    log("cache", () => `native: wrote ${name.slice(0, 16)} (${bytes.length} bytes)`);
    try {
      this.evict(name);
    } catch (e) {
      this.warnOnce(`evict:${errorCode(e)}`, `cannot evict from ${this.dir}: ${errText(e)}`);
    }
  }

  private write(name: string, bytes: Uint8Array): void {
    writeEntryFile(this.dir, name, bytes, 0o600);
  }

  /** Entry files; temp files of dead writers and stale locks are swept on the way. */
  private scan(): EntryFile[] {
    return scanEntryFiles(this.dir, ENTRY_NAME, [
      { name: TEMP_NAME, maxAgeMs: TEMP_MAX_AGE_MS },
      { name: SECRET_TEMP_NAME, maxAgeMs: TEMP_MAX_AGE_MS },
      { name: LOCK_NAME, maxAgeMs: LOCK_STALE_MS },
    ]);
  }

  // Least recently used first, never the entry just written.
  private evict(keep: string): void {
    for (const name of evictEntryFiles(this.dir, this.scan(), this.maxBytes, keep)) {
      log("cache", `native: evicted ${name.slice(0, 16)}`);
    }
  }

  /**
   * The bytes for `key`, built (once across processes: a lock file makes the others wait for
   * the entry) and stored when missing. `build`'s exceptions propagate.
   */
  getOrBuild(key: string, build: () => Uint8Array): Uint8Array {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const lock = this.trusted().ok ? this.lock(key) : undefined;
    try {
      // Whoever held the lock before may have stored the entry in the meantime.
      if (lock !== undefined) {
        const again = this.get(key);
        if (again !== undefined) return again;
      }
      const bytes = build();
      this.put(key, bytes);
      return bytes;
    } finally {
      if (lock?.held !== undefined) this.unlinkQuietly(lock.held);
    }
  }

  // Waits until this process holds the key's lock file (`held`), or the entry has appeared
  // (`held` undefined); undefined when locking is not possible here (then it just builds).
  private lock(key: string): { held: string | undefined } | undefined {
    const name = libEntryName(key);
    const p = this.path(`${name}.lock`);
    const deadline = Date.now() + LOCK_STALE_MS;
    for (;;) {
      try {
        const fd = openSync(p, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
        try {
          writeSync(fd, `${process.pid}\n`);
        } finally {
          closeSync(fd);
        }
        return { held: p };
      } catch (e) {
        if (errorCode(e) !== "EEXIST") return undefined;
      }
      // Someone else is building: wait for their entry, their death, or a stale lock.
      for (;;) {
        if (existsEntry(this.path(name))) return { held: undefined };
        let st: Stats;
        try {
          st = statSync(p);
        } catch {
          break; // released: try to take it
        }
        if (Date.now() - st.mtimeMs > LOCK_STALE_MS || holderDead(p)) {
          this.unlinkQuietly(p);
          break;
        }
        if (Date.now() > deadline) return undefined;
        sleepMs(LOCK_POLL_MS);
      }
    }
  }

  /** What is on disk, what was discarded and why, and whether the disk is used. */
  info(): LibCacheInfo {
    const t = this.trusted();
    let entries = 0;
    let bytes = 0;
    if (t.ok) {
      try {
        for (const e of this.scan()) {
          entries++;
          bytes += e.bytes;
        }
      } catch {
        // an unreadable directory has no entries to report
      }
    } else {
      entries = this.memory.size;
      bytes = this.memoryBytes;
    }
    const base = {
      dir: this.dir,
      entries,
      bytes,
      maxBytes: this.maxBytes,
      discarded: { ...this.discarded },
      trusted: t.ok,
    };
    return t.ok ? base : { ...base, why: t.why };
  }

  /** Deletes every entry and temp file (the secret stays). Returns the entries deleted. */
  clear(): number {
    let removed = this.memory.size;
    this.memory.clear();
    this.memoryBytes = 0;
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return removed;
    }
    for (const name of names) {
      if (!ENTRY_NAME.test(name) && !TEMP_NAME.test(name)) continue;
      try {
        unlinkSync(this.path(name));
        if (ENTRY_NAME.test(name)) removed++;
      } catch {
        // removed by another process, or a read-only directory
      }
    }
    return removed;
  }
}

function existsEntry(p: string): boolean {
  try {
    return lstatSync(p).isFile();
  } catch {
    return false;
  }
}

function holderDead(lockPath: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(lockPath, "utf8").trim());
  } catch {
    return false;
  }
  if (!Number.isInteger(pid) || pid <= 0) return false; // being written: not yet judged
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return errorCode(e) === "ESRCH";
  }
}

/** `<kilnCacheRoot()>/native`. */
export function nativeCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(kilnCacheRoot(env), "native");
}

/** KILN_NATIVE_CACHE_MAX_BYTES, else 1 GiB. */
export function nativeCacheMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env["KILN_NATIVE_CACHE_MAX_BYTES"];
  if (raw === undefined || raw.trim() === "") return DEFAULT_NATIVE_CACHE_MAX_BYTES;
  const n = Number(raw);
  return Number.isFinite(n) && n >= 0 ? Math.floor(n) : DEFAULT_NATIVE_CACHE_MAX_BYTES;
}

let defaultCache: LibCache | undefined;

/** The process's store in the user's cache directory. */
export function defaultLibCache(): LibCache {
  return (defaultCache ??= new LibCache());
}
