// What the `wasm` backend stores in the on-disk program cache (runtime/cache.ts) and how it is
// read back: the compiled WebAssembly module's bytes verbatim, and the plan that runs it — the
// step list with every kernel call naming its export, the memory layout (where each constant,
// parameter, result, the arena and the GEMM scratch live), the sort comparators' JavaScript
// source — as plain data, so a load runs `new WebAssembly.Module` and nothing of lowering,
// rendering or encoding. Constants and the comparators' table entries are stored as the js
// backend's recipes (runtime/js/payload.ts): at most 16 KiB inline, larger constants by their
// position in the module's canonical order, re-read from the module the cache hands back. A
// module with bounded dynamic dims (compiled per argument dims at run time) and one that runs on
// js stores only a marker, and a load decides again.
//
// Layout (integers little-endian u32): magic `KILNWAPG`, WASM_CODEGEN_VERSION, flags (bit 0:
// the blob's typed arrays are little-endian), then the byte lengths of meta, blob and wasm, then
// meta (JSON: kind, signature, instruction count, the plan, recipes), blob (typed-array bytes)
// and the module's bytes. The cache checks its MAC over the whole payload before
// decodeWasmPayload sees it; the decoder still checks the header, the lengths and every recipe,
// and `WebAssembly.validate`s the bytes, throwing on anything unexpected (the cache counts it as
// `undecodable` and recompiles); the plan's step kinds and index expressions are checked as the
// executable is linked, and every export a step calls must be a function of the instance.

import type { Instruction, Module } from "../../ir/module.ts";
import {
  BlobWriter,
  canonicalInstructions,
  checkModule,
  decodeData,
  encodeData,
  type PayloadSignature,
  type ProgramTable,
  rebuild,
  recipesOf,
  signatureOf,
} from "../js/payload.ts";

/**
 * The version of the plan's and the generated module's contract with the backend: bump it
 * whenever codegen changes what a plan or a kernel's exports mean, so entries written by an
 * older codegen are rejected and recompiled instead of run.
 */
export const WASM_CODEGEN_VERSION = 3;

const MAGIC = "KILNWAPG";
/** magic, version, flags, three lengths. */
export const WASM_PAYLOAD_HEADER_BYTES = 8 + 5 * 4;
const FLAG_LITTLE_ENDIAN = 1;
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** A static program as stored: its plan (plain data), its tables and the module's bytes. */
export interface StoredProgram {
  readonly plan: unknown;
  /** The constants' data, in the plan's constant order. */
  readonly constants: ProgramTable;
  /** The table the comparators' source reads (`ext`). */
  readonly ext: ProgramTable;
  readonly bytes: Uint8Array;
}

export type DecodedWasmPayload = { readonly signature: PayloadSignature } & (
  | {
      readonly kind: "static";
      readonly plan: unknown;
      readonly constants: readonly unknown[];
      readonly ext: readonly unknown[];
      readonly bytes: Uint8Array;
    }
  | { readonly kind: "dynamic" }
  | { readonly kind: "fallback"; readonly why: string }
);

function fail(detail: string): never {
  throw new Error(`wasm cache payload: ${detail}`);
}

export function encodeWasmStatic(module: Module, p: StoredProgram): Uint8Array {
  const blob = new BlobWriter();
  const { text, instructions } = signatureOf(module);
  const meta = {
    kind: "static",
    signature: text,
    instructions,
    plan: encodeData(p.plan, blob, "the plan"),
    constants: recipesOf(module, p.constants, blob),
    ext: recipesOf(module, p.ext, blob),
  };
  return assemble(meta, blob, p.bytes);
}

/** A marker payload: a module compiled per argument dims, or one that runs on js. */
export function encodeWasmMarker(module: Module, fallback?: string): Uint8Array {
  const { text, instructions } = signatureOf(module);
  const meta = fallback === undefined
    ? { kind: "dynamic", signature: text, instructions }
    : { kind: "fallback", signature: text, instructions, why: fallback };
  return assemble(meta, new BlobWriter(), new Uint8Array(0));
}

function assemble(meta: object, blob: BlobWriter, bytes: Uint8Array): Uint8Array {
  const enc = new TextEncoder();
  const metaBytes = enc.encode(JSON.stringify(meta));
  const total = WASM_PAYLOAD_HEADER_BYTES + metaBytes.length + blob.length + bytes.length;
  const out = new Uint8Array(total);
  const dv = new DataView(out.buffer);
  out.set(enc.encode(MAGIC), 0);
  dv.setUint32(8, WASM_CODEGEN_VERSION, true);
  dv.setUint32(12, LITTLE_ENDIAN ? FLAG_LITTLE_ENDIAN : 0, true);
  dv.setUint32(16, metaBytes.length, true);
  dv.setUint32(20, blob.length, true);
  dv.setUint32(24, bytes.length, true);
  let at = WASM_PAYLOAD_HEADER_BYTES;
  out.set(metaBytes, at);
  at += metaBytes.length;
  for (const part of blob.parts) {
    out.set(part, at);
    at += part.length;
  }
  out.set(bytes, at);
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads a payload for `module` (the one the cache hands back, equal up to names and metadata
 * to the one it was written for; checked against the payload's signature). Throws on anything
 * but the exact format of this codegen version, and on module bytes the engine does not
 * validate.
 */
export function decodeWasmPayload(payload: Uint8Array, module: Module): DecodedWasmPayload {
  if (payload.length < WASM_PAYLOAD_HEADER_BYTES) {
    fail(`${payload.length} bytes is shorter than the ${WASM_PAYLOAD_HEADER_BYTES}-byte header`);
  }
  const magic = String.fromCharCode(...payload.subarray(0, 8));
  if (magic !== MAGIC) fail(`bad magic ${JSON.stringify(magic)}, expected ${MAGIC}`);
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const version = dv.getUint32(8, true);
  if (version !== WASM_CODEGEN_VERSION) {
    fail(`written by wasm codegen version ${version}, this is version ${WASM_CODEGEN_VERSION}`);
  }
  const flags = dv.getUint32(12, true);
  if ((flags & ~FLAG_LITTLE_ENDIAN) !== 0) fail(`unknown flags ${flags}`);
  if (((flags & FLAG_LITTLE_ENDIAN) !== 0) !== LITTLE_ENDIAN) {
    fail("written on a host of the other byte order");
  }
  const metaLength = dv.getUint32(16, true);
  const blobLength = dv.getUint32(20, true);
  const bytesLength = dv.getUint32(24, true);
  const want = WASM_PAYLOAD_HEADER_BYTES + metaLength + blobLength + bytesLength;
  if (want !== payload.length) {
    fail(`the header's lengths add up to ${want} bytes, the payload has ${payload.length}`);
  }
  let at = WASM_PAYLOAD_HEADER_BYTES;
  let meta: unknown;
  try {
    const dec = new TextDecoder("utf-8", { fatal: true });
    meta = JSON.parse(dec.decode(payload.subarray(at, (at += metaLength))));
  } catch (e) {
    fail(`meta is not UTF-8 JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  const blob = payload.subarray(at, (at += blobLength));
  if (!isRecord(meta)) fail("meta is not an object");
  const text = meta["signature"];
  const instructions = meta["instructions"];
  if (typeof text !== "string" || !Number.isSafeInteger(instructions)) {
    fail("meta has no signature");
  }
  const signature: PayloadSignature = { text, instructions: instructions as number };
  try {
    checkModule(module, signature);
  } catch (e) {
    fail(e instanceof Error ? e.message : String(e));
  }
  const kind = meta["kind"];
  if (kind === "dynamic" || kind === "fallback") {
    if (blobLength !== 0 || bytesLength !== 0) fail(`a ${kind} marker has a body`);
    if (kind === "dynamic") return { kind, signature };
    const why = meta["why"];
    if (typeof why !== "string") fail("a fallback marker without its reason");
    return { kind, signature, why };
  }
  if (kind !== "static") fail(`unknown kind ${String(kind)}`);
  // A copy in its own buffer: the payload may be a view into the whole entry file.
  const bytes = new Uint8Array(payload.subarray(at, at + bytesLength));
  if (!WebAssembly.validate(bytes)) fail("the module's bytes do not validate");
  const constantRecipes = meta["constants"];
  const extRecipes = meta["ext"];
  if (!Array.isArray(constantRecipes) || !Array.isArray(extRecipes)) fail("meta has no tables");
  let list: Instruction[] | undefined;
  const instructionsOf = (): Instruction[] => (list ??= canonicalInstructions(module));
  const seen = new Set<object>();
  const table = (recipes: unknown[]) =>
    recipes.map((r: unknown, i) => {
      try {
        return rebuild(r, i, blob, instructionsOf, seen);
      } catch (e) {
        return fail(e instanceof Error ? e.message.replace(/^js cache payload: /, "") : String(e));
      }
    });
  let plan: unknown;
  try {
    plan = decodeData(meta["plan"], blob, "the plan");
  } catch (e) {
    fail(e instanceof Error ? e.message : String(e));
  }
  return {
    kind: "static",
    signature,
    plan,
    constants: table(constantRecipes),
    ext: table(extRecipes),
    bytes,
  };
}
