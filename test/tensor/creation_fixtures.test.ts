// Creation ops against PyTorch 1.13 golden values (scripts/fixtures/gen_creation.py), on every
// registered backend: sizes, dtypes (including inference from the fill value), ranges with
// negative and fractional steps, empty results.

import { describe, expect, it } from "vitest";
import { backendNames } from "../../runtime/index.ts";
import { ops, setEagerBackend, Tensor } from "../../tensor/index.ts";
import { expectClose, type FixtureValue, loadFixtures } from "../fixtures/load.ts";

const cases = loadFixtures("creation");
const CREATION_OPS = ["zeros", "ones", "full", "arange", "linspace", "eye", "zerosLike",
  "onesLike", "fullLike"];

describe.each(backendNames())("creation ops on %s", (backend) => {
  it.each(cases.map((c) => [c.name, c] as const))("%s", (_name, c) => {
    setEagerBackend(backend);
    try {
      const fn = (ops as unknown as Record<string, (...a: unknown[]) => Tensor>)[c.op]!;
      const kwargs = c.kwargs as Record<string, FixtureValue>;
      const args: unknown[] = [...c.args];
      if (Object.keys(kwargs).length > 0) args.push(kwargs);
      // PyTorch's vectorized linspace computes `end - step * k` with a fused multiply-add;
      // Kiln rounds the product first, so those values may differ in the last bit.
      const rtol = c.op === "linspace" ? 2 ** -23 : 0;
      expectClose(fn(...args), c.out as Tensor, { atol: 0, rtol, signedZero: true }, c.name);
    } finally {
      setEagerBackend(undefined);
    }
  });
});

it("every creation op has a PyTorch case", () => {
  expect(new Set(cases.map((c) => c.op))).toEqual(new Set(CREATION_OPS));
});
