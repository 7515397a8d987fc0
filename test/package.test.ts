// The published package as a user gets it: `npm pack`, installed into a fresh project (see
// packed.ts), then used from there with plain `node` (no tsx, no .ts sources) — eager ops,
// compile(), every public subpath, the native backend's C sources found from dist/, the CLI
// through its bin — and type-checked by `tsc` under `moduleResolution` nodenext and bundler.

import { execFileSync, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { packedProject } from "./packed.ts";

let project = "";

beforeAll(() => {
  project = packedProject();
}, 15 * 60_000);

function node(file: string, source: string, args: string[] = []) {
  writeFileSync(join(project, file), source);
  const r = spawnSync(process.execPath, [file, ...args], { cwd: project, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function kiln(...args: string[]) {
  const bin = join(project, "node_modules", ".bin", "kiln");
  const r = spawnSync(bin, args, { cwd: project, encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("the packed package", () => {
  it("holds compiled JavaScript, types and the C runtime, and no sources or tests", () => {
    const out = execFileSync("tar", ["tzf", join(project, "..", "pack", "kiln-0.1.0.tgz")], {
      encoding: "utf8",
    });
    const files = out.trim().split("\n").map((f) => f.replace(/^package\//, ""));
    for (const f of ["dist/index.js", "dist/index.d.ts", "dist/cli/kiln.js", "dist/cli/main.js",
      "dist/models/gpt2.js", "dist/runtime/native/csrc/kiln_rt.h", "package.json", "README.md"]) {
      expect(files).toContain(f);
    }
    const sources = files.filter((f) => /\.(ts|mts|cts)$/.test(f) && !f.endsWith(".d.ts"));
    expect(sources).toEqual([]);
    expect(files.filter((f) => /(^|\/)(test|bench|examples|scripts)\//.test(f))).toEqual([]);
  });

  it("runs eager ops and compile() under plain node, with every public subpath", () => {
    const r = node("app.mjs", `
      import { compile, markDynamic, DynamicShapeError, manualSeed, nn, randn, tensor } from "kiln";
      const allclose = (a, b, tol = 1e-5) => {
        const x = a.toArray().flat(9), y = b.toArray().flat(9);
        return x.length === y.length && x.every((v, i) => Math.abs(v - y[i]) <= tol);
      };
      import { Linear } from "kiln/nn";
      import { zoo, gpt2 } from "kiln/models";
      import { expectMaxCompiles, CompileBudgetError } from "kiln/testing";
      import { parseHlo, printHlo, printLiteral, literal } from "kiln/ir";
      import { optimizationPipeline } from "kiln/passes";
      import { compileModule, backendNames } from "kiln/runtime";
      import pkg from "kiln/package.json" with { type: "json" };

      manualSeed(0);
      const x = tensor([[1, 2], [3, 4]]);
      console.log("eager", JSON.stringify(x.matmul(x).toArray()));
      const lin = new Linear(2, 3);
      if (!(lin instanceof nn.Linear)) throw new Error("kiln/nn is not kiln's nn");
      const f = compile((a) => lin.call(a).relu().sum(0));
      const a = randn([4, 2]);
      const same = allclose(f(a), lin.call(a).relu().sum(0));
      console.log("compiled", same, f.stats.compiles);
      expectMaxCompiles(f, 1);
      let err;
      try { expectMaxCompiles(f, 0); } catch (e) { err = e; }
      console.log("budget", err instanceof CompileBudgetError);
      const m = parseHlo(\`HloModule t
      ENTRY %main (p: f32[2]) -> f32[2] {
        %p = f32[2] parameter(0)
        ROOT %n = f32[2] negate(%p)
      }\`);
      optimizationPipeline().run(m);
      const prog = compileModule(m, { backend: "js" });
      console.log("ir", printHlo(m).includes("negate"), printLiteral(literal("f32", [2], [1, 2])));
      console.log("runtime", backendNames().join(","), typeof prog);
      console.log("names", typeof markDynamic, typeof DynamicShapeError, Object.keys(zoo).length,
        typeof gpt2.default, pkg.name);
    `);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("eager [[7,10],[15,22]]");
    expect(r.stdout).toContain("compiled true 1");
    expect(r.stdout).toContain("budget true");
    expect(r.stdout).toContain("ir true {1, 2}");
    expect(r.stdout).toMatch(/^runtime (?=.*\binterpreter\b)(?=.*\bjs\b)(?=.*\bnative\b)/m);
    expect(r.stdout).toContain("names function function 6 function kiln");
  });

  it("compiles on the native backend from dist/ (the C runtime is found beside the code)", () => {
    const r = node("native.mjs", `
      import { compile, randn } from "kiln";
      const allclose = (a, b, tol = 1e-5) => {
        const x = a.toArray().flat(9), y = b.toArray().flat(9);
        return x.length === y.length && x.every((v, i) => Math.abs(v - y[i]) <= tol);
      };
      const f = compile((a, b) => a.matmul(b).tanh(), { backend: "native" });
      const a = randn([8, 8]), b = randn([8, 8]);
      console.log(allclose(f(a, b), a.matmul(b).tanh()), f.stats.compiles);
    `);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("true 1");
  }, 180_000);

  it("runs the CLI through its bin, on a zoo model and on the user's .ts and .js files", () => {
    const zooRun = kiln("recompiles", "mlp", "--shapes", "batch=1..2");
    expect(zooRun.stderr).toBe("");
    expect(zooRun.stdout).toContain("2 calls, 2 compiles");
    expect(zooRun.status).toBe(0);
    // A model file imports "kiln" — the same installed package the CLI runs on.
    writeFileSync(join(project, "model.ts"), `
      import { nn, randn, type Tensor } from "kiln";
      export default class Small extends nn.Module {
        fc = new nn.Linear(4, 4);
        forward(x: Tensor): Tensor { return this.fc.call(x).relu(); }
      }
      export function inputs(spec: Record<string, number>) { return [randn([spec.batch ?? 2, 4])]; }
    `);
    writeFileSync(join(project, "model.mjs"), `
      import { nn, randn } from "kiln";
      export default (x) => x.exp().sum();
      export const inputs = () => [randn([3])];
    `);
    for (const file of ["model.ts", "model.mjs"]) {
      const r = kiln("recompiles", file, "--shapes", "batch=2", "--max", "1");
      expect(r.stderr, file).toBe("");
      expect(r.stdout, file).toMatch(/1 calls?, 1 compiles?/);
      expect(r.status, file).toBe(0);
    }
  }, 120_000);

  it.each(["nodenext", "bundler"])("type-checks a user file with moduleResolution %s", (res) => {
    const dir = join(project, `types-${res}`);
    execFileSync("mkdir", ["-p", dir]);
    writeFileSync(join(dir, "user.ts"), `
      import { compile, markDynamic, randn, tensor, type Tensor, type CompileOptions } from "kiln";
      import { Linear, Sequential, ReLU } from "kiln/nn";
      import { zoo, type ModelName } from "kiln/models";
      import { expectMaxCompiles } from "kiln/testing";
      import { parseHlo, printHlo, type Module } from "kiln/ir";
      import { optimizationPipeline } from "kiln/passes";
      import { compileModule } from "kiln/runtime";

      const net = new Sequential(new Linear(4, 8), new ReLU(), new Linear(8, 1));
      const opts: CompileOptions = { backend: "js" };
      const f = compile((x: Tensor) => net.call(x).sum(), opts);
      const y: Tensor = f(markDynamic(randn([3, 4]), 0));
      const big: boolean = y.item() > 1;
      const n: number = tensor([1, 2]).sum().item();
      expectMaxCompiles(f, 1);
      const name: ModelName = "gpt2";
      const gpt = zoo[name].create("tiny");
      const m: Module = parseHlo(printHlo(parseHlo("HloModule t\\nENTRY %e () -> f32[] {\\n" +
        "  ROOT %c = f32[] constant(1)\\n}")));
      optimizationPipeline().run(m);
      compileModule(m, { backend: "interpreter" });
      // @ts-expect-error: compile options are checked
      compile((x: Tensor) => x, { backend: 3 });
      // @ts-expect-error: so are the budget's arguments and the zoo's names
      expectMaxCompiles(f, "one");
      // @ts-expect-error: (as above)
      zoo.gpt3.create();
      console.log(big, n, gpt.training);
    `);
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: res === "bundler" ? "ESNext" : "NodeNext",
        moduleResolution: res,
        strict: true,
        noEmit: true,
        types: ["node"],
        // As most projects do; the checks above fail if a Kiln type degraded to `any`.
        skipLibCheck: true,
      },
      files: ["user.ts"],
    }));
    const tsc = join(project, "node_modules", "typescript", "bin", "tsc");
    const r = spawnSync(process.execPath, [tsc, "-p", dir], { cwd: dir, encoding: "utf8" });
    expect(r.stdout + r.stderr).toBe("");
    expect(r.status).toBe(0);
  }, 120_000);
});
