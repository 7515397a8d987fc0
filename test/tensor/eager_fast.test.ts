// The eager op cache's hit path (tensor/dispatch.ts `runFast`, Executable.runLeaves): a hit
// gives exactly what the checked path gives (first call vs later calls, js and native, tuple
// results, scalar operands, views of sliced operands), half-precision operands still convert,
// results of successive hits are independent arrays (small ones share slabs: runtime/kernel/
// io.ts), hits are counted, and an op misused after its program is cached still fails with the
// op's error and the user's line.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendNames, ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { opCacheStats, resetOpCache, setEagerBackend } from "../../tensor/dispatch.ts";
import { add, matmul, mul, relu, sum, tensor, type Tensor } from "../../tensor/index.ts";
import { OpError } from "../../tensor/errors.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => {
  setEagerBackend(undefined);
  setDefaultProgramCache(undefined);
});

const backends = backendNames().filter((b) => b === "js" || b === "native");

const grid = (n: number, f: (i: number) => number) =>
  tensor(Array.from({ length: n * n }, (_, i) => f(i))).reshape([n, n]);

describe.each(backends)("eager hits on %s", (backend) => {
  it("give the first (checked) call's values, dtypes and shapes", () => {
    setEagerBackend(backend);
    resetOpCache();
    const a = grid(8, (i) => i / 7 - 3);
    const b = grid(8, (i) => 1 - i / 50);
    const calls: [string, () => Tensor | Tensor[]][] = [
      ["add", () => add(a, b)],
      ["mul by a scalar", () => mul(a, 2.5)],
      ["relu", () => relu(a)],
      ["sum", () => sum(a)],
      ["matmul", () => matmul(a, b)],
      ["int add", () => add(a.to("int32"), 3)],
      ["compare", () => a.gt(b)],
      ["max with indices", () => a.max(1, true) as unknown as Tensor[]],
      ["a row of a slice", () => a.narrow(0, 2, 3).add(1)],
      ["float16", () => add(a.to("float16"), b.to("float16"))],
    ];
    for (const [what, call] of calls) {
      const flat = (r: Tensor | Tensor[] | { values: Tensor; indices: Tensor }) =>
        (Array.isArray(r) ? r : "values" in r ? [r.values, r.indices] : [r]).map((t) => ({
          dtype: t.dtype,
          shape: [...t.shape],
          data: Array.from(t.data() as ArrayLike<number | bigint>, Number),
        }));
      const first = flat(call() as never);
      const hits = opCacheStats().hits;
      const second = flat(call() as never);
      const third = flat(call() as never);
      expect(opCacheStats().hits, what).toBeGreaterThan(hits);
      expect(second, what).toEqual(first);
      expect(third, what).toEqual(first);
    }
  });

  it("return independent results, also when small ones share a slab", () => {
    setEagerBackend(backend);
    const outs: Tensor[] = [];
    for (let k = 0; k < 300; k++) outs.push(add(grid(8, (i) => i), k));
    outs.forEach((t, k) => {
      const d = t.data() as Float32Array;
      expect(d[0]).toBe(k);
      expect(d[63]).toBe(63 + k);
    });
  });

  it("still fail with the op's error and the user's line once the program is cached", () => {
    setEagerBackend(backend);
    const a = grid(4, (i) => i);
    add(a, a);
    add(a, a);
    const bad = () => add(a, grid(3, (i) => i));
    expect(bad).toThrow(OpError);
    expect(bad).toThrow(/eager_fast\.test\.ts:\d+:\d+/);
  });
});
