// safetensors: round trips of every dtype Kiln stores (edge values, zero-dim and empty tensors,
// metadata, files on disk), the byte layout the format specifies (little-endian length, JSON
// header padded to 8 bytes, data ordered by dtype size then name), reading a file written by
// PyTorch's side (scripts/fixtures/common.py), and malformed files, each rejected with a message
// naming the problem and the tensor.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  loadSafetensors,
  readSafetensors,
  saveSafetensors,
  saveSafetensorsFile,
  SafetensorsError,
  tensor,
  Tensor,
} from "../../tensor/index.ts";

const dir = mkdtempSync(join(tmpdir(), "kiln-safetensors-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file from a header (object or raw text) and data bytes; the length field may lie. */
function file(header: unknown, data: Uint8Array = new Uint8Array(0), length?: bigint): Uint8Array {
  const text = typeof header === "string" ? header : JSON.stringify(header);
  const head = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + head.byteLength + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, length ?? BigInt(head.byteLength), true);
  out.set(head, 8);
  out.set(data, 8 + head.byteLength);
  return out;
}

function headerOf(bytes: Uint8Array): { len: number; json: Record<string, unknown> } {
  const len = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const text = new TextDecoder().decode(bytes.subarray(8, 8 + len));
  return { len, json: JSON.parse(text) as Record<string, unknown> };
}

function same(a: Tensor, b: Tensor): void {
  expect(a.dtype).toBe(b.dtype);
  expect([...a.shape]).toEqual([...b.shape]);
  expect(Array.from(a.toBytes())).toEqual(Array.from(b.toBytes()));
}

const samples: Record<string, Tensor> = {
  f32: tensor([[1.5, -0, NaN], [Infinity, -Infinity, 3.4e38]]),
  f16: tensor([0.1, -2, 65504, -0, NaN], { dtype: "float16" }),
  bf16: tensor([[1e30, -1e-30], [7, 0.5]], { dtype: "bfloat16" }),
  i32: tensor([-2147483648, 0, 2147483647], { dtype: "int32" }),
  i64: tensor([-(2n ** 63n), 2n ** 53n + 1n, 42n]),
  u8: tensor([0, 255, 7], { dtype: "uint8" }),
  mask: tensor([[true, false], [false, true]]),
  scalar: tensor(2.5),
  empty: tensor([], { shape: [0, 3] }),
};

describe("round trips", () => {
  it("keeps every dtype, value (NaN, inf, -0, int64 beyond 2^53) and shape", () => {
    const back = loadSafetensors(saveSafetensors(samples));
    expect(Object.keys(back).sort()).toEqual(Object.keys(samples).sort());
    for (const [k, t] of Object.entries(samples)) same(back[k]!, t);
    expect(back.i64!.toArray({ bigint: true })).toEqual([-(2n ** 63n), 2n ** 53n + 1n, 42n]);
    expect(back.mask!.toArray()).toEqual([[true, false], [false, true]]);
  });

  it("writes the specified layout: LE length, padded JSON header, dtype-size order", () => {
    const bytes = saveSafetensors(
      {
        b: tensor([1, 2], { dtype: "uint8" }),
        a: tensor([1, 2], { dtype: "float16" }),
        c: tensor([5n]),
        d: tensor([1.5]),
      },
      { metadata: { format: "pt" } },
    );
    const { len, json } = headerOf(bytes);
    expect(len % 8).toBe(0);
    expect(json).toEqual({
      __metadata__: { format: "pt" },
      c: { dtype: "I64", shape: [1], data_offsets: [0, 8] },
      d: { dtype: "F32", shape: [1], data_offsets: [8, 12] },
      a: { dtype: "F16", shape: [2], data_offsets: [12, 16] },
      b: { dtype: "U8", shape: [2], data_offsets: [16, 18] },
    });
    expect(bytes.byteLength).toBe(8 + len + 18);
    // 1.5 as little-endian f32 right where its offsets say.
    const at = 8 + len + 8;
    expect(new DataView(bytes.buffer).getFloat32(at, true)).toBe(1.5);
    expect(readSafetensors(bytes).metadata).toEqual({ format: "pt" });
    expect(readSafetensors(saveSafetensors({})).metadata).toBeUndefined();
  });

  it("reads and writes files by path, and takes a Map", () => {
    const path = join(dir, "weights.safetensors");
    saveSafetensorsFile(path, new Map(Object.entries(samples)), { metadata: { note: "x" } });
    const back = readSafetensors(path);
    for (const [k, t] of Object.entries(samples)) same(back.tensors[k]!, t);
    expect(back.metadata).toEqual({ note: "x" });
  });

  it("reads a file written by the PyTorch fixture writer", () => {
    const path = join(import.meta.dirname, "..", "fixtures", "nn", "BatchNorm2d_eval.safetensors");
    const sd = loadSafetensors(path);
    expect(Object.fromEntries(Object.entries(sd).map(([k, t]) => [k, t.dtype]))).toEqual({
      weight: "float32",
      bias: "float32",
      running_mean: "float32",
      running_var: "float32",
      num_batches_tracked: "int64",
    });
    expect(sd.num_batches_tracked!.item()).toBe(7);
  });

  it("reads tensors at unaligned offsets and nonzero BOOL bytes as true", () => {
    const data = new Uint8Array([1, 0, 0, 0x80, 0x3f, 2]);
    const bytes = file(
      {
        m: { dtype: "BOOL", shape: [1], data_offsets: [0, 1] },
        x: { dtype: "F32", shape: [], data_offsets: [1, 5] },
        n: { dtype: "BOOL", shape: [1], data_offsets: [5, 6] },
      },
      data,
    );
    const t = loadSafetensors(bytes);
    expect(t.x!.item()).toBe(1);
    expect(t.m!.item()).toBe(1);
    expect(t.n!.item()).toBe(1);
    expect(Array.from(t.n!.data() as Uint8Array)).toEqual([1]);
  });
});

describe("malformed files are rejected naming the problem and the tensor", () => {
  const w = (extra: object = {}) => ({
    w: { dtype: "F32", shape: [2, 2], data_offsets: [0, 16], ...extra },
  });
  const data16 = new Uint8Array(16);
  const bad: [string, Uint8Array, RegExp][] = [
    ["shorter than the length field", new Uint8Array(5), /truncated: 5 bytes/],
    ["header length beyond the file", file(w(), data16, 4000n), /header length 4000 is beyond/],
    ["header length over the limit", file(w(), data16, 2n ** 40n), /exceeds the 100000000-byte/],
    ["header not JSON", file("{not json", data16), /the header is not valid JSON/],
    [
      "header not UTF-8",
      (() => {
        const f = file("{}  ");
        f[9] = 0xff;
        return f;
      })(),
      /the header is not valid UTF-8/,
    ],
    ["header not an object", file("[1, 2]"), /the header must be a JSON object/],
    ["unknown dtype", file(w({ dtype: "F99" }), data16), /tensor 'w': unknown dtype 'F99'/],
    [
      "unsupported dtype",
      file(w({ dtype: "F64", data_offsets: [0, 32] }), new Uint8Array(32)),
      /tensor 'w': dtype F64 is not supported by Kiln/,
    ],
    [
      "data truncated",
      file(w(), new Uint8Array(10)),
      /tensor 'w': data_offsets \[0, 16\] are out of bounds: the data section has 10 bytes/,
    ],
    [
      "size not shape x dtype",
      file(w({ data_offsets: [0, 12] }), new Uint8Array(12)),
      /tensor 'w': data_offsets \[0, 12\] hold 12 bytes, but F32\[2, 2\] needs 16/,
    ],
    [
      "overlapping tensors",
      file(
        {
          a: { dtype: "F32", shape: [2], data_offsets: [0, 8] },
          b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
        },
        new Uint8Array(12),
      ),
      /tensor 'b': data_offsets \[4, 12\] overlap tensor 'a' \[0, 8\]/,
    ],
    [
      "a hole between tensors",
      file(
        {
          a: { dtype: "F32", shape: [1], data_offsets: [0, 4] },
          b: { dtype: "F32", shape: [1], data_offsets: [8, 12] },
        },
        new Uint8Array(12),
      ),
      /tensor 'b': data_offsets \[8, 12\] leave bytes \[4, 8\) of the data section unused/,
    ],
    ["trailing bytes", file(w(), new Uint8Array(20)), /4 trailing bytes belong to no tensor/],
    ["missing field", file({ w: { dtype: "F32", data_offsets: [0, 0] } }), /'w': .*no 'shape'/],
    [
      "bad shape",
      file(w({ shape: [2, -2] }), data16),
      /tensor 'w': shape must be a list of integers >= 0/,
    ],
    [
      "offsets end before they begin",
      file(w({ data_offsets: [16, 0] }), data16),
      /tensor 'w': data_offsets \[16, 0\] end before they begin/,
    ],
    [
      "bad metadata",
      file({ __metadata__: { n: 1 }, ...w() }, data16),
      /__metadata__ must be an object of strings/,
    ],
    [
      "entry not an object",
      file({ w: [1, 2] }),
      /tensor 'w': the header entry must be an object/,
    ],
    [
      "header starting with a UTF-8 byte-order mark",
      file(`\uFEFF${JSON.stringify(w())}`, data16),
      /the header starts with a UTF-8 byte-order mark/,
    ],
  ];
  for (const [what, bytes, message] of bad) {
    it(what, () => {
      expect(() => loadSafetensors(bytes)).toThrow(SafetensorsError);
      expect(() => loadSafetensors(bytes)).toThrow(message);
    });
  }

  it("refuses what is not a regular file, and never reads it (/dev/zero never ends)", () => {
    expect(() => readSafetensors("/dev/zero")).toThrow(SafetensorsError);
    expect(() => loadSafetensors("/dev/zero")).toThrow(
      /safetensors '\/dev\/zero': is a device, not a regular file/,
    );
    expect(() => loadSafetensors(dir)).toThrow(/is a directory, not a regular file/);
  });

  it("bounds reads of a path by the file's size: a lying header length is an error", () => {
    const path = join(dir, "lying.safetensors");
    writeFileSync(path, file({}, new Uint8Array(0), 2n ** 20n));
    expect(() => loadSafetensors(path)).toThrow(
      /lying\.safetensors': header length 1048576 is beyond the end of the file \(2 bytes/,
    );
  });

  it("names the file when reading from a path", () => {
    const path = join(dir, "missing.safetensors");
    expect(() => loadSafetensors(path)).toThrow(/missing\.safetensors': cannot read the file/);
  });

  it("refuses to write what the format cannot hold", () => {
    expect(() => saveSafetensors({ x: [1] as unknown as Tensor })).toThrow(/'x' is not a Tensor/);
    expect(() => saveSafetensors({ __metadata__: tensor([1]) })).toThrow(/cannot name a tensor/);
    expect(() =>
      saveSafetensors({}, { metadata: { n: 1 } as unknown as Record<string, string> }),
    ).toThrow(/metadata 'n' must be a string/);
  });
});
