// The `wasm` backend on the disk program cache (runtime/wasm/payload.ts, serialize/deserialize
// in runtime/wasm/backend.ts): every corpus module, and one with a sort comparator, a large
// constant and a GEMM, round-trips through a fresh ProgramCache on a temp dir with nothing
// lowered, rendered or encoded (wasmCounters), bit-identical to a fresh compile; GPT-2 tiny
// compiled in one process loads in a new one with equal logits and no compile; damaged entries
// (a flipped byte, a truncated file) and payloads that decode wrong under a valid MAC (module
// bytes that do not validate, another codegen version, a plan calling a missing export, another
// module's signature) are discarded and recompiled, never instantiated.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ModuleBuilder } from "../../ir/builder.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Module } from "../../ir/module.ts";
import { arrayShape, scalarShape } from "../../ir/shape.ts";
import { ProgramCache } from "../../runtime/cache.ts";
import { decodeEntry, encodeEntry, keyText, SECRET_NAME } from "../../runtime/cache_disk.ts";
import { compileKeyOptions, type CompileOptions, compileModule } from "../../runtime/compile.ts";
import {
  wasmBackend,
  type WasmExecutable,
  wasmCounters,
  wasmTesting,
} from "../../runtime/wasm/backend.ts";
import { WASM_CODEGEN_VERSION, WASM_PAYLOAD_HEADER_BYTES } from "../../runtime/wasm/payload.ts";
import { CORPUS } from "../ir/corpus/models.ts";
import { identical } from "./fixtures/op_cases.ts";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, "..", "..");
const worker = join(here, "fixtures", "wasm_cache_worker.ts");

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kiln-wasm-cache-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function freshCache(): ProgramCache {
  return new ProgramCache({ disk: dir, onWarning: () => {} });
}

/** The counters' change over `f`. */
function counting<T>(f: () => T): { value: T; compiled: number; loaded: number } {
  const c0 = wasmCounters.compiled;
  const l0 = wasmCounters.loaded;
  const value = f();
  return { value, compiled: wasmCounters.compiled - c0, loaded: wasmCounters.loaded - l0 };
}

const BIG = 16 * 1024 / 4 + 64; // f32 elements: just over the inline constant limit

/** A sort with a TOTALORDER comparator (table entries), a large constant and an f32 GEMM. */
function sortDotConst(): Module {
  const mb = new ModuleBuilder("sort_dot_const");
  const cmp = mb.computation("cmp", (b) => {
    const a = b.parameter(scalarShape("f32"));
    const c = b.parameter(scalarShape("f32"));
    b.parameter(scalarShape("s32"));
    b.parameter(scalarShape("s32"));
    return b.compare(a, c, "LT", "TOTALORDER");
  });
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [BIG]), "x");
    const m = b.parameter(arrayShape("f32", [24, 40]), "m");
    const big = b.constant(literal("f32", [BIG], Array.from({ length: BIG }, (_, j) => j % 13)));
    const y = b.add(x, big);
    const ids = b.iota(arrayShape("s32", [BIG]), 0);
    const sorted = b.sort([y, ids], 0, cmp, true);
    const lhs = b.reshape(b.slice(y, [0], [24 * 24]), [24, 24]);
    const dot = b.dot(lhs, m, { lhsContracting: [1], rhsContracting: [0] });
    return b.tuple([b.getTupleElement(sorted, 0), b.getTupleElement(sorted, 1), b.tanh(dot)]);
  });
  return mb.build();
}

function sortDotConstInputs(): Literal[] {
  return [
    literal("f32", [BIG], Array.from({ length: BIG }, (_, j) => Math.sin(j * 7) * 5)),
    literal("f32", [24, 40], Array.from({ length: 960 }, (_, j) => Math.cos(j) / 4)),
  ];
}

const CASES: Record<string, { build: () => Module; inputs: () => Literal[] }> = {
  ...CORPUS,
  sort_dot_const: { build: sortDotConst, inputs: sortDotConstInputs },
};

/** The one entry in `dir`: its path and payload, and a way to rewrite it under a valid MAC. */
function entryFor(module: Module, opts: CompileOptions) {
  const names = readdirSync(dir).filter((n) => n.endsWith(".kprog"));
  expect(names).toHaveLength(1);
  const file = join(dir, names[0]!);
  const key = freshCache().keyFor(module, "wasm", compileKeyOptions(opts));
  // The store's own secret: these tests forge what a writer of another version would write,
  // to test the payload decoder (test/runtime/cache_trust.test.ts tests the MAC).
  const secret = readFileSync(join(dir, SECRET_NAME));
  const d = decodeEntry(secret, readFileSync(file), key);
  if (!d.ok) throw new Error(`entry unreadable: ${d.reason}: ${d.detail}`);
  const rewrite = (payload: Uint8Array) =>
    writeFileSync(file, encodeEntry(secret, keyText(key), d.moduleProto, payload));
  return { file, payload: new Uint8Array(d.payload), rewrite };
}

const u32 = (p: Uint8Array, at: number) =>
  new DataView(p.buffer, p.byteOffset, p.byteLength).getUint32(at, true);

/** Offsets of the payload's parts (the layout runtime/wasm/payload.ts documents). */
function parts(p: Uint8Array) {
  const metaAt = WASM_PAYLOAD_HEADER_BYTES;
  const blobAt = metaAt + u32(p, 16);
  const bytesAt = blobAt + u32(p, 20);
  return { metaAt, blobAt, bytesAt, bytesLength: u32(p, 24) };
}

function withMeta(p: Uint8Array, edit: (meta: Record<string, unknown>) => void): Uint8Array {
  const { metaAt, blobAt } = parts(p);
  const meta = JSON.parse(new TextDecoder().decode(p.subarray(metaAt, blobAt)));
  edit(meta);
  const m = new TextEncoder().encode(JSON.stringify(meta));
  const out = new Uint8Array(p.length - (blobAt - metaAt) + m.length);
  out.set(p.subarray(0, metaAt));
  new DataView(out.buffer).setUint32(16, m.length, true);
  out.set(m, metaAt);
  out.set(p.subarray(blobAt), metaAt + m.length);
  return out;
}

describe("wasm programs on the disk cache", () => {
  for (const [name, entry] of Object.entries(CASES)) {
    for (const optimize of [true, false]) {
      const what = optimize ? "passes' module stored" : "key module itself";
      it(`${name} (${what}): a fresh cache loads it with no codegen, bit-identical`, () => {
        const opts = { backend: "wasm", optimize };
        const cold = counting(() => compileModule(entry.build(), { ...opts, cache: freshCache() }));
        expect(cold.value.hit).toBe("miss");
        const dynamic = name === "dynamic_mean";
        expect(cold.compiled).toBe(dynamic ? 0 : 1);
        const warmCache = freshCache();
        const warm = counting(() => compileModule(entry.build(), { ...opts, cache: warmCache }));
        expect(warm.value.hit).toBe("disk");
        expect(warmCache.stats.discarded).toBe(0);
        // Nothing lowered, rendered or encoded; a dynamic module's marker re-specializes on run.
        expect(warm.compiled).toBe(0);
        expect(warm.loaded).toBe(dynamic ? 0 : 1);
        const exe = warm.value.executable as WasmExecutable;
        expect(exe.fallback).toBeUndefined();
        const inputs = entry.inputs();
        const fresh = compileModule(entry.build(), { ...opts, cache: false }).executable;
        expect(identical(exe.run(inputs), fresh.run(inputs))).toBe(true);
        // Serializing a loaded program gives back the bytes it was loaded from.
        expect(wasmBackend.serialize!(exe)).toEqual(entryFor(entry.build(), opts).payload);
      });
    }
  }

  it("a module wasm declines is stored as a marker and runs on js again on load", () => {
    const mb = new ModuleBuilder("declined");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [5]), "x");
      return b.tanh(b.add(x, x));
    });
    const m = mb.build();
    const opts = { backend: "wasm" };
    wasmTesting.decline = "tanh";
    let cold: WasmExecutable;
    try {
      cold = compileModule(m, { ...opts, cache: freshCache() }).executable as WasmExecutable;
    } finally {
      delete wasmTesting.decline;
    }
    expect(cold.fallback).toMatch(/tanh/);
    const warm = counting(() => compileModule(m, { ...opts, cache: freshCache() }));
    expect(warm.value.hit).toBe("disk");
    expect(warm.compiled + warm.loaded).toBe(0);
    expect((warm.value.executable as WasmExecutable).fallback).toBe(cold.fallback);
    const x = literal("f32", [5], [1, 2.5, -3, 0, 0.25]);
    expect(identical(warm.value.executable.run([x]), cold.run([x]))).toBe(true);
  });
});

describe("wasm entries that must not run", () => {
  const entry = CASES["sort_dot_const"]!;
  const opts = { backend: "wasm" };

  /** Compiles into `dir`, damages the entry, and compiles again with a fresh cache. */
  function again(damage: (e: ReturnType<typeof entryFor>) => void) {
    compileModule(entry.build(), { ...opts, cache: freshCache() });
    damage(entryFor(entry.build(), opts));
    const cache = freshCache();
    const r = counting(() => compileModule(entry.build(), { ...opts, cache }));
    expect(r.value.hit).toBe("miss");
    // Compiled again, never instantiated from the stored bytes.
    expect(r.compiled).toBe(1);
    expect(r.loaded).toBe(0);
    const inputs = entry.inputs();
    const fresh = compileModule(entry.build(), { ...opts, cache: false }).executable;
    expect(identical(r.value.executable.run(inputs), fresh.run(inputs))).toBe(true);
    return cache.stats.discardReasons;
  }

  it("a flipped byte in the module's bytes fails the MAC", () => {
    const reasons = again((e) => {
      const file = readFileSync(e.file);
      file[file.length - 64]! ^= 0x10;
      writeFileSync(e.file, file);
    });
    expect(reasons.mac).toBe(1);
  });

  it("a truncated entry is discarded", () => {
    const reasons = again((e) => {
      const file = readFileSync(e.file);
      writeFileSync(e.file, file.subarray(0, file.length - 100));
    });
    expect(reasons.truncated + reasons.mac).toBe(1);
  });

  it("module bytes that do not validate are undecodable (valid MAC)", () => {
    const reasons = again((e) => {
      const p = e.payload;
      const { bytesAt } = parts(p);
      p[bytesAt] = 0x01; // the wasm magic `\0asm`
      e.rewrite(p);
    });
    expect(reasons.undecodable).toBe(1);
  });

  it("another codegen version is undecodable", () => {
    const reasons = again((e) => {
      const p = e.payload;
      new DataView(p.buffer).setUint32(8, WASM_CODEGEN_VERSION + 1, true);
      e.rewrite(p);
    });
    expect(reasons.undecodable).toBe(1);
  });

  it("a plan calling an export the module lacks is undecodable", () => {
    const reasons = again((e) => {
      const p = withMeta(e.payload, (meta) => {
        const text = JSON.stringify(meta).replace(/"fn":"k0"/g, '"fn":"k999"');
        Object.assign(meta, JSON.parse(text));
      });
      expect(new TextDecoder().decode(p)).toContain("k999");
      e.rewrite(p);
    });
    expect(reasons.undecodable).toBe(1);
  });

  it("a payload written for another signature is undecodable", () => {
    const reasons = again((e) => {
      e.rewrite(withMeta(e.payload, (meta) => {
        meta["signature"] = "(f32[3]) -> f32[3]";
      }));
    });
    expect(reasons.undecodable).toBe(1);
  });

  it("lengths that do not add up are undecodable", () => {
    const reasons = again((e) => e.rewrite(e.payload.subarray(0, e.payload.length - 1)));
    expect(reasons.undecodable).toBe(1);
  });
});

interface WorkerOut {
  counters: { compiled: number; loaded: number };
  firstCallMs: number;
  stats: { hits: { disk: number }; byKind: { compiled: { compileMs: number } } };
  values: number[];
}

function runWorker(): WorkerOut {
  const r = spawnSync(process.execPath, ["--import", "tsx", worker], {
    cwd: repoRoot,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: dir, KILN_NATIVE: "0" },
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as WorkerOut;
}

describe("wasm programs across processes", () => {
  it("GPT-2 tiny compiled in one process loads in a new one: equal logits, no compile", () => {
    // The forward program, and (wasm being the default without native) the eager ops that
    // build the model: every one is compiled once, then loaded from disk in the new process.
    const cold = runWorker();
    expect(cold.counters.compiled).toBeGreaterThanOrEqual(1);
    expect(cold.counters.loaded).toBe(0);
    const warm = runWorker();
    expect(warm.counters).toEqual({ compiled: 0, loaded: cold.counters.compiled });
    expect(warm.stats.hits.disk).toBeGreaterThan(0);
    expect(warm.values.length).toBeGreaterThan(0);
    expect(warm.values).toEqual(cold.values);
    console.log(
      `GPT-2 tiny on wasm, first call (trace + compile + run): ` +
        `cold ${cold.firstCallMs.toFixed(0)} ` +
        `ms (compile ${cold.stats.byKind.compiled.compileMs.toFixed(0)} ms), warm from disk ` +
        `${warm.firstCallMs.toFixed(0)} ms`,
    );
  }, 240_000);
});
