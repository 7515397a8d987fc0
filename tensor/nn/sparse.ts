// Embedding (PyTorch's torch/nn/modules/sparse.py): a lookup table `weight`
// [numEmbeddings, embeddingDim] drawn from the standard normal, with the `paddingIdx` row zeroed
// as PyTorch initialises it. paddingIdx only matters for training in PyTorch (its gradient is
// zero); forward is ops.embedding.

import { type CallForms, p, parseArgs } from "../args.ts";
import { ArgumentError } from "../errors.ts";
import * as ops from "../ops/index.ts";
import { fromStorage, type Tensor } from "../tensor.ts";
import { normal } from "./init.ts";
import { Module, Parameter } from "./module.ts";

const embeddingSig = [
  p.int("numEmbeddings", { min: 0 }),
  p.int("embeddingDim", { min: 0 }),
  p.int("paddingIdx").optional(),
] as const;

/** `new Embedding(10, 3, { paddingIdx: 0 })`; forward maps int64/int32 indices to rows. */
export class Embedding extends Module {
  readonly numEmbeddings: number;
  readonly embeddingDim: number;
  /** Normalized to [0, numEmbeddings) as PyTorch stores it; null when not given. */
  readonly paddingIdx: number | null;
  weight: Parameter;

  constructor(...args: CallForms<typeof embeddingSig>) {
    super();
    const layer = new.target.name;
    const a = parseArgs(layer, embeddingSig, args);
    const n = a.numEmbeddings;
    let pad = a.paddingIdx ?? null;
    if (pad !== null) {
      if (pad < -n || pad >= n) {
        throw new ArgumentError(
          layer,
          "paddingIdx",
          `must be within [-${n}, ${n}) (numEmbeddings ${n}), got ${pad}`,
        );
      }
      if (pad < 0) pad += n;
    }
    this.numEmbeddings = n;
    this.embeddingDim = a.embeddingDim;
    this.paddingIdx = pad;
    const w = normal([n, a.embeddingDim]);
    if (pad === null) {
      this.weight = new Parameter(w);
    } else {
      const values = w.data() as Float32Array;
      values.fill(0, pad * a.embeddingDim, (pad + 1) * a.embeddingDim);
      this.weight = new Parameter(fromStorage("float32", [n, a.embeddingDim], values));
    }
  }

  forward(input: Tensor): Tensor {
    return ops.embedding(input, this.weight);
  }

  override extraRepr(): string {
    let s = `${this.numEmbeddings}, ${this.embeddingDim}`;
    if (this.paddingIdx !== null) s += `, padding_idx=${this.paddingIdx}`;
    return s;
  }
}
