// The safetensors format (Hugging Face's weights files), read and written: an 8-byte
// little-endian header length N, N bytes of JSON header — per tensor `dtype`, `shape` and
// `data_offsets` [begin, end) into the data that follows, plus an optional `__metadata__`
// object of strings — then the raw little-endian data. Reading checks what the reference
// implementation checks: header length within the file (and at most 100 MB), UTF-8 JSON object
// with no byte-order mark, each entry well-formed with a known dtype, each byte range matching
// shape x dtype size, and the ranges tiling the data exactly (no overlaps, holes or trailing
// bytes). A path is read only if it names a regular file, and never past the size it had when
// opened (a device such as /dev/zero would be read forever). Every failure is a
// SafetensorsError naming the file and the tensor. Kiln reads and writes F32 F16 BF16 I32 I64
// U8 BOOL; the other safetensors dtypes are refused by name. Writing orders tensors by dtype
// size (largest first, so data stays aligned) then name, and pads the header with spaces to a
// multiple of 8, as the reference writer does.

import { fromBytes } from "./creation.ts";
import { type DType, itemSize } from "./dtype.ts";
import { Tensor } from "./tensor.ts";
import { readRegularFile, writeFileBytes } from "./safetensors_fs.ts";

/** safetensors' dtype names for Kiln's dtypes. */
const CODES = {
  float32: "F32",
  float16: "F16",
  bfloat16: "BF16",
  int32: "I32",
  int64: "I64",
  uint8: "U8",
  bool: "BOOL",
} as const satisfies { [K in DType]: string };

const FROM_CODE = new Map<string, DType>(
  Object.entries(CODES).map(([d, c]) => [c, d as DType] as const),
);

/** safetensors dtypes Kiln has no dtype for (refused by name rather than as unknown). */
const UNSUPPORTED = new Set([
  "F64",
  "I8",
  "I16",
  "U16",
  "U32",
  "U64",
  "F8_E4M3",
  "F8_E5M2",
  "F8_E8M0",
  "F6_E2M3",
  "F6_E3M2",
  "F4",
  "C64",
]);

/** The reference implementation's limit on the header size. */
const MAX_HEADER = 100_000_000;

/** The largest file one Uint8Array can hold (Node's buffer limit). */
export const MAX_FILE = 2 ** 32;

export class SafetensorsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SafetensorsError";
  }
}

/** A file's tensors in header order, and its `__metadata__` (undefined when absent). */
export interface SafetensorsContents {
  tensors: Record<string, Tensor>;
  metadata: Record<string, string> | undefined;
}

interface Entry {
  name: string;
  dtype: DType;
  shape: number[];
  begin: number;
  end: number;
}

function isNonNegativeInt(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}


function source(bytesOrPath: Uint8Array | string): { bytes: Uint8Array; where: string } {
  if (typeof bytesOrPath === "string") {
    return { bytes: readRegularFile(bytesOrPath), where: `safetensors '${bytesOrPath}'` };
  }
  if (!(bytesOrPath instanceof Uint8Array)) {
    throw new SafetensorsError(`safetensors: expected a Uint8Array or a file path`);
  }
  return { bytes: bytesOrPath, where: "safetensors" };
}

/** Parses one header entry, naming the tensor in every complaint. */
function parseEntry(where: string, name: string, raw: unknown): Entry {
  const bad = (detail: string): never => {
    throw new SafetensorsError(`${where}: tensor '${name}': ${detail}`);
  };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return bad(`the header entry must be an object with dtype, shape and data_offsets`);
  }
  const r = raw as Record<string, unknown>;
  for (const k of ["dtype", "shape", "data_offsets"]) {
    if (!(k in r)) bad(`the header entry has no '${k}'`);
  }
  const code = r.dtype;
  if (typeof code !== "string") return bad(`dtype must be a string, got ${JSON.stringify(code)}`);
  const dtype = FROM_CODE.get(code);
  if (dtype === undefined) {
    const supported = [...FROM_CODE.keys()].join(", ");
    return bad(
      UNSUPPORTED.has(code)
        ? `dtype ${code} is not supported by Kiln (supported: ${supported})`
        : `unknown dtype '${code}' (Kiln reads ${supported})`,
    );
  }
  const shape = r.shape;
  if (!Array.isArray(shape) || !shape.every(isNonNegativeInt)) {
    return bad(`shape must be a list of integers >= 0, got ${JSON.stringify(shape)}`);
  }
  const offsets = r.data_offsets;
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isNonNegativeInt)) {
    return bad(`data_offsets must be [begin, end] integers >= 0, got ${JSON.stringify(offsets)}`);
  }
  const [begin, end] = offsets as [number, number];
  if (end < begin) bad(`data_offsets [${begin}, ${end}] end before they begin`);
  return { name, dtype, shape: shape as number[], begin, end };
}

/**
 * Reads a safetensors file (its bytes, or a path) into tensors by name and its metadata.
 * Tensors own their data (copied out of the file's bytes).
 */
export function readSafetensors(bytesOrPath: Uint8Array | string): SafetensorsContents {
  const { bytes, where } = source(bytesOrPath);
  if (bytes.byteLength < 8) {
    throw new SafetensorsError(
      `${where}: truncated: ${bytes.byteLength} bytes, but the file starts with an 8-byte ` +
        `header length`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = view.getBigUint64(0, true);
  const available = bytes.byteLength - 8;
  if (headerLen > BigInt(MAX_HEADER)) {
    throw new SafetensorsError(
      `${where}: header length ${headerLen} exceeds the ${MAX_HEADER}-byte limit`,
    );
  }
  const n = Number(headerLen);
  if (n > available) {
    throw new SafetensorsError(
      `${where}: header length ${n} is beyond the end of the file (${available} bytes follow ` +
        `the length field); the file is truncated or not safetensors`,
    );
  }
  const head = bytes.subarray(8, 8 + n);
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) {
    // The reference parser (serde_json) takes no byte-order mark: a BOM is not JSON.
    throw new SafetensorsError(
      `${where}: the header starts with a UTF-8 byte-order mark; a safetensors header is ` +
        `JSON with no BOM`,
    );
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(head);
  } catch (e) {
    throw new SafetensorsError(`${where}: the header is not valid UTF-8`, { cause: e });
  }
  let header: unknown;
  try {
    header = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError(
      `${where}: the header is not valid JSON: ${(e as Error).message}`,
      { cause: e },
    );
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw new SafetensorsError(`${where}: the header must be a JSON object`);
  }
  let metadata: Record<string, string> | undefined;
  const entries: Entry[] = [];
  for (const [name, raw] of Object.entries(header)) {
    if (name === "__metadata__") {
      if (
        typeof raw !== "object" ||
        raw === null ||
        Array.isArray(raw) ||
        !Object.values(raw).every((v) => typeof v === "string")
      ) {
        throw new SafetensorsError(
          `${where}: __metadata__ must be an object of strings, got ${JSON.stringify(raw)}`,
        );
      }
      metadata = { ...(raw as Record<string, string>) };
      continue;
    }
    entries.push(parseEntry(where, name, raw));
  }

  const dataLen = available - n;
  for (const e of entries) {
    const bad = (detail: string) =>
      new SafetensorsError(`${where}: tensor '${e.name}': ${detail}`);
    if (e.end > dataLen) {
      throw bad(
        `data_offsets [${e.begin}, ${e.end}] are out of bounds: the data section has ` +
          `${dataLen} bytes (the file may be truncated)`,
      );
    }
    const numel = e.shape.reduce((a, b) => a * b, 1);
    const need = numel * itemSize(e.dtype);
    if (!Number.isSafeInteger(need)) {
      throw bad(`shape [${e.shape.join(", ")}] is too large`);
    }
    if (e.end - e.begin !== need) {
      throw bad(
        `data_offsets [${e.begin}, ${e.end}] hold ${e.end - e.begin} bytes, but ` +
          `${CODES[e.dtype]}[${e.shape.join(", ")}] needs ${need}`,
      );
    }
  }
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0;
  let prev: Entry | undefined;
  for (const e of sorted) {
    if (e.begin < covered) {
      throw new SafetensorsError(
        `${where}: tensor '${e.name}': data_offsets [${e.begin}, ${e.end}] overlap tensor ` +
          `'${prev!.name}' [${prev!.begin}, ${prev!.end}]`,
      );
    }
    if (e.begin > covered) {
      throw new SafetensorsError(
        `${where}: tensor '${e.name}': data_offsets [${e.begin}, ${e.end}] leave bytes ` +
          `[${covered}, ${e.begin}) of the data section unused (safetensors data has no holes)`,
      );
    }
    covered = e.end;
    prev = e;
  }
  if (covered !== dataLen) {
    throw new SafetensorsError(
      `${where}: the data section has ${dataLen} bytes but the tensors cover ${covered}; ` +
        `${dataLen - covered} trailing bytes belong to no tensor`,
    );
  }

  const data = bytes.subarray(8 + n);
  const tensors = Object.fromEntries(
    entries.map((e) => {
      let chunk = data.subarray(e.begin, e.end);
      if (e.dtype === "bool" && chunk.some((v) => v > 1)) {
        chunk = chunk.map((v) => (v !== 0 ? 1 : 0)); // any nonzero byte is true
      }
      return [e.name, fromBytes(chunk, e.dtype, e.shape)] as const;
    }),
  );
  return { tensors, metadata };
}

/** The tensors of a safetensors file (bytes or a path), by name: `model.loadStateDict(it)`. */
export function loadSafetensors(bytesOrPath: Uint8Array | string): Record<string, Tensor> {
  return readSafetensors(bytesOrPath).tensors;
}

export interface SaveOptions {
  /** The `__metadata__` strings (e.g. `{ format: "pt" }`). */
  metadata?: Readonly<Record<string, string>>;
}

/** Tensors by name: a record (as stateDict() gives) or a Map. */
export type TensorRecord = Readonly<Record<string, Tensor>> | ReadonlyMap<string, Tensor>;

/** The bytes of a safetensors file holding `tensors` (a record or Map of name → Tensor). */
export function saveSafetensors(tensors: TensorRecord, options: SaveOptions = {}): Uint8Array {
  const list = tensors instanceof Map ? [...tensors] : Object.entries(tensors);
  for (const [name, t] of list) {
    if (name === "__metadata__") {
      throw new SafetensorsError(`saveSafetensors: '__metadata__' cannot name a tensor`);
    }
    if (!(t instanceof Tensor)) {
      throw new SafetensorsError(`saveSafetensors: '${name}' is not a Tensor`);
    }
  }
  const meta = options.metadata;
  if (meta !== undefined) {
    for (const [k, v] of Object.entries(meta)) {
      if (typeof v !== "string") {
        throw new SafetensorsError(`saveSafetensors: metadata '${k}' must be a string`);
      }
    }
  }
  const ordered = list
    .map(([name, t]) => ({ name, t: t as Tensor }))
    .sort((a, b) => {
      const bySize = itemSize(b.t.dtype) - itemSize(a.t.dtype);
      return bySize !== 0 ? bySize : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
  const header: Record<string, unknown> = {};
  if (meta !== undefined) header.__metadata__ = { ...meta };
  const blobs: Uint8Array[] = [];
  let offset = 0;
  for (const { name, t } of ordered) {
    const blob = t.toBytes();
    const entry = {
      dtype: CODES[t.dtype],
      shape: [...t.shape],
      data_offsets: [offset, offset + blob.byteLength],
    };
    // defineProperty: a tensor may be named "__proto__".
    Object.defineProperty(header, name, {
      value: entry,
      enumerable: true,
      configurable: true,
      writable: true,
    });
    blobs.push(blob);
    offset += blob.byteLength;
  }
  let head = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(head.byteLength / 8) * 8;
  if (padded !== head.byteLength) {
    const h = new Uint8Array(padded).fill(0x20);
    h.set(head);
    head = h;
  }
  const out = new Uint8Array(8 + head.byteLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.byteLength), true);
  out.set(head, 8);
  let at = 8 + head.byteLength;
  for (const b of blobs) {
    out.set(b, at);
    at += b.byteLength;
  }
  return out;
}

/** Writes `tensors` to a safetensors file at `path`. */
export function saveSafetensorsFile(
  path: string,
  tensors: TensorRecord,
  options: SaveOptions = {},
): void {
  writeFileBytes(path, saveSafetensors(tensors, options));
}
