// Module fingerprints for the program caches: the SHA-256 of the module's canonical text, which is
// its HLO text with metadata left out, every instruction and computation renamed by position and
// XLA's defaults left out (a default layout, a compare's default type: XLA writes them, they mean
// the same as none). So two modules that differ only in names, source locations or written
// defaults share a fingerprint, and any change to an opcode, shape, attribute, constant or the
// graph's structure changes it.

import { sha256Hex } from "../util/hash.ts";
import type { Module } from "./module.ts";
import { printHlo } from "./print.ts";

/** The text a fingerprint hashes: HLO text without metadata, names replaced by position. */
export function canonicalText(module: Module): string {
  return printHlo(module, { metadata: false, canonicalNames: true, defaults: false });
}

/** A 64-digit lowercase hex SHA-256 of the module's canonical text. */
export function fingerprint(module: Module): string {
  return sha256Hex(canonicalText(module));
}
