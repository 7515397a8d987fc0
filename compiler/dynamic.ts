// Bounded dynamism's frontend: which dims of a call's argument tensors are dynamic, the bucket
// a real size falls in, and the bad-input errors. A dim becomes dynamic in one of three ways:
// the `dynamic` compile option (keyed by the argument's path as guards print it — `x`,
// `options.attentionMask` — or by a top-level argument's position, "0"), `markDynamic` on the
// tensor itself (like torch._dynamo.mark_dynamic), or AUTOMATIC dynamism (the default): a dim
// whose size changed once between calls. Sizes 0 and 1 are always specialized (compiled as
// static), as in PyTorch, because code treats them specially (broadcasting, empty tensors). A
// bucket is the closed range of sizes one compiled program serves; its top is the bound the
// program is compiled for (see compiler/dynamic_module.ts for how the program is built).

import { allocate, Literal, type LiteralData } from "../ir/literal.ts";
import type { Module as NNModule } from "../tensor/nn/module.ts";
import { analyzeFunction, analyzeModuleForward, type SourceAnalysis } from "./analyze.ts";
import { isKilnFile } from "./analyze_walk.ts";
import { locateOriginal } from "./analyze_locate.ts";
import { formatLocation } from "./source.ts";
import { TraceCoverage, type SourcePoint, type Verdict } from "./coverage.ts";
import { log } from "../util/log.ts";
import { operandLiteral, tensorFromLiteral } from "../tensor/dispatch.ts";
import { Tensor } from "../tensor/tensor.ts";
import { describeValue } from "./guards.ts";
import { formatPath } from "./pytree.ts";

/** A declared range of sizes for one dim (inclusive; min defaults to 0, max to unbounded). */
export interface DimRange {
  readonly min?: number;
  readonly max?: number;
}

/**
 * How sizes are grouped into compiled programs: "pow2" (2, 3-4, 5-8, ..., the default), an
 * increasing list of bucket tops (`[16, 32, 64]`), fixed steps (`{ multiple: 64 }`), or "none":
 * one program for the whole declared range, compiled at its max.
 */
export type BucketPolicy = "pow2" | "none" | readonly number[] | { readonly multiple: number };

/** Per argument path (or top-level position), per dim: its range (`true`: any size). */
export type DynamicSpec = Readonly<Record<string, Readonly<Record<number, DimRange | true>>>>;

/** The `dynamic` compile option: "auto" (default), false (always static), or declared dims. */
export type DynamicOption = "auto" | false | DynamicSpec;

/** A bad dynamic declaration, or a size outside a declared range (outOfRange: "error"). */
export class DynamicShapeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DynamicShapeError";
  }
}

// ---- markDynamic -----------------------------------------------------------------------------

const marks = new WeakMap<Tensor, Map<number, DimRange>>();

/**
 * Declares dim `dim` of `t` dynamic within `range` for the next compiled calls that receive
 * `t` (negative dims count from the end). Returns `t`.
 */
export function markDynamic(t: Tensor, dim: number, range: DimRange = {}): Tensor {
  if (!(t instanceof Tensor)) {
    throw new TypeError(`markDynamic: expected a tensor, got ${describeValue(t)}`);
  }
  const r = t.shape.length;
  const d = dim < 0 ? dim + r : dim;
  if (!Number.isInteger(dim) || d < 0 || d >= r) {
    throw new DynamicShapeError(
      `markDynamic: dim ${String(dim)} is out of range for a tensor of shape [${t.shape.join(
        ", ",
      )}]`,
    );
  }
  checkRange(range, `markDynamic(dim ${dim})`);
  let m = marks.get(t);
  if (!m) marks.set(t, (m = new Map()));
  m.set(d, { ...range });
  return t;
}

/** The dims markDynamic declared on `t`. */
export function dynamicMarks(t: Tensor): ReadonlyMap<number, DimRange> | undefined {
  return marks.get(t);
}

// ---- validation ------------------------------------------------------------------------------

function checkRange(range: DimRange, where: string): void {
  if (typeof range !== "object" || range === null) {
    throw new DynamicShapeError(`${where}: a range must be { min?, max? }, got ${String(range)}`);
  }
  const { min, max } = range;
  for (const [k, v] of [["min", min], ["max", max]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 0)) {
      throw new DynamicShapeError(`${where}: ${k} must be an integer >= 0, got ${String(v)}`);
    }
  }
  if (min !== undefined && max !== undefined && min > max) {
    throw new DynamicShapeError(`${where}: min (${min}) > max (${max})`);
  }
}

/** Throws a DynamicShapeError for a malformed bucket policy. */
export function checkBuckets(p: BucketPolicy): void {
  if (p === "pow2" || p === "none") return;
  if (Array.isArray(p)) {
    const list = p as readonly number[];
    if (list.length === 0) throw new DynamicShapeError(`buckets: the list is empty`);
    list.forEach((e, i) => {
      if (!Number.isInteger(e) || e < 1) {
        throw new DynamicShapeError(`buckets: edge ${i} is ${String(e)}; edges are integers >= 1`);
      }
      if (i > 0 && e <= list[i - 1]!) {
        throw new DynamicShapeError(
          `buckets: the list must be strictly increasing, but edge ${i} (${e}) <= edge ${
            i - 1
          } (${list[i - 1]})`,
        );
      }
    });
    return;
  }
  if (typeof p === "object" && p !== null && "multiple" in p) {
    const m = (p as { multiple: unknown }).multiple;
    if (typeof m !== "number" || !Number.isInteger(m) || m < 1) {
      throw new DynamicShapeError(`buckets: multiple must be an integer >= 1, got ${String(m)}`);
    }
    return;
  }
  throw new DynamicShapeError(
    `buckets: expected "pow2", "none", an increasing list or { multiple }, got ${describeValue(p)}`,
  );
}

/** Throws a DynamicShapeError for a malformed `dynamic` option. */
export function checkDynamicOption(d: DynamicOption, buckets: BucketPolicy): void {
  if (d === "auto") {
    if (buckets === "none") {
      throw new DynamicShapeError(
        `buckets: "none" compiles one program at a declared max; declare the dims with ` +
          `dynamic: { x: { 1: { max: 1024 } } } or markDynamic (dynamic: "auto" has no max)`,
      );
    }
    return;
  }
  if (d === false) return;
  if (typeof d !== "object" || d === null || Array.isArray(d)) {
    throw new DynamicShapeError(
      `dynamic: expected "auto", false or { arg: { dim: { min?, max? } } }, got ` +
        describeValue(d),
    );
  }
  for (const [arg, dims] of Object.entries(d)) {
    if (typeof dims !== "object" || dims === null) {
      throw new DynamicShapeError(`dynamic.${arg}: expected { dim: { min?, max? } }`);
    }
    for (const [k, r] of Object.entries(dims)) {
      if (!/^-?\d+$/.test(k)) {
        throw new DynamicShapeError(`dynamic.${arg}: '${k}' is not a dim index`);
      }
      if (r !== true) checkRange(r, `dynamic.${arg}[${k}]`);
      if (buckets === "none" && (r === true || r.max === undefined)) {
        throw new DynamicShapeError(
          `dynamic.${arg}[${k}]: buckets "none" compiles one program at the max; give a max`,
        );
      }
    }
  }
}

// ---- buckets ---------------------------------------------------------------------------------

/** The closed range of sizes one program serves; `hi` is the bound it is compiled for. */
export interface Bucket {
  readonly lo: number;
  readonly hi: number;
}

/** A policy in words, for reasons (`pow2`, `[16, 32, 64]`, `multiple of 64`, `none`). */
export function policyName(p: BucketPolicy): string {
  if (typeof p === "string") return p;
  if (Array.isArray(p)) return `[${(p as readonly number[]).join(", ")}]`;
  return `multiple of ${(p as { multiple: number }).multiple}`;
}

/**
 * The bucket of `size`, or a string saying why the size is specialized (0 and 1; above the
 * last edge of a list with no larger max). Sizes are assumed inside `range` (checked before).
 */
export function bucketFor(size: number, p: BucketPolicy, range: DimRange): Bucket | string {
  if (size <= 1) return `size ${size} is specialized (sizes 0 and 1 always are)`;
  const min = Math.max(range.min ?? 0, 2);
  const max = range.max ?? Number.MAX_SAFE_INTEGER;
  let lo: number;
  let hi: number;
  if (p === "none") {
    lo = min;
    hi = max;
  } else if (p === "pow2") {
    hi = 2 ** Math.ceil(Math.log2(size));
    lo = hi / 2 + 1;
    if (hi === 2) lo = 2;
  } else if (Array.isArray(p)) {
    const list = p as readonly number[];
    const i = list.findIndex((e) => e >= size);
    if (i < 0) {
      const last = list[list.length - 1]!;
      if (range.max === undefined || range.max <= last) {
        return `size ${size} is above the last bucket edge (${last})`;
      }
      lo = last + 1;
      hi = range.max;
    } else {
      hi = list[i]!;
      lo = i === 0 ? 2 : list[i - 1]! + 1;
    }
  } else {
    const m = (p as { multiple: number }).multiple;
    hi = Math.ceil(size / m) * m;
    lo = hi - m + 1;
  }
  return { lo: Math.max(lo, min), hi: Math.min(hi, max) };
}

// ---- which dims are dynamic on a call --------------------------------------------------------

/** One dynamic dim of one argument tensor on one call. */
export interface DynamicDimPlan {
  /** Keys from the argument list to the tensor. */
  readonly keys: readonly (string | number)[];
  /** The tensor's path as guards print it (`inputIds`, `options.attentionMask`). */
  readonly path: string;
  readonly dim: number;
  readonly size: number;
  readonly range: DimRange;
  readonly source: "option" | "markDynamic" | "auto";
}

/** Looks a tensor leaf up in the `dynamic` option: by path text, or by top-level position. */
export function declaredDims(
  spec: DynamicOption,
  keys: readonly (string | number)[],
  path: string,
  rank: number,
): Map<number, DimRange> {
  const out = new Map<number, DimRange>();
  if (spec === "auto" || spec === false) return out;
  const byPos = keys.length >= 1 ? formatPath(String(keys[0]), keys.slice(1)) : undefined;
  const entry = spec[path] ?? (byPos !== undefined ? spec[byPos] : undefined);
  if (!entry) return out;
  for (const [k, r] of Object.entries(entry)) {
    const i = Number(k);
    const d = i < 0 ? i + rank : i;
    if (d < 0 || d >= rank) {
      throw new DynamicShapeError(
        `dynamic.${path}: dim ${k} is out of range for a tensor of rank ${rank}`,
      );
    }
    out.set(d, r === true ? {} : r);
  }
  return out;
}

/** A size outside its declared range, in words. */
export function outOfRange(p: DynamicDimPlan): string | undefined {
  const { min, max } = p.range;
  if ((min !== undefined && p.size < min) || (max !== undefined && p.size > max)) {
    return (
      `${p.path}.shape[${p.dim}] is ${p.size}, outside its declared range ` +
      `[${min ?? 0}, ${max ?? "inf"}] (${p.source === "markDynamic" ? "markDynamic" : "dynamic"})`
    );
  }
  return undefined;
}

// ---- inputs at another size ------------------------------------------------------------------

/**
 * `t` with the dims in `sizes` changed (dim -> new size): elements repeat the real ones along
 * a grown dim (index mod the real size) so token ids stay valid ids, and are cut along a
 * shrunk one. Only the traces at other sizes see these values; nothing computes with them.
 */
export function resizeTensor(t: Tensor, sizes: ReadonlyMap<number, number>): Tensor {
  const lit = operandLiteral(t);
  const src = lit.dims;
  const dst = src.map((d, k) => sizes.get(k) ?? d);
  const n = dst.reduce((a, b) => a * b, 1);
  const data = allocate(lit.type, n) as unknown as { [i: number]: number | bigint };
  const from = lit.data as unknown as { readonly [i: number]: number | bigint };
  const strides: number[] = [];
  let acc = 1;
  for (let k = src.length - 1; k >= 0; k--) {
    strides[k] = acc;
    acc *= src[k]!;
  }
  const idx = dst.map(() => 0);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = 0; k < idx.length; k++) s += (idx[k]! % Math.max(src[k]!, 1)) * strides[k]!;
    data[i] = from[s]!;
    for (let k = idx.length - 1; k >= 0; k--) {
      if (++idx[k]! < dst[k]!) break;
      idx[k] = 0;
    }
  }
  return tensorFromLiteral(new Literal(lit.type, dst, data as unknown as LiteralData));
}

// ---- code that branches on a size ------------------------------------------------------------
//
// Traces at a few sizes of a bucket cannot see a condition that flips between them, so every
// branch whose condition depends on a size (compiler/analyze_sizes.ts) is a candidate for
// keeping the dim static. A candidate keeps it static only if the traces compile() ran for
// this call EVALUATED its condition (V8's block coverage, compiler/coverage.ts), at any of the
// sizes traced. Why a candidate the traces never reached is safe to ignore, even though an
// untraced size of the bucket might behave differently: run the code at a traced size t and at
// an untraced size s side by side. Both start alike and take the same path until the first
// decision whose outcome differs between t and s, and only a decision on a size can differ.
// Up to that decision the run at t executed everything the run at s did, so that decision was
// evaluated at t; being a size decision in the code the analysis reads, it is a candidate that
// was executed, and the dim stays static. If no decision differs, s takes t's path and never
// reaches the candidate either. So "condition evaluated" (not "branch taken") is the test: a
// condition whose enclosing code runs at every size is evaluated at every size, whichever way
// it goes, and code reached only at some sizes sits behind a size decision that was itself
// evaluated. (`if (cond) throw` guards are not candidates: the sizes they reject are a prefix
// or suffix of the bucket, which the traces at its ends hit, and a `catch` reached only there
// is then traced.) The argument assumes every size decision on the way is in code the analysis
// reads, the same assumption the source check already makes; a decision in code it does not
// read (an imported helper, Kiln's own layers) is caught only by comparing the traces. Where
// coverage cannot answer (no inspector, someone else recording, no source map, code analysed
// from `fn.toString()`), every candidate counts as executed: the answer before coverage.

/** A branch on a size in the compiled code: the reason it gives and where it is. */
export interface SizeBranchSite {
  /** `kept static: the code branches on a size at file:line:col (kind `expr`)`. */
  readonly reason: string;
  /** Its place in a file; absent when the source was read from `fn.toString()`. */
  readonly point?: SourcePoint;
}

/**
 * Every branch on a size (compiler/analyze_sizes.ts) in `fn` (absent when the root is a
 * module), or in the forward (and the methods it reaches) of any module in the trees of
 * `modules` — the compiled model itself first — or, as a string, why the source could not be
 * read. Kiln's own layers (tensor/nn) are not read: they branch on sizes only to throw or for
 * sizes 0 and 1, which are always specialized. A branch on a `number` parameter counts except
 * in the compiled function's own parameters, which are guarded by value.
 */
export function sizeBranchSites(
  fn: Function | undefined,
  modules: readonly NNModule[],
): SizeBranchSite[] | string {
  const out: SizeBranchSite[] = [];
  const add = (a: SourceAnalysis, top: boolean): void => {
    for (const b of a.sizeBranches) {
      if (top && b.parameter !== undefined && b.via === undefined) continue;
      const file = b.file ?? a.file;
      const where =
        file !== undefined
          ? formatLocation({ file, line: b.line, column: b.column })
          : `line ${b.line} of the function's text`;
      const via = b.via !== undefined ? ` in ${b.via}` : "";
      out.push({
        reason: `kept static: the code branches on a size at ${where}${via} (${b.kind} \`${
          b.expr
        }\`)`,
        ...(file !== undefined && {
          point: { file, line: b.line, column: b.column, text: b.expr },
        }),
      });
    }
  };
  try {
    if (fn) add(analyzeFunction(fn), true);
    const done = new Set<SourceAnalysis>();
    for (const [i, root] of modules.entries()) {
      for (const m of root.modules()) {
        if (typeof (m as { forward?: unknown }).forward !== "function") continue;
        const a = analyzeModuleForward(m);
        if (done.has(a) || isKilnModule(m, a)) continue;
        done.add(a);
        add(a, fn === undefined && i === 0 && m === root);
      }
    }
  } catch (e) {
    return `kept static: the source could not be analysed for branches on a size (${
      e instanceof Error ? e.message : String(e)
    })`;
  }
  return out;
}

/**
 * Kiln's own layers (nn.Linear, nn.MultiheadAttention...) are shape-generic by construction:
 * their argument checks are not the user's branches. Their file is the analysis's, or (when
 * the transformed text could not be matched to the file and `toString()` was analysed) where
 * V8 says the class's forward is.
 */
function isKilnModule(m: NNModule, a: SourceAnalysis): boolean {
  if (a.file !== undefined) return isKilnFile(a.file);
  const forward = (m as { forward?: unknown }).forward;
  const file = typeof forward === "function" ? locateOriginal(forward)?.file : undefined;
  return file !== undefined && isKilnFile(file);
}

/**
 * The size-branch check around the traces of one bucketed call: made before the call's own
 * trace (it starts V8's coverage when there is a branch to ask about), then `decide` runs the
 * other traces and builds the bucket's program, and says whether the program may be used.
 * `stop` ends the recording whatever happened; coverage is never left on after a trace.
 */
export class SizeBranchCheck {
  private readonly coverage: TraceCoverage | undefined;
  /** Why coverage is not used, when there are branches and it is not. */
  private readonly unavailable: string | undefined;
  private readonly knownExecuted: SizeBranchSite | undefined;

  constructor(
    private readonly sites: readonly SizeBranchSite[] | string,
    private readonly name: string,
  ) {
    if (typeof sites === "string" || sites.length === 0) return;
    // A branch read from `fn.toString()` has no place in a file to ask about: it counts.
    if (sites.some((s) => s.point === undefined)) {
      this.unavailable = "a size branch was read from the function's text, not its file";
      return;
    }
    // A branch an earlier trace executed keeps the dim static from then on (safe, if coarse
    // when it ran under a flag that has changed since), so coverage is not recorded again.
    const known = sites.find((s) => executedBefore.has(s));
    if (known) {
      this.unavailable = `${known.reason.replace(/^kept static: the code branches/, "a branch")}` +
        ` was executed (or not ruled out) by an earlier trace`;
      this.knownExecuted = known;
      return;
    }
    const c = TraceCoverage.start(sites.map((s) => s.point!));
    if (c.kind === "recording") this.coverage = c.coverage;
    else if (c.kind === "unavailable") this.unavailable = c.why;
    else {
      const site = sites[c.index]!;
      executedBefore.add(site);
      this.knownExecuted = site;
      this.unavailable =
        `${site.reason.replace(/^kept static: the code branches/, "a branch")} counts as ` +
        `executed: ${c.why}`;
    }
  }

  /**
   * `build`'s result (the other traces and the bucket's program), or why the dim is kept
   * static: the first size branch the traces executed (every one, without coverage).
   */
  decide<T extends { ok: boolean }>(build: () => T): T | { ok: false; why: string } {
    const sites = this.sites;
    if (typeof sites === "string") return { ok: false, why: sites };
    if (sites.length === 0) return build();
    const coverage = this.coverage;
    if (!coverage) {
      const why = this.unavailable ?? "no coverage";
      log("recompiles", () => `${this.name}: every size branch counts as executed (${why})`);
      return { ok: false, why: (this.knownExecuted ?? sites[0]!).reason };
    }
    try {
      // Asked once after the call's own trace, so an executed branch costs no more traces.
      const first = this.executed(coverage, sites);
      if (first) return { ok: false, why: first.reason };
      const built = build();
      const ran = this.executed(coverage, sites);
      if (ran) return { ok: false, why: ran.reason };
      if (built.ok) {
        for (const s of sites) {
          log("recompiles", () =>
            `${this.name}: ${s.reason.replace(/^kept static: the code branches/, "a branch")} ` +
              `was not executed in this trace; the bucket shares one program`);
        }
      }
      return built;
    } finally {
      coverage.stop();
    }
  }

  /** Ends the recording (idempotent). */
  stop(): void {
    this.coverage?.stop();
  }

  private executed(
    coverage: TraceCoverage,
    sites: readonly SizeBranchSite[],
  ): SizeBranchSite | undefined {
    let verdicts: Verdict[];
    try {
      verdicts = coverage.check(sites.map((s) => s.point!));
    } catch (e) {
      log("recompiles", () => `${this.name}: coverage could not be read (${String(e)})`);
      return sites[0];
    }
    if (coverage.spoiledBy !== undefined) {
      log("recompiles", () => `${this.name}: coverage cannot rule out a size branch: ${
        coverage.spoiledBy}`);
    }
    const found = sites.find((_, i) => verdicts[i] !== "not executed");
    if (found) executedBefore.add(found);
    return found;
  }
}

/** Size branches some trace executed (or coverage could not rule out). */
const executedBefore = new WeakSet<SizeBranchSite>();
