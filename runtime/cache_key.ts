// What the program cache's keys are, and the parts of the disk format that need no file
// system: shared by the disk store (runtime/cache_disk.ts, Node) and the browser build's
// stand-in for it (runtime/cache_disk.browser.ts), so the browser bundle never loads node:fs.

import { sha256Hex } from "../util/hash.ts";

/**
 * Bumped whenever the layout of an entry file changes; older entries read as stale. 2: the
 * body's SHA-256 gave way to an HMAC over key, header and body.
 */
export const FORMAT_VERSION = 2;

export const ENTRY_SUFFIX = ".kprog";

/** Why an entry file was thrown away. */
export type DiscardReason =
  | "header-garbage"
  | "truncated"
  | "trailing-bytes"
  | "stale"
  | "foreign"
  | "mac"
  | "untrusted"
  | "undecodable";

export const DISCARD_REASONS: readonly DiscardReason[] = [
  "header-garbage",
  "truncated",
  "trailing-bytes",
  "stale",
  "foreign",
  "mac",
  "untrusted",
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
  return `${sha256Hex(`${key.backend}\0${key.fingerprint}\0${key.options}`)}${ENTRY_SUFFIX}`;
}

/** The `code` of a Node fs error (ENOENT, EACCES, ...), if it has one. */
export function errorCode(e: unknown): string | undefined {
  if (typeof e === "object" && e !== null && "code" in e) {
    const code = (e as { code: unknown }).code;
    return typeof code === "string" ? code : undefined;
  }
  return undefined;
}

/**
 * Whether an fs error means "this filesystem or directory does not let me write", which costs
 * a disk cache its writes and its LRU stamps, never its reads.
 */
export function isReadOnlyError(e: unknown): boolean {
  const code = errorCode(e);
  return code === "EROFS" || code === "EACCES" || code === "EPERM";
}
