// Flatten (PyTorch's torch/nn/modules/flatten.py): merges dims startDim..endDim (default 1..-1,
// keeping the batch dim) with ops.flatten.

import { type CallForms, p, parseArgs } from "../args.ts";
import * as ops from "../ops/index.ts";
import type { Tensor } from "../tensor.ts";
import { Module } from "./module.ts";

const flattenSig = [p.int("startDim").default(1), p.int("endDim").default(-1)] as const;

export class Flatten extends Module {
  readonly startDim: number;
  readonly endDim: number;

  constructor(...args: CallForms<typeof flattenSig>) {
    super();
    const a = parseArgs(new.target.name, flattenSig, args);
    this.startDim = a.startDim;
    this.endDim = a.endDim;
  }

  forward(input: Tensor): Tensor {
    return ops.flatten(input, this.startDim, this.endDim);
  }

  override extraRepr(): string {
    return `start_dim=${this.startDim}, end_dim=${this.endDim}`;
  }
}
