// Dropout (PyTorch's torch/nn/modules/dropout.py): in training mode zeroes each element with
// probability p and scales the rest by 1/(1-p) (ops.dropout, seeded by manualSeed); in eval
// mode returns its input. `inplace` is accepted for PyTorch parity and only shows in the repr:
// Kiln tensors are immutable, so there is nothing to do in place.

import { type CallForms, p, parseArgs } from "../args.ts";
import * as ops from "../ops/index.ts";
import type { Tensor } from "../tensor.ts";
import { probability } from "./layer_args.ts";
import { Module } from "./module.ts";
import { pyBool, pyFloat } from "./repr.ts";

const dropoutSig = [probability("p").default(0.5), p.bool("inplace").default(false)] as const;

export class Dropout extends Module {
  readonly p: number;
  readonly inplace: boolean;

  constructor(...args: CallForms<typeof dropoutSig>) {
    super();
    const a = parseArgs(new.target.name, dropoutSig, args);
    this.p = a.p;
    this.inplace = a.inplace;
  }

  forward(input: Tensor): Tensor {
    return ops.dropout(input, { p: this.p, training: this.training });
  }

  override extraRepr(): string {
    return `p=${pyFloat(this.p)}, inplace=${pyBool(this.inplace)}`;
  }
}
