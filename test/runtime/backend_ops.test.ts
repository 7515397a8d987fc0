// Differential tests of every backend against the reference evaluator, one per opcode, in the
// backend's numerics tier (runtime/tiers.ts): `exact` backends must be bit-identical (dot and
// convolution included: the js kernels accumulate in double in the evaluator's order);
// `tolerance` backends (native, wasm) within the tier's bound for the op class — integers, data
// movement, selection and the basic float operations exact, transcendental functions within
// their ulp bound, sums within c·n·eps·Σ|terms|. The cases (test/runtime/fixtures/op_cases.ts)
// have random shapes with zero-sized dims, every element type the opcode allows, NaN, ±inf, -0
// and integer corner values, and again as a zero-size class (every case has a value with zero
// elements: empty operands, results or intermediates). A native backend compiles the sampled
// cases' kernels in one batch first (one compiler run per few hundred kernels, as a model's
// compile does), then checks each case; the shared cache directory of the test run keeps a
// second run from compiling.

import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evaluate } from "../../ir/evaluate.ts";
import { OPCODES } from "../../ir/opcodes.ts";
import { printHlo } from "../../ir/print.ts";
import { backendNames, backendTier, getBackend } from "../../runtime/index.ts";
import { nativeTesting, prepareNative } from "../../runtime/native/backend.ts";
import { toleranceProblem } from "../../runtime/tiers.ts";
import {
  type Case,
  CASES,
  describeValue,
  identical,
  UNSUPPORTED,
  ZERO_CASES,
} from "./fixtures/op_cases.ts";

const EXACT_RUNS = 100;
/** Cases per opcode on a tolerance-tier backend (each one's kernels are compiled C). */
const NATIVE_RUNS = 24;

function problem(backend: string, c: Case): string | null {
  const want = evaluate(c.module, c.inputs);
  const exe = getBackend(backend).compile(c.module);
  const got = exe.run(c.inputs);
  if (backendTier(backend) === "exact") {
    return identical(got, want) ? null : "not bit-identical";
  }
  return toleranceProblem(c.module, c.inputs, got, want);
}

function explain(backend: string, c: Case, why: string): string {
  const want = evaluate(c.module, c.inputs);
  const got = getBackend(backend).compile(c.module).run(c.inputs);
  return (
    `${backend} differs from the evaluator (${why})\n${printHlo(c.module)}\ninputs: ` +
    `${c.inputs.map(describeValue).join("; ")}\nevaluator: ${describeValue(want)}\n` +
    `${backend}: ${describeValue(got)}`
  );
}

/** The case classes: the default sizes, and the zero-size class (some value is empty). */
const CLASSES = [
  { name: "", cases: CASES, exactRuns: EXACT_RUNS, nativeRuns: NATIVE_RUNS, seed: 1000 },
  { name: " (zero-size class)", cases: ZERO_CASES, exactRuns: 40, nativeRuns: 6, seed: 5000 },
] as const;

for (const backend of backendNames().filter((b) => b !== "interpreter")) {
  const exact = backendTier(backend) === "exact";
  for (const cls of CLASSES) {
    const { cases } = cls;
    describe(
      `${backend} backend: every opcode against the evaluator${cls.name} ` +
        `(${backendTier(backend)} tier)`,
      () => {
        it("has a case for every opcode", () => {
          expect(Object.keys(cases).sort()).toEqual([...OPCODES].sort());
        });
        if (exact) {
          for (const op of OPCODES) {
            const c = cases[op];
            if (c === UNSUPPORTED) continue;
            it(op, () => {
              fc.assert(
                fc.property(c, (k) => {
                  const why = problem(backend, k);
                  if (why !== null) throw new Error(explain(backend, k, why));
                }),
                { numRuns: cls.exactRuns },
              );
            });
          }
          return;
        }
        // A tolerance backend: fixed samples per opcode, their kernels built in one batch,
        // lowered both ways a program can be (static shapes, and shape-generic as eager ops and
        // small programs are).
        // Shape-generic kernels are native's; another tolerance backend (wasm) runs once.
        const native = backend === "native";
        const modes = native ? (["never", "always"] as const) : (["never"] as const);
        for (const mode of modes) {
          describe(mode === "never" ? "static kernels" : "shape-generic kernels", () => {
            const samples = new Map<string, Case[]>();
            beforeAll(() => {
              nativeTesting.generic = mode;
              const all: Case[] = [];
              OPCODES.forEach((op, k) => {
                const c = cases[op];
                if (c === UNSUPPORTED) return;
                const cs = fc.sample(c, { numRuns: cls.nativeRuns, seed: cls.seed + k });
                samples.set(op, cs);
                all.push(...cs);
              });
              if (native) prepareNative(all.map((c) => c.module));
            }, 300_000);
            afterAll(() => {
              nativeTesting.generic = "auto";
            });
            for (const op of OPCODES) {
              if (cases[op] === UNSUPPORTED) continue;
              it(op, () => {
                nativeTesting.generic = mode;
                try {
                  for (const k of samples.get(op)!) {
                    const why = problem(backend, k);
                    if (why !== null) throw new Error(explain(backend, k, why));
                  }
                } finally {
                  nativeTesting.generic = "auto";
                }
              });
            }
          });
        }
      },
    );
  }
}
