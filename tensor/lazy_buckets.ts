// Bounded dynamism in lazy mode: a pending graph that recurs with other sizes (a growing KV
// cache, a growing token sequence) runs ONE program per bucket of sizes, built and padded the
// way compile() builds a bucket's program (compiler/dynamic_module.ts, passes/dynamic_padder.ts,
// docs/dynamic-shapes.md). compile() re-runs the user's code at the bucket's top and bottom;
// lazy mode cannot, but it has what the code recorded: every op with its attributes. So a
// graph's structure (each op, its operands' dtypes and ranks, its attributes with every number
// left out, the wiring and the results) names a FAMILY, and each time a graph of the family is
// realized its numbers (the parameters' dims, the numbers in the attributes) are one point.
// Two points with different sizes give a line: a size variable V (the parameter dim that moved
// least) and, for every number, an integer affine function of V (from a growing cache of
// length T: `ones([1, T + 1])`, `arange(T, T + 1)`, a tril diagonal T). The graph is then
// lowered again at the bucket's top and bottom with those numbers (the recorded ops, not the
// user's code), the modules are compared instruction by instruction as compile()'s traces are,
// and the dynamic module is padded and compiled once for the bucket; each size in the bucket
// runs it through runPadded (inputs padded to the top, real sizes passed, results sliced).
// Every later graph of the family is checked against the line before it runs on a bucket's
// program: all of its numbers must be the line's at its V (a guard, exact), else it is
// compiled as it is and the family learns a new line from its last two points, which must be
// confirmed by a third before it compiles a bucket again; a family whose line fails twice, or
// whose program cannot be built, runs as before (exact programs, or the size-varying ops
// eagerly), with the reason logged under KILN_LOGS=lazy.

import { bucketFor, type BucketPolicy } from "../compiler/dynamic.ts";
import { buildDynamicModule, type SizedModule } from "../compiler/dynamic_module.ts";
import { cloneModule } from "../ir/clone.ts";
import type { Module } from "../ir/module.ts";
import { DynamicPadder } from "../passes/dynamic_padder.ts";
import type { CompileResult, Executable } from "../runtime/index.ts";
import { log } from "../util/log.ts";
import type { Attrs, Lowering } from "./dispatch.ts";
import type { IndexCheck } from "./index_checks.ts";

/** The buckets lazy mode uses (compile()'s default). */
export const LAZY_BUCKETS: BucketPolicy = "pow2";

// ---- numbers in attributes -----------------------------------------------------------------

/** A step's attributes as a skeleton (every number a hole) and the numbers, in walk order. */
interface AttrNumbers {
  readonly skeleton: string;
  readonly numbers: readonly number[];
}

const ATTR_CAPACITY = 8192;
const attrNumbersByKey = new Map<string, AttrNumbers>();

function skeletonOf(v: unknown, out: number[]): string {
  switch (typeof v) {
    case "number":
      out.push(v);
      return "#";
    case "bigint":
      out.push(Number(v));
      return "#n";
    case "string":
      return JSON.stringify(v);
    case "boolean":
      return v ? "T" : "F";
    case "undefined":
      return "_";
    default:
      if (v === null) return "null";
      if (Array.isArray(v)) return `[${v.map((x) => skeletonOf(x, out)).join(",")}]`;
      if (ArrayBuffer.isView(v)) return `<${Array.from(v as unknown as ArrayLike<number>)}>`;
      if (typeof v === "object") {
        const o = v as Record<string, unknown>;
        return `{${Object.keys(o).sort().map((k) => `${k}:${skeletonOf(o[k], out)}`).join(",")}}`;
      }
      return `?${typeof v}`;
  }
}

/** The numbers of `op`'s attributes (its non-operand arguments), cached by lowering key. */
function attrNumbers(op: Lowering, attrs: Attrs, key: string): AttrNumbers {
  const known = attrNumbersByKey.get(key);
  if (known) return known;
  const numbers: number[] = [];
  let skeleton = "";
  for (const p of op.signature) {
    if (p.role === "none") skeleton += `${skeletonOf(attrs[p.name], numbers)};`;
  }
  const r = { skeleton, numbers };
  if (attrNumbersByKey.size >= ATTR_CAPACITY) attrNumbersByKey.clear();
  attrNumbersByKey.set(key, r);
  return r;
}

function substituted(v: unknown, nums: readonly number[], at: { i: number }): unknown {
  switch (typeof v) {
    case "number":
      return nums[at.i++]!;
    case "bigint":
      return BigInt(nums[at.i++]!);
    default:
      if (v === null || typeof v !== "object" || ArrayBuffer.isView(v)) return v;
      if (Array.isArray(v)) return v.map((x) => substituted(x, nums, at));
      {
        const o = v as Record<string, unknown>;
        const r: Record<string, unknown> = {};
        for (const k of Object.keys(o).sort()) r[k] = substituted(o[k], nums, at);
        return r;
      }
  }
}

/** `attrs` with its numbers (in attrNumbers' order, from `nums[offset]`) replaced. */
function attrsWith(op: Lowering, attrs: Attrs, nums: readonly number[], offset: number): Attrs {
  const at = { i: offset };
  const r: Record<string, unknown> = { ...attrs };
  for (const p of op.signature) {
    if (p.role === "none") r[p.name] = substituted(attrs[p.name], nums, at);
  }
  return r;
}

// ---- families --------------------------------------------------------------------------------

/** What lazy mode hands over for one graph (a Plan, seen from here). */
export interface BucketRequest {
  /** The graph's size-free structure (steps, wiring, results) with backend and options. */
  readonly shape: string;
  /** Per parameter: a tensor's dims, or undefined for a scalar. */
  readonly paramDims: readonly (readonly number[] | undefined)[];
  readonly steps: readonly { readonly op: Lowering; readonly attrs: Attrs; readonly key: string }[];
  /** The graph's module at these parameter dims and step attributes (with its index checks). */
  build(
    paramDims: readonly (readonly number[] | undefined)[],
    attrs: readonly Attrs[],
  ): { readonly module: Module; readonly checks: readonly IndexCheck[] };
  /** Compiles a padded (static) module through the program cache. */
  compile(padded: Module): CompileResult;
}

/** A bucket's program: run through runPadded with `module` (the dynamic one). */
export interface BucketProgram {
  readonly exe: Executable;
  readonly module: Module;
  /** The index checks whose results follow the graph's (the same at every size). */
  readonly checks: readonly IndexCheck[];
  readonly lo: number;
  readonly hi: number;
}

export interface BucketServed {
  readonly program: BucketProgram;
  /** "miss": compiled now (or found by the program cache: `cacheHit`); else an earlier one. */
  readonly hit: "miss" | "bucket";
  readonly cacheHit?: "memory" | "disk";
}

/** V = numbers[v] (dim `dim` of parameter `param`); number j is a[j] * V + c[j]. */
interface Line {
  readonly v: number;
  readonly param: number;
  readonly dim: number;
  readonly a: readonly number[];
  readonly c: readonly number[];
}

interface Family {
  last: readonly number[] | undefined;
  line: Line | undefined;
  /** Whether a bucket may be compiled on the line (after a failed one: once a point agreed). */
  trusted: boolean;
  failures: number;
  failed: string | undefined;
  /** By bucket top; null: that bucket's program could not be built (logged once). */
  readonly programs: Map<number, BucketProgram | null>;
}

const FAMILY_CAPACITY = 1024;
const families = new Map<string, Family>();

/** Forgets every family and its programs (clearLazyGraphs). */
export function clearBucketFamilies(): void {
  families.clear();
  attrNumbersByKey.clear();
}

/** The graph's numbers (parameter dims, then each step's attribute numbers) and skeleton. */
function numbersOf(r: BucketRequest): { numbers: number[]; skeleton: string; offsets: number[] } {
  const numbers: number[] = [];
  let skeleton = "";
  for (const d of r.paramDims) {
    if (d === undefined) continue;
    for (const n of d) numbers.push(n);
  }
  const offsets: number[] = [];
  for (const s of r.steps) {
    const a = attrNumbers(s.op, s.attrs, s.key);
    offsets.push(numbers.length);
    for (const n of a.numbers) numbers.push(n);
    skeleton += `${a.skeleton}\n`;
  }
  return { numbers, skeleton, offsets };
}

/** Where number `j` comes from when it is a parameter dim: [param, dim], else undefined. */
function paramDimAt(r: BucketRequest, j: number): [number, number] | undefined {
  let at = 0;
  for (const [i, d] of r.paramDims.entries()) {
    if (d === undefined) continue;
    if (j < at + d.length) return [i, j - at];
    at += d.length;
  }
  return undefined;
}

/**
 * The line through two points, or why there is none: V is the parameter dim that moved by
 * the least (the first such), and every number must move by an integer multiple of it.
 */
function lineThrough(
  r: BucketRequest,
  p0: readonly number[],
  p1: readonly number[],
): Line | string {
  let v = -1;
  let dv = 0;
  for (let j = 0; j < p1.length; j++) {
    const d = Math.abs(p1[j]! - p0[j]!);
    if (d === 0 || paramDimAt(r, j) === undefined) continue;
    if (v < 0 || d < dv) {
      v = j;
      dv = d;
    }
  }
  if (v < 0) return "only numbers in attributes change, no input's dim";
  const V0 = p0[v]!;
  const V1 = p1[v]!;
  const a: number[] = [];
  const c: number[] = [];
  for (let j = 0; j < p1.length; j++) {
    const slope = (p1[j]! - p0[j]!) / (V1 - V0);
    if (!Number.isInteger(slope)) {
      return `a number (${p0[j]} then ${p1[j]}) is not an integer multiple of the size's ` +
        `change (${V0} then ${V1}): more than one size changes`;
    }
    a.push(slope);
    c.push(p1[j]! - slope * V1);
  }
  const [param, dim] = paramDimAt(r, v)!;
  return { v, param, dim, a, c };
}

function onLine(line: Line, nums: readonly number[]): boolean {
  const V = nums[line.v]!;
  for (let j = 0; j < nums.length; j++) if (nums[j] !== line.a[j]! * V + line.c[j]!) return false;
  return true;
}

function same(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function sizeName(r: BucketRequest, line: Line): string {
  const d = r.paramDims[line.param]!;
  return `dim ${line.dim} of input ${line.param} ([${d.join(",")}])`;
}

/**
 * Serves a graph from its bucket's program (compiling the bucket when it is new), or returns
 * undefined: the family has no line yet (its first size, or sizes that never changed), the
 * graph is off the line, its size is 0 or 1 or alone in its bucket, or the family cannot be
 * bucketed. Every call records the graph's numbers as the family's latest point.
 */
export function serveFromBucket(r: BucketRequest): BucketServed | undefined {
  const { numbers, skeleton, offsets } = numbersOf(r);
  const key = `${r.shape}\n${skeleton}`;
  let fam = families.get(key);
  if (!fam) {
    fam = {
      last: undefined,
      line: undefined,
      trusted: true,
      failures: 0,
      failed: undefined,
      programs: new Map(),
    };
    families.set(key, fam);
    if (families.size > FAMILY_CAPACITY) {
      const oldest = families.keys().next().value;
      if (oldest !== undefined) families.delete(oldest);
    }
  }
  const last = fam.last;
  fam.last = numbers;
  if (fam.failed !== undefined || last === undefined) return undefined;
  if (fam.line !== undefined && !onLine(fam.line, numbers)) {
    fam.failures++;
    fam.line = undefined;
    fam.trusted = false;
    const n = r.steps.length;
    if (fam.failures >= 2) {
      fam.failed = "its sizes left the line twice";
      log("lazy", () => `a graph of ${n} ops is not bucketed: ${fam.failed}`);
      return undefined;
    }
    log("lazy", () => `a graph of ${n} ops left its sizes' line: compiled as it is`);
  }
  if (fam.line === undefined) {
    if (same(last, numbers)) return undefined;
    const line = lineThrough(r, last, numbers);
    if (typeof line === "string") {
      log("lazy", () => `a graph of ${r.steps.length} ops changes sizes but is not bucketed: ${line}`);
      return undefined;
    }
    fam.line = line;
    log("lazy", () =>
      `a graph of ${r.steps.length} ops recurs with ${sizeName(r, line)} ${last[line.v]} then ` +
      `${numbers[line.v]}: its sizes are affine in it, one program per bucket`);
    if (!fam.trusted) return undefined; // a third point must agree first
  }
  fam.trusted = true;
  const line = fam.line;
  const V = numbers[line.v]!;
  const bucket = bucketFor(V, LAZY_BUCKETS, {});
  if (typeof bucket === "string" || bucket.lo === bucket.hi) return undefined;
  const known = fam.programs.get(bucket.hi);
  if (known === null) return undefined;
  if (known !== undefined) return { program: known, hit: "bucket" };
  const built = buildBucket(r, line, numbers, offsets, bucket.lo, bucket.hi);
  if (typeof built === "string") {
    fam.programs.set(bucket.hi, null);
    log("lazy", () =>
      `the bucket [${bucket.lo}, ${bucket.hi}] of ${sizeName(r, line)} for a graph of ` +
      `${r.steps.length} ops has no program (${built}): its sizes compile as they are`);
    return undefined;
  }
  fam.programs.set(bucket.hi, built.program);
  log("lazy", () =>
    `compiled the bucket [${bucket.lo}, ${bucket.hi}] of ${sizeName(r, line)} for a graph of ` +
    `${r.steps.length} ops (${built.hit})`);
  return {
    program: built.program,
    hit: "miss",
    ...(built.hit !== "miss" && { cacheHit: built.hit }),
  };
}

/** The graph at size V' (its numbers on the line), lowered from the recorded ops. */
function moduleAt(
  r: BucketRequest,
  line: Line,
  offsets: readonly number[],
  V: number,
): { readonly module: Module; readonly checks: readonly IndexCheck[] } {
  const nums = line.a.map((a, j) => a * V + line.c[j]!);
  let at = 0;
  const dims = r.paramDims.map((d) => {
    if (d === undefined) return undefined;
    const out = nums.slice(at, at + d.length);
    at += d.length;
    return out;
  });
  const attrs = r.steps.map((s, i) => attrsWith(s.op, s.attrs, nums, offsets[i]!));
  return r.build(dims, attrs);
}

function buildBucket(
  r: BucketRequest,
  line: Line,
  numbers: readonly number[],
  offsets: readonly number[],
  lo: number,
  hi: number,
): { program: BucketProgram; hit: CompileResult["hit"] } | string {
  const V = numbers[line.v]!;
  let top: SizedModule;
  let checks: readonly IndexCheck[];
  const others: SizedModule[] = [];
  try {
    const t = moduleAt(r, line, offsets, hi);
    top = { module: t.module, sizes: [hi] };
    checks = t.checks;
    const points = [lo, V];
    if (V === hi) points.push(Math.floor((lo + hi) / 2));
    for (const n of new Set(points)) {
      if (n !== hi) others.push({ module: moduleAt(r, line, offsets, n).module, sizes: [n] });
    }
  } catch (e) {
    return `lowering it at another size failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (others.length === 0) return "its bucket holds one size";
  const built = buildDynamicModule(top, others, [{ param: line.param, dim: line.dim }], [
    sizeName(r, line),
  ]);
  if (!built.ok) return built.why;
  const padded = cloneModule(built.module);
  try {
    new DynamicPadder().run(padded);
  } catch (e) {
    return `padding failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  const c = r.compile(padded);
  return { program: { exe: c.executable, module: built.module, checks, lo, hi }, hit: c.hit };
}
