// The on-disk half of the program cache: the entry file format, the directory of entries, and
// the trust both disk caches (this one and the native library cache, runtime/native/libcache.ts)
// place in a directory. What an entry holds is code that runs (generated JS, the step list that
// names compiled libraries), so the store is trusted the way ccache's and Python's bytecode
// caches are, plus a MAC: the directory is created 0700 and used only if it is the user's own
// and not writable by group or others (not a symbolic link), an entry file likewise, and every
// entry carries an HMAC-SHA256, keyed by a per-user secret file in the directory (0600, created
// once, atomically), over the key it is read for, its header and its body, module proto
// included. Without the secret nobody can make an entry this store accepts, and an entry written
// for one key never serves another. The secret is read once and kept in memory, so a directory
// swapped after the check cannot bring its own. One file per program, named by a hash of the
// version-independent part of its key, so a newer Kiln finds (and replaces) an older Kiln's
// entry instead of leaking it; every check runs before a single byte of the body is handed to a
// backend, so a damaged, truncated, foreign, stale or forged entry is discarded and recompiled,
// never executed. Writers go through a temp file in the same directory (write, fsync, rename),
// so concurrent processes and crashed writers never leave a partial entry where a reader can see
// it. Recency is the file's mtime (set on write and on every hit), which needs no shared index
// for concurrent processes to corrupt.

import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  futimesSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
  type Stats,
} from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sourceBuildId } from "./build_id.ts";
import {
  DISCARD_REASONS,
  type DiscardReason,
  ENTRY_SUFFIX,
  entryFileName,
  errorCode,
  FORMAT_VERSION,
  isReadOnlyError,
  keyText,
  type ProgramKey,
} from "./cache_key.ts";

export {
  DISCARD_REASONS,
  type DiscardReason,
  ENTRY_SUFFIX,
  entryFileName,
  errorCode,
  FORMAT_VERSION,
  isReadOnlyError,
  keyText,
  type ProgramKey,
};

/** The per-user secret's file name in a trusted cache directory. */
export const SECRET_NAME = "secret";
export const SECRET_BYTES = 32;

const MAGIC = Buffer.from("KILNPROG", "latin1");
// magic (8) + format (u32) + key length (u32)
const FIXED_HEADER = 16;
// body length (u64)
const BODY_LENGTH_BYTES = 8;
const MAC_BYTES = 32;
const MAC_DOMAIN = Buffer.from("kiln-program\0", "latin1");
// A real key is a few hundred bytes; a huge length means the header is garbage.
const MAX_KEY_BYTES = 64 * 1024;
// Temp files of writers that died mid-write are removed once they are this old.
const TEMP_MAX_AGE_MS = 10 * 60 * 1000;

const ENTRY_NAME = /^[0-9a-f]{64}\.kprog$/;
const TEMP_NAME = /^\.[0-9a-f]{64}\.kprog\.\d+\.[0-9a-f]{16}\.tmp$/;
/** Temp files of a secret being created (swept like entry temp files). */
export const SECRET_TEMP_NAME = /^\.secret\.\d+\.[0-9a-f]{16}\.tmp$/;



function parseKey(text: string): ProgramKey | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const r = v as Record<string, unknown>;
  const { kiln, backend, fingerprint, options } = r;
  if (
    typeof kiln !== "string" ||
    typeof backend !== "string" ||
    typeof fingerprint !== "string" ||
    typeof options !== "string"
  ) {
    return undefined;
  }
  return { kiln, backend, fingerprint, options };
}

// ---- The entry format ------------------------------------------------------------------------

/**
 * HMAC-SHA256 under `secret` over `domain` (which store: program or library entries), the key
 * an entry is read for (length-prefixed) and the entry's bytes before the MAC: the one MAC of
 * both disk caches.
 */
export function keyedMac(
  secret: Uint8Array,
  domain: Uint8Array,
  key: string,
  signed: Uint8Array,
): Buffer {
  const keyBytes = Buffer.from(key, "utf8");
  const len = Buffer.alloc(4);
  len.writeUInt32LE(keyBytes.length, 0);
  return createHmac("sha256", secret)
    .update(domain)
    .update(len)
    .update(keyBytes)
    .update(signed)
    .digest();
}

const entryMac = (secret: Uint8Array, key: string, signed: Uint8Array): Buffer =>
  keyedMac(secret, MAC_DOMAIN, key, signed);

/**
 * An entry file:
 *   "KILNPROG" | format u32 LE | key length u32 LE | key (UTF-8 JSON) | body length u64 LE |
 *   body | HMAC-SHA256(secret, domain | key length | key | everything before the MAC)
 * and the body is: module proto length u32 LE | module proto | backend payload.
 */
export function encodeEntry(
  secret: Uint8Array,
  key: string,
  moduleProto: Uint8Array,
  payload: Uint8Array,
): Buffer {
  const keyBytes = Buffer.from(key, "utf8");
  const bodyLength = 4 + moduleProto.length + payload.length;
  const headerLength = FIXED_HEADER + keyBytes.length + BODY_LENGTH_BYTES;
  const out = Buffer.alloc(headerLength + bodyLength + MAC_BYTES);
  MAGIC.copy(out, 0);
  out.writeUInt32LE(FORMAT_VERSION, 8);
  out.writeUInt32LE(keyBytes.length, 12);
  keyBytes.copy(out, FIXED_HEADER);
  out.writeBigUInt64LE(BigInt(bodyLength), FIXED_HEADER + keyBytes.length);
  const body = out.subarray(headerLength, headerLength + bodyLength);
  body.writeUInt32LE(moduleProto.length, 0);
  body.set(moduleProto, 4);
  body.set(payload, 4 + moduleProto.length);
  const end = headerLength + bodyLength;
  entryMac(secret, key, out.subarray(0, end)).copy(out, end);
  return out;
}

export type DecodedEntry =
  | { ok: true; key: ProgramKey; moduleProto: Uint8Array; payload: Uint8Array }
  | { ok: false; reason: DiscardReason; detail: string };

interface Header {
  key: ProgramKey;
  keyText: string;
  bodyStart: number;
  bodyLength: bigint;
}

type Bad = { ok: false; reason: DiscardReason; detail: string };
type HeaderResult = { ok: true; header: Header } | Bad;

function bad(reason: DiscardReason, detail: string): Bad {
  return { ok: false, reason, detail };
}

function readHeader(bytes: Buffer, kilnVersion: string | undefined): HeaderResult {
  const magicLength = Math.min(bytes.length, MAGIC.length);
  if (!bytes.subarray(0, magicLength).equals(MAGIC.subarray(0, magicLength))) {
    return bad("header-garbage", "the file does not start with the KILNPROG magic");
  }
  if (bytes.length < FIXED_HEADER) {
    return bad("truncated", `${bytes.length} bytes, shorter than the ${FIXED_HEADER}-byte header`);
  }
  const format = bytes.readUInt32LE(8);
  if (format !== FORMAT_VERSION) {
    return bad("stale", `entry format ${format}, this Kiln reads format ${FORMAT_VERSION}`);
  }
  const keyLength = bytes.readUInt32LE(12);
  if (keyLength > MAX_KEY_BYTES) {
    return bad("header-garbage", `key length ${keyLength} is implausible`);
  }
  const bodyStart = FIXED_HEADER + keyLength + BODY_LENGTH_BYTES;
  if (bytes.length < bodyStart) {
    return bad("truncated", `${bytes.length} bytes, shorter than its ${bodyStart}-byte header`);
  }
  const text = bytes.toString("utf8", FIXED_HEADER, FIXED_HEADER + keyLength);
  const key = parseKey(text);
  if (!key) return bad("header-garbage", "the key in the header is not a Kiln program key");
  if (kilnVersion !== undefined && key.kiln !== kilnVersion) {
    return bad("stale", `written by Kiln ${key.kiln}, this is Kiln ${kilnVersion}`);
  }
  const bodyLength = bytes.readBigUInt64LE(FIXED_HEADER + keyLength);
  return { ok: true, header: { key, keyText: text, bodyStart, bodyLength } };
}

/**
 * Checks an entry's bytes against the key it must have been written for, under the store's
 * secret; on success, the module proto and the backend payload (views into `bytes`). Nothing
 * here looks inside the body before the MAC over the expected key, header and body matches.
 */
export function decodeEntry(
  secret: Uint8Array,
  bytes: Buffer,
  expected: ProgramKey,
): DecodedEntry {
  const h = readHeader(bytes, expected.kiln);
  if (!h.ok) return h;
  const { header } = h;
  const want = keyText(expected);
  if (header.keyText !== want) {
    return bad("foreign", `the entry is for ${header.keyText}, wanted ${want}`);
  }
  const actual = BigInt(bytes.length - header.bodyStart - MAC_BYTES);
  if (actual < header.bodyLength) {
    return bad(
      "truncated",
      `body and MAC are ${bytes.length - header.bodyStart} bytes, the header says ` +
        `${header.bodyLength} + ${MAC_BYTES}`,
    );
  }
  if (actual > header.bodyLength) {
    return bad("trailing-bytes", `${actual - header.bodyLength} bytes past the body and MAC`);
  }
  const end = header.bodyStart + Number(header.bodyLength);
  const mac = entryMac(secret, want, bytes.subarray(0, end));
  if (!timingSafeEqual(mac, bytes.subarray(end, end + MAC_BYTES))) {
    return bad("mac", "the MAC does not match (not written by this user's Kiln for this key)");
  }
  const body = bytes.subarray(header.bodyStart, end);
  if (body.length < 4) return bad("undecodable", "the body has no module length");
  const moduleLength = body.readUInt32LE(0);
  if (4 + moduleLength > body.length) {
    return bad("undecodable", `module length ${moduleLength} overruns a ${body.length}-byte body`);
  }
  return {
    ok: true,
    key: header.key,
    moduleProto: body.subarray(4, 4 + moduleLength),
    payload: body.subarray(4 + moduleLength),
  };
}

// ---- The directory ---------------------------------------------------------------------------

// Recency stamps in ms, strictly increasing within a process, so two touches in the same
// millisecond still order (LRU must not depend on the clock's resolution).
let lastStamp = 0;
/** A file stamp (ms) later than every earlier one from this process: LRU order survives ties. */
export function nextStamp(): number {
  lastStamp = Math.max(Date.now(), lastStamp + 1);
  return lastStamp;
}


/** Why this build has no disk cache (undefined: it has one; the browser build says why not). */
export const diskCacheUnavailable: string | undefined = undefined;

/**
 * Kiln's version and build id, `0.1.0+<16 hex>`, from its package.json (one directory above
 * runtime/, in dist/ too): the published build carries its build id (scripts/build.ts); a
 * source checkout hashes itself (runtime/build_id.ts).
 */
export function readKilnVersion(): string {
  const root = new URL("..", import.meta.url);
  const text = readFileSync(new URL("package.json", root), "utf8");
  const pkg: unknown = JSON.parse(text);
  if (typeof pkg !== "object" || pkg === null || !("version" in pkg)) {
    throw new Error("Kiln's package.json has no version string; the program cache needs one");
  }
  const v = (pkg as { version: unknown }).version;
  if (typeof v !== "string") {
    throw new Error("Kiln's package.json has no version string; the program cache needs one");
  }
  const b = (pkg as { build?: unknown }).build;
  const build = typeof b === "string" ? b : sourceBuildId(fileURLToPath(root));
  return `${v}+${build}`;
}

/**
 * The user's Kiln cache directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln (when absolute,
 * as the XDG spec requires), else ~/.cache/kiln. Programs live in its `programs` folder.
 */
export function kilnCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  const own = env["KILN_CACHE_DIR"];
  if (own !== undefined && own !== "") return own;
  const xdg = env["XDG_CACHE_HOME"];
  if (xdg !== undefined && isAbsolute(xdg)) return join(xdg, "kiln");
  return join(homedir(), ".cache", "kiln");
}

/** Where the default program cache keeps its entries. */
export function defaultProgramDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(kilnCacheRoot(env), "programs");
}

// ---- Trust -----------------------------------------------------------------------------------

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function uid(): number | undefined {
  return process.getuid ? process.getuid() : undefined;
}

function octal(mode: number): string {
  return (mode & 0o777).toString(8).padStart(4, "0");
}

/**
 * Why a directory or file cannot be trusted, or undefined when it can: it must be what it says
 * (not a symbolic link), owned by the current user, and have none of the `forbidden` mode bits
 * (0o022: writable by group or others; 0o077 for the secret: any access by them).
 */
export function untrustedBecause(
  st: Stats,
  what: "directory" | "file",
  forbidden: number,
): string | undefined {
  if (st.isSymbolicLink()) return "it is a symbolic link";
  if (what === "directory" ? !st.isDirectory() : !st.isFile()) return `it is not a ${what}`;
  const me = uid();
  if (me !== undefined && st.uid !== me) return `it is owned by uid ${st.uid}, not by uid ${me}`;
  if ((st.mode & forbidden) !== 0) {
    const who =
      forbidden === 0o077
        ? "readable or writable by group or others"
        : "writable by group or others";
    return `it is ${who} (mode ${octal(st.mode)})`;
  }
  return undefined;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function sleepMs(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/** A directory's trust: the secret its entries are MAC'd with, or why it is not used. */
export type Trust = { ok: true; secret: Buffer } | { ok: false; why: string };

/**
 * Creates `dir` (0700) if missing and decides whether to use it: the directory must pass
 * untrustedBecause, and its secret must exist (it is created when missing), be the user's own,
 * 0600 and exactly SECRET_BYTES long. A damaged secret is refused, never replaced behind the
 * user's back (replacing it would silently invalidate every entry; deleting it is the user's
 * call).
 */
export function trustDirectory(dir: string): Trust {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    return { ok: false, why: `the directory cannot be created (${errorCode(e) ?? errText(e)})` };
  }
  let st: Stats;
  try {
    st = lstatSync(dir);
  } catch (e) {
    return { ok: false, why: `the directory cannot be read (${errorCode(e) ?? errText(e)})` };
  }
  const why = untrustedBecause(st, "directory", 0o022);
  if (why !== undefined) return { ok: false, why: `${dir}: ${why}` };
  return loadSecret(dir);
}

function loadSecret(dir: string): Trust {
  const p = join(dir, SECRET_NAME);
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(p, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (e) {
      const code = errorCode(e);
      if (code === "ENOENT" && attempt < 3) {
        const failed = createSecret(dir, p);
        if (failed !== undefined) return { ok: false, why: failed };
        continue;
      }
      if (code === "ELOOP") return { ok: false, why: `the secret ${p}: it is a symbolic link` };
      return { ok: false, why: `the secret ${p} cannot be read (${code ?? errText(e)})` };
    }
    try {
      const st = fstatSync(fd);
      const why = untrustedBecause(st, "file", 0o077);
      if (why !== undefined) return { ok: false, why: `the secret ${p}: ${why}` };
      if (st.size !== SECRET_BYTES) {
        // A writer without hard links (see createSecret) may not have written it all yet.
        if (st.size < SECRET_BYTES && Date.now() - st.mtimeMs < 2000 && attempt < 100) {
          sleepMs(10);
          continue;
        }
        return {
          ok: false,
          why: `the secret ${p} is ${st.size} bytes, not ${SECRET_BYTES} (delete it to start over)`,
        };
      }
      const secret = Buffer.alloc(SECRET_BYTES);
      let off = 0;
      while (off < SECRET_BYTES) {
        const n = readSync(fd, secret, off, SECRET_BYTES - off, off);
        if (n === 0) break;
        off += n;
      }
      if (off !== SECRET_BYTES) return { ok: false, why: `the secret ${p} is short` };
      return { ok: true, secret };
    } finally {
      closeSync(fd);
    }
  }
}

// The secret appears complete or not at all: written to a temp file (O_EXCL, 0600), then
// hard-linked to its name (link fails if the name exists, like O_EXCL), so racing processes
// agree on one secret: the loser's link fails with EEXIST and it reads the winner's. Where hard
// links are not supported, an O_EXCL create of the name itself is the fallback (a reader that
// sees it short waits for the rest; see loadSecret).
function createSecret(dir: string, p: string): string | undefined {
  const bytes = randomBytes(SECRET_BYTES);
  const tmp = join(dir, `.${SECRET_NAME}.${process.pid}.${randomBytes(8).toString("hex")}.tmp`);
  try {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    const fd = openSync(tmp, flags, 0o600);
    try {
      writeSync(fd, bytes);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, p);
    } catch (e) {
      const code = errorCode(e);
      if (code === "EEXIST") return undefined;
      if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "EXDEV") {
        throw e;
      }
      try {
        writeFileSync(p, bytes, { flag: "wx", mode: 0o600 });
      } catch (e2) {
        if (errorCode(e2) !== "EEXIST") throw e2;
      }
    }
    return undefined;
  } catch (e) {
    return `the secret ${p} cannot be created (${errorCode(e) ?? errText(e)})`;
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // never created
    }
  }
}


// ---- Entry directories (the program cache's and the native library cache's) ---------------

/**
 * Writes `name` in `dir` atomically: a temp file of the same name (`.name.pid.random.tmp`,
 * created exclusively, never through a link), stamped, fsynced, renamed over `name`, then the
 * directory fsynced. A failed write leaves no temp file behind (or one a sweep removes).
 */
export function writeEntryFile(dir: string, name: string, bytes: Uint8Array, mode: number): void {
  const tmp = join(dir, `.${name}.${process.pid}.${randomBytes(8).toString("hex")}.tmp`);
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const fd = openSync(tmp, flags, mode);
  let renamed = false;
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    const t = nextStamp() / 1000;
    futimesSync(fd, t, t);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, join(dir, name));
    renamed = true;
  } finally {
    if (!renamed) {
      try {
        closeSync(fd);
      } catch {
        // already closed before the rename failed
      }
      try {
        unlinkSync(tmp);
      } catch {
        // a leftover temp file is removed by a later sweep
      }
    }
  }
  // Makes the rename durable; some platforms cannot fsync a directory, which only weakens
  // durability across a power cut, never atomicity.
  let dfd: number | undefined;
  try {
    dfd = openSync(dir, "r");
    fsyncSync(dfd);
  } catch {
    // see above
  } finally {
    if (dfd !== undefined) closeSync(dfd);
  }
}

/** An entry file: its name, size and last use. */
export interface EntryFile {
  readonly name: string;
  readonly bytes: number;
  readonly mtimeMs: number;
}

/**
 * The files of `dir` named like `entry`, with size and last use; on the way, files matching a
 * `sweep` pattern older than its age (temp files of dead writers, stale locks) are deleted.
 */
export function scanEntryFiles(
  dir: string,
  entry: RegExp,
  sweep: readonly { readonly name: RegExp; readonly maxAgeMs: number }[],
): EntryFile[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    if (errorCode(e) === "ENOENT") return [];
    throw e;
  }
  const out: EntryFile[] = [];
  const now = Date.now();
  for (const name of names) {
    try {
      if (entry.test(name)) {
        const st = lstatSync(join(dir, name));
        // Stamps are whole milliseconds; rounding undoes the float error of utimes.
        if (st.isFile()) out.push({ name, bytes: st.size, mtimeMs: Math.round(st.mtimeMs) });
        continue;
      }
      const rule = sweep.find((r) => r.name.test(name));
      if (rule && now - lstatSync(join(dir, name)).mtimeMs > rule.maxAgeMs) {
        unlinkSync(join(dir, name));
      }
    } catch (e) {
      // another process removed it between readdir and stat
      if (errorCode(e) !== "ENOENT") throw e;
    }
  }
  return out;
}

/**
 * Deletes the least recently used of `entries` (never `keep`) until they total at most
 * `maxBytes`; returns the names deleted.
 */
export function evictEntryFiles(
  dir: string,
  entries: EntryFile[],
  maxBytes: number,
  keep: string,
): string[] {
  let total = entries.reduce((s, e) => s + e.bytes, 0);
  if (total <= maxBytes) return [];
  const evicted: string[] = [];
  for (const e of [...entries].sort((a, b) => a.mtimeMs - b.mtimeMs)) {
    if (total <= maxBytes) break;
    if (e.name === keep) continue;
    try {
      unlinkSync(join(dir, e.name));
      evicted.push(e.name);
    } catch (err) {
      if (errorCode(err) !== "ENOENT") throw err;
    }
    total -= e.bytes;
  }
  return evicted;
}

/** One entry file as seen by a directory read (`kiln cache ls`). */
export interface DiskEntry {
  readonly file: string;
  readonly bytes: number;
  readonly lastUsed: Date;
  /** The key in its header, when the header reads. */
  readonly key?: ProgramKey;
  /** Why the entry cannot be used, when its header says so already. */
  readonly problem?: string;
}

export type ReadResult =
  | { kind: "missing" }
  | { kind: "ok"; moduleProto: Uint8Array; payload: Uint8Array; stat: Stats }
  | { kind: "bad"; reason: DiscardReason; detail: string; stat: Stats };

/**
 * The entry files in one directory; every operation is safe against concurrent processes.
 * Callers ask `trust()` first: nothing is read from or written to an untrusted directory.
 */
export class DiskStore {
  private trustCache: Trust | undefined;
  private readonly touchFile: (path: string, seconds: number) => void;

  constructor(
    readonly dir: string,
    readonly maxBytes: number,
    /** How a hit's mtime is refreshed (default utimesSync); tests simulate EROFS with it. */
    touch?: (path: string, seconds: number) => void,
  ) {
    this.touchFile = touch ?? ((p, t) => utimesSync(p, t, t));
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  /** The directory's check and secret (trustDirectory), once per store. */
  trust(): Trust {
    return (this.trustCache ??= trustDirectory(this.dir));
  }

  private secret(): Buffer {
    const t = this.trust();
    if (!t.ok) throw new Error(`the program cache ${this.dir} is not trusted: ${t.why}`);
    return t.secret;
  }

  /**
   * Reads and checks one entry: the file must be the user's own and not writable by group or
   * others, and its MAC must verify for `expected`. Fs errors other than a missing file are
   * thrown.
   */
  read(name: string, expected: ProgramKey): ReadResult {
    const secret = this.secret();
    const p = this.path(name);
    let fd: number;
    try {
      fd = openSync(p, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (e) {
      const code = errorCode(e);
      if (code === "ENOENT") return { kind: "missing" };
      if (code === "ELOOP") {
        const stat = lstatSync(p);
        return { kind: "bad", reason: "untrusted", detail: "it is a symbolic link", stat };
      }
      throw e;
    }
    try {
      const stat = fstatSync(fd);
      const why = untrustedBecause(stat, "file", 0o022);
      if (why !== undefined) return { kind: "bad", reason: "untrusted", detail: why, stat };
      const bytes = readFileSync(fd);
      const d = decodeEntry(secret, bytes, expected);
      if (!d.ok) return { kind: "bad", reason: d.reason, detail: d.detail, stat };
      return { kind: "ok", moduleProto: d.moduleProto, payload: d.payload, stat };
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Deletes a bad entry, unless another process has replaced it since it was read (then the
   * file at that name is someone's fresh entry, not the one found bad).
   */
  discard(name: string, seen: Stats): void {
    const p = this.path(name);
    try {
      const now = lstatSync(p);
      if (now.ino !== seen.ino || now.size !== seen.size || now.mtimeMs !== seen.mtimeMs) return;
      unlinkSync(p);
    } catch (e) {
      if (errorCode(e) !== "ENOENT") throw e;
    }
  }

  /** Marks an entry as just used. */
  touch(name: string): void {
    const t = nextStamp() / 1000;
    try {
      this.touchFile(this.path(name), t);
    } catch (e) {
      if (errorCode(e) !== "ENOENT") throw e;
    }
  }

  /** An entry's bytes for `key`, MAC'd under this directory's secret. */
  encode(key: string, moduleProto: Uint8Array, payload: Uint8Array): Buffer {
    return encodeEntry(this.secret(), key, moduleProto, payload);
  }

  /** Writes an entry atomically (writeEntryFile), readable by the user alone. */
  write(name: string, bytes: Uint8Array): void {
    this.secret();
    writeEntryFile(this.dir, name, bytes, 0o600);
  }

  /** The entry files with size and mtime; temp files of dead writers are swept. */
  private scan(): EntryFile[] {
    return scanEntryFiles(this.dir, ENTRY_NAME, [
      { name: TEMP_NAME, maxAgeMs: TEMP_MAX_AGE_MS },
      { name: SECRET_TEMP_NAME, maxAgeMs: TEMP_MAX_AGE_MS },
    ]);
  }

  /** Deletes least recently used entries (never `keep`) until the store fits its bound. */
  evict(keep: string): string[] {
    return evictEntryFiles(this.dir, this.scan(), this.maxBytes, keep);
  }

  /** Entries for listing, most recently used first; only headers are read. */
  list(kilnVersion: string): DiskEntry[] {
    const out: DiskEntry[] = [];
    for (const e of this.scan()) {
      const file = this.path(e.name);
      let head: Buffer;
      try {
        head = readPrefix(file, FIXED_HEADER + MAX_KEY_BYTES + BODY_LENGTH_BYTES);
      } catch (err) {
        if (errorCode(err) === "ENOENT") continue;
        throw err;
      }
      const h = readHeader(head, undefined);
      const base = { file, bytes: e.bytes, lastUsed: new Date(e.mtimeMs) };
      if (!h.ok) {
        out.push({ ...base, problem: `${h.reason}: ${h.detail}` });
        continue;
      }
      const { key } = h.header;
      const expectedName = entryFileName(key);
      const problem =
        key.kiln !== kilnVersion
          ? `stale: written by Kiln ${key.kiln}, this is Kiln ${kilnVersion}`
          : expectedName !== e.name
            ? `foreign: the key belongs in ${expectedName}`
            : BigInt(e.bytes - h.header.bodyStart - MAC_BYTES) !== h.header.bodyLength
              ? `truncated: the file size does not match the header`
              : undefined;
      out.push(problem === undefined ? { ...base, key } : { ...base, key, problem });
    }
    return out.sort((a, b) => b.lastUsed.getTime() - a.lastUsed.getTime());
  }

  /** Deletes every entry and temp file this store owns (the secret and other files stay). */
  clear(): number {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (e) {
      if (errorCode(e) === "ENOENT") return 0;
      throw e;
    }
    let removed = 0;
    for (const name of names) {
      if (!ENTRY_NAME.test(name) && !TEMP_NAME.test(name)) continue;
      try {
        unlinkSync(this.path(name));
        if (ENTRY_NAME.test(name)) removed++;
      } catch (e) {
        if (errorCode(e) !== "ENOENT") throw e;
      }
    }
    return removed;
  }

  /** Total bytes and count of entries. */
  usage(): { entries: number; bytes: number } {
    const entries = this.scan();
    return { entries: entries.length, bytes: entries.reduce((s, e) => s + e.bytes, 0) };
  }
}

function readPrefix(file: string, max: number): Buffer {
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.alloc(Math.min(size, max));
    let off = 0;
    while (off < buf.length) {
      const n = readSync(fd, buf, off, buf.length - off, off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off);
  } finally {
    closeSync(fd);
  }
}
