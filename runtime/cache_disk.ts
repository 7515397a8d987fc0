// The on-disk half of the program cache: the entry file format and the directory of entries.
// One file per program, named by a hash of the version-independent part of its key, so a newer
// Kiln finds (and replaces) an older Kiln's entry instead of leaking it. A file is a header
// (magic, format version, the full key, the body's length and SHA-256) and the body; every check
// runs before a single byte of the body is handed to a backend, so a damaged, truncated, foreign
// or stale entry is discarded and recompiled, never executed. Writers go through a temp file in
// the same directory (write, fsync, rename), so concurrent processes and crashed writers never
// leave a partial entry where a reader can see it. Recency is the file's mtime (set on write and
// on every hit), which needs no shared index for concurrent processes to corrupt.

import { createHash, randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  futimesSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  unlinkSync,
  utimesSync,
  writeSync,
  type Stats,
} from "node:fs";
import { join } from "node:path";

/** Bumped whenever the layout of an entry file changes; older entries read as stale. */
export const FORMAT_VERSION = 1;
export const ENTRY_SUFFIX = ".kprog";

const MAGIC = Buffer.from("KILNPROG", "latin1");
// magic (8) + format (u32) + key length (u32)
const FIXED_HEADER = 16;
// body length (u64) + SHA-256 (32)
const TRAILING_HEADER = 40;
// A real key is a few hundred bytes; a huge length means the header is garbage.
const MAX_KEY_BYTES = 64 * 1024;
// Temp files of writers that died mid-write are removed once they are this old.
const TEMP_MAX_AGE_MS = 10 * 60 * 1000;

const ENTRY_NAME = /^[0-9a-f]{64}\.kprog$/;
const TEMP_NAME = /^\.[0-9a-f]{64}\.kprog\.\d+\.[0-9a-f]{16}\.tmp$/;

/** Why an entry file was thrown away. */
export type DiscardReason =
  | "header-garbage"
  | "truncated"
  | "trailing-bytes"
  | "stale"
  | "foreign"
  | "checksum"
  | "undecodable";

export const DISCARD_REASONS: readonly DiscardReason[] = [
  "header-garbage",
  "truncated",
  "trailing-bytes",
  "stale",
  "foreign",
  "checksum",
  "undecodable",
];

/** The identity of a compiled program; every field changes the generated code. */
export interface ProgramKey {
  /** The Kiln version that wrote the entry. */
  readonly kiln: string;
  readonly backend: string;
  /** ir/fingerprint.ts of the module handed to the cache (before any passes it runs). */
  readonly fingerprint: string;
  /** A SHA-256 of the canonical form of the compile options. */
  readonly options: string;
}

/** The key as the exact text stored in an entry's header (fields in a fixed order). */
export function keyText(key: ProgramKey): string {
  return JSON.stringify({
    kiln: key.kiln,
    backend: key.backend,
    fingerprint: key.fingerprint,
    options: key.options,
  });
}

/** The entry's file name: a hash of everything in the key except the Kiln version. */
export function entryFileName(key: ProgramKey): string {
  const h = createHash("sha256");
  h.update(`${key.backend}\0${key.fingerprint}\0${key.options}`);
  return `${h.digest("hex")}${ENTRY_SUFFIX}`;
}

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
 * An entry file:
 *   "KILNPROG" | format u32 LE | key length u32 LE | key (UTF-8 JSON) | body length u64 LE |
 *   SHA-256 of the body (32 bytes) | body
 * and the body is: module proto length u32 LE | module proto | backend payload.
 */
export function encodeEntry(key: string, moduleProto: Uint8Array, payload: Uint8Array): Buffer {
  const keyBytes = Buffer.from(key, "utf8");
  const bodyLength = 4 + moduleProto.length + payload.length;
  const headerLength = FIXED_HEADER + keyBytes.length + TRAILING_HEADER;
  const out = Buffer.alloc(headerLength + bodyLength);
  MAGIC.copy(out, 0);
  out.writeUInt32LE(FORMAT_VERSION, 8);
  out.writeUInt32LE(keyBytes.length, 12);
  keyBytes.copy(out, FIXED_HEADER);
  let at = FIXED_HEADER + keyBytes.length;
  out.writeBigUInt64LE(BigInt(bodyLength), at);
  at += 8;
  const body = out.subarray(headerLength);
  body.writeUInt32LE(moduleProto.length, 0);
  body.set(moduleProto, 4);
  body.set(payload, 4 + moduleProto.length);
  createHash("sha256").update(body).digest().copy(out, at);
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
  checksum: Buffer;
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
  const bodyStart = FIXED_HEADER + keyLength + TRAILING_HEADER;
  if (bytes.length < bodyStart) {
    return bad("truncated", `${bytes.length} bytes, shorter than its ${bodyStart}-byte header`);
  }
  const text = bytes.toString("utf8", FIXED_HEADER, FIXED_HEADER + keyLength);
  const key = parseKey(text);
  if (!key) return bad("header-garbage", "the key in the header is not a Kiln program key");
  if (kilnVersion !== undefined && key.kiln !== kilnVersion) {
    return bad("stale", `written by Kiln ${key.kiln}, this is Kiln ${kilnVersion}`);
  }
  const at = FIXED_HEADER + keyLength;
  const bodyLength = bytes.readBigUInt64LE(at);
  const checksum = bytes.subarray(at + 8, at + TRAILING_HEADER);
  return { ok: true, header: { key, keyText: text, bodyStart, bodyLength, checksum } };
}

/**
 * Checks an entry's bytes against the key it must have been written for; on success, the
 * module proto and the backend payload (views into `bytes`). Nothing here trusts the body
 * before its length and SHA-256 match the header.
 */
export function decodeEntry(bytes: Buffer, expected: ProgramKey): DecodedEntry {
  const h = readHeader(bytes, expected.kiln);
  if (!h.ok) return h;
  const { header } = h;
  const want = keyText(expected);
  if (header.keyText !== want) {
    return bad("foreign", `the entry is for ${header.keyText}, wanted ${want}`);
  }
  const actual = BigInt(bytes.length - header.bodyStart);
  if (actual < header.bodyLength) {
    return bad("truncated", `body is ${actual} bytes, the header says ${header.bodyLength}`);
  }
  if (actual > header.bodyLength) {
    return bad("trailing-bytes", `body is ${actual} bytes, the header says ${header.bodyLength}`);
  }
  const body = bytes.subarray(header.bodyStart);
  const sum = createHash("sha256").update(body).digest();
  if (!sum.equals(header.checksum)) {
    return bad("checksum", `body SHA-256 ${sum.toString("hex")} does not match the header`);
  }
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

/** The `code` of a Node fs error (ENOENT, EACCES, ...), if it has one. */
export function errorCode(e: unknown): string | undefined {
  if (typeof e === "object" && e !== null && "code" in e) {
    const code = (e as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
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

/** The entry files in one directory; every operation is safe against concurrent processes. */
export class DiskStore {
  constructor(
    readonly dir: string,
    readonly maxBytes: number,
  ) {}

  path(name: string): string {
    return join(this.dir, name);
  }

  /** Reads and checks one entry; fs errors other than a missing file are thrown. */
  read(name: string, expected: ProgramKey): ReadResult {
    let fd: number;
    try {
      fd = openSync(this.path(name), "r");
    } catch (e) {
      if (errorCode(e) === "ENOENT") return { kind: "missing" };
      throw e;
    }
    try {
      const stat = fstatSync(fd);
      const bytes = readFileSync(fd);
      const d = decodeEntry(bytes, expected);
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
      utimesSync(this.path(name), t, t);
    } catch (e) {
      if (errorCode(e) !== "ENOENT") throw e;
    }
  }

  /** Writes an entry atomically (writeEntryFile). */
  write(name: string, bytes: Uint8Array): void {
    mkdirSync(this.dir, { recursive: true });
    writeEntryFile(this.dir, name, bytes, 0o644);
  }

  /** The entry files with size and mtime; temp files of dead writers are swept. */
  private scan(): EntryFile[] {
    return scanEntryFiles(this.dir, ENTRY_NAME, [{ name: TEMP_NAME, maxAgeMs: TEMP_MAX_AGE_MS }]);
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
        head = readPrefix(file, FIXED_HEADER + MAX_KEY_BYTES + TRAILING_HEADER);
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
            : BigInt(e.bytes - h.header.bodyStart) !== h.header.bodyLength
              ? `truncated: the file size does not match the header`
              : undefined;
      out.push(problem === undefined ? { ...base, key } : { ...base, key, problem });
    }
    return out.sort((a, b) => b.lastUsed.getTime() - a.lastUsed.getTime());
  }

  /** Deletes every entry and temp file this store owns (nothing else in the directory). */
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
