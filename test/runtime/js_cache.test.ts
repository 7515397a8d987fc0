// The `js` backend on the disk program cache (runtime/js/payload.ts, serialize/deserialize in
// runtime/js/backend.ts): every corpus module round-trips through a fresh ProgramCache on a
// temp dir with no codegen, bit-identical to a fresh compile and to the evaluator, with the
// passes' module stored and without; a module equal only up to names and instruction order
// loads the same program (large constants re-read by canonical position, small ones from the
// payload); every kind of table entry codegen makes survives; a dynamic module stores a marker
// and re-specializes; tampered payloads (bad header, lengths, meta, recipes, source) and an
// older codegen version are rejected (`undecodable`) and recompiled, never run.

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { arrayShape } from "../../ir/shape.ts";
import { ProgramCache } from "../../runtime/cache.ts";
import { decodeEntry, encodeEntry, keyText, SECRET_NAME } from "../../runtime/cache_disk.ts";
import { compileKeyOptions, type CompileOptions, compileModule } from "../../runtime/compile.ts";
import { interpreterBackend } from "../../runtime/interpreter.ts";
import { jsBackend, type JsExecutable } from "../../runtime/js/backend.ts";
import {
  INLINE_CONSTANT_BYTES,
  JS_CODEGEN_VERSION,
  PAYLOAD_HEADER_BYTES,
} from "../../runtime/js/payload.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { identical } from "./fixtures/op_cases.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kiln-js-cache-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  vi.restoreAllMocks();
});

function freshCache(): ProgramCache {
  return new ProgramCache({ disk: dir, onWarning: () => {} });
}


/** Every name in the module changed (instructions and computations), nothing else. */
function renamed(m: Module): Module {
  for (const c of m.computations) {
    for (const i of c.instructions) i.name = `renamed_${i.name}`;
    c.name = `renamed_${c.name}`;
  }
  return m;
}

// ---- The payload's documented layout, for reading and crafting payloads ---------------------

function u32(p: Uint8Array, at: number): number {
  return new DataView(p.buffer, p.byteOffset, p.byteLength).getUint32(at, true);
}

interface Parts {
  version: number;
  flags: number;
  meta: Record<string, unknown>;
  blob: Uint8Array;
  source: Uint8Array;
}

function split(p: Uint8Array): Parts {
  const metaLength = u32(p, 16);
  const blobLength = u32(p, 20);
  let at = PAYLOAD_HEADER_BYTES;
  const meta = JSON.parse(new TextDecoder().decode(p.subarray(at, (at += metaLength))));
  const blob = p.slice(at, (at += blobLength));
  return { version: u32(p, 8), flags: u32(p, 12), meta, blob, source: p.slice(at) };
}

/** A payload from parts, with consistent lengths (as a writer of another version would). */
function assemble(parts: Parts): Uint8Array {
  const meta = new TextEncoder().encode(JSON.stringify(parts.meta));
  const out = new Uint8Array(
    PAYLOAD_HEADER_BYTES + meta.length + parts.blob.length + parts.source.length,
  );
  const dv = new DataView(out.buffer);
  out.set(new TextEncoder().encode("KILNJSPG"), 0);
  dv.setUint32(8, parts.version, true);
  dv.setUint32(12, parts.flags, true);
  dv.setUint32(16, meta.length, true);
  dv.setUint32(20, parts.blob.length, true);
  dv.setUint32(24, parts.source.length, true);
  out.set(meta, PAYLOAD_HEADER_BYTES);
  out.set(parts.blob, PAYLOAD_HEADER_BYTES + meta.length);
  out.set(parts.source, PAYLOAD_HEADER_BYTES + meta.length + parts.blob.length);
  return out;
}

function recipeKinds(p: Uint8Array): Set<string> {
  const ext = split(p).meta["ext"] as { k: string; name?: string }[];
  return new Set(ext.map((r) => (r.k === "lib" ? `lib:${r.name!}` : r.k)));
}

// ---- Entries on disk -------------------------------------------------------------------------

/** The one entry in `dir` for `module` compiled with `opts`: its path, key and parts. */
function entryFor(module: Module, opts: CompileOptions) {
  const names = readdirSync(dir).filter((n) => n.endsWith(".kprog"));
  expect(names).toHaveLength(1);
  const file = join(dir, names[0]!);
  const key = freshCache().keyFor(module, "js", compileKeyOptions(opts));
  // The store's own secret: these tests forge what a writer of another version would write,
  // to test the payload decoder, not the MAC (test/runtime/cache_trust.test.ts does that).
  const secret = readFileSync(join(dir, SECRET_NAME));
  const d = decodeEntry(secret, readFileSync(file), key);
  if (!d.ok) throw new Error(`entry unreadable: ${d.reason}: ${d.detail}`);
  const rewrite = (payload: Uint8Array) =>
    writeFileSync(file, encodeEntry(secret, keyText(key), d.moduleProto, payload));
  return { file, payload: new Uint8Array(d.payload), rewrite };
}

// ---- A module that makes every kind of table entry -------------------------------------------

const BIG = INLINE_CONSTANT_BYTES / 4 + 64; // f32 elements: just over the inline limit

/**
 * Library kernels, the evaluator's unary/binary/compare/convert kernels, dot and convolution
 * plans, a dimension size, small and large constants. `swap` builds the two large constants in
 * the other order (another stored instruction order, the same canonical text).
 */
function everyEntry(swap = false): Module {
  const mb = new ModuleBuilder("every_entry");
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [BIG]), "x");
    const i = b.parameter(arrayShape("s64", [4]), "i");
    const m = b.parameter(arrayShape("f32", [4, 6]), "m");
    const h = b.parameter(arrayShape("f16", [6]), "h");
    const splat = (t: "f32" | "s32", v: number, n: number) => b.broadcast(b.scalar(t, v), [n], []);
    const big = (k: number) =>
      b.constant(literal("f32", [BIG], Array.from({ length: BIG }, (_, j) => (j % 97) * k)));
    const [c1, c2] = swap ? [big(2), big(1)].reverse() : [big(1), big(2)];
    const bigSum = b.add(b.multiply(x, c1!), c2!);
    const small = b.constant(literal("f32", [6], [0.5, -1, 2, NaN, -0, 3]));
    const r = b.reshape(b.slice(bigSum, [0], [24]), [4, 6]);
    const dot = b.dot(r, m, { lhsContracting: [1], rhsContracting: [1] }); // f32[4,4]
    const im = b.reshape(b.slice(b.convert(bigSum, "s32"), [0], [16]), [4, 4]);
    const idot = b.dot(im, im, { lhsContracting: [1], rhsContracting: [0] }); // s32[4,4]
    // f16 operands, an f32 result: the operands are converted by a prologue kernel
    const hdot = b.dot(h, h, { lhsContracting: [0], rhsContracting: [0] }, "f32");
    const img = b.reshape(b.slice(bigSum, [0], [32]), [1, 4, 4, 2]);
    const w = b.reshape(b.slice(c1!, [0], [8]), [2, 2, 2, 1]);
    const window = [{ size: 2 }, { size: 2 }];
    const conv = b.convolution(img, w, { window, dims: "b01f_01io->b01f" });
    const fl = b.reshape(b.slice(bigSum, [0], [6]), [6]);
    const totalOrder = b.compare(fl, small, "LT", "TOTALORDER");
    const pieces = [
      b.reshape(dot, [16]),
      b.convert(b.reshape(idot, [16]), "f32"),
      b.reshape(hdot, [1]),
      b.reshape(conv, [9]),
      b.convert(totalOrder, "f32"),
      b.convert(i, "f32"), // s64 -> f32: a convert helper
      b.convert(b.convert(fl, "s32"), "f32"), // float -> int: a convert helper
      b.clamp(splat("f32", -1, 6), fl, splat("f32", 1, 6)),
      b.convert(b.clamp(splat("s32", -2, 4), b.convert(i, "s32"), splat("s32", 2, 4)), "f32"),
      b.erf(fl),
      b.power(fl, small),
      b.roundEven(fl),
      b.convert(b.divide(b.convert(i, "s32"), splat("s32", 3, 4)), "f32"),
      b.convert(b.add(i, i), "f32"), // s64 add: a binary kernel
      b.convert(b.add(h, h), "f32"), // f16 rounding
      b.convert(b.multiply(b.convert(fl, "bf16"), b.convert(small, "bf16")), "f32"),
      b.convert(b.bitcastConvert(fl, "s32"), "f32"),
      b.dynamicSlice(small, [b.scalar("s32", 4)], [2]), // start clamped to 4
      b.convert(b.reshape(b.getDimensionSize(x, 0), [1]), "f32"),
      small,
    ];
    return b.tuple(pieces);
  });
  return mb.build();
}

function everyEntryInputs(): Literal[] {
  return [
    literal("f32", [BIG], Array.from({ length: BIG }, (_, j) => Math.sin(j) * 3)),
    literal("s64", [4], [-7n, 0n, 5n, 1n << 40n]),
    literal("f32", [4, 6], Array.from({ length: 24 }, (_, j) => j / 7 - 1)),
    literal("f16", [6], [0.5, -2, 1000, 3.25, -0.125, 7]),
  ];
}

// ---- Tests ------------------------------------------------------------------------------------

describe("js programs on the disk cache", () => {
  for (const [name, entry] of Object.entries(CORPUS)) {
    for (const optimize of [true, false]) {
      const what = optimize ? "passes' module stored" : "key module itself";
      it(`${name} (${what}): a fresh cache loads it with no codegen, bit-identical`, () => {
        const opts = { backend: "js", optimize };
        const cold = compileModule(entry.build(), { ...opts, cache: freshCache() });
        expect(cold.hit).toBe("miss");
        const compile = vi.spyOn(jsBackend, "compile");
        const warmCache = freshCache();
        const warm = compileModule(entry.build(), { ...opts, cache: warmCache });
        expect(warm.hit).toBe("disk");
        expect(compile).not.toHaveBeenCalled();
        expect(warmCache.stats.discarded).toBe(0);
        const inputs = entry.inputs();
        const fresh = compileModule(entry.build(), { ...opts, cache: false }).executable;
        const loaded = warm.executable.run(inputs);
        expect(identical(loaded, fresh.run(inputs))).toBe(true);
        expect(identical(loaded, evaluate(entry.build(), inputs))).toBe(true);
        // The deferred module is the compiled one.
        expect(fingerprint(warm.executable.module)).toBe(fingerprint(cold.executable.module));
        // Serializing a loaded program gives back the bytes it was loaded from.
        const written = entryFor(entry.build(), opts).payload;
        expect(jsBackend.serialize!(warm.executable)).toEqual(written);
      });
    }
  }

  it("every kind of table entry survives, for a module equal only up to names and order", () => {
    const opts = { backend: "js", optimize: false };
    const cold = compileModule(everyEntry(), { ...opts, cache: freshCache() });
    const { payload } = entryFor(everyEntry(), opts);
    const kinds = recipeKinds(payload);
    for (const k of [
      "lib:dotFloat",
      "lib:dotInt",
      "lib:conv",
      "lib:clampF",
      "lib:clampI",
      "lib:bitcastArray",
      "lib:erf",
      "lib:roundToF16",
      "lib:roundToBF16",
      "unary",
      "binary",
      "compare",
      "convert",
      "literal",
      "constant",
      "data",
    ]) {
      expect([...kinds]).toContain(k);
    }
    // Another stored order and other names: the same fingerprint, so the same entry, and the
    // large constants found by canonical position (stored order would swap them).
    const other = renamed(everyEntry(true));
    expect(fingerprint(other)).toBe(fingerprint(everyEntry()));
    const compile = vi.spyOn(jsBackend, "compile");
    const warm = compileModule(other, { ...opts, cache: freshCache() });
    expect(warm.hit).toBe("disk");
    expect(compile).not.toHaveBeenCalled();
    const inputs = everyEntryInputs();
    const want = evaluate(everyEntry(), inputs);
    expect(identical(cold.executable.run(inputs), want)).toBe(true);
    expect(identical(warm.executable.run(inputs), want)).toBe(true);
    expect(warm.executable.module).toBe(other);
  });

  it("a result that is a constant is copied, so callers cannot change the program", () => {
    const build = () => {
      const mb = new ModuleBuilder("const_root");
      mb.entry("main", (b) => {
        b.parameter(arrayShape("f32", [2]), "unused");
        return b.constant(literal("f32", [3], [1, 2, 3]));
      });
      return mb.build();
    };
    const opts = { backend: "js", optimize: false };
    compileModule(build(), { ...opts, cache: freshCache() });
    const warm = compileModule(build(), { ...opts, cache: freshCache() });
    expect(warm.hit).toBe("disk");
    const arg = [literal("f32", [2], [0, 0])];
    const first = warm.executable.run(arg) as Literal;
    (first.data as Float32Array)[0] = 99;
    expect([...(warm.executable.run(arg) as Literal).data]).toEqual([1, 2, 3]);
  });

  it("a dynamic module stores a marker and re-specializes per argument dims on load", () => {
    const entry = CORPUS["dynamic_mean"]!;
    const opts = { backend: "js", optimize: false };
    compileModule(entry.build(), { ...opts, cache: freshCache() });
    const { payload } = entryFor(entry.build(), opts);
    const parts = split(payload);
    expect(parts.meta["kind"]).toBe("dynamic");
    expect(parts.blob.length + parts.source.length).toBe(0);
    const warm = compileModule(entry.build(), { ...opts, cache: freshCache() });
    expect(warm.hit).toBe("disk");
    for (const t of [5, 16, 1]) {
      const x = literal("f32", [2, t, 8], Array.from({ length: 16 * t }, (_, j) => j % 13));
      expect(identical(warm.executable.run([x]), evaluate(entry.build(), [x]))).toBe(true);
    }
  });

  it("serialize refuses an executable the js backend did not make", () => {
    const exe = interpreterBackend.compile(CORPUS["mlp"]!.build());
    expect(() => jsBackend.serialize!(exe)).toThrow(/js backend did not make/);
  });
});

describe("bad js payloads are rejected and recompiled, never run", () => {
  const module = () => CORPUS["attention_block"]!.build();
  // The key module itself is compiled: the cache has it at hand and hands it to deserialize,
  // which checks the payload against it at once (a stored module is checked when decoded).
  const opts = { backend: "js", optimize: false };
  const enc = (s: string) => new TextEncoder().encode(s);
  const tamperedSource = enc(`globalThis.kilnTamperedRan = true; return () => 0;`);

  // Each case: a payload that must not load, and what the error says.
  const cases: [string, (p: Uint8Array) => Uint8Array, RegExp][] = [
    ["an empty payload", () => new Uint8Array(0), /shorter than/],
    ["a truncated header", (p) => p.slice(0, 20), /shorter than/],
    [
      "a bad magic",
      (p) => {
        const q = p.slice();
        q[0] = 0x58;
        return q;
      },
      /bad magic/,
    ],
    [
      "the source swapped, header not updated (lengths do not add up)",
      (p) => {
        const { source } = split(p);
        const q = new Uint8Array(p.length - source.length + tamperedSource.length);
        q.set(p.subarray(0, p.length - source.length), 0);
        q.set(tamperedSource, p.length - source.length);
        return q;
      },
      /lengths add up/,
    ],
    ["a byte appended", (p) => Uint8Array.from([...p, 0]), /lengths add up/],
    ["unknown flags", (p) => assemble({ ...split(p), flags: 6 }), /unknown flags/],
    ["another byte order", (p) => assemble({ ...split(p), flags: 0 }), /byte order/],
    [
      "meta that is not JSON",
      (p) => {
        const q = p.slice();
        q[PAYLOAD_HEADER_BYTES] = 0x23;
        return q;
      },
      /not UTF-8 JSON/,
    ],
    [
      "another signature",
      (p) => {
        const parts = split(p);
        return assemble({ ...parts, meta: { ...parts.meta, signature: "(f32[1]) -> f32[1]" } });
      },
      /written for/,
    ],
    [
      "another instruction count",
      (p) => {
        const parts = split(p);
        return assemble({ ...parts, meta: { ...parts.meta, instructions: 3 } });
      },
      /instructions/,
    ],
    [
      "an unknown kind",
      (p) => {
        const parts = split(p);
        return assemble({ ...parts, meta: { ...parts.meta, kind: "wasm" } });
      },
      /unknown kind/,
    ],
    [
      "a recipe naming no library function",
      (p) => {
        const parts = split(p);
        const ext = [...(parts.meta["ext"] as unknown[]), { k: "lib", name: "eval" }];
        return assemble({ ...parts, meta: { ...parts.meta, ext } });
      },
      /names no library function/,
    ],
    [
      "a constant position outside the module",
      (p) => {
        const parts = split(p);
        const ext = [...(parts.meta["ext"] as unknown[]), { k: "constant", at: 1e6 }];
        return assemble({ ...parts, meta: { ...parts.meta, ext } });
      },
      /not in the module/,
    ],
    [
      "a constant position on a non-constant",
      (p) => {
        const parts = split(p);
        const ext = [...(parts.meta["ext"] as unknown[]), { k: "constant", at: 0 }];
        return assemble({ ...parts, meta: { ...parts.meta, ext } });
      },
      /not a constant/,
    ],
    [
      "plan data pointing outside the blob",
      (p) => {
        const parts = split(p);
        const bad = { k: "data", v: { $ta: "i32", at: parts.blob.length, n: 4 } };
        const ext = [...(parts.meta["ext"] as unknown[]), bad];
        return assemble({ ...parts, meta: { ...parts.meta, ext } });
      },
      /outside the blob/,
    ],
    [
      "a source that is not UTF-8",
      (p) => assemble({ ...split(p), source: Uint8Array.of(0x72, 0xff, 0xfe) }),
      /not UTF-8/,
    ],
    [
      "a source that does not parse",
      (p) => assemble({ ...split(p), source: enc("}{") }),
      /Unexpected token/,
    ],
  ];

  for (const [what, tamper, message] of cases) {
    it(`${what}: deserialize throws, the cache discards it as undecodable`, () => {
      compileModule(module(), { ...opts, cache: freshCache() });
      const entry = entryFor(module(), opts);
      const bad = tamper(entry.payload);
      const compiled = compileModule(module(), { ...opts, cache: false }).executable.module;
      expect(() => jsBackend.deserialize!(compiled, bad)).toThrow(message);

      entry.rewrite(bad);
      const cache = freshCache();
      const compile = vi.spyOn(jsBackend, "compile");
      const r = compileModule(module(), { ...opts, cache });
      expect(r.hit).toBe("miss");
      expect(compile).toHaveBeenCalledTimes(1);
      expect(cache.stats.discardReasons.undecodable).toBe(1);
      const inputs = CORPUS["attention_block"]!.inputs();
      expect(identical(r.executable.run(inputs), evaluate(module(), inputs))).toBe(true);
      // The entry was replaced by a good one.
      expect(compileModule(module(), { ...opts, cache: freshCache() }).hit).toBe("disk");
      expect((globalThis as { kilnTamperedRan?: boolean }).kilnTamperedRan).toBeUndefined();
    });
  }

  it("an entry written by an older js codegen is rejected and recompiled", () => {
    // The passes' module is stored: the load is deferred, but its header is checked at once.
    const opts = { backend: "js", optimize: true };
    compileModule(module(), { ...opts, cache: freshCache() });
    const entry = entryFor(module(), opts);
    expect(split(entry.payload).version).toBe(JS_CODEGEN_VERSION);
    const old = assemble({ ...split(entry.payload), version: JS_CODEGEN_VERSION - 1 });
    entry.rewrite(old);
    const cache = freshCache();
    const compile = vi.spyOn(jsBackend, "compile");
    const r = compileModule(module(), { ...opts, cache });
    expect(r.hit).toBe("miss");
    expect(compile).toHaveBeenCalledTimes(1);
    expect(cache.stats.discardReasons.undecodable).toBe(1);
    const now = entryFor(module(), opts).payload;
    expect(split(now).version).toBe(JS_CODEGEN_VERSION);
    expect((r.executable as JsExecutable).source).toBe(new TextDecoder().decode(split(now).source));
  });
});

describe("a load with the stored module deferred", () => {
  it("decodes the module when it is read, and checks it against the payload then", () => {
    const entry = CORPUS["softmax"]!;
    const opts = { backend: "js", optimize: true };
    const cold = compileModule(entry.build(), { ...opts, cache: freshCache() });
    const { payload } = entryFor(entry.build(), opts);
    const optimized = cold.executable.module;
    let decodes = 0;
    const exe = jsBackend.deserializeDeferred!(() => {
      decodes++;
      return optimized;
    }, payload);
    const inputs = entry.inputs();
    expect(identical(exe.run(inputs), evaluate(entry.build(), inputs))).toBe(true);
    expect(decodes).toBe(0); // running needs only the payload
    expect(exe.module).toBe(optimized);
    expect(exe.module).toBe(optimized);
    expect(decodes).toBe(1);

    const parts = split(payload);
    const meta = { ...parts.meta, signature: "(f32[1]) -> f32[1]" };
    const foreign = assemble({ ...parts, meta });
    const late = jsBackend.deserializeDeferred!(() => optimized, foreign);
    expect(() => late.module).toThrow(/written for \(f32\[1\]\) -> f32\[1\]/);
  });
});
