// Where the source analysis runs (compiler/analyze_host.ts): in a worker thread, so the
// TypeScript compiler it needs is never loaded into the isolate that runs the user's code
// (loaded there, it slowed the user's hot loops for the rest of the process). This file must
// not import compiler/analyze_source.ts or anything else that loads ts-morph itself.

import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { analysisHost, analyzeFunction } from "../../compiler/analyze.ts";
import { compile, tensor } from "../../index.ts";
import { makeScaler, readsModuleState } from "./fixtures/closures.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** Whether TypeScript or ts-morph has been loaded into this isolate. */
function typescriptLoaded(): boolean {
  const cache = createRequire(import.meta.url).cache;
  return Object.keys(cache).some((k) => /[\\/](typescript|ts-morph)[\\/]/.test(k));
}

describe("the source analysis runs in a worker thread", () => {
  it("analyses functions there, and TypeScript never enters this isolate", () => {
    expect(typescriptLoaded()).toBe(false);
    const a = analyzeFunction(readsModuleState);
    expect(a.source).toBe("file");
    expect(a.freeVariables.map((v) => v.name)).toContain("step");
    expect(analysisHost()).toBe("worker");
    // compile() analyses the function it traces: still nothing loaded here.
    const scaled = makeScaler(2);
    const f = compile((x: ReturnType<typeof tensor>) => scaled(x.add(1)), { backend: "js" });
    expect(f(tensor([1, 2, 3])).toArray()).toEqual([7, 9, 11]);
    expect(typescriptLoaded()).toBe(false);
  });

  it("gives the same analysis inline (KILN_ANALYSIS=inline), and says where it ran", () => {
    const script = join(mkdtempSync(join(tmpdir(), "kiln-analysis-")), "host.mts");
    const code = [
      `import { analysisHost, analyzeFunction } from "${ROOT}/compiler/analyze.ts";`,
      `import { readsModuleState } from "${ROOT}/test/compiler/fixtures/closures.ts";`,
      `const a = analyzeFunction(readsModuleState);`,
      `console.log(JSON.stringify({ host: analysisHost(), a }));`,
    ].join("\n");
    writeFileSync(script, code);
    const run = (env: Record<string, string>) => {
      const out = execFileSync(
        process.execPath,
        [join(ROOT, "node_modules/tsx/dist/cli.mjs"), script],
        { cwd: ROOT, env: { ...process.env, ...env }, encoding: "utf8" },
      );
      return JSON.parse(out.trim().split("\n").pop()!) as { host: string; a: unknown };
    };
    const worker = run({});
    const inline = run({ KILN_ANALYSIS: "inline" });
    expect(worker.host).toBe("worker");
    expect(inline.host).toBe("inline: KILN_ANALYSIS=inline");
    expect(inline.a).toEqual(worker.a);
    expect(inline.a).toEqual(JSON.parse(JSON.stringify(analyzeFunction(readsModuleState))));
  });
});
