// The stages `kiln dump` shows for a program with bounded dynamic dims: the captured module
// keeps its `<=N` dims (what the trace found), the dynamic padder runs first (as in compile()),
// and every later stage is the static, padded program the backend compiles, with the same
// results as the captured one at every real size.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { optimizeWithSnapshots, pipelinePassNames } from "../../cli/capture.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { isDynamic } from "../../ir/shape.ts";
import { runPadded } from "../../passes/index.ts";
import { getBackend } from "../../runtime/index.ts";

const root = join(import.meta.dirname, "..", "..");

describe("dump stages of a dynamic program", () => {
  const text = readFileSync(join(root, "test/ir/corpus/dynamic_mean.hlo"), "utf8");

  it("pads first, then optimizes a static program that computes the captured one", () => {
    const captured = parseHlo(text);
    const { optimized, passes } = optimizeWithSnapshots(captured);
    expect(passes[0]!.stage).toBe("dynamic-padder");
    const dynamicAnywhere = (m: typeof captured) =>
      m.computations.some((c) => c.instructions.some((i) => isDynamic(i.shape)));
    expect(dynamicAnywhere(captured)).toBe(true);
    for (const p of passes) expect(dynamicAnywhere(p.module)).toBe(false);
    expect(dynamicAnywhere(optimized)).toBe(false);

    const param = captured.entry.parameters[0]!.shape;
    if (param.kind !== "array") throw new Error("dynamic_mean: expected an array parameter");
    const exe = getBackend("interpreter").compile(optimized);
    const bound = param.dims;
    const dyn = param.dynamic.findIndex((d) => d);
    for (const n of [1, 2, Math.floor(bound[dyn]! / 2), bound[dyn]!]) {
      const dims = bound.map((d, k) => (k === dyn ? n : d));
      const count = dims.reduce((a, b) => a * b, 1);
      const data = Float32Array.from({ length: count }, (_, k) => Math.sin(k + 1));
      const x = new Literal("f32", dims, data);
      expect(runPadded(exe, captured, [x])).toEqual(evaluate(captured, [x]));
    }
  });

  it("names the padder among the passes --pass can select", () => {
    expect(pipelinePassNames()[0]).toBe("dynamic-padder");
  });
});
