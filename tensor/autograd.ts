// Eager autograd: PyTorch's model (requiresGrad, backward, .grad, noGrad, detach, retainGrad,
// createGraph) over the one derivative definition Kiln has, the IR rules of
// passes/autodiff_rules.ts. Every lowered op that runs with an operand requiring a gradient
// records a GradNode on its results: the op, its attributes, its operands' VALUES at that moment
// (their impls, so a later `p.impl = ...` update does not change what backward differentiates)
// and, per operand, where a gradient goes (the node that made it, or the leaf tensor whose .grad
// it accumulates into). backward() visits the nodes in reverse creation order (a node's inputs
// are always older than it) and, for each, runs one more LOWERING through the current dispatch
// mode: the op's forward lowering followed by its reverse sweep (`reverseSweep`), taking the
// operands and the output cotangents and giving one gradient per operand that needs one. So an
// op's backward is itself a cached one-op program in eager mode, part of the pending graph in
// lazy mode, and part of the captured program under compile() — eager, lazy and compiled
// training share every derivative. The backward program recomputes what it needs of the forward
// (the optimizer drops the rest), trading compute for not keeping activations a second time.
// With createGraph the backward ops are themselves recorded (their derivative is again the
// reverse sweep of their lowering), which gives higher-order gradients.

import { runModuleCall } from "./module_calls.ts";
import type { Instruction } from "../ir/module.ts";
import type { ArrayShape } from "../ir/shape.ts";
import { AutodiffError, type Ct, reverseSweep } from "../passes/autodiff.ts";
import { captureUserFrame, formatFrame, locateHere, type UserFrame } from "../util/user_frame.ts";
import {
  type Attrs,
  currentMode,
  type Lowering,
  type Operand,
  setGradRecorder,
} from "./dispatch.ts";
import { isFloatingDType, type DType } from "./dtype.ts";
import { OpError } from "./errors.ts";
import { add } from "./ops/core.ts";
import { ones } from "./creation.ts";
import { type GradFn, Tensor, type TensorImpl } from "./tensor.ts";

// ---- Grad mode ------------------------------------------------------------------------------

let gradEnabled = true;
let anomaly = false;
let sequence = 0;

/** Whether ops record gradient nodes now (PyTorch's `torch.is_grad_enabled()`). */
export function isGradEnabled(): boolean {
  return gradEnabled;
}

/** Turns recording on or off from now on; returns the previous setting. Prefer noGrad(fn). */
export function setGradEnabled(on: boolean): boolean {
  const saved = gradEnabled;
  gradEnabled = on;
  return saved;
}

/** Runs `fn` without recording gradients (PyTorch's `with torch.no_grad():`). */
export function noGrad<T>(fn: () => T): T {
  return withGradMode(false, fn);
}

/** Runs `fn` recording gradients, also inside noGrad (PyTorch's `torch.enable_grad()`). */
export function enableGrad<T>(fn: () => T): T {
  return withGradMode(true, fn);
}

/** Runs `fn` with grad recording on or off (the state before comes back after). */
export function withGradMode<T>(on: boolean, fn: () => T): T {
  const saved = gradEnabled;
  gradEnabled = on;
  try {
    return fn();
  } finally {
    gradEnabled = saved;
  }
}

/**
 * Anomaly detection (PyTorch's `torch.autograd.detect_anomaly`): each recorded op keeps the
 * user's line that ran it, and an error in backward names that line. Off by default: finding
 * the line costs a stack capture per op.
 */
export function setDetectAnomaly(on: boolean): boolean {
  const saved = anomaly;
  anomaly = on;
  return saved;
}

/** Runs `fn` with anomaly detection on. */
export function detectAnomaly<T>(fn: () => T): T {
  const saved = anomaly;
  anomaly = true;
  try {
    return fn();
  } finally {
    anomaly = saved;
  }
}

// ---- The graph ------------------------------------------------------------------------------

/** Where an operand's gradient goes. */
export type Edge =
  | { readonly node: GradNode; readonly index: number }
  | { readonly leaf: Tensor };

/** One recorded op: what backward needs to differentiate it. */
export class GradNode implements GradFn {
  /** `AddBackward`, `MatmulBackward`: the op's name in PyTorch's style. */
  readonly name: string;
  readonly op: Lowering;
  readonly attrs: Attrs;
  /** Creation order; a node's inputs were all made by older nodes. */
  readonly seq: number;
  /** Per operand: where its gradient goes; null where none does. */
  readonly edges: readonly (Edge | null)[];
  /** Each result's dtype and shape (a missing cotangent is zeros of it). */
  readonly outputs: readonly { readonly dtype: DType; readonly shape: readonly number[] }[];
  /** Whether the op returned several results. */
  readonly multi: boolean;
  /** The user's line that ran the op, under anomaly detection. */
  readonly frame: UserFrame | undefined;
  /** The operands' values when the op ran; null once backward freed them. */
  values: (TensorImpl | Operand)[] | null;
  /** Non-leaf results whose .grad is kept (retainGrad), by result index. */
  retained: (Tensor | undefined)[] | undefined;
  /**
   * A node whose backward is JavaScript rather than a lowering (checkpoint's recomputation):
   * the gradient of each edge from the results' cotangents.
   */
  custom: ((cts: readonly (Tensor | undefined)[], createGraph: boolean) => (Tensor | undefined)[]) | undefined;

  constructor(
    op: Lowering,
    attrs: Attrs,
    values: (TensorImpl | Operand)[],
    edges: (Edge | null)[],
    outputs: readonly Tensor[],
    multi: boolean,
  ) {
    this.name = `${op.name.charAt(0).toUpperCase()}${op.name.slice(1)}Backward`;
    this.op = op;
    this.attrs = attrs;
    this.seq = sequence++;
    this.values = values;
    this.edges = edges;
    this.outputs = outputs.map((t) => ({ dtype: t.dtype, shape: t.shape }));
    this.multi = multi;
    this.frame = anomaly ? captureUserFrame() : undefined;
    this.retained = undefined;
    this.custom = undefined;
  }

  /** The nodes this one sends gradients to (PyTorch's `next_functions`), leaves as null. */
  get nextFunctions(): readonly (GradNode | null)[] {
    return this.edges.map((e) => (e !== null && "node" in e ? e.node : null));
  }
}

function edgeOf(t: Tensor): Edge | null {
  const fn = t.gradFn as GradNode | null;
  if (fn !== null) return { node: fn, index: t.outputNr };
  return t.requiresGrad ? { leaf: t } : null;
}

/**
 * Records `op`'s node on its results when an operand needs a gradient (the dispatcher calls it
 * after every lowered op). A result that is not floating point never requires a gradient.
 */
function record(op: Lowering, operands: readonly Operand[], attrs: Attrs, out: Tensor | Tensor[]) {
  if (!gradEnabled) return;
  let any = false;
  for (const o of operands) {
    if (o instanceof Tensor && o.requiresGrad) {
      any = true;
      break;
    }
  }
  if (!any) return;
  const edges = operands.map((o) => (o instanceof Tensor && isFloatingDType(o.dtype) ? edgeOf(o) : null));
  attach(op, operands, attrs, out, edges);
}

function attach(
  op: Lowering,
  operands: readonly Operand[],
  attrs: Attrs,
  out: Tensor | Tensor[],
  edges: (Edge | null)[],
): void {
  const outs = Array.isArray(out) ? out : [out];
  const values = operands.map((o) => (o instanceof Tensor ? o.impl : o));
  const node = new GradNode(op, attrs, values, edges, outs, Array.isArray(out));
  outs.forEach((t, k) => {
    if (!isFloatingDType(t.dtype)) return;
    t.gradFn = node;
    t.outputNr = k;
  });
}

setGradRecorder(record);

// ---- Backward lowerings -----------------------------------------------------------------------

const vjpLowerings = new Map<string, Lowering>();

/**
 * The lowering of `op`'s backward for the operands in `wrt` and the results with a cotangent
 * (`given`): operands are the forward operands then one cotangent per given result; results are
 * one gradient per wrt operand. Made once per (op, masks) and kept, so the dispatch modes' caches
 * key it like any op.
 */
function vjpLowering(op: Lowering, wrt: readonly boolean[], given: readonly boolean[]): Lowering {
  const mask = (m: readonly boolean[]) => m.map((x) => (x ? "1" : "0")).join("");
  const name = `${op.name}.backward[${mask(wrt)};${mask(given)}]`;
  // Op names are unique (the registry refuses a second definition), so the name keys it.
  const hit = vjpLowerings.get(name);
  if (hit !== undefined) return hit;
  const n = wrt.length;
  const lowering: Lowering = {
    kind: "lowering",
    name,
    signature: op.signature,
    lower(b, inputs, attrs) {
      // One instruction passed as two operands (x * x in a traced or lazy graph, where both
      // operands are one parameter) would be differentiated once for both uses: each operand
      // position gets an instruction of its own, so each gradient is its position's.
      const seen = new Set<Instruction>();
      const xs = inputs.slice(0, n).map((x) => {
        if (!seen.has(x)) {
          seen.add(x);
          return x;
        }
        return b.copy(x);
      });
      const cts = inputs.slice(n);
      const start = b.computation.instructions.length;
      const r = b.withMetadata({ opType: op.name }, () => op.lower(b, xs, attrs));
      const forward = b.computation.instructions.slice(start);
      const outs = Array.isArray(r) ? r : [r];
      const seeds: [Instruction, Ct][] = [];
      let c = 0;
      outs.forEach((o, k) => {
        if (given[k]) seeds.push([o, cts[c++]!]);
      });
      if (op.vjp !== undefined) {
        // The op's own derivative (Lowering.vjp), zeros for an input it gives none.
        const byOutput: (Instruction | undefined)[] = [];
        let j = 0;
        outs.forEach((_, k) => byOutput.push(given[k] ? cts[j++] : undefined));
        const auto = () => {
          const gs = reverseSweep(b, forward, seeds, xs.filter((_, k) => wrt[k]));
          let i = 0;
          return xs.map((_, k) => (wrt[k] ? gs[i++] : undefined));
        };
        const gs = b.withMetadata({ opType: op.name }, () =>
          op.vjp!(b, xs, outs, byOutput, attrs, auto),
        );
        return xs.flatMap((x, k) => {
          if (!wrt[k]) return [];
          const g = gs[k];
          if (g !== undefined) return [g];
          const s = x.shape as ArrayShape;
          return [b.broadcast(b.scalar(s.type, 0), s.dims, [])];
        });
      }
      const targets = xs.filter((_, k) => wrt[k]);
      return reverseSweep(b, forward, seeds, targets);
    },
  };
  vjpLowerings.set(name, lowering);
  return lowering;
}

// ---- The engine -----------------------------------------------------------------------------

/** Told of every backward()/grad() call (compile()'s trace: a compiled step cannot hold one yet). */
let backwardObserver: ((what: "backward" | "grad") => void) | undefined;

/** Sets the observer of backward()/grad() calls; returns the previous one. */
export function setBackwardObserver(
  o: ((what: "backward" | "grad") => void) | undefined,
): ((what: "backward" | "grad") => void) | undefined {
  const saved = backwardObserver;
  backwardObserver = o;
  return saved;
}

export interface BackwardOptions {
  /** Keep the graph's saved values so backward can run through it again (default false). */
  retainGraph?: boolean;
  /** Record the backward pass itself, for higher-order gradients (default false). */
  createGraph?: boolean;
  /** Accumulate only into these leaves' .grad (default: every leaf the roots depend on). */
  inputs?: readonly Tensor[];
}

export interface GradOptions {
  retainGraph?: boolean;
  createGraph?: boolean;
  /** An input the outputs do not depend on gets null instead of an error (default false). */
  allowUnused?: boolean;
}

/** `x.backward(gradient?)`: accumulates d(x)/d(leaf) · gradient into every leaf's .grad. */
export function backward(
  tensors: Tensor | readonly Tensor[],
  gradients?: Tensor | readonly (Tensor | undefined)[],
  options: BackwardOptions = {},
): void {
  backwardObserver?.("backward");
  try {
    const roots = Array.isArray(tensors) ? tensors : [tensors as Tensor];
    const seeds = seedsFor("backward", roots, gradients);
    const targets = options.inputs;
    if (targets !== undefined) {
      for (const t of targets) {
        if (!t.requiresGrad) throw new OpError("backward", `an input does not require grad`);
      }
    }
    // One call for lazy mode's cuts (tensor/module_calls.ts): the sweep over a model's layers
    // repeats the same ops per layer, and cutting there would make one step many programs.
    runModuleCall(() => {
      const found = run(roots, seeds, options, targets);
      withGradMode(options.createGraph === true, () => {
        for (const [t, g] of found) {
          if (t.gradFn !== null) continue; // a non-leaf in `inputs` (retained below)
          t.grad = t.grad === null ? g : add(t.grad, g);
        }
      });
    });
  } catch (e) {
    throw e instanceof Error ? locateHere(e) : e;
  }
}

/**
 * `grad(outputs, inputs, gradOutputs?)`: the gradients of the outputs (weighted by gradOutputs)
 * with respect to each input, returned rather than accumulated (PyTorch's torch.autograd.grad).
 * Inputs may be leaves or intermediate results.
 */
export function grad(
  outputs: Tensor | readonly Tensor[],
  inputs: Tensor | readonly Tensor[],
  gradOutputs?: Tensor | readonly (Tensor | undefined)[],
  options: GradOptions = {},
): (Tensor | null)[] {
  backwardObserver?.("grad");
  try {
    const roots = Array.isArray(outputs) ? outputs : [outputs as Tensor];
    const ins = Array.isArray(inputs) ? inputs : [inputs as Tensor];
    for (const [k, t] of ins.entries()) {
      if (!(t instanceof Tensor)) throw new OpError("grad", `input ${k} is not a Tensor`);
      if (!t.requiresGrad) throw new OpError("grad", `input ${k} does not require grad`);
    }
    const seeds = seedsFor("grad", roots, gradOutputs);
    // One call for lazy mode's cuts (tensor/module_calls.ts), as in backward; its gradients are
    // what it returns, so a cut returns them.
    return runModuleCall(() => {
      const found = run(roots, seeds, options, ins);
      return ins.map((t, k) => {
        const g = found.get(t);
        if (g !== undefined) return g;
        if (options.allowUnused === true) return null;
        throw new OpError(
          "grad",
          `input ${k} was not used to compute the outputs (pass allowUnused: true to get null)`,
        );
      });
    });
  } catch (e) {
    throw e instanceof Error ? locateHere(e) : e;
  }
}

function seedsFor(
  what: string,
  roots: readonly Tensor[],
  gradients: Tensor | readonly (Tensor | undefined)[] | undefined,
): Tensor[] {
  const gs = gradients === undefined ? [] : Array.isArray(gradients) ? gradients : [gradients];
  if (gs.length > roots.length) {
    throw new OpError(what, `got ${gs.length} gradients for ${roots.length} tensors`);
  }
  return roots.map((t, k) => {
    if (!(t instanceof Tensor)) throw new OpError(what, `output ${k} is not a Tensor`);
    if (!t.requiresGrad) {
      throw new OpError(
        what,
        `tensor ${k} does not require grad and has no gradFn (did an operand have requiresGrad? ` +
          `was it computed under noGrad?)`,
      );
    }
    const g = gs[k];
    if (g === undefined) {
      if (t.numel() !== 1) {
        throw new OpError(
          what,
          `a gradient can be implicit only for a one-element output; tensor ${k} has shape ` +
            `[${t.shape.join(", ")}]: pass a gradient of that shape`,
        );
      }
      return ones([...t.shape], { dtype: t.dtype });
    }
    if (!(g instanceof Tensor)) throw new OpError(what, `gradient ${k} is not a Tensor`);
    if (g.shape.length !== t.shape.length || g.shape.some((d, i) => d !== t.shape[i])) {
      throw new OpError(
        what,
        `gradient ${k} has shape [${g.shape.join(", ")}] but its tensor has shape ` +
          `[${t.shape.join(", ")}]`,
      );
    }
    if (g.dtype !== t.dtype) {
      throw new OpError(what, `gradient ${k} is ${g.dtype} but its tensor is ${t.dtype}`);
    }
    return g;
  });
}

const keyOfOutput = (node: GradNode, index: number) => `${node.seq}:${index}`;

/**
 * The sweep: from the roots' nodes back to the leaves (or to `targets`), returning the gradient
 * reaching each leaf / target tensor.
 */
function run(
  roots: readonly Tensor[],
  seeds: readonly Tensor[],
  options: { retainGraph?: boolean; createGraph?: boolean },
  targets: readonly Tensor[] | undefined,
): Map<Tensor, Tensor> {
  const createGraph = options.createGraph === true;
  const retainGraph = options.retainGraph ?? createGraph;
  const found = new Map<Tensor, Tensor>();
  const accumulate = (a: Tensor | undefined, g: Tensor): Tensor =>
    a === undefined ? g : withGradMode(createGraph, () => add(a, g));
  // Targets by where their gradient shows up: leaves by tensor, non-leaves by node output.
  const leafTargets = targets && new Set(targets.filter((t) => t.gradFn === null));
  const innerTargets = new Map<string, Tensor>();
  for (const t of targets ?? []) {
    if (t.gradFn !== null) innerTargets.set(keyOfOutput(t.gradFn as GradNode, t.outputNr), t);
  }
  // Every node reachable from the roots, and whether it leads to a target.
  const nodes = new Map<GradNode, boolean>();
  const leads = (n: GradNode): boolean => {
    const hit = nodes.get(n);
    if (hit !== undefined) return hit;
    // Iterative DFS: a graph of a long loop is deeper than the JS stack.
    const stack: GradNode[] = [n];
    const order: GradNode[] = [];
    const seen = new Set<GradNode>([n]);
    while (stack.length > 0) {
      const m = stack.pop()!;
      order.push(m);
      for (const e of m.edges) {
        if (e !== null && "node" in e && !nodes.has(e.node) && !seen.has(e.node)) {
          seen.add(e.node);
          stack.push(e.node);
        }
      }
    }
    // Oldest first: every input node is decided before the nodes that use it.
    order.sort((a, b) => a.seq - b.seq);
    for (const m of order) {
      let useful = false;
      for (const e of m.edges) {
        if (e === null) continue;
        if ("leaf" in e) useful ||= leafTargets === undefined || leafTargets.has(e.leaf);
        else useful ||= nodes.get(e.node) === true;
      }
      if (!useful && innerTargets.size > 0) {
        for (let k = 0; k < m.outputs.length; k++) {
          if (innerTargets.has(keyOfOutput(m, k))) useful = true;
        }
      }
      nodes.set(m, useful);
    }
    return nodes.get(n)!;
  };
  const pending = new Map<GradNode, (Tensor | undefined)[]>();
  roots.forEach((t, k) => {
    const node = t.gradFn as GradNode | null;
    if (node === null) {
      if (leafTargets === undefined || leafTargets.has(t)) found.set(t, accumulate(found.get(t), seeds[k]!));
      return;
    }
    leads(node);
    const cts = pending.get(node) ?? [];
    cts[t.outputNr] = accumulate(cts[t.outputNr], seeds[k]!);
    pending.set(node, cts);
  });
  const order = [...nodes.keys()].sort((a, b) => b.seq - a.seq);
  for (const node of order) {
    const cts = pending.get(node);
    if (cts === undefined) continue;
    pending.delete(node);
    for (let k = 0; k < node.outputs.length; k++) {
      const g = cts[k];
      if (g === undefined) continue;
      const t = innerTargets.get(keyOfOutput(node, k));
      if (t !== undefined) found.set(t, g);
      const kept = node.retained?.[k];
      if (kept !== undefined) {
        kept.grad = kept.grad === null ? g : withGradMode(createGraph, () => add(kept.grad!, g));
      }
    }
    if (!nodes.get(node)) continue;
    const grads = differentiate(node, cts, createGraph);
    node.edges.forEach((e, j) => {
      const g = grads[j];
      if (e === null || g === undefined) return;
      if ("leaf" in e) {
        if (leafTargets === undefined || leafTargets.has(e.leaf)) {
          found.set(e.leaf, accumulate(found.get(e.leaf), g));
        }
        return;
      }
      if (!nodes.get(e.node) && !innerTargets.has(keyOfOutput(e.node, e.index))) return;
      const c = pending.get(e.node) ?? [];
      c[e.index] = accumulate(c[e.index], g);
      pending.set(e.node, c);
    });
  }
  if (!retainGraph) for (const node of nodes.keys()) node.values = null;
  return found;
}

/** One node's backward: its vjp lowering through the current mode; gradients by operand. */
function differentiate(
  node: GradNode,
  cts: readonly (Tensor | undefined)[],
  createGraph: boolean,
): (Tensor | undefined)[] {
  const values = node.values;
  if (values === null) {
    throw new OpError(
      node.name,
      `backward ran through this part of the graph a second time, after its saved values ` +
        `were freed: pass retainGraph: true to the first backward()`,
    );
  }
  if (node.custom !== undefined) return node.custom(cts, createGraph);
  const wrt = node.edges.map((e) => e !== null);
  const given = node.outputs.map((_, k) => cts[k] !== undefined);
  const op = vjpLowering(node.op, wrt, given);
  const operands: Operand[] = values.map((v) =>
    v instanceof Tensor || typeof v !== "object" ? v : new Tensor(v),
  );
  const ctOperands = cts.filter((g): g is Tensor => g !== undefined);
  let out: Tensor | Tensor[];
  try {
    out = withGradMode(false, () => currentMode().run(op, [...operands, ...ctOperands], node.attrs));
  } catch (e) {
    if (e instanceof AutodiffError || e instanceof OpError) {
      const where = node.frame !== undefined
        ? `; the op ran at ${formatFrame(node.frame)}`
        : "; run under detectAnomaly() to see the line that ran it";
      throw new OpError(node.name, `cannot differentiate '${node.op.name}': ${e.message}${where}`, {
        cause: e,
      });
    }
    throw e;
  }
  const list = Array.isArray(out) ? out : [out];
  if (createGraph) {
    // The backward op is itself an op of the graph: its derivative flows to the forward
    // operands (through their own edges) and to the cotangents.
    const edges = [...node.edges, ...ctOperands.map(edgeOf)];
    if (edges.some((e) => e !== null)) {
      attach(op, [...operands, ...ctOperands], node.attrs, out, edges);
    }
  }
  const grads: (Tensor | undefined)[] = [];
  let k = 0;
  for (let j = 0; j < wrt.length; j++) grads.push(wrt[j] ? list[k++] : undefined);
  return grads;
}

// ---- Tensor methods -------------------------------------------------------------------------

/** Marks a non-leaf tensor's .grad to be kept by backward (leaves always keep theirs). */
function retainGrad(t: Tensor): void {
  if (!t.requiresGrad) {
    throw new OpError("retainGrad", "the tensor does not require grad");
  }
  const node = t.gradFn as GradNode | null;
  if (node === null) return;
  node.retained ??= [];
  node.retained[t.outputNr] = t;
}

declare module "./tensor.ts" {
  interface Tensor {
    /**
     * Computes the gradient of this tensor with respect to the graph's leaves and accumulates it
     * into their .grad. `gradient` is required unless the tensor has one element.
     */
    backward(gradient?: Tensor, options?: BackwardOptions): void;
    /** Keeps this non-leaf tensor's gradient in .grad during backward. */
    retainGrad(): void;
  }
}

Object.defineProperty(Tensor.prototype, "backward", {
  value: function (this: Tensor, gradient?: Tensor, options?: BackwardOptions) {
    backward(this, gradient === undefined ? undefined : [gradient], options);
  },
  writable: true,
  configurable: true,
});
Object.defineProperty(Tensor.prototype, "retainGrad", {
  value: function (this: Tensor) {
    retainGrad(this);
  },
  writable: true,
  configurable: true,
});
