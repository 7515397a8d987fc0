// Module fingerprints for the program caches: the SHA-256 of the module's canonical text, which is
// its HLO text with metadata left out and every instruction and computation renamed by position.
// So two modules that differ only in names or source locations share a fingerprint, and any
// change to an opcode, shape, attribute, constant or the graph's structure changes it.

import { createHash } from "node:crypto";
import type { Module } from "./module.ts";
import { printHlo } from "./print.ts";

/** The text a fingerprint hashes: HLO text without metadata, names replaced by position. */
export function canonicalText(module: Module): string {
  return printHlo(module, { metadata: false, canonicalNames: true });
}

/** A 64-digit lowercase hex SHA-256 of the module's canonical text. */
export function fingerprint(module: Module): string {
  return createHash("sha256").update(canonicalText(module)).digest("hex");
}
