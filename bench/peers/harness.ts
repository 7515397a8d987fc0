// The peer benchmarks' harness, free of any peer package so tests can import it: deterministic
// inputs, the cross-check that every runtime computed the same thing before any of them is
// timed, the timing loop (warm-up, then runs until a time budget; median and spread), and the
// tables and the Markdown report, and what the parent and its child processes exchange (the
// hash that proves every process built the same inputs, rows as JSON). Figures are only
// comparable when the work is the same, which is why a runtime whose result disagrees with the
// reference is reported, never timed. Row names carry their thread count (`(1 thread)`,
// `(native, 2 threads)`): the same-threads ratio pairs a Kiln row with onnxruntime's row of
// that count by name, since the targets are stated as such ratios.

import { createHash } from "node:crypto";

/** Deterministic values in [-1, 1) (an LCG), so every runtime is fed the same bits. */
export function uniform(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

/** One array that goes into an inputs hash: a label (name, type, shape) and its bytes. */
export interface HashedArray {
  label: string;
  data: ArrayBufferView;
}

/**
 * SHA-256 (hex) of arrays in order, labels included, so two processes that built the same
 * inputs from the same seeds get the same hash and any difference in a bit, a shape or the
 * order shows up.
 */
export function hashArrays(arrays: readonly HashedArray[]): string {
  const h = createHash("sha256");
  for (const a of arrays) {
    h.update(`${a.label}\n${a.data.byteLength}\n`);
    h.update(new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength));
  }
  return h.digest("hex");
}

/** Relative and absolute tolerance of a cross-check: |got - ref| <= atol + rtol * max|ref|. */
export interface Tolerance {
  rtol: number;
  atol: number;
}

export interface CheckResult {
  ok: boolean;
  maxAbsDiff: number;
  /** The bound maxAbsDiff was held to. */
  bound: number;
  /** Why it failed, in words (length or NaN mismatch, or the first element over the bound). */
  why?: string;
}

/**
 * Compares a runtime's output with the reference. NaN must match NaN position for position (a
 * NaN elsewhere is a failure, not a huge difference), lengths must agree, and the largest
 * elementwise difference must stay within `atol + rtol * max|ref|` — one bound for the whole
 * array, because f32 accumulation error grows with the result's magnitude, not per element.
 */
export function crossCheck(
  got: ArrayLike<number>,
  ref: ArrayLike<number>,
  tol: Tolerance,
): CheckResult {
  let scale = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = Math.abs(ref[i]!);
    if (r > scale && Number.isFinite(r)) scale = r;
  }
  const bound = tol.atol + tol.rtol * scale;
  if (got.length !== ref.length) {
    return {
      ok: false,
      maxAbsDiff: Infinity,
      bound,
      why: `length ${got.length}, expected ${ref.length}`,
    };
  }
  let maxAbsDiff = 0;
  let worst = -1;
  for (let i = 0; i < ref.length; i++) {
    const g = got[i]!;
    const r = ref[i]!;
    if (Number.isNaN(g) !== Number.isNaN(r)) {
      return { ok: false, maxAbsDiff: NaN, bound, why: `element ${i}: got ${g}, expected ${r}` };
    }
    if (Number.isNaN(r)) continue;
    const d = g === r ? 0 : Math.abs(g - r);
    if (!(d <= maxAbsDiff)) {
      maxAbsDiff = d;
      worst = i;
    }
  }
  if (maxAbsDiff <= bound) return { ok: true, maxAbsDiff, bound };
  return {
    ok: false,
    maxAbsDiff,
    bound,
    why:
      `element ${worst}: got ${got[worst]}, expected ${ref[worst]} ` +
      `(bound ${bound.toExponential(2)})`,
  };
}

export interface Timing {
  /** Milliseconds per run, median of the timed runs. */
  medianMs: number;
  /** (p90 - p10) / median, as a fraction: how much the runs spread around the median. */
  spread: number;
  runs: number;
}

/** Median and spread of run times (ms). */
export function summarize(times: readonly number[]): Timing {
  if (times.length === 0) throw new Error("summarize: no runs were timed");
  const s = [...times].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * (s.length - 1) + 0.5))]!;
  const medianMs =
    s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return { medianMs, spread: medianMs > 0 ? (at(0.9) - at(0.1)) / medianMs : 0, runs: s.length };
}

export interface TimingOptions {
  warmup: number;
  /** Keep running until this much time has been spent (and at least minRuns runs). */
  budgetMs: number;
  minRuns: number;
  maxRuns: number;
}

/** Times `fn` (awaited when it returns a promise): warm-up runs, then the timed runs. */
export async function measure(fn: () => unknown, o: TimingOptions): Promise<Timing> {
  for (let i = 0; i < o.warmup; i++) await fn();
  const times: number[] = [];
  const t0 = performance.now();
  while (
    times.length < o.maxRuns &&
    (times.length < o.minRuns || performance.now() - t0 < o.budgetMs)
  ) {
    const s = performance.now();
    await fn();
    times.push(performance.now() - s);
  }
  return summarize(times);
}

/**
 * A row as JSON carries it: a child process prints rows and the parent reads them back, and
 * JSON has no Infinity or NaN (a length or NaN mismatch has one), so such a difference is left
 * out (the note says why the row failed).
 */
export function jsonRow(r: Row): Row {
  const out: Row = { runtime: r.runtime };
  if (r.timing !== undefined) out.timing = r.timing;
  if (r.maxAbsDiff !== undefined && Number.isFinite(r.maxAbsDiff)) out.maxAbsDiff = r.maxAbsDiff;
  if (r.note !== undefined) out.note = r.note;
  if (r.cache !== undefined) out.cache = r.cache;
  return out;
}

/** A Kiln row's program requests while it was cross-checked and timed (cacheStats()). */
export interface RowCache {
  requests: number;
  compiles: number;
  compileMs: number;
  hits: { memory: number; disk: number; shapeDynamic: number };
}

/** One runtime's row in a workload's table. */
export interface Row {
  runtime: string;
  /** Absent when the runtime was skipped or failed its cross-check. */
  timing?: Timing;
  maxAbsDiff?: number;
  /** Why there is no timing (not installed, unsupported, mismatch, error), in words. */
  note?: string;
  /** Kiln rows: the program cache's statistics over the row (its warm-up included). */
  cache?: RowCache;
}

/** A row's cache statistics in the note column: `cache: 3 compiles, 120 hits (...)`. */
export function cacheText(c: RowCache | undefined): string | undefined {
  if (c === undefined) return undefined;
  const h = c.hits;
  return `cache: ${c.compiles} compiles (${c.compileMs.toFixed(0)} ms), ` +
    `${h.memory + h.disk + h.shapeDynamic} hits (${h.memory} memory, ${h.disk} disk, ` +
    `${h.shapeDynamic} shape-dynamic) of ${c.requests} requests`;
}

export interface WorkloadResult {
  name: string;
  /** The unit of `rate`: GFLOP/s or GB/s, computed from the median; absent for plain ms. */
  unit?: "GFLOP/s" | "GB/s";
  /** Work per run in the unit's numerator (flops or bytes), for the rate column. */
  work?: number;
  /** The row the ratios are taken against. */
  baseline: string;
  rows: Row[];
}

/** Throughput for a row (GFLOP/s or GB/s), when the workload has a unit. */
export function rate(w: WorkloadResult, r: Row): number | undefined {
  if (w.work === undefined || r.timing === undefined) return undefined;
  return w.work / (r.timing.medianMs * 1e6);
}

/** "1 thread", "2 threads": how row names state a thread count. */
export function threadsText(n: number): string {
  return `${n} thread${n === 1 ? "" : "s"}`;
}

/** The onnxruntime row at `n` intra-op threads. */
export function ortRuntime(n: number): string {
  return `onnxruntime-node (${threadsText(n)})`;
}

/**
 * The thread count a row's name states in its parentheses (`Kiln compiled (native, 1 thread)`,
 * `onnxruntime-node (2 threads)`), or undefined when it states none.
 */
export function rowThreads(runtime: string): number | undefined {
  const m = /\((?:[^()]*, )?(\d+) threads?\)/.exec(runtime);
  return m ? Number(m[1]) : undefined;
}

/**
 * time(Kiln row) / time(onnxruntime row with the same thread count): the targets are
 * ratios against onnxruntime at equal threads. Undefined for rows that are not Kiln's, state no
 * thread count, or have no timed onnxruntime row to pair with.
 */
export function ortRatio(w: WorkloadResult, r: Row): number | undefined {
  const n = rowThreads(r.runtime);
  if (!r.runtime.startsWith("Kiln") || n === undefined || r.timing === undefined) return undefined;
  const ort = w.rows.find((x) => x.runtime === ortRuntime(n))?.timing;
  return ort === undefined ? undefined : r.timing.medianMs / ort.medianMs;
}

/** Whether a table gets the same-threads column: only where onnxruntime has rows. */
function hasOrt(w: WorkloadResult): boolean {
  return w.rows.some((r) => r.runtime.startsWith("onnxruntime-node ("));
}

/** time(row) / time(baseline): > 1 means slower than Kiln compiled. */
export function ratio(w: WorkloadResult, r: Row): number | undefined {
  const base = w.rows.find((x) => x.runtime === w.baseline)?.timing;
  if (base === undefined || r.timing === undefined) return undefined;
  return r.timing.medianMs / base.medianMs;
}

function fmt(x: number | undefined, digits: number): string {
  if (x === undefined) return "-";
  if (x >= 1000) return x.toFixed(0);
  return x.toFixed(digits);
}

/** The same-threads ratio column's header. */
export const ORT_COLUMN = "x onnxruntime (same threads)";

/** The table cells of a workload, header first. */
export function tableCells(w: WorkloadResult): string[][] {
  const head = ["runtime", "median ms", "spread", "runs"];
  if (w.unit) head.push(w.unit);
  const ort = hasOrt(w);
  head.push(`x ${w.baseline}`);
  if (ort) head.push(ORT_COLUMN);
  head.push("max abs diff", "note");
  const rows = w.rows.map((r) => {
    const t = r.timing;
    const cells = [
      r.runtime,
      fmt(t?.medianMs, 3),
      t ? `${(t.spread * 100).toFixed(1)}%` : "-",
      t ? String(t.runs) : "-",
    ];
    if (w.unit) cells.push(fmt(rate(w, r), 2));
    cells.push(fmt(ratio(w, r), 2));
    if (ort) cells.push(fmt(ortRatio(w, r), 2));
    cells.push(
      r.maxAbsDiff === undefined ? "-" : r.maxAbsDiff.toExponential(1),
      [r.note, cacheText(r.cache)].filter((x) => x !== undefined).join("; "),
    );
    return cells;
  });
  return [head, ...rows];
}

/** The first (runtime) and last (note) columns are text, left-aligned; the rest are numbers. */
function isText(column: number, columns: number): boolean {
  return column === 0 || column === columns - 1;
}

/** A fixed-width text table for the terminal. */
export function textTable(w: WorkloadResult): string {
  const cells = tableCells(w);
  const widths = cells[0]!.map((_, c) => Math.max(...cells.map((r) => r[c]!.length)));
  const line = (r: string[]) =>
    r
      .map((x, c) => (isText(c, r.length) ? x.padEnd(widths[c]!) : x.padStart(widths[c]!)))
      .join("  ")
      .trimEnd();
  return [`## ${w.name}`, line(cells[0]!), ...cells.slice(1).map(line)].join("\n");
}

/** The same table in Markdown. */
export function markdownTable(w: WorkloadResult): string {
  const cells = tableCells(w);
  const esc = (s: string) => s.replaceAll("|", "\\|");
  const out = [
    `| ${cells[0]!.join(" | ")} |`,
    `| ${cells[0]!.map((_, c) => (isText(c, cells[0]!.length) ? "---" : "---:")).join(" | ")} |`,
  ];
  for (const r of cells.slice(1)) out.push(`| ${r.map(esc).join(" | ")} |`);
  return out.join("\n");
}
