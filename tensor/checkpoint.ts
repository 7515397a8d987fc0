// Activation checkpointing (torch.utils.checkpoint): `checkpoint(module)` marks a module whose
// forward, in eager mode with grad enabled, runs under noGrad — none of its activations are
// kept — and records ONE node on its outputs; that node's backward runs the forward again (with
// the default generator's state as it was, so dropout draws the same mask) with grad enabled,
// and differentiates the recomputed outputs with respect to the inputs and the module's
// parameters. Memory: the module's inputs are kept instead of every intermediate; time: one
// more forward. In a compiled or lazy program the module runs as usual: the program's buffer
// plan keeps only what the backward reads, and a recomputed forward would be merged back into
// the first by CSE (docs/training.md).

import { type Edge, enableGrad, grad, GradNode, isGradEnabled, noGrad } from "./autograd.ts";
import { currentMode, type Lowering } from "./dispatch.ts";
import { isFloatingDType } from "./dtype.ts";
import { OpError } from "./errors.ts";
import { checkpointed, Module, setCheckpointRunner } from "./nn/module.ts";
import { defaultGenerator } from "./random.ts";
import { Tensor } from "./tensor.ts";

/** The node's op: never lowered (its backward is the recomputation). */
const CHECKPOINT: Lowering = {
  kind: "lowering",
  name: "checkpoint",
  signature: [],
  lower() {
    throw new Error("checkpoint: a recomputation node has no lowering");
  },
};

/** Marks `module` (and returns it): its activations are recomputed in backward. */
export function checkpoint<M extends Module>(module: M): M {
  if (!(module instanceof Module)) throw new OpError("checkpoint", "expects an nn.Module");
  checkpointed.add(module);
  return module;
}

/** Undoes checkpoint(module). */
export function uncheckpoint<M extends Module>(module: M): M {
  checkpointed.delete(module);
  return module;
}

function edgeOf(t: Tensor): Edge | null {
  const fn = t.gradFn as GradNode | null;
  if (fn !== null) return { node: fn, index: t.outputNr };
  return t.requiresGrad ? { leaf: t } : null;
}

function outputsOf(m: Module, out: unknown): Tensor[] {
  const list = out instanceof Tensor ? [out] : Array.isArray(out) ? out : undefined;
  if (list === undefined || !list.every((t) => t instanceof Tensor)) {
    throw new OpError(
      "checkpoint",
      `${m.className()}'s forward must return a tensor or an array of tensors to be checkpointed`,
    );
  }
  return list as Tensor[];
}

setCheckpointRunner((m, args, run) => {
  const params = m.parameters().filter((p) => p.requiresGrad);
  const inputs = args.flatMap((a, i) => (a instanceof Tensor ? [[i, a] as const] : []));
  const tracked = inputs.filter(([, t]) => t.requiresGrad);
  // Only eager training needs it: nothing to differentiate, or a traced/lazy graph, runs as is.
  if (!isGradEnabled() || currentMode().name !== "eager" || (params.length === 0 && tracked.length === 0)) {
    return run(args);
  }
  const rng = defaultGenerator.getState();
  const out = noGrad(() => run(args));
  const outs = outputsOf(m, out);
  const edges = [...inputs.map(([, t]) => edgeOf(t)), ...params.map(edgeOf)];
  const node = new GradNode(CHECKPOINT, {}, [], edges, outs, !(out instanceof Tensor));
  node.custom = (cts, createGraph) => {
    const now = defaultGenerator.getState();
    defaultGenerator.setState(rng);
    let again: Tensor[];
    const fresh = inputs.map(([, t]) =>
      t.requiresGrad && isFloatingDType(t.dtype) ? t.detach().requiresGrad_() : t.detach());
    try {
      const call = [...args];
      inputs.forEach(([i], k) => (call[i] = fresh[k]));
      again = enableGrad(() => outputsOf(m, run(call)));
    } finally {
      defaultGenerator.setState(now);
    }
    const live = again.flatMap((o, k) => (cts[k] !== undefined && o.requiresGrad ? [k] : []));
    const targets = [...fresh, ...params];
    const wrt = targets.map((t, j) => edges[j] !== null && t.requiresGrad);
    if (live.length === 0) return targets.map(() => undefined);
    const gs = grad(
      live.map((k) => again[k]!),
      targets.filter((_, j) => wrt[j]),
      live.map((k) => cts[k]!),
      { allowUnused: true, createGraph },
    );
    let n = 0;
    return targets.map((_, j) => (wrt[j] ? gs[n++] ?? undefined : undefined));
  };
  outs.forEach((t, k) => {
    if (!isFloatingDType(t.dtype)) return;
    t.gradFn = node;
    t.outputNr = k;
  });
  return out;
});
