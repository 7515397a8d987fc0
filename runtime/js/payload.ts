// What the `js` backend stores in the on-disk program cache (runtime/cache.ts) and how it is
// read back: the generated source verbatim, the entry's signature, and a recipe for each entry
// of the table of values the source refers to (runtime/js/emitter.ts ExtTable: library kernels,
// the evaluator's scalar kernels, constant data, dot/convolution plans), so a load runs
// `new Function` and nothing of codegen, and needs the compiled module only for large
// constants. A constant of at most INLINE_CONSTANT_BYTES is stored in the payload; a larger one
// is named by its position in the module's canonical order (ir/print.ts), which two modules
// with one fingerprint share, and re-read from the module the cache hands back (equal to the
// compiled one up to names and metadata), so big data is never stored twice. Plans are plain
// data and are stored (not their scratch buffers). A module with bounded dynamic dims is
// compiled per actual argument dims at run time, so its payload is only a marker and a load
// re-specializes.
//
// Layout (integers little-endian u32): magic `KILNJSPG`, JS_CODEGEN_VERSION, flags (bit 0: the
// blob's typed arrays are little-endian), then the byte lengths of meta, blob and source, then
// meta (JSON: kind, signature, instruction count, entry shapes, recipes), blob (typed-array
// bytes) and source (UTF-8). The cache checksums the whole payload before decodePayload sees
// it; decodePayload still checks every field and throws on anything unexpected (another codegen
// version, lengths that do not add up, a recipe that does not fit), which the cache counts as
// `undecodable` and recompiles; checkModule throws if the module is not the one it was written
// for.

import { COMPARISON_DIRECTIONS, type ComparisonDirection } from "../../ir/attributes.ts";
import {
  binaryKernel,
  compareKernel,
  converter,
  erf,
  isBinaryName,
  isUnaryName,
  unaryKernel,
} from "../../ir/evaluate_elementwise.ts";
import { roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { OPCODES } from "../../ir/opcodes.ts";
import { canonicalComputationOrder, canonicalInstructionOrder } from "../../ir/print.ts";
import {
  arrayShape,
  ELEMENT_TYPES,
  type ElementType,
  isElementType,
  type Shape,
  shapeToString,
  tupleShape,
} from "../../ir/shape.ts";
import { conv, type ConvPlan } from "./kernels_conv.ts";
import { dotFloat, dotInt, type DotPlan } from "./kernels_dot.ts";
import { bitcastArray, clampF, clampI } from "./runtime_lib.ts";

/**
 * The version of the generated code's contract with this file: bump it whenever codegen
 * changes what a source means or what its table holds, so entries written by an older codegen
 * (same Kiln version, as in development) are rejected and recompiled instead of run.
 */
export const JS_CODEGEN_VERSION = 3;

const MAGIC = "KILNJSPG";
/** magic, version, flags, three lengths. */
export const PAYLOAD_HEADER_BYTES = 8 + 5 * 4;
const FLAG_LITTLE_ENDIAN = 1;
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Constants up to this many bytes are stored in the payload; larger ones are re-read. */
export const INLINE_CONSTANT_BYTES = 16 * 1024;

/** What a payload was written for: checkModule compares it with a module. */
export interface PayloadSignature {
  /** The entry's parameter and result shapes as text (layouts included). */
  readonly text: string;
  readonly instructions: number;
}

/** A static program, ready to instantiate: what its entry takes and returns, source, table. */
export interface StaticProgram {
  readonly params: readonly Shape[];
  readonly root: Shape;
  readonly source: string;
  readonly ext: readonly unknown[];
  /** The data arrays of constants among `ext` (results that alias them are copied). */
  readonly constants: ReadonlySet<object>;
}

/** What a payload decodes to. */
export type DecodedPayload = { readonly signature: PayloadSignature } & (
  | ({ readonly kind: "static" } & StaticProgram)
  | { readonly kind: "dynamic" }
);

// ---- Recipes -----------------------------------------------------------------------------

/** Plain data as JSON: tagged forms for what JSON lacks; typed arrays point into the blob. */
type Enc = number | string | boolean | null | Enc[] | { [tag: string]: unknown };

/** How to rebuild one table entry. */
export type Recipe =
  | { k: "lib"; name: LibName }
  | { k: "unary"; op: string; t: ElementType }
  | { k: "binary"; op: string; t: ElementType }
  | { k: "compare"; t: ElementType; dir: ComparisonDirection }
  | { k: "convert"; from: ElementType; to: ElementType }
  | { k: "constant"; at: number }
  | { k: "literal"; v: Enc }
  | { k: "size"; d: number }
  | { k: "data"; v: Enc };

// The runtime library the generated code calls by reference, by a stable name.
const LIB = {
  bitcastArray,
  clampF,
  clampI,
  conv,
  dotFloat,
  dotInt,
  erf,
  roundToBF16,
  roundToF16,
} as const;
type LibName = keyof typeof LIB;

function isLibName(s: string): s is LibName {
  return Object.prototype.hasOwnProperty.call(LIB, s);
}

// Plan members that are per-run scratch (packing buffers), not part of the plan.
const SCRATCH: ReadonlySet<string> = new Set(
  ["bp", "ap", "wp"] as const satisfies readonly (keyof DotPlan | keyof ConvPlan)[],
);

let functionRecipes: Map<unknown, Recipe> | undefined;

/** Every function the table can hold by identity: the library, then the evaluator's kernels. */
function functionCatalogue(): Map<unknown, Recipe> {
  if (functionRecipes) return functionRecipes;
  const m = new Map<unknown, Recipe>();
  for (const name of Object.keys(LIB) as LibName[]) m.set(LIB[name], { k: "lib", name });
  for (const op of OPCODES) {
    for (const t of ELEMENT_TYPES) {
      // A kernel undefined for a type throws; those pairs are simply not in the table.
      if (isUnaryName(op)) {
        try {
          const f = unaryKernel(op, t);
          if (!m.has(f)) m.set(f, { k: "unary", op, t });
        } catch {
          // not defined for t
        }
      }
      if (isBinaryName(op)) {
        try {
          const f = binaryKernel(op, t);
          if (!m.has(f)) m.set(f, { k: "binary", op, t });
        } catch {
          // not defined for t
        }
      }
    }
  }
  functionRecipes = m;
  return m;
}

function isComparisonDirection(s: string): s is ComparisonDirection {
  return (COMPARISON_DIRECTIONS as readonly string[]).includes(s);
}

/** The recipe of a closure the codegen keyed by a descriptive string (it has no identity). */
function recipeFromKey(key: string): Recipe | undefined {
  const cmp = /^cmp:(\w+):(\w+):TOTALORDER$/.exec(key);
  if (cmp && isElementType(cmp[1]!) && isComparisonDirection(cmp[2]!)) {
    return { k: "compare", t: cmp[1], dir: cmp[2] };
  }
  const cv = /^conv:(\w+):(\w+)$/.exec(key);
  if (cv && isElementType(cv[1]!) && isElementType(cv[2]!)) {
    return { k: "convert", from: cv[1], to: cv[2] };
  }
  const size = /^dimsize:(\d+)$/.exec(key);
  if (size) return { k: "size", d: Number(size[1]) };
  return undefined;
}

/** The module's instructions in canonical order (the positions fingerprints name). */
export function canonicalInstructions(module: Module): Instruction[] {
  const out: Instruction[] = [];
  for (const c of canonicalComputationOrder(module)) out.push(...canonicalInstructionOrder(c));
  return out;
}

export function signatureOf(module: Module): PayloadSignature {
  const params = module.entry.parameters.map((p) => shapeToString(p.shape)).join(", ");
  return {
    text: `(${params}) -> ${shapeToString(module.entry.root.shape)}`,
    instructions: module.computations.reduce((n, c) => n + c.instructions.length, 0),
  };
}

/** Throws unless `module` is one the payload of `signature` was written for. */
export function checkModule(module: Module, signature: PayloadSignature): void {
  const own = signatureOf(module);
  if (own.text !== signature.text) {
    fail(`written for ${signature.text}, module '${module.name}' is ${own.text}`);
  }
  if (own.instructions !== signature.instructions) {
    fail(
      `written for ${signature.instructions} instructions, module '${module.name}' has ` +
        `${own.instructions}`,
    );
  }
}

// Entry shapes as JSON (static programs only: no dynamic dims, layouts do not matter to a run).
type ShapeJson = { t: ElementType; d: number[] } | { e: ShapeJson[] };

function shapeJson(s: Shape): ShapeJson {
  return s.kind === "tuple" ? { e: s.elements.map(shapeJson) } : { t: s.type, d: [...s.dims] };
}

function shapeFromJson(j: unknown, what: string): Shape {
  if (!isRecord(j)) return fail(`${what} is not a shape`);
  if (Array.isArray(j["e"])) {
    return tupleShape(j["e"].map((x: unknown, i) => shapeFromJson(x, `${what}[${i}]`)));
  }
  const d = j["d"];
  if (!Array.isArray(d) || !d.every((x) => Number.isSafeInteger(x) && (x as number) >= 0)) {
    return fail(`${what} has bad dims`);
  }
  return arrayShape(elementType(j["t"], `${what}'s type`), d as number[]);
}

// ---- Plain data ----------------------------------------------------------------------------

type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

const TYPED = {
  i8: Int8Array,
  u8: Uint8Array,
  u8c: Uint8ClampedArray,
  i16: Int16Array,
  u16: Uint16Array,
  i32: Int32Array,
  u32: Uint32Array,
  f32: Float32Array,
  f64: Float64Array,
  i64: BigInt64Array,
  u64: BigUint64Array,
} as const;
type TypedName = keyof typeof TYPED;

function typedName(v: object): TypedName | undefined {
  for (const name of Object.keys(TYPED) as TypedName[]) {
    if (Object.getPrototypeOf(v) === TYPED[name].prototype) return name;
  }
  return undefined;
}

export class BlobWriter {
  readonly parts: Uint8Array[] = [];
  length = 0;

  add(a: TypedArray): number {
    const at = this.length;
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    this.parts.push(bytes);
    this.length += bytes.length;
    return at;
  }
}

export function encodeData(v: unknown, blob: BlobWriter, path: string): Enc {
  switch (typeof v) {
    case "number":
      if (Number.isFinite(v) && !Object.is(v, -0)) return v;
      return { $num: Object.is(v, -0) ? "-0" : String(v) };
    case "string":
    case "boolean":
      return v;
    case "undefined":
      return { $undef: 1 };
    case "bigint":
      return { $big: v.toString() };
    case "object": {
      if (v === null) return null;
      if (Array.isArray(v)) return v.map((x, i) => encodeData(x, blob, `${path}[${i}]`));
      const ta = typedName(v);
      if (ta !== undefined) {
        const a = v as TypedArray;
        return { $ta: ta, at: blob.add(a), n: a.length };
      }
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto === Object.prototype || proto === null) {
        const out: Record<string, Enc> = {};
        for (const [k, x] of Object.entries(v)) {
          out[k] = SCRATCH.has(k) ? { $undef: 1 } : encodeData(x, blob, `${path}.${k}`);
        }
        return { $obj: out };
      }
      throw new Error(`${path} is a ${v.constructor.name}, not plain data`);
    }
    case "function":
    case "symbol":
      throw new Error(`${path} is a ${typeof v}, not plain data`);
    default:
      throw new Error(`${path} has an unsupported type ${typeof v}`);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function decodeData(e: unknown, blob: Uint8Array, path: string): unknown {
  if (e === null || typeof e === "string" || typeof e === "boolean") return e;
  if (typeof e === "number") return e;
  if (Array.isArray(e)) return e.map((x, i) => decodeData(x, blob, `${path}[${i}]`));
  if (!isRecord(e)) throw new Error(`${path}: unexpected ${typeof e}`);
  const keys = Object.keys(e);
  const tag = keys[0];
  if ("$undef" in e && keys.length === 1) return undefined;
  if ("$num" in e && keys.length === 1) {
    const s = e["$num"];
    if (s === "NaN") return NaN;
    if (s === "Infinity") return Infinity;
    if (s === "-Infinity") return -Infinity;
    if (s === "-0") return -0;
    throw new Error(`${path}: bad number ${String(s)}`);
  }
  if ("$big" in e && keys.length === 1) {
    const s = e["$big"];
    if (typeof s !== "string" || !/^-?\d+$/.test(s)) throw new Error(`${path}: bad bigint`);
    return BigInt(s);
  }
  if ("$ta" in e && keys.length === 3) {
    const name = e["$ta"];
    const at = e["at"];
    const n = e["n"];
    if (typeof name !== "string" || !Object.prototype.hasOwnProperty.call(TYPED, name)) {
      throw new Error(`${path}: unknown typed array ${String(name)}`);
    }
    const Ctor = TYPED[name as TypedName];
    const length = Number.isSafeInteger(n) && (n as number) >= 0 ? (n as number) : -1;
    const start = Number.isSafeInteger(at) && (at as number) >= 0 ? (at as number) : -1;
    const bytes = length * Ctor.BYTES_PER_ELEMENT;
    if (length < 0 || start < 0 || start + bytes > blob.length) {
      throw new Error(`${path}: typed array at ${String(at)} (${String(n)}) is outside the blob`);
    }
    // A copy in its own (aligned) buffer; `new Uint8Array(view)` copies even when the view is
    // a Buffer, whose slice() would share the file's memory.
    const copy = new Uint8Array(blob.subarray(start, start + bytes));
    return new Ctor(copy.buffer, 0, length);
  }
  if ("$obj" in e && keys.length === 1) {
    const o = e["$obj"];
    if (!isRecord(o)) throw new Error(`${path}: bad object`);
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o)) {
      // JSON.parse makes "__proto__" an own key; assigning it would set the prototype.
      if (k === "__proto__") throw new Error(`${path}: a member named __proto__`);
      out[k] = decodeData(x, blob, `${path}.${k}`);
    }
    return out;
  }
  throw new Error(`${path}: unknown tag ${String(tag)}`);
}

// ---- Encoding ------------------------------------------------------------------------------

/** A static program's table with the keys codegen listed its entries under (ExtTable.keys). */
export interface ProgramTable {
  readonly values: readonly unknown[];
  readonly keys: readonly unknown[];
}

/** The recipes of a compiled program's table; throws naming an entry it cannot describe. */
export function recipesOf(
  module: Module,
  table: ProgramTable,
  blob: BlobWriter,
): Recipe[] {
  const fns = functionCatalogue();
  let constantsAt: Map<unknown, number> | undefined;
  const constantPosition = (data: unknown): number | undefined => {
    if (!constantsAt) {
      constantsAt = new Map();
      for (const [pos, i] of canonicalInstructions(module).entries()) {
        const lit = i.opcode === "constant" ? i.attrs.literal : undefined;
        if (lit && !constantsAt.has(lit.data)) constantsAt.set(lit.data, pos);
      }
    }
    return constantsAt.get(data);
  };
  return table.values.map((value, i): Recipe => {
    const key = table.keys[i];
    if (typeof key === "string" && key !== value) {
      const r = recipeFromKey(key);
      if (r) return r;
      throw new Error(`table entry e${i} has a key '${key}' this payload format does not know`);
    }
    const f = fns.get(value);
    if (f) return f;
    if (typeof value === "function") {
      throw new Error(`table entry e${i} is a function this payload format does not know`);
    }
    const at = constantPosition(value);
    if (at !== undefined) {
      const small = (value as { byteLength: number }).byteLength <= INLINE_CONSTANT_BYTES;
      if (!small) return { k: "constant", at };
      return { k: "literal", v: encodeData(value, blob, `table entry e${i}`) };
    }
    return { k: "data", v: encodeData(value, blob, `table entry e${i}`) };
  });
}

/** The payload of a compiled static program; throws if its table holds something unknown. */
export function encodeStaticPayload(
  module: Module,
  source: string,
  table: ProgramTable,
): Uint8Array {
  const blob = new BlobWriter();
  const ext = recipesOf(module, table, blob);
  const { text, instructions } = signatureOf(module);
  const meta = {
    kind: "static",
    signature: text,
    instructions,
    params: module.entry.parameters.map((p) => shapeJson(p.shape)),
    root: shapeJson(module.entry.root.shape),
    ext,
  };
  return assemble(meta, blob, source);
}

/** The payload of a module with dynamic dims: a marker, re-specialized on load. */
export function encodeDynamicPayload(module: Module): Uint8Array {
  const { text, instructions } = signatureOf(module);
  return assemble({ kind: "dynamic", signature: text, instructions }, new BlobWriter(), "");
}

function assemble(meta: object, blob: BlobWriter, source: string): Uint8Array {
  const enc = new TextEncoder();
  const metaBytes = enc.encode(JSON.stringify(meta));
  const sourceBytes = enc.encode(source);
  const total = PAYLOAD_HEADER_BYTES + metaBytes.length + blob.length + sourceBytes.length;
  const out = new Uint8Array(total);
  const dv = new DataView(out.buffer);
  out.set(enc.encode(MAGIC), 0);
  dv.setUint32(8, JS_CODEGEN_VERSION, true);
  dv.setUint32(12, LITTLE_ENDIAN ? FLAG_LITTLE_ENDIAN : 0, true);
  dv.setUint32(16, metaBytes.length, true);
  dv.setUint32(20, blob.length, true);
  dv.setUint32(24, sourceBytes.length, true);
  let at = PAYLOAD_HEADER_BYTES;
  out.set(metaBytes, at);
  at += metaBytes.length;
  for (const p of blob.parts) {
    out.set(p, at);
    at += p.length;
  }
  out.set(sourceBytes, at);
  return out;
}

// ---- Decoding ------------------------------------------------------------------------------

function fail(detail: string): never {
  throw new Error(`js cache payload: ${detail}`);
}

function elementType(v: unknown, what: string): ElementType {
  if (typeof v === "string" && isElementType(v)) return v;
  return fail(`${what} is not an element type: ${String(v)}`);
}

function str(v: unknown, what: string): string {
  if (typeof v === "string") return v;
  return fail(`${what} is not a string`);
}

function decodeRecipeData(v: unknown, blob: Uint8Array, what: string): unknown {
  try {
    return decodeData(v, blob, what);
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e));
  }
}

/** One recipe, checked, rebuilt into the value the source expects. */
export function rebuild(
  r: unknown,
  i: number,
  blob: Uint8Array,
  instructions: () => Instruction[],
  constants: Set<object>,
): unknown {
  if (!isRecord(r)) return fail(`table entry e${i} is not a recipe`);
  const what = `table entry e${i}`;
  switch (r["k"]) {
    case "lib": {
      const name = str(r["name"], `${what}'s name`);
      if (!isLibName(name)) return fail(`${what} names no library function: ${name}`);
      return LIB[name];
    }
    case "unary": {
      const op = str(r["op"], `${what}'s op`);
      if (!isUnaryName(op)) return fail(`${what}: ${op} is not a unary opcode`);
      return unaryKernel(op, elementType(r["t"], `${what}'s type`));
    }
    case "binary": {
      const op = str(r["op"], `${what}'s op`);
      if (!isBinaryName(op)) return fail(`${what}: ${op} is not a binary opcode`);
      return binaryKernel(op, elementType(r["t"], `${what}'s type`));
    }
    case "compare": {
      const dir = str(r["dir"], `${what}'s direction`);
      if (!isComparisonDirection(dir)) return fail(`${what}: bad direction ${dir}`);
      return compareKernel(elementType(r["t"], `${what}'s type`), dir, "TOTALORDER");
    }
    case "convert":
      return converter(elementType(r["from"], what), elementType(r["to"], what));
    case "constant": {
      const at = r["at"];
      const list = instructions();
      if (typeof at !== "number" || !Number.isInteger(at) || at < 0 || at >= list.length) {
        return fail(`${what}: constant position ${String(at)} is not in the module`);
      }
      const instr = list[at]!;
      const lit = instr.opcode === "constant" ? instr.attrs.literal : undefined;
      if (!lit) return fail(`${what}: position ${at} is a ${instr.opcode}, not a constant`);
      constants.add(lit.data);
      return lit.data;
    }
    case "literal": {
      const data = decodeRecipeData(r["v"], blob, what);
      if (!ArrayBuffer.isView(data)) return fail(`${what}: a literal that is not a typed array`);
      constants.add(data);
      return data;
    }
    case "size": {
      const d = r["d"];
      if (typeof d !== "number" || !Number.isInteger(d) || d < 0 || d > 0x7fffffff) {
        return fail(`${what}: bad dimension size ${String(d)}`);
      }
      const data = Int32Array.of(d);
      constants.add(data);
      return data;
    }
    case "data":
      return decodeRecipeData(r["v"], blob, what);
    default:
      return fail(`${what} has an unknown kind ${String(r["k"])}`);
  }
}

/**
 * Reads a payload. `module` gives the module the cache holds for it (equal up to names and
 * metadata to the one it was written for); it is called, and checked with checkModule, only if
 * a recipe needs a large constant. Throws on anything but the exact format of this codegen
 * version.
 */
export function decodePayload(payload: Uint8Array, module: () => Module): DecodedPayload {
  if (payload.length < PAYLOAD_HEADER_BYTES) {
    fail(`${payload.length} bytes is shorter than the ${PAYLOAD_HEADER_BYTES}-byte header`);
  }
  const dec = new TextDecoder("utf-8", { fatal: true });
  const magic = String.fromCharCode(...payload.subarray(0, 8));
  if (magic !== MAGIC) fail(`bad magic ${JSON.stringify(magic)}, expected ${MAGIC}`);
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const version = dv.getUint32(8, true);
  if (version !== JS_CODEGEN_VERSION) {
    fail(`written by js codegen version ${version}, this is version ${JS_CODEGEN_VERSION}`);
  }
  const flags = dv.getUint32(12, true);
  if ((flags & ~FLAG_LITTLE_ENDIAN) !== 0) fail(`unknown flags ${flags}`);
  if (((flags & FLAG_LITTLE_ENDIAN) !== 0) !== LITTLE_ENDIAN) {
    fail("written on a host of the other byte order");
  }
  const metaLength = dv.getUint32(16, true);
  const blobLength = dv.getUint32(20, true);
  const sourceLength = dv.getUint32(24, true);
  const want = PAYLOAD_HEADER_BYTES + metaLength + blobLength + sourceLength;
  if (want !== payload.length) {
    fail(`the header's lengths add up to ${want} bytes, the payload has ${payload.length}`);
  }
  let at = PAYLOAD_HEADER_BYTES;
  let meta: unknown;
  try {
    meta = JSON.parse(dec.decode(payload.subarray(at, (at += metaLength))));
  } catch (e) {
    fail(`meta is not UTF-8 JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  const blob = payload.subarray(at, (at += blobLength));
  let source: string;
  try {
    source = dec.decode(payload.subarray(at, (at += sourceLength)));
  } catch {
    fail("the source is not UTF-8");
  }
  if (!isRecord(meta)) fail("meta is not an object");
  const text = meta["signature"];
  const instructions = meta["instructions"];
  if (typeof text !== "string" || !Number.isSafeInteger(instructions)) {
    fail("meta has no signature");
  }
  const signature: PayloadSignature = { text, instructions: instructions as number };
  if (meta["kind"] === "dynamic") {
    if (blobLength !== 0 || sourceLength !== 0) fail("a dynamic module's payload has a body");
    return { kind: "dynamic", signature };
  }
  if (meta["kind"] !== "static") fail(`unknown kind ${String(meta["kind"])}`);
  const recipes = meta["ext"];
  const params = meta["params"];
  if (!Array.isArray(recipes) || !Array.isArray(params)) fail("meta has no table or parameters");
  if (sourceLength === 0) fail("a static program's payload has no source");
  let list: Instruction[] | undefined;
  const instructionsOf = (): Instruction[] => {
    if (!list) {
      const m = module();
      checkModule(m, signature);
      list = canonicalInstructions(m);
    }
    return list;
  };
  const constants = new Set<object>();
  const ext = recipes.map((r: unknown, i) => rebuild(r, i, blob, instructionsOf, constants));
  return {
    kind: "static",
    signature,
    params: params.map((p: unknown, i) => shapeFromJson(p, `parameter ${i}`)),
    root: shapeFromJson(meta["root"], "the result"),
    source,
    ext,
    constants,
  };
}
