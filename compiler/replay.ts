// Replay mode: for code with a graph break or a side effect a program cannot repeat, the user's
// JavaScript runs on every call under lazy mode, whose graph segments are compiled once and
// found again by fingerprint, so the tensor work between breaks still runs as fused programs.
// `enterReplay` is the switch, made by the trace that found the reason (its values are already
// lazy mode's and correct; `replayResult` hands them back with the caller's tensors in place of
// the symbolic ones); `replayCall` is every call after it.

import { lazy, lazyStats, realizeAll } from "../tensor/lazy.ts";
import { setObserveHook, Tensor } from "../tensor/tensor.ts";
import { log } from "../util/log.ts";
import type { Capture, TraceShape } from "./capture.ts";
import type { CompileConfig } from "./config.ts";
import { isContainer, readKeys, unflatten } from "./pytree.ts";
import { formatLocation, userLocation } from "./source.ts";
import { GraphBreakError, type StatsCounter } from "./stats.ts";
import type { Target } from "./target.ts";
import { TracedInputImpl, type Tracer } from "./trace.ts";

/** Lazy mode's graph counts, to count a call's segments. */
export type LazyCounts = ReturnType<typeof lazyStats>;

/** One call in replay mode: the user's code under lazy mode, its breaks counted as they happen. */
export function replayCall(
  target: Target,
  config: CompileConfig,
  stats: StatsCounter,
  args: readonly unknown[],
): unknown {
  const before = lazyStats();
  const saved = setObserveHook((t, how) => {
    const loc = userLocation();
    const what = how === "valueOf" ? "a tensor coerced to a number" : `${how}() on a tensor`;
    stats.noteBreak(how, `${what} (shape [${t.shape.join(", ")}]) reads data`, loc);
    log("graph_breaks", () => `${target.name}: graph break at ${formatLocation(loc)}: ${what}`);
  });
  let result: unknown;
  try {
    result = lazy(() => target.run(target.model, args), config.lazy);
  } finally {
    setObserveHook(saved);
  }
  realizePending(result);
  countSegments(stats, before);
  return result;
}

/**
 * Switches to replay mode after `c` (which needs it): `fullgraph` makes an unreplayable effect
 * an error; the breaks and reasons are counted and logged.
 */
export function enterReplay(
  target: Target,
  config: CompileConfig,
  stats: StatsCounter,
  c: Capture,
): TraceShape {
  const { reasons, tracer, shape } = c;
  if (config.fullgraph && reasons.length > 0) {
    throw new GraphBreakError(`cannot replay: ${reasons[0]!.reason}`, reasons[0]!.location);
  }
  for (const b of tracer.breaks) stats.noteBreak(b.how, b.reason, b.location);
  for (const r of shape.replayReasons) stats.noteReplayReason(r.reason, r.location);
  stats.mode = "replay";
  log("recompiles", () => `${target.name}: runs in replay mode: ${reasons.concat(shape.breaks)
    .map((r) => `${r.reason} at ${formatLocation(r.location)}`).join("; ")}`);
  return shape;
}

/** The traced call's results, with the caller's tensors where the trace had symbolic ones. */
export function replayResult(
  stats: StatsCounter,
  c: Capture,
  args: readonly unknown[],
  before: LazyCounts,
): unknown {
  const { tracer, out } = c;
  const final = unflatten(out.spec, out.leaves.map((l) => restoreLeaf(tracer, l.value, args)));
  fixWrites(tracer, args);
  realizePending(final);
  countSegments(stats, before);
  return final;
}

function countSegments(stats: StatsCounter, before: LazyCounts): void {
  const after = lazyStats();
  stats.segments += after.graphs - before.graphs;
  stats.segmentsCompiled += after.compiled - before.compiled;
}

/** A result leaf of a replayed trace with symbolic inputs swapped back for the caller's. */
function restoreLeaf(tracer: Tracer, v: unknown, args: readonly unknown[]): unknown {
  if (v instanceof Tensor && v.impl instanceof TracedInputImpl) {
    const slot = tracer.slots[v.impl.slot]!;
    if (slot.kind === "state") return v; // the swapped tensor itself, restored already
    return readKeys(args, slot.keys);
  }
  return tracer.unwrap(v);
}

/** Values the trace wrote into modules that are still symbolic get the caller's tensors. */
function fixWrites(tracer: Tracer, args: readonly unknown[]): void {
  for (const w of tracer.writes) {
    if (w.value.kind !== "tensor") continue;
    const t = w.value.tensor;
    if (t.impl instanceof TracedInputImpl) {
      (w.target as Record<string, unknown>)[w.key] = restoreLeaf(tracer, t, args);
    }
  }
}

function realizePending(value: unknown): void {
  const list: Tensor[] = [];
  const visit = (v: unknown, depth: number) => {
    if (v instanceof Tensor) {
      if (v.impl.kind === "lazy") list.push(v);
      return;
    }
    if (depth > 16 || !isContainer(v)) return;
    for (const x of Array.isArray(v) ? v : Object.values(v)) visit(x, depth + 1);
  };
  visit(value, 0);
  if (list.length > 0) realizeAll(list);
}
