// Activation modules (PyTorch's torch/nn/modules/activation.py): ReLU, GELU, SiLU, Tanh,
// Sigmoid, Softmax — each a thin module around its op, with PyTorch's constructor arguments
// and repr. `inplace` is accepted for parity and only shows in the repr (Kiln tensors are
// immutable).

import { type CallForms, p, parseArgs } from "../args.ts";
import * as ops from "../ops/index.ts";
import type { Tensor } from "../tensor.ts";
import { Module } from "./module.ts";

const inplaceSig = [p.bool("inplace").default(false)] as const;

/** max(x, 0). */
export class ReLU extends Module {
  readonly inplace: boolean;

  constructor(...args: CallForms<typeof inplaceSig>) {
    super();
    this.inplace = parseArgs(new.target.name, inplaceSig, args).inplace;
  }

  forward(input: Tensor): Tensor {
    return ops.relu(input);
  }

  override extraRepr(): string {
    return this.inplace ? "inplace=True" : "";
  }
}

const geluSig = [p.oneOf("approximate", ["none", "tanh"]).default("none")] as const;

/** GELU, exact (erf) or with the tanh approximation. */
export class GELU extends Module {
  readonly approximate: "none" | "tanh";

  constructor(...args: CallForms<typeof geluSig>) {
    super();
    this.approximate = parseArgs(new.target.name, geluSig, args).approximate;
  }

  forward(input: Tensor): Tensor {
    return ops.gelu(input, { approximate: this.approximate });
  }

  override extraRepr(): string {
    return `approximate='${this.approximate}'`;
  }
}

/** x * sigmoid(x). */
export class SiLU extends Module {
  readonly inplace: boolean;

  constructor(...args: CallForms<typeof inplaceSig>) {
    super();
    this.inplace = parseArgs(new.target.name, inplaceSig, args).inplace;
  }

  forward(input: Tensor): Tensor {
    return ops.silu(input);
  }

  override extraRepr(): string {
    return this.inplace ? "inplace=True" : "";
  }
}

export class Tanh extends Module {
  forward(input: Tensor): Tensor {
    return ops.tanh(input);
  }
}

export class Sigmoid extends Module {
  forward(input: Tensor): Tensor {
    return ops.sigmoid(input);
  }
}

const softmaxSig = [p.int("dim").optional()] as const;

/**
 * Softmax along `dim`. Without a dim it picks PyTorch's legacy implicit one (0 for 0-, 1- and
 * 3-dim inputs, else 1); pass a dim.
 */
export class Softmax extends Module {
  readonly dim: number | null;

  constructor(...args: CallForms<typeof softmaxSig>) {
    super();
    this.dim = parseArgs(new.target.name, softmaxSig, args).dim ?? null;
  }

  forward(input: Tensor): Tensor {
    const n = input.ndim;
    const dim = this.dim ?? (n === 0 || n === 1 || n === 3 ? 0 : 1);
    return ops.softmax(input, dim);
  }

  override extraRepr(): string {
    return `dim=${this.dim === null ? "None" : this.dim}`;
  }
}
