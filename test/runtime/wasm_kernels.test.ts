// The wasm backend's own tests (runtime/wasm/): its kernels against the reference evaluator
// within the tolerance tier (runtime/tiers.ts) on sizes that miss the SIMD width, the SIMD and
// the scalar loops bitwise equal (the same operations in the same order), the polynomial
// transcendental functions over a sweep of f32 bit patterns, the GEMM at odd M/N/K and
// strided layouts, kernels deduplicated within a module, and what wasm declines running on js.
// backend_ops and backend_fusions run the shared op and fusion cases on wasm too.

import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { ModuleBuilder, type ComputationBuilder } from "../../ir/builder.ts";
import { Literal, literal, roundToBF16, roundToF16 } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { printHlo } from "../../ir/print.ts";
import { cloneModule } from "../../ir/clone.ts";
import { optimizationPipeline } from "../../passes/index.ts";
import { arrayShape } from "../../ir/shape.ts";
import { getBackend } from "../../runtime/index.ts";
import { toleranceProblem } from "../../runtime/tiers.ts";
import { type WasmExecutable, wasmTesting } from "../../runtime/wasm/backend.ts";
import { describeValue } from "./fixtures/op_cases.ts";

afterEach(() => {
  wasmTesting.simd = true;
});

function compile(m: Module, simd = true): WasmExecutable {
  wasmTesting.simd = simd;
  try {
    return getBackend("wasm").compile(m) as WasmExecutable;
  } finally {
    wasmTesting.simd = true;
  }
}

function check(m: Module, inputs: EvalValue[], exe: WasmExecutable): EvalValue {
  const got = exe.run(inputs);
  const want = evaluate(m, inputs);
  const why = toleranceProblem(m, inputs, got, want);
  if (why !== null) {
    throw new Error(`wasm differs from the evaluator: ${why}\n${printHlo(m)}\ninputs: ` +
      `${inputs.map(describeValue).join("; ")}\nwant ${describeValue(want)}\n` +
      `got ${describeValue(got)}`);
  }
  return got;
}

function bits(v: EvalValue): Uint8Array {
  const l = v as Literal;
  return new Uint8Array(l.data.buffer, l.data.byteOffset, l.data.byteLength);
}

/** Deterministic f32 values with the specials mixed in. */
function values(n: number, seed: number, scale = 8): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  const specials = [0, -0, NaN, Infinity, -Infinity, 1, -1, 0.5, -0.5, 2.5, 1e-40, 88.7];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = i % 7 === 3 ? specials[(s >>> 8) % specials.length]! : (s / 2 ** 32 - 0.5) * scale;
  }
  return out;
}

type Unary = (b: ComputationBuilder, x: Instruction, y: Instruction, n: number) => Instruction;

const OPS: Record<string, Unary> = {
  add: (b, x, y) => b.add(x, y),
  divide: (b, x, y) => b.divide(x, y),
  maximum: (b, x, y) => b.maximum(x, y),
  minimum: (b, x, y) => b.minimum(x, y),
  exp: (b, x) => b.exp(x),
  log: (b, x) => b.log(x),
  tanh: (b, x) => b.tanh(x),
  logistic: (b, x) => b.logistic(x),
  erf: (b, x) => b.erf(x),
  sqrt: (b, x) => b.sqrt(x),
  rsqrt: (b, x) => b.rsqrt(x),
  sign: (b, x) => b.sign(x),
  roundAfz: (b, x) => b.roundAfz(x),
  roundEven: (b, x) => b.roundEven(x),
  "select(x > y)": (b, x, y) => b.select(b.compare(x, y, "GT"), x, y),
  "clamp(y, x, 1)": (b, x, y, n) => b.clamp(y, x, b.broadcast(b.scalar("f32", 1), [n], [])),
};

function binaryModule(name: string, n: number, f: Unary): Module {
  const mb = new ModuleBuilder(`wasm_${name.replace(/\W/g, "_")}_${n}`);
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [n]));
    const y = b.parameter(arrayShape("f32", [n]));
    return f(b, x, y, n);
  });
  return mb.build();
}

describe("wasm kernels against the evaluator", () => {
  const SIZES = [1, 3, 4, 5, 7, 8, 9, 17, 63, 258];
  for (const [name, f] of Object.entries(OPS)) {
    it(`${name}: SIMD loop with a scalar tail equals the scalar loop, within the tier`, () => {
      for (const n of SIZES) {
        const m = binaryModule(name, n, f);
        // Fused as a compile() would (compare + select is one loop then).
        const opt = cloneModule(m);
        optimizationPipeline().run(opt);
        const inputs = [literal("f32", [n], values(n, n)), literal("f32", [n], values(n, n + 99))];
        const simd = compile(opt, true);
        const scalar = compile(opt, false);
        expect(simd.fallback, `${name} n=${n} fell back`).toBeUndefined();
        expect(simd.stats!.vectorizedLoops).toBeGreaterThan(0);
        expect(scalar.stats!.vectorizedLoops).toBe(0);
        const a = check(m, inputs, simd);
        const b = check(m, inputs, scalar);
        expect(bits(a)).toEqual(bits(b));
      }
    });
  }

  it("f16 and bf16 compute in f32 and round after every op (SIMD == scalar, in the tier)", () => {
    for (const t of ["f16", "bf16"] as const) {
      for (const n of [3, 9, 130]) {
        const mb = new ModuleBuilder(`wasm_${t}_${n}`);
        mb.entry("main", (b) => {
          const x = b.parameter(arrayShape(t, [n]));
          const y = b.parameter(arrayShape(t, [n]));
          return b.tuple([b.add(b.multiply(x, y), x), b.tanh(x), b.divide(x, y)]);
        });
        const m = mb.build();
        const opt = cloneModule(m);
        optimizationPipeline().run(opt);
        // Half values: f32 storage holding values rounded to the type.
        const half = (seed: number) => new Literal(t, [n], Float32Array.from(values(n, seed),
          (v) => (t === "f16" ? roundToF16(v) : roundToBF16(v))));
        const inputs = [half(n), half(n + 5)];
        const simd = compile(opt, true);
        const scalar = compile(opt, false);
        expect(simd.fallback).toBeUndefined();
        expect(simd.stats!.vectorizedLoops).toBeGreaterThan(0);
        const got = simd.run(inputs) as EvalValue[];
        const want = evaluate(m, inputs);
        const why = toleranceProblem(m, inputs, got, want);
        expect(why, `${t} n=${n}`).toBeNull();
        const other = scalar.run(inputs) as EvalValue[];
        got.forEach((g, k) => expect(bits(g)).toEqual(bits(other[k]!)));
      }
    }
  });

  it("row sums and a softmax run four partial sums per row, within the tier", () => {
    for (const cols of [1, 3, 4, 7, 33, 1000]) {
      const mb = new ModuleBuilder(`wasm_rowsum_${cols}`);
      const add = mb.reducer("add", "f32");
      const max = mb.reducer("max", "f32");
      mb.entry("main", (b) => {
        const x = b.parameter(arrayShape("f32", [5, cols]));
        const zero = b.scalar("f32", 0);
        const sum = b.reduce(b.exp(x), zero, [1], add);
        const m = b.reduce(x, b.scalar("f32", -Infinity), [1], max);
        const e = b.exp(b.subtract(x, b.broadcast(m, [5, cols], [0])));
        const soft = b.divide(e, b.broadcast(b.reduce(e, zero, [1], add), [5, cols], [0]));
        return b.tuple([sum, soft]);
      });
      const m = mb.build();
      const opt = cloneModule(m);
      optimizationPipeline().run(opt);
      const exe = compile(opt);
      expect(exe.fallback).toBeUndefined();
      if (cols >= 4) expect(exe.stats!.vectorizedLoops).toBeGreaterThan(1);
      const inputs = [literal("f32", [5, cols], values(5 * cols, cols, 6))];
      const got = exe.run(inputs);
      const why = toleranceProblem(m, inputs, got, evaluate(m, inputs));
      expect(why, `cols=${cols}`).toBeNull();
    }
  });

  it("integer and pred element ops stay exact (s32 divide, shifts, u8 wrap, pred logic)", () => {
    const mb = new ModuleBuilder("wasm_ints");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("s32", [13]));
      const y = b.parameter(arrayShape("s32", [13]));
      const q = b.divide(x, y);
      const r = b.remainder(x, y);
      const s = b.shiftRightArithmetic(x, y);
      const u = b.convert(b.add(b.convert(x, "u8"), b.convert(y, "u8")), "s32");
      const p = b.convert(b.and(b.compare(x, y, "LT"), b.not(b.compare(y, b.broadcast(
        b.scalar("s32", 0), [13], []), "EQ"))), "s32");
      return b.tuple([q, r, s, u, p]);
    });
    const m = mb.build();
    const xs = [-2147483648, 7, -7, 0, 5, 100, -1, 2147483647, 3, 9, -100, 1, 255];
    const ys = [-1, 0, 2, 3, -3, 33, -1, 31, 32, -5, 7, 0, 1];
    const exe = compile(m);
    expect(exe.fallback).toBeUndefined();
    const inputs = [literal("s32", [13], xs), literal("s32", [13], ys)];
    check(m, inputs, exe);
  });

  it("transcendental functions over a sweep of f32 bit patterns, SIMD == scalar", () => {
    const n = 65536 + 9;
    const x = new Float32Array(n);
    const u = new Uint32Array(x.buffer);
    for (let i = 0; i < 65536; i++) u[i] = (i * 65537 + 12345) >>> 0;
    x.set([0, -0, NaN, Infinity, -Infinity, 1e-45, -1e-45, 88.72, -103.9], 65536);
    // f32 values closest to multiples of pi/2 (hard cases of the reduction), large and small
    x.set([16367173, 1.6367173e7, 8.2222e6, 3.3e38, -3.4028235e38, 1.5707964, -1.5707964,
      3.1415927, 4.712389, 6.2831855, 102949.6, 1e6, -1e6, 999999.94], 0);
    const unary: Record<string, (b: ComputationBuilder, v: Instruction) => Instruction> = {
      exponential: (b, v) => b.exp(v),
      "exponential-minus-one": (b, v) => b.op("exponential-minus-one", [v]),
      log: (b, v) => b.log(v),
      "log-plus-one": (b, v) => b.op("log-plus-one", [v]),
      tanh: (b, v) => b.tanh(v),
      logistic: (b, v) => b.logistic(v),
      erf: (b, v) => b.erf(v),
      cbrt: (b, v) => b.cbrt(v),
      sine: (b, v) => b.sin(v),
      cosine: (b, v) => b.cos(v),
      tan: (b, v) => b.tan(v),
    };
    for (const [name, f] of Object.entries(unary)) {
      const mb = new ModuleBuilder(`wasm_sweep_${name}`);
      mb.entry("main", (b) => f(b, b.parameter(arrayShape("f32", [n]))));
      const m = mb.build();
      const inputs = [literal("f32", [n], x)];
      const a = check(m, inputs, compile(m, true));
      const s = check(m, inputs, compile(m, false));
      expect(bits(a), name).toEqual(bits(s));
    }
  });

  it("power, atan2, remainder: f32 over a grid with every special; integer powers", () => {
    const as = [0, -0, 1, -1, 2, -2, 0.5, -0.5, 3.7, -3.7, 1e-30, 1e30, 1e-42, Infinity,
      -Infinity, NaN, 10, -10, 0.999, 1.001];
    const bs = [0, -0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, 1.5, 2.5, 40, -40, 1e10, Infinity,
      -Infinity, NaN, 127.3, 0.1];
    const n = as.length * bs.length;
    const x = new Float32Array(n);
    const y = new Float32Array(n);
    as.forEach((a, i) => bs.forEach((b, j) => {
      x[i * bs.length + j] = a;
      y[i * bs.length + j] = b;
    }));
    for (const op of ["power", "atan2", "remainder"] as const) {
      const mb = new ModuleBuilder(`wasm_${op}`);
      mb.entry("main", (b) => b.op(op, [b.parameter(arrayShape("f32", [n])),
        b.parameter(arrayShape("f32", [n]))]));
      const m = mb.build();
      const exe = compile(m);
      expect(exe.fallback, op).toBeUndefined();
      check(m, [literal("f32", [n], x), literal("f32", [n], y)], exe);
      check(m, [literal("f32", [n], values(n, 11, 100)), literal("f32", [n], values(n, 12, 3))],
        exe);
    }
    for (const t of ["s32", "s64", "u8"] as const) {
      const xs = t === "u8" ? [0, 1, 2, 3, 255, 7, 16, 1, 0] : [0, 1, -1, 2, -3, 7, 65537, 1, -2];
      const ys = t === "u8" ? [0, 5, 8, 3, 2, 200, 1, 255, 0] : [0, 5, 3, 31, -1, 40, 3, -7, 63];
      const mi = new ModuleBuilder(`wasm_ipow_${t}`);
      mi.entry("main", (b) => b.power(b.parameter(arrayShape(t, [9])),
        b.parameter(arrayShape(t, [9]))));
      const mm = mi.build();
      const e = compile(mm);
      expect(e.fallback, t).toBeUndefined();
      const lit = (v: number[]) =>
        t === "s64" ? literal(t, [9], v.map(BigInt)) : literal(t, [9], v);
      check(mm, [lit(xs), lit(ys)], e);
    }
  });

  it("a dot at odd M/N/K, batched, with transposed operands", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 37 }),
        fc.integer({ min: 1, max: 37 }),
        fc.integer({ min: 0, max: 41 }),
        fc.integer({ min: 1, max: 3 }),
        fc.boolean(),
        fc.boolean(),
        (M, N, K, B, ta, tb) => {
          const mb = new ModuleBuilder(`wasm_dot_${M}_${N}_${K}_${B}`);
          const aDims = ta ? [B, K, M] : [B, M, K];
          // tb: B stored [batch, N, K] (x @ W^T), packed by gemm_pack_bt; else [batch, K, N].
          const bDims = tb ? [B, N, K] : [B, K, N];
          mb.entry("main", (b) => {
            const x = b.parameter(arrayShape("f32", aDims));
            const y = b.parameter(arrayShape("f32", bDims));
            return b.dot(x, y, {
              lhsBatch: [0], rhsBatch: [0], lhsContracting: [ta ? 1 : 2],
              rhsContracting: [tb ? 2 : 1],
            });
          });
          const m = mb.build();
          const inputs = [
            literal("f32", aDims, values(B * M * K, M * 31 + K, 2)),
            literal("f32", bDims, values(B * K * N, N * 17 + K, 2)),
          ];
          const exe = compile(m);
          expect(exe.fallback).toBeUndefined();
          check(m, inputs, exe);
        },
      ),
      { numRuns: 60, seed: 17 },
    );
  });

  it("a key-value sort (TOTALORDER keys with NaN and -0, s32 payload) runs on wasm", () => {
    const mb = new ModuleBuilder("wasm_sort");
    const less = mb.computation("less", (b) => {
      const x = b.parameter(arrayShape("f32", []));
      const y = b.parameter(arrayShape("f32", []));
      b.parameter(arrayShape("s32", []));
      b.parameter(arrayShape("s32", []));
      return b.compare(x, y, "LT", "TOTALORDER");
    });
    mb.entry("main", (b) => {
      const k = b.parameter(arrayShape("f32", [3, 11]));
      const v = b.parameter(arrayShape("s32", [3, 11]));
      return b.sort([k, v], 1, less, true);
    });
    const m = mb.build();
    const keys = values(33, 5, 4);
    keys[4] = -0;
    keys[5] = 0;
    keys[6] = keys[7] = 1.5;
    const exe = compile(m);
    expect(exe.fallback).toBeUndefined();
    check(m, [literal("f32", [3, 11], keys), literal("s32", [3, 11], keys.map((_, i) => i))], exe);
  });

  it("identical kernels are one function of the module", () => {
    const mb = new ModuleBuilder("wasm_dedupe");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [33]));
      const y = b.parameter(arrayShape("f32", [33]));
      return b.tuple([b.tanh(x), b.tanh(y), b.exp(x)]);
    });
    const exe = compile(mb.build());
    expect(exe.fallback).toBeUndefined();
    expect(exe.stats!.kernels).toBe(2);
  });

  it("runs are independent: results are fresh, the memory is not stale", () => {
    const m = binaryModule("add", 10, OPS["add"]!);
    const exe = compile(m);
    const a = literal("f32", [10], values(10, 1));
    const b = literal("f32", [10], values(10, 2));
    const r1 = exe.run([a, b]) as Literal;
    const keep = Float32Array.from(r1.data as Float32Array);
    (r1.data as Float32Array).fill(7);
    const r2 = check(m, [b, b], exe) as Literal;
    check(m, [a, b], exe);
    expect(Float32Array.from(r2.data as Float32Array)).not.toEqual(keep);
  });

  it("a module wasm declines runs on js, saying why; what js declines too is an error", () => {
    const mb = new ModuleBuilder("wasm_declined");
    mb.entry("main", (b) => b.sin(b.parameter(arrayShape("f32", [5]))));
    const m = mb.build();
    wasmTesting.decline = "sine";
    let exe: WasmExecutable;
    try {
      exe = compile(m);
    } finally {
      delete wasmTesting.decline;
    }
    expect(exe.fallback).toMatch(/sine \(refused by wasmTesting.decline\)/);
    const inputs = [literal("f32", [5], values(5, 3))];
    // On js: bit-identical to the evaluator.
    expect(bits(exe.run(inputs))).toEqual(bits(evaluate(m, inputs)));
    expect(compile(m).fallback).toBeUndefined();
    // Past 2 GiB of memory (addresses are i32): js, decided before anything is allocated.
    const huge = new ModuleBuilder("wasm_huge");
    huge.entry("main", (b) => b.add(b.parameter(arrayShape("f32", [300_000_000])),
      b.parameter(arrayShape("f32", [300_000_000]))));
    expect(compile(huge.build()).fallback).toMatch(/its memory would be \d+ bytes/);
    const m64 = new ModuleBuilder("wasm_f64");
    m64.entry("main", (b) => b.exp(b.parameter(arrayShape("f64", [5]))));
    expect(() => compile(m64.build())).toThrow(/f64 arrays run on the interpreter only/);
  });
});

void Literal;
