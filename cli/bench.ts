// `kiln bench`: one model, per backend, three ways — eager (op by op), lazy (one deferred
// graph per call, realized at the end) and compiled (compile(): the first call's time is the
// compile time, the rest are steady state) — each timed over --iterations calls after a
// warm-up, reported as median and spread (min..max), with the peak of process memory (RSS)
// sampled after every call. A progress bar goes to stderr when it is a terminal.

import { compile } from "../compiler/index.ts";
import { Tensor } from "../index.ts";
import { backendNames } from "../runtime/backend.ts";
import { setEagerBackend } from "../tensor/dispatch.ts";
import { lazy, realizeAll } from "../tensor/lazy.ts";
import { toJsonText, type Out } from "./commands.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { argsFor, type LoadedModel, userCode } from "./load.ts";
import { formatSpec, type SizeSpec } from "./spec.ts";

export interface BenchOptions {
  spec?: SizeSpec;
  backends?: readonly string[];
  iterations: number;
  json?: boolean;
}

export interface BenchRow {
  backend: string;
  mode: "eager" | "lazy" | "compiled";
  /** compiled: the first call (trace + passes + codegen + run), ms. */
  compileMs?: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** The highest RSS seen during this row's calls, bytes. */
  peakRssBytes: number;
}

function tensorsIn(v: unknown, out: Tensor[] = []): Tensor[] {
  if (v instanceof Tensor) out.push(v);
  else if (Array.isArray(v)) for (const x of v) tensorsIn(x, out);
  else if (typeof v === "object" && v !== null) for (const x of Object.values(v)) tensorsIn(x, out);
  return out;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

type Call = (...args: unknown[]) => unknown;

export function benchCommand(model: LoadedModel, o: BenchOptions, out: Out): ExitCode {
  const known = backendNames();
  const backends = o.backends ?? known;
  for (const b of backends) {
    if (!known.includes(b)) {
      throw new CliError(EXIT.usage, `unknown backend '${b}' (backends: ${known.join(", ")})`);
    }
  }
  const args = argsFor(model, o.spec);
  const target = model.target;
  const eager: Call =
    typeof target === "function"
      ? (target as Call)
      : (...a: unknown[]) => (target.call as Call).apply(target, a);
  const total = backends.length * 3 * (o.iterations + 1);
  let done = 0;
  const tty = process.stderr.isTTY === true && !o.json;
  const tick = (label: string): void => {
    done++;
    if (!tty) return;
    const width = 30;
    const filled = Math.round((done / total) * width);
    process.stderr.write(`\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${label}   `);
  };
  const rows: BenchRow[] = [];
  const what = `running on ${formatSpec(o.spec ?? {})}`;
  const time = (backend: string, mode: BenchRow["mode"], call: () => void, first?: number) => {
    const times: number[] = [];
    let peak = process.memoryUsage().rss;
    for (let i = 0; i < o.iterations; i++) {
      const t0 = performance.now();
      userCode(model.name, what, call);
      times.push(performance.now() - t0);
      peak = Math.max(peak, process.memoryUsage().rss);
      tick(`${backend} ${mode}`);
    }
    rows.push({
      backend,
      mode,
      ...(first !== undefined ? { compileMs: first } : {}),
      medianMs: median(times),
      minMs: Math.min(...times),
      maxMs: Math.max(...times),
      peakRssBytes: peak,
    });
  };
  for (const b of backends) {
    setEagerBackend(b);
    try {
      const runEager = (): void => {
        for (const t of tensorsIn(eager(...args))) t.data();
      };
      userCode(model.name, what, runEager);
      tick(`${b} eager`);
      time(b, "eager", runEager);
      const runLazy = (): void => {
        const r = lazy(() => eager(...args), { backend: b });
        const ts = tensorsIn(r);
        realizeAll(ts);
        for (const t of ts) t.data();
      };
      userCode(model.name, what, runLazy);
      tick(`${b} lazy`);
      time(b, "lazy", runLazy);
    } finally {
      setEagerBackend(undefined);
    }
    const fast = compile(target as Call, { ...model.compileOptions, backend: b, cache: "memory" });
    const t0 = performance.now();
    userCode(model.name, what, () => fast(...args));
    const first = performance.now() - t0;
    tick(`${b} compiled`);
    time(b, "compiled", () => {
      for (const t of tensorsIn(fast(...args))) t.data();
    }, first);
  }
  if (tty) process.stderr.write("\r\x1b[K");
  if (o.json) {
    out(toJsonText({ model: model.name, spec: o.spec ?? {}, iterations: o.iterations, rows }));
    return EXIT.ok;
  }
  out(`${model.name} (${formatSpec(o.spec ?? {})}), ${o.iterations} iterations after a warm-up`);
  out(
    `${"backend".padEnd(12)} ${"mode".padEnd(9)} ${"compile".padStart(10)} ` +
      `${"median".padStart(10)} ${"min..max".padStart(19)} ${"peak RSS".padStart(10)}`,
  );
  const ms = (x: number): string => `${x.toFixed(2)} ms`;
  for (const r of rows) {
    out(
      `${r.backend.padEnd(12)} ${r.mode.padEnd(9)} ` +
        `${(r.compileMs !== undefined ? ms(r.compileMs) : "-").padStart(10)} ` +
        `${ms(r.medianMs).padStart(10)} ${`${r.minMs.toFixed(2)}..${ms(r.maxMs)}`.padStart(19)} ` +
        `${`${(r.peakRssBytes / 2 ** 20).toFixed(0)} MiB`.padStart(10)}`,
    );
  }
  return EXIT.ok;
}
