// The commands behind `kiln explain | dump | run | recompiles | cache`: each takes parsed
// options, writes its report through `out` (stdout in the CLI, a buffer in tests) and returns
// the exit code. Errors are CliErrors (errors.ts); main.ts turns them into one-line messages.

import {
  accessSync,
  constants as fsConstants,
  existsSync,
  mkdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, resolve, sep } from "node:path";
import { toJson } from "@bufbuild/protobuf";
import { compile, type CompileStats, describeGuard } from "../compiler/index.ts";
import type { Module } from "../ir/module.ts";
import { printHlo } from "../ir/print.ts";
import { moduleToMessage, moduleToProto } from "../ir/proto.ts";
import { HloModuleProtoSchema } from "../ir/proto/gen/hlo_pb.ts";
import { Tensor } from "../index.ts";
import { formatFusionSummary, fusionSummary } from "../passes/index.ts";
import { defaultProgramCache } from "../runtime/cache.ts";
import { cacheStats, compileMode, formatCacheStats } from "../runtime/cache_stats.ts";
import { backendNames, getBackend } from "../runtime/index.ts";
import { nativeDisabledByEnv, nativeUnavailableReason } from "../runtime/native/backend.ts";
import { defaultLibCache } from "../runtime/native/libcache.ts";
import { describeCompiler, nativeStatus } from "../runtime/native/toolchain.ts";
import { capture, optimizeWithSnapshots, pipelinePassNames, requireGraph } from "./capture.ts";
import type { Snapshot } from "./capture.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { argsFor, type LoadedModel, userCode } from "./load.ts";
import { renderHtml } from "./html.ts";
import { formatSpec, type SizeSpec } from "./spec.ts";

export type Out = (text: string) => void;

/** JSON text with bigints as strings (guards on int64 values hold bigints). */
export function toJsonText(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? x.toString() : x), 2);
}

// ---- explain ---------------------------------------------------------------------------------

export interface ExplainOptions {
  spec?: SizeSpec;
  backend?: string;
  json?: boolean;
}

function isPlain(v: unknown): boolean {
  if (v === null || ["string", "number", "boolean", "bigint", "undefined"].includes(typeof v)) {
    return true;
  }
  return Array.isArray(v) && v.every((x) => isPlain(x));
}

export function explainCommand(model: LoadedModel, o: ExplainOptions, out: Out): ExitCode {
  const c = capture(model, o.spec, o.backend);
  const e = c.explanation;
  const fusion = c.captured
    ? fusionSummary(optimizeWithSnapshots(c.captured).optimized)
    : undefined;
  if (o.json) {
    out(
      toJsonText({
        model: model.name,
        spec: o.spec ?? {},
        mode: e.mode,
        graphs: e.graphs,
        opsPerGraph: e.opsPerGraph,
        graphBreaks: e.graphBreaks.map(({ where, reason }) => ({ where, reason })),
        replayReasons: e.replayReasons.map(({ where, reason }) => ({ where, reason })),
        guards: e.guards.map((g) => ({
          kind: g.kind,
          path: g.path,
          // Identity guards hold the object itself (a module, a tensor): print those in words.
          ...(isPlain(g.expected) ? { expected: g.expected } : {}),
          text: describeGuard(g),
        })),
        sideEffects: e.sideEffects.map(({ where, reason }) => ({ where, reason })),
        likelyBreaks: e.likelyBreaks.map(({ where, reason }) => ({ where, reason })),
        freeVariables: e.freeVariables,
        fusion: fusion
          ? {
              kernels: fusion.kernels,
              byKind: fusion.byKind,
              list: fusion.list.map((k) => ({ ...k })),
            }
          : undefined,
      }),
    );
    return EXIT.ok;
  }
  out(String(e));
  if (fusion) {
    const text = formatFusionSummary(fusion).split("\n").join("\n  ");
    out(`  fusion (optimized program): ${text}`);
  }
  return EXIT.ok;
}

// ---- dump ------------------------------------------------------------------------------------

export type DumpFormat = "hlo" | "json" | "proto" | "html";
export type DumpStage = "captured" | "optimized" | "all";

export interface DumpOptions {
  spec?: SizeSpec;
  backend?: string;
  stage?: DumpStage;
  pass?: string;
  format: DumpFormat;
  out?: string;
}

function passFilter(pattern: string | undefined): RegExp | undefined {
  if (pattern === undefined) return undefined;
  let re: RegExp;
  try {
    re = new RegExp(pattern);
  } catch (e) {
    throw new CliError(EXIT.usage, `--pass '${pattern}' is not a regular expression`, e);
  }
  const names = pipelinePassNames();
  if (!names.some((n) => re.test(n))) {
    throw new CliError(
      EXIT.usage,
      `--pass '${pattern}' matches no pass (passes: ${names.join(", ")})`,
    );
  }
  return re;
}

/** Which snapshots a dump writes (see `kiln dump --help`). */
function selectStages(
  captured: Module,
  stage: DumpStage | undefined,
  re: RegExp | undefined,
): Snapshot[] {
  const first: Snapshot = { stage: "captured", pass: undefined, module: captured };
  const wanted = stage ?? (re ? undefined : "optimized");
  if (wanted === "captured" && !re) return [first];
  const { optimized, passes } = optimizeWithSnapshots(captured);
  const last: Snapshot = { stage: "optimized", pass: undefined, module: optimized };
  const chosen = re ? passes.filter((p) => re.test(p.stage)) : passes;
  switch (wanted) {
    case undefined:
      return chosen;
    case "captured":
      return [first, ...chosen];
    case "optimized":
      return re ? [...chosen, last] : [last];
    case "all":
      return [first, ...chosen, last];
    default: {
      const never: never = wanted;
      throw new Error(`unknown stage ${String(never)}`);
    }
  }
}

function fileSafe(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]+/g, "_");
}

const EXT = { hlo: "hlo", json: "json", proto: "pb", html: "html" } as const satisfies Record<
  DumpFormat,
  string
>;

function encode(m: Module, format: DumpFormat): string | Uint8Array {
  switch (format) {
    case "hlo":
      return printHlo(m);
    case "json":
      return `${JSON.stringify(toJson(HloModuleProtoSchema, moduleToMessage(m)), null, 2)}\n`;
    case "proto":
      return moduleToProto(m);
    case "html":
      return renderHtml(m.name, [{ stage: "module", pass: undefined, module: m }]);
    default: {
      const never: never = format;
      throw new Error(`unknown format ${String(never)}`);
    }
  }
}

export function dumpCommand(model: LoadedModel, o: DumpOptions, out: Out): ExitCode {
  const re = passFilter(o.pass);
  if (o.format === "proto" && o.out === undefined) {
    throw new CliError(EXIT.usage, "--format proto writes binary files: give --out <dir>");
  }
  if (o.out !== undefined) ensureDir(o.out);
  const graph = requireGraph(model, capture(model, o.spec, o.backend));
  // The HTML view is a pass-by-pass list: all stages unless asked otherwise.
  const stage = o.stage ?? (o.format === "html" && re === undefined ? "all" : undefined);
  const snaps = selectStages(graph, stage, re);
  if (o.format === "html") {
    const spec = formatSpec(o.spec ?? {});
    const page = renderHtml(`${model.name} ${spec.startsWith("(") ? spec : `(${spec})`}`, snaps);
    if (o.out === undefined) {
      out(page.trimEnd());
      return EXIT.ok;
    }
    const file = join(resolve(o.out), `${fileSafe(graph.name)}.html`);
    try {
      writeFileSync(file, page);
    } catch (e) {
      throw new CliError(EXIT.io, `cannot write '${file}': ${errCode(e)}`, e);
    }
    out(file);
    return EXIT.ok;
  }
  if (o.out !== undefined) {
    const dir = resolve(o.out);
    for (const [i, s] of snaps.entries()) {
      const file = join(dir, `${String(i).padStart(3, "0")}-${fileSafe(s.stage)}.${EXT[o.format]}`);
      try {
        writeFileSync(file, encode(s.module, o.format));
      } catch (e) {
        throw new CliError(EXIT.io, `cannot write '${file}': ${errCode(e)}`, e);
      }
      out(file);
    }
    return EXIT.ok;
  }
  if (o.format === "json") {
    const stages = snaps.map((s) => ({
      stage: s.stage,
      module: toJson(HloModuleProtoSchema, moduleToMessage(s.module)),
    }));
    out(JSON.stringify({ model: model.name, spec: o.spec ?? {}, stages }, null, 2));
    return EXIT.ok;
  }
  for (const s of snaps) {
    if (snaps.length > 1 || re !== undefined) out(`// ---- ${s.stage}`);
    out(printHlo(s.module).trimEnd());
  }
  return EXIT.ok;
}

function errCode(e: unknown): string {
  if (e instanceof Error && "code" in e && typeof e.code === "string") {
    return e.message.split(",")[0] ?? e.code;
  }
  return e instanceof Error ? e.message : String(e);
}

// Kernel pseudo-filesystems: mkdir there can fail in ways Node's recursive mkdir retries
// forever (seen with /proc), and nothing written there is a dump anyway.
const PSEUDO_FS = ["/proc", "/sys"];

function underPseudoFs(path: string): string | undefined {
  return PSEUDO_FS.find((root) => path === root || path.startsWith(`${root}${sep}`));
}

/**
 * Creates `dir` (and parents) or fails with exit code 5 naming it. The nearest existing
 * ancestor is checked first (a directory, writable, not under /proc or /sys), so mkdir is only
 * attempted where it can succeed.
 */
export function ensureDir(dir: string): void {
  const abs = resolve(dir);
  const refuse = (why: string, cause?: unknown): CliError =>
    new CliError(EXIT.io, `--out '${dir}' is not writable: ${why}`, cause);
  let ancestor = abs;
  while (!existsSync(ancestor) && dirname(ancestor) !== ancestor) ancestor = dirname(ancestor);
  let real = ancestor;
  try {
    real = realpathSync(ancestor);
  } catch {
    // A dangling symlink or a race: the checks below report the problem on `ancestor`.
  }
  const pseudo = underPseudoFs(abs) ?? underPseudoFs(real);
  if (pseudo !== undefined) {
    throw refuse(`it is under ${pseudo} (a kernel pseudo-filesystem), choose another directory`);
  }
  try {
    if (!statSync(ancestor).isDirectory()) {
      throw refuse(`ENOTDIR: '${ancestor}' exists and is not a directory`);
    }
    accessSync(ancestor, fsConstants.W_OK);
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw refuse(`${errCode(e)} ('${ancestor}')`, e);
  }
  try {
    mkdirSync(abs, { recursive: true });
    const probe = join(abs, `.kiln-write-test-${process.pid}`);
    // mkdir succeeds on an existing read-only directory: only creating a file proves it.
    writeFileSync(probe, "");
    rmSync(probe, { force: true });
  } catch (e) {
    throw refuse(errCode(e), e);
  }
}

// ---- run ---------------------------------------------------------------------------------------

export interface RunOptions {
  spec?: SizeSpec;
  backend?: string;
  json?: boolean;
}

interface LeafSummary {
  path: string;
  dtype: string;
  shape: number[];
  min?: number;
  max?: number;
  mean?: number;
}

/** Every tensor in a result (tensors, arrays, plain objects), by path. */
export function summarizeOutput(v: unknown, path = "output"): LeafSummary[] {
  if (v instanceof Tensor) {
    const flat = (v.toArray() as unknown[]).flat(Infinity as 1) as unknown[];
    const nums = flat.map((x) => Number(x));
    const s: LeafSummary = { path, dtype: v.dtype, shape: [...v.shape] };
    if (nums.length > 0) {
      s.min = Math.min(...nums);
      s.max = Math.max(...nums);
      s.mean = nums.reduce((a, b) => a + b, 0) / nums.length;
    }
    return [s];
  }
  if (Array.isArray(v)) return v.flatMap((x, i) => summarizeOutput(x, `${path}[${i}]`));
  if (typeof v === "object" && v !== null) {
    return Object.entries(v).flatMap(([k, x]) => summarizeOutput(x, `${path}.${k}`));
  }
  return [];
}

function fmt(x: number | undefined): string {
  return x === undefined ? "-" : Number.isInteger(x) ? String(x) : x.toPrecision(5);
}

export function runCommand(model: LoadedModel, o: RunOptions, out: Out): ExitCode {
  const args = argsFor(model, o.spec);
  const fast = compile(model.target as (...a: unknown[]) => unknown, {
    cache: "disk",
    ...model.compileOptions,
    ...(o.backend !== undefined ? { backend: o.backend } : {}),
  });
  const t0 = performance.now();
  const result = userCode(model.name, `running on ${formatSpec(o.spec ?? {})}`, () =>
    fast(...args),
  );
  const first = performance.now() - t0;
  const t1 = performance.now();
  userCode(model.name, `running on ${formatSpec(o.spec ?? {})}`, () => fast(...args));
  const second = performance.now() - t1;
  const leaves = summarizeOutput(result);
  const st = fast.stats;
  if (o.json) {
    out(
      toJsonText({
        model: model.name,
        spec: o.spec ?? {},
        outputs: leaves,
        firstCallMs: first,
        secondCallMs: second,
        mode: st.mode,
        compiles: st.compiles,
      }),
    );
    return EXIT.ok;
  }
  out(`${model.name} (${formatSpec(o.spec ?? {})}): ${st.mode} mode, ${st.compiles} compile(s)`);
  for (const l of leaves) {
    out(
      `  ${l.path}: ${l.dtype}[${l.shape.join(", ")}]  min ${fmt(l.min)}  max ${fmt(l.max)}` +
        `  mean ${fmt(l.mean)}`,
    );
  }
  out(`  first call (trace + compile + run): ${first.toFixed(1)} ms`);
  out(`  second call (compiled):            ${second.toFixed(1)} ms`);
  return EXIT.ok;
}

// ---- recompiles --------------------------------------------------------------------------------

export interface RecompilesOptions {
  specs: readonly SizeSpec[];
  backend?: string;
  max?: number;
  json?: boolean;
}

export interface RecompileRow {
  call: number;
  spec: SizeSpec;
  compiled: boolean;
  reason: string;
}

function reasonFor(st: CompileStats, call: number, before: CompileStats | undefined): string {
  const rec = st.recompiles.find((r) => r.call === call);
  if (rec) return rec.reason;
  const spec = st.specializations.find((r) => r.call === call);
  if (spec) return spec.reason;
  const fb = st.fallbacks.find((r) => r.call === call);
  if (fb) return `ran eagerly: ${fb.reason}`;
  return before === undefined || before.compiles === 0 ? "first call" : "";
}

export function recompilesCommand(
  model: LoadedModel,
  o: RecompilesOptions,
  out: Out,
): ExitCode {
  const fast = compile(model.target as (...a: unknown[]) => unknown, {
    cache: "disk",
    ...model.compileOptions,
    ...(o.backend !== undefined ? { backend: o.backend } : {}),
  });
  const rows: RecompileRow[] = [];
  let prev: CompileStats | undefined;
  for (const [i, spec] of o.specs.entries()) {
    const args = argsFor(model, spec);
    userCode(model.name, `running on ${formatSpec(spec)}`, () => fast(...args));
    const st = fast.stats;
    const compiled = st.compiles > (prev?.compiles ?? 0);
    rows.push({ call: i + 1, spec, compiled, reason: compiled ? reasonFor(st, i + 1, prev) : "" });
    prev = st;
  }
  const st = fast.stats;
  const ok = o.max === undefined || st.compiles <= o.max;
  const summary =
    `${st.calls} calls, ${st.compiles} compiles (${st.recompiles.length} recompiles), ` +
    `mode ${st.mode}` +
    (o.max === undefined ? "" : `, max ${o.max}: ${ok ? "OK" : "FAIL"}`);
  if (o.json) {
    out(
      toJsonText({
        model: model.name,
        calls: st.calls,
        compiles: st.compiles,
        recompiles: st.recompiles.length,
        max: o.max ?? null,
        ok,
        mode: st.mode,
        rows,
      }),
    );
  } else {
    const w = Math.max(4, ...rows.map((r) => formatSpec(r.spec).length));
    out(`${"call".padStart(5)}  ${"spec".padEnd(w)}  compiled  reason`);
    for (const r of rows) {
      out(
        `${String(r.call).padStart(5)}  ${formatSpec(r.spec).padEnd(w)}  ` +
          `${(r.compiled ? "yes" : "-").padEnd(8)}  ${r.reason}`,
      );
    }
    out(summary);
  }
  return ok ? EXIT.ok : EXIT.checkFailed;
}

// ---- cache ---------------------------------------------------------------------------------

/** The native backend as `kiln cache info` reports it: whether it runs here, and its libraries. */
function nativeInfo() {
  const why = nativeUnavailableReason();
  // Turned off by the environment: not even the toolchain probe or the addon build runs.
  const st = nativeDisabledByEnv() === undefined ? nativeStatus() : undefined;
  const libs = defaultLibCache().info();
  const tc = st?.ok ? st.toolchain : undefined;
  return {
    available: why === undefined,
    ...(why !== undefined && { reason: why }),
    ...(tc && {
      toolchain: `${describeCompiler(tc.compiler)} ${tc.cflags.join(" ")}`,
      isa: tc.isa,
    }),
    ...(st?.ok && { threads: st.threads }),
    libraries: {
      dir: libs.dir,
      entries: libs.entries,
      bytes: libs.bytes,
      trusted: libs.trusted,
      ...(libs.why !== undefined && { why: libs.why }),
      discarded: libs.discarded,
    },
  };
}

/** KILN_COMPILE as `cache info` shows it; a bad value is shown, not thrown. */
function compileModeText(): string {
  try {
    return compileMode() === "never" ? "never (cache-only: any compile is an error)" : "auto";
  } catch (e) {
    return `invalid: ${e instanceof Error ? e.message : String(e)}`;
  }
}

export function cacheCommand(action: string, json: boolean, out: Out): ExitCode {
  const cache = defaultProgramCache();
  switch (action) {
    case "ls": {
      const entries = cache.entries();
      if (json) {
        out(toJsonText(entries.map((e) => ({ ...e, lastUsed: e.lastUsed.toISOString() }))));
        return EXIT.ok;
      }
      for (const e of entries) {
        const what = e.key
          ? `${e.key.backend} ${e.key.fingerprint.slice(0, 12)} kiln ${e.key.kiln}`
          : "(unreadable header)";
        out(
          `${basename(e.file).slice(0, 16)}…  ${String(e.bytes).padStart(9)} B  ` +
            `${e.lastUsed.toISOString()}  ${what}` +
            (e.problem ? `  PROBLEM: ${e.problem}` : ""),
        );
      }
      out(`${entries.length} entries in ${cache.info().dir ?? "(no directory)"}`);
      return EXIT.ok;
    }
    case "clear": {
      const r = cache.clear();
      const libs = defaultLibCache().info().entries;
      defaultLibCache().clear();
      out(
        json
          ? toJsonText({ ...r, nativeLibraries: libs })
          : `removed ${r.disk} disk entries and ${libs} native libraries`,
      );
      return EXIT.ok;
    }
    case "info": {
      const i = cache.info();
      const native = nativeInfo();
      // This process's requests (cacheStats()): what the commands before it in the same
      // process asked for; a program's own run prints them with formatCacheStats.
      const stats = cacheStats();
      if (json) {
        out(toJsonText({ ...i, native, stats }));
        return EXIT.ok;
      }
      out(`directory:     ${i.dir ?? "(none)"}`);
      out(`disk in use:   ${i.disk ? "yes" : `no${i.diskDisabled ? ` (${i.diskDisabled})` : ""}`}`);
      out(`entries:       ${i.diskEntries} (${i.diskBytes} bytes of ${i.maxBytes})`);
      out(`kiln version:  ${i.kilnVersion} (cache format ${i.formatVersion})`);
      out(`backends:      ${backendNames().join(", ")} (default ${getBackend().name})`);
      if (native.available) {
        out(`native:        ${native.toolchain} (isa ${native.isa}, ${native.threads} threads)`);
      } else {
        out(`native:        not available: ${native.reason}`);
      }
      const l = native.libraries;
      out(
        `native libs:   ${l.entries} (${l.bytes} bytes) in ${l.dir}` +
          (l.trusted ? "" : ` — NOT USED: ${l.why ?? "untrusted"}`),
      );
      out(`compile mode:  ${compileModeText()}`);
      const lines = formatCacheStats(stats);
      out(`statistics:    ${lines[0]} (this process)`);
      for (const line of lines.slice(1)) out(`             ${line}`);
      return EXIT.ok;
    }
    default:
      throw new CliError(EXIT.usage, `unknown cache action '${action}' (ls, clear, info)`);
  }
}
