// Program-cache benchmark: cold compile against warm loads of a large module (a 12-layer
// transformer stack of causal attention, layer norm and a tanh MLP, built with the builder) on
// every registered backend that can be cached on disk (the interpreter and `js`; GPT-2 small's
// own graph is bench/compile.ts). Warm is measured three ways: a memory hit, a fresh
// ProgramCache on the populated directory, and a genuinely new process (this script re-run as
// a child, timing only getOrCompile inside it, plus the child's whole wall time against a cold
// child's), for entries that hold only the backend payload and for ones that also store the
// compiled module (what a pass pipeline produces). Prints a table; the goal for `js` is warm
// >= 10x faster than cold.
//
//   npx tsx bench/cache.ts [--layers 12] [--reps 5]

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ModuleBuilder } from "../ir/builder.ts";
import { cloneModule } from "../ir/clone.ts";
import { evaluate } from "../ir/evaluate.ts";
import { literal, literalsIdentical, type Literal } from "../ir/literal.ts";
import type { Instruction, Module } from "../ir/module.ts";
import { arrayShape } from "../ir/shape.ts";
import { backendNames, type Executable, getBackend, single } from "../runtime/index.ts";
import { ProgramCache } from "../runtime/cache.ts";

const B = 1;
const T = 32;
const D = 64;
const H = 4;
const HD = D / H;
const F = 4 * D;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/** A pre-norm transformer block stack: x + attn(ln(x)), then x + mlp(ln(x)), `layers` times. */
export function transformerStack(layers: number): Module {
  const mb = new ModuleBuilder(`transformer_${layers}`);
  mb.entry("main", (b) => {
    const addR = mb.reducer("add", "f32");
    const maxR = mb.reducer("max", "f32");
    const x0 = b.parameter(arrayShape("f32", [B, T, D]), "x");
    const bd = (v: Instruction, dims: number[], keep: number[]) => b.broadcast(v, dims, keep);
    const scalar = (v: number, dims: number[]) => bd(b.scalar("f32", v), dims, []);
    const linear = (v: Instruction, w: Instruction) =>
      b.dot(v, w, { lhsContracting: [2], rhsContracting: [0] });

    const layerNorm = (v: Instruction) => {
      const dims = [B, T, D];
      const mean = b.divide(b.reduce(v, b.scalar("f32", 0), [2], addR), scalar(D, [B, T]));
      const c = b.subtract(v, bd(mean, dims, [0, 1]));
      const varr = b.divide(b.reduce(b.multiply(c, c), b.scalar("f32", 0), [2], addR),
        scalar(D, [B, T]));
      const inv = b.rsqrt(b.add(varr, scalar(1e-5, [B, T])));
      return b.multiply(c, bd(inv, dims, [0, 1]));
    };
    const softmax = (v: Instruction, dims: number[]) => {
      const keep = [0, 1, 2];
      const m = b.reduce(v, b.scalar("f32", -Infinity), [3], maxR);
      const e = b.exp(b.subtract(v, bd(m, dims, keep)));
      return b.divide(e, bd(b.reduce(e, b.scalar("f32", 0), [3], addR), dims, keep));
    };
    const heads = (t: Instruction) => b.transpose(b.reshape(t, [B, T, H, HD]), [0, 2, 1, 3]);
    const attention = (v: Instruction, l: number) => {
      const [wq, wk, wv, wo] = ["wq", "wk", "wv", "wo"].map((n) =>
        b.parameter(arrayShape("f32", [D, D]), `l${l}_${n}`),
      );
      const q = heads(linear(v, wq!));
      const k = heads(linear(v, wk!));
      const vv = heads(linear(v, wv!));
      const sdims = [B, H, T, T];
      const scores = b.multiply(
        b.dot(q, k, { lhsBatch: [0, 1], rhsBatch: [0, 1], lhsContracting: [3],
          rhsContracting: [3] }),
        scalar(1 / Math.sqrt(HD), sdims),
      );
      const allowed = bd(
        b.compare(b.iota(arrayShape("s32", [T, T]), 1), b.iota(arrayShape("s32", [T, T]), 0),
          "LE"),
        sdims, [2, 3]);
      const p = softmax(b.select(allowed, scores, scalar(-Infinity, sdims)), sdims);
      const ctx = b.dot(p, vv, { lhsBatch: [0, 1], rhsBatch: [0, 1], lhsContracting: [3],
        rhsContracting: [2] });
      return linear(b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [B, T, D]), wo!);
    };
    const mlp = (v: Instruction, l: number) => {
      const w1 = b.parameter(arrayShape("f32", [D, F]), `l${l}_w1`);
      const w2 = b.parameter(arrayShape("f32", [F, D]), `l${l}_w2`);
      return linear(b.tanh(linear(v, w1)), w2);
    };
    let x: Instruction = x0;
    for (let l = 0; l < layers; l++) {
      x = b.add(x, attention(layerNorm(x), l));
      x = b.add(x, mlp(layerNorm(x), l));
    }
    return x;
  });
  return mb.build();
}

function inputsFor(module: Module): Literal[] {
  let s = 12345;
  return module.entry.parameters.map((p) => {
    const shape = p.shape;
    if (shape.kind !== "array") throw new Error("bench: tuple parameter");
    const n = shape.dims.reduce((a, d) => a * d, 1);
    const vals = Array.from({ length: n }, () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return (s / 2 ** 31 - 1) * 0.1;
    });
    return literal("f32", [...shape.dims], vals);
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const r = fn();
  return [r, performance.now() - t0];
}

const self = fileURLToPath(import.meta.url);

interface ChildReport {
  hit: string;
  ms: number;
}

// "stored" entries come from a `prepare` step that returns a new module (as a pass pipeline
// does), so the entry carries the compiled module's proto and a warm load decodes it.
type Variant = "key module" | "stored module";
const VARIANTS: readonly Variant[] = ["key module", "stored module"];

function prepareFor(variant: Variant): ((m: Module) => Module) | undefined {
  return variant === "stored module" ? (m) => cloneModule(m) : undefined;
}

/** Runs this script as a new process that loads (or compiles) once; returns its report. */
function child(
  backend: string,
  variant: Variant,
  dir: string,
  layers: number,
): ChildReport & { wallMs: number } {
  const t0 = performance.now();
  const r = spawnSync(
    process.execPath,
    ["--import", "tsx", self, "--child", backend, variant, dir, "--layers", String(layers)],
    { encoding: "utf8" },
  );
  const wallMs = performance.now() - t0;
  if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
  const report = JSON.parse(r.stdout.trim().split("\n").pop()!) as ChildReport;
  return { ...report, wallMs };
}

function runChild(): void {
  const i = process.argv.indexOf("--child");
  const backend = process.argv[i + 1]!;
  const variant = process.argv[i + 2] as Variant;
  const dir = process.argv[i + 3]!;
  const module = transformerStack(arg("layers", 12));
  const cache = new ProgramCache({ disk: dir });
  const [r, ms] = timed(() => cache.getOrCompile(module, backend, {}, prepareFor(variant)));
  process.stdout.write(`${JSON.stringify({ hit: r.hit, ms })}\n`);
}

// The goal applies to the code generator, where cold means running codegen.
function target(backend: string, speedup: number): string {
  if (backend !== "js") return "";
  return speedup >= 10 ? " (target 10x met)" : " (below the 10x target)";
}

function fmt(ms: number): string {
  return ms < 10 ? ms.toFixed(2) : ms.toFixed(1);
}

function measure(name: string, variant: Variant, module: Module, reps: number): string[] {
  const backend = getBackend(name);
  const prepare = prepareFor(variant);
  const layers = arg("layers", 12);
  const colds: number[] = [];
  const warms: number[] = [];
  const memHits: number[] = [];
  const dir = mkdtempSync(join(tmpdir(), "kiln-bench-cache-"));
  try {
    for (let i = 0; i < reps; i++) {
      const cold = new ProgramCache({ disk: join(dir, `cold${i}`) });
      const [r, ms] = timed(() => cold.getOrCompile(module, backend, {}, prepare));
      if (r.hit !== "miss") throw new Error(`bench: cold run was a ${r.hit}`);
      colds.push(ms);
      memHits.push(timed(() => cold.getOrCompile(module, backend, {}, prepare))[1]);
    }
    const warmDir = join(dir, "cold0");
    let exe: Executable | undefined;
    for (let i = 0; i < reps; i++) {
      const warm = new ProgramCache({ disk: warmDir });
      const [r, ms] = timed(() => warm.getOrCompile(module, backend, {}, prepare));
      if (r.hit !== "disk") throw new Error(`bench: warm run was a ${r.hit}`);
      warms.push(ms);
      exe = r.executable;
    }
    // the loaded program must compute what the module means
    const inputs = inputsFor(module);
    if (!literalsIdentical(single(exe!.run(inputs)), single(evaluate(module, inputs)))) {
      throw new Error(`bench: ${name}'s cached program disagrees with the evaluator`);
    }
    const coldChild = child(name, variant, join(dir, "child"), layers);
    const warmChild = child(name, variant, join(dir, "child"), layers);
    if (coldChild.hit !== "miss" || warmChild.hit !== "disk") {
      throw new Error(`bench: child runs were ${coldChild.hit}, ${warmChild.hit}`);
    }
    const cold = median(colds);
    const warm = median(warms);
    const info = new ProgramCache({ disk: warmDir }).info();
    return [
      name,
      variant,
      fmt(cold),
      fmt(median(memHits)),
      fmt(warm),
      fmt(warmChild.ms),
      fmt(coldChild.wallMs),
      fmt(warmChild.wallMs),
      `${(cold / warm).toFixed(1)}x${target(name, cold / warm)}`,
      (info.diskBytes / 1024).toFixed(1),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function main(): void {
  const layers = arg("layers", 12);
  const reps = arg("reps", 5);
  const module = transformerStack(layers);
  const count = module.computations.reduce((n, c) => n + c.instructions.length, 0);
  console.log(`module: ${layers}-layer transformer stack, ${count} instructions`);

  const rows: string[][] = [];
  const header = ["backend", "entry", "cold ms", "memory hit ms", "warm fresh cache ms",
    "warm new process ms", "cold process wall ms", "warm process wall ms", "speedup", "KiB"];
  for (const name of backendNames()) {
    const backend = getBackend(name);
    if (!backend.serialize || !backend.deserialize) {
      console.log(`${name}: no serialize/deserialize, memory cache only; skipped`);
      continue;
    }
    for (const variant of VARIANTS) rows.push(measure(name, variant, module, reps));
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join("  ");
  console.log(line(header));
  for (const r of rows) console.log(line(r));
  console.log(`(median of ${reps}; speedup = cold / warm fresh cache; process wall times ` +
    `include Node and tsx startup)`);
}

// Only when run as a script (the builder above is importable by other benches).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === self) {
  if (process.argv.includes("--child")) runChild();
  else main();
}
