// The browser build's util/hash.ts (scripts/build_browser.ts swaps it in): the same SHA-256,
// in plain JavaScript (util/sha256.ts), synchronous as compile() needs.

import { sha256 } from "./sha256.ts";

/** The SHA-256 of `data` (a string is hashed as UTF-8), as 64 lowercase hex digits. */
export function sha256Hex(data: string | Uint8Array): string {
  return sha256(data);
}
