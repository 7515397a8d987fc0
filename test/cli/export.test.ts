// `kiln export`: the captured program written as an HLO proto or text file reads back (proto
// reader, text parser) as the program `kiln dump --stage captured` shows, and verifies; a bad
// --format is a usage error and an unwritable --out an output error.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { capture, requireGraph } from "../../cli/capture.ts";
import { EXIT } from "../../cli/errors.ts";
import { exportedProgram } from "../../cli/export.ts";
import { argsFor, loadModel } from "../../cli/load.ts";
import { captureProgram } from "../../compiler/index.ts";
import { main } from "../../cli/main.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { fingerprint } from "../../ir/fingerprint.ts";
import { Literal } from "../../ir/literal.ts";
import { parseHlo } from "../../ir/parse.ts";
import { moduleFromProto } from "../../ir/proto.ts";
import { verifyModule } from "../../ir/verify.ts";
import { manualSeed, nn, randn, type Tensor } from "../../index.ts";

const dir = mkdtempSync(join(tmpdir(), "kiln-export-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, (s) => out.push(s), (s) => err.push(s));
  return { code, out, err };
}

describe("kiln export", () => {
  it("writes the captured program as proto and as text, both reading back the same", async () => {
    const model = await loadModel("mlp", "tiny");
    const want = fingerprint(requireGraph(model, capture(model, undefined, "interpreter")));
    const pb = join(dir, "mlp.pb");
    const hlo = join(dir, "mlp.hlo");
    const a = await run(["export", "mlp", "--format", "hlo-proto", "--out", pb]);
    expect(a.code).toBe(EXIT.ok);
    expect(a.out.join("\n")).toMatch(/mlp\.pb: hlo-proto, 7 entry parameters/);
    const b = await run(["export", "mlp", "--format", "hlo-text", "--out", hlo]);
    expect(b.code).toBe(EXIT.ok);
    const fromProto = moduleFromProto(readFileSync(pb));
    const fromText = parseHlo(readFileSync(hlo, "utf8"));
    verifyModule(fromProto);
    verifyModule(fromText);
    expect(fingerprint(fromProto)).toBe(want);
    expect(fingerprint(fromText)).toBe(want);
  });

  it("lists each parameter in <out>.json; --weights inline leaves only the input", async () => {
    const pb = join(dir, "mlp-params.pb");
    const a = await run(["export", "mlp", "--out", pb]);
    expect(a.code).toBe(EXIT.ok);
    expect(a.out.join("\n")).toMatch(
      /7 entry parameters \(x, layers\.0\.weight, layers\.0\.bias,/);
    const side = JSON.parse(readFileSync(`${pb}.json`, "utf8")) as {
      weights: string;
      parameters: { index: number; kind: string; path?: string; name?: string; shape: string }[];
    };
    expect(side.weights).toBe("params");
    expect(side.parameters[0]).toEqual({ index: 0, kind: "input", path: "x", shape: "f32[2,16]" });
    expect(side.parameters[1]).toEqual({
      index: 1,
      kind: "weight",
      path: 'this.layers["0"].weight',
      name: "layers.0.weight",
      shape: "f32[32,16]",
    });
    expect(side.parameters.map((p) => p.kind)).toEqual(["input", ...Array(6).fill("weight")]);

    const inline = join(dir, "mlp-inline.hlo");
    const b = await run(["export", "mlp", "--weights", "inline", "--format", "hlo-text",
      "--out", inline]);
    expect(b.code).toBe(EXIT.ok);
    expect(b.out.join("\n")).toMatch(/1 entry parameter \(x\)/);
    const m = parseHlo(readFileSync(inline, "utf8"));
    verifyModule(m);
    expect(m.entry.parameters.map((p) => p.shape.kind === "array" && p.shape.dims)).toEqual([
      [2, 16],
    ]);
    // One model instance: the inline program is the parameterized one with its weights bound,
    // and each weight parameter is the stateDict() entry its name says.
    const model = await loadModel("mlp", "tiny");
    const args = argsFor(model, undefined);
    const cap = captureProgram(model.target, { backend: "interpreter", cache: "memory" }, ...args);
    const inl = exportedProgram(cap.module!, cap.explanation.parameters, cap.values, "inline");
    const par = exportedProgram(cap.module!, cap.explanation.parameters, cap.values, "params");
    const state = (model.target as unknown as { stateDict(): Record<string, Tensor> }).stateDict();
    par.parameters.slice(1).forEach((p, k) => {
      expect(Array.from(par.values[k + 1]!.data as Float32Array), p.name).toEqual(
        Array.from(state[p.name!]!.data() as Float32Array));
    });
    const got = evaluate(inl.module, inl.values) as Literal;
    const want = evaluate(par.module, par.values) as Literal;
    expect(Array.from(got.data as Float32Array)).toEqual(Array.from(want.data as Float32Array));
    expect(() => JSON.parse(readFileSync(`${inline}.json`, "utf8"))).not.toThrow();
  });

  it("a bounded-dynamic parameter leaves as a static one, a size and set-dimension-size", () => {
    manualSeed(0);
    const lin = new nn.Linear(4, 3);
    const f = (x: Tensor) => lin.forward(x).relu().mean(0);
    const x = randn(5, 4);
    const cap = captureProgram(f, {
      backend: "interpreter",
      cache: "memory",
      dynamic: { x: { 0: { max: 8 } } },
    }, x);
    expect(cap.module!.entry.parameter(0).shape).toMatchObject({
      dims: [8, 4],
      dynamic: [true, false],
    });
    const want = Array.from(f(x).data() as Float32Array);
    for (const weights of ["inline", "params"] as const) {
      const e = exportedProgram(cap.module!, cap.explanation.parameters, cap.values, weights);
      verifyModule(e.module);
      const last = e.parameters.at(-1)!;
      expect(last).toEqual({ index: e.parameters.length - 1, kind: "size", path: "x.shape[0]",
        shape: "s32[]" });
      expect(e.parameters[0]).toMatchObject({ kind: "input", path: "x", shape: "f32[8,4]" });
      expect(e.module.entry.parameters.every((p) => p.shape.kind === "array" &&
        !p.shape.dynamic.some((d) => d))).toBe(true);
      expect(e.values[0]!.dims).toEqual([8, 4]);
      expect(Array.from(e.values.at(-1)!.data as Int32Array)).toEqual([5]);
      const got = Array.from((evaluate(e.module, e.values) as Literal).data as Float32Array);
      got.forEach((v, i) => expect(Math.abs(v - want[i]!)).toBeLessThanOrEqual(1e-6));
    }
  });

  it("rejects a bad --format and reports an unwritable --out", async () => {
    const bad = await run(["export", "mlp", "--format", "onnx", "--out", join(dir, "x")]);
    expect(bad.code).toBe(EXIT.usage);
    const io = await run(["export", "mlp", "--out", join(dir, "missing", "dir", "m.pb")]);
    expect(io.code).toBe(EXIT.io);
    expect(io.err.join("\n")).toMatch(/kiln export: cannot write '.*m\.pb'/);
  });
});
