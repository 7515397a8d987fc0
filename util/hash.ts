// SHA-256 for fingerprints and cache keys (ir/fingerprint.ts, runtime/cache.ts, passes/cse.ts),
// synchronous because compile() is. Node's node:crypto here; the browser build
// (scripts/build_browser.ts) swaps in hash.browser.ts, a pure-JavaScript SHA-256 with the same
// digests, so a program's fingerprint is the same in both.

import { createHash } from "node:crypto";

/** The SHA-256 of `data` (a string is hashed as UTF-8), as 64 lowercase hex digits. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}
