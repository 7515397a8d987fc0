// Deciding dynamism for one call (the stage between a guard miss and the capture): which dims
// of the call's argument tensors are dynamic — declared in the `dynamic` option, marked with
// markDynamic, or made dynamic automatically when a guard miss shows a dim's size changed —
// and how they share sizes. Dims with equal size and equal bucket are one SIZE GROUP (one size
// of the program, guarded equal); dims of different sizes are independent groups, each with its
// own bucket (an encoder's frames and a decoder's tokens). Past MAX_SIZE_GROUPS the rest are
// specialized, since each group costs traces. The automatic set (`AutoDims`) belongs to one
// compiled function and only grows; everything else here is a function of the call.

import { Tensor } from "../tensor/tensor.ts";
import { log } from "../util/log.ts";
import type { CompileConfig } from "./config.ts";
import {
  bucketFor,
  declaredDims,
  type DimRange,
  type DynamicDimPlan,
  DynamicShapeError,
  dynamicMarks,
  outOfRange,
  policyName,
  resizeTensor,
} from "./dynamic.ts";
import type { GuardSpec } from "./guards.ts";
import { type Leaf, readKeys, sameKeys, type TreeSpec, unflatten } from "./pytree.ts";
import type { StatsCounter } from "./stats.ts";
import type { Target } from "./target.ts";

/** Dims that share one size on a call (equal size, equal bucket): one size of the program. */
export interface SizeGroup {
  readonly dims: DynamicDimPlan[];
  readonly lo: number;
  /** Lowered when the code rejects sizes up to the bucket's top. */
  hi: number;
}

/** Each independent group costs traces (one more at its bottom); past this, specialize. */
export const MAX_SIZE_GROUPS = 4;

/** Dims made dynamic by automatic dynamism: argument path text -> dims. */
export type AutoDims = Map<string, Set<number>>;

/** `x.shape[1]`: a dynamic dim as guards and reasons print it. */
export function dimPath(d: DynamicDimPlan): string {
  return `${d.path}.shape[${d.dim}]`;
}

/** The dynamic dims of this call's argument tensors (declared, marked, or automatic). */
export function planDynamic(
  target: Target,
  config: CompileConfig,
  auto: AutoDims,
  leaves: readonly Leaf[],
): DynamicDimPlan[] {
  // dynamic: false turns automatic dynamism off; markDynamic still applies (as in torch).
  const out: DynamicDimPlan[] = [];
  for (const l of leaves) {
    if (l.kind !== "tensor") continue;
    const t = l.value as Tensor;
    const path = target.pathText(l.path);
    const declared = declaredDims(config.dynamic, l.path, path, t.shape.length);
    const marked = dynamicMarks(t);
    const automatic = config.dynamic === false ? undefined : auto.get(path);
    for (let d = 0; d < t.shape.length; d++) {
      const range: DimRange | undefined =
        declared.get(d) ?? marked?.get(d) ?? (automatic?.has(d) ? {} : undefined);
      if (range === undefined) continue;
      const source = declared.has(d) ? "option" : marked?.has(d) ? "markDynamic" : "auto";
      out.push({ keys: l.path, path, dim: d, size: t.shape[d]!, range, source });
    }
  }
  return out;
}

/**
 * The usable dims of `plan` in size groups (see the file comment), or undefined when none is
 * left: a size outside its declared range throws (outOfRange: "error") or is specialized, and
 * a size no bucket holds (0, 1, past the last edge) is compiled as static.
 */
export function chooseGroups(
  name: string,
  config: CompileConfig,
  stats: StatsCounter,
  plan: readonly DynamicDimPlan[],
): SizeGroup[] | undefined {
  const groups: SizeGroup[] = [];
  for (const p of plan) {
    const bad = outOfRange(p);
    if (bad !== undefined) {
      if (config.outOfRange === "error") throw new DynamicShapeError(`compile(${name}): ${bad}`);
      stats.noteSpecialized(stats.calls, `${bad}: specialized (outOfRange: "recompile")`);
      continue;
    }
    const b = bucketFor(p.size, config.buckets, p.range);
    if (typeof b === "string") {
      log("recompiles", () => `${name}: ${dimPath(p)}: ${b}`);
      continue;
    }
    if (b.lo >= b.hi) continue;
    const same = groups.find((g) => g.lo === b.lo && g.hi === b.hi && g.dims[0]!.size === p.size);
    if (same) {
      same.dims.push(p);
    } else if (groups.length < MAX_SIZE_GROUPS) {
      groups.push({ dims: [p], lo: b.lo, hi: b.hi });
    } else {
      stats.noteSpecialized(
        stats.calls,
        `${dimPath(p)} (${p.size}) is specialized: at most ${MAX_SIZE_GROUPS} ` +
          `independent size groups per program`,
      );
    }
  }
  return groups.length > 0 ? groups : undefined;
}

/** The arguments with each group's dims resized to its size in `sizes`. */
export function argsAt(
  spec: TreeSpec,
  leaves: readonly Leaf[],
  groups: readonly SizeGroup[],
  sizes: readonly number[],
): unknown[] {
  const values = leaves.map((l) => {
    if (l.kind !== "tensor") return l.value;
    const resize = new Map<number, number>();
    for (const [g, group] of groups.entries()) {
      for (const p of group.dims) if (sameKeys(p.keys, l.path)) resize.set(p.dim, sizes[g]!);
    }
    return resize.size === 0 ? l.value : resizeTensor(l.value as Tensor, resize);
  });
  return unflatten(spec, values) as unknown[];
}

/**
 * Automatic dynamism after a guard miss: every argument dim whose size differs from the
 * closest entry's static shape (its `shape` guards) joins `auto`. Returns the reason's
 * additions (`dim 1 of x is now dynamic (<=256, bucket pow2)`).
 */
export function markAutoDynamic(
  auto: AutoDims,
  config: CompileConfig,
  closest: readonly GuardSpec[],
  args: readonly unknown[],
): string[] {
  const out: string[] = [];
  for (const s of closest) {
    if (s.guard.kind !== "shape" || s.access.root !== "arg") continue;
    const v = readKeys(args, s.access.keys);
    const dims = s.guard.expected as readonly (number | null)[];
    if (!(v instanceof Tensor) || v.shape.length !== dims.length) continue;
    for (const [d, e] of dims.entries()) {
      const now = v.shape[d]!;
      if (e === null || e === now) continue;
      const path = s.guard.path;
      let set = auto.get(path);
      if (!set) auto.set(path, (set = new Set()));
      if (set.has(d)) continue;
      set.add(d);
      const b = bucketFor(now, config.buckets, {});
      const how =
        typeof b === "string"
          ? `${b}`
          : b.lo === b.hi
            ? `bucket [${b.lo}, ${b.hi}] holds one size, compiled as static`
            : `<=${b.hi}, bucket ${policyName(config.buckets)}`;
      out.push(`dim ${d} of ${path} is now dynamic (${how})`);
    }
  }
  return out;
}
