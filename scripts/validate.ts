// `npm run validate`: the model-zoo validation report (issue 8). Every model in models/ runs
// its tiny config at a few input sizes in every mode on every backend — eager on js (the
// reference: js is the exact tier, bit-identical to the evaluator), then eager, lazy and
// compiled on each backend (the interpreter compiled only, at the smallest size: it is the
// slow oracle) — and each row gives the max abs error against the reference, whether that is
// within the bound of the backend's tier (runtime/tiers.ts: zero for an exact backend; for a
// tolerance one such as native, the multi-op program bound, as the row is a whole forward
// pass), the graphs compiled and graph breaks, and the kernels (fusions by kind) of the
// optimized program. Models with a PyTorch fixture (test/fixtures/models.json) also run once on
// PyTorch's weights and inputs, and those rows give the error against PyTorch as well (the
// zoo's contract: 1e-4 on every backend). The table is printed and written to
// docs/validation.md with the date, machine and commit. validateModel() is the core the test
// calls on one model and one size.

import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { cpus, platform, release } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { compile, type CompiledFunction, INTERNALS } from "../compiler/compile.ts";
import { type ModelName, zoo } from "../models/index.ts";
import { fusionSummary, type FusionSummary } from "../passes/index.ts";
import { backendNames, backendTier } from "../runtime/index.ts";
import { EPS, PROGRAM_EPS_FACTOR, PROGRAM_ULPS, ulp } from "../runtime/tiers.ts";
import { eagerBackendName } from "../tensor/dispatch.ts";
import {
  lastLazyGraph,
  lazy,
  lazyStats,
  nn,
  realizeAll,
  resetLazyStats,
  setEagerBackend,
  Tensor,
} from "../tensor/index.ts";
import { asTensors, getCase, modelCases, weights } from "../test/models/fixtures.ts";

/** A way of running the model and the backend it runs on: `eager:js`, `compiled:native`. */
export type Mode = `${"eager" | "lazy" | "compiled"}:${string}`;

/** The backend the reference row runs eager on: an exact one (bit-identical to the evaluator). */
export const REFERENCE_BACKEND = "js";

/** The zoo's contract with PyTorch, on every backend: max abs error 1e-4 in float32. */
export const PYTORCH_TOL = 1e-4;

/** One model × size × mode. Errors are max abs differences over every output tensor. */
export interface ValidationRow {
  readonly model: string;
  /** The size spec in words (`batch=2 seq=16`), or `pytorch` for the fixture's inputs. */
  readonly size: string;
  readonly mode: Mode;
  /** The backend's numerics tier (runtime/tiers.ts). */
  readonly tier: "exact" | "tolerance";
  /** Against the reference (eager on js) on the same inputs (0 for the reference itself). */
  readonly maxErrEager: number;
  /**
   * The tier's bound on that error at the largest output (0 for an exact backend): the bound
   * each element is held to is this or smaller (it scales with the element's own ulp).
   */
  readonly bound: number;
  /** Every element within its tier bound (an exact backend: bit-identical). */
  readonly withinBound: boolean;
  /** Against PyTorch's outputs (fixture rows only). */
  readonly maxErrPyTorch: number | undefined;
  /** Programs compiled for this call: lazy graphs run, or compile() traces (new ones). */
  readonly compiles: number;
  /** compile()'s distinct graph breaks so far (0 for eager and lazy). */
  readonly graphBreaks: number;
  /** Kernels of the optimized program (lazy: the last graph; compiled: the newest entry). */
  readonly fusion: FusionSummary | undefined;
  readonly ms: number;
}

export interface ValidateOptions {
  /** The compiled backends to run at every size (default: every registered one but the
   * interpreter). */
  backends?: readonly string[];
  /** Also run the interpreter backend at the first size (default true). */
  interpreterAtFirst?: boolean;
  /** Add the PyTorch-fixture rows where a fixture exists (default true). */
  pytorch?: boolean;
}

type Callable = (...args: unknown[]) => unknown;

function tensorsIn(value: unknown): Tensor[] {
  if (value instanceof Tensor) return [value];
  if (Array.isArray(value)) return value.flatMap(tensorsIn);
  if (value instanceof Map) return [...value.values()].flatMap(tensorsIn);
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(tensorsIn);
  return [];
}

function flat(t: Tensor): number[] {
  const out: number[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) for (const x of v) walk(x);
    else out.push(Number(v));
  };
  walk(t.toArray({ bigint: true }));
  return out;
}

/** Max abs difference between two output lists; a shape or count mismatch throws. */
export function maxAbsError(what: string, got: readonly Tensor[], want: readonly Tensor[]): number {
  if (got.length !== want.length) {
    throw new Error(`${what}: ${got.length} output tensors, expected ${want.length}`);
  }
  let worst = 0;
  for (const [k, g] of got.entries()) {
    const w = want[k]!;
    if (g.shape.join() !== w.shape.join()) {
      throw new Error(
        `${what}: output ${k} has shape [${g.shape.join(", ")}], expected [${w.shape.join(", ")}]`,
      );
    }
    const a = flat(g);
    const b = flat(w);
    for (let i = 0; i < a.length; i++) {
      const d = Math.abs(a[i]! - b[i]!);
      // NaN where the reference is finite is an unbounded error, not a skipped element.
      if (Number.isNaN(d)) {
        if (!(Number.isNaN(a[i]!) && Number.isNaN(b[i]!))) return Infinity;
      } else if (d > worst) worst = d;
    }
  }
  return worst;
}

/** The float32 values of a tensor; undefined for a non-float tensor (ids, masks). */
function floats(t: Tensor): Float32Array | undefined {
  if (t.dtype !== "float32") return undefined;
  return Float32Array.from(flat(t));
}

/** The largest finite magnitude over the float tensors. */
export function maxMagnitude(ts: readonly Tensor[]): number {
  let m = 0;
  for (const t of ts) {
    const d = floats(t);
    if (d) for (const x of d) if (Number.isFinite(x) && Math.abs(x) > m) m = Math.abs(x);
  }
  return m;
}

/** A comparison in a backend's tier: the largest per-element bound, and whether all held. */
export interface TierCheck {
  readonly bound: number;
  readonly within: boolean;
}

/**
 * `got` against the reference `want` in `tier` (runtime/tiers.ts). Exact: bit-identical (NaN
 * where NaN). Tolerance: a whole forward pass is a program of many operations, so each float
 * element is held to the multi-op program bound, PROGRAM_ULPS · ulp(want) + PROGRAM_EPS_FACTOR
 * · eps(f32) · scale, `scale` the largest finite magnitude of the program's inputs (the call's
 * arguments and the model's weights) and of the reference's outputs; NaN must be NaN and an
 * infinity must match; integer outputs are exact in every tier.
 */
export function tierCheck(
  tier: "exact" | "tolerance",
  got: readonly Tensor[],
  want: readonly Tensor[],
  inputScale: number,
): TierCheck {
  const scale = Math.max(inputScale, maxMagnitude(want));
  const slack = tier === "exact" ? 0 : PROGRAM_EPS_FACTOR * EPS.f32 * scale;
  let bound = 0;
  let within = got.length === want.length;
  for (const [k, w] of want.entries()) {
    const g = got[k];
    if (g === undefined || g.shape.join() !== w.shape.join()) return { bound, within: false };
    const wf = floats(w);
    const a = flat(g);
    const b = flat(w);
    if (wf && tier === "tolerance") {
      bound = Math.max(bound, PROGRAM_ULPS * ulp(maxMagnitude([w]), "f32") + slack);
    }
    for (let i = 0; i < b.length; i++) {
      const x = a[i]!;
      const y = b[i]!;
      if (Number.isNaN(x) || Number.isNaN(y)) {
        within &&= Number.isNaN(x) && Number.isNaN(y);
      } else if (!wf || tier === "exact" || !Number.isFinite(y) || !Number.isFinite(x)) {
        within &&= x === y;
      } else {
        within &&= Math.abs(x - y) <= PROGRAM_ULPS * ulp(y, "f32") + slack;
      }
    }
  }
  return { bound, within };
}

/** Runs `fn` with eager ops (and what follows them: lazy, graph breaks) on `backend`. */
function onBackend<T>(backend: string, fn: () => T): T {
  const before = eagerBackendName();
  setEagerBackend(backend);
  try {
    return fn();
  } finally {
    setEagerBackend(before);
  }
}

// What the backend compiled: the executable's module, after padding (a bucketed entry's
// `module` is the dynamic program before it) and the optimization pipeline.
function compiledSummary(fast: CompiledFunction<Callable>): FusionSummary | undefined {
  const entries = fast[INTERNALS].entries();
  const exe = entries[entries.length - 1]?.exe;
  return exe ? fusionSummary(exe.module) : undefined;
}

function timed<T>(fn: () => T): { value: T; ms: number } {
  const t0 = performance.now();
  const value = fn();
  return { value, ms: performance.now() - t0 };
}

/** A run's inputs: a label, the call's arguments, and PyTorch's outputs when known. */
interface Case {
  readonly size: string;
  readonly args: unknown[];
  readonly pytorch: readonly Tensor[] | undefined;
}

function runCase(
  model: nn.Module,
  name: string,
  c: Case,
  compiled: Map<string, CompiledFunction<Callable>>,
  backends: readonly string[],
): ValidationRow[] {
  const call = (model.call as Callable).bind(model);
  const rows: ValidationRow[] = [];
  const what = (mode: string) => `${name} ${c.size} ${mode}`;
  const refMode: Mode = `eager:${REFERENCE_BACKEND}`;
  const reference = onBackend(REFERENCE_BACKEND, () => timed(() => tensorsIn(call(...c.args))));
  // The program's inputs, for the tolerance bound's scale: the arguments and the weights.
  const inputScale = maxMagnitude([
    ...tensorsIn(c.args),
    ...Object.values(model.stateDict()),
  ]);
  const vsTorch = (out: Tensor[], mode: string) =>
    c.pytorch ? maxAbsError(`${what(mode)} vs PyTorch`, out, c.pytorch) : undefined;
  const row = (
    mode: Mode,
    backend: string,
    run: { value: Tensor[]; ms: number },
    facts: Pick<ValidationRow, "compiles" | "graphBreaks" | "fusion">,
  ): ValidationRow => {
    const tier = backendTier(backend);
    const check = tierCheck(tier, run.value, reference.value, inputScale);
    return {
      model: name,
      size: c.size,
      mode,
      tier,
      maxErrEager: maxAbsError(`${what(mode)} vs ${refMode}`, run.value, reference.value),
      bound: check.bound,
      withinBound: check.within,
      maxErrPyTorch: vsTorch(run.value, mode),
      ...facts,
      ms: run.ms,
    };
  };
  rows.push(
    row(refMode, REFERENCE_BACKEND, reference, { compiles: 0, graphBreaks: 0, fusion: undefined }),
  );

  for (const backend of backends) {
    if (backend !== "interpreter") {
      if (backend !== REFERENCE_BACKEND) {
        const eager = onBackend(backend, () => timed(() => tensorsIn(call(...c.args))));
        const facts = { compiles: 0, graphBreaks: 0, fusion: undefined };
        rows.push(row(`eager:${backend}`, backend, eager, facts));
      }
      resetLazyStats();
      const lz = onBackend(backend, () =>
        timed(() => {
          const out = tensorsIn(lazy(() => call(...c.args), {
            maxDepth: 1_000_000,
            cutRepeats: false,
            backend,
          }));
          realizeAll(out);
          return out;
        }),
      );
      const graph = lastLazyGraph();
      rows.push(
        row(`lazy:${backend}`, backend, lz, {
          compiles: lazyStats().graphs,
          graphBreaks: 0,
          fusion: graph ? fusionSummary(graph.module) : undefined,
        }),
      );
    }
    let fast = compiled.get(backend);
    if (!fast) {
      fast = compile(model, { backend, cache: "off" }) as CompiledFunction<Callable>;
      compiled.set(backend, fast);
    }
    const before = fast.stats.compiles;
    const f = fast;
    // A graph break's eager part runs on the same backend as the compiled part.
    const run = onBackend(backend, () => timed(() => tensorsIn(f(...c.args))));
    rows.push(
      row(`compiled:${backend}`, backend, run, {
        compiles: fast.stats.compiles - before,
        graphBreaks: fast.stats.graphBreaks.length,
        fusion: compiledSummary(fast),
      }),
    );
  }
  return rows;
}

function sizeText(spec: Readonly<Record<string, number>>): string {
  return Object.entries(spec)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
}

/** The fixture's forward case as call arguments and expected outputs, by model. */
function fixtureCase(name: ModelName): Case | undefined {
  let cases;
  try {
    cases = modelCases(name);
  } catch {
    return undefined;
  }
  const c = cases.get("forward");
  if (c === undefined) return undefined;
  const args = asTensors(c.args);
  const out = asTensors(Array.isArray(c.out) ? c.out : [c.out]);
  if (name === "bert") {
    const [ids, mask, types] = args;
    return {
      size: "pytorch",
      args: [ids, { attentionMask: mask, tokenTypeIds: types }],
      pytorch: out,
    };
  }
  return { size: "pytorch", args: [args[0]], pytorch: out };
}

/** Every registered backend but the interpreter, the reference's (js) first. */
function defaultBackends(): string[] {
  const names = backendNames().filter((b) => b !== "interpreter");
  const ref = names.filter((b) => b === REFERENCE_BACKEND);
  return [...ref, ...names.filter((b) => b !== REFERENCE_BACKEND)];
}

/**
 * Validates one zoo model's tiny config at `specs` (in order; one compiled function per backend
 * over all of them, so recompiles across sizes show), then on PyTorch's weights and inputs.
 */
export function validateModel(
  name: ModelName,
  specs: readonly Readonly<Record<string, number>>[],
  options: ValidateOptions = {},
): ValidationRow[] {
  const backends = options.backends ?? defaultBackends();
  const entry = zoo[name];
  const model = entry.create("tiny").eval();
  const compiled = new Map<string, CompiledFunction<Callable>>();
  const rows: ValidationRow[] = [];
  for (const [i, spec] of specs.entries()) {
    const withInterp =
      i === 0 && (options.interpreterAtFirst ?? true) && !backends.includes("interpreter");
    const list = withInterp ? [...backends, "interpreter"] : backends;
    const c: Case = { size: sizeText(spec), args: entry.inputs(spec, "tiny"), pytorch: undefined };
    rows.push(...runCase(model, name, c, compiled, list));
  }
  if (options.pytorch ?? true) {
    const c = fixtureCase(name);
    if (c) {
      const torchModel = entry.create("tiny").eval();
      const r = torchModel.loadStateDict(weights(name));
      if (r.missingKeys.length > 0 || r.unexpectedKeys.length > 0) {
        throw new Error(
          `${name}: PyTorch weights do not match (missing: ${r.missingKeys.join(", ")}; ` +
            `unexpected: ${r.unexpectedKeys.join(", ")})`,
        );
      }
      rows.push(...runCase(torchModel, name, c, new Map(), backends));
    }
  }
  return rows;
}

/** The sizes each model runs at: tiny configs, smallest first. */
export const SIZES = {
  mlp: [{ batch: 1 }, { batch: 8 }, { batch: 32 }],
  resnet: [
    { batch: 1, size: 16 },
    { batch: 2, size: 32 },
  ],
  bert: [
    { batch: 1, seq: 8 },
    { batch: 2, seq: 16 },
    { batch: 2, seq: 32 },
  ],
  gpt2: [
    { batch: 1, seq: 8 },
    { batch: 2, seq: 16 },
    { batch: 1, seq: 32 },
  ],
  vit: [{ batch: 1 }, { batch: 2 }],
  whisper: [
    { batch: 1, frames: 16 },
    { batch: 2, frames: 32 },
  ],
} as const satisfies { [K in ModelName]: readonly Record<string, number>[] };

// ---- Report ----------------------------------------------------------------------------------

function err(e: number | undefined): string {
  if (e === undefined) return "-";
  if (e === 0) return "0";
  return e.toExponential(1);
}

function kernels(f: FusionSummary | undefined): string {
  if (!f) return "-";
  const kinds = (Object.keys(f.byKind) as (keyof FusionSummary["byKind"])[])
    .filter((k) => f.byKind[k] > 0)
    .map((k) => `${k}=${f.byKind[k]}`)
    .join(" ");
  return `${f.kernels} (${kinds})`;
}

export const HEADER = [
  "model",
  "size",
  "mode",
  "max err vs eager:js",
  "tier bound",
  "vs PyTorch",
  "compiles",
  "graph breaks",
  "kernels (by kind)",
  "ms",
] as const;

/** The tier's bound and whether the row kept it: `exact, ok`, `3.8e-6, ok`, `2.0e-6, OVER`. */
function boundCell(r: ValidationRow): string {
  const verdict = r.withinBound ? "ok" : "OVER";
  return `${r.tier === "exact" ? "exact" : err(r.bound)}, ${verdict}`;
}

export function rowCells(r: ValidationRow): string[] {
  return [
    r.model,
    r.size,
    r.mode,
    err(r.maxErrEager),
    boundCell(r),
    err(r.maxErrPyTorch),
    String(r.compiles),
    String(r.graphBreaks),
    kernels(r.fusion),
    r.ms.toFixed(1),
  ];
}

export function textTable(rows: readonly ValidationRow[]): string {
  const cells = [[...HEADER], ...rows.map(rowCells)];
  const widths = HEADER.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  return cells.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n");
}

export function markdownTable(rows: readonly ValidationRow[]): string {
  const line = (r: readonly string[]) => `| ${r.join(" | ")} |`;
  return [line(HEADER), line(HEADER.map(() => "---")), ...rows.map((r) => line(rowCells(r)))]
    .join("\n");
}

/** Worst errors and compile totals per model and mode, for the summary table. */
function summary(rows: readonly ValidationRow[]): string {
  const out = [
    "| model | mode | worst err vs eager:js | within tier bound | worst vs PyTorch " +
      "| compiles (all sizes) | graph breaks |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  ];
  const keys = [...new Set(rows.map((r) => `${r.model}\u0000${r.mode}`))];
  for (const key of keys) {
    const [model, mode] = key.split("\u0000") as [string, string];
    // The fixture rows use a second model instance: its compiles are not the zoo sizes'.
    const of = rows.filter((r) => r.model === model && r.mode === mode);
    const sized = of.filter((r) => r.size !== "pytorch");
    const torch = of.flatMap((r) => (r.maxErrPyTorch === undefined ? [] : [r.maxErrPyTorch]));
    const tier = of[0]!.tier;
    const within = of.every((r) => r.withinBound);
    const bound = tier === "exact" ? "exact" : `≤ ${err(Math.max(...of.map((r) => r.bound)))}`;
    out.push(
      `| ${model} | ${mode} | ${err(Math.max(...of.map((r) => r.maxErrEager)))} | ` +
        `${within ? "yes" : "NO"} (${bound}) | ` +
        `${torch.length ? err(Math.max(...torch)) : "-"} | ` +
        `${sized.reduce((s, r) => s + r.compiles, 0)} | ` +
        `${Math.max(0, ...of.map((r) => r.graphBreaks))} |`,
    );
  }
  return out.join("\n");
}

function commit(): string {
  try {
    const sha = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain"], { encoding: "utf8" }).trim();
    return dirty ? `${sha} (with uncommitted changes)` : sha;
  } catch {
    return "unknown";
  }
}

export function markdownReport(rows: readonly ValidationRow[], seconds: number): string {
  const cpu = cpus();
  const machine =
    `${cpu[0]?.model.trim() ?? "unknown CPU"}, ${cpu.length} cores, ` +
    `${platform()} ${release()}, Node ${process.version}`;
  return [
    "# Model-zoo validation",
    "",
    "Generated by `npm run validate` (scripts/validate.ts); do not edit by hand.",
    "",
    `- Date: ${new Date().toISOString()}`,
    `- Machine: ${machine}`,
    `- Commit: ${commit()}`,
    `- Run time: ${seconds.toFixed(1)} s`,
    "",
    "Every model in `models/` runs its tiny config at each size below in every mode on every",
    "registered backend: `eager:js` first, the reference (js is the exact tier, bit-identical",
    "to the IR evaluator), then eager, lazy (`lazy()`, one program per forward pass) and",
    "`compile()` on each backend — the interpreter backend (the IR evaluator) compiled only,",
    "at the smallest size. Each backend keeps one compiled function over all of a model's",
    "sizes, so `compiles` counts the traces a size added (a recompile when a shape change",
    "makes a dim dynamic, none when a bucketed program answers). The `pytorch` rows load",
    "PyTorch's weights and inputs from test/fixtures/models and compare with PyTorch's",
    "outputs (the zoo's contract, on every backend: 1e-4).",
    "",
    "Each row is held to its backend's tier (`runtime/tiers.ts`, docs/architecture.md).",
    "`exact` (js, interpreter): bit-identical to the reference. `tolerance` (native: sums",
    "reassociated across SIMD lanes and threads, FMA contraction, polynomial exp/tanh/erf):",
    "a forward pass is a program of many ops, so every float element is held to the",
    "multi-op program bound, `8 · ulp(expected) + 64 · eps(f32) · scale`, `scale` the",
    "largest finite magnitude of the inputs (arguments and weights) and of the reference's",
    "outputs; NaN must be NaN; integer outputs are exact.",
    "",
    "Columns: max abs error against `eager:js` over every output tensor; the tier's bound",
    "(`exact`, or the bound at the largest output; each element's is that or smaller) and",
    "whether every element kept it (`ok` / `OVER`); the error against PyTorch (fixture",
    "rows); programs compiled by this call (lazy: graphs run; compiled: new traces); distinct",
    "graph breaks so far; kernels of the optimized program as `passes/fuse.ts`'s",
    "fusionSummary counts them (lazy: the last graph run; compiled: the newest program); wall",
    "time of the call in ms (compiled rows include the compile; a first native row includes",
    "the C compiler unless its kernels are in the library cache).",
    "",
    "## Summary",
    "",
    summary(rows),
    "",
    "## All runs",
    "",
    markdownTable(rows),
    "",
  ].join("\n");
}

function main(): void {
  const t0 = performance.now();
  const rows: ValidationRow[] = [];
  for (const name of Object.keys(zoo) as ModelName[]) {
    const t = performance.now();
    rows.push(...validateModel(name, SIZES[name]));
    console.error(`${name}: ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(textTable(rows));
  const path = join(import.meta.dirname, "..", "docs", "validation.md");
  writeFileSync(path, markdownReport(rows, seconds));
  console.log(`\nwrote ${path} (${seconds.toFixed(1)} s)`);
  const torchOk = (e: number | undefined) => e === undefined || e <= PYTORCH_TOL;
  const bad = rows.filter((r) => !r.withinBound || !torchOk(r.maxErrPyTorch));
  if (bad.length > 0) {
    console.error(
      `${bad.length} runs are outside their tier's bound or ${PYTORCH_TOL} of PyTorch:`,
    );
    for (const r of bad) console.error(`  ${rowCells(r).slice(0, 6).join("  ")}`);
    process.exitCode = 1;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main();
}
