// The program of a bucketed call: from the call's own trace and traces at other sizes of its
// buckets to ONE compiled program with bounded dynamic dims (compiler/dynamic_module.ts builds
// the module), or why the dims are specialized. The code is traced at every group's top (the
// program's bounds; when the code rejects a top, the bucket ends at the largest size it accepts,
// found by bisection), then from there with one group at a time at its bottom (so each
// difference belongs to one group), at this call's sizes, and at every bucket's middle when
// that adds a point where the groups move together, so a product of two sizes is caught (with
// one group: only when this call is at the top, as the fit's third point). The programs must
// agree on their inputs and results; a number passed to an op may change, as an integer affine
// function of the sizes (read at call time). A reason that belongs to one group of several
// specializes that group only, and the others are tried again.

import type { Module } from "../ir/module.ts";
import type { Executable } from "../runtime/index.ts";
import { operandLiteral } from "../tensor/dispatch.ts";
import { Tensor } from "../tensor/tensor.ts";
import { log } from "../util/log.ts";
import { compilePadded } from "./backend.ts";
import { type Flat, traceAt, type Traced } from "./capture.ts";
import type { CompileConfig } from "./config.ts";
import {
  type Affine,
  blameGroup,
  buildDynamicModule,
  fitAffine,
  movedAlone,
  pointText,
} from "./dynamic_module.ts";
import { sameKeys } from "./pytree.ts";
import { argsAt, dimPath, type SizeGroup } from "./size_groups.ts";
import type { StatsCounter } from "./stats.ts";
import type { Target } from "./target.ts";
import type { Program } from "./trace.ts";

/** What tracing a bucketed call at its other sizes needs. */
export interface BucketedCall {
  readonly target: Target;
  readonly config: CompileConfig;
  readonly stats: StatsCounter;
  /** The call's own arguments. */
  readonly flat: Flat;
}

/** A dynamic program, or why not (`group`: the one group the reason belongs to, if one). */
export type DynamicBuild =
  | { ok: true; exe: Executable; module: Module; readers: Map<number, Affine>; hit: boolean }
  | { ok: false; why: string; group?: number };

/** A failure, and the group it belongs to when only one. */
type Failure = { ok: false; why: string; group?: number };

/**
 * The dynamic program for this call's buckets, or why the dims are specialized (see the file
 * comment). `groups` is updated in place: a group's `hi` is lowered when the code rejects its
 * top, and a group specialized alone is removed (its dims compiled at this call's size).
 */
export function buildDynamic(
  call: BucketedCall,
  groups: SizeGroup[],
  real: Traced,
): DynamicBuild {
  for (;;) {
    const r = buildGroups(call, groups, real);
    if (r.ok || r.group === undefined || groups.length === 1) return r;
    const [g] = groups.splice(r.group, 1);
    const d = g!.dims[0]!;
    const why = `${dimPath(d)} = ${d.size} is specialized: ${r.why}`;
    call.stats.noteSpecialized(call.stats.calls, why);
    log("recompiles", () => `${call.target.name}: ${why}`);
  }
}

/** One try of buildDynamic: the traces, their comparison, the module, its compile. */
function buildGroups(call: BucketedCall, groups: SizeGroup[], real: Traced): DynamicBuild {
  const names = groups.map((g) => dimPath(g.dims[0]!));
  const traced = traceGroups(call, groups, real, names);
  if (!traced.ok) return traced;
  const { top, others } = traced;
  const tops = groups.map((g) => g.hi);
  const readers = compareTraces(groups, names, real, top, others);
  if (!(readers instanceof Map)) return readers;
  const tp = top.program;
  // Where the program reads each group's size: any of its dims that is a program input.
  const sources = groups.map((group) => {
    for (const d of group.dims) {
      const param = tp.bindings.findIndex((bd) => {
        if (bd.kind !== "slot") return false;
        const slot = top.tracer.slots[bd.slot]!;
        return slot.kind === "arg" && sameKeys(slot.keys, d.keys);
      });
      if (param >= 0) return { param, dim: d.dim };
    }
    return undefined;
  });
  const built = buildDynamicModule(
    { module: tp.module, sizes: tops },
    others.map((o) => ({ module: o.program.module, sizes: o.sizes })),
    sources,
    names,
  );
  if (!built.ok) return built;
  const compiled = compilePadded(built.module, call.config);
  if (!compiled.ok) return compiled;
  const r = compiled.result;
  return { ok: true, exe: r.executable, module: built.module, readers, hit: r.hit !== "miss" };
}

/** A trace at a point: one size per group. */
interface PointTrace {
  readonly program: Program;
  readonly sizes: number[];
}

const same = (x: readonly number[], y: readonly number[]) => x.every((n, i) => n === y[i]);

/**
 * The trace at the groups' tops (lowering a rejected top) and the traces at the other points,
 * or, when one fails, where and why.
 */
function traceGroups(
  call: BucketedCall,
  groups: SizeGroup[],
  real: Traced,
  names: readonly string[],
): { ok: true; top: Traced; others: PointTrace[] } | Failure {
  const callSizes = groups.map((g) => g.dims[0]!.size);
  /** Where the trace that failed ran, and the one group that moved to get there, if one. */
  const at: { sizes: number[]; group: number | undefined } = {
    sizes: callSizes,
    group: undefined,
  };
  let top: Traced;
  const others: PointTrace[] = [];
  try {
    top = traceTops(call, groups, real, names, at);
    const tops = groups.map((g) => g.hi);
    const points: number[][] = [];
    const add = (p: number[]) => {
      if (!same(p, tops) && !points.some((q) => same(q, p))) points.push(p);
    };
    for (const [g, group] of groups.entries()) add(tops.map((x, h) => (h === g ? group.lo : x)));
    add(callSizes);
    if (groups.length > 1 || same(callSizes, tops)) {
      add(groups.map((g) => Math.floor((g.lo + g.hi) / 2)));
    }
    for (const p of points) {
      at.sizes = p;
      at.group = movedAlone(p, tops);
      const program = same(p, callSizes)
        ? real.program
        : traceAt(call.target, call.config, argsAt(call.flat.spec, call.flat.leaves, groups, p))
          .program;
      others.push({ program, sizes: p });
    }
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    const g0 = groups[0]!;
    return {
      ok: false,
      why: groups.length === 1
        ? `tracing at another size in [${g0.lo}, ${g0.hi}] failed: ${msg}`
        : `tracing at ${pointText(at.sizes, names)} failed: ${msg}`,
      ...(at.group !== undefined && { group: at.group }),
    };
  }
  return { ok: true, top, others };
}

/**
 * The trace at every group's top. When the code rejects a top (a context length, a table
 * size), the bucket ends at the largest size it accepts, found by bisection between this call
 * and the top, one group at a time (the others at the tops already found); a group whose only
 * accepted size is this call's, at its bucket's bottom, fails the build (rethrowing the top's
 * error, with `at` saying where).
 */
function traceTops(
  call: BucketedCall,
  groups: SizeGroup[],
  real: Traced,
  names: readonly string[],
  at: { sizes: number[]; group: number | undefined },
): Traced {
  const k = groups.length;
  const callSizes = groups.map((g) => g.dims[0]!.size);
  const traceSizes = (sizes: number[]) =>
    traceAt(call.target, call.config, argsAt(call.flat.spec, call.flat.leaves, groups, sizes));
  if (groups.every((g, i) => g.hi === callSizes[i])) return real;
  try {
    at.sizes = groups.map((g) => g.hi);
    return traceSizes(at.sizes);
  } catch (e) {
    const cur = [...callSizes];
    let best: Traced = real;
    for (const [g, group] of groups.entries()) {
      if (cur[g] === group.hi) continue;
      const moved = (n: number) => cur.map((x, h) => (h === g ? n : x));
      if (k > 1) {
        try {
          best = traceSizes(moved(group.hi));
          cur[g] = group.hi;
          continue;
        } catch {
          // bisect below
        }
      }
      let ok = callSizes[g]!;
      let bad = group.hi;
      while (bad - ok > 1) {
        const mid = Math.floor((ok + bad) / 2);
        try {
          best = traceSizes(moved(mid));
          ok = mid;
        } catch {
          bad = mid;
        }
      }
      if (ok === callSizes[g] && callSizes[g] === group.lo) {
        at.group = k > 1 ? g : undefined;
        at.sizes = moved(group.hi);
        throw e;
      }
      group.hi = ok;
      cur[g] = ok;
      log("recompiles", () =>
        `${call.target.name}: the bucket of ${names[g]} ends at ${ok}: ${String(e)}`);
    }
    return best;
  }
}

/**
 * Checks that the traces agree with the top's on everything but sizes: the same inputs and
 * results, the same slots and tensor constants, and numbers passed to ops that are integer
 * affine functions of the sizes (their fits, by binding). Otherwise why not, and the group.
 */
function compareTraces(
  groups: readonly SizeGroup[],
  names: readonly string[],
  real: Traced,
  top: Traced,
  others: readonly PointTrace[],
): Map<number, Affine> | Failure {
  const k = groups.length;
  const tops = groups.map((g) => g.hi);
  const topText = pointText(tops, names);
  const tp = top.program;
  const readers = new Map<number, Affine>();
  for (const o of others) {
    const p = o.program;
    if (p.bindings.length !== tp.bindings.length || p.results !== tp.results ||
      p.resultIndex.join() !== tp.resultIndex.join()) {
      const g = movedAlone(o.sizes, tops);
      return {
        ok: false,
        why: `the program's inputs or results differ between ${topText} and ` +
          `${pointText(o.sizes, names)}: the code depends on the size${
            firstDifference(tp.module, p.module)}`,
        ...(g !== undefined && { group: g }),
      };
    }
  }
  if (real.program.resultIndex.join() !== tp.resultIndex.join()) {
    return { ok: false, why: `the program's results differ at ${topText}` };
  }
  for (const [b, bd] of tp.bindings.entries()) {
    const at = others.map((o) => o.program.bindings[b]!);
    if (at.some((x) => x.kind !== bd.kind)) {
      return { ok: false, why: `input ${b} of the program changes kind with the size` };
    }
    if (bd.kind === "slot") {
      if (at.some((x) => x.kind === "slot" && x.slot !== bd.slot)) {
        return { ok: false, why: `input ${b} of the program changes with the size` };
      }
    } else if (bd.kind === "const") {
      const l0 = operandLiteral(new Tensor(bd.impl));
      for (const x of at) {
        if (x.kind !== "const") continue;
        const l1 = operandLiteral(new Tensor(x.impl));
        if (l1.dims.join() !== l0.dims.join() || l1.data.some((v, q) => v !== l0.data[q])) {
          return { ok: false, why: `a tensor constant of the program changes with the size` };
        }
      }
    } else {
      const v0 = Number(bd.value);
      const pts = at.map(
        (x, j) => [others[j]!.sizes, Number((x as { value: unknown }).value)] as const,
      );
      if (pts.every(([, v]) => v === v0)) continue;
      const fit = fitAffine([[tops, v0], ...pts]);
      if (!fit) {
        const g = blameGroup([[tops, v0], ...pts]);
        return {
          ok: false,
          ...(g !== undefined && { group: g }),
          why: `a number passed to an op (${String(bd.value)} at ${topText}) changes with ` +
            `the ${k === 1 ? "size and is not an integer affine function of it" : "sizes and " +
            "is not an integer affine function of them"}`,
        };
      }
      readers.set(b, fit);
    }
  }
  return readers;
}

/** ` (first at <op> at file:line)`: where two programs' instruction lists first part. */
function firstDifference(a: Module, b: Module): string {
  const xs = a.entry.instructions;
  const ys = b.entry.instructions;
  for (let k = 0; k < Math.max(xs.length, ys.length); k++) {
    const x = xs[k] ?? ys[k]!;
    if (xs[k]?.opcode === ys[k]?.opcode) continue;
    const m = x.metadata;
    const at =
      m.sourceFile !== undefined ? ` at ${m.sourceFile}:${m.sourceLine}:${m.sourceColumn}` : "";
    return ` (first at ${m.opType ?? x.opcode}${at})`;
  }
  return "";
}
