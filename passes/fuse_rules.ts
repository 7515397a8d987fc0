// The fusion rules: which opcodes may join a fusion and in what role, which are expensive (never
// duplicated, never recomputed per element of a broadcast), and `validateCluster`, which checks
// that a candidate set of instructions forms one kernel of a kind the fusion contract
// (FUSION_CONTRACT.md) allows — kLoop, kInput (reductions of one row shape with producers and an
// epilogue) or kOutput (one dot/convolution with an elementwise epilogue). Every check answers a
// Decision that carries its reason in words, so KILN_LOGS=fusion and explainFusion can say why.

import type { FusionKind } from "../ir/attributes.ts";
import type { Instruction } from "../ir/module.ts";
import { OPCODE_INFO, type Opcode } from "../ir/opcodes.ts";
import { type ArrayShape, elementCount, isArray, sameDims, shapeToString } from "../ir/shape.ts";

/** A fusion decision: yes, or no with the reason in words. */
export type Decision = { ok: true } | { ok: false; why: string };

export const YES: Decision = { ok: true };
export const no = (why: string): Decision => ({ ok: false, why });

/**
 * What an opcode may be inside a fusion. `loop`: an op of kLoop kernels (elementwise and
 * data movement, computed per output element); `leaf`: a constant (copied into the fusion when
 * small); `reduce` / `contraction`: the hero of a kInput / kOutput fusion; `never`: stays out,
 * with the reason.
 */
type FusionRole =
  | { role: "loop"; expensive: boolean }
  | { role: "leaf" }
  | { role: "reduce" }
  | { role: "contraction" }
  | { role: "never"; why: string };

const cheap: FusionRole = { role: "loop", expensive: false };
// XLA's IsExpensive: transcendental and division-like ops cost tens of cycles per element, so
// they are neither duplicated into several kernels nor recomputed behind a broadcast.
const costly: FusionRole = { role: "loop", expensive: true };
const never = (why: string): FusionRole => ({ role: "never", why });
const control = never("control flow; fusion never crosses a call, while or conditional boundary");

const FUSION_ROLES = {
  parameter: never("a parameter; it is an operand of the fusion, not part of it"),
  constant: { role: "leaf" },
  iota: cheap,
  "replica-id": never("replica-id (interpreter only)"),
  "partition-id": never("partition-id (interpreter only)"),
  "all-reduce": never("all-reduce (a collective; interpreter only)"),
  "all-reduce-start": never("all-reduce-start (a collective; interpreter only)"),
  "all-reduce-done": never("all-reduce-done (a collective; interpreter only)"),
  "all-gather": never("all-gather (a collective; interpreter only)"),
  "all-gather-start": never("all-gather-start (a collective; interpreter only)"),
  "all-gather-done": never("all-gather-done (a collective; interpreter only)"),
  "reduce-scatter": never("reduce-scatter (a collective; interpreter only)"),
  "all-to-all": never("all-to-all (a collective; interpreter only)"),
  "collective-permute": never("collective-permute (a collective; interpreter only)"),
  "collective-permute-start": never("collective-permute-start (a collective; interpreter only)"),
  "collective-permute-done": never("collective-permute-done (a collective; interpreter only)"),
  "async-start": never("async-start (an asynchronous call; interpreter only)"),
  "async-update": never("async-update (an asynchronous call; interpreter only)"),
  "async-done": never("async-done (an asynchronous call; interpreter only)"),
  "after-all": never("after-all (a token; interpreter only)"),
  "ragged-dot": never("ragged-dot (interpreter only)"),
  map: never("map (calls a computation per element; interpreter only)"),
  scan: never("scan (a loop; interpreter only)"),
  "ragged-all-to-all": never("ragged-all-to-all (a collective; interpreter only)"),
  "collective-broadcast": never("collective-broadcast (a collective; interpreter only)"),
  "add-dependency": never("add-dependency (an ordering on a token; interpreter only)"),
  "opt-barrier": never("opt-barrier (an ordering; interpreter only)"),
  send: never("send (a transfer; no backend runs it)"),
  "send-done": never("send-done (a transfer; no backend runs it)"),
  recv: never("recv (a transfer; no backend runs it)"),
  "recv-done": never("recv-done (a transfer; no backend runs it)"),
  infeed: never("infeed (a host transfer; no backend runs it)"),
  outfeed: never("outfeed (a host transfer; no backend runs it)"),
  "copy-start": never("copy-start (an asynchronous copy; interpreter only)"),
  "copy-done": never("copy-done (an asynchronous copy; interpreter only)"),
  "reduce-precision": never("reduce-precision (interpreter only)"),
  rng: never("rng (random numbers; no backend runs it)"),
  "rng-bit-generator": never("rng-bit-generator (random numbers; no backend runs it)"),
  abs: cheap,
  negate: cheap,
  sign: cheap,
  exponential: costly,
  "exponential-minus-one": costly,
  log: costly,
  "log-plus-one": costly,
  sqrt: costly,
  rsqrt: costly,
  cbrt: costly,
  tanh: costly,
  logistic: costly,
  sine: costly,
  cosine: costly,
  tan: costly,
  erf: costly,
  floor: cheap,
  ceil: cheap,
  "round-nearest-afz": cheap,
  "round-nearest-even": cheap,
  "is-finite": cheap,
  not: cheap,
  copy: cheap,
  convert: cheap,
  // Not in the contract's kLoop list: a width-changing bitcast changes the index space.
  "bitcast-convert": never("a bitcast-convert (reinterprets bytes; not a kLoop op)"),
  add: cheap,
  subtract: cheap,
  multiply: cheap,
  divide: costly,
  remainder: costly,
  power: costly,
  maximum: cheap,
  minimum: cheap,
  atan2: costly,
  and: cheap,
  or: cheap,
  xor: cheap,
  "shift-left": cheap,
  "shift-right-arithmetic": cheap,
  "shift-right-logical": cheap,
  compare: cheap,
  select: cheap,
  clamp: cheap,
  broadcast: cheap,
  reshape: cheap,
  bitcast: never("a bitcast (layout reinterpretation; interpreter only)"),
  transpose: cheap,
  slice: cheap,
  "dynamic-slice": cheap,
  // It updates its operand in place (buffers.ts); fusing it would force a copy of the operand.
  "dynamic-update-slice": never("a dynamic-update-slice (kept out so it can update in place)"),
  concatenate: cheap,
  pad: cheap,
  reverse: cheap,
  dot: { role: "contraction" },
  convolution: { role: "contraction" },
  reduce: { role: "reduce" },
  "reduce-window": never("a reduce-window (no fusion kind covers windows)"),
  gather: never("a gather (not a kLoop op in the fusion contract)"),
  scatter: never("a scatter (not fusible)"),
  sort: never("a sort (not fusible)"),
  tuple: never("a tuple (fusions have one array result)"),
  "get-tuple-element": never("a get-tuple-element (fusions take arrays)"),
  fusion: never("a fusion"),
  call: control,
  while: control,
  conditional: control,
  "get-dimension-size": never("a get-dimension-size (reads runtime sizes)"),
  "set-dimension-size": never("a set-dimension-size (changes runtime sizes)"),
  "custom-call": never("a custom-call (opaque to the compiler)"),
} satisfies { [K in Opcode]: FusionRole };

/** Constants up to this many elements are copied into fusions; larger ones stay operands. */
export const SMALL_CONSTANT_ELEMENTS = 64;
/** A fusion never grows beyond this many instructions (keeps generated kernels reasonable). */
export const MAX_FUSION_SIZE = 256;

export function fusionRole(op: Opcode): FusionRole {
  return FUSION_ROLES[op];
}

export function isLoopFusion(i: Instruction): boolean {
  return i.opcode === "fusion" && i.attrs.fusionKind === "kLoop";
}

/** True for ops that cost much more than a load and an add per element (XLA's IsExpensive). */
export function isExpensive(i: Instruction): boolean {
  if (isLoopFusion(i)) {
    const body = i.called[0];
    return body !== undefined && body.instructions.some(isExpensive);
  }
  const r = FUSION_ROLES[i.opcode];
  return r.role === "loop" ? r.expensive : r.role === "reduce" || r.role === "contraction";
}

export function isSmallConstant(i: Instruction): boolean {
  return i.opcode === "constant" && isArray(i.shape) &&
    elementCount(i.shape) <= SMALL_CONSTANT_ELEMENTS;
}

/**
 * Free to duplicate anywhere: a small constant, an iota or a broadcast. Inside a kernel each is
 * index arithmetic (plus one load for a broadcast), so copying it into every consumer costs
 * nothing and saves writing it out.
 */
export function isFree(i: Instruction): boolean {
  return isSmallConstant(i) || i.opcode === "iota" || i.opcode === "broadcast";
}

/** Values a duplicated cheap op may read: then duplicating it adds one cheap op per element. */
function isLeafLike(i: Instruction): boolean {
  return i.opcode === "parameter" || isFree(i);
}

/**
 * May `p`, which has users outside the fusion, be copied into it? Only free ops and cheap
 * elementwise/movement ops on parameters, constants and broadcasts (XLA's "don't duplicate
 * expensive work" heuristic, kept strict so copies never cascade).
 */
export function duplicationDecision(p: Instruction, outsideUsers: number): Decision {
  if (isFree(p)) return YES;
  const users = `${name(p)} has ${p.users.length + (p.isRoot ? 1 : 0)} users`;
  if (isExpensive(p)) return no(`${users} and is expensive`);
  const r = FUSION_ROLES[p.opcode];
  if (r.role !== "loop" || p.opcode === "fusion") {
    return no(`${users} and is a ${p.opcode}, which is never duplicated`);
  }
  const deep = p.operands.find((o) => !isLeafLike(o));
  if (deep !== undefined) {
    return no(
      `${users} (${outsideUsers} outside this fusion) and reads ${name(deep)}, which is not a ` +
        `parameter, constant, iota or broadcast, so a copy would recompute more than one op`,
    );
  }
  return YES;
}

export function name(i: Instruction): string {
  return `%${i.name}`;
}

function shapeText(i: Instruction): string {
  return shapeToString(i.shape, false);
}

function arr(i: Instruction): ArrayShape | undefined {
  return isArray(i.shape) ? i.shape : undefined;
}

function count(i: Instruction): number {
  const s = arr(i);
  return s ? elementCount(s) : 1;
}

/** The dims of `s` that are not 1, in order (what a degenerate reshape preserves). */
function nonUnitDims(dims: readonly number[]): number[] {
  return dims.filter((d) => d !== 1);
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The candidate fusion as validateCluster sees it. */
export interface ClusterView {
  readonly root: Instruction;
  readonly members: ReadonlySet<Instruction>;
  /** Members that are copied in; the original stays for users outside the fusion. */
  readonly dup: ReadonlySet<Instruction>;
  /** Position of an instruction in its computation (members are sorted by it). */
  position(i: Instruction): number;
}

export interface ValidateOptions {
  /**
   * While a cluster is still growing upward, an expensive value behind a broadcast may yet turn
   * out to be a per-row value of a reduction (its reduce not added yet): such members (those in
   * this set, which have a reduce upstream) are not held to the recompute rule until the end.
   */
  deferReuseFor?: { has(i: Instruction): boolean };
}

/** The fusion kind of a set of members: kOutput with a dot/conv, kInput with a reduce. */
export function clusterKind(members: Iterable<Instruction>): FusionKind {
  let kind: FusionKind = "kLoop";
  for (const m of members) {
    const r = FUSION_ROLES[m.opcode].role;
    if (r === "contraction") return "kOutput";
    if (r === "reduce") kind = "kInput";
  }
  return kind;
}

type Space = "free" | "row" | "reduced";

/**
 * Checks that the members form one kernel the fusion contract allows. Every member must reach
 * the root through members (the grower guarantees it); a non-duplicated member's users are all
 * members.
 */
export function validateCluster(c: ClusterView, opts: ValidateOptions = {}): Decision {
  const members = [...c.members].sort((a, b) => c.position(a) - c.position(b));
  if (members.length > MAX_FUSION_SIZE) {
    return no(`the fusion would have ${members.length} instructions (limit ${MAX_FUSION_SIZE})`);
  }
  const isMember = (i: Instruction) => c.members.has(i);
  const contractions = members.filter((m) => FUSION_ROLES[m.opcode].role === "contraction");
  const reduces = members.filter((m) => m.opcode === "reduce");
  if (contractions.length > 1) {
    return no(
      `a fusion holds one dot or convolution; it would hold ${contractions.map(name).join(", ")}`,
    );
  }
  if (contractions.length === 1 && reduces.length > 0) {
    return no(
      `a fusion cannot hold both ${name(contractions[0]!)} and the reduction ` +
        `${name(reduces[0]!)}`,
    );
  }
  for (const m of members) {
    if (m.opcode === "dynamic-slice") {
      const inner = m.operands.find(isMember);
      if (inner) return no(`operands of the dynamic-slice ${name(m)} must stay fusion parameters`);
    }
    // Inlined, a loop fusion's dynamic-slice would read whatever feeds the fusion.
    const body = m.opcode === "fusion" ? m.called[0] : undefined;
    if (body?.instructions.some((i) => i.opcode === "dynamic-slice") &&
      m.operands.some(isMember)) {
      return no(`${name(m)} holds a dynamic-slice, so its operands must stay fusion parameters`);
    }
    if (m.opcode === "reduce") {
      const n = m.operands.length / 2;
      const bad = m.operands.slice(n).find((o) => isMember(o) && o.opcode !== "constant");
      if (bad) return no(`the init value of ${name(m)} must be a constant or a fusion parameter`);
    }
  }
  let space = new Map<Instruction, Space>();
  if (reduces.length > 0) {
    const r = reductionSpaces(members, reduces, isMember, c.root);
    if (!r.ok) return r.decision;
    space = r.space;
  }
  if (contractions.length === 1) {
    const d = checkOutputFusion(members, contractions[0]!, isMember);
    if (!d.ok) return d;
  }
  return checkRecompute(c, members, space, reduces, opts);
}

/**
 * kInput: all reduces share one row shape R and reduced dims; a value computed from a reduce
 * is a per-row value ("reduced", dims R without the reduced dims, up to size-1 dims) or, after
 * a broadcast back along the kept dims, a row value ("row", dims R) combined elementwise.
 */
function reductionSpaces(
  members: readonly Instruction[],
  reduces: readonly Instruction[],
  isMember: (i: Instruction) => boolean,
  root: Instruction,
): { ok: true; space: Map<Instruction, Space> } | { ok: false; decision: Decision } {
  const fail = (why: string) => ({ ok: false as const, decision: no(why) });
  const first = reduces[0]!;
  for (const r of reduces) {
    if (r.operands.length !== 2 || !isArray(r.shape)) {
      return fail(`${name(r)} is a variadic reduce (a reduction fusion has array reduces)`);
    }
  }
  const row = arr(first.operand(0))!;
  const dims = [...(first.attrs.dimensions ?? [])].sort((a, b) => a - b);
  const kept = row.dims.map((_, i) => i).filter((i) => !dims.includes(i));
  const keptSizes = nonUnitDims(kept.map((k) => row.dims[k]!));
  const keptNonUnit = kept.filter((k) => row.dims[k] !== 1);
  for (const r of reduces.slice(1)) {
    const s = arr(r.operand(0))!;
    const d = [...(r.attrs.dimensions ?? [])].sort((a, b) => a - b);
    if (!sameDims(s, row) || !sameList(d, dims)) {
      return fail(
        `${name(r)} reduces dims {${d}} of ${shapeText(r.operand(0))} but ${name(first)} ` +
          `reduces dims {${dims}} of ${shapeText(first.operand(0))}; a reduction fusion ` +
          `reduces one row shape`,
      );
    }
  }
  const rowText = shapeToString(row, false);
  const space = new Map<Instruction, Space>();
  for (const m of members) {
    const deps = m.operands.filter((o) => isMember(o) && space.get(o) !== "free");
    if (m.opcode === "reduce") {
      if (space.get(m.operand(0)) === "reduced") {
        return fail(`${name(m)} would reduce a per-row reduce result again`);
      }
      space.set(m, "reduced");
      continue;
    }
    if (deps.length === 0) {
      space.set(m, "free");
      continue;
    }
    const s = arr(m)!;
    const from = new Set(deps.map((o) => space.get(o)!));
    if (from.size > 1) {
      return fail(`${name(m)} mixes per-row reduce results with row values`);
    }
    const src = [...from][0]!;
    const isReducedShape = sameList(nonUnitDims(s.dims), keptSizes);
    if (OPCODE_INFO[m.opcode].elementwise) {
      if (src === "row" && !sameDims(s, row)) {
        return fail(`${name(m)} has shape ${shapeText(m)}; row values must be ${rowText}`);
      }
      if (src === "reduced" && !isReducedShape) {
        return fail(`${name(m)} has shape ${shapeText(m)}; it is not a per-row reduce result`);
      }
      space.set(m, src);
    } else if (m.opcode === "reshape" && src === "reduced" && isReducedShape) {
      space.set(m, "reduced");
    } else if (m.opcode === "broadcast" && src === "reduced") {
      const map = m.attrs.dimensions ?? [];
      const opDims = arr(m.operand(0))!.dims;
      const mapped = map.filter((_, i) => opDims[i] !== 1);
      if (!sameDims(s, row) || !sameList(mapped, keptNonUnit)) {
        return fail(
          `${name(m)} broadcasts a reduce result to ${shapeText(m)} with dimensions={${map}}; ` +
            `only a broadcast back to the row ${rowText} along the kept dims {${kept}} fuses`,
        );
      }
      space.set(m, "row");
    } else {
      const what = src === "row" ? "row value" : "reduce result";
      return fail(
        `${name(m)} (${m.opcode}) would consume a ${what} inside a reduction fusion; only ` +
          `elementwise ops and broadcasts back to the row may`,
      );
    }
  }
  const reduced = arr(first)!;
  if (space.get(root) === "reduced" && !sameDims(arr(root)!, reduced)) {
    // The contract's kInput root is row-shaped or reduce-shaped; a keepdim reshape stays out.
    return fail(
      `the root ${name(root)} has shape ${shapeText(root)}; a reduction fusion returns ` +
        `${rowText} or ${shapeToString(reduced, false)}`,
    );
  }
  return { ok: true, space };
}

/** kOutput: the dot/conv reads parameters, transposes or broadcasts; an elementwise epilogue. */
function checkOutputFusion(
  members: readonly Instruction[],
  hero: Instruction,
  isMember: (i: Instruction) => boolean,
): Decision {
  for (const o of hero.operands) {
    if (!isMember(o)) continue;
    if (o.opcode !== "transpose" && o.opcode !== "broadcast") {
      return no(`${name(hero)} takes only parameters, transposes or broadcasts as operands`);
    }
    if (o.operands.some(isMember)) {
      return no(`the operand of ${name(o)} (feeding ${name(hero)}) must stay a fusion parameter`);
    }
  }
  const dep = new Set<Instruction>([hero]);
  const heroShape = arr(hero)!;
  for (const m of members) {
    if (m === hero || !m.operands.some((o) => dep.has(o))) continue;
    dep.add(m);
    if (!OPCODE_INFO[m.opcode].elementwise) {
      return no(`${name(m)} (${m.opcode}) is not elementwise, so it cannot be an epilogue of ` +
        `${name(hero)}`);
    }
    if (!sameDims(arr(m)!, heroShape)) {
      return no(`the epilogue op ${name(m)} has shape ${shapeText(m)}, not the shape of ` +
        `${name(hero)} ${shapeText(hero)}`);
    }
  }
  return YES;
}

/**
 * How many times each element of member `m` is computed per output element: the largest
 * product of expansions along its paths to the root through members (`reuse` holds the
 * members downstream of it). A per-row value (`perRow`) is computed once per row, so
 * broadcasting it back along the row costs nothing.
 */
function reuseFactor(
  c: ClusterView,
  m: Instruction,
  reuse: ReadonlyMap<Instruction, number>,
  perRow: boolean,
): number {
  let f = m === c.root ? 1 : 0;
  for (const u of m.users) {
    if (!c.members.has(u)) continue;
    let edge = 1;
    const spreads = u.opcode === "broadcast" || OPCODE_INFO[u.opcode].elementwise ||
      u.opcode === "fusion";
    if (spreads && !(perRow && u.opcode === "broadcast")) {
      edge = Math.max(1, count(u) / Math.max(1, count(m)));
    }
    f = Math.max(f, (reuse.get(u) ?? 1) * edge);
  }
  return f;
}

function recomputed(m: Instruction, f: number): Decision {
  return no(
    `${name(m)} is expensive and would be recomputed ${f} times per element behind a broadcast`,
  );
}

/** True for the reduce or dot/convolution a kInput or kOutput fusion is built around. */
export function isHero(i: Instruction): boolean {
  const r = FUSION_ROLES[i.opcode].role;
  return r === "reduce" || r === "contraction";
}

/**
 * validateCluster for the common case, in time proportional to `p`'s uses: `p`, not a hero,
 * joins a cluster that has no hero (so every value is free and nothing structural changes).
 * `reuse` holds the members' reuse factors; the result gives p's.
 */
export function validateLoopAddition(
  c: ClusterView,
  p: Instruction,
  reuse: ReadonlyMap<Instruction, number>,
  opts: ValidateOptions = {},
): { decision: Decision; reuse: number } {
  const size = c.members.size;
  if (size > MAX_FUSION_SIZE) {
    return {
      decision: no(`the fusion would have ${size} instructions (limit ${MAX_FUSION_SIZE})`),
      reuse: 1,
    };
  }
  const isMember = (i: Instruction) => c.members.has(i) && i !== p;
  for (const m of [p, ...p.users.filter(isMember)]) {
    const body = m.opcode === "fusion" ? m.called[0] : undefined;
    const sliced = m.opcode === "dynamic-slice" ||
      body?.instructions.some((i) => i.opcode === "dynamic-slice") === true;
    if (sliced && m.operands.some((o) => c.members.has(o))) {
      const why = m.opcode === "fusion"
        ? `${name(m)} holds a dynamic-slice, so its operands must stay fusion parameters`
        : `operands of the dynamic-slice ${name(m)} must stay fusion parameters`;
      return { decision: no(why), reuse: 1 };
    }
  }
  const f = reuseFactor(c, p, reuse, false);
  if (f > 1 && isExpensive(p) && !opts.deferReuseFor?.has(p)) {
    return { decision: recomputed(p, f), reuse: f };
  }
  return { decision: YES, reuse: f };
}

/**
 * No expensive value is recomputed per element of an expanding broadcast (XLA's
 * ReusesOperandElements check), and no duplicated op is copied into a reduction's input.
 */
function checkRecompute(
  c: ClusterView,
  members: readonly Instruction[],
  space: ReadonlyMap<Instruction, Space>,
  reduces: readonly Instruction[],
  opts: ValidateOptions,
): Decision {
  const reuse = new Map<Instruction, number>();
  for (let k = members.length - 1; k >= 0; k--) {
    const m = members[k]!;
    const f = reuseFactor(c, m, reuse, space.get(m) === "reduced");
    reuse.set(m, f);
    if (f > 1 && isExpensive(m) && !opts.deferReuseFor?.has(m)) return recomputed(m, f);
  }
  if (reduces.length > 0) {
    for (const d of c.dup) {
      if (isFree(d)) continue;
      const hit = reachesReduce(d, c.members);
      if (hit) return no(`${name(d)} would be duplicated into the input of ${name(hit)}`);
    }
  }
  return YES;
}

function reachesReduce(from: Instruction, members: ReadonlySet<Instruction>): Instruction | null {
  const stack = [from];
  const seen = new Set<Instruction>();
  while (stack.length > 0) {
    const i = stack.pop()!;
    for (const u of i.users) {
      if (!members.has(u) || seen.has(u)) continue;
      if (u.opcode === "reduce") return u;
      seen.add(u);
      stack.push(u);
    }
  }
  return null;
}
