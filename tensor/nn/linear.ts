// Linear and Identity (PyTorch's torch/nn/modules/linear.py). Linear holds `weight`
// [outFeatures, inFeatures] and `bias` [outFeatures] under PyTorch's names and initialisation
// (kaiming_uniform with a = sqrt(5), bias uniform on +-1/sqrt(inFeatures)); forward is
// ops.linear.

import { type CallForms, p, parseArgs } from "../args.ts";
import * as ops from "../ops/index.ts";
import type { Tensor } from "../tensor.ts";
import { fanInUniform, kaimingUniform } from "./init.ts";
import { Module, Parameter } from "./module.ts";
import { pyBool } from "./repr.ts";

/** Returns its input; takes (and ignores) any constructor arguments, as PyTorch's. */
export class Identity extends Module {
  constructor(..._args: unknown[]) {
    super();
  }

  forward(input: Tensor): Tensor {
    return input;
  }
}

const linearSig = [
  p.int("inFeatures", { min: 0 }),
  p.int("outFeatures", { min: 0 }),
  p.bool("bias").default(true),
] as const;

/** y = x W^T + b: `new Linear(4, 8)`, `new Linear(4, 8, { bias: false })`. */
export class Linear extends Module {
  readonly inFeatures: number;
  readonly outFeatures: number;
  weight: Parameter;
  bias: Parameter | null;

  constructor(...args: CallForms<typeof linearSig>) {
    super();
    const a = parseArgs(new.target.name, linearSig, args);
    this.inFeatures = a.inFeatures;
    this.outFeatures = a.outFeatures;
    this.weight = new Parameter(kaimingUniform([a.outFeatures, a.inFeatures]));
    this.bias = a.bias ? new Parameter(fanInUniform([a.outFeatures], a.inFeatures)) : null;
  }

  forward(input: Tensor): Tensor {
    return ops.linear(input, this.weight, this.bias);
  }

  override extraRepr(): string {
    return (
      `in_features=${this.inFeatures}, out_features=${this.outFeatures}, ` +
      `bias=${pyBool(this.bias !== null)}`
    );
  }
}
