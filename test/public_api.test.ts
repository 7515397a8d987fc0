// The public API as users call it, through the root index.ts: the names the issue promises
// (parseHlo, printHlo, verifyModule, evaluate, literal, moduleToProto, moduleFromProto,
// fingerprint) and the README's example.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  compile,
  explain,
  manualSeed,
  nn,
  ops,
  randn,
  type Tensor,
  arrayShape,
  evaluate,
  fingerprint,
  literal,
  type Literal,
  moduleFromProto,
  moduleToProto,
  ModuleBuilder,
  parseHlo,
  printHlo,
  ShapeError,
  VerifyError,
  verifyModule,
} from "../index.ts";

describe("public API", () => {
  it("runs the README example", () => {
    const mb = new ModuleBuilder("axpy");
    mb.entry("main", (b) => {
      const a = b.parameter(arrayShape("f32", []), "a");
      const x = b.parameter(arrayShape("f32", [4]), "x");
      const y = b.parameter(arrayShape("f32", [4]), "y");
      return b.add(b.multiply(b.broadcast(a, [4], []), x), y);
    });
    const m = mb.build();
    expect(printHlo(m)).toContain("ENTRY %main (a: f32[], x: f32[4], y: f32[4]) -> f32[4] {");
    const out = evaluate(m, [
      literal("f32", [], [2]),
      literal("f32", [4], [1, 2, 3, 4]),
      literal("f32", [4], [10, 10, 10, 10]),
    ]) as Literal;
    expect(out.data).toBeInstanceOf(Float32Array);
    expect(Array.from(out.data as Float32Array)).toEqual([12, 14, 16, 18]);
  });

  it("literal() exposes values as a typed array at .data", () => {
    expect(literal("f32", [2, 4], [1, 2, 3, 4, 5, 6, 7, 8]).data).toBeInstanceOf(Float32Array);
    expect(literal("s32", [2], [1, -1]).data).toBeInstanceOf(Int32Array);
    expect(literal("s64", [1], [2n ** 60n]).data).toBeInstanceOf(BigInt64Array);
    expect(literal("pred", [2], [true, false]).toNumbers()).toEqual([1, 0]);
    expect(() => literal("f32", [2, 4], [1, 2])).toThrow(/expected 8 values, got 2/);
    expect(() => literal("u8", [1], [300])).toThrow(/out of range for u8/);
  });

  it("evaluates a tuple result to an array of literals", () => {
    const m = parseHlo(`HloModule t
ENTRY %main (x: s32[2]) -> (s32[2], s32[2]) {
  %x = s32[2] parameter(0)
  %n = s32[2] negate(%x)
  ROOT %t = (s32[2], s32[2]) tuple(%x, %n)
}`);
    const out = evaluate(m, [literal("s32", [2], [3, -7])]) as Literal[];
    expect(Array.isArray(out)).toBe(true);
    expect(out.map((l) => Array.from(l.data as Int32Array))).toEqual([[3, -7], [-3, 7]]);
  });

  it("verifyModule throws an error naming the instruction", () => {
    const m = parseHlo(`HloModule bad
ENTRY %main (x: f32[2]) -> f32[3] {
  %x = f32[2] parameter(0)
  ROOT %wrong = f32[3] negate(%x)
}`);
    expect(() => verifyModule(m)).toThrow(VerifyError);
    expect(() => verifyModule(m)).toThrow(/%wrong/);
  });

  it("the builder throws a ShapeError naming opcode, shapes and rule", () => {
    const mb = new ModuleBuilder("bad");
    const attempt = () =>
      mb.entry("main", (b) =>
        b.add(b.parameter(arrayShape("f32", [2, 3])), b.parameter(arrayShape("f32", [3, 2]))),
      );
    expect(attempt).toThrow(ShapeError);
    expect(attempt).toThrow(/^add\(f32\[2,3\], f32\[3,2\]\): /);
  });

  it("proto bytes and text round trip with one fingerprint", () => {
    const text = `HloModule rt
ENTRY %main (x: f32[2,<=8]) -> f32[2,<=8] {
  %x = f32[2,<=8]{1,0} parameter(0)
  ROOT %e = f32[2,<=8] exponential(f32[2,<=8]{1,0} %x), metadata={op_type="exp" source_line=3}
}
`;
    const m = parseHlo(text);
    const bytes = moduleToProto(m);
    expect(bytes).toBeInstanceOf(Uint8Array);
    const back = moduleFromProto(bytes);
    expect(printHlo(back)).toBe(printHlo(m));
    expect(fingerprint(back)).toBe(fingerprint(m));
  });
});

describe("README: compile a model", () => {
  class MLP extends nn.Module {
    fc1 = new nn.Linear(16, 32);
    fc2 = new nn.Linear(32, 4);
    forward(x: Tensor): Tensor {
      return ops.softmax(this.fc2.call(ops.gelu(this.fc1.call(x))), -1);
    }
  }

  it("gives eager's values, reuses the program, and says why it recompiles", () => {
    manualSeed(0);
    const model = new MLP().eval();
    const x = randn(8, 16);
    const eager = model.call(x);
    const fast = compile(model);
    const y = fast(x);
    expect(y.toArray()).toEqual(eager.toArray());
    fast(randn(8, 16));
    expect(fast.stats.compiles).toBe(1);
    fast(randn(2, 16));
    expect(fast.stats.compiles).toBe(2);
    expect(fast.stats.recompiles[0]!.reason).toMatch(/^x\.shape\[0\] was 8, now 2/);
    const text = explain(model, x).toString();
    expect(text).toContain("graphs: 1");
    expect(text).toContain("graph breaks: 0");
  });
});

// package.json `exports`: each public subpath maps to a built file whose source is the entry
// here, and holds the names the docs import from it. (test/package.test.ts and docs.test.ts
// check the same against the packed package; this runs on the sources, in milliseconds.)
describe("the public subpaths", () => {
  const text = readFileSync(join(import.meta.dirname, "..", "package.json"), "utf8");
  const pkg = JSON.parse(text) as {
    exports: Record<string, string | { types: string; default: string }>;
  };
  const documented: Record<string, string[]> = {
    ".": ["compile", "explain", "markDynamic", "DynamicShapeError", "GraphBreakError", "nn",
      "ops", "randn", "tensor", "manualSeed", "lazy", "loadSafetensors", "ModuleBuilder",
      "parseHlo", "printHlo", "printLiteral", "evaluate", "literal", "shapeToString", "optim"],
    "./nn": ["Module", "Linear", "Sequential", "LayerNorm", "functional"],
    "./optim": ["SGD", "Adam", "AdamW", "Optimizer"],
    "./models": ["zoo", "getModel", "gpt2", "bert", "mlp", "resnet", "vit", "whisper"],
    "./testing": ["expectMaxCompiles", "CompileBudgetError"],
    "./ir": ["ModuleBuilder", "parseHlo", "printHlo", "printLiteral", "verifyModule", "evaluate",
      "moduleToProto", "moduleFromProto", "fingerprint", "arrayShape", "literal"],
    "./passes": ["defaultPipeline", "optimizationPipeline", "fixpoint", "Pipeline"],
    "./runtime": ["compileModule", "nativeProfile", "backendNames", "defaultProgramCache"],
  };

  it("are exactly the documented ones, each with types", () => {
    expect(Object.keys(pkg.exports).sort()).toEqual([...Object.keys(documented),
      "./package.json"].sort());
    for (const [path, target] of Object.entries(pkg.exports)) {
      if (path === "./package.json") continue;
      expect(target, path).toEqual({
        types: expect.stringMatching(/^\.\/dist\/.*\.d\.ts$/),
        default: expect.stringMatching(/^\.\/dist\/.*\.js$/),
      });
    }
  });

  it.each(Object.entries(documented))("%s exports what the docs import", async (p, names) => {
    const target = pkg.exports[p] as { default: string };
    const source = target.default.replace(/^\.\/dist\//, "../").replace(/\.js$/, ".ts");
    const mod = (await import(source)) as Record<string, unknown>;
    for (const name of names) expect(mod[name], `${p}: ${name}`).toBeDefined();
  });

  it("kiln/nn is the nn namespace of kiln (one set of classes)", async () => {
    const sub = (await import("../tensor/nn/index.ts")) as Record<string, unknown>;
    expect(sub["Linear"]).toBe(nn.Linear);
  });
});
