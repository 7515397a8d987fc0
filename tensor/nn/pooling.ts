// Pooling layers (PyTorch's torch/nn/modules/pooling.py): MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d around their ops. Sizes are kept as the caller wrote them (an int or a
// pair), because PyTorch's repr prints them that way; stride defaults to the kernel size.

import { type CallForms, p, parseArgs, problem } from "../args.ts";
import { ArgumentError, OpError } from "../errors.ts";
import * as ops from "../ops/index.ts";
import { shapeString } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { intOrTuple } from "./layer_args.ts";
import { Module } from "./module.ts";
import { pyBool, pyRepr } from "./repr.ts";

type Size = number | number[];

const maxPoolSig = [
  intOrTuple("kernelSize", 2, 1),
  intOrTuple("stride", 2, 1).optional(),
  intOrTuple("padding", 2, 0).default(0),
  intOrTuple("dilation", 2, 1).default(1),
  p.bool("returnIndices").default(false),
  p.bool("ceilMode").default(false),
] as const;

/** Max over kH x kW windows of [N, C, H, W] (or [C, H, W]), padding with -inf. */
export class MaxPool2d extends Module {
  readonly kernelSize: Size;
  readonly stride: Size;
  readonly padding: Size;
  readonly dilation: Size;
  readonly ceilMode: boolean;

  constructor(...args: CallForms<typeof maxPoolSig>) {
    super();
    const layer = new.target.name;
    const a = parseArgs(layer, maxPoolSig, args);
    if (a.returnIndices) {
      throw new ArgumentError(layer, "returnIndices", "true is not supported (no indices op)");
    }
    this.kernelSize = a.kernelSize;
    this.stride = a.stride ?? a.kernelSize;
    this.padding = a.padding;
    this.dilation = a.dilation;
    this.ceilMode = a.ceilMode;
  }

  forward(input: Tensor): Tensor {
    return ops.maxPool2d(input, this.kernelSize, {
      stride: this.stride,
      padding: this.padding,
      dilation: this.dilation,
      ceilMode: this.ceilMode,
    });
  }

  override extraRepr(): string {
    return (
      `kernel_size=${pyRepr(this.kernelSize)}, stride=${pyRepr(this.stride)}, ` +
      `padding=${pyRepr(this.padding)}, dilation=${pyRepr(this.dilation)}, ` +
      `ceil_mode=${pyBool(this.ceilMode)}`
    );
  }
}

const avgPoolSig = [
  intOrTuple("kernelSize", 2, 1),
  intOrTuple("stride", 2, 1).optional(),
  intOrTuple("padding", 2, 0).default(0),
  p.bool("ceilMode").default(false),
  p.bool("countIncludePad").default(true),
  p.int("divisorOverride", { min: 1 }).optional(),
] as const;

/** Mean over kH x kW windows of [N, C, H, W] (or [C, H, W]). */
export class AvgPool2d extends Module {
  readonly kernelSize: Size;
  readonly stride: Size;
  readonly padding: Size;
  readonly ceilMode: boolean;
  readonly countIncludePad: boolean;
  readonly divisorOverride: number | null;

  constructor(...args: CallForms<typeof avgPoolSig>) {
    super();
    const a = parseArgs(new.target.name, avgPoolSig, args);
    this.kernelSize = a.kernelSize;
    this.stride = a.stride ?? a.kernelSize;
    this.padding = a.padding;
    this.ceilMode = a.ceilMode;
    this.countIncludePad = a.countIncludePad;
    this.divisorOverride = a.divisorOverride ?? null;
  }

  forward(input: Tensor): Tensor {
    return ops.avgPool2d(input, this.kernelSize, {
      stride: this.stride,
      padding: this.padding,
      ceilMode: this.ceilMode,
      countIncludePad: this.countIncludePad,
      divisorOverride: this.divisorOverride,
    });
  }

  override extraRepr(): string {
    return (
      `kernel_size=${pyRepr(this.kernelSize)}, stride=${pyRepr(this.stride)}, ` +
      `padding=${pyRepr(this.padding)}`
    );
  }
}

type OutputSize = number | (number | null)[];

const adaptiveSig = [
  p.custom<"outputSize", number | readonly (number | null)[], OutputSize>("outputSize", (v) => {
    const ok = (x: unknown) => typeof x === "number" && Number.isInteger(x) && x >= 1;
    if (ok(v)) return v as number;
    if (Array.isArray(v) && v.length === 2 && v.every((x) => x === null || ok(x))) {
      return [...(v as (number | null)[])];
    }
    return problem("must be an integer >= 1 or a list of 2 (integers >= 1 or null)");
  }),
] as const;

/**
 * Average pooling to a fixed output size [oH, oW] with PyTorch's window formula; a null entry
 * keeps that input dim's size.
 */
export class AdaptiveAvgPool2d extends Module {
  readonly outputSize: OutputSize;

  constructor(...args: CallForms<typeof adaptiveSig>) {
    super();
    this.outputSize = parseArgs(new.target.name, adaptiveSig, args).outputSize;
  }

  forward(input: Tensor): Tensor {
    const n = input.ndim;
    if (n !== 3 && n !== 4) {
      throw new OpError(
        this.className(),
        `expected a 3D or 4D input, got shape ${shapeString(input.shape)}`,
      );
    }
    const size =
      typeof this.outputSize === "number"
        ? [this.outputSize, this.outputSize]
        : this.outputSize.map((s, i) => s ?? input.shape[n - 2 + i]!);
    return ops.adaptiveAvgPool2d(input, size);
  }

  override extraRepr(): string {
    return `output_size=${pyRepr(this.outputSize)}`;
  }
}
