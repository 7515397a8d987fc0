// The optimizer base (PyTorch's torch.optim.Optimizer): parameter groups with per-group
// hyperparameters, per-parameter state, zeroGrad(), and stateDict()/loadStateDict() in PyTorch's
// layout (state keyed by the parameter's index across groups, param_groups listing indices).
// A step has two parts, so that compile() can capture it as part of one program (PyTorch's
// `capturable` optimizers): `prepareStep` on the host — state initialization, step counts, and
// every number the update uses (lr, betas, bias corrections), computed in float64 as PyTorch
// computes them — and `update`, tensor work only, reading those numbers as 0-d float32 operands
// and updating parameters and state tensors in place (their impl). In eager and lazy mode each
// number is `hyper(v)`, a runtime operand of one op-cache key whatever its value (a changing lr
// compiles nothing new); under compile() the trace makes them one program input that the compiled
// call fills by running prepareStep again (compiler/trace.ts), and guards `captureKey`, what the
// update's code branches on.

import { runModuleCall } from "../tensor/module_calls.ts";
import { tensor, zerosLike } from "../tensor/creation.ts";
import { noGrad } from "../tensor/autograd.ts";
import { allocateStorage } from "../tensor/dtype.ts";
import { neg } from "../tensor/ops/core.ts";
import { fromStorage, Tensor } from "../tensor/tensor.ts";

export type Hyper = number | boolean | readonly number[];
export type GroupOptions = Record<string, Hyper>;

/** One parameter group: its parameters and hyperparameters (lr and the optimizer's own). */
export interface ParamGroup {
  params: Tensor[];
  [option: string]: Hyper | Tensor[];
}

export interface ParamGroupInput {
  params: Iterable<Tensor>;
  [option: string]: Hyper | Iterable<Tensor> | undefined;
}

/** A parameter's state; null where PyTorch keeps None (SGD's buffer without momentum). */
export type ParamState = Record<string, Tensor | number | null>;

export interface OptimizerStateDict {
  state: Record<number, ParamState>;
  param_groups: Array<Record<string, Hyper | number[]>>;
}

/** How an update reads its numbers: the i-th value prepareStep returned, as a 0-d operand. */
export type Scalars = (i: number) => Tensor;

/** What compile()'s trace does with an optimizer step (compiler/trace.ts). */
export interface StepHook {
  /** Runs `prepare` (the host part) and says how the update reads the values it returns. */
  step(opt: Optimizer, params: readonly Tensor[], prepare: () => number[]): Scalars;
  /**
   * Host-only work (an LR scheduler's step): runs it now and on every compiled call, before
   * the program; `snapshot` saves what it changes and returns what puts it back.
   */
  host(run: () => void, snapshot: () => () => void): void;
}

let stepHook: StepHook | undefined;

let hostDepth = 0;

/**
 * Runs host-only training work (a scheduler step) as a compiled step must repeat it: inside a
 * trace, once as a whole — host work it calls itself (SequentialLR stepping LinearLR) is part
 * of it, not a second prologue action.
 */
export function runHostWork(run: () => void, snapshot: () => () => void): void {
  const whole = () => {
    hostDepth++;
    try {
      run();
    } finally {
      hostDepth--;
    }
  };
  if (stepHook !== undefined && hostDepth === 0) stepHook.host(whole, snapshot);
  else whole();
}

/** Sets the optimizer-step hook (compile()'s tracer); returns the previous one. */
export function setStepHook(h: StepHook | undefined): StepHook | undefined {
  const saved = stepHook;
  stepHook = h;
  return saved;
}

function isGroupInput(x: unknown): x is ParamGroupInput {
  return typeof x === "object" && x !== null && !(x instanceof Tensor) && "params" in x;
}

export abstract class Optimizer {
  readonly paramGroups: ParamGroup[] = [];
  readonly defaults: GroupOptions;
  private stateMap = new Map<Tensor, ParamState>();
  /** Counts replacements of the state and new entries in it (part of captureKey). */
  private stateEpoch = 0;
  private readonly groupByParam = new Map<Tensor, ParamGroup>();

  constructor(params: Iterable<Tensor> | Iterable<ParamGroupInput>, defaults: GroupOptions) {
    this.defaults = defaults;
    const list = [...(params as Iterable<Tensor | ParamGroupInput>)];
    if (list.length === 0) throw new Error("optimizer got an empty parameter list");
    const groups: ParamGroupInput[] = isGroupInput(list[0])
      ? (list as ParamGroupInput[])
      : [{ params: list as Tensor[] }];
    for (const g of groups) this.addParamGroup(g);
  }

  addParamGroup(group: ParamGroupInput): void {
    const params = [...group.params];
    const seen = new Set(this.paramGroups.flatMap((g) => g.params));
    for (const p of params) {
      if (!(p instanceof Tensor)) throw new Error("optimizer params must be Tensors");
      if (seen.has(p)) throw new Error("some parameters appear in more than one group");
      seen.add(p);
    }
    const out: ParamGroup = { params };
    for (const [k, v] of Object.entries(this.defaults)) out[k] = v;
    for (const [k, v] of Object.entries(group)) {
      if (k !== "params" && v !== undefined) out[k] = v as Hyper;
    }
    this.validate(out);
    this.paramGroups.push(out);
    for (const p of params) this.groupByParam.set(p, out);
  }

  protected validate(_group: ParamGroup): void {}

  /** Sets every parameter's grad to null (setToNone, PyTorch's default) or to zeros. */
  zeroGrad(setToNone = true): void {
    for (const g of this.paramGroups) {
      for (const p of g.params) {
        if (p.grad === null) continue;
        if (setToNone) p.grad = null;
        else p.grad = new Tensor(zerosImpl(p.grad));
      }
    }
  }

  /** Per-parameter state (replacing it, as loadStateDict does, is seen by compiled steps). */
  get state(): Map<Tensor, ParamState> {
    return this.stateMap;
  }

  set state(m: Map<Tensor, ParamState>) {
    this.stateMap = m;
    this.stateEpoch++;
  }

  /**
   * One update of every parameter whose grad is not null. Runs under noGrad, as PyTorch's
   * optimizers do: an update is not part of any graph (without it each update of a parameter
   * that requires grad would record a node on a result that is thrown away).
   */
  step(): void {
    noGrad(() => {
      const params = this.paramGroups.flatMap((g) => g.params.filter((p) => p.grad !== null));
      const hook = stepHook;
      let scalars: Scalars;
      if (hook !== undefined) scalars = hook.step(this, params, () => this.prepareStep(params));
      else {
        const values = this.prepareStep(params);
        scalars = (i) => hyper(values[i]!);
      }
      // One call for lazy mode's cuts (tensor/module_calls.ts): the same update per parameter
      // is not a loop's iterations.
      runModuleCall(() => this.update(params, scalars));
    });
  }

  /**
   * The host part of a step over `params` (the ones with a grad, in group order): creates
   * missing state, advances step counts, and returns the numbers the update reads, in the
   * order `update` reads them. A compiled step calls it once per call before its program runs.
   */
  abstract prepareStep(params: readonly Tensor[]): number[];

  /** The tensor part of a step: updates params and state tensors in place (their impl). */
  protected abstract update(params: readonly Tensor[], scalars: Scalars): void;

  /**
   * What the update's code branches on (per group: its size and flags such as amsgrad or a
   * nonzero weight decay; the state's epoch): a compiled step guards it, so changing a flag
   * retraces while changing a number (lr, betas) only changes a program input.
   */
  get captureKey(): string {
    const groups = this.paramGroups.map((g) => `${g.params.length}:${this.structure(g)}`);
    return `${this.constructor.name}#${this.stateEpoch}|${groups.join(";")}`;
  }

  /** The group's options that change the update's code, as a string. */
  protected abstract structure(group: ParamGroup): string;

  /** The group holding `p`. */
  protected groupOf(p: Tensor): ParamGroup {
    const g = this.groupByParam.get(p);
    if (g === undefined) throw new Error("a parameter no group lists");
    return g;
  }

  /** The gradient `p`'s update follows: negated under `maximize`. */
  protected gradOf(p: Tensor, group: ParamGroup): Tensor {
    return this.flag(group, "maximize") ? neg(p.grad!) : p.grad!;
  }

  /**
   * Saves the host side of the state (entries, step counts, which tensor each entry holds) and
   * returns what puts it back, epoch included: a trace at another size runs prepareStep without
   * being a real step (compiler/trace.ts).
   */
  hostSnapshot(): () => void {
    const map = this.stateMap;
    const entries = [...map].map(([p, st]) => [p, st, { ...st }] as const);
    const epoch = this.stateEpoch;
    return () => {
      map.clear();
      for (const [p, st, saved] of entries) {
        for (const k of Object.keys(st)) if (!(k in saved)) delete st[k];
        Object.assign(st, saved);
        map.set(p, st);
      }
      this.stateMap = map;
      this.stateEpoch = epoch;
    };
  }

  /** A new state entry (seen by compiled steps through captureKey). */
  protected initState(p: Tensor, st: ParamState): ParamState {
    this.stateMap.set(p, st);
    this.stateEpoch++;
    return st;
  }

  protected num(group: ParamGroup, key: string): number {
    const v = group[key];
    if (typeof v !== "number") throw new Error(`group option '${key}' is not a number`);
    return v;
  }

  protected flag(group: ParamGroup, key: string): boolean {
    return group[key] === true;
  }

  stateDict(): OptimizerStateDict {
    const index = new Map<Tensor, number>();
    const param_groups: OptimizerStateDict["param_groups"] = [];
    for (const g of this.paramGroups) {
      const entry: Record<string, Hyper | number[]> = {};
      for (const [k, v] of Object.entries(g)) if (k !== "params") entry[k] = v as Hyper;
      entry.params = g.params.map((p) => {
        const i = index.size;
        index.set(p, i);
        return i;
      });
      param_groups.push(entry);
    }
    const state: Record<number, ParamState> = {};
    for (const [p, s] of this.state) {
      const i = index.get(p);
      if (i !== undefined) state[i] = { ...s };
    }
    return { state, param_groups };
  }

  loadStateDict(sd: OptimizerStateDict): void {
    if (sd.param_groups.length !== this.paramGroups.length) {
      throw new Error(
        `state dict has ${sd.param_groups.length} groups, the optimizer ${this.paramGroups.length}`,
      );
    }
    const byIndex = new Map<number, Tensor>();
    sd.param_groups.forEach((saved, gi) => {
      const g = this.paramGroups[gi];
      const ids = saved.params as number[];
      if (ids.length !== g.params.length) {
        throw new Error(`group ${gi}: ${ids.length} saved params, ${g.params.length} here`);
      }
      ids.forEach((id, j) => byIndex.set(id, g.params[j]));
    });
    const state = new Map<Tensor, ParamState>();
    for (const [k, s] of Object.entries(sd.state)) {
      const p = byIndex.get(Number(k));
      if (!p) throw new Error(`state for parameter ${k}, which no group lists`);
      // Copies, as PyTorch's deepcopy: updates are in place, so a shared tensor would make two
      // optimizers (or the dict and this one) move together. A new Tensor over the same value
      // is a copy here: an in-place update replaces the impl, never its storage.
      const copy: ParamState = {};
      for (const [key, v] of Object.entries(s)) copy[key] = v instanceof Tensor ? new Tensor(v.impl) : v;
      state.set(p, copy);
    }
    sd.param_groups.forEach((saved, gi) => {
      const g = this.paramGroups[gi];
      for (const [k, v] of Object.entries(saved)) if (k !== "params") g[k] = v as Hyper;
    });
    this.state = state;
  }
}

/**
 * A hyperparameter as an op operand: a 0-d float32 tensor. A plain JS number that happens to be
 * integral (lr 1, momentum 0) would be an int64 scalar operand, a different op-cache key, so
 * changing lr to 1 would compile new programs; a 0-d tensor keys as float32[] whatever its value,
 * and, being 0-d, does not promote a float16 or bfloat16 parameter (PyTorch's rule).
 */
export function hyper(v: number): Tensor {
  return tensor(v, { dtype: "float32" });
}

function zerosImpl(t: Tensor) {
  return zerosLike(t).impl;
}

/**
 * A zero tensor like `p`, made on the host (not an op): state created inside a compiled step's
 * trace must be a value the program reads, not one it computes.
 */
export function zeroState(p: Tensor): Tensor {
  const n = p.shape.reduce((a, b) => a * b, 1);
  return fromStorage(p.dtype, p.shape, allocateStorage(p.dtype, n, "optimizer state"));
}
