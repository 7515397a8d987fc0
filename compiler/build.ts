// Building the program of a captured call: the recorded graph from its inputs to its results
// becomes an IR module (compiler/trace.ts's buildProgram); for a bucketed call the size-branch
// oracle decides whether one program may serve the bucket, and if so the traces at its other
// sizes make the dynamic program (compiler/dynamic_program.ts), padded and compiled; otherwise
// (or when that fails) the dims are specialized, with the reason, and the traced program is
// compiled as it is. Both go through the program cache (compiler/backend.ts).

import { cloneModule } from "../ir/clone.ts";
import type { Module } from "../ir/module.ts";
import { shapeToString } from "../ir/shape.ts";
import type { Executable } from "../runtime/index.ts";
import { log } from "../util/log.ts";
import { compileProgram } from "./backend.ts";
import { type Capture, programOf } from "./capture.ts";
import type { Affine } from "./dynamic_module.ts";
import { type BucketedCall, buildDynamic } from "./dynamic_program.ts";
import { dimPath, type SizeGroup } from "./size_groups.ts";
import type { SizeBranchQuestion } from "./size_oracle.ts";
import { type IndexCheck, RESULTS_PER_CHECK } from "../tensor/index_checks.ts";
import type { Binding } from "./trace.ts";

/** The compiled program of a captured call and how its parameters and results are wired. */
export interface ProgramBuild {
  /** Undefined when the call computes nothing (its results are inputs or constants). */
  readonly exe: Executable | undefined;
  readonly module: Module | undefined;
  readonly bindings: readonly Binding[];
  /** The position among results of each requested value (by the capture's requested order). */
  readonly resultIndex: readonly number[];
  readonly ops: number;
  readonly tuple: boolean;
  /** The program's index checks; their results follow the requested ones. */
  readonly checks: readonly IndexCheck[];
  /** Requested results (the first check's result position). */
  readonly checkAt: number;
  /** Set when the program has bounded dynamic dims (runPadded pads for it). */
  readonly dynamicModule: Module | undefined;
  /** Parameters that are numbers computed from the call's sizes, by parameter index. */
  readonly affine: ReadonlyMap<number, Affine>;
  /** Whether the entry serves a bucket (not counted under the recompile limit). */
  readonly bucketed: boolean;
}

/**
 * The program of `c`. `groups` (updated in place by the dynamic build) are the call's size
 * groups, asked about through `question`; `dynamicDims` says whether the call had dynamic dims
 * at all (an entry for a size no bucket holds is a bucket's entry too).
 */
export function buildEntryProgram(
  call: BucketedCall,
  c: Capture,
  groups: SizeGroup[] | undefined,
  question: SizeBranchQuestion | undefined,
  dynamicDims: boolean,
): ProgramBuild {
  const { target, config, stats } = call;
  const name = target.name;
  if (c.requested.length === 0) {
    return {
      exe: undefined,
      module: undefined,
      bindings: [],
      resultIndex: [],
      ops: 0,
      tuple: false,
      checks: [],
      checkAt: 0,
      dynamicModule: undefined,
      affine: new Map(),
      bucketed: groups === undefined && dynamicDims,
    };
  }
  const program = programOf(name, config, c.tracer, c.requested);
  const base = {
    bindings: program.bindings,
    resultIndex: program.resultIndex,
    ops: program.ops,
    tuple: program.results > 1,
    checks: program.checks,
    checkAt: program.results - RESULTS_PER_CHECK * program.checks.length,
  };
  // Code that branches on a size shares a bucket's program only when the oracle says the
  // traces did not (compiler/size_oracle.ts, docs/dynamic-shapes.md).
  const dyn = groups && question
    ? question.decide(() => buildDynamic(call, groups, { program, tracer: c.tracer }))
    : undefined;
  if (dyn?.ok) {
    if (dyn.hit) stats.programCacheHits++;
    log("recompiles", () => `${name}: one program for ${groups!.map((g) =>
      `${g.dims.map(dimPath).join(" == ")} in [${g.lo}, ${g.hi}]`).join(", ")}`);
    return {
      ...base,
      exe: dyn.exe,
      module: dyn.module,
      dynamicModule: dyn.module,
      affine: dyn.readers,
      bucketed: true,
    };
  }
  if (dyn && groups) {
    const dims = groups.map((g) => `${dimPath(g.dims[0]!)} = ${g.dims[0]!.size}`);
    const why = `${dims.join(", ")} ${dims.length === 1 ? "is" : "are"} specialized: ${dyn.why}`;
    stats.noteSpecialized(stats.calls, why);
    log("recompiles", () => `${name}: ${why}`);
  }
  const module = mergeEqualScalars(program.module, program.bindings);
  const r = compileProgram(module, config);
  if (r.hit !== "miss") stats.programCacheHits++;
  return {
    ...base,
    exe: r.executable,
    module,
    dynamicModule: undefined,
    affine: new Map(),
    bucketed: groups === undefined && dynamicDims,
  };
}

/**
 * A static program in which every scalar parameter with the same value and shape as an earlier
 * one is read as that earlier one: the tracer binds each JS number an op uses to a parameter of
 * its own (a dynamic program fits those to the call's sizes one by one), so two uses of
 * `headDim` were two parameters, and CSE kept the two identical chains reading them (a Mistral
 * block's RoPE frequencies for q and for k, two fusions). A static program's scalar bindings
 * are fixed at its trace, so equal ones may share. The duplicate parameters stay in the
 * signature (the entry still passes their values), unused.
 */
function mergeEqualScalars(module: Module, bindings: readonly Binding[]): Module {
  const first = new Map<string, number>();
  const merges: [number, number][] = [];
  bindings.forEach((bd, i) => {
    if (bd.kind !== "scalar") return;
    const v = bd.value;
    const p = module.entry.parameters[i];
    if (p === undefined) return;
    const value = typeof v === "number" && Object.is(v, -0) ? "-0" : `${typeof v}:${String(v)}`;
    const key = `${shapeToString(p.shape, false)} ${value}`;
    const at = first.get(key);
    if (at === undefined) first.set(key, i);
    else merges.push([i, at]);
  });
  if (merges.length === 0) return module;
  const m = cloneModule(module);
  const params = m.entry.parameters;
  for (const [dup, keep] of merges) params[dup]!.replaceAllUsesWith(params[keep]!);
  return m;
}
