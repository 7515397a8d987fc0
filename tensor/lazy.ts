// Lazy mode (defer and fuse): a DispatchMode that records each op as a node of a pending graph
// instead of running it, and a Realizer that, when a value is observed (`item`, `toArray`,
// `data`, `toString`), lowers everything pending that the value needs into ONE IR module,
// compiles it through runtime/compile.ts (the optimization pipeline, so the graph is fused, and
// the program cache keyed by fingerprint) and runs it. Recording validates the op at once, by
// lowering it on parameters of its operands' shapes (cached per op, dtypes, shapes and
// attributes), so a bad op fails where it is written, naming the op, and every node knows its
// result dtype and shape without running. Concrete tensors and JS scalars enter a graph as
// parameters, never constants, so the same step on new data (or a new scalar value) is the
// same program. Which nodes a program returns is deterministic, never a matter of garbage
// collection: the observed tensor, plus every still-pending tensor its lazy() scope returned
// (XLA's "sync the live tensors", with the scope's return value as the definition of live).
// The pending ops recorded since the last cut form the current region, and the region is cut
// (realized as one program) where a loop's body ends: when its opening ops, by a size-free
// key, are recorded again (a repeated subsequence), so every iteration of a loop that
// observes nothing is the same cached program; never between two ops of one top-level
// nn.Module call (tensor/module_calls.ts: a model's identical blocks are not the loop, the
// decoding or training step that calls the model is); also at markStep(), when the region
// holds maxOps ops, when something is observed, when realizeAll asks, and when a chain of
// pending ops grows deeper than maxDepth; KILN_LOGS=lazy says where each cut is and why. A
// computation that recurs with other sizes (a growing KV cache) runs one program per bucket of
// its size, padded as compile()'s are (tensor/lazy_buckets.ts); one that cannot be bucketed
// runs its size-varying ops eagerly between programs of the rest. A structural key of the
// pending graph (lowering keys as numbers, and wiring) remembers the executable, so a loop that
// repeats a step skips lowering and fingerprinting too. docs/runtime.md describes the
// semantics for users.

import { ModuleBuilder } from "../ir/builder.ts";
import type { EvalValue } from "../ir/evaluate.ts";
import { Literal, type LiteralData } from "../ir/literal.ts";
import type { Instruction, Module } from "../ir/module.ts";
import { arrayShape } from "../ir/shape.ts";
import { type PipelineOptions, runPadded } from "../passes/index.ts";
import {
  compileKeyOptions,
  compileModule,
  type CompileResult,
  getBackend,
  type Executable,
  interpreterBackend,
  noteExecutableHit,
  type ProgramCache,
  single,
  UnsupportedError,
} from "../runtime/index.ts";
import { log, logEnabled } from "../util/log.ts";
import { baseMessage, locateHere } from "../util/user_frame.ts";
import {
  type Attrs,
  currentMode,
  type DispatchMode,
  eagerBackendName,
  eagerMode,
  type Lowering,
  lowerOp,
  loweringKey,
  type Operand,
  operandLiteral,
  operandParameter,
  setMode,
  tensorFromLiteral,
  withMode,
} from "./dispatch.ts";
import { type DType, type Scalar, type Storage, toElementType } from "./dtype.ts";
import {
  collectIndexChecks,
  type IndexCheck,
  raiseIndexErrors,
  RESULTS_PER_CHECK,
} from "./index_checks.ts";
import { clearBucketFamilies, serveFromBucket } from "./lazy_buckets.ts";
import { dimsOf, dtypeOf } from "./lower.ts";
import { moduleCalls, onTopLevelReturn } from "./module_calls.ts";
import { ConcreteImpl, registerRealizer, Tensor, type TensorImpl } from "./tensor.ts";

export interface LazyOptions {
  /**
   * The backend graphs compile for; default: the eager backend (setEagerBackend), else the
   * default backend. A backend that declines a graph (UnsupportedError) leaves it to the
   * interpreter.
   */
  backend?: string;
  /**
   * The program cache (default: the process-wide one, read at compile time); false compiles
   * every graph anew and skips the graph memo too.
   */
  cache?: ProgramCache | false;
  /** Optimization pipeline options (verify, disable, dumpDir). */
  pipeline?: PipelineOptions;
  /**
   * A pending chain deeper than this is realized before more is recorded on it (default 500),
   * so a loop that never observes anything does not grow one unbounded program.
   */
  maxDepth?: number;
  /**
   * Check index values as eager mode does (default true; tensor/index_checks.ts): an
   * out-of-range index raises eager's OpError when the graph is realized. false keeps XLA's
   * clamping.
   */
  checkIndices?: boolean;
  /**
   * Cut the pending region where its opening ops recur (a loop's next iteration), so each
   * iteration is one cached program (default true). False keeps one program per observation
   * (a whole forward pass, say), bounded only by maxOps and maxDepth.
   */
  cutRepeats?: boolean;
  /** The pending region is realized when it holds this many ops (default 20000). */
  maxOps?: number;
}

const DEFAULT_MAX_DEPTH = 500;
const DEFAULT_MAX_OPS = 20_000;
/** How many opening ops of a region must recur, in order, to count as its next iteration. */
const REPEAT_SPAN = 8;
/** A region shorter than this is not cut at a repeat (a tiny loop body joins the next one). */
const MIN_REPEAT_OPS = 16;

// ---- The pending graph ----------------------------------------------------------------------

/** What a node takes as an input: a pending result, a concrete value, or a JS scalar. */
type LazyInput = LazyImpl | ConcreteImpl | Scalar;

interface NodeType {
  readonly dtype: DType;
  readonly shape: readonly number[];
}

interface LazyNode {
  /** Creation order: inputs always have smaller ids, so sorting by id is a topological order. */
  readonly id: number;
  readonly op: Lowering;
  /** Emptied once the node is realized, so what it was computed from can be collected. */
  inputs: readonly LazyInput[];
  readonly attrs: Attrs;
  readonly key: string;
  /** The key's number (Signature.id): what graph keys are made of. */
  readonly keyId: number;
  readonly outputs: readonly NodeType[];
  readonly tuple: boolean;
  readonly scope: LazyScope;
  /** The longest chain of pending nodes ending here (recounted when a cut realizes some). */
  depth: number;
  /** The op and its operands' kinds, dtypes and ranks, but no sizes: what repeats compare. */
  readonly shapeFree: number;
  /**
   * The top-level nn.Module call (tensor/module_calls.ts) the op was recorded in, or -1 when
   * no module's forward was running: repeat cuts fall between calls, never inside one.
   */
  readonly call: number;
  /** Returned by a top-level module call: live, so a cut that computes it returns it. */
  escaped: boolean;
  /** The last plan that made this node a step (planOf's stamp) and its step there. */
  stamp: number;
  step: number;
  values: ConcreteImpl[] | undefined;
  /**
   * Set when a cut computed this node inside a program without returning it: that program's
   * body key and the node's step in it, so a later use can teach the cut to return it.
   */
  dropped?: { readonly body: string; readonly cut: number };
  /** With `dropped`: the node's step in that program. */
  droppedStep: number;
  /** The realizeStamp of the last program that computed it (returned or not). */
  realized: number;
}

/** A lazy tensor's value: output `index` of a pending node (then its computed value). */
export class LazyImpl implements TensorImpl {
  readonly kind = "lazy";
  readonly node: LazyNode;
  readonly index: number;
  readonly dtype: DType;
  readonly shape: readonly number[];

  constructor(node: LazyNode, index: number) {
    const t = node.outputs[index]!;
    this.node = node;
    this.index = index;
    this.dtype = t.dtype;
    this.shape = t.shape;
  }

  /** The computed value, once the node has been realized. */
  get value(): ConcreteImpl | undefined {
    return this.node.values?.[this.index];
  }
}

/** One lazy() call (or the global setLazy switch): options, and the tensors it returned. */
class LazyScope {
  readonly options: LazyOptions;
  /** Set when the scope's function returns; pending ones join any program of this scope. */
  outputs: LazyImpl[] = [];

  constructor(options: LazyOptions) {
    this.options = options;
  }
}

let nextNodeId = 0;
let nextSignatureId = 0;

// ---- Statistics -----------------------------------------------------------------------------

export interface LazyStats {
  /** Ops recorded into pending graphs. */
  readonly opsRecorded: number;
  /** Programs run to realize pending tensors. */
  readonly graphs: number;
  /** Of those, the ones compiled now (a miss in the graph memo and in the program cache). */
  readonly compiled: number;
  /** Of those, the ones whose executable was cached (graph memo, memory or disk). */
  readonly cacheHits: number;
  /** Op nodes computed, over all programs. */
  readonly nodesRealized: number;
  /** Programs run because a pending chain grew deeper than maxDepth. */
  readonly depthCuts: number;
  /** Ops a cut ran eagerly because their sizes change each time the computation repeats. */
  readonly eagerOps: number;
  /** Programs run because the region's opening ops recurred (a loop's next iteration). */
  readonly repeatCuts: number;
  /** Programs run because the region reached maxOps. */
  readonly sizeCuts: number;
  /** Programs run by markStep(). */
  readonly stepCuts: number;
  /** Op nodes per program: the last one's, the mean and the largest. */
  readonly opsPerGraph: { readonly last: number; readonly mean: number; readonly max: number };
}

const counters = {
  opsRecorded: 0,
  graphs: 0,
  compiled: 0,
  cacheHits: 0,
  nodesRealized: 0,
  depthCuts: 0,
  eagerOps: 0,
  repeatCuts: 0,
  sizeCuts: 0,
  stepCuts: 0,
  lastOps: 0,
  maxOps: 0,
};

export function lazyStats(): LazyStats {
  const c = counters;
  return {
    opsRecorded: c.opsRecorded,
    graphs: c.graphs,
    compiled: c.compiled,
    cacheHits: c.cacheHits,
    nodesRealized: c.nodesRealized,
    depthCuts: c.depthCuts,
    eagerOps: c.eagerOps,
    repeatCuts: c.repeatCuts,
    sizeCuts: c.sizeCuts,
    stepCuts: c.stepCuts,
    opsPerGraph: {
      last: c.lastOps,
      mean: c.graphs === 0 ? 0 : c.nodesRealized / c.graphs,
      max: c.maxOps,
    },
  };
}

/** Zeroes lazyStats (the graph memo and the program cache keep their entries). */
export function resetLazyStats(): void {
  for (const k of Object.keys(counters) as (keyof typeof counters)[]) counters[k] = 0;
}

/** The last program lazy mode ran, for tests and tools. */
export interface LazyGraphInfo {
  /** The program that ran; its module is the one after the optimization pipeline. */
  readonly executable: Executable;
  /** The module as the backend compiled it (after the optimization pipeline). */
  readonly module: Module;
  readonly backend: string;
  /**
   * Where the executable came from: the graph memo, a bucket's program compiled for an earlier
   * size (tensor/lazy_buckets.ts), the program cache, or compiled now.
   */
  readonly hit: "graph" | "bucket" | "memory" | "disk" | "miss";
  /** Op nodes computed, results returned, and parameters (concrete tensors and scalars). */
  readonly ops: number;
  readonly outputs: number;
  readonly parameters: number;
}

let lastGraph: LazyGraphInfo | undefined;

export function lastLazyGraph(): LazyGraphInfo | undefined {
  return lastGraph;
}

// ---- Recording ------------------------------------------------------------------------------

interface Signature {
  readonly outputs: readonly NodeType[];
  readonly tuple: boolean;
  /** A number for the lowering key (never reused), so graph keys are short. */
  readonly id: number;
  /** When the entry was last moved to the back of the map (LRU, amortized). */
  used: number;
  /** The op's size-free key's number (LazyNode.shapeFree). */
  readonly shapeFree: number;
}

const SIGNATURE_CAPACITY = 4096;
const signatures = new Map<string, Signature>();
let signatureClock = 0;

/**
 * The result types of `op` on these operands, found by lowering it on parameters (exactly the
 * eager one-op program), which also raises any error the op has on these inputs.
 */
function signatureOf(
  op: Lowering,
  operands: readonly Operand[],
  attrs: Attrs,
  key: string,
): Signature {
  const known = signatures.get(key);
  signatureClock++;
  if (known) {
    // Least recently used goes first, with a move only when the entry has aged a while: a
    // growing sequence adds keys every step, and must not evict the ones every step uses.
    if (signatureClock - known.used > SIGNATURE_CAPACITY / 4) {
      known.used = signatureClock;
      signatures.delete(key);
      signatures.set(key, known);
    }
    return known;
  }
  let result: Instruction | Instruction[] | undefined;
  const mb = new ModuleBuilder(op.name);
  mb.entry("main", (b) => {
    const params = operands.map((o) => operandParameter(b, o));
    result = lowerOp(b, op, params, attrs);
    return Array.isArray(result) ? b.tuple(result) : result;
  });
  const list = Array.isArray(result) ? result : [result!];
  const sig: Signature = {
    outputs: list.map((x) => ({ dtype: dtypeOf(x), shape: Object.freeze([...dimsOf(x)]) })),
    tuple: Array.isArray(result),
    id: nextSignatureId++,
    used: signatureClock,
    shapeFree: shapeFreeId(shapeFreeKey(op, operands)),
  };
  signatures.set(key, sig);
  if (signatures.size > SIGNATURE_CAPACITY) {
    const oldest = signatures.keys().next().value;
    if (oldest !== undefined) signatures.delete(oldest);
  }
  return sig;
}

/** A node input for an operand: scalars as they are, tensors by their impl. */
function inputOf(o: Operand): LazyInput {
  if (!(o instanceof Tensor)) return o;
  const impl = o.impl;
  if (impl instanceof ConcreteImpl) return impl;
  if (impl instanceof LazyImpl) return impl.value ?? impl;
  return o.realize(); // another mode's deferred value (a traced one, say)
}

function isPendingImpl(x: LazyInput): x is LazyImpl {
  return x instanceof LazyImpl && x.value === undefined;
}

class LazyMode implements DispatchMode {
  readonly name = "lazy";
  readonly scope: LazyScope;

  constructor(scope: LazyScope) {
    this.scope = scope;
  }

  run(op: Lowering, operands: readonly Operand[], attrs: Attrs): Tensor | Tensor[] {
    const key = loweringKey(op, operands, attrs);
    const sig = signatureOf(op, operands, attrs, key);
    const maxDepth = this.scope.options.maxDepth ?? DEFAULT_MAX_DEPTH;
    const inputs: LazyInput[] = [];
    let depth = 0;
    for (const o of operands) {
      let x = inputOf(o);
      if (x instanceof LazyImpl) {
        // inputOf hands out a computed lazy value as its concrete impl: this one is pending.
        const d = x.node.depth;
        if (d >= maxDepth) {
          counters.depthCuts++;
          log("lazy", () => `cut: a pending chain of depth ${d} feeds ${op.name}`);
          x = realizeImpl(x);
        } else if (d > depth) {
          depth = d;
        }
      }
      inputs.push(x);
    }
    const node: LazyNode = {
      id: nextNodeId++,
      op,
      inputs,
      attrs,
      key,
      keyId: sig.id,
      outputs: sig.outputs,
      tuple: sig.tuple,
      scope: this.scope,
      depth: depth + 1,
      shapeFree: sig.shapeFree,
      call: moduleCalls.depth === 0 ? -1 : moduleCalls.top,
      escaped: false,
      stamp: 0,
      step: 0,
      droppedStep: 0,
      realized: 0,
      values: undefined,
    };
    counters.opsRecorded++;
    region.push(node);
    const options = this.scope.options;
    if (options.cutRepeats !== false) cutAtRepeat();
    const maxOps = options.maxOps ?? DEFAULT_MAX_OPS;
    if (region.length >= maxOps) {
      counters.sizeCuts++;
      cutRegion(region.length, `the region reached maxOps (${maxOps})`);
    }
    if (!sig.tuple) return new Tensor(new LazyImpl(node, 0));
    return sig.outputs.map((_, i) => new Tensor(new LazyImpl(node, i)));
  }
}

function shapeFreeKey(op: Lowering, operands: readonly Operand[]): string {
  let key = op.name;
  for (const o of operands) {
    key += o instanceof Tensor ? `|${o.dtype}${o.shape.length}` : `|${typeof o}`;
  }
  return key;
}

// ---- Regions and cuts -----------------------------------------------------------------------

/**
 * The pending nodes recorded since the last cut, in recording order (some may have been
 * realized since by an observation; cuts skip those).
 */
let region: LazyNode[] = [];
/** Where in the region each window of REPEAT_SPAN size-free keys first starts. */
let windows = new Map<number, number>();
const shapeFreeIds = new Map<string, number>();

function shapeFreeId(key: string): number {
  let id = shapeFreeIds.get(key);
  if (id === undefined) shapeFreeIds.set(key, (id = shapeFreeIds.size));
  return id;
}

/** A hash of the window's size-free keys (a match is checked key by key: windowsMatch). */
function windowKey(at: number): number {
  let h = 0x811c9dc5;
  for (let i = at; i < at + REPEAT_SPAN; i++) h = Math.imul(h ^ region[i]!.shapeFree, 0x01000193);
  return h >>> 0;
}

function windowsMatch(a: number, b: number): boolean {
  for (let i = 0; i < REPEAT_SPAN; i++) {
    if (region[a + i]!.shapeFree !== region[b + i]!.shapeFree) return false;
  }
  return true;
}

/** Whether the region began at a repeat cut (so at the start of a loop's iteration). */
let regionAligned = false;
/** Whether a repeat inside a module call was logged for this region (once per region). */
let insideNoted = false;

/** Replaces the region (after a cut or an observation) and re-indexes its windows. */
function setRegion(nodes: LazyNode[], aligned = false): void {
  region = nodes;
  regionAligned = aligned;
  insideNoted = false;
  windows = new Map();
  for (let i = 0; i + REPEAT_SPAN <= region.length; i++) {
    const key = windowKey(i);
    if (!windows.has(key)) windows.set(key, i);
  }
}

/**
 * Cuts the region before its last REPEAT_SPAN ops when that window of size-free keys already
 * occurred in it: a loop's next iteration has begun, so what came before (with any preamble)
 * is one program, and every later iteration starts a region the same way.
 */
function cutAtRepeat(): void {
  const start = region.length - REPEAT_SPAN;
  if (start < 0) return;
  const key = windowKey(start);
  const first = windows.get(key);
  if (first === undefined) {
    windows.set(key, start);
    return;
  }
  if (!windowsMatch(first, start)) return; // a hash collision, not a repeat
  if (start < MIN_REPEAT_OPS) return;
  // A region that a repeat cut began starts an iteration: it is cut only where its own
  // opening recurs, so every region of the loop begins at the same op.
  if (regionAligned && first !== 0) return;
  // Never inside one top-level module call: the identical blocks of a model's forward look
  // like a loop's iterations too, but the loop (a decoding step, a training step) is what
  // calls the model, and cutting at its blocks would make a step several programs.
  const before = region[start - 1]!;
  if (before.call !== -1 && before.call === region[start]!.call) {
    if (!insideNoted) {
      insideNoted = true;
      log("lazy", () =>
        `not cut: ops ${start}.. repeat the ops at ${first}.. (${before.op.name}, ...) inside ` +
        "one module call (a model's repeated blocks); cuts fall between a model's calls");
    }
    return;
  }
  counters.repeatCuts++;
  cutRegion(start, () => {
    const names = region.slice(0, 3).map((x) => x.op.name);
    return (
      `ops ${start}.. of the region repeat the ${REPEAT_SPAN} ops at ${first}.. ` +
      `(${names.join(", ")}, ...): a loop's next iteration`
    );
  }, true);
}

/**
 * Realizes the region's first `k` ops as one program: its results are the nodes that nothing
 * in the region uses (a loop's carried state) and those the rest of the region uses. A node
 * used only later is recomputed by the program that needs it (correct, but worth a markStep
 * or a realizeAll where it matters). The rest of the region becomes the next region.
 */
function cutRegion(
  k: number,
  why: string | (() => string),
  repeat = false,
  extra: readonly LazyNode[] = [],
): void {
  const head = region.slice(0, k).filter((x) => x.values === undefined);
  const tail = region.slice(k);
  setRegion(tail, repeat);
  const inHead = new Set(head);
  // The ops kept counted the cut ones in their depth; they start the next chain.
  for (const x of tail) {
    let d = 0;
    for (const i of x.inputs) {
      if (isPendingImpl(i) && !inHead.has(i.node)) d = Math.max(d, i.node.depth);
    }
    x.depth = d + 1;
  }
  if (head.length === 0) return;
  const usedInHead = new Set<LazyNode>();
  const usedLater = new Set<LazyNode>();
  // Whether the head needs no pending node before it: then its ops are the program's steps
  // as they are, without a walk from the results (runCut).
  let closed = true;
  for (const x of head) {
    for (const i of x.inputs) {
      if (!isPendingImpl(i)) continue;
      if (inHead.has(i.node)) usedInHead.add(i.node);
      else closed = false;
    }
  }
  for (const x of tail) {
    for (const i of x.inputs) if (isPendingImpl(i) && inHead.has(i.node)) usedLater.add(i.node);
  }
  // Returned: what nothing in the region uses (a loop's carried state), what the ops after the
  // cut use, what a top-level module call returned (a model's outputs and caches) and `extra`.
  const wanted = extra.length > 0 ? new Set(extra) : undefined;
  const roots = head.filter(
    (x) => !usedInHead.has(x) || usedLater.has(x) || x.escaped || wanted?.has(x) === true,
  );
  const scopes: LazyScope[] = [];
  for (const x of head) if (!scopes.includes(x.scope)) scopes.push(x.scope);
  for (const s of scopes) {
    for (const o of s.outputs) if (o.value === undefined && inHead.has(o.node)) roots.push(o.node);
  }
  const reason = typeof why === "string" ? why : () => why();
  const options = head[0]!.scope.options;
  const describe = () => `cut: ${plural(head.length, "op")}: ${text(reason)}`;
  // A program the graph memo has, or a bucket's (when the computation recurs with its sizes on
  // a line, tensor/lazy_buckets.ts); else compiled for these sizes, or split as below.
  const steps = closed ? head : undefined;
  if (runCut(roots, options, describe, true, steps)) return;
  const varying = sizeVarying(head);
  if (varying.size === 0) {
    runCut(roots, options, describe, false, steps);
    return;
  }
  // Split where sizes vary from the last time this computation was cut: the ops between run
  // as programs whose shapes repeat (so cached), the size-varying ops run eagerly.
  log("lazy", () =>
    `cut: ${plural(head.length, "op")}: ${text(reason)}; ${plural(varying.size, "op")} ` +
    `changed sizes since the last time (${[...new Set([...varying].map((x) => x.op.name))]
      .join(", ")}) ` +
    "and run eagerly between programs of the rest",
  );
  const isRoot = new Set(roots);
  let segment: LazyNode[] = [];
  const flush = (at: number) => {
    if (segment.length === 0) return;
    const seg = new Set(segment);
    const after = new Set<LazyNode>();
    for (let i = at; i < head.length; i++) {
      for (const x of head[i]!.inputs) if (isPendingImpl(x) && seg.has(x.node)) after.add(x.node);
    }
    const segRoots = segment.filter((x) => isRoot.has(x) || after.has(x));
    const n = segment.length;
    segment = [];
    runCut(segRoots, options, () => `cut: a program of ${plural(n, "op")} of that region`);
  };
  for (const [i, node] of head.entries()) {
    if (!varying.has(node)) {
      segment.push(node);
      continue;
    }
    flush(i);
    runEagerly(node);
  }
  flush(head.length);
}

function text(why: string | (() => string)): string {
  return typeof why === "string" ? why : why();
}

/**
 * Realizes `roots` (what a cut must return) plus the results learned for this computation,
 * as one program, and marks what it computed without returning. With `servedOnly`, only from
 * a program the graph memo or a bucket has (false, and nothing run, otherwise).
 */
function runCut(
  roots: LazyNode[],
  options: LazyOptions,
  describe: () => string,
  servedOnly = false,
  steps?: readonly LazyNode[],
): boolean {
  const byId = (a: LazyNode, b: LazyNode) => a.id - b.id;
  let p = plan([...new Set(roots)].sort(byId), steps);
  // Whatever a cut of this computation returned before (at any sizes), this one returns too:
  // the iteration that ends a loop (observed, with nothing after it) returns what the others
  // did, so it is the same program; and what a later op needed from it is returned at once.
  let learned = learnedResults.get(p.shape);
  if (learned) {
    const have = new Set(roots);
    let more = false;
    for (const step of learned) {
      const node = p.steps[step];
      if (node !== undefined && !have.has(node)) {
        roots.push(node);
        have.add(node);
        more = true;
      }
    }
    if (more) p = withResults(p, [...have].sort(byId));
  } else {
    learnedResults.set(p.shape, (learned = new Set()));
  }
  let compiled: Compiled | undefined;
  if (servedOnly) {
    compiled = compilePlan(p, options, false);
    if (compiled === undefined) return false;
  }
  for (const r of p.results) learned.add(r.step);
  log("lazy", () => `${describe()} (${plural(p.results.length, "result")})`);
  realizePlan(p, options, compiled);
  const mark = { body: p.shape, cut: nextCutId++ };
  for (const [step, node] of p.steps.entries()) {
    if (node.values === undefined) {
      node.dropped = mark;
      node.droppedStep = step;
    }
  }
  if (learnedResults.size > MEMO_CAPACITY) {
    const oldest = learnedResults.keys().next().value;
    if (oldest !== undefined) learnedResults.delete(oldest);
  }
  return true;
}

/** Runs one node as eager mode would (its inputs are computed). */
function runEagerly(node: LazyNode): void {
  const operands: Operand[] = node.inputs.map((x) => {
    // A pending input is one an earlier cut computed without returning it.
    if (x instanceof LazyImpl) return new Tensor(x.value ?? realizeImpl(x));
    return x instanceof ConcreteImpl ? new Tensor(x) : x;
  });
  const out = eagerMode.run(node.op, operands, node.attrs);
  node.values = (Array.isArray(out) ? out : [out]).map((t) => t.realize());
  node.inputs = [];
  counters.eagerOps++;
}

/**
 * Per computation cut before (its nodes' size-free keys and wiring), each node's full key the
 * last time: when it repeats with other sizes (a growing sequence), the nodes whose sizes
 * changed since the last time run eagerly, so the rest stays cached programs.
 */
const cutShapes = new Map<string, { keys: string[] }>();

function sizeVarying(head: readonly LazyNode[]): Set<LazyNode> {
  const index = new Map<LazyNode, number>();
  let sf = "";
  for (const [i, node] of head.entries()) {
    index.set(node, i);
    sf += `${node.shapeFree}(`;
    for (const x of node.inputs) {
      const at = isPendingImpl(x) ? index.get(x.node) : undefined;
      sf += at === undefined ? "p," : `${at}.${(x as LazyImpl).index},`;
    }
    sf += ")";
  }
  const keys = head.map((x) => x.key);
  const known = cutShapes.get(sf);
  if (known === undefined) {
    cutShapes.set(sf, { keys });
    if (cutShapes.size > MEMO_CAPACITY) {
      const oldest = cutShapes.keys().next().value;
      if (oldest !== undefined) cutShapes.delete(oldest);
    }
    return new Set();
  }
  const varying = new Set<LazyNode>();
  for (const [i, k] of keys.entries()) if (k !== known.keys[i]) varying.add(head[i]!);
  known.keys = keys;
  return varying;
}

/** Notes that `user` needs `x`, which an earlier cut computed without returning it. */
function learnDropped(x: LazyNode, user: LazyNode): void {
  const d = x.dropped!;
  const step = x.droppedStep;
  let steps = learnedResults.get(d.body);
  if (!steps) learnedResults.set(d.body, (steps = new Set()));
  if (steps.has(step)) return;
  steps.add(step);
  log("lazy", () => `a cut computed ${x.op.name} (step ${step} of its program) without ` +
    `returning it, and ${user.op.name} needs it: computed now by a program of its own; later ` +
    "cuts of that program return it");
}

/**
 * Per program body (Plan.body) that a cut ran, the steps it computed without returning that a
 * later program needed: learned once, returned by every later cut of the same body.
 */
const learnedResults = new Map<string, Set<number>>();
let nextCutId = 0;

/**
 * Cuts the pending graph here (PyTorch/XLA's mark_step): everything recorded since the last cut
 * runs now as one program, so the next ops start a new one. A hint for a loop whose iterations
 * the repeat detection does not find (or should cut elsewhere); never needed for correct
 * values. A no-op when nothing is pending.
 */
export function markStep(): void {
  if (!region.some((x) => x.values === undefined)) {
    setRegion([]);
    return;
  }
  counters.stepCuts++;
  cutRegion(region.length, "markStep()");
}

// ---- Realizing ------------------------------------------------------------------------------

/** Where a step takes an input from: a parameter, or output `index` of an earlier step. */
type Ref = { readonly param: number } | { readonly step: number; readonly index: number };

/** More outputs than any op has (a step's outputs in Plan.refs). */
const MAX_OUTPUTS = 1 << 16;

interface Plan {
  readonly steps: readonly LazyNode[];
  /**
   * Where each step's inputs come from, flat: step s's are refs[refAt[s] .. refAt[s + 1]), each
   * a parameter k as -(k + 1) or output i of step t as t * MAX_OUTPUTS + i (no object per
   * input: most plans are memo hits and never read them).
   */
  readonly refs: readonly number[];
  readonly refAt: readonly number[];
  readonly params: readonly (ConcreteImpl | Scalar)[];
  /** Every output of every root node, in order. */
  readonly results: readonly { readonly step: number; readonly index: number }[];
  /** The graph's structure as text: equal keys build the same module. */
  readonly key: string;
  /** The key without the results: the computation, whatever it returns. */
  readonly body: string;
  /** The body without sizes (each step's size-free key and wiring): what cuts learn by. */
  readonly shape: string;
}

/** The root nodes of a program that must compute `requested`: see the file comment. */
function rootsFor(requested: readonly LazyImpl[]): LazyNode[] {
  const roots = new Set<LazyNode>();
  const scopes = new Set<LazyScope>();
  for (const r of requested) {
    if (r.value !== undefined) continue;
    roots.add(r.node);
    scopes.add(r.node.scope);
  }
  for (const s of scopes) {
    s.outputs = s.outputs.filter((o) => o.value === undefined);
    for (const o of s.outputs) roots.add(o.node);
  }
  return [...roots].sort((a, b) => a.id - b.id);
}

/**
 * The plan computing `roots` (sorted by id): their pending inputs, found by a walk, or `steps`
 * when the caller knows them (a cut's head that needs nothing pending before it; every step
 * is computed, needed by a root or not).
 */
function plan(roots: readonly LazyNode[], steps?: readonly LazyNode[]): Plan {
  return steps !== undefined ? planOf(steps, roots) : planOf(walk(roots), roots);
}

/** The pending nodes `roots` need, in id order (first computing dropped ones: below). */
function walk(roots: readonly LazyNode[]): LazyNode[] {
  const seen = new Set<LazyNode>(roots);
  const stack = [...roots];
  // Nodes an earlier cut computed without returning them: computed first, by a program of
  // their own, so that this program is the one later iterations run (with them as inputs).
  const dropped = new Set<LazyNode>();
  while (stack.length > 0) {
    const node = stack.pop()!;
    for (const x of node.inputs) {
      if (!isPendingImpl(x) || seen.has(x.node)) continue;
      const d = x.node.dropped;
      if (d !== undefined && node.dropped?.cut !== d.cut) {
        if (!dropped.has(x.node)) learnDropped(x.node, node);
        dropped.add(x.node);
        continue;
      }
      seen.add(x.node);
      stack.push(x.node);
    }
  }
  if (dropped.size > 0) {
    const first = [...dropped].sort((a, b) => a.id - b.id);
    realizeRoots(first, first[0]!.scope.options);
    return walk(roots);
  }
  return [...seen].sort((a, b) => a.id - b.id);
}

let planStamp = 0;

function planOf(steps: readonly LazyNode[], roots: readonly LazyNode[]): Plan {
  // Each step's index, stamped on the node (no map per plan).
  const stamp = ++planStamp;
  const params: (ConcreteImpl | Scalar)[] = [];
  const paramOf = new Map<ConcreteImpl, number>();
  const refs: number[] = [];
  const refAt: number[] = [];
  let key = "";
  let shape = "";
  for (const [s, node] of steps.entries()) {
    node.stamp = stamp;
    node.step = s;
    refAt.push(refs.length);
    let wiring = "";
    for (const x of node.inputs) {
      if (isPendingImpl(x)) {
        if (x.node.stamp !== stamp) throw new Error("lazy: internal: a step's input is not a step");
        refs.push(x.node.step * MAX_OUTPUTS + x.index);
        wiring += `s${x.node.step}.${x.index},`;
        continue;
      }
      const v = x instanceof LazyImpl ? x.value! : x;
      let k: number;
      if (v instanceof ConcreteImpl) {
        const known = paramOf.get(v);
        if (known === undefined) {
          k = params.length;
          params.push(v);
          paramOf.set(v, k);
        } else {
          k = known;
        }
      } else {
        // Scalars are never shared: equal values must not make a different graph.
        k = params.length;
        params.push(v);
      }
      refs.push(-(k + 1));
      wiring += `p${k},`;
    }
    key += `${node.keyId}(${wiring})`;
    shape += `${node.shapeFree}(${wiring})`;
  }
  refAt.push(refs.length);
  const p = { steps, refs, refAt, params, results: [], key, body: key, shape };
  return withResults(p, roots);
}

/** `p` returning every output of `roots` (which must be steps of it, sorted by id). */
function withResults(p: Plan, roots: readonly LazyNode[]): Plan {
  const results: { step: number; index: number }[] = [];
  let text = "";
  for (const root of roots) {
    const s = p.steps[root.step] === root ? root.step : p.steps.indexOf(root);
    if (s < 0) throw new Error("lazy: internal: a root is not a step of its plan");
    for (let i = 0; i < root.outputs.length; i++) {
      results.push({ step: s, index: i });
      text += `s${s}.${i},`;
    }
  }
  return { ...p, results, key: `${p.body}-> ${text}` };
}

function refText(r: Ref): string {
  return "param" in r ? `p${r.param}` : `s${r.step}.${r.index}`;
}

/**
 * The plan's module; with `dims` and `attrs`, at other sizes: each tensor parameter's dims and
 * each step's attributes (a bucket's top and bottom, tensor/lazy_buckets.ts).
 */
function buildModule(
  p: Plan,
  checkIndices: boolean,
  dims?: readonly (readonly number[] | undefined)[],
  attrs?: readonly Attrs[],
): Built {
  const mb = new ModuleBuilder("lazy");
  const checks = checkIndices ? collectIndexChecks(mb) : undefined;
  mb.entry("main", (b) => {
    const params = p.params.map((v, i) => {
      if (!(v instanceof ConcreteImpl)) return operandParameter(b, v);
      const d = dims?.[i];
      if (d === undefined) return operandParameter(b, new Tensor(v));
      return b.parameter(arrayShape(toElementType(v.dtype), d));
    });
    const values: Instruction[][] = [];
    for (const [s, node] of p.steps.entries()) {
      const inputs: Instruction[] = [];
      for (let j = p.refAt[s]!; j < p.refAt[s + 1]!; j++) {
        const r = p.refs[j]!;
        inputs.push(
          r < 0 ? params[-r - 1]! : values[Math.floor(r / MAX_OUTPUTS)]![r % MAX_OUTPUTS]!,
        );
      }
      const out = lowerOp(b, node.op, inputs, attrs?.[s] ?? node.attrs);
      values.push(Array.isArray(out) ? out : [out]);
    }
    const results = p.results.map((r) => values[r.step]![r.index]!);
    if (checks) results.push(...checks.outputs);
    return results.length === 1 ? results[0]! : b.tuple(results);
  });
  return { module: mb.build(), checks: checks?.checks ?? [] };
}

/** A graph's module and its index checks (whose results follow the plan's). */
interface Built {
  readonly module: Module;
  readonly checks: readonly IndexCheck[];
}

interface Compiled {
  readonly exe: Executable;
  readonly hit: LazyGraphInfo["hit"];
  readonly checks: readonly IndexCheck[];
  /** A bucket's program: the dynamic module runPadded pads the inputs for. */
  readonly padded?: Module;
}

const MEMO_CAPACITY = 1024;
interface MemoEntry {
  readonly exe: Executable;
  readonly checks: readonly IndexCheck[];
  readonly padded?: Module;
  /** memoClock when last moved to the back of the map (LRU, moved only once aged). */
  used: number;
}

let memoClock = 0;

const memo = new Map<string, MemoEntry>();

/** The memo key's prefix per options object: backend, pipeline options, index checks. */
const optionPrefixes = new WeakMap<LazyOptions, { backend: string; prefix: string }>();

function optionPrefix(options: LazyOptions): { backend: string; prefix: string } {
  const backend = getBackend(options.backend ?? eagerBackendName()).name;
  const known = optionPrefixes.get(options);
  if (known && known.backend === backend) return known;
  const compileOpts = { pipeline: options.pipeline, optimize: true };
  const checkIndices = options.checkIndices !== false;
  const r = {
    backend,
    prefix: `${backend}|${JSON.stringify(compileKeyOptions(compileOpts))}|` +
      `${checkIndices ? "" : "unchecked|"}`,
  };
  optionPrefixes.set(options, r);
  return r;
}

/**
 * The executable for a plan: the graph memo's, a bucket's program (when the computation recurs
 * with sizes on a line, tensor/lazy_buckets.ts), or compiled now; with `exact` false, undefined
 * instead of compiling the plan's own sizes.
 */
function compilePlan(p: Plan, options: LazyOptions, exact?: true): Compiled;
function compilePlan(p: Plan, options: LazyOptions, exact: boolean): Compiled | undefined;
function compilePlan(p: Plan, options: LazyOptions, exact = true): Compiled | undefined {
  const { backend, prefix } = optionPrefix(options);
  const useMemo = options.cache !== false;
  const compileOpts = { pipeline: options.pipeline, optimize: true };
  const checkIndices = options.checkIndices !== false;
  const memoKey = prefix + p.key;
  if (useMemo) {
    const known = memo.get(memoKey);
    memoClock++;
    if (known) {
      if (memoClock - known.used > MEMO_CAPACITY / 4) {
        known.used = memoClock;
        memo.delete(memoKey);
        memo.set(memoKey, known);
      }
      noteExecutableHit(known.exe, known.padded ? "shapeDynamic" : "memory");
      return { exe: known.exe, checks: known.checks, padded: known.padded, hit: "graph" };
    }
  }
  const origin = { kind: "lazy", source: describePlan(p) } as const;
  const cache = options.cache;
  const compile = (module: Module): CompileResult => {
    try {
      return compileModule(module, {
        ...compileOpts,
        origin,
        backend,
        ...(cache !== undefined && { cache }),
      });
    } catch (e) {
      if (!(e instanceof UnsupportedError) || backend === interpreterBackend.name) throw e;
      log("lazy", () => `graph falls back to the interpreter: ${e.message}`);
      return compileModule(module, {
        ...compileOpts,
        origin,
        backend: interpreterBackend.name,
        ...(cache !== undefined && { cache }),
      });
    }
  };
  const remember = (entry: MemoEntry) => {
    if (!useMemo) return;
    memo.set(memoKey, entry);
    if (memo.size > MEMO_CAPACITY) {
      const oldest = memo.keys().next().value;
      if (oldest !== undefined) memo.delete(oldest);
    }
  };
  if (useMemo) {
    const served = serveFromBucket({
      shape: `${prefix}${p.shape}-> ${p.results.map(refText).join(",")}`,
      paramDims: p.params.map((v) => (v instanceof ConcreteImpl ? v.shape : undefined)),
      steps: p.steps,
      build: (dims, attrs) => buildModule(p, checkIndices, dims, attrs),
      compile,
    });
    if (served !== undefined) {
      const { exe, module, checks } = served.program;
      if (served.hit === "bucket") noteExecutableHit(exe, "shapeDynamic");
      remember({ exe, checks, padded: module, used: memoClock });
      const hit = served.hit === "bucket" ? "bucket" : served.cacheHit ?? "miss";
      return { exe, checks, padded: module, hit };
    }
  }
  if (!exact) return undefined;
  const { module, checks } = buildModule(p, checkIndices);
  const r = compile(module);
  remember({ exe: r.executable, checks, used: memoClock });
  return { exe: r.executable, hit: r.hit, checks };
}

/** Names the ops of a plan for an error message (the first few, with counts). */
function describePlan(p: Plan): string {
  const counts = new Map<string, number>();
  for (const n of p.steps) counts.set(n.op.name, (counts.get(n.op.name) ?? 0) + 1);
  const parts = [...counts].map(([name, n]) => (n > 1 ? `${name} x${n}` : name));
  const shown = parts.length > 8 ? [...parts.slice(0, 8), "..."] : parts;
  return `a lazy graph of ${plural(p.steps.length, "op")} (${shown.join(", ")})`;
}

/** Computes every pending tensor in `requested` (and its scope's outputs) in one program. */
function realizeImpls(requested: readonly LazyImpl[], observed = false): void {
  if (observed && regionAligned) cutObserved(requested);
  const roots = rootsFor(requested);
  if (roots.length === 0) return;
  // The observed tensor's scope decides how the program is compiled.
  const first = requested.find((r) => r.value === undefined)!;
  realizeRoots(roots, first.node.scope.options);
}

/**
 * An observation of a value in a region that a repeat cut began (a loop's iteration, say the
 * last one of a generation, or one that ends by reading a token) runs the whole region as a
 * cut would, returning what a cut returns plus the observed values: so the iteration that
 * ends in an observation is the same program as the ones that ended at a repeat.
 */
function cutObserved(requested: readonly LazyImpl[]): void {
  const inRegion = new Set(region);
  const wanted = requested.filter((r) => r.value === undefined && inRegion.has(r.node));
  if (wanted.length === 0) return;
  // Only the scope's own loop: ops other scopes left pending are not this iteration's.
  const scope = wanted[0]!.node.scope;
  if (region.some((x) => x.scope !== scope)) return;
  cutRegion(region.length, () => `a value (${wanted[0]!.node.op.name}) is observed in a region ` +
    "a repeat cut began: the rest of the loop's iteration", false, wanted.map((r) => r.node));
}

/** Computes the outputs of `roots` (sorted by id) and what they need, in one program. */
function realizeRoots(roots: readonly LazyNode[], options: LazyOptions): void {
  realizePlan(plan(roots), options);
}

function realizePlan(p: Plan, options: LazyOptions, pre?: Compiled): void {
  const t0 = performance.now();
  let compiled: Compiled;
  let out: EvalValue;
  try {
    compiled = pre ?? compilePlan(p, options);
    const literals = p.params.map(paramLiteral);
    out = compiled.padded
      ? runPadded(compiled.exe, compiled.padded, literals)
      : compiled.exe.run(literals);
  } catch (e) {
    // The failed ops stay pending (observing one of them again runs them again), but leave the
    // region: a later cut of other ops must not take them along (with their scope's options).
    const failed = new Set(p.steps);
    if (region.some((x) => failed.has(x))) {
      const rest = region.filter((x) => !failed.has(x));
      setRegion(rest, rest.length > 0 && regionAligned);
    }
    const detail = e instanceof Error ? baseMessage(e) : String(e);
    // At the user's line that observed the value (the ops themselves were checked when called).
    throw locateHere(new Error(`${describePlan(p)} failed: ${detail}`, { cause: e }));
  }
  const n = p.results.length + RESULTS_PER_CHECK * compiled.checks.length;
  const list = n === 1 ? [single(out)] : tupleOf(out, n);
  // Out-of-range indices raise eager's error before any value is kept: reading the tensors
  // again runs the graph again (and raises again), it never hands out clamped data.
  raiseIndexErrors(compiled.checks, list.slice(p.results.length));
  for (const [k, r] of p.results.entries()) {
    const node = p.steps[r.step]!;
    const vs = node.values ?? (node.values = []);
    vs[r.index] = resultImpl(single(list[k]!), node.outputs[r.index]!);
  }
  const done = ++realizeStamp;
  for (const node of p.steps) {
    node.realized = done;
    if (node.values !== undefined) node.inputs = [];
  }
  // What this program computed, returned or not, leaves the region: only a node a later
  // program needs (and then recomputes) is pending still.
  if (region.length > 0 && region.some((x) => x.realized === done || x.values !== undefined)) {
    const rest = region.filter((x) => x.values === undefined && x.realized !== done);
    setRegion(rest, rest.length > 0 && regionAligned);
  }
  counters.graphs++;
  counters.nodesRealized += p.steps.length;
  counters.lastOps = p.steps.length;
  counters.maxOps = Math.max(counters.maxOps, p.steps.length);
  if (compiled.hit === "miss") counters.compiled++;
  else counters.cacheHits++;
  const exe = compiled.exe;
  lastGraph = {
    executable: exe,
    // A getter: reading the module of a program loaded from disk decodes it, which costs more
    // than the run itself for a large graph, so only tools that look at it pay.
    get module() {
      return exe.module;
    },
    backend: exe.backend,
    hit: compiled.hit,
    ops: p.steps.length,
    outputs: p.results.length,
    parameters: p.params.length,
  };
  if (logEnabled("lazy") || logEnabled("perf")) {
    const ms = (performance.now() - t0).toFixed(2);
    const text =
      `lazy graph: ${plural(p.steps.length, "op")}, ${plural(p.results.length, "output")}, ` +
      `${plural(p.params.length, "parameter")} on '${compiled.exe.backend}' ` +
      `(${compiled.hit}) in ${ms} ms`;
    log(logEnabled("lazy") ? "lazy" : "perf", text);
  }
}

let realizeStamp = 0;

/** A parameter's literal: a tensor's storage as it is (half types decoded), or a scalar. */
function paramLiteral(v: ConcreteImpl | Scalar): Literal {
  if (!(v instanceof ConcreteImpl)) return operandLiteral(v);
  if (v.dtype === "float16" || v.dtype === "bfloat16") return operandLiteral(new Tensor(v));
  return new Literal(toElementType(v.dtype), v.shape, v.storage as LiteralData);
}

/**
 * A result as a concrete impl: the program's literal as it is (its dims are the node's, which
 * recording inferred and the program was built from), half types encoded to their bits.
 */
function resultImpl(lit: Literal, t: NodeType): ConcreteImpl {
  if (t.dtype === "float16" || t.dtype === "bfloat16") return tensorFromLiteral(lit).realize();
  if (lit.dims.length !== t.shape.length || lit.dims.some((d, i) => d !== t.shape[i])) {
    throw new Error(`lazy graph: a result is [${lit.dims}], expected [${t.shape}]`);
  }
  return new ConcreteImpl(t.dtype, t.shape, lit.data as Storage, true);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function tupleOf(out: EvalValue, n: number): EvalValue[] {
  if (!Array.isArray(out) || out.length !== n) {
    throw new Error(`lazy graph: expected a tuple of ${n} results`);
  }
  return out;
}

function realizeImpl(impl: LazyImpl, observed = false): ConcreteImpl {
  if (impl.value === undefined) realizeImpls([impl], observed);
  return impl.value!;
}

registerRealizer("lazy", (impl) => {
  if (!(impl instanceof LazyImpl)) throw new Error(`a '${impl.kind}' impl is not a lazy one`);
  return realizeImpl(impl, true);
});

// What a top-level module call returns is live: a cut that computes it returns it.
onTopLevelReturn((result) => {
  if (region.length === 0) return;
  const outs: LazyImpl[] = [];
  lazyTensorsIn(result, outs, new Set(), 0);
  for (const o of outs) o.node.escaped = true;
});

// ---- The API --------------------------------------------------------------------------------

function lazyTensorsIn(value: unknown, out: LazyImpl[], seen: Set<object>, depth: number): void {
  if (value instanceof Tensor) {
    const impl = value.impl;
    if (impl instanceof LazyImpl && impl.value === undefined) out.push(impl);
    return;
  }
  if (typeof value !== "object" || value === null || depth > 8 || seen.has(value)) return;
  seen.add(value);
  if (Array.isArray(value)) {
    for (const v of value) lazyTensorsIn(v, out, seen, depth + 1);
    return;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    for (const v of Object.values(value)) lazyTensorsIn(v, out, seen, depth + 1);
  } else if (value instanceof Map) {
    for (const v of value.values()) lazyTensorsIn(v, out, seen, depth + 1);
  }
}

function isThenable(v: unknown): boolean {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as { then?: unknown }).then === "function"
  );
}

/** The scope's options: the enclosing lazy scope's, overridden by `options`; checked now. */
function mergedOptions(options: LazyOptions | undefined): LazyOptions {
  const m = currentMode();
  const inherited = m instanceof LazyMode ? m.scope.options : {};
  const o = { ...inherited, ...options };
  for (const name of ["maxDepth", "maxOps"] as const) {
    const v = o[name];
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) {
      throw new Error(`lazy: ${name} must be an integer >= 1, got ${v}`);
    }
  }
  if (o.backend !== undefined) getBackend(o.backend); // fails now, naming the registered ones
  return o;
}

/**
 * Runs `fn` in lazy mode: its ops are recorded, not run, and the tensors it makes stay lazy
 * (also after it returns) until a value is observed. Observing one runs one program for it,
 * its pending inputs and every other still-pending tensor `fn` returned (found in the returned
 * value: a tensor, or arrays, plain objects and Maps of them). `fn` must be synchronous.
 * A nested lazy() is its own scope and inherits the enclosing one's options.
 */
export function lazy<T>(fn: () => T, options?: LazyOptions): T {
  const scope = new LazyScope(mergedOptions(options));
  const result = withMode(new LazyMode(scope), fn);
  if (isThenable(result)) {
    throw new Error(
      "lazy(fn): fn returned a Promise; a lazy scope is synchronous (ops after an await " +
        "would run eagerly), so call lazy() around the synchronous part",
    );
  }
  const outs: LazyImpl[] = [];
  lazyTensorsIn(result, outs, new Set(), 0);
  scope.outputs = outs;
  return result;
}

/**
 * A dispatch mode recording into a fresh lazy scope with `options`, for callers that wrap lazy
 * mode in their own (compile() records a trace on top of it); use it with withMode.
 */
export function lazyScopeMode(options?: LazyOptions): DispatchMode {
  return new LazyMode(new LazyScope(mergedOptions(options)));
}

/**
 * Takes the pending ops a finished `lazyScopeMode` scope recorded out of the region (compile()'s
 * trace, when the capture ends): they stay pending — observing one still computes it and what
 * it needs — but a later scope's cut must not take them along. Without this, the ops of a trace
 * its program made unneeded (the trace's whole graph, when the first call's values came from
 * the compiled program) sat in the region, and the next lazy() loop's first repeat cut computed
 * them all again as if they were its own iteration.
 */
export function leaveRegion(mode: DispatchMode): void {
  if (!(mode instanceof LazyMode) || region.length === 0) return;
  const scope = mode.scope;
  if (!region.some((x) => x.scope === scope)) return;
  const rest = region.filter((x) => x.scope !== scope);
  setRegion(rest, rest.length > 0 && regionAligned);
}

let globalSaved: DispatchMode | undefined;

/**
 * Turns lazy mode on or off for everything that follows (not only a scope). With no scope
 * return value to say which tensors are live, a program computes the observed tensor and what
 * it needs; realizeAll computes several in one program.
 */
export function setLazy(on: boolean, options?: LazyOptions): void {
  if (on) {
    const previous = setMode(new LazyMode(new LazyScope(mergedOptions(options))));
    if (globalSaved === undefined) globalSaved = previous;
  } else if (globalSaved !== undefined) {
    setMode(globalSaved);
    globalSaved = undefined;
  } else if (currentMode() instanceof LazyMode) {
    setMode(eagerMode);
  }
}

/** True when ops are being recorded lazily now. */
export function isLazy(): boolean {
  return currentMode() instanceof LazyMode;
}

/** True when `t` is a lazy tensor whose value has not been computed yet. */
export function isPending(t: Tensor): boolean {
  return t.impl instanceof LazyImpl && t.impl.value === undefined;
}

/** Computes every pending tensor given (plus their scopes' outputs) in one program. */
export function realizeAll(tensors: Iterable<Tensor>): void {
  const list = [...tensors];
  const impls: LazyImpl[] = [];
  for (const t of list) {
    if (t.impl instanceof LazyImpl && t.impl.value === undefined) impls.push(t.impl);
  }
  realizeImpls(impls, true);
  for (const t of list) if (t.impl instanceof LazyImpl) t.realize();
}

/** Forgets the remembered graph structures (the program cache keeps its entries). */
export function clearLazyGraphs(): void {
  memo.clear();
  clearBucketFamilies();
  learnedResults.clear();
  cutShapes.clear();
}
