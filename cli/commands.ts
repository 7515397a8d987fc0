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
import { REPLAY_COST } from "../compiler/explain.ts";
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
import { judgeCompiles } from "./testing.ts";

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
        ...(e.mode === "replay" && { replayCost: REPLAY_COST }),
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
    const page = renderHtml(`${model.name} (${spec})`, snaps);
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

/**
 * compile() of the model with the file's `compileOptions` (checked when the file was loaded,
 * cli/load.ts) under the command line's.
 */
function compileModel(model: LoadedModel, backend: string | undefined) {
  return compile(model.target as (...a: unknown[]) => unknown, {
    cache: "disk",
    ...model.compileOptions,
    ...(backend !== undefined ? { backend } : {}),
  });
}

/** What one call did, from the stats before and after it. */
export type CallKind = "compiled" | "cache hit" | "replay" | "eager fallback";

function callKind(before: CompileStats | undefined, after: CompileStats): CallKind {
  if (after.compiles > (before?.compiles ?? 0)) return "compiled";
  if (after.cacheHits > (before?.cacheHits ?? 0)) return "cache hit";
  if (after.replayCalls > (before?.replayCalls ?? 0)) return "replay";
  return "eager fallback";
}

export function runCommand(model: LoadedModel, o: RunOptions, out: Out): ExitCode {
  const args = argsFor(model, o.spec);
  const fast = compileModel(model, o.backend);
  const what = `running on ${formatSpec(o.spec ?? {})}`;
  const t0 = performance.now();
  const result = userCode(model.name, what, () => fast(...args));
  const first = performance.now() - t0;
  const afterFirst = fast.stats;
  const t1 = performance.now();
  userCode(model.name, what, () => fast(...args));
  const second = performance.now() - t1;
  const leaves = summarizeOutput(result);
  const st = fast.stats;
  const firstKind = callKind(undefined, afterFirst);
  const secondKind = callKind(afterFirst, st);
  if (o.json) {
    out(
      toJsonText({
        model: model.name,
        spec: o.spec ?? {},
        outputs: leaves,
        firstCallMs: first,
        secondCallMs: second,
        firstCall: firstKind,
        secondCall: secondKind,
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
  const firstWhat = firstKind === "compiled" ? "trace + compile + run"
    : firstKind === "replay" ? "trace, then replay mode" : firstKind;
  const secondWhat = secondKind === "replay" ? "replay mode: the JavaScript ran again"
    : secondKind === "cache hit" ? "compiled, cache hit" : secondKind;
  const labels = [`first call (${firstWhat}):`, `second call (${secondWhat}):`];
  const w = Math.max(...labels.map((l) => l.length));
  out(`  ${labels[0]!.padEnd(w)} ${first.toFixed(1)} ms`);
  out(`  ${labels[1]!.padEnd(w)} ${second.toFixed(1)} ms`);
  if (st.replayReasons.length > 0) {
    out(`  replay mode because:`);
    for (const r of st.replayReasons) out(`    - ${r.where}: ${r.reason}`);
  }
  return EXIT.ok;
}

// ---- recompiles --------------------------------------------------------------------------------

export interface RecompilesOptions {
  specs: readonly SizeSpec[];
  backend?: string;
  max?: number;
  json?: boolean;
  /** Accept calls that ran in replay mode or eagerly (they fail the gate otherwise). */
  allowFallback?: boolean;
}

export interface RecompileRow {
  call: number;
  spec: SizeSpec;
  /** What the call ran as: compiled (traced and compiled), cache hit, replay, eager fallback. */
  kind: CallKind;
  /** Whether the call compiled (kind "compiled"). */
  compiled: boolean;
  reason: string;
  /** Dims this call compiled for their exact size, and why (`kept static: ...`). */
  specializations: string[];
}

/** Why the call ran as it did, in words ("" for a plain cache hit or replay call). */
function reasonFor(
  kind: CallKind,
  st: CompileStats,
  call: number,
  before: CompileStats | undefined,
): string {
  switch (kind) {
    case "compiled": {
      const rec = st.recompiles.find((r) => r.call === call);
      return rec ? rec.reason : "first call";
    }
    case "cache hit":
      return "";
    case "replay":
      if ((before?.replayCalls ?? 0) > 0) return "";
      return `runs in replay mode: ${st.replayReasons.map((r) => `${r.where}: ${r.reason}`)
        .join("; ")}`;
    case "eager fallback": {
      const fb = st.fallbacks.find((r) => r.call === call);
      if (fb) return `past the recompile limit: ${fb.reason}`;
      const d = st.replayDecision;
      if (d === undefined) return "timing eager against replay mode (to decide between them)";
      return d.call === call ? d.reason : "";
    }
    default: {
      const never: never = kind;
      throw new Error(`unknown call kind ${String(never)}`);
    }
  }
}

export function recompilesCommand(
  model: LoadedModel,
  o: RecompilesOptions,
  out: Out,
): ExitCode {
  const fast = compileModel(model, o.backend);
  const rows: RecompileRow[] = [];
  let prev: CompileStats | undefined;
  for (const [i, spec] of o.specs.entries()) {
    const args = argsFor(model, spec);
    userCode(model.name, `running on ${formatSpec(spec)}`, () => fast(...args));
    const st = fast.stats;
    const call = st.calls;
    const kind = callKind(prev, st);
    rows.push({
      call: i + 1,
      spec,
      kind,
      compiled: kind === "compiled",
      reason: reasonFor(kind, st, call, prev),
      specializations: st.specializations.filter((r) => r.call === call).map((r) => r.reason),
    });
    prev = st;
  }
  const st = fast.stats;
  const verdict = judgeCompiles(st, o.max, { allowFallback: o.allowFallback === true });
  const withinMax = o.max === undefined || st.compiles <= o.max;
  const notCompiled = rows.filter((r) => r.kind === "replay" || r.kind === "eager fallback");
  const count = (k: CallKind) => rows.filter((r) => r.kind === k).length;
  const summary =
    `${st.calls} calls, ${st.compiles} compiles (${st.recompiles.length} recompiles), ` +
    `mode ${st.mode}` +
    (o.max === undefined ? "" : `, max ${o.max}: ${withinMax ? "OK" : "FAIL"}`) +
    (notCompiled.length === 0
      ? ""
      : `, ${count("replay")} replay + ${count("eager fallback")} eager fallback call(s): ` +
        (o.allowFallback ? "allowed (--allow-fallback)" : "FAIL (--allow-fallback accepts them)"));
  if (o.json) {
    out(
      toJsonText({
        model: model.name,
        calls: st.calls,
        compiles: st.compiles,
        recompiles: st.recompiles.length,
        max: o.max ?? null,
        allowFallback: o.allowFallback === true,
        ok: verdict.ok,
        failures: verdict.failures,
        mode: st.mode,
        replayCalls: st.replayCalls,
        eagerCalls: st.eagerCalls,
        replayReasons: st.replayReasons.map(({ where, reason }) => ({ where, reason })),
        replayDecision: st.replayDecision ?? null,
        rows,
      }),
    );
  } else {
    const w = Math.max(4, ...rows.map((r) => formatSpec(r.spec).length));
    const k = "eager fallback".length;
    out(`${"call".padStart(5)}  ${"spec".padEnd(w)}  ${"result".padEnd(k)}  reason`);
    for (const r of rows) {
      out(
        `${String(r.call).padStart(5)}  ${formatSpec(r.spec).padEnd(w)}  ` +
          `${r.kind.padEnd(k)}  ${r.reason}`.trimEnd(),
      );
      for (const why of r.specializations) out(`${" ".repeat(5 + 2 + w + 2 + k + 2)}${why}`);
    }
    out(summary);
  }
  return verdict.ok ? EXIT.ok : EXIT.checkFailed;
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
