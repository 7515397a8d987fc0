// Kiln's eager gradients against PyTorch's: every case of test/fixtures/grad.json (written by
// scripts/fixtures/gen_grad.py from PyTorch 1.13: inputs, the output cotangents, PyTorch's
// input gradients) on every registered backend: the wrt inputs require grad, the op runs, and
// backward(float outputs, cotangents) must give PyTorch's gradients within atol 2e-5 + rtol 1e-4
// (float32 both sides; the order of accumulation and libm differ, and a gradient is a longer
// chain than the forward the other fixture tests hold to 1e-5). Cases of ops waiting for an IR
// rule (PENDING_RULES in grad_cases.ts) must still fail with "no derivative for <opcode>"; cases
// where Kiln's gradient differs from PyTorch's (DIFFERS_FROM_PYTORCH there, each with how) must
// still differ.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendNames } from "../../runtime/index.ts";
import { backward } from "../../tensor/autograd.ts";
import { setEagerBackend, Tensor, zerosLike } from "../../tensor/index.ts";
import { callFunctional, decodeValue, expectClose, type FixtureValue } from "../fixtures/load.ts";
import { DIFFERS_FROM_PYTORCH as DIFFERS, pendingOf } from "./grad_cases.ts";
import { floatOutputs } from "./grad_check.ts";
import { tryCase, warmNative } from "./native_warm.ts";

interface RawCase {
  op: string;
  name: string;
  args: unknown[];
  kwargs: Record<string, unknown>;
  wrt: (number | [number, number])[];
  ct: unknown[];
  grads: unknown[];
}

const RAW = (
  JSON.parse(readFileSync(join(import.meta.dirname, "..", "fixtures", "grad.json"), "utf8")) as {
    cases: RawCase[];
  }
).cases;

const TOL = { atol: 2e-5, rtol: 1e-4 };

/** Kiln's gradients for a case: fresh leaves from the fixture, the op, backward. */
function kilnGrads(raw: RawCase): { grads: (Tensor | null)[]; expected: Tensor[] } {
  const args = raw.args.map(decodeValue);
  const leaves = raw.wrt.map((w) => {
    const holder = (typeof w === "number" ? args : (args[w[0]] as FixtureValue[])) as FixtureValue[];
    const k = typeof w === "number" ? w : w[1];
    const t = holder[k];
    if (!(t instanceof Tensor)) throw new Error(`${raw.name}: wrt ${JSON.stringify(w)} is not a tensor`);
    const leaf = t.requiresGrad_();
    holder[k] = leaf;
    return leaf;
  });
  const kwargs = Object.fromEntries(Object.entries(raw.kwargs).map(([k, v]) => [k, decodeValue(v)]));
  const out = callFunctional({ op: raw.op, name: raw.name, args, kwargs, out: null });
  const cts = raw.ct.map((v) => decodeValue(v) as Tensor);
  backward(floatOutputs(out), cts);
  return {
    grads: leaves.map((l) => l.grad),
    expected: raw.grads.map((v) => decodeValue(v) as Tensor),
  };
}

function compare(raw: RawCase): void {
  const { grads, expected } = kilnGrads(raw);
  expected.forEach((e, k) => {
    const g = grads[k] ?? zerosLike(e);
    expectClose(g, e, TOL, `${raw.name} grad ${k}`);
  });
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe.each(backendNames())("PyTorch gradients [%s]", (backend) => {
  beforeAll(() => {
    if (backend === "native") {
      warmNative(() => {
        for (const raw of RAW) tryCase(() => kilnGrads(raw));
      });
    }
    setEagerBackend(backend);
  }, 300_000);
  afterAll(() => setEagerBackend(undefined));
  it.each(RAW.map((c) => [c.name, c] as const))("%s", (_, raw) => {
    const pending = pendingOf(raw);
    if (pending !== undefined && !pending.ownVjp) {
      expect(() => kilnGrads(raw)).toThrow(new RegExp(`no derivative for ${escape(pending.opcode)} %`));
      return;
    }
    if (raw.name in DIFFERS) {
      expect(
        () => compare(raw),
        `${raw.name} matches PyTorch now: remove it from DIFFERS_FROM_PYTORCH`,
      ).toThrow();
      return;
    }
    compare(raw);
  });
});

it("the fixtures cover at least 40 cases, and DIFFERS names only fixture cases", () => {
  expect(RAW.length).toBeGreaterThanOrEqual(40);
  const names = new Set(RAW.map((c) => c.name));
  for (const k of Object.keys(DIFFERS)) expect(names.has(k), k).toBe(true);
});
