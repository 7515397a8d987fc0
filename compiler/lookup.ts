// Guard check, the hot path of every compiled call: the first cache entry whose guard function
// passes (`first(inputs) < 0`) answers the call. On a miss, the reason is taken from the
// CLOSEST entry — the one that failed latest in its list, the newest among equals, so a third
// shape names the dim rather than an older dtype — and put in words; with automatic dynamism a
// changed dim becomes dynamic (the reason says so); and the recompile limit decides between
// tracing again and running eagerly. Entries made for a bucket, or for a split size group, do
// not count under the limit: there are at most as many as buckets. `nearestEntry` puts the
// closest entry's difference in the words the cache-only mode's error uses.

import { log } from "../util/log.ts";
import type { CompileConfig } from "./config.ts";
import type { GraphEntry } from "./entry.ts";
import { type Guard, type GuardInputs, readGuarded } from "./guards.ts";
import { type AutoDims, markAutoDynamic } from "./size_groups.ts";
import { RecompileError } from "./stats.ts";

/** The first entry whose guards all hold, or undefined. */
export function findEntry(
  entries: readonly GraphEntry[],
  inputs: GuardInputs,
): GraphEntry | undefined {
  for (const e of entries) if (e.guards.first(inputs) < 0) return e;
  return undefined;
}

/** What a call that matched no entry does, and why (the closest entry's failing guard). */
export type Miss =
  | {
    readonly kind: "recompile";
    readonly reason: string;
    readonly guard: Guard;
    /** The closest entry's difference, for the cache-only mode's error (asked on demand). */
    readonly nearest: () => string;
  }
  | { readonly kind: "eager"; readonly reason: string };

/**
 * How a call differs from the closest entry: a size past every entry's bucket on some dim
 * (`ids.shape[1] 129 exceeds every cached bucket (<=128)`), else the closest entry's failing
 * guard in words (`x.shape[1] was 128, now 129`).
 */
export function nearestEntry(
  entries: readonly GraphEntry[],
  failed: { readonly reason: string },
  inputs: GuardInputs,
): string {
  const ranges = new Map<string, { lo: number; hi: number; value: unknown }>();
  for (const e of entries) {
    for (const spec of e.guards.specs) {
      const g = spec.guard;
      if (g.kind !== "range") continue;
      const [l, h] = g.expected as readonly [number, number];
      let r = ranges.get(g.path);
      if (r === undefined) {
        let value: unknown;
        try {
          value = readGuarded(spec.access, inputs);
        } catch {
          value = undefined; // not readable: the failing guard's reason says so
        }
        ranges.set(g.path, (r = { lo: l, hi: h, value }));
      }
      r.lo = Math.min(r.lo, l);
      r.hi = Math.max(r.hi, h);
    }
  }
  for (const [path, { lo, hi, value }] of ranges) {
    if (typeof value !== "number") continue;
    if (value > hi) return `${path} ${value} exceeds every cached bucket (<=${hi})`;
    if (value < lo) return `${path} ${value} is below every cached bucket (>=${lo})`;
  }
  return `nearest entry: ${failed.reason}`;
}

/** The entries of one compiled function, as a miss reads them. */
export interface EntryList {
  readonly entries: readonly GraphEntry[];
  /** Entries made for a bucket: not under the recompile limit. */
  readonly bucketed: WeakSet<GraphEntry>;
}

/**
 * Decides a miss among the non-empty `list` (see the file comment); `auto` gains the dims that
 * became dynamic. `errorOnRecompile` throws the reason instead.
 */
export function decideMiss(
  name: string,
  config: CompileConfig,
  list: EntryList,
  auto: AutoDims,
  inputs: GuardInputs,
): Miss {
  const { entries } = list;
  let closest = entries[0]!;
  let depth = -1;
  for (const e of entries) {
    const i = e.guards.first(inputs);
    if (i >= depth) {
      depth = i;
      closest = e;
    }
  }
  const f: { index: number; guard: Guard; reason: string } = closest.guards.failure(inputs) ?? {
    index: 0,
    guard: closest.guards.guards[0]!,
    reason: "a guard failed",
  };
  log("guards", () => `${name}: guard failed: ${f.reason}`);
  const nearest = () => nearestEntry(entries, f, inputs);
  if (config.errorOnRecompile) throw new RecompileError(name, f.reason, f.guard);
  const madeDynamic =
    config.dynamic === "auto"
      ? markAutoDynamic(auto, config, closest.guards.specs, inputs.args)
      : [];
  if (madeDynamic.length > 0) f.reason = `${f.reason}: ${madeDynamic.join("; ")}`;
  if (f.guard.kind === "equal") {
    // Both dims passed their range guards, so both are dynamic again this call, with
    // different sizes: the next program has them in two size groups.
    f.reason = `${f.reason}: ${f.guard.path} and ${String(f.guard.expected)} are now ` +
      `separate size groups`;
  }
  const counted = entries.filter((e) => !list.bucketed.has(e)).length;
  // A bucket miss or a split size group makes a bucketed entry: not under the limit.
  const bucketMiss = f.guard.kind === "range" || f.guard.kind === "equal";
  if (counted >= config.recompileLimit && madeDynamic.length === 0 && !bucketMiss) {
    return { kind: "eager", reason: f.reason };
  }
  return { kind: "recompile", reason: f.reason, guard: f.guard, nearest };
}
