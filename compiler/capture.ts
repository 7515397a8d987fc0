// Graph capture: running the user's code once under a Tracer (compiler/trace.ts). `traceUser`
// is the one way in and out of a trace — symbolic argument tensors, argument containers behind
// write-catching proxies, the module tree's parameters and buffers swapped for input slots,
// the observe hook set, the dispatch mode entered — and the one way back, whatever happened.
// `capture` is the call's own trace: it keeps going through graph breaks (lazy mode computes
// the values the code reads) and says what the call did — its results and writes as program
// outputs, and every reason the code cannot be one program (side effects, breaks). `traceAt`
// is a trace at another size of a bucket, which must not break: its program is all it gives.
// While any trace runs, a compiled function called from the user's code inlines into it.

import { Module as NNModule } from "../tensor/nn/module.ts";
import { setGradHook, setObserveHook, Tensor } from "../tensor/tensor.ts";
import { Optimizer, setStepHook } from "../optim/optimizer.ts";
import { setRandomHook } from "../tensor/random.ts";
import { withMode, currentMode } from "../tensor/dispatch.ts";
import { log } from "../util/log.ts";
import type { CompileConfig } from "./config.ts";
import { DynamicShapeError } from "./dynamic.ts";
import { describeValue } from "./guards.ts";
import { flatten, formatPath, isContainer, type Leaf, type TreeSpec, unflatten } from "./pytree.ts";
import { formatLocation } from "./source.ts";
import { GraphBreakError } from "./stats.ts";
import type { Placed, Target } from "./target.ts";
import { buildProgram, type Program, type Src, TracedInputImpl, Tracer } from "./trace.ts";

let depth = 0;

/** True while some compiled function is tracing (nested compiled calls inline). */
export function isTracing(): boolean {
  return depth > 0 || currentMode().name === "trace";
}

/** True while compile() itself is running a trace (its callables then inline). */
export function insideTrace(): boolean {
  return depth > 0;
}

/** A flattened argument list. */
export interface Flat {
  readonly spec: TreeSpec;
  readonly leaves: readonly Leaf[];
}

/**
 * Runs the user's code once under `tracer` on symbolic stand-ins for `args` (flattened as
 * `flat`), with `hook` as the observe hook; everything swapped in is swapped back, also after
 * an error. Writes the code made stay made (the caller undoes them when it needs to).
 */
function traceUser(
  target: Target,
  tracer: Tracer,
  flat: Flat,
  args: readonly unknown[],
  hook: (t: Tensor, how: string) => void,
  freeze: boolean,
): unknown {
  const path = (p: readonly (string | number)[]) => target.pathText(p);
  const symLeaves = flat.leaves.map((l) =>
    l.kind === "tensor" ? tracer.argInput(l.value as Tensor, l.path, path(l.path)) : l.value,
  );
  const symArgs = wrapArgs(tracer, unflatten(flat.spec, symLeaves) as unknown[], [...args], path);
  const fixed = target.model ? [] : target.fixedValues();
  let self: unknown;
  if (target.model) {
    tracer.swapState(target.model, "this");
    self = tracer.wrap(target.model, "this");
  }
  // Modules, tensors and optimizers (a training step's: their parameters outside the module
  // tree) held by const variables, directly or in plain containers, become inputs.
  const held = heldValues(fixed);
  for (const [n, v] of held) if (v instanceof NNModule) tracer.swapState(v, n);
  for (const [n, v] of held) if (v instanceof Tensor) tracer.swapFree(v, n);
  for (const [n, v] of held) if (v instanceof Optimizer) tracer.swapOptimizer(v, n);
  for (const l of flat.leaves) {
    if (l.kind === "opaque" && l.value instanceof Optimizer) tracer.swapOptimizer(l.value, path(l.path));
  }
  const saved = setObserveHook(hook);
  const savedGrad = setGradHook({ read: (t) => tracer.gradRead(t), write: (t) => tracer.gradWrite(t) });
  const savedRandom = setRandomHook({ draw: (g, make) => tracer.randomDraw(g, make) });
  const savedStep = setStepHook({
    step: (o, ps, prepare) => tracer.optimizerStep(o, ps, prepare),
    host: (run, snapshot) => tracer.hostWork(run, snapshot),
  });
  depth++;
  try {
    return withMode(tracer.mode, () => target.run(self, symArgs));
  } finally {
    depth--;
    setObserveHook(saved);
    setGradHook(savedGrad);
    setStepHook(savedStep);
    setRandomHook(savedRandom);
    tracer.noteStateUpdates(freeze);
    tracer.restore();
  }
}

// ---- the call's own trace --------------------------------------------------------------------

/** How a result leaf (or a written value) is produced on a compiled call. */
export type OutLeaf =
  | { readonly kind: "result"; readonly index: number }
  | { readonly kind: "arg"; readonly keys: readonly (string | number)[] }
  | { readonly kind: "state"; readonly owner: object; readonly key: string }
  /** An input read outside the module tree (an optimizer's tensor, a gradient). */
  | { readonly kind: "host"; readonly read: () => Tensor }
  | { readonly kind: "const"; readonly value: unknown };

/**
 * A write a compiled call repeats: target[key] = what `leaf` produces; with `impl`, the tensor
 * at target[key] takes the produced tensor's value (an in-place update).
 */
export interface OutWrite {
  readonly target: object;
  readonly key: string;
  readonly leaf: OutLeaf;
  readonly impl?: true;
}

/** What a trace found, as explain() prints it (the entry adds its guards and program). */
export interface TraceShape {
  readonly ops: number;
  readonly segments: number;
  readonly opsPerSegment: readonly number[];
  readonly breaks: readonly Placed[];
  readonly replayReasons: readonly Placed[];
}

/** What the call's own trace did. */
export interface Capture {
  readonly tracer: Tracer;
  /** The result, flattened (its leaves as the trace produced them). */
  readonly out: Flat;
  /** How each result leaf is produced by a compiled call (`result` indexes `requested`). */
  readonly outLeaves: readonly OutLeaf[];
  /** The traced values the program computes, in order. */
  readonly requested: readonly Src[];
  readonly writes: readonly OutWrite[];
  /** Why the code cannot be one program, graph breaks aside (empty when it can). */
  readonly reasons: readonly Placed[];
  readonly shape: TraceShape;
}

/** Whether the call must run in replay mode: a graph break, or anything unreplayable. */
export function needsReplay(c: Capture): boolean {
  return c.reasons.length > 0 || c.tracer.breaks.length > 0;
}

/** `fullgraph`: a side effect the source shows is an error before anything runs. */
export function checkFullgraph(target: Target, config: CompileConfig): void {
  const a = target.analysis();
  if (config.fullgraph && a.sideEffects.length > 0) {
    const s = a.sideEffects[0]!;
    throw new GraphBreakError(`side effect: ${s.reason}`, s.location);
  }
}

/** Traces the call (see the file comment); this call's values are the trace's. */
export function capture(
  target: Target,
  config: CompileConfig,
  args: readonly unknown[],
  flat: Flat,
): Capture {
  const a = target.analysis();
  const name = target.name;
  const tracer = new Tracer(config.lazy);
  const result = traceUser(target, tracer, flat, args, (t, how) => {
    tracer.observe(t, how);
    const b = tracer.breaks[tracer.breaks.length - 1]!;
    const where = formatLocation(b.location);
    log("graph_breaks", () => `${name}: graph break at ${where}: ${b.reason}`);
    if (config.fullgraph) throw new GraphBreakError(`graph break: ${b.reason}`, b.location);
  }, config.freeze);
  if (isThenable(result)) {
    throw new TypeError(
      `compile(${name}): the function returned a Promise; compiled code must be synchronous`,
    );
  }
  const reasons: Placed[] = [...a.sideEffects, ...tracer.unreplayable];
  const out = flatten(result);
  const requested: Src[] = [];
  const leafFor = (v: unknown, leafPath: string): OutLeaf | undefined => {
    if (v instanceof Tensor) {
      const src = tracer.srcOfTensor(v);
      switch (src.kind) {
        case "node":
          requested.push(src);
          return { kind: "result", index: requested.length - 1 };
        case "slot": {
          const slot = tracer.slots[src.slot]!;
          if (slot.kind === "host") return { kind: "host", read: slot.read };
          return slot.kind === "arg"
            ? { kind: "arg", keys: slot.keys }
            : { kind: "state", owner: slot.owner, key: slot.key };
        }
        case "const":
          return { kind: "const", value: new Tensor(src.impl) };
        case "scalar":
          return { kind: "const", value: src.value };
        default: {
          const never: never = src;
          throw new Error(`unknown src ${String(never)}`);
        }
      }
    }
    const raw = tracer.unwrap(v);
    if (raw === null || (typeof raw !== "object" && typeof raw !== "function")) {
      return { kind: "const", value: raw };
    }
    const argLeaf = flat.leaves.find((l) => l.kind === "opaque" && l.value === raw);
    if (argLeaf) return { kind: "arg", keys: argLeaf.path };
    if (raw !== v || raw === target.model) return { kind: "const", value: raw };
    reasons.push({
      reason:
        `returns ${describeValue(raw)} at ${leafPath} made by the call; compiled programs ` +
        `return tensors, primitives, arrays and plain objects`,
      location: undefined,
    });
    return undefined;
  };
  const outLeaves: OutLeaf[] = [];
  for (const l of out.leaves) {
    const leaf = leafFor(l.value, formatPath("result", l.path));
    if (leaf) outLeaves.push(leaf);
  }
  const writes: OutWrite[] = [];
  for (const w of tracer.writes) {
    const leaf: OutLeaf | undefined =
      w.value.kind === "tensor"
        ? leafFor(w.value.tensor, w.path)
        : { kind: "const", value: w.value.value };
    if (leaf) writes.push({ target: w.target, key: w.key, leaf, ...(w.impl && { impl: true }) });
  }
  const segments = tracer.breaks.length + 1;
  const shape: TraceShape = {
    ops: tracer.nodes.length,
    segments,
    opsPerSegment: Array.from({ length: segments }, (_, i) =>
      tracer.nodes.filter((n) => n.segment === i).length,
    ),
    breaks: tracer.breaks.map((b) => ({ reason: b.reason, location: b.location })),
    replayReasons: [
      ...reasons,
      ...tracer.breaks.map((b) => ({ reason: `graph break: ${b.reason}`, location: b.location })),
    ],
  };
  return { tracer, out, outLeaves, requested, writes, reasons, shape };
}

/** The program of the traced values `requested` (parameters read from the slots' tensors). */
export function programOf(
  name: string,
  config: CompileConfig,
  tracer: Tracer,
  requested: readonly Src[],
): Program {
  return buildProgram(
    name,
    requested,
    (slot) => concreteOf(tracer.slotTensors[slot]!),
    tracer.slots,
    config.freeze,
    config.checkIndices,
  );
}

// ---- a trace at another size -----------------------------------------------------------------

/** A trace at another size: its program and the tracer that made it. */
export interface Traced {
  readonly program: Program;
  readonly tracer: Tracer;
}

/** Traces the code again on `args` (another size of a bucket) and builds its program. */
export function traceAt(target: Target, config: CompileConfig, args: unknown[]): Traced {
  const tracer = new Tracer(config.lazy, false);
  let result: unknown;
  try {
    result = traceUser(target, tracer, flatten([...args]), args, (t, how) => {
      throw new DynamicShapeError(`${how}() on a tensor of shape [${t.shape.join(", ")}]`);
    }, config.freeze);
  } finally {
    tracer.undoWrites();
  }
  const requested: Src[] = [];
  const note = (v: unknown) => {
    if (!(v instanceof Tensor)) return;
    const src = tracer.srcOfTensor(v);
    if (src.kind === "node") requested.push(src);
  };
  for (const l of flatten(result).leaves) note(l.value);
  for (const w of tracer.writes) if (w.value.kind === "tensor") note(w.value.tensor);
  if (requested.length === 0) throw new DynamicShapeError("the trace computed nothing");
  return { program: programOf(target.name, config, tracer, requested), tracer };
}

// ---- helpers ---------------------------------------------------------------------------------

/** Depth of plain containers searched for modules, tensors and optimizers (as fixedGuards). */
const HELD_DEPTH = 8;

/**
 * The modules, tensors and optimizers const variables hold, directly or inside plain arrays
 * and objects (`const state = { model, opt }`), with their paths; each object once.
 */
export function heldValues(fixed: readonly [string, unknown][]): [string, unknown][] {
  const out: [string, unknown][] = [];
  const seen = new Set<unknown>();
  const visit = (v: unknown, path: string, depth: number): void => {
    if (typeof v !== "object" || v === null || seen.has(v)) return;
    seen.add(v);
    if (v instanceof NNModule || v instanceof Tensor || v instanceof Optimizer) {
      out.push([path, v]);
      return;
    }
    if (depth >= HELD_DEPTH || !isContainer(v)) return;
    const entries: [string | number, unknown][] = Array.isArray(v)
      ? v.map((x, i) => [i, x])
      : Object.entries(v);
    for (const [k, x] of entries) visit(x, formatPath(path, [k]), depth + 1);
  };
  for (const [n, v] of fixed) visit(v, n, 0);
  return out;
}

/** Argument containers as write-catching proxies over the copies the trace hands out. */
function wrapArgs(
  tracer: Tracer,
  copy: unknown[],
  original: unknown[],
  pathText: (path: readonly (string | number)[]) => string,
): unknown[] {
  const wrapValue = (c: unknown, o: unknown, path: (string | number)[]): unknown => {
    if (!isContainer(c) || !isContainer(o)) return c;
    if (Array.isArray(c)) {
      for (let i = 0; i < c.length; i++) c[i] = wrapValue(c[i], (o as unknown[])[i], [...path, i]);
    } else {
      const oc = o as Record<string, unknown>;
      for (const k of Object.keys(c)) c[k] = wrapValue(c[k], oc[k], [...path, k]);
    }
    return tracer.wrapArgContainer(c as object, o as object, pathText(path));
  };
  return copy.map((c, i) => wrapValue(c, original[i], [i]));
}

function concreteOf(t: Tensor): Tensor {
  const impl = t.impl;
  if (impl instanceof TracedInputImpl) return impl.concrete;
  return t;
}

function isThenable(v: unknown): boolean {
  return (
    typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function"
  );
}
