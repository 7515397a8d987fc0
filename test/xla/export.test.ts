// `kiln export`'s programs run on XLA: each zoo model (tiny config) is traced as `kiln export`
// traces it, written with its weights inline (`--weights inline`) and with its weights as
// parameters (the default, bound from the trace's values), and XLA's CPU backend compiles and
// runs both (scripts/xla/xla_check.py). Their outputs equal Kiln's reference evaluator on the
// captured program within the f32 tier (XLA CPU vectorizes and reassociates reductions), and
// Kiln's eager forward on the native backend within its tier. Skipped where jaxlib cannot be
// imported (test/xla/xla.test.ts says why).

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { exportedProgram } from "../../cli/export.ts";
import { captureProgram } from "../../compiler/index.ts";
import { evaluate } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import { moduleToProto } from "../../ir/proto.ts";
import { manualSeed, nn, noGrad, randn, type Tensor } from "../../index.ts";
import { getModel, zoo } from "../../models/index.ts";

const SCRIPT = join(import.meta.dirname, "../../scripts/xla/xla_check.py");
const HAVE_XLA = spawnSync("python3", ["-c", "import jaxlib, jax"]).status === 0;
const dir = mkdtempSync(join(tmpdir(), "kiln-xla-export-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NUMPY: Record<string, string> = {
  f32: "float32",
  s32: "int32",
  s64: "int64",
  pred: "bool",
  u8: "uint8",
};

interface XlaOutput {
  shape: number[];
  data: (number | string)[];
}

const number = (v: number | string) =>
  typeof v === "number" ? v : v === "nan" ? NaN : v === "inf" ? Infinity : -Infinity;

/** The first tensor of a model's output (a Tensor, or an object or array of them). */
function firstTensor(r: unknown): Tensor {
  if (r !== null && typeof r === "object" && "data" in r) return r as Tensor;
  for (const v of Object.values(r as object)) {
    if (v !== null && typeof v === "object") return firstTensor(v);
  }
  throw new Error("the model returned no tensor");
}

describe.skipIf(!HAVE_XLA)("exported zoo programs run on XLA's CPU backend", () => {
  it("inline and as parameters, with the evaluator's and eager's values", () => {
    const jobs: { name: string; proto: string; inputs: unknown[] }[] = [];
    const refs = new Map<string, { want: Literal[]; eager: number[] }>();
    for (const name of Object.keys(zoo)) {
      manualSeed(0);
      const z = getModel(name);
      const model = z.create("tiny").eval() as unknown as { call(...a: unknown[]): unknown };
      const args = z.inputs({}, "tiny");
      const cap = captureProgram(model as never, { backend: "interpreter", cache: "memory" },
        ...args);
      expect(cap.module, name).toBeDefined();
      const want = evaluate(cap.module!, [...cap.values]);
      const flat = want instanceof Literal ? [want] : (want as Literal[]);
      const out = noGrad(() => firstTensor(model.call(...args)));
      const eager = Array.from(out.data() as Float32Array);
      refs.set(name, { want: flat, eager });
      for (const weights of ["inline", "params"] as const) {
        const x = exportedProgram(cap.module!, cap.explanation.parameters, cap.values, weights);
        const kinds = new Set(x.parameters.map((p) => p.kind));
        if (weights === "inline") expect([...kinds], name).toEqual(["input"]);
        else expect(kinds.has("weight"), name).toBe(true);
        const proto = join(dir, `${name}.${weights}.pb`);
        writeFileSync(proto, moduleToProto(x.module));
        jobs.push({
          name: `${name}/${weights}`,
          proto,
          inputs: x.values.map((l) => ({
            dtype: NUMPY[l.type] ?? l.type,
            shape: l.dims,
            data: l.toNumbers(),
          })),
        });
      }
    }
    const run = spawnSync("python3", [SCRIPT], {
      input: JSON.stringify(jobs),
      encoding: "utf8",
      maxBuffer: 1 << 28,
    });
    expect(run.status, run.stderr).toBe(0);
    const results = run.stdout.split("\n").filter((l) => l.startsWith("{")).map(
      (l) => JSON.parse(l) as { name: string; error?: string; outputs?: XlaOutput[] });
    expect(results.map((r) => [r.name, r.error])).toEqual(jobs.map((j) => [j.name, undefined]));
    for (const r of results) {
      const { want, eager } = refs.get(r.name.split("/")[0]!)!;
      expect(r.outputs!.length, r.name).toBe(want.length);
      want.forEach((lit, k) => {
        const a = lit.toNumbers();
        const b = r.outputs![k]!.data.map(number);
        expect(r.outputs![k]!.shape, `${r.name} output ${k}`).toEqual(lit.dims);
        const scale = Math.max(1, ...a.map(Math.abs));
        let worst = 0;
        for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
        expect(worst, `${r.name} output ${k}: max |XLA - evaluator|`).toBeLessThanOrEqual(
          1e-5 * scale);
      });
      // Kiln eager (default backend, its own tier) on the same weights: the first output.
      const b = r.outputs![0]!.data.map(number);
      expect(b.length, r.name).toBe(eager.length);
      const scale = Math.max(1, ...eager.map(Math.abs));
      let worst = 0;
      for (let i = 0; i < b.length; i++) worst = Math.max(worst, Math.abs(b[i]! - eager[i]!));
      expect(worst, `${r.name}: max |XLA - Kiln eager|`).toBeLessThanOrEqual(1e-4 * scale);
    }
  }, 300_000);

  it("a bounded-dynamic program: static parameters at the bound, sizes, set-dimension-size", () => {
    manualSeed(0);
    const lin = new nn.Linear(4, 3);
    const fns = {
      mean: (x: Tensor) => lin.forward(x).relu().mean(0),
      rows: (x: Tensor) => lin.forward(x).relu(),
    };
    const x = randn(5, 4);
    const jobs: { name: string; proto: string; inputs: unknown[] }[] = [];
    const want = new Map<string, number[]>();
    for (const [name, f] of Object.entries(fns)) {
      const cap = captureProgram(f, {
        backend: "interpreter",
        cache: "memory",
        dynamic: { x: { 0: { max: 8 } } },
      }, x);
      want.set(name, Array.from(f(x).data() as Float32Array));
      for (const weights of ["inline", "params"] as const) {
        const e = exportedProgram(cap.module!, cap.explanation.parameters, cap.values, weights);
        const proto = join(dir, `dyn-${name}.${weights}.pb`);
        writeFileSync(proto, moduleToProto(e.module));
        jobs.push({
          name: `${name}/${weights}`,
          proto,
          inputs: e.values.map((l) => ({
            dtype: NUMPY[l.type] ?? l.type,
            shape: l.dims,
            data: l.toNumbers(),
          })),
        });
      }
    }
    const run = spawnSync("python3", [SCRIPT], { input: JSON.stringify(jobs), encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    const results = run.stdout.split("\n").filter((l) => l.startsWith("{")).map(
      (l) => JSON.parse(l) as { name: string; error?: string; outputs?: XlaOutput[] });
    expect(results.map((r) => [r.name, r.error])).toEqual(jobs.map((j) => [j.name, undefined]));
    for (const r of results) {
      const w = want.get(r.name.split("/")[0]!)!;
      // A dynamic result comes back at its bound ([8, 3]); its first rows are the real ones.
      const b = r.outputs![0]!.data.map(number).slice(0, w.length);
      w.forEach((v, i) => expect(Math.abs(v - b[i]!), `${r.name}[${i}]`).toBeLessThanOrEqual(1e-5));
    }
  });
});
