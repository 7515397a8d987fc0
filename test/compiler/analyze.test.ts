// Tests of compiler/analyze.ts, the static source analysis compile() reads: free variables,
// side effects and likely graph breaks, each at its line in the ORIGINAL .ts file. The inputs
// are the real fixture files under test/compiler/fixtures/; a line an assertion names ends in
// `// @tag` there, and `at(file, tag)` finds it, so the fixtures can be edited without
// renumbering every expectation. The same analyses are also made in a child process under
// tsx (whose output has different line structure) and must agree.

import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  analyzeFunction,
  analyzeModuleForward,
  type FreeVariable,
  type SourceAnalysis,
} from "../../compiler/analyze.ts";
import { findFunctionNode, parseFile, runtimeShape } from "../../compiler/analyze_source.ts";
import { isKilnSpecifier } from "../../compiler/analyze_walk.ts";
import { branches, comparisons } from "./fixtures/breaks.ts";
import {
  destructuredParams,
  makeScaler,
  nested,
  readsModuleState,
  usesHelpers,
} from "./fixtures/closures.ts";
import { argumentsAndLocals, io, noisy, pure } from "./fixtures/effects.ts";
import { ArrowForward, Configurable, LoggedMlp, Mlp, QuietMlp } from "./fixtures/model.ts";
import * as sizes from "./fixtures/sizes.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const FIXTURES = join(HERE, "fixtures");
const ROOT = resolve(HERE, "../..");
const fixture = (name: string): string => join(FIXTURES, name);

/** The 1-based line of `file` that ends in `// @tag` (exactly one must). */
function at(file: string, tag: string): number {
  const lines = readFileSync(fixture(file), "utf8").split("\n");
  const hits = lines.flatMap((l, i) => (new RegExp(`// @${tag}$`).test(l) ? [i + 1] : []));
  if (hits.length !== 1) throw new Error(`${file}: ${hits.length} lines tagged @${tag}`);
  return hits[0]!;
}

/** The 1-based line of `file` that starts with `prefix` (exactly one must): declarations. */
function declared(file: string, prefix: string): number {
  const lines = readFileSync(fixture(file), "utf8").split("\n");
  const hits = lines.flatMap((l, i) => (l.startsWith(prefix) ? [i + 1] : []));
  if (hits.length !== 1) throw new Error(`${file}: ${hits.length} lines start with ${prefix}`);
  return hits[0]!;
}

/** The 1-based column of the `nth` occurrence of `needle` on a tagged line. */
function col(file: string, tag: string, needle: string, nth = 1): number {
  const text = readFileSync(fixture(file), "utf8").split("\n")[at(file, tag) - 1]!;
  let i = -1;
  for (let k = 0; k < nth; k++) {
    i = text.indexOf(needle, i + 1);
    if (i < 0) throw new Error(`${file} @${tag}: no occurrence ${nth} of ${needle}`);
  }
  return i + 1;
}

const free = (a: SourceAnalysis) =>
  a.freeVariables.map((v) => ({ name: v.name, kind: v.kind, line: v.line }));
const effects = (a: SourceAnalysis) =>
  a.sideEffects.map((s) => ({ kind: s.kind, line: s.line, ...(s.file && { file: s.file }) }));
const breaks = (a: SourceAnalysis) => a.dataDependent.map((d) => ({ expr: d.expr, line: d.line }));

describe("locating the original source", () => {
  it("reports the .ts file and the function's own line under vitest's transform", () => {
    const a = analyzeFunction(readsModuleState);
    expect(a.source).toBe("file");
    expect(a.file).toBe(fixture("closures.ts"));
    expect(a.line).toBe(at("closures.ts", "default"));
    expect(a.column).toBe(col("closures.ts", "default", "readsModuleState"));
    expect(a.note).toBeUndefined();
  });

  it("finds a closure made by a factory, at the arrow's line", () => {
    const a = analyzeFunction(makeScaler(3));
    expect(a.file).toBe(fixture("closures.ts"));
    expect(a.line).toBe(at("closures.ts", "closure"));
  });

  it("reads plain JavaScript loaded by Node's require at its own positions", () => {
    const req = createRequire(import.meta.url);
    const mod: unknown = req("./fixtures/plain.cjs");
    const accumulate = (mod as { accumulate: Function }).accumulate;
    const a = analyzeFunction(accumulate);
    expect(a.file).toBe(fixture("plain.cjs"));
    expect(free(a)).toEqual([
      { name: "total", kind: "write", line: at("plain.cjs", "cjs-write") },
      { name: "total", kind: "read", line: at("plain.cjs", "cjs-log") },
      { name: "total", kind: "read", line: at("plain.cjs", "cjs-log") + 1 },
    ]);
    expect(effects(a)).toEqual([
      { kind: "assignment", line: at("plain.cjs", "cjs-write") },
      { kind: "print", line: at("plain.cjs", "cjs-log") },
    ]);
  });

  it("falls back to fn.toString() with lines counted from the function, and says so", () => {
    const fn = new Function(
      "x",
      "if (x.sum().item() > 0) {\n  counter = counter + 1;\n}\nreturn x.mul(scale);",
    );
    // V8 writes `function anonymous(x\n) {\n` before the body: the body starts on line 3.
    const a = analyzeFunction(fn);
    expect(a.source).toBe("toString");
    expect(a.file).toBeUndefined();
    expect(a.note).toMatch(/could not be located.*toString/);
    expect(free(a)).toEqual([
      { name: "counter", kind: "write", line: 4 },
      { name: "counter", kind: "read", line: 4 },
      { name: "scale", kind: "read", line: 6 },
    ]);
    expect(a.freeVariables.every((v) => v.binding === "unresolved" && v.guard)).toBe(true);
    expect(effects(a)).toEqual([{ kind: "assignment", line: 4 }]);
    expect(breaks(a)).toEqual([{ expr: "x.sum().item()", line: 3 }]);
    expect(a.dataDependent[0]!.column).toBe(5);
  });

  it("analyses a bound function's target, and has nothing to say about native code", () => {
    expect(analyzeFunction(noisy.bind(null))).toBe(analyzeFunction(noisy));
    const native = analyzeFunction(Math.max);
    expect(native.source).toBe("none");
    expect(native.note).toMatch(/native or bound/);
    expect(native.freeVariables).toEqual([]);
  });

  it("picks, among functions of the same shape, the one at the reported position", () => {
    const text = [
      "const k = 2;",
      "export const a = (x: T) => x.mul(k);",
      "",
      "export const b = (x: T) => x.mul(k);",
    ].join("\n");
    const parsed = parseFile("/virtual/twins.ts", text);
    const k = 2;
    const shape = runtimeShape((x: { mul(k: number): unknown }) => x.mul(k));
    const first = findFunctionNode(parsed, 2, 18, shape);
    const second = findFunctionNode(parsed, 4, 18, shape);
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(parsed.sourceFile.getLineAndCharacterOfPosition(first!.getStart()).line).toBe(1);
    expect(parsed.sourceFile.getLineAndCharacterOfPosition(second!.getStart()).line).toBe(3);
    // Renamed locals (esbuild's `x` → `x2`) do not hide a function.
    const renamed = runtimeShape(new Function("x2", "return x2.mul(k);"));
    const decl = parseFile("/virtual/renamed.ts", "function f(x: T) {\n  return x.mul(k);\n}");
    expect(findFunctionNode(decl, 1, 10, renamed)).toBeDefined();
    // A file that holds nothing like the function (edited since it was loaded): no node.
    const other = parseFile("/virtual/other.ts", "export function f(y: number) { return y; }");
    expect(findFunctionNode(other, 1, 1, shape)).toBeUndefined();
  });

  it("gives the same lines under tsx, whose output is one line per module", () => {
    const script = fixture("tsx_main.ts");
    const out = execFileSync(process.execPath, ["--import", "tsx", script], {
      cwd: ROOT,
      encoding: "utf8",
    });
    const got = JSON.parse(out) as Record<string, SourceAnalysis>;
    expect(got["readsModuleState"]).toEqual(analyzeFunction(readsModuleState));
    expect(got["closure"]).toEqual(analyzeFunction(makeScaler(2)));
    expect(got["noisy"]).toEqual(analyzeFunction(noisy));
    expect(got["mlp"]).toEqual(analyzeModuleForward(new Mlp()));
  });
});

describe("free variables", () => {
  it("module-level let and const, a function, a Kiln import, a default parameter", () => {
    const a = analyzeFunction(readsModuleState);
    const F = "closures.ts";
    expect(a.freeVariables).toEqual<FreeVariable[]>([
      {
        name: "SCALE",
        line: at(F, "default"),
        column: col(F, "default", "SCALE"),
        kind: "read",
        binding: "const",
        guard: false, // a const bound to a literal cannot change
        declaredAt: declared(F, "export const SCALE"),
      },
      {
        name: "config",
        line: at(F, "destructure"),
        column: col(F, "destructure", "config"),
        kind: "read",
        binding: "const",
        guard: true, // a const object's contents can change
        declaredAt: declared(F, "const config ="),
      },
      {
        name: "identity",
        line: at(F, "loop"),
        column: col(F, "loop", "identity"),
        kind: "read",
        binding: "function",
        guard: false,
        declaredAt: declared(F, "function identity("),
      },
      {
        name: "step",
        line: at(F, "write"),
        column: 3,
        kind: "write",
        binding: "let",
        guard: true,
        declaredAt: declared(F, "export let step"),
      },
      {
        name: "step",
        line: at(F, "write"),
        column: col(F, "write", "step", 2),
        kind: "read",
        binding: "let",
        guard: true,
        declaredAt: declared(F, "export let step"),
      },
      {
        name: "relu",
        line: at(F, "import"),
        column: col(F, "import", "relu"),
        kind: "read",
        binding: "import",
        guard: false, // Kiln's own API
        declaredAt: declared(F, "import { relu"),
        from: "../../../index.ts",
      },
    ]);
    // `depth`, `y`, `i`, `x` and `n` are the function's own.
    expect(a.sideEffects).toEqual([
      {
        call: "step = step + 1",
        line: at(F, "write"),
        column: 3,
        kind: "assignment",
        reason:
          "assigns `step`, a variable declared outside the function: compiled code does not " +
          "repeat the assignment",
      },
    ]);
    expect(a.dataDependent).toEqual([]);
  });

  it("a closure's free variables are the factory's parameter and local", () => {
    const a = analyzeFunction(makeScaler(2));
    const line = at("closures.ts", "closure");
    expect(a.freeVariables.map((v) => [v.name, v.kind, v.binding, v.line, v.column])).toEqual([
      ["factor", "read", "parameter", line, col("closures.ts", "closure", "factor")],
      ["bias", "read", "const", line, col("closures.ts", "closure", "bias")],
    ]);
    // The factory itself refers only to its own parameter and local.
    expect(analyzeFunction(makeScaler).freeVariables).toEqual([]);
  });

  it("nested functions' own locals and shadowing locals are not free", () => {
    const a = analyzeFunction(nested);
    expect(free(a)).toEqual([
      { name: "SCALE", kind: "read", line: at("closures.ts", "nested") },
    ]);
  });

  it("destructured parameters are local; their default values may be free", () => {
    expect(free(analyzeFunction(destructuredParams))).toEqual([
      { name: "config", kind: "read", line: at("closures.ts", "param-default") },
    ]);
  });

  it("follows module-level helpers of the same file called by name, tagged with `via`", () => {
    const a = analyzeFunction(usesHelpers);
    const F = "closures.ts";
    expect(a.freeVariables.map((v) => [v.name, v.line, v.binding, v.guard, v.via])).toEqual([
      ["temperature", at(F, "helper"), "let", true, "scaled"],
      ["scaled", at(F, "helper-arrow"), "function", false, "softmaxScaled"],
      ["softmaxScaled", at(F, "uses-helpers"), "const", false, undefined],
      ["scaled", at(F, "uses-helpers"), "function", false, undefined],
    ]);
  });

  it("module forwards: the class's module-level names, `this` is not a free variable", () => {
    const a = analyzeModuleForward(new ArrowForward());
    expect(a.line).toBe(at("model.ts", "arrow"));
    expect(a.column).toBe(col("model.ts", "arrow", "forward"));
    expect(free(a)).toEqual([{ name: "FACTOR", kind: "read", line: at("model.ts", "arrow") }]);
  });
});

describe("side effects", () => {
  it("printing, randomness, the clock and writes to outside objects", () => {
    const a = analyzeFunction(noisy);
    const F = "effects.ts";
    expect(effects(a)).toEqual([
      { kind: "print", line: at(F, "log") },
      { kind: "random", line: at(F, "random") },
      { kind: "assignment", line: at(F, "clock") },
      { kind: "clock", line: at(F, "clock") },
      { kind: "mutation", line: at(F, "push") },
      { kind: "mutation", line: at(F, "prop") },
      { kind: "mutation", line: at(F, "set-add") },
    ]);
    expect(a.sideEffects.map((s) => s.call)).toEqual([
      'console.log("shape", x.shape)',
      "Math.random()",
      "lastTime = Date.now()",
      "Date.now()",
      "history.push(r)",
      "stats.calls += 1",
      'seen.add("noisy")',
    ]);
    expect(a.sideEffects[3]!.column).toBe(col(F, "clock", "Date"));
    expect(a.sideEffects[4]!.reason).toMatch(/push\(\) mutates `history`.*outside the function/);
    expect(free(a)).toEqual([
      { name: "lastTime", kind: "write", line: at(F, "clock") },
      { name: "history", kind: "read", line: at(F, "push") },
      { name: "stats", kind: "read", line: at(F, "prop") },
      { name: "seen", kind: "read", line: at(F, "set-add") },
      { name: "lastTime", kind: "read", line: at(F, "clock-read") },
    ]);
  });

  it("file I/O through named and namespace imports, the environment, process streams", () => {
    const a = analyzeFunction(io);
    const F = "effects.ts";
    expect(a.sideEffects.map((s) => [s.kind, s.line, s.call])).toEqual([
      ["io", at(F, "read"), 'readFileSync(path, "utf8")'],
      ["io", at(F, "fs-write"), "fs.writeFileSync(path, text)"],
      ["process", at(F, "env"), 'process.env["KILN_DEBUG"]'],
      ["process", at(F, "env"), "process.stderr.write(text)"],
    ]);
    expect(a.sideEffects[0]!.reason).toBe("readFileSync: file system I/O");
    // Node's built-in modules are code, not state: nothing to guard.
    expect(a.freeVariables.map((v) => [v.name, v.binding, v.from, v.guard])).toEqual([
      ["readFileSync", "import", "node:fs", false],
      ["fs", "import", "node:fs", false],
    ]);
  });

  it("mutating an argument is a side effect, a local is not; Tensor.add is not Set.add", () => {
    const a = analyzeFunction(argumentsAndLocals);
    expect(effects(a)).toEqual([{ kind: "mutation", line: at("effects.ts", "argument") }]);
    expect(a.sideEffects[0]!.reason).toMatch(/`out` is an argument/);
    expect(analyzeFunction(pure)).toMatchObject({
      freeVariables: [],
      sideEffects: [],
      dataDependent: [],
    });
  });
});

describe("likely graph breaks", () => {
  it("values read into JavaScript and tensors coerced or used as conditions", () => {
    const a = analyzeFunction(branches);
    const F = "breaks.ts";
    // Not breaks: the loop bound x.shape[0] (shapes are static), `if (mask)` and
    // `mask == null` (presence checks on an optional tensor), `${x.shape}`.
    expect(breaks(a)).toEqual([
      { expr: "x.sum().item()", line: at(F, "item") },
      { expr: "x.gt(0)", line: at(F, "truthy") },
      { expr: "Number(x.amax())", line: at(F, "number") },
      { expr: "+x.mean()", line: at(F, "plus") },
      { expr: "x", line: at(F, "template") },
      { expr: "x.toArray()", line: at(F, "toarray") },
      { expr: "ops.relu(x).data()", line: at(F, "data") },
    ]);
    expect(a.dataDependent[1]!.reason).toMatch(/always truthy/);
    expect(a.dataDependent[4]!.column).toBe(col(F, "template", "x}"));
    expect(a.sideEffects).toEqual([]);
  });

  it("comparison operators on a tensor read its value", () => {
    const a = analyzeFunction(comparisons);
    expect(breaks(a)).toEqual([
      { expr: "(y as unknown as number) > x.shape.length", line: at("breaks.ts", "compare") },
    ]);
  });
});

describe("analyzeModuleForward", () => {
  it("follows this.method() calls in the class and inherited from another file", () => {
    const a = analyzeModuleForward(new Mlp());
    const F = "model.ts";
    expect(a.file).toBe(fixture(F));
    expect(a.line).toBe(at(F, "forward"));
    expect(free(a)).toEqual([
      { name: "calls", kind: "write", line: at(F, "calls") },
      { name: "FACTOR", kind: "read", line: at(F, "norm") },
    ]);
    // `unused` is not reached from forward, so its console.log is not listed.
    expect(effects(a)).toEqual([
      { kind: "assignment", line: at(F, "calls") },
      { kind: "print", line: at(F, "hidden") },
      { kind: "mutation", line: at(F, "norm") },
      { kind: "mutation", line: at("base_block.ts", "base-steps"), file: fixture("base_block.ts") },
    ]);
    expect(a.sideEffects[2]!.call).toBe("this.lastScale = FACTOR");
    expect(a.sideEffects[2]!.reason).toMatch(/state of the module/);
    expect(breaks(a)).toEqual([{ expr: "h.mean().item()", line: at(F, "hidden") }]);
  });

  it("follows super.forward(x) into the base class, and this.* from there", () => {
    const a = analyzeModuleForward(new LoggedMlp());
    expect(a.line).toBe(at("model.ts", "super-log") - 1);
    expect(a.sideEffects.map((s) => [s.kind, s.line, s.via])).toEqual([
      ["assignment", at("model.ts", "calls"), "super.forward"],
      ["print", at("model.ts", "hidden"), "this.hidden"],
      ["mutation", at("model.ts", "norm"), "this.norm"],
      ["print", at("model.ts", "super-log"), undefined],
      ["mutation", at("base_block.ts", "base-steps"), "this.finish"],
    ]);
  });

  it("does not follow functions stored on the instance or Kiln's own nn.Module methods", () => {
    const a = analyzeModuleForward(new Configurable());
    expect(a).toMatchObject({ freeVariables: [], sideEffects: [], dataDependent: [] });
    // Followed, nn.Module.parameters would reach namedParameters, whose free variables
    // (Kiln's internals) would be noise here.
    expect(analyzeFunction(new Configurable().parameters).file).toMatch(/tensor\/nn\/module\.ts$/);
  });

  it("a subclass's override replaces the method it overrides", () => {
    const a = analyzeModuleForward(new QuietMlp());
    expect(effects(a)).toEqual([
      { kind: "assignment", line: at("model.ts", "calls") },
      { kind: "mutation", line: at("base_block.ts", "base-steps"), file: fixture("base_block.ts") },
    ]);
    expect(a.dataDependent).toEqual([]);
  });

  it("caches per class and per function, and the results are frozen", () => {
    const a = analyzeModuleForward(new Mlp());
    expect(analyzeModuleForward(new Mlp())).toBe(a);
    expect(analyzeModuleForward(new QuietMlp())).not.toBe(a);
    expect(analyzeFunction(noisy)).toBe(analyzeFunction(noisy));
    expect(Object.isFrozen(a)).toBe(true);
    expect(Object.isFrozen(a.sideEffects)).toBe(true);
    expect(Object.isFrozen(a.sideEffects[0])).toBe(true);
  });
});

describe("errors and helpers", () => {
  it("names the bad argument", () => {
    expect(() => analyzeFunction(42 as unknown as Function)).toThrow(
      new TypeError("analyzeFunction: expected a function, got number 42"),
    );
    expect(() => analyzeModuleForward({})).toThrow(
      new TypeError("analyzeModuleForward: an Object has no forward method to analyse"),
    );
    expect(() => analyzeModuleForward(null as unknown as object)).toThrow(
      new TypeError("analyzeModuleForward: expected a module, got null"),
    );
  });

  it("recognizes imports of Kiln's API by package name or by path into the repository", () => {
    const file = fixture("closures.ts");
    expect(isKilnSpecifier(file, "../../../index.ts")).toBe(true);
    expect(isKilnSpecifier(file, "../../../tensor/nn/index.ts")).toBe(true);
    expect(isKilnSpecifier(file, "kiln")).toBe(true);
    expect(isKilnSpecifier(file, "./base_block.ts")).toBe(false);
    expect(isKilnSpecifier(file, "../../../models/mlp.ts")).toBe(false);
    expect(isKilnSpecifier(file, "node:fs")).toBe(false);
  });
});

describe("branches on a tensor's size (sizeBranches)", () => {
  const where = (a: SourceAnalysis) =>
    a.sizeBranches.map((b) => ({
      line: b.line,
      kind: b.kind,
      ...(b.parameter !== undefined && { parameter: b.parameter }),
      ...(b.via !== undefined && { via: b.via }),
    }));

  it("finds if, ?: and a flag assigned from a comparison, at their lines", () => {
    expect(where(analyzeFunction(sizes.parity))).toEqual([
      { line: at("sizes.ts", "parity"), kind: "if" },
    ]);
    const exact = analyzeFunction(sizes.exactly37).sizeBranches;
    expect(exact).toEqual([
      {
        expr: "x.size(0) === 37",
        line: at("sizes.ts", "exact"),
        column: col("sizes.ts", "exact", "x.size"),
        kind: "?:",
      },
    ]);
    expect(where(analyzeFunction(sizes.threshold))).toEqual([
      { line: at("sizes.ts", "threshold"), kind: "if" },
    ]);
  });

  it("follows callbacks, logical operators, switch and a helper's number parameter", () => {
    expect(where(analyzeFunction(sizes.indirect))).toEqual([
      { line: at("sizes.ts", "logical"), kind: "||" },
      { line: at("sizes.ts", "logical"), kind: "&&" },
      { line: at("sizes.ts", "switch"), kind: "switch" },
      { line: at("sizes.ts", "helper"), kind: "?:", parameter: "n", via: "scaleFor" },
    ]);
  });

  it("ignores the rank, loops over a shape and guards that only throw on a range", () => {
    // The one entry depends on the compiled function's own parameter (guarded by value).
    expect(where(analyzeFunction(sizes.guarded))).toEqual([
      { line: at("sizes.ts", "param"), kind: "?:", parameter: "limit" },
    ]);
  });

  it("keeps throws on an equality or a parity: their sizes can fall between samples", () => {
    expect(where(analyzeFunction(sizes.unsafeGuards))).toEqual([
      { line: at("sizes.ts", "eqthrow"), kind: "if" },
      { line: at("sizes.ts", "oddthrow"), kind: "if" },
    ]);
  });

  it("follows this.method calls in a module's forward", () => {
    expect(where(analyzeModuleForward(new sizes.Block()))).toEqual([
      { line: at("sizes.ts", "method"), kind: "?:", parameter: "t", via: "this.scale" },
    ]);
    expect(analyzeModuleForward(new sizes.Outer()).sizeBranches).toEqual([]);
  });
});
