// Capture: running the user's code once with symbolic inputs and recording what it does. The
// trace mode is a DispatchMode layered ON lazy mode: every op is recorded (op, inputs, attrs,
// the user's source file:line:col) and also handed to a lazy scope, which knows each result's
// dtype and shape and can compute any value the code observes. Inputs are symbolic: argument
// tensors are fresh Tensors and every parameter and buffer of the module tree has its impl
// swapped (for the trace only) for a TracedInputImpl naming its INPUT SLOT, so the program takes
// them as parameters, and observing one is seen. Observing a non-concrete value (item, toArray,
// data, toString, a coercion to a number) is a GRAPH BREAK: lazy mode computes it, the code
// goes on, and the break is recorded with its source line. A Proxy around the module tree
// records what the code reads (primitive attributes → value guards, objects reached →
// identity guards, enumerated keys → key guards) and what it writes (tensors and primitives:
// replayable after the program runs; anything else: not). Copies of the argument containers
// behind a Proxy catch mutations of argument objects. Drawing random numbers is caught by
// watching the default generator. When the run had no break and nothing unreplayable, the
// recorded graph from input slots to results IS the compiled program (buildProgram).

import { ModuleBuilder } from "../ir/builder.ts";
import type { Instruction, Module } from "../ir/module.ts";
import {
  type Attrs,
  type DispatchMode,
  type Lowering,
  lowerOp,
  type Operand,
  operandLiteral,
  operandParameter,
} from "../tensor/dispatch.ts";
import type { DType, Scalar } from "../tensor/dtype.ts";
import { lazyScopeMode, leaveRegion, type LazyOptions } from "../tensor/lazy.ts";
import { Module as NNModule, Parameter } from "../tensor/nn/module.ts";
import { collectIndexChecks, type IndexCheck } from "../tensor/index_checks.ts";
import { defaultGenerator, type Generator } from "../tensor/random.ts";
import {
  ConcreteImpl,
  fromStorage,
  registerRealizer,
  Tensor,
  type TensorImpl,
} from "../tensor/tensor.ts";
import { reshape } from "../tensor/ops/core.ts";
import { narrow } from "../tensor/ops/shape.ts";
import type { Optimizer, Scalars } from "../optim/optimizer.ts";
import type { Access, GuardSpec } from "./guards.ts";
import { formatPath, isContainer } from "./pytree.ts";
import { formatLocation, type SourceLocation, userLocation } from "./source.ts";
import { frameAt, locate } from "../util/user_frame.ts";

// ---- Symbolic inputs ------------------------------------------------------------------------

/** An input of the traced program: an argument tensor or a parameter/buffer of the module. */
export type InputSlot =
  | {
      readonly kind: "arg";
      readonly path: string;
      /** Keys from the argument list to the leaf (args[keys[0]][keys[1]]...). */
      readonly keys: readonly (string | number)[];
      readonly dtype: DType;
      readonly shape: readonly number[];
    }
  | {
      readonly kind: "state";
      readonly path: string;
      /** The module holding it and its property name: read as owner[key] at call time. */
      readonly owner: object;
      readonly key: string;
      readonly parameter: boolean;
      readonly dtype: DType;
      readonly shape: readonly number[];
    }
  | {
      /**
       * A tensor the code reached outside the module tree: an optimizer's parameter or state
       * tensor, a gradient, an optimizer step's numbers. `read` gives it at call time; `access`
       * (when set) is where its dtype and shape guards read it.
       */
      readonly kind: "host";
      readonly path: string;
      readonly read: () => Tensor;
      readonly access: Access | undefined;
      readonly dtype: DType;
      readonly shape: readonly number[];
    };

/** The trace-time stand-in for an input: knows its slot; realizes to its trace-time value. */
export class TracedInputImpl implements TensorImpl {
  readonly kind = "traced-input";
  readonly slot: number;
  readonly value: ConcreteImpl;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** The value as a concrete Tensor, handed to lazy mode in place of the symbolic one. */
  readonly concrete: Tensor;

  constructor(slot: number, value: ConcreteImpl) {
    this.slot = slot;
    this.value = value;
    this.dtype = value.dtype;
    this.shape = value.shape;
    this.concrete = new Tensor(value);
  }
}

registerRealizer("traced-input", (impl) => {
  if (!(impl instanceof TracedInputImpl)) throw new Error(`not a traced input: ${impl.kind}`);
  return impl.value;
});

// ---- The recorded graph ---------------------------------------------------------------------

/** Where a node takes an input from. */
export type Src =
  | { readonly kind: "node"; readonly node: TraceNode; readonly index: number }
  | { readonly kind: "slot"; readonly slot: number }
  | { readonly kind: "const"; readonly impl: ConcreteImpl }
  | { readonly kind: "scalar"; readonly value: Scalar };

export interface TraceNode {
  readonly id: number;
  readonly op: Lowering;
  readonly inputs: readonly Src[];
  readonly attrs: Attrs;
  readonly location: SourceLocation | undefined;
  readonly outputs: readonly { readonly dtype: DType; readonly shape: readonly number[] }[];
  /** Which graph (segment) the node belongs to: the number of breaks before it. */
  readonly segment: number;
}

/** A data-dependent observation: where, how, and after how many recorded ops. */
export interface BreakRecord {
  readonly how: string;
  readonly reason: string;
  readonly location: SourceLocation | undefined;
  /** The segment it ends (0 for the first break). */
  readonly segment: number;
}

/** Why the code cannot be replaced by a program (it then runs in replay mode). */
export interface ReplayReason {
  readonly reason: string;
  readonly location: SourceLocation | undefined;
}

/**
 * A write the program's run must repeat: target[key] = a result, or a primitive; with `impl`,
 * target[key].impl = the result's (an in-place update of the tensor there: an optimizer's).
 */
export interface StateWrite {
  readonly target: object;
  readonly key: string;
  readonly path: string;
  readonly value: { readonly kind: "tensor"; readonly tensor: Tensor } | {
    readonly kind: "primitive";
    readonly value: unknown;
  };
  readonly impl?: true;
}

/** Something a compiled call runs on the host before its program: an optimizer's prepareStep. */
export type PrologueAction = () => void;

// ---- The tracer -----------------------------------------------------------------------------

let nextId = 0;

function isPrimitive(v: unknown): boolean {
  return v === null || (typeof v !== "object" && typeof v !== "function");
}

/** A property's descriptor on the object or its prototype chain. */
function findDescriptor(o: object, key: string): PropertyDescriptor | undefined {
  let p: object | null = o;
  while (p !== null) {
    const d = Object.getOwnPropertyDescriptor(p, key);
    if (d) return d;
    p = Object.getPrototypeOf(p) as object | null;
  }
  return undefined;
}

/** Everything one traced call learned. */
export class Tracer {
  readonly nodes: TraceNode[] = [];
  readonly slots: InputSlot[] = [];
  readonly slotTensors: Tensor[] = [];
  /** Guards from what the code read through the module proxy. */
  readonly reads: GuardSpec[] = [];
  readonly breaks: BreakRecord[] = [];
  readonly unreplayable: ReplayReason[] = [];
  readonly writes: StateWrite[] = [];
  readonly mode: DispatchMode;

  private readonly srcOf = new Map<TensorImpl, Src>();
  private readonly slotByValue = new Map<ConcreteImpl, number>();
  private readonly proxies = new Map<object, object>();
  private readonly targets = new WeakMap<object, object>();
  private readonly pathOf = new Map<object, string>();
  private readonly guarded = new Map<object, Set<string>>();
  private readonly written = new Map<object, Set<string>>();
  private readonly keysGuarded = new Set<object>();
  /** Each written property as it was before the call's first write to it. */
  private readonly before: [object, string, PropertyDescriptor | undefined][] = [];
  private readonly swapped: [Tensor, TensorImpl][] = [];
  /** Each swapped tensor's `.grad` when the trace began (a change is an update: see below). */
  private readonly gradsBefore = new Map<Tensor, Tensor | null>();
  private readonly bufferSlots = new Set<Tensor>();
  /** Concrete values the program took as constants (one cannot become an input later). */
  private readonly usedAsConst = new Set<ConcreteImpl>();
  /** Tensors whose value the program took as a constant, with that value. */
  private readonly constTensors = new Map<Tensor, ConcreteImpl>();
  /** Every tensor made an input (swapped), kept after restore(). */
  private readonly inputTensors = new Set<Tensor>();
  /** Run before the program on every compiled call, in order (optimizer steps' host part). */
  readonly prologue: PrologueAction[] = [];
  /** Optimizers whose step the code ran, with the name their paths start with. */
  private readonly optimizers = new Map<Optimizer, string>();
  private readonly gradWritten = new Set<Tensor>();
  private readonly gradGuarded = new Set<Tensor>();
  /** Undoes the host effects of optimizer steps (a trace at another size is not a real call). */
  private readonly hostUndo: (() => void)[] = [];
  /** In-place updates and `.grad` changes the code made, with the values before (undoWrites). */
  private readonly inPlace: [Tensor, TensorImpl][] = [];
  private readonly gradUndo: [Tensor, Tensor | null][] = [];
  private rng: Uint32Array;
  private readonly inner: DispatchMode;

  /**
   * `realCall`: the trace is the call itself (its effects stay); false for a trace at another
   * size, whose host effects (optimizer step counts) are undone by undoWrites().
   */
  constructor(lazyOptions: LazyOptions, private readonly realCall = true) {
    // The first call's values come from one lazy program of the whole trace: no cuts.
    const max = Number.MAX_SAFE_INTEGER;
    const inner = { ...lazyOptions, maxDepth: max, maxOps: max, cutRepeats: false };
    this.inner = lazyScopeMode(inner);
    this.rng = defaultGenerator.getState();
    this.mode = { name: "trace", run: (op, operands, attrs) => this.record(op, operands, attrs) };
  }

  // ---- Inputs -------------------------------------------------------------------------------

  /** A symbolic tensor for argument leaf `keys` (a fresh Tensor over the realized value). */
  argInput(t: Tensor, keys: readonly (string | number)[], path: string): Tensor {
    const value = t.realize();
    const slot = this.addSlot(
      { kind: "arg", path, keys, dtype: value.dtype, shape: value.shape },
      value,
    );
    const sym = new Tensor(new TracedInputImpl(slot, value));
    this.slotTensors[slot] = sym;
    return sym;
  }

  /**
   * Makes every parameter and buffer of `root`'s tree symbolic for the trace (restore() puts
   * the values back). Paths are `${rootName}.layers[0].weight`.
   */
  swapState(root: NNModule, rootName: string): void {
    const seen = new Set<Tensor>();
    for (const [prefix, m] of root.namedModules()) {
      const base = prefix === "" ? rootName : formatPath(rootName, prefix.split("."));
      const buffers = new Set(m.namedBuffers("", false).map(([k]) => k));
      for (const [k, t] of [...m.namedParameters("", false), ...m.namedBuffers("", false)]) {
        if (seen.has(t)) continue;
        seen.add(t);
        const value = t.realize();
        const slot = this.addSlot(
          {
            kind: "state",
            path: formatPath(base, [k]),
            owner: m,
            key: k,
            parameter: t instanceof Parameter,
            dtype: value.dtype,
            shape: value.shape,
          },
          value,
        );
        if (buffers.has(k)) this.bufferSlots.add(t);
        this.swapped.push([t, t.impl]);
        this.inputTensors.add(t);
        this.gradsBefore.set(t, t.gradRaw);
        t.impl = new TracedInputImpl(slot, value);
        this.slotTensors[slot] = t;
      }
    }
  }

  /** Whether `t` is (still) one of this trace's inputs, and its slot. */
  private slotOf(t: Tensor): number | undefined {
    const impl = t.impl;
    return impl instanceof TracedInputImpl && this.slotTensors[impl.slot] === t ? impl.slot : undefined;
  }

  /** Whether `t` was made an input of the program (its value is read at call time). */
  isInput(t: Tensor): boolean {
    return this.inputTensors.has(t);
  }

  /** Whether `t`'s value is this trace's own (an op recorded here made it). */
  private madeHere(t: Tensor): boolean {
    return this.srcOf.has(t.impl);
  }

  /**
   * Makes tensor `t` (reached outside the module tree) an input read by `read` at call time,
   * unless it already is one or its value was made by this trace. False when it cannot be:
   * its value was already used as a constant.
   */
  private swapTensor(t: Tensor, path: string, read: () => Tensor, access: Access | undefined): boolean {
    if (this.slotOf(t) !== undefined || this.madeHere(t)) return true;
    if (!(t.impl instanceof ConcreteImpl)) return false;
    const value = t.impl;
    if (this.usedAsConst.has(value)) return false;
    const slot = this.addSlot(
      { kind: "host", path, read, access, dtype: value.dtype, shape: value.shape },
      value,
    );
    this.swapped.push([t, value]);
    this.inputTensors.add(t);
    this.gradsBefore.set(t, t.gradRaw);
    t.impl = new TracedInputImpl(slot, value);
    this.slotTensors[slot] = t;
    return true;
  }

  /**
   * An optimizer held by a const free variable or passed as an argument: its parameters become
   * inputs before the code runs (those of the module tree already are), so the forward reads
   * them as the update will write them.
   */
  swapOptimizer(opt: Optimizer, name: string): void {
    if (!this.optimizers.has(opt)) this.optimizers.set(opt, name);
    opt.paramGroups.forEach((g, gi) =>
      g.params.forEach((p, i) => {
        const holder = { p };
        this.swapTensor(p, `${name}.paramGroups[${gi}].params[${i}]`, () => holder.p, {
          root: "ref",
          ref: holder,
          key: "p",
        });
      }),
    );
  }

  /** A tensor held by a const free variable: an input, so in-place updates are outputs. */
  swapFree(t: Tensor, name: string): void {
    const holder = { t };
    this.swapTensor(t, name, () => holder.t, { root: "ref", ref: holder, key: "t" });
  }

  /** The path of an input tensor (for messages and guards). */
  private pathOfTensor(t: Tensor): string {
    const slot = this.slotOf(t);
    return slot !== undefined ? this.slots[slot]!.path : "a tensor";
  }

  /**
   * An optimizer step inside the trace (optim/optimizer.ts's StepHook): the host part runs now
   * and again before every compiled call's program (the prologue); the numbers it returns are
   * ONE program input; the state tensors the update reads become inputs and its in-place
   * updates outputs (noteStateUpdates). The optimizer's captureKey is guarded.
   */
  optimizerStep(opt: Optimizer, params: readonly Tensor[], prepare: () => number[]): Scalars {
    const name = this.optimizers.get(opt) ?? "an optimizer";
    if (!this.optimizers.has(opt)) this.optimizers.set(opt, name);
    if (!this.realCall) this.hostUndo.push(opt.hostSnapshot());
    const location = userLocation();
    for (const p of params) {
      if (this.slotOf(p) !== undefined || this.madeHere(p)) continue;
      this.unreplayable.push({
        reason:
          `${name}.step() updates a tensor the program does not take as input (reach the ` +
          `optimizer from a const variable or an argument, or its parameters from a module)`,
        location,
      });
      break;
    }
    const values = prepare();
    for (const p of params) {
      const st = opt.state.get(p);
      if (st === undefined) continue;
      const base = `${name}.state[${this.pathOfTensor(p)}]`;
      for (const [key, v] of Object.entries(st)) {
        if (!(v instanceof Tensor)) continue;
        const ok = this.swapTensor(v, `${base}.${key}`, () => st[key] as Tensor, {
          root: "ref",
          ref: st,
          key,
        });
        if (!ok) {
          this.unreplayable.push({ reason: `${base}.${key} is not a value the program can read`, location });
        }
      }
    }
    // The numbers: one float32 vector input, filled on each call by running prepare again.
    const holder = { values };
    const vector = (): Tensor =>
      fromStorage("float32", [holder.values.length], Float32Array.from(holder.values));
    const first = vector().realize();
    const slot = this.addSlot(
      {
        kind: "host",
        path: `${name}.step()'s numbers`,
        read: vector,
        access: undefined,
        dtype: "float32",
        shape: first.shape,
      },
      first,
    );
    const sym = new Tensor(new TracedInputImpl(slot, first));
    this.slotTensors[slot] = sym;
    this.prologue.push(() => {
      holder.values = opt.prepareStep(params);
    });
    const picked = new Map<number, Tensor>();
    return (i) => {
      let t = picked.get(i);
      if (t === undefined) picked.set(i, (t = reshape(narrow(sym, 0, i, 1), [])));
      return t;
    };
  }

  /**
   * A random tensor drawn inside the trace (tensor/random.ts's RandomHook): an input the
   * compiled call draws again, from the same generator and in the trace's order, before its
   * program runs, so compiled code consumes the stream as eager code does.
   */
  randomDraw(g: Generator, make: () => Tensor): Tensor {
    if (!this.realCall) {
      const state = g.getState();
      this.hostUndo.push(() => g.setState(state));
    }
    const holder = { t: make() };
    if (g === defaultGenerator) this.rng = defaultGenerator.getState();
    const value = holder.t.realize();
    const slot = this.addSlot(
      {
        kind: "host",
        path: `a random tensor [${value.shape.join(", ")}] drawn at ${formatLocation(userLocation())}`,
        read: () => holder.t,
        access: undefined,
        dtype: value.dtype,
        shape: value.shape,
      },
      value,
    );
    const sym = new Tensor(new TracedInputImpl(slot, value));
    this.slotTensors[slot] = sym;
    this.prologue.push(() => {
      holder.t = make();
    });
    return sym;
  }

  /** Host-only work inside the trace (a scheduler step): runs now and on every compiled call. */
  hostWork(run: () => void, snapshot: () => () => void): void {
    if (!this.realCall) this.hostUndo.push(snapshot());
    run();
    this.prologue.push(run);
  }

  /** A read of `t.grad` (tensor.ts's GradHook) while the code runs. */
  gradRead(t: Tensor): void {
    if (this.gradWritten.has(t)) return;
    const g = t.gradRaw;
    if (this.slotOf(t) !== undefined) {
      if (g === null) {
        if (this.gradGuarded.has(t)) return;
        this.gradGuarded.add(t);
        this.reads.push({
          guard: { kind: "value", path: `${this.pathOfTensor(t)}.grad`, expected: null },
          access: { root: "ref", ref: t, key: "grad" },
          test: "plain",
        });
        return;
      }
      const path = `${this.pathOfTensor(t)}.grad`;
      if (!this.swapTensor(g, path, () => t.gradRaw!, { root: "ref", ref: t, key: "grad" })) {
        this.unreplayable.push({ reason: `${path} is not a value the program can read`, location: userLocation() });
      }
      return;
    }
    if (g !== null && !this.madeHere(t) && !this.madeHere(g) && this.slotOf(g) === undefined) {
      this.unreplayable.push({
        reason:
          `reads the .grad of a tensor the program does not take as input (make it a ` +
          `parameter of a module or of an optimizer the function uses)`,
        location: userLocation(),
      });
    }
  }

  /** A write of `t.grad` while the code runs. */
  gradWrite(t: Tensor): void {
    this.gradWritten.add(t);
    if (this.slotOf(t) !== undefined || this.madeHere(t) || this.isInput(t)) return;
    this.unreplayable.push({
      reason:
        `sets the .grad of a tensor the program does not take as input (make it a parameter ` +
        `of a module or of an optimizer the function uses)`,
      location: userLocation(),
    });
  }

  /**
   * What the code did to its inputs, as writes a compiled call repeats after its program:
   * a replaced value (`p.impl = ...`, an optimizer's in-place update) is written back into the
   * same tensor, a changed `.grad` is set (to a result, or null); the optimizers whose step ran
   * are guarded by captureKey. Checked when the trace ends, before restore().
   */
  noteStateUpdates(freeze: boolean): void {
    for (const [t] of this.swapped) {
      const slot = this.slots[this.slotTensors.indexOf(t)];
      const path = slot?.path ?? "a parameter";
      if (this.slotOf(t) === undefined) {
        if (freeze && slot?.kind === "state") {
          this.unreplayable.push({
            reason: `updates ${path} in place, which freeze: true folds in as a constant`,
            location: undefined,
          });
        }
        const { target, key } = this.writeTarget(t, slot);
        this.writes.push({
          target,
          key,
          path,
          value: { kind: "tensor", tensor: new Tensor(t.impl) },
          impl: true,
        });
      }
      const g = t.gradRaw;
      if (g !== this.gradsBefore.get(t)) {
        this.writes.push({
          target: t,
          key: "grad",
          path: `${path}.grad`,
          value: g === null ? { kind: "primitive", value: null } : { kind: "tensor", tensor: g },
        });
      }
    }
    for (const [t, impl] of this.constTensors) {
      if (t.impl === impl || this.inputTensors.has(t)) continue;
      this.unreplayable.push({
        reason:
          `updates a tensor in place (its impl) whose value the program takes as a constant ` +
          `(make it a parameter of a module, a tensor an optimizer holds, or a const variable)`,
        location: undefined,
      });
      break;
    }
    for (const [opt, name] of this.optimizers) {
      this.reads.push({
        guard: { kind: "value", path: `${name}.captureKey`, expected: opt.captureKey },
        access: { root: "ref", ref: opt, key: "captureKey" },
        test: "plain",
      });
    }
  }

  /** Where an in-place update of input `t` is written back on a compiled call. */
  private writeTarget(t: Tensor, slot: InputSlot | undefined): { target: object; key: string } {
    if (slot?.kind === "state") return { target: slot.owner, key: slot.key };
    if (slot?.kind === "host" && slot.access?.root === "ref" && slot.access.key !== undefined) {
      return { target: slot.access.ref, key: String(slot.access.key) };
    }
    return { target: { t }, key: "t" };
  }

  /**
   * Puts back the values swapState replaced (always called, also after an error). A value the
   * code replaced (an in-place update) and a changed `.grad` stay, as this call's effects;
   * undoWrites() takes them back when a program is to run the call instead.
   */
  restore(): void {
    // The trace's pending ops are its own: not part of any later lazy() region.
    leaveRegion(this.inner);
    for (const [t, impl] of this.swapped) {
      if (t.impl instanceof TracedInputImpl || t.impl instanceof ConcreteImpl) t.impl = impl;
      else this.inPlace.push([t, impl]);
      const before = this.gradsBefore.get(t);
      if (before !== undefined && t.gradRaw !== before) this.gradUndo.push([t, before]);
    }
    this.swapped.length = 0;
  }

  /**
   * Puts written properties, in-place updates and gradients back as they were before the call:
   * a compiled program then runs from the pre-call state and repeats the writes itself. The
   * host effects of optimizer steps stay for the call's own trace (its program's first run
   * skips the prologue, which already ran) and are undone for a trace at another size.
   */
  undoWrites(): void {
    for (const [t, impl] of this.inPlace) t.impl = impl;
    for (const [t, g] of this.gradUndo) t.gradRaw = g;
    this.inPlace.length = 0;
    this.gradUndo.length = 0;
    for (const undo of this.hostUndo.reverse()) undo();
    this.hostUndo.length = 0;
    for (const [target, key, desc] of [...this.before].reverse()) {
      if (desc) Object.defineProperty(target, key, desc);
      else Reflect.deleteProperty(target, key);
    }
  }

  private addSlot(slot: InputSlot, value: ConcreteImpl): number {
    const i = this.slots.length;
    this.slots.push(slot);
    if (!this.slotByValue.has(value)) this.slotByValue.set(value, i);
    return i;
  }

  // ---- Recording ops ------------------------------------------------------------------------

  private srcFor(o: Operand): { src: Src; operand: Operand } {
    if (!(o instanceof Tensor)) return { src: { kind: "scalar", value: o }, operand: o };
    const impl = o.impl;
    if (impl instanceof TracedInputImpl) {
      return { src: { kind: "slot", slot: impl.slot }, operand: impl.concrete };
    }
    const known = this.srcOf.get(impl);
    if (known) return { src: known, operand: o };
    if (impl instanceof ConcreteImpl) {
      const slot = this.slotByValue.get(impl);
      if (slot === undefined) {
        this.usedAsConst.add(impl);
        if (!this.constTensors.has(o)) this.constTensors.set(o, impl);
      }
      const src: Src = slot !== undefined ? { kind: "slot", slot } : { kind: "const", impl };
      return { src, operand: o };
    }
    // A pending value from outside this trace (a lazy tensor made before the call).
    const value = o.realize();
    return { src: { kind: "const", impl: value }, operand: new Tensor(value) };
  }

  private record(op: Lowering, operands: readonly Operand[], attrs: Attrs): Tensor | Tensor[] {
    const location = userLocation();
    this.checkRandom(location);
    const inputs: Src[] = [];
    const lazyOperands: Operand[] = [];
    for (const o of operands) {
      const { src, operand } = this.srcFor(o);
      inputs.push(src);
      lazyOperands.push(operand);
    }
    const out = this.inner.run(op, lazyOperands, attrs);
    const list = Array.isArray(out) ? out : [out];
    const node: TraceNode = {
      id: nextId++,
      op,
      inputs,
      attrs,
      location,
      outputs: list.map((t) => ({ dtype: t.dtype, shape: t.shape })),
      segment: this.breaks.length,
    };
    this.nodes.push(node);
    for (const [i, t] of list.entries()) this.srcOf.set(t.impl, { kind: "node", node, index: i });
    return out;
  }

  /** The source of a tensor the code produced (or was given), for results and writes. */
  srcOfTensor(t: Tensor): Src {
    return this.srcFor(t).src;
  }

  private checkRandom(location: SourceLocation | undefined): void {
    const now = defaultGenerator.getState();
    if (now.every((w, i) => w === this.rng[i])) return;
    this.rng = now;
    this.unreplayable.push({
      reason:
        "draws random numbers from the default generator (rand/randn, dropout in " +
        "training mode); a compiled program would repeat the same values",
      location,
    });
  }

  // ---- Breaks -------------------------------------------------------------------------------

  /** The observe hook (tensor.ts) while this trace runs. */
  observe(t: Tensor, how: string): void {
    const location = userLocation();
    const what =
      how === "valueOf"
        ? "a tensor coerced to a number"
        : how === "realize"
          ? "a tensor's value read directly (realize)"
          : `${how}() on a tensor`;
    this.breaks.push({
      how,
      reason: `${what} (shape [${t.shape.join(", ")}]) reads data: the graph so far runs here`,
      location,
      segment: this.breaks.length,
    });
    this.checkRandom(location);
  }

  // ---- The module proxy ---------------------------------------------------------------------

  /** A Proxy around `m` (a module, or an object reached from one) recording reads and writes. */
  wrap<T extends object>(m: T, path: string): T {
    const known = this.proxies.get(m);
    if (known) return known as T;
    this.pathOf.set(m, path);
    const handler: ProxyHandler<object> = {
      get: (target, key, receiver) => this.onGet(target, key, receiver),
      set: (target, key, value) => this.onSet(target, key, value),
      defineProperty: (target, key, desc) => {
        if ("value" in desc) {
          this.noteWrite(target, key, desc.value);
        } else {
          this.unreplayable.push({
            reason: `defines an accessor ${this.pathFor(target, key)} on a module`,
            location: userLocation(),
          });
        }
        return Reflect.defineProperty(target, key, desc);
      },
      deleteProperty: (target, key) => {
        this.unreplayable.push({
          reason: `deletes ${this.pathFor(target, key)}`,
          location: userLocation(),
        });
        return Reflect.deleteProperty(target, key);
      },
      ownKeys: (target) => {
        const keys = Reflect.ownKeys(target);
        if (!this.keysGuarded.has(target)) {
          this.keysGuarded.add(target);
          const names = Object.keys(target);
          const path = `Object.keys(${this.pathOf.get(target)})`;
          this.reads.push({
            guard: { kind: "value", path, expected: names.join(",") },
            access: { root: "keys", of: { root: "ref", ref: target } },
            test: "plain",
          });
        }
        return keys;
      },
    };
    const p = new Proxy(m, handler);
    this.proxies.set(m, p);
    this.targets.set(p, m);
    return p as T;
  }

  /** The object behind one of this tracer's proxies (the value itself otherwise). */
  unwrap(v: unknown): unknown {
    if (typeof v !== "object" || v === null) return v;
    return this.targets.get(v) ?? v;
  }

  private pathFor(target: object, key: string | symbol): string {
    const base = this.pathOf.get(target) ?? "<object>";
    return typeof key === "string" ? formatPath(base, [key]) : `${base}[${String(key)}]`;
  }

  private once(map: Map<object, Set<string>>, target: object, key: string): boolean {
    let s = map.get(target);
    if (!s) map.set(target, (s = new Set()));
    if (s.has(key)) return false;
    s.add(key);
    return true;
  }

  private onGet(target: object, key: string | symbol, receiver: unknown): unknown {
    const value: unknown = Reflect.get(target, key, receiver);
    if (typeof key === "symbol") return value;
    const desc = findDescriptor(target, key);
    const wasWritten = this.written.get(target)?.has(key) ?? false;
    if (desc === undefined || !("value" in desc) || wasWritten) {
      // A getter's own reads went through the proxy (its receiver); an absent property or one
      // this call wrote says nothing about the state before the call.
      if (desc === undefined && !wasWritten && this.once(this.guarded, target, key)) {
        this.guard(target, key, "value", undefined);
      }
      return this.wrapReached(value, this.pathFor(target, key));
    }
    const own = Object.hasOwn(target, key);
    if (isPrimitive(value)) {
      if (this.once(this.guarded, target, key)) this.guard(target, key, "value", value);
      return value;
    }
    if (typeof value === "function") {
      if (own && this.once(this.guarded, target, key)) this.guard(target, key, "identity", value);
      return value;
    }
    if (value instanceof Tensor) {
      // Buffers are replaced by loadStateDict and read by path at call time: shape and dtype
      // guard them. Parameters and other tensors are guarded by identity.
      if (!this.bufferSlots.has(value) && this.once(this.guarded, target, key)) {
        this.guard(target, key, "identity", value);
      }
      return value;
    }
    if (this.once(this.guarded, target, key)) this.guard(target, key, "identity", value);
    return this.wrapReached(value, this.pathFor(target, key));
  }

  /** Modules and plain containers reached from a module are wrapped too. */
  private wrapReached(value: unknown, path: string): unknown {
    if (value instanceof NNModule || (isContainer(value) && !Object.isFrozen(value))) {
      return this.wrap(value as object, path);
    }
    return value;
  }

  private guard(target: object, key: string, kind: "value" | "identity", expected: unknown) {
    this.reads.push({
      guard: { kind, path: this.pathFor(target, key), expected },
      access: { root: "ref", ref: target, key },
      test: "plain",
    });
  }

  private onSet(target: object, key: string | symbol, value: unknown): boolean {
    this.noteWrite(target, key, value);
    return Reflect.set(target, key, this.unwrap(value));
  }

  private noteWrite(target: object, key: string | symbol, raw: unknown): void {
    const location = userLocation();
    const path = this.pathFor(target, key);
    if (typeof key === "symbol") {
      this.unreplayable.push({ reason: `writes ${path} (a symbol-keyed property)`, location });
      return;
    }
    if (this.once(this.written, target, key)) {
      this.before.push([target, key, Object.getOwnPropertyDescriptor(target, key)]);
    }
    const value = this.unwrap(raw);
    if (value instanceof Tensor) {
      this.writes.push({ target, key, path, value: { kind: "tensor", tensor: value } });
    } else if (isPrimitive(value)) {
      this.writes.push({ target, key, path, value: { kind: "primitive", value } });
    } else {
      this.unreplayable.push({
        reason:
          `writes ${path} (${describeObject(value)}); only tensors and primitives written to ` +
          `modules can be replayed after a compiled program`,
        location,
      });
    }
  }

  // ---- Argument containers ------------------------------------------------------------------

  /**
   * A Proxy over a COPY of an argument container: writes go to the copy and to the caller's
   * original (so this call behaves as eager code would), and make the function unreplayable.
   */
  wrapArgContainer<T extends object>(copy: T, original: T, path: string): T {
    const note = (key: string | symbol, what: string) =>
      this.unreplayable.push({
        reason: `${what} ${typeof key === "string" ? formatPath(path, [key]) : path} ` +
          `(mutates an argument)`,
        location: userLocation(),
      });
    return new Proxy(copy, {
      set: (target, key, value) => {
        note(key, "writes");
        Reflect.set(original, key, value);
        return Reflect.set(target, key, value);
      },
      deleteProperty: (target, key) => {
        note(key, "deletes");
        Reflect.deleteProperty(original, key);
        return Reflect.deleteProperty(target, key);
      },
      defineProperty: (target, key, desc) => {
        note(key, "defines");
        Reflect.defineProperty(original, key, desc);
        return Reflect.defineProperty(target, key, desc);
      },
    });
  }
}

function describeObject(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (typeof v === "function") return "a function";
  const name = (v as { constructor?: { name?: string } }).constructor?.name;
  return name && name !== "Object" ? `a ${name}` : "an object";
}

// ---- Building the program -------------------------------------------------------------------

/** How a program parameter is fed at call time. */
export type Binding =
  | { readonly kind: "slot"; readonly slot: number }
  | { readonly kind: "const"; readonly impl: ConcreteImpl }
  | { readonly kind: "scalar"; readonly value: Scalar };

export interface Program {
  readonly module: Module;
  readonly bindings: readonly Binding[];
  /** Results in order: one per distinct node output asked for, then three per index check. */
  readonly results: number;
  /** The position among results of each requested src (by requested order). */
  readonly resultIndex: readonly number[];
  /** Ops lowered into the program. */
  readonly ops: number;
  /** Index checks (tensor/index_checks.ts): their results follow the requested ones. */
  readonly checks: readonly IndexCheck[];
}

function srcKey(s: Src): string | undefined {
  switch (s.kind) {
    case "node":
      return `n${s.node.id}.${s.index}`;
    case "slot":
      return `s${s.slot}`;
    case "const":
    case "scalar":
      return undefined;
    default: {
      const never: never = s;
      throw new Error(`unknown src ${String(never)}`);
    }
  }
}

/**
 * The IR module computing `requested` (node outputs) from the slots, constants and scalars
 * they need. Only the live part of the trace is lowered; metadata carries the op and the
 * user's source location. `freeze` folds parameters and buffers in as constants.
 */
export function buildProgram(
  name: string,
  requested: readonly Src[],
  slotValue: (slot: number) => Tensor,
  slots: readonly InputSlot[],
  freeze: boolean,
  checkIndices = true,
): Program {
  const live = new Set<TraceNode>();
  const stack: TraceNode[] = [];
  for (const r of requested) {
    if (r.kind === "node" && !live.has(r.node)) {
      live.add(r.node);
      stack.push(r.node);
    }
  }
  while (stack.length > 0) {
    for (const s of stack.pop()!.inputs) {
      if (s.kind === "node" && !live.has(s.node)) {
        live.add(s.node);
        stack.push(s.node);
      }
    }
  }
  const order = [...live].sort((a, b) => a.id - b.id);
  const bindings: Binding[] = [];
  const bindingOf = new Map<string | ConcreteImpl, number>();
  const bindingFor = (s: Src): number | undefined => {
    if (s.kind === "node") return undefined;
    if (s.kind === "scalar") {
      bindings.push({ kind: "scalar", value: s.value });
      return bindings.length - 1;
    }
    const k = s.kind === "slot" ? `s${s.slot}` : s.impl;
    let i = bindingOf.get(k);
    if (i === undefined) {
      i = bindings.length;
      bindings.push(s.kind === "slot" ? { kind: "slot", slot: s.slot } : s);
      bindingOf.set(k, i);
    }
    return i;
  };
  const nodeBindings = order.map((n) => n.inputs.map(bindingFor));
  const resultIndex: number[] = [];
  const resultSrcs: Src[] = [];
  const seen = new Map<string, number>();
  for (const r of requested) {
    const k = srcKey(r)!;
    let i = seen.get(k);
    if (i === undefined) {
      i = resultSrcs.length;
      resultSrcs.push(r);
      seen.set(k, i);
    }
    resultIndex.push(i);
  }
  const mb = new ModuleBuilder(name);
  const checks = checkIndices ? collectIndexChecks(mb) : undefined;
  mb.entry("main", (b) => {
    const params = bindings.map((bd) => {
      switch (bd.kind) {
        case "slot": {
          const t = slotValue(bd.slot);
          const slot = slots[bd.slot]!;
          // A frozen weight: the literal it would have been passed, as a constant.
          if (freeze && slot.kind === "state") return b.constant(operandLiteral(t));
          return operandParameter(b, t);
        }
        case "const":
          return operandParameter(b, new Tensor(bd.impl));
        case "scalar":
          return operandParameter(b, bd.value);
        default: {
          const never: never = bd;
          throw new Error(`unknown binding ${String(never)}`);
        }
      }
    });
    const values = new Map<TraceNode, Instruction[]>();
    for (const [i, n] of order.entries()) {
      const ins = n.inputs.map((s, j) =>
        s.kind === "node" ? values.get(s.node)![s.index]! : params[nodeBindings[i]![j]!]!,
      );
      const meta = n.location
        ? {
            sourceFile: formatLocation(n.location).replace(/:\d+:\d+$/, ""),
            sourceLine: n.location.line,
            sourceColumn: n.location.column,
          }
        : {};
      let out: Instruction | Instruction[];
      try {
        out = lowerOp(b, n.op, ins, n.attrs, meta);
      } catch (e) {
        // The stack now is the compiled call's; the op's own line was recorded when traced.
        throw e instanceof Error && n.location ? locate(e, frameAt(n.location)) : e;
      }
      values.set(n, Array.isArray(out) ? out : [out]);
    }
    const results = resultSrcs.map((r) => {
      if (r.kind !== "node") throw new Error("buildProgram: only node outputs are results");
      return values.get(r.node)![r.index]!;
    });
    if (checks) results.push(...checks.outputs);
    return results.length === 1 ? results[0]! : b.tuple(results);
  });
  const module = mb.build();
  // Frozen slots are constants now, not parameters: drop their bindings.
  const kept = freeze
    ? bindings.filter((bd) => !(bd.kind === "slot" && slots[bd.slot]!.kind === "state"))
    : bindings;
  return {
    module,
    bindings: kept,
    results: resultSrcs.length + (checks?.outputs.length ?? 0),
    resultIndex,
    ops: order.length,
    checks: checks?.checks ?? [],
  };
}
