// The side-by-side benchmark harness (bench/peers/harness.ts): the cross-check that decides
// whether a runtime's figures are comparable, the median/spread summary, the tables and their
// ratio to onnxruntime at the same thread count. Nothing here times anything or needs the peer
// packages; sizes are tiny.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  crossCheck,
  jsonRow,
  markdownTable,
  ORT_COLUMN,
  ortRatio,
  ortRuntime,
  rowThreads,
  summarize,
  textTable,
  uniform,
  type WorkloadResult,
} from "../../bench/peers/harness.ts";
import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import { arrayShape } from "../../ir/shape.ts";
import { matmul, tensor } from "../../index.ts";

const tol = { rtol: 1e-5, atol: 1e-6 };

describe("crossCheck", () => {
  it("accepts identical arrays with a zero difference", () => {
    fc.assert(
      fc.property(fc.array(fc.float({ noNaN: true, noDefaultInfinity: true })), (xs) => {
        const a = Float32Array.from(xs);
        const r = crossCheck(a, a.slice(), tol);
        expect(r.ok).toBe(true);
        expect(r.maxAbsDiff).toBe(0);
      }),
    );
  });

  it("holds the whole array to atol + rtol * max|ref|", () => {
    const ref = Float32Array.from([100, 1, -2]);
    const bound = 1e-6 + 1e-5 * 100;
    const inside = Float32Array.from([100, 1 + bound / 2, -2]);
    const outside = Float32Array.from([100, 1, -2 - bound * 2]);
    expect(crossCheck(inside, ref, tol).ok).toBe(true);
    const bad = crossCheck(outside, ref, tol);
    expect(bad.ok).toBe(false);
    expect(bad.maxAbsDiff).toBe(Math.abs(outside[2]! - ref[2]!));
    expect(bad.why).toMatch(/^element 2: /);
  });

  it("rejects a NaN where the reference has a number, and the other way round", () => {
    expect(crossCheck([1, NaN], [1, 2], tol)).toMatchObject({ ok: false });
    expect(crossCheck([1, 2], [1, NaN], tol).why).toMatch(/element 1/);
    expect(crossCheck([1, NaN], [1, NaN], tol)).toMatchObject({ ok: true, maxAbsDiff: 0 });
  });

  it("rejects a length mismatch before comparing values", () => {
    const r = crossCheck([1, 2, 3], [1, 2], tol);
    expect(r.ok).toBe(false);
    expect(r.why).toBe("length 3, expected 2");
  });

  it("passes Kiln's matmul against the reference evaluator on a tiny size", () => {
    const n = 5;
    const a = uniform(n * n, 1);
    const b = uniform(n * n, 2);
    const mb = new ModuleBuilder("mm");
    mb.entry("main", (bb) => {
      const x = bb.parameter(arrayShape("f32", [n, n]));
      const y = bb.parameter(arrayShape("f32", [n, n]));
      return bb.dot(x, y, { lhsContracting: [1], rhsContracting: [0] });
    });
    const ref = evaluate(mb.build(), [
      literal("f32", [n, n], a),
      literal("f32", [n, n], b),
    ]) as Literal;
    const got = matmul(tensor(a, { shape: [n, n] }), tensor(b, { shape: [n, n] })).data();
    const r = crossCheck(got as Float32Array, ref.data as Float32Array, tol);
    expect(r.ok).toBe(true);
    // A wrong result (transposed operands) is caught.
    const wrong = matmul(tensor(b, { shape: [n, n] }), tensor(a, { shape: [n, n] })).data();
    expect(crossCheck(wrong as Float32Array, ref.data as Float32Array, tol).ok).toBe(false);
  });
});

describe("summarize", () => {
  it("takes the median (mean of the middle two for even counts) and the p10-p90 spread", () => {
    expect(summarize([3, 1, 2])).toEqual({ medianMs: 2, spread: (3 - 1) / 2, runs: 3 });
    expect(summarize([4, 1, 3, 2]).medianMs).toBe(2.5);
    expect(summarize([5, 5, 5]).spread).toBe(0);
    expect(() => summarize([])).toThrow(/no runs/);
  });
});

describe("tables", () => {
  const w: WorkloadResult = {
    name: "matmul 2",
    unit: "GFLOP/s",
    work: 2e6,
    baseline: "Kiln compiled (js)",
    rows: [
      { runtime: "Kiln compiled (js)", timing: { medianMs: 2, spread: 0.1, runs: 5 } },
      { runtime: "peer", timing: { medianMs: 1, spread: 0, runs: 5 }, maxAbsDiff: 1e-7 },
      { runtime: "missing", note: "skipped: not installed" },
    ],
  };

  it("prints rate and the ratio to the baseline, and a dash for untimed rows", () => {
    const text = textTable(w).split("\n");
    expect(text[0]).toBe("## matmul 2");
    expect(text[2]).toMatch(/^Kiln compiled \(js\)\s+2\.000\s+10\.0%\s+5\s+1\.00\s+1\.00/);
    expect(text[3]).toMatch(/^peer\s+1\.000\s+0\.0%\s+5\s+2\.00\s+0\.50\s+1\.0e-7/);
    expect(text[4]).toMatch(/^missing\s+-\s+-\s+-\s+-\s+-\s+-\s+skipped: not installed$/);
    const md = markdownTable(w).split("\n");
    expect(md[1]).toBe("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    expect(md).toHaveLength(5);
  });

  it("divides a Kiln row stating its threads by onnxruntime's row at that count", () => {
    const t = (medianMs: number) => ({ medianMs, spread: 0, runs: 3 });
    const withOrt: WorkloadResult = {
      name: "matmul 2",
      baseline: "Kiln compiled (js)",
      rows: [
        { runtime: "Kiln compiled (native, 1 thread)", timing: t(3) },
        { runtime: "Kiln compiled (native, 4 threads), 39-token window", timing: t(2) },
        { runtime: "Kiln compiled (native, 8 threads)", timing: t(2) },
        { runtime: "Kiln eager (native)", timing: t(5) },
        { runtime: "Kiln compiled (js)", timing: t(10) },
        { runtime: ortRuntime(1), timing: t(2) },
        { runtime: ortRuntime(4), timing: t(4) },
        { runtime: "tfjs wasm (1 thread)", timing: t(1) },
      ],
    };
    expect(ortRuntime(1)).toBe("onnxruntime-node (1 thread)");
    expect(ortRuntime(4)).toBe("onnxruntime-node (4 threads)");
    expect(withOrt.rows.map((r) => rowThreads(r.runtime))).toEqual([
      1, 4, 8, undefined, undefined, 1, 4, 1,
    ]);
    expect(withOrt.rows.map((r) => ortRatio(withOrt, r))).toEqual([
      1.5, 0.5, undefined, undefined, undefined, undefined, undefined, undefined,
    ]);
    const text = textTable(withOrt).split("\n");
    expect(text[1]).toContain(`x Kiln compiled (js)  ${ORT_COLUMN}`);
    expect(text[2]).toMatch(/^Kiln compiled \(native, 1 thread\)\s+3\.000.*\s0\.30\s+1\.50\s/);
    // No onnxruntime row in a table (compile times): no such column.
    expect(textTable(w).split("\n")[1]).not.toContain(ORT_COLUMN);
  });

  it("puts a Kiln row's cache statistics in its note and keeps them through JSON", () => {
    const row = {
      runtime: "Kiln lazy (js)",
      timing: { medianMs: 1, spread: 0, runs: 3 },
      note: "static KV cache",
      cache: {
        requests: 40,
        compiles: 3,
        compileMs: 52.4,
        hits: { memory: 30, disk: 5, shapeDynamic: 2 },
      },
    };
    const back = jsonRow(JSON.parse(JSON.stringify(jsonRow(row))) as typeof row);
    expect(back.cache).toEqual(row.cache);
    const text = textTable({ name: "gen", baseline: "Kiln lazy (js)", rows: [back] });
    expect(text.split("\n")[2]).toMatch(/static KV cache; cache: 3 compiles \(52 ms\), 37 hits /);
    expect(text.split("\n")[2]).toMatch(/\(30 memory, 5 disk, 2 shape-dynamic\) of 40 requests$/);
  });
});
