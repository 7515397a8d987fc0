// The browser build's runtime/cache_disk.ts (scripts/build_browser.ts swaps it in): there is no
// file system, so there is no disk cache. ProgramCache's default (`disk: true`, compile()'s
// `cache: "disk"`) is memory only here, and a directory asked for by name is refused with a
// clear error. The parts of the format that need no file system come from cache_key.ts, as the
// Node store's do.

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
import pkg from "../package.json" with { type: "json" };

export type { DiskEntry, ReadResult } from "./cache_disk.ts";
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

/** Why this build has no disk cache. */
export const diskCacheUnavailable: string | undefined =
  "the browser build has no file system: programs are cached in memory only";

/** The build id of the bundled sources (runtime/build_id.ts), set by scripts/build_browser.ts. */
declare const __KILN_BUILD_ID__: string;

/** Kiln's version and build id, `0.1.0+<16 hex>`, as in Node (both bundled: no files here). */
export function readKilnVersion(): string {
  const v: unknown = (pkg as { version?: unknown }).version;
  if (typeof v !== "string") {
    throw new Error("Kiln's package.json has no version string; the program cache needs one");
  }
  return `${v}+${__KILN_BUILD_ID__}`;
}

function noDisk(what: string): never {
  throw new Error(`${what}: ${diskCacheUnavailable} (use cache: "memory", or a ProgramCache ` +
    `with disk: false)`);
}

export function kilnCacheRoot(): string {
  return noDisk("kilnCacheRoot");
}

export function defaultProgramDir(): string {
  return noDisk("defaultProgramDir");
}

/** Never made: constructing one throws (a ProgramCache given a directory in the browser). */
export class DiskStore {
  constructor(readonly dir: string) {
    noDisk(`the program cache directory ${dir}`);
  }
}

