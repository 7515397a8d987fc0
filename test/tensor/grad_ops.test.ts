// Every differentiable frontend op's gradient (the cases of grad_cases.ts), two ways:
//   (a) float64 central differences: the case is lowered into one module (the ops it dispatches,
//       as eager compile() lowers one), its vjpModule (the IR derivative rules) and the forward
//       are rewritten from f32 to f64, and the vjp is compared with central differences
//       (step 1e-6) of <ct, f(x)> on the reference evaluator — the op's lowering plus the rules,
//       free of float32 rounding: |vjp - fd| <= 1e-6 (1 + |fd|) per element;
//   (b) eager float32: the same inputs and cotangents through the frontend (requiresGrad_, the
//       op, backward) must give the f64 gradient within 1e-5 of max(1, max |g|). Run on the js
//       backend: the native backend's C compiler costs ~0.4 s per new program and would take
//       this file past a minute; grad_fixtures.test.ts runs PyTorch's gradients on every backend.
// Ops waiting for an IR rule (PENDING_RULES) are asserted to still fail with "no derivative for
// <opcode>", and known-wrong cases (KNOWN_WRONG) to still be wrong, so neither passes silently.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { evaluate } from "../../ir/evaluate.ts";
import { Literal, literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { printHlo } from "../../ir/print.ts";
import { AutodiffError } from "../../passes/autodiff.ts";
import { registeredOps, setEagerBackend } from "../../tensor/index.ts";
import {
  casesByOp,
  GRAD_CASES,
  gradStatus,
  KNOWN_WRONG,
  NO_GRADIENT,
  pendingOf,
  PENDING_RULES,
  ZERO_GRADIENT,
} from "./grad_cases.ts";
import {
  caseInputs,
  checkF64,
  cotangents,
  eagerGrads,
  type GradCase,
  toF64,
  traceCase,
} from "./grad_check.ts";
import { centralDifferencesF64 } from "../../tensor/grad_check.ts";

const FD_TOL = 1e-6;
const EAGER_TOL = 1e-5;

beforeAll(() => setEagerBackend("js"));
afterAll(() => setEagerBackend(undefined));

/** A case's inputs, its module (which must dispatch the op, for a lowering) and cotangents. */
function prepare(k: GradCase) {
  const values = caseInputs(k);
  const traced = traceCase(k, values.inputs);
  if (registeredOps().get(k.op)?.kind === "lowering") expect(traced.lowerings).toContain(k.op);
  const cts = cotangents(k, traced.outputs);
  return { values, traced, cts };
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const checked = GRAD_CASES.filter((k) => pendingOf(k) === undefined && !(k.name in KNOWN_WRONG));

describe("gradients: f64 central differences, then eager float32", () => {
  it.each(checked.map((k) => [k.name, k] as const))("%s", (_, k) => {
    const { values, traced, cts } = prepare(k);
    const f64 = checkF64(traced, values, cts);
    const w = f64.worst;
    expect(
      w.error,
      `input ${w.input} element ${w.index}: vjp ${w.vjp}, central difference ${w.fd}`,
    ).toBeLessThanOrEqual(k.fdTol ?? FD_TOL);
    if (ZERO_GRADIENT.has(k.op)) {
      for (const g of f64.grads) if (g) expect([...g].every((v) => v === 0)).toBe(true);
    }
    const eager = eagerGrads(k, values, cts);
    eager.forEach((got, a) => {
      const raw = f64.grads[a];
      const want = raw !== undefined && k.convention ? k.convention(a, [...raw]) : raw;
      if (got === undefined || want === undefined) {
        expect(got === undefined && want === undefined, `input ${a}`).toBe(true);
        return;
      }
      let scale = 1;
      for (const v of want) scale = Math.max(scale, Math.abs(v));
      const tol = (k.eagerTol ?? EAGER_TOL) * scale;
      for (let j = 0; j < want.length; j++) {
        const d = Math.abs(got[j]! - want[j]!);
        if (!(d <= tol)) {
          expect.fail(`input ${a} element ${j}: eager ${got[j]}, f64 ${want[j]} (tol ${tol})`);
        }
      }
    });
  });
});

describe("PENDING_RULES: still no IR rule (the op's own derivative checked by differences)", () => {
  const pending = GRAD_CASES.filter((k) => pendingOf(k) !== undefined);
  it.each(pending.map((k) => [k.name, k] as const))("%s", (_, k) => {
    const { opcode } = pendingOf(k)!;
    const message = new RegExp(`no derivative for ${escape(opcode)} %`);
    const { values, traced, cts } = prepare(k);
    let err: unknown;
    try {
      checkF64(traced, values, cts);
    } catch (e) {
      err = e;
    }
    expect(err, "the f64 check no longer fails: remove the entry from PENDING_RULES").toBeInstanceOf(
      AutodiffError,
    );
    expect((err as Error).message).toMatch(message);
    if (!pendingOf(k)!.ownVjp) {
      expect(() => eagerGrads(k, values, cts)).toThrow(message);
      return;
    }
    // The op's own derivative: eager float32 backward against f64 central differences.
    const wrt = values.wrt.flatMap((w, a) => (w ? [a] : []));
    const { fds } = centralDifferencesF64(traced, values.inputs, wrt, cts);
    const eager = eagerGrads(k, values, cts);
    eager.forEach((got, a) => {
      const want = fds[a];
      if (got === undefined || want === undefined) {
        expect(got === undefined && want === undefined, `input ${a}`).toBe(true);
        return;
      }
      let scale = 1;
      for (const v of want) scale = Math.max(scale, Math.abs(v));
      const tol = (k.eagerTol ?? EAGER_TOL) * scale;
      for (let j = 0; j < want.length; j++) {
        if (!(Math.abs(got[j]! - want[j]!) <= tol)) {
          expect.fail(`input ${a} element ${j}: eager ${got[j]}, central difference ${want[j]} (tol ${tol})`);
        }
      }
    });
  });
});

describe("KNOWN_WRONG: still wrong", () => {
  const wrong = GRAD_CASES.filter((k) => k.name in KNOWN_WRONG);
  it("names only cases of the harness (empty now: pow's NaN was fixed in its lowering)", () => {
    for (const name of Object.keys(KNOWN_WRONG)) {
      expect(GRAD_CASES.some((k) => k.name === name), name).toBe(true);
    }
  });
  // One test per entry, when there are entries (an empty table registers none).
  const each = wrong.length > 0 ? it.each(wrong.map((k) => [k.name, k] as const)) : undefined;
  each?.("%s", (_, k) => {
    const { values, traced, cts } = prepare(k);
    const f64 = checkF64(traced, values, cts);
    // NaN fails every comparison: the worst error stays NaN (or above the tolerance).
    expect(
      !(f64.worst.error <= (k.fdTol ?? FD_TOL)),
      "the gradient is right now: remove the entry from KNOWN_WRONG",
    ).toBe(true);
  });
});

describe("toF64", () => {
  const M = `HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[3] parameter(0)
  i = s32[3] parameter(1)
  tenth = f32[] constant(0.1)
  t = f32[3] broadcast(tenth), dimensions={}
  y = f32[3] multiply(x, t)
  zero = f32[] constant(0)
  s = f32[] reduce(y, zero), dimensions={0}, to_apply=add
  n = s32[3] convert(y)
  f = f32[3] convert(i)
  ROOT r = (f32[], s32[3], f32[3]) tuple(s, n, f)
}
`;

  it("makes every f32 shape, reducer and constant f64 (values exact), and nothing else", () => {
    const text = printHlo(toF64(parseHlo(M)));
    expect(text).not.toContain("f32");
    expect(text).toContain("s32[3] convert(");
    expect(text).toContain(`f64[] constant(${Math.fround(0.1)})`);
    expect(text).toMatch(/add[^\n]*\{\n\s*%?a = f64\[\] parameter\(0\)/);
  });

  it("the rewritten module computes in double precision", () => {
    const x = [1 / 3, 2 / 3, 1].map(Math.fround);
    const [s] = evaluate(toF64(parseHlo(M)), [
      new Literal("f64", [3], Float64Array.from(x)),
      literal("s32", [3], [1, 2, 3]),
    ]) as Literal[];
    const tenth = Math.fround(0.1);
    expect(s!.data[0]).toBe(x[0]! * tenth + x[1]! * tenth + x[2]! * tenth);
  });
});

describe("the case table", () => {
  const ops = registeredOps();
  const byOp = casesByOp();

  it("every registered op has cases or a reason it has no gradient, not both", () => {
    const missing = [...ops.keys()].filter((n) => !byOp.has(n) && !(n in NO_GRADIENT));
    expect(missing).toEqual([]);
    const both = [...byOp.keys()].filter((n) => n in NO_GRADIENT);
    expect(both).toEqual([]);
  });

  it("names are unique; every case, pending entry and known-wrong entry names a real op or case", () => {
    const names = GRAD_CASES.map((k) => k.name);
    expect(new Set(names).size).toBe(names.length);
    for (const k of GRAD_CASES) expect(ops.has(k.op), k.name).toBe(true);
    for (const key of Object.keys(PENDING_RULES)) {
      expect(byOp.has(key) || names.includes(key), key).toBe(true);
    }
    for (const key of Object.keys(KNOWN_WRONG)) expect(names.includes(key), key).toBe(true);
    for (const key of Object.keys(NO_GRADIENT)) expect(ops.has(key), key).toBe(true);
  });

  it("every op's status is one the docs can show", () => {
    for (const name of ops.keys()) {
      expect(gradStatus(name, new Set()), name).toMatch(/^(yes|no \(|pending rule: )/);
    }
  });
});
