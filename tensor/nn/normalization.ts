// Normalization layers (PyTorch's normalization.py and batchnorm.py): LayerNorm, RMSNorm,
// GroupNorm, BatchNorm2d. Parameter and buffer names are PyTorch's state-dict keys (`weight`,
// `bias`, `running_mean`, `running_var`, `num_batches_tracked`), so those properties are
// snake_case. BatchNorm2d in training mode normalizes with the batch statistics and then
// replaces its running-statistics buffers as PyTorch updates them in place: running =
// (1 - momentum) * running + momentum * batch (the unbiased variance), with momentum null
// meaning the cumulative average 1 / num_batches_tracked. That update records no gradient
// (noGrad; PyTorch's in-place update is outside autograd too): buffers never require grad, and
// a step's activations are not kept alive by the next step's running statistics.

import { type CallForms, isOptionsObject, p, parseArgs, problem } from "../args.ts";
import { noGrad } from "../autograd.ts";
import { OpError } from "../errors.ts";
import { ones, tensor, zeros } from "../creation.ts";
import * as ops from "../ops/index.ts";
import { shapeString } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { nonNegative, shapeParam } from "./layer_args.ts";
import { Module, Parameter } from "./module.ts";
import { pyBool, pyFloat, pyRepr } from "./repr.ts";

const layerNormSig = [
  shapeParam("normalizedShape"),
  nonNegative("eps").default(1e-5),
  p.bool("elementwiseAffine").default(true),
  p.bool("bias").default(true),
] as const;

/** Normalizes over the last dims (`normalizedShape`), then scales and shifts. */
export class LayerNorm extends Module {
  readonly normalizedShape: number[];
  readonly eps: number;
  readonly elementwiseAffine: boolean;
  weight: Parameter | null;
  bias: Parameter | null;

  constructor(...args: CallForms<typeof layerNormSig>) {
    super();
    const a = parseArgs(new.target.name, layerNormSig, args);
    this.normalizedShape = a.normalizedShape;
    this.eps = a.eps;
    this.elementwiseAffine = a.elementwiseAffine;
    const affine = a.elementwiseAffine;
    this.weight = affine ? new Parameter(ones(a.normalizedShape)) : null;
    this.bias = affine && a.bias ? new Parameter(zeros(a.normalizedShape)) : null;
  }

  forward(input: Tensor): Tensor {
    return ops.layerNorm(input, this.normalizedShape, {
      weight: this.weight,
      bias: this.bias,
      eps: this.eps,
    });
  }

  override extraRepr(): string {
    return (
      `${pyRepr(this.normalizedShape)}, eps=${pyFloat(this.eps)}, ` +
      `elementwise_affine=${pyBool(this.elementwiseAffine)}`
    );
  }
}

const rmsNormSig = [
  shapeParam("normalizedShape"),
  nonNegative("eps").optional(),
  p.bool("elementwiseAffine").default(true),
] as const;

/**
 * x / sqrt(mean(x^2) + eps) * weight over the last dims. eps null (the default) means the
 * input dtype's machine epsilon, as PyTorch's RMSNorm.
 */
export class RMSNorm extends Module {
  readonly normalizedShape: number[];
  readonly eps: number | null;
  readonly elementwiseAffine: boolean;
  weight: Parameter | null;

  constructor(...args: CallForms<typeof rmsNormSig>) {
    super();
    const a = parseArgs(new.target.name, rmsNormSig, args);
    this.normalizedShape = a.normalizedShape;
    this.eps = a.eps ?? null;
    this.elementwiseAffine = a.elementwiseAffine;
    this.weight = a.elementwiseAffine ? new Parameter(ones(a.normalizedShape)) : null;
  }

  forward(input: Tensor): Tensor {
    return ops.rmsNorm(input, this.normalizedShape, { weight: this.weight, eps: this.eps });
  }

  override extraRepr(): string {
    const eps = this.eps === null ? "None" : pyFloat(this.eps);
    return (
      `${pyRepr(this.normalizedShape)}, eps=${eps}, ` +
      `elementwise_affine=${pyBool(this.elementwiseAffine)}`
    );
  }
}

const groupNormSig = [
  p.int("numGroups", { min: 1 }),
  p.int("numChannels", { min: 1 }),
  nonNegative("eps").default(1e-5),
  p.bool("affine").default(true),
] as const;

/** Normalizes each of `numGroups` channel groups of [N, C, ...]. */
export class GroupNorm extends Module {
  readonly numGroups: number;
  readonly numChannels: number;
  readonly eps: number;
  readonly affine: boolean;
  weight: Parameter | null;
  bias: Parameter | null;

  constructor(...args: CallForms<typeof groupNormSig>) {
    super();
    const layer = new.target.name;
    const a = parseArgs(layer, groupNormSig, args);
    if (a.numChannels % a.numGroups !== 0) {
      throw new OpError(
        layer,
        `numChannels (${a.numChannels}) must be divisible by numGroups (${a.numGroups})`,
      );
    }
    this.numGroups = a.numGroups;
    this.numChannels = a.numChannels;
    this.eps = a.eps;
    this.affine = a.affine;
    this.weight = a.affine ? new Parameter(ones([a.numChannels])) : null;
    this.bias = a.affine ? new Parameter(zeros([a.numChannels])) : null;
  }

  forward(input: Tensor): Tensor {
    return ops.groupNorm(input, this.numGroups, {
      weight: this.weight,
      bias: this.bias,
      eps: this.eps,
    });
  }

  override extraRepr(): string {
    return (
      `${this.numGroups}, ${this.numChannels}, eps=${pyFloat(this.eps)}, ` +
      `affine=${pyBool(this.affine)}`
    );
  }
}

const batchNormSig = [
  p.int("numFeatures", { min: 1 }),
  nonNegative("eps").default(1e-5),
  p
    .custom<"momentum", number | null, number>("momentum", (v) =>
      typeof v === "number" && v >= 0 && v <= 1 ? v : problem("must be in [0, 1] or null"),
    )
    .default(0.1),
  p.bool("affine").default(true),
  p.bool("trackRunningStats").default(true),
] as const;

/**
 * Whether the caller passed momentum = null, which PyTorch reads as "cumulative average" (the
 * argument convention reads null as "not given", so this looks at the raw arguments).
 */
function momentumIsNull(args: readonly unknown[]): boolean {
  const last = args[args.length - 1];
  if (isOptionsObject(last) && Object.hasOwn(last, "momentum") && last.momentum === null) {
    return true;
  }
  return args.length > 2 && args[2] === null;
}

/**
 * Batch normalization over [N, C, H, W]. In eval mode it uses the running statistics; in
 * training mode (or without tracked statistics) the batch's, updating the running ones.
 */
export class BatchNorm2d extends Module {
  readonly numFeatures: number;
  readonly eps: number;
  readonly momentum: number | null;
  readonly affine: boolean;
  readonly trackRunningStats: boolean;
  weight: Parameter | null;
  bias: Parameter | null;
  declare running_mean: Tensor | null;
  declare running_var: Tensor | null;
  declare num_batches_tracked: Tensor | null;

  constructor(...args: CallForms<typeof batchNormSig>) {
    super();
    const a = parseArgs(new.target.name, batchNormSig, args);
    this.numFeatures = a.numFeatures;
    this.eps = a.eps;
    this.momentum = momentumIsNull(args) ? null : a.momentum;
    this.affine = a.affine;
    this.trackRunningStats = a.trackRunningStats;
    this.weight = a.affine ? new Parameter(ones([a.numFeatures])) : null;
    this.bias = a.affine ? new Parameter(zeros([a.numFeatures])) : null;
    const track = a.trackRunningStats;
    this.registerBuffer("running_mean", track ? zeros([a.numFeatures]) : null);
    this.registerBuffer("running_var", track ? ones([a.numFeatures]) : null);
    this.registerBuffer("num_batches_tracked", track ? tensor(0n) : null);
  }

  forward(input: Tensor): Tensor {
    const layer = this.className();
    if (input.ndim !== 4) {
      throw new OpError(
        layer,
        `expected 4D input [N, C, H, W] (got ${input.ndim}D input of shape ` +
          `${shapeString(input.shape)})`,
      );
    }
    if (input.shape[1] !== this.numFeatures) {
      throw new OpError(
        layer,
        `expected ${this.numFeatures} channels (dim 1), got input of shape ` +
          `${shapeString(input.shape)}`,
      );
    }
    let factor = this.momentum ?? 0;
    if (this.training && this.trackRunningStats && this.num_batches_tracked !== null) {
      this.num_batches_tracked = ops.add(this.num_batches_tracked, 1);
      if (this.momentum === null) factor = 1 / Number(this.num_batches_tracked.item());
    }
    const useStats = !this.training || this.trackRunningStats;
    const mean = useStats ? this.running_mean : null;
    const variance = useStats ? this.running_var : null;
    const batchStats = this.training || (mean === null && variance === null);
    const out = ops.batchNorm(input, mean, variance, {
      weight: this.weight,
      bias: this.bias,
      training: batchStats,
      momentum: factor,
      eps: this.eps,
    });
    if (batchStats && mean !== null && variance !== null) {
      noGrad(() => this.updateRunningStats(input, mean, variance, factor));
    }
    return out;
  }

  /** running = (1 - f) * running + f * batch statistic (the variance unbiased). */
  private updateRunningStats(input: Tensor, mean: Tensor, variance: Tensor, f: number): void {
    const [n, c, h, w] = input.shape as [number, number, number, number];
    const count = n * h * w;
    if (count <= 1) {
      throw new OpError(
        this.className(),
        `expected more than 1 value per channel when training, got input of shape ` +
          `${shapeString(input.shape)}`,
      );
    }
    const batchMean = ops.mean(input, [0, 2, 3]);
    const centered = ops.sub(input, ops.reshape(batchMean, [1, c, 1, 1]));
    const batchVar = ops.div(ops.sum(ops.mul(centered, centered), [0, 2, 3]), count - 1);
    const blend = (running: Tensor, batch: Tensor) =>
      ops.to(ops.add(ops.mul(running, 1 - f), ops.mul(batch, f)), running.dtype);
    this.running_mean = blend(mean, batchMean);
    this.running_var = blend(variance, batchVar);
  }

  override extraRepr(): string {
    const m = this.momentum === null ? "None" : pyFloat(this.momentum);
    return (
      `${this.numFeatures}, eps=${pyFloat(this.eps)}, momentum=${m}, ` +
      `affine=${pyBool(this.affine)}, track_running_stats=${pyBool(this.trackRunningStats)}`
    );
  }
}
