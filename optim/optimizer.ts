// The optimizer base (PyTorch's torch.optim.Optimizer): parameter groups with per-group
// hyperparameters, per-parameter state, zeroGrad(), and stateDict()/loadStateDict() in PyTorch's
// layout (state keyed by the parameter's index across groups, param_groups listing indices).
// Updates replace each parameter's impl in place (as Module.loadStateDict does); hyperparameters
// reach the ops as 0-d float32 tensors (`hyper`), runtime operands of one op-cache key whatever
// their value, so a changing lr or step count compiles nothing new.

import { tensor, zerosLike } from "../tensor/creation.ts";
import { noGrad } from "../tensor/autograd.ts";
import { neg } from "../tensor/ops/core.ts";
import { Tensor } from "../tensor/tensor.ts";

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

function isGroupInput(x: unknown): x is ParamGroupInput {
  return typeof x === "object" && x !== null && !(x instanceof Tensor) && "params" in x;
}

export abstract class Optimizer {
  readonly paramGroups: ParamGroup[] = [];
  readonly defaults: GroupOptions;
  state = new Map<Tensor, ParamState>();

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

  /**
   * One update of every parameter whose grad is not null. Runs under noGrad, as PyTorch's
   * optimizers do: an update is not part of any graph (without it each update of a parameter
   * that requires grad would record a node on a result that is thrown away).
   */
  step(): void {
    noGrad(() => this.update());
  }

  /** The update itself (what step() runs under noGrad). */
  protected abstract update(): void;

  protected num(group: ParamGroup, key: string): number {
    const v = group[key];
    if (typeof v !== "number") throw new Error(`group option '${key}' is not a number`);
    return v;
  }

  protected flag(group: ParamGroup, key: string): boolean {
    return group[key] === true;
  }

  /**
   * The group's parameters that have a gradient, each with the gradient its update follows
   * (negated under `maximize`); PyTorch skips a parameter whose grad is None.
   */
  protected *withGrads(group: ParamGroup): Generator<[Tensor, Tensor]> {
    const maximize = this.flag(group, "maximize");
    for (const p of group.params) {
      if (p.grad !== null) yield [p, maximize ? neg(p.grad) : p.grad];
    }
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
      state.set(p, { ...s });
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
