// Differential tests of every backend against the reference evaluator on fused patterns, in the
// backend's numerics tier (runtime/tiers.ts): `exact` backends bit-identical, `tolerance`
// backends (native, wasm) within toleranceProblem's bound for programs. Each pattern
// (test/runtime/fixtures/fusion_cases.ts: kLoop elementwise DAGs over data movement; kInput
// softmax, layer norm, RMS norm, column, multi-output and variadic reductions; kOutput dots
// and convolutions with epilogues; pools with elementwise work; an attention block) runs as an
// explicit fusion and as a plain module fused by optimizationPipeline(), on random shapes that
// miss the vector width and the GEMM tiles, plus fixed large cases that the thread pool splits,
// and again as a zero-size class (every instance has an input or a value with zero elements).
//
// On native every case runs with static and with shape-generic kernels, at 1, 2 and 3 threads:
// each result within the tier, and the three results bitwise equal — the runtime guarantees
// that results do not depend on the thread count (docs/runtime.md "Threads": every output
// element is computed by one thread in an order independent of the split; csrc/gemm.c states
// it for GEMM). The sampled cases' kernels are compiled in one batch per mode first. wasm
// (single-threaded, one lowering) runs every case once.

import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import type { Literal } from "../../ir/literal.ts";
import { printHlo } from "../../ir/print.ts";
import { backendNames, backendTier, getBackend } from "../../runtime/index.ts";
import {
  type NativeExecutable,
  nativeTesting,
  prepareNative,
  withNativeThreads,
} from "../../runtime/native/backend.ts";
import { toleranceProblem } from "../../runtime/tiers.ts";
import {
  casesOf,
  type FusionCase,
  largeSpecs,
  PATTERNS,
  ZERO_PATTERNS,
} from "./fixtures/fusion_cases.ts";
import { describeValue, identical } from "./fixtures/op_cases.ts";

/** Random instances per pattern on an exact backend (each gives two cases: both forms). */
const EXACT_RUNS = 30;
/** Random instances per pattern on a tolerance backend (fixed seeds; compiled C). */
const NATIVE_RUNS = 8;
/** Random instances per pattern of the zero-size class (some value has zero elements). */
const ZERO_RUNS = 15;
const NATIVE_ZERO_RUNS = 3;
const THREADS = [1, 2, 3] as const;

const MAX_SHOWN = 20_000;
const show = (v: EvalValue): string => {
  const s = describeValue(v);
  return s.length <= MAX_SHOWN ? s : `${s.slice(0, MAX_SHOWN)} ... (${s.length} chars in all)`;
};

const wants = new WeakMap<FusionCase, EvalValue>();
function want(c: FusionCase): EvalValue {
  let w = wants.get(c);
  if (w === undefined) {
    w = evaluate(c.reference, c.inputs);
    wants.set(c, w);
  }
  return w;
}

function report(backend: string, c: FusionCase, why: string, got: EvalValue, where: string):
  string {
  const hlo = c.form === "pipeline"
    ? `${printHlo(c.module)}\nbefore the passes:\n${printHlo(c.reference)}`
    : printHlo(c.module);
  return (
    `${backend} differs from the evaluator on ${c.pattern} (${c.form} form, ${c.about}` +
    `${where}): ${why}\n${hlo}\ninputs: ${c.inputs.map(show).join("; ")}\n` +
    `evaluator: ${show(want(c))}\n${backend}: ${show(got)}`
  );
}

/** Why `got` is not what the backend's tier allows for case `c`, or null. */
function problem(backend: string, c: FusionCase, got: EvalValue): string | null {
  const w = want(c);
  if (backendTier(backend) === "exact") return identical(got, w) ? null : "not bit-identical";
  return toleranceProblem(c.reference, c.inputs, got, w);
}

function leavesOf(v: EvalValue): Literal[] {
  return Array.isArray(v) ? v.flatMap(leavesOf) : [v];
}

/** The first byte offset where two results' bits differ (leaf and byte), or null. */
function bitsDiffer(a: EvalValue, b: EvalValue): string | null {
  const x = leavesOf(a);
  const y = leavesOf(b);
  if (x.length !== y.length) return `${x.length} results vs ${y.length}`;
  for (let k = 0; k < x.length; k++) {
    const p = x[k]!.data;
    const q = y[k]!.data;
    const pb = new Uint8Array(p.buffer, p.byteOffset, p.byteLength);
    const qb = new Uint8Array(q.buffer, q.byteOffset, q.byteLength);
    if (pb.length !== qb.length) return `result ${k} has ${pb.length} bytes vs ${qb.length}`;
    for (let i = 0; i < pb.length; i++) {
      if (pb[i] !== qb[i]) {
        const e = Math.floor(i / p.BYTES_PER_ELEMENT);
        return `result ${k}[${e}]: ${String(p[e])} vs ${String(q[e])}`;
      }
    }
  }
  return null;
}

const patternNames = Object.keys(PATTERNS);

for (const backend of backendNames().filter((b) => b !== "interpreter")) {
  const exact = backendTier(backend) === "exact";
  describe(`${backend} backend: fused patterns against the evaluator (${backendTier(backend)} tier)`,
    () => {
      if (exact) {
        for (const pattern of patternNames) {
          it(pattern, () => {
            fc.assert(
              fc.property(PATTERNS[pattern]!, (spec) => {
                for (const c of casesOf(pattern, spec)) {
                  const got = getBackend(backend).compile(c.module).run(c.inputs);
                  const why = problem(backend, c, got);
                  if (why !== null) throw new Error(report(backend, c, why, got, ""));
                }
              }),
              { numRuns: EXACT_RUNS },
            );
          });
        }
        for (const pattern of patternNames) {
          it(`${pattern} (zero-size class)`, () => {
            fc.assert(
              fc.property(ZERO_PATTERNS[pattern]!, (spec) => {
                for (const c of casesOf(pattern, spec)) {
                  const got = getBackend(backend).compile(c.module).run(c.inputs);
                  const why = problem(backend, c, got);
                  if (why !== null) throw new Error(report(backend, c, why, got, ""));
                }
              }),
              { numRuns: ZERO_RUNS },
            );
          });
        }
        it("large cases", () => {
          for (const [pattern, specs] of Object.entries(largeSpecs())) {
            for (const spec of specs) {
              for (const c of casesOf(pattern, spec)) {
                const got = getBackend(backend).compile(c.module).run(c.inputs);
                const why = problem(backend, c, got);
                if (why !== null) throw new Error(report(backend, c, why, got, ""));
              }
            }
          }
        });
        return;
      }

      // A tolerance backend: fixed samples per pattern and the large cases, in both lowering
      // modes, at every thread count.
      let byPattern: Map<string, FusionCase[]> | undefined;
      const samples = (): Map<string, FusionCase[]> => {
        if (byPattern) return byPattern;
        byPattern = new Map();
        const large = largeSpecs();
        patternNames.forEach((pattern, k) => {
          const specs = fc.sample(PATTERNS[pattern]!, { numRuns: NATIVE_RUNS, seed: 4200 + k });
          const zero = fc.sample(ZERO_PATTERNS[pattern]!, {
            numRuns: NATIVE_ZERO_RUNS,
            seed: 4600 + k,
          });
          byPattern!.set(pattern, [...specs, ...zero, ...(large[pattern] ?? [])]
            .flatMap((s) => casesOf(pattern, s)));
        });
        return byPattern;
      };

      it("has large cases for every pattern", () => {
        expect(Object.keys(largeSpecs()).sort()).toEqual([...patternNames].sort());
      });

      // Lowering modes and thread counts are native's; another tolerance backend (wasm) runs
      // each case once, single-threaded.
      const native = backend === "native";
      const modes = native ? (["never", "always"] as const) : (["never"] as const);
      const threads: readonly number[] = native ? THREADS : [1];
      for (const mode of modes) {
        describe(mode === "never" ? "static kernels" : "shape-generic kernels", () => {
          beforeAll(() => {
            if (!native) return;
            nativeTesting.generic = mode;
            try {
              prepareNative([...samples().values()].flat().map((c) => c.module));
            } finally {
              nativeTesting.generic = "auto";
            }
          }, 300_000);
          afterAll(() => {
            nativeTesting.generic = "auto";
          });
          for (const pattern of patternNames) {
            it(pattern, () => {
              for (const c of samples().get(pattern)!) {
                let exe: NativeExecutable;
                nativeTesting.generic = mode;
                try {
                  exe = getBackend(backend).compile(c.module) as NativeExecutable;
                } finally {
                  nativeTesting.generic = "auto";
                }
                const results: EvalValue[] = [];
                for (const n of threads) {
                  const got = native ? withNativeThreads(n, () => exe.run(c.inputs))
                    : exe.run(c.inputs);
                  const why = problem(backend, c, got);
                  const where = `, ${mode === "never" ? "static" : "shape-generic"} kernels, ` +
                    `${n} thread(s)${exe.fallback ? `, on js: ${exe.fallback}` : ""}`;
                  if (why !== null) throw new Error(report(backend, c, why, got, where));
                  results.push(got);
                }
                for (let t = 1; t < threads.length; t++) {
                  const diff = bitsDiffer(results[0]!, results[t]!);
                  if (diff !== null) {
                    throw new Error(
                      `${backend}: ${c.pattern} (${c.form} form, ${c.about}, ${mode} kernels) ` +
                        `is not bitwise equal at 1 and ${threads[t]} threads: ${diff}\n` +
                        `${printHlo(c.module)}\ninputs: ${c.inputs.map(show).join("; ")}\n` +
                        `1 thread: ${show(results[0]!)}\n${threads[t]} threads: ` +
                        `${show(results[t]!)}`,
                    );
                  }
                }
              }
            });
          }
        });
      }
    });
}
