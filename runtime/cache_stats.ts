// Process-wide program cache statistics and the cache-only mode. Every path that asks for a
// program — an eager op (tensor/dispatch.ts), a lazy region (tensor/lazy.ts), a compile()
// call (compiler/compile.ts) — reports each request here: answered from memory (the eager op
// map, the lazy memo, a compile() entry or the program cache's memory), from disk, by a
// program compiled for a bucket serving another size in it ("shape-dynamic"), or compiled now
// (with its time). Entries are the program cache's keys; each counts its reads. The cache-only
// mode (KILN_COMPILE=never, or setCompileMode("never")) turns the compile of a request into a
// CompileNeverError naming the key, where the request came from, and the nearest program this
// process has served for the same op or function. docs/runtime.md describes both for users.

import type { Executable } from "./backend.ts";

/** Where a program request comes from. `program`: a direct compileModule() caller. */
export type ProgramKind = "eager" | "lazy" | "compiled" | "program";
export const PROGRAM_KINDS: readonly ProgramKind[] = ["eager", "lazy", "compiled", "program"];

/** How one request was answered. */
export type RequestOutcome = "memory" | "disk" | "shapeDynamic" | "compile";

/** One parameter of a program's signature: its element type and dims (`<=n` when bounded). */
export interface ParamSig {
  readonly type: string;
  readonly dims: readonly string[];
}

/** What asked for a program: the kind, the op or function, and how to describe a miss. */
export interface ProgramOrigin {
  readonly kind: ProgramKind;
  /** The op (`add`), the compiled function (`forward`) or the lazy region's ops. */
  readonly source: string;
  /** The operand signature (eager ops): used to find the nearest cached program. */
  readonly signature?: readonly ParamSig[];
  /** The attributes in words (eager ops: `size=[1,7]`), compared like the signature. */
  readonly attrs?: string;
  /** Already known difference from the nearest cached entry (compile(): the guard's words). */
  readonly nearest?: () => string | undefined;
}

export interface HitCounts {
  memory: number;
  disk: number;
  /** A program compiled for a bucket's bounds serving a size inside it. */
  shapeDynamic: number;
}

export interface KindStats {
  requests: number;
  hits: HitCounts;
  compiles: number;
  compileMs: number;
}

/** One program cache entry as this process used it. */
export interface CacheEntryStats {
  /** The program cache key (JSON text: Kiln version, backend, fingerprint, options hash). */
  readonly key: string;
  readonly kind: ProgramKind;
  readonly source: string;
  /** Requests this entry answered without compiling (memory, disk and shape-dynamic hits). */
  readonly reads: number;
  readonly hits: Readonly<HitCounts>;
  readonly compiles: number;
  readonly compileMs: number;
}

/** What cacheStats() returns: totals, per kind, and per entry (most read first). */
export interface CacheStatistics extends KindStats {
  readonly byKind: Readonly<Record<ProgramKind, KindStats>>;
  readonly entries: readonly CacheEntryStats[];
  /** Entries forgotten to stay within MAX_ENTRIES (their counts stay in the totals). */
  readonly entriesDropped: number;
}

interface EntryRecord {
  key: string;
  kind: ProgramKind;
  source: string;
  signature: readonly ParamSig[] | undefined;
  attrs: string | undefined;
  hits: HitCounts;
  compiles: number;
  compileMs: number;
  generation: number;
}

/** How many entries are remembered (oldest first out); the totals count everything. */
export const MAX_ENTRIES = 4096;

const zeroHits = (): HitCounts => ({ memory: 0, disk: 0, shapeDynamic: 0 });
const zeroKind = (): KindStats => ({ requests: 0, hits: zeroHits(), compiles: 0, compileMs: 0 });

let generation = 0;
let entriesDropped = 0;
const records = new Map<string, EntryRecord>();
const byExecutable = new WeakMap<Executable, EntryRecord>();
let kinds: Record<ProgramKind, KindStats> = freshKinds();

function freshKinds(): Record<ProgramKind, KindStats> {
  return { eager: zeroKind(), lazy: zeroKind(), compiled: zeroKind(), program: zeroKind() };
}

function count(rec: EntryRecord, outcome: RequestOutcome, ms: number): void {
  if (rec.generation !== generation) {
    // Recorded before the last reset: counts start again from zero.
    rec.hits = zeroHits();
    rec.compiles = 0;
    rec.compileMs = 0;
    rec.generation = generation;
  }
  if (!records.has(rec.key)) {
    records.set(rec.key, rec);
    if (records.size > MAX_ENTRIES) {
      const oldest = records.keys().next().value;
      if (oldest !== undefined) records.delete(oldest);
      entriesDropped++;
    }
  }
  const k = kinds[rec.kind];
  k.requests++;
  if (outcome === "compile") {
    rec.compiles++;
    rec.compileMs += ms;
    k.compiles++;
    k.compileMs += ms;
  } else {
    rec.hits[outcome]++;
    k.hits[outcome]++;
  }
}

/**
 * Records a request the program cache answered (or compiled, in `ms`): the entry `key`, now
 * known for `exe`, so later in-memory hits on `exe` count on the same entry.
 */
export function noteProgramRequest(
  key: string,
  exe: Executable,
  origin: ProgramOrigin,
  outcome: RequestOutcome,
  ms = 0,
): void {
  let rec = records.get(key);
  if (rec === undefined || rec.generation !== generation) {
    rec = rec ?? {
      key,
      kind: origin.kind,
      source: origin.source,
      signature: origin.signature,
      attrs: origin.attrs,
      hits: zeroHits(),
      compiles: 0,
      compileMs: 0,
      generation,
    };
  }
  byExecutable.set(exe, rec);
  count(rec, outcome, ms);
}

/**
 * Records a request answered in memory by an executable the program cache handed out before
 * (the eager op map, the lazy memo, a compile() entry). Returns false when `exe` never came
 * through the program cache (nothing is counted then).
 */
export function noteExecutableHit(exe: Executable, outcome: "memory" | "shapeDynamic"): boolean {
  const rec = byExecutable.get(exe);
  if (rec === undefined) return false;
  count(rec, outcome, 0);
  return true;
}

/** The statistics since the process started or resetCacheStats() (a copy). */
export function cacheStats(): CacheStatistics {
  const total = zeroKind();
  const byKind = {} as Record<ProgramKind, KindStats>;
  for (const kind of PROGRAM_KINDS) {
    const k = kinds[kind];
    byKind[kind] = { ...k, hits: { ...k.hits } };
    total.requests += k.requests;
    total.compiles += k.compiles;
    total.compileMs += k.compileMs;
    total.hits.memory += k.hits.memory;
    total.hits.disk += k.hits.disk;
    total.hits.shapeDynamic += k.hits.shapeDynamic;
  }
  const entries: CacheEntryStats[] = [];
  for (const r of records.values()) {
    if (r.generation !== generation) continue;
    entries.push({
      key: r.key,
      kind: r.kind,
      source: r.source,
      reads: r.hits.memory + r.hits.disk + r.hits.shapeDynamic,
      hits: { ...r.hits },
      compiles: r.compiles,
      compileMs: r.compileMs,
    });
  }
  entries.sort((a, b) => b.reads - a.reads);
  return { ...total, byKind, entries, entriesDropped };
}

/** Zeroes every counter and forgets the entries (tests; a benchmark between rows). */
export function resetCacheStats(): void {
  generation++;
  entriesDropped = 0;
  records.clear();
  kinds = freshKinds();
}

/** The statistics as lines of text (`kiln cache info`, the bench). */
export function formatCacheStats(s: CacheStatistics, maxEntries = 10): string[] {
  const hits = (h: HitCounts) =>
    `${h.memory} memory, ${h.disk} disk, ${h.shapeDynamic} shape-dynamic`;
  const lines = [
    `requests ${s.requests}, hits ${hits(s.hits)}, compiles ${s.compiles} ` +
      `(${s.compileMs.toFixed(1)} ms)`,
  ];
  for (const kind of PROGRAM_KINDS) {
    const k = s.byKind[kind];
    if (k.requests === 0) continue;
    lines.push(
      `  ${kind.padEnd(9)} requests ${k.requests}, hits ${hits(k.hits)}, compiles ` +
        `${k.compiles} (${k.compileMs.toFixed(1)} ms)`,
    );
  }
  for (const e of s.entries.slice(0, maxEntries)) {
    lines.push(
      `  entry ${shortKey(e.key)} ${e.kind} ${e.source}: ${e.reads} reads, ${e.compiles} ` +
        `compiles`,
    );
  }
  if (s.entries.length > maxEntries) lines.push(`  (${s.entries.length - maxEntries} more)`);
  return lines;
}

/** A key's backend and fingerprint prefix (`js 3f2a9c01b2d4`), for one-line reports. */
export function shortKey(key: string): string {
  try {
    const k = JSON.parse(key) as { backend?: unknown; fingerprint?: unknown };
    if (typeof k.backend === "string" && typeof k.fingerprint === "string") {
      return `${k.backend} ${k.fingerprint.slice(0, 12)}`;
    }
  } catch {
    // not JSON: shown as it is
  }
  return key.slice(0, 24);
}

// ---- Cache-only mode -------------------------------------------------------------------------

/** `auto`: compile what is not cached (the default); `never`: a compile is an error. */
export type CompileMode = "auto" | "never";

let apiMode: CompileMode | undefined;

/**
 * Sets the compile mode for this process, over KILN_COMPILE; undefined goes back to the
 * environment variable.
 */
export function setCompileMode(mode: CompileMode | undefined): void {
  if (mode !== undefined && mode !== "auto" && mode !== "never") {
    throw new Error(
      `setCompileMode: '${String(mode)}' is not a compile mode (use "never", "auto", or ` +
        `undefined for KILN_COMPILE)`,
    );
  }
  apiMode = mode;
}

/** The compile mode now: setCompileMode's, else KILN_COMPILE's (never, or unset for auto). */
export function compileMode(env: NodeJS.ProcessEnv = process.env): CompileMode {
  if (apiMode !== undefined) return apiMode;
  const v = env["KILN_COMPILE"];
  if (v === undefined || v === "") return "auto";
  if (v === "never") return "never";
  throw new Error(
    `KILN_COMPILE=${JSON.stringify(v).slice(1, -1)} is not a compile mode: set it to 'never' ` +
      `(cache-only: any compile is an error) or leave it unset (compile as needed)`,
  );
}

/** A compile in cache-only mode: what would have compiled, and the nearest cached program. */
export class CompileNeverError extends Error {
  readonly key: string;
  readonly origin: ProgramKind;
  readonly source: string;
  readonly nearest: string;

  constructor(key: string, origin: ProgramOrigin, nearest: string) {
    const what = origin.kind === "eager" && origin.signature
      ? `${origin.source} ${describeCall(origin.signature, origin.attrs)}`
      : origin.kind === "compiled"
        ? `compile(${origin.source})`
        : origin.kind === "lazy"
          ? `lazy: ${origin.source}`
          : origin.source;
    super(
      `${what}: no cached program; ${nearest} (cache-only mode, ` +
        `${apiMode === "never" ? 'setCompileMode("never")' : "KILN_COMPILE=never"}: the ` +
        `program ${shortKey(key)} would compile; key ${key})`,
    );
    this.name = "CompileNeverError";
    this.key = key;
    this.origin = origin.kind;
    this.source = origin.source;
    this.nearest = nearest;
  }
}

/** Operands and attributes as one text (`f32[3,5], #f32`, `(size=[1,7])`). */
function describeCall(sig: readonly ParamSig[], attrs: string | undefined): string {
  const parts = sig.map(sigText).join(", ");
  const a = attrs !== undefined && attrs !== "" ? `(${attrs})` : "";
  return parts !== "" && a !== "" ? `${parts} ${a}` : parts + a;
}

function sigText(p: ParamSig): string {
  return p.dims.length === 0 && p.type.startsWith("#") ? p.type : `${p.type}[${p.dims.join(",")}]`;
}

/**
 * The nearest program this process has served for the same op or function, and how the
 * request differs from it (`nearest f32[3,5] (dim 1: 7 vs 5)`), or that there is none.
 */
export function nearestCached(origin: ProgramOrigin): string {
  const known = origin.nearest?.();
  if (known !== undefined) return known;
  const same = [...records.values()].filter(
    (r) => r.kind === origin.kind && r.source === origin.source && r.generation === generation,
  );
  const sig = origin.signature;
  if (same.length === 0 || sig === undefined) {
    return `this process has served no program for ${origin.source} (from memory or disk)`;
  }
  let best: { r: EntryRecord; diffs: string[] } | undefined;
  for (const r of same) {
    const diffs = signatureDiffs(sig, r.signature ?? []);
    if (origin.attrs !== r.attrs) diffs.push(`attributes ${origin.attrs} vs ${r.attrs}`);
    if (best === undefined || diffs.length < best.diffs.length) best = { r, diffs };
  }
  const b = best!;
  const theirs = describeCall(b.r.signature ?? [], b.r.attrs);
  return `nearest ${theirs}${b.diffs.length > 0 ? ` (${b.diffs.join("; ")})` : ""}`;
}

function signatureDiffs(a: readonly ParamSig[], b: readonly ParamSig[]): string[] {
  if (a.length !== b.length) return [`${a.length} operands vs ${b.length}`];
  const out: string[] = [];
  const many = a.length > 1;
  for (const [i, p] of a.entries()) {
    const q = b[i]!;
    const at = many ? `operand ${i} ` : "";
    if (p.type !== q.type) out.push(`${at}dtype ${p.type} vs ${q.type}`);
    if (p.dims.length !== q.dims.length) {
      out.push(`${at}rank ${p.dims.length} vs ${q.dims.length}`);
      continue;
    }
    for (const [d, n] of p.dims.entries()) {
      if (n !== q.dims[d]) out.push(`${at}dim ${d}: ${n} vs ${q.dims[d]}`);
    }
  }
  return out;
}
