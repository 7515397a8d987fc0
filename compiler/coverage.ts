// Which code ran while compile() traced, from V8's block coverage read through the shared
// in-thread inspector session (compiler/inspector.ts; its calls answer synchronously): the
// coverage oracle (size_oracle_node.ts) uses it to tell a size branch whose condition the
// traces EVALUATED from one they never reached — evaluated, not taken, because runs at two
// sizes of a bucket take the same path until a decision on a size differs, and that decision,
// evaluated at the traced size, keeps the dim static (the full argument: size_oracle_node.ts).
// V8's facts this file is built on, each answered on the safe side ("executed" or "unknown",
// never a guess): block counters exist only in functions compiled while precise coverage is
// on, and V8 drops them all when coverage stops or when the Debugger domain goes off in the
// last inspector session that had it on. So script sources are read before starting, the
// recording holds the shared session's Debugger domain from being turned off (so no other
// stage of compile() can drop the counters), and a canary function compiled after the start
// shows whether they survived anyone else's session; a function that ran before the recording
// (a best-effort snapshot taken just before starting says which) is seen at function
// granularity, and its count may miss calls TurboFan inlined, so any branch inside it counts
// as executed; a function that never ran has no bytecode, so if it runs while recording it
// gets counters. (The one gap: a function compiled eagerly but never called before, then
// inlined while recording, would go unseen.) A branch's original `file:line:column` is carried
// to the script that ran through its source map, decoded here in reverse, and must map exactly
// onto the condition's first token. Starting and stopping precise coverage is isolate-wide and
// would destroy anyone else's recording, and V8 cannot be asked whether one is on, so nothing
// is recorded under NODE_V8_COVERAGE, `vitest --coverage` (a V8-based provider) or an open
// inspector server, or with `KILN_NO_COVERAGE=1`. Functions first compiled while recording
// keep V8's block counters (slower bytecode) for the life of the process, which is why
// compile() records only bucketed traces of code in which the source analysis found a size
// branch.

import type { SourceMap } from "node:module";
import { loadSourceMap, mapSourceFiles, urlToPath } from "./analyze_locate.ts";
import {
  holdBlockCounters,
  inspectorServerOpen,
  inspectorUnavailable,
  knownScript,
  post,
  withDebugger,
} from "./inspector.ts";
import { nodeModule } from "./node_builtins.ts";

/** A place in the original source: 1-based line and column, and the text that starts there. */
export interface SourcePoint {
  file: string;
  line: number;
  column: number;
  /** The source text starting at the point (its first token is checked where it ran). */
  text: string;
}

/** What coverage says about a point. "unknown" must be read as "executed". */
export type Verdict = "executed" | "not executed" | "unknown";

interface CoverageRange {
  startOffset: number;
  endOffset: number;
  count: number;
}

interface FunctionCoverage {
  functionName: string;
  ranges: CoverageRange[];
  isBlockCoverage: boolean;
}

interface ScriptCoverage {
  scriptId: string;
  url: string;
  functions: FunctionCoverage[];
}

const sources = new Map<string, { text: string; lineStarts: number[] } | null>();
let active: TraceCoverage | undefined;
let canaries = 0;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

/** Vitest's worker state says whether it records coverage, and with which provider. */
function vitestCoverage(): string | undefined {
  const state: unknown = (globalThis as Record<string, unknown>)["__vitest_worker__"];
  const config = isRecord(state) ? state["config"] : undefined;
  const coverage = isRecord(config) ? config["coverage"] : undefined;
  if (!isRecord(coverage) || coverage["enabled"] !== true) return undefined;
  // Istanbul instruments the source instead of asking V8; any other provider may ask V8.
  return coverage["provider"] === "istanbul" ? undefined : String(coverage["provider"]);
}

/**
 * Why compile() cannot record coverage now, or undefined when it can. Checked at every start,
 * since the environment variables may change between calls.
 */
export function coverageUnavailable(): string | undefined {
  const off = process.env["KILN_NO_COVERAGE"];
  if (off !== undefined && off !== "" && off !== "0") return "KILN_NO_COVERAGE is set";
  if (process.env["NODE_V8_COVERAGE"]) {
    return "NODE_V8_COVERAGE is set: the process records its own coverage";
  }
  const vitest = vitestCoverage();
  if (vitest !== undefined) return `vitest records coverage (provider ${vitest})`;
  if (inspectorServerOpen()) {
    return "an inspector server is open (--inspect): a debugger may be recording coverage";
  }
  if (active) return "coverage is already being recorded for another trace";
  const none = inspectorUnavailable();
  if (none !== undefined) return `node:inspector is not available (${none})`;
  return undefined;
}

/**
 * A recording of V8's block coverage around compile()'s traces: `start`, trace, `check` the
 * points (as often as useful; each answer covers everything since `start`), `stop`.
 */
export class TraceCoverage {
  /** Functions V8 listed before the recording, per script: [start, end) and whether they ran. */
  private readonly before = new Map<string, { start: number; end: number; ran: boolean }[]>();
  private readonly beforeUrls = new Map<string, string>();
  /** Points known executed in an earlier check (counts restart at every take). */
  private readonly seen = new Set<string>();
  private running = true;
  private spoiled: string | undefined;
  /** Keeps the shared session's other users from dropping the counters (inspector.ts). */
  private release: (() => void) | undefined;
  /** A function compiled after the start: it has block counters until something drops them. */
  private canary: { url: string; fn: () => unknown } | undefined;

  private constructor(snapshot: readonly ScriptCoverage[]) {
    for (const sc of snapshot) {
      this.beforeUrls.set(sc.scriptId, sc.url);
      this.before.set(
        sc.scriptId,
        sc.functions.map((f) => ({
          start: f.ranges[0]?.startOffset ?? 0,
          end: f.ranges[0]?.endOffset ?? 0,
          ran: (f.ranges[0]?.count ?? 0) > 0,
        })),
      );
    }
  }

  /**
   * Starts recording for `points`, or says why it cannot, or names a point that a recording
   * could only call executed (inside a function that already ran, so V8 will not count its
   * blocks; or not mappable), in which case nothing is recorded. The points' scripts are read
   * first: turning the Debugger domain on or off while recording drops every block counter.
   */
  static start(points: readonly SourcePoint[]): StartResult {
    const why = coverageUnavailable();
    if (why !== undefined) return { kind: "unavailable", why };
    let started = false;
    let release: (() => void) | undefined;
    try {
      post("Profiler.enable");
      const snapshot = post<{ result: ScriptCoverage[] }>("Profiler.getBestEffortCoverage").result;
      prefetch([...new Set(points.map((p) => p.file))], snapshot);
      const rec = new TraceCoverage(snapshot);
      for (const [index, p] of points.entries()) {
        const v = rec.beforeVerdict(p);
        if (v === "not executed") continue;
        post("Profiler.disable");
        return {
          kind: "executed",
          index,
          why: v === "executed" ? "its function ran before the trace" : "it cannot be mapped",
        };
      }
      const vm = nodeModule("node:vm");
      if (!vm) throw new Error("node:vm is not available here");
      rec.release = release = holdBlockCounters();
      post("Profiler.startPreciseCoverage", { callCount: true, detailed: true });
      started = true;
      const url = `kiln-coverage-canary-${++canaries}.js`;
      const fn: unknown = vm.runInThisContext("(function kilnCoverageCanary() { return 0; })", {
        filename: url,
      });
      if (typeof fn !== "function") throw new Error("the coverage canary is not a function");
      rec.canary = { url, fn: fn as () => unknown };
      active = rec;
      return { kind: "recording", coverage: rec };
    } catch (e) {
      try {
        if (started) post("Profiler.stopPreciseCoverage");
        post("Profiler.disable");
      } catch {
        // Nothing more to undo.
      }
      release?.();
      return { kind: "unavailable", why: e instanceof Error ? e.message : String(e) };
    }
  }

  /** Why the recording cannot rule anything out any more, when it cannot. */
  get spoiledBy(): string | undefined {
    return this.spoiled;
  }

  /**
   * What ran since `start`, for each point. Taking coverage restarts V8's counts, so a point
   * once seen executed (or not ruled out) stays so.
   */
  check(points: readonly SourcePoint[]): Verdict[] {
    if (!this.running || !this.canary) {
      throw new Error("TraceCoverage.check: the recording is not on");
    }
    this.canary.fn();
    const taken = post<{ result: ScriptCoverage[] }>("Profiler.takePreciseCoverage").result;
    // Turning the Debugger domain off in the last session that had it on (a user's own
    // session: Kiln's waits, inspector.ts) makes V8 drop the block counters of every function
    // compiled so far; from then on a function that ran may go unreported, so nothing can be
    // ruled out.
    const canaryUrl = this.canary.url;
    const canary = taken
      .find((sc) => sc.url === canaryUrl)
      ?.functions.find((f) => f.functionName === "kilnCoverageCanary");
    if (!canary?.isBlockCoverage) {
      this.spoiled ??= "V8 dropped its block counters during the recording";
    }
    const byId = new Map(taken.map((sc) => [sc.scriptId, sc]));
    const ids = new Set([...byId.keys(), ...this.before.keys()]);
    return points.map((p): Verdict => {
      const key = `${p.file}:${p.line}:${p.column}`;
      if (this.spoiled !== undefined) return "unknown";
      if (this.seen.has(key)) return "executed";
      const v = this.verdict(p, ids, byId);
      if (v !== "not executed") this.seen.add(key);
      return v;
    });
  }

  /** Stops recording (idempotent); V8 goes back to best-effort coverage. */
  stop(): void {
    if (!this.running) return;
    this.running = false;
    if (active === this) active = undefined;
    try {
      post("Profiler.stopPreciseCoverage");
      post("Profiler.disable");
    } catch {
      // The session is gone: nothing is recording any more.
    }
    this.release?.();
  }

  private verdict(
    p: SourcePoint,
    ids: ReadonlySet<string>,
    taken: ReadonlyMap<string, ScriptCoverage>,
  ): Verdict {
    const candidates = this.scriptsOf(p.file, ids, taken);
    if (candidates.length === 0) return "unknown";
    let out: Verdict = "not executed";
    for (const id of candidates) {
      const offsets = generatedOffsets(id, p);
      if (offsets === undefined) return "unknown";
      for (const o of offsets) {
        const v = this.at(id, o, taken.get(id));
        if (v === "executed") return v;
        if (v === "unknown") out = v;
      }
    }
    return out;
  }

  /** The scripts run from the file itself (tsx, vitest, node); else any whose map names it. */
  private scriptsOf(
    file: string,
    ids: Iterable<string>,
    taken?: ReadonlyMap<string, ScriptCoverage>,
  ): string[] {
    const url = (id: string) => taken?.get(id)?.url ?? this.beforeUrls.get(id) ?? "";
    const all = [...ids];
    const own = all.filter((id) => urlToPath(url(id)) === file);
    return own.length > 0 ? own : all.filter((id) => mapNames(id, file));
  }

  /**
   * Before recording: "executed" when `p` is inside a function that already ran (a recording
   * would see it whole), "unknown" when it cannot be mapped, else "not executed".
   */
  private beforeVerdict(p: SourcePoint): Verdict {
    for (const id of this.scriptsOf(p.file, this.before.keys())) {
      const offsets = generatedOffsets(id, p);
      if (offsets === undefined) return "unknown";
      const fns = this.before.get(id) ?? [];
      for (const o of offsets) {
        const f = innermost(fns, o);
        if (f?.ran) return "executed";
      }
    }
    return "not executed";
  }

  /** Whether the code at `offset` of script `id` ran during the recording. */
  private at(id: string, offset: number, sc: ScriptCoverage | undefined): Verdict {
    const now = (sc?.functions ?? []).map((f) => ({
      f,
      start: f.ranges[0]?.startOffset ?? 0,
      end: f.ranges[0]?.endOffset ?? 0,
    }));
    const before = this.before.get(id) ?? [];
    // The innermost function around the point, among those reported now and those listed
    // before; one reported now wins a tie (it carries this recording's counts).
    const best = innermost<{ start: number; end: number; f?: FunctionCoverage }>(
      [...now, ...before.map((r) => ({ start: r.start, end: r.end }))],
      offset,
    );
    if (!best) return "not executed";
    const ranBefore = before.some((r) => r.ran && r.start === best!.start && r.end === best!.end);
    const f = best.f;
    if (!f) {
      // Not reported now: it did not run in the recording, unless it has no block counters
      // (it ran before) and was inlined, which hides its calls.
      return ranBefore ? "executed" : "not executed";
    }
    if (!f.isBlockCoverage) return "executed";
    let range: CoverageRange | undefined;
    for (const r of f.ranges) {
      if (r.startOffset <= offset && offset < r.endOffset &&
        (!range || r.endOffset - r.startOffset <= range.endOffset - range.startOffset)) {
        range = r;
      }
    }
    return range && range.count > 0 ? "executed" : "not executed";
  }
}

/** How `TraceCoverage.start` went. */
export type StartResult =
  | { kind: "recording"; coverage: TraceCoverage }
  | { kind: "unavailable"; why: string }
  /** Point `index` would count as executed whatever the trace does: nothing was recorded. */
  | { kind: "executed"; index: number; why: string };

/**
 * The innermost of `fns` ([start, end) offsets) around `offset`; of two with the same range,
 * the first that has `f` (a function reported by the recording).
 */
function innermost<T extends { start: number; end: number; f?: unknown }>(
  fns: readonly T[],
  offset: number,
): T | undefined {
  let best: T | undefined;
  for (const c of fns) {
    if (c.start > offset || offset >= c.end) continue;
    const size = c.end - c.start;
    if (!best || size < best.end - best.start ||
      (size === best.end - best.start && c.f !== undefined && best.f === undefined)) {
      best = c;
    }
  }
  return best;
}

/**
 * Reads, with the Debugger domain on for a moment, what `check` will need about the scripts
 * of `files`: their source map references and generated sources (cached by script id).
 */
function prefetch(files: readonly string[], snapshot: readonly ScriptCoverage[]): void {
  const want = new Set(files);
  const byUrl = snapshot.filter((sc) => want.has(urlToPath(sc.url) ?? ""));
  const missing = byUrl.filter((sc) => !knownScript(sc.scriptId) || !sources.has(sc.scriptId));
  const matched = new Set(byUrl.map((sc) => urlToPath(sc.url)));
  const unmatched = files.filter((f) => !matched.has(f));
  if (missing.length === 0 && unmatched.length === 0) return;
  // Enabling replays scriptParsed for every loaded script (synchronously); it is switched off
  // again before the recording starts.
  withDebugger(() => {
    for (const sc of missing) readSource(sc.scriptId);
    // A bundle: any script whose source map names one of the files.
    if (unmatched.length > 0) {
      for (const sc of snapshot) {
        if (unmatched.some((f) => mapNames(sc.scriptId, f))) readSource(sc.scriptId);
      }
    }
  });
}

function readSource(id: string): void {
  if (sources.has(id)) return;
  let out: { text: string; lineStarts: number[] } | null = null;
  try {
    const text = post<{ scriptSource: string }>("Debugger.getScriptSource", { scriptId: id })
      .scriptSource;
    const lineStarts = [0];
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lineStarts.push(i + 1);
    out = { text, lineStarts };
  } catch {
    out = null;
  }
  sources.set(id, out);
}

/** Whether script `id`'s source map (as known from a prefetch) names `file`. */
function mapNames(id: string, file: string): boolean {
  const info = knownScript(id);
  const map = info && loadSourceMap(info);
  return !!map && !!info && mapSourceFiles(map, info).includes(file);
}

/** The first token of a condition's text: an identifier-ish run, or one character. */
function firstToken(text: string): string {
  const t = text.trimStart();
  return /^[\p{L}\p{N}_$]+/u.exec(t)?.[0] ?? t.slice(0, 1);
}

/**
 * Where `p` is in script `id`'s generated code (offsets; several when the compiler copied the
 * code), through the script's source map or as-is for a script run from the file itself; or
 * undefined when that cannot be told (the script was not prefetched, the point has no exact
 * mapping, or the generated text there is not the condition's first token).
 */
function generatedOffsets(id: string, p: SourcePoint): number[] | undefined {
  const info = knownScript(id);
  const src = sources.get(id);
  if (!info || !src || info.url === "") return undefined;
  const map = loadSourceMap(info);
  const positions: [number, number][] = [];
  if (map) {
    for (const [i, file] of mapSourceFiles(map, info).entries()) {
      if (file !== p.file) continue;
      positions.push(...(reverseIndex(map).get(`${i}:${p.line - 1}:${p.column - 1}`) ?? []));
    }
  } else if (info.sourceMapURL === undefined && urlToPath(info.url) === p.file) {
    positions.push([p.line - 1, p.column - 1]);
  }
  if (positions.length === 0) return undefined;
  const token = firstToken(p.text);
  const out: number[] = [];
  for (const [line, column] of positions) {
    const start = src.lineStarts[line];
    if (start === undefined || token === "") return undefined;
    const offset = start + column;
    if (!src.text.startsWith(token, offset)) return undefined;
    out.push(offset);
  }
  return out;
}


const reverse = new WeakMap<SourceMap, Map<string, [number, number][]>>();
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const DIGIT = new Map([...BASE64].map((c, i) => [c, i]));

/**
 * Original position -> generated positions: `source:line:column` (0-based) to [line, column]
 * pairs, decoded from the map's VLQ `mappings` (node:module's SourceMap only goes forward).
 */
function reverseIndex(map: SourceMap): Map<string, [number, number][]> {
  const cached = reverse.get(map);
  if (cached) return cached;
  const out = new Map<string, [number, number][]>();
  let source = 0;
  let line = 0;
  let column = 0;
  const lines = map.payload.mappings.split(";");
  for (const [genLine, text] of lines.entries()) {
    let genColumn = 0;
    for (const segment of text.split(",")) {
      if (segment === "") continue;
      const f = decodeVlq(segment);
      if (f === undefined) {
        reverse.set(map, new Map());
        return reverse.get(map)!;
      }
      genColumn += f[0]!;
      if (f.length < 4) continue;
      source += f[1]!;
      line += f[2]!;
      column += f[3]!;
      const key = `${source}:${line}:${column}`;
      let list = out.get(key);
      if (!list) out.set(key, (list = []));
      list.push([genLine, genColumn]);
    }
  }
  reverse.set(map, out);
  return out;
}

/** One segment's fields, or undefined when it is not valid base64 VLQ. */
function decodeVlq(segment: string): number[] | undefined {
  const fields: number[] = [];
  let value = 0;
  let shift = 0;
  for (const ch of segment) {
    const d = DIGIT.get(ch);
    if (d === undefined) return undefined;
    value += (d & 31) * 2 ** shift;
    if (d & 32) {
      shift += 5;
      continue;
    }
    fields.push(value % 2 === 1 ? -Math.floor(value / 2) : Math.floor(value / 2));
    value = 0;
    shift = 0;
  }
  return shift === 0 ? fields : undefined;
}
