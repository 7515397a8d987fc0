// Convolution layers (PyTorch's torch/nn/modules/conv.py): Conv1d, Conv2d, ConvTranspose2d.
// Constructor arguments, attribute names, weight layouts ([out, in/groups, k...] for
// convolutions, [in, out/groups, k...] for transposed ones), initialisation (kaiming_uniform
// with a = sqrt(5), bias on +-1/sqrt(fan_in)) and repr are PyTorch's. A non-zero paddingMode
// pads with ops.pad first and convolves unpadded, as PyTorch does.

import { type CallForms, p, parseArgs, problem } from "../args.ts";
import { ArgumentError } from "../errors.ts";
import * as ops from "../ops/index.ts";
import type { Tensor } from "../tensor.ts";
import { fanInUniform, fans, kaimingUniform } from "./init.ts";
import { intTuple } from "./layer_args.ts";
import { Module, Parameter } from "./module.ts";
import { pyRepr } from "./repr.ts";

type Padding = number[] | "same" | "valid";
type PaddingMode = "zeros" | "reflect" | "replicate" | "circular";

function paddingParam(n: number) {
  const what = `an integer >= 0, a list of ${n} such integers, 'same' or 'valid'`;
  return p.custom<"padding", number | readonly number[] | "same" | "valid", Padding>(
    "padding",
    (v) => {
      if (v === "same" || v === "valid") return v;
      if (typeof v === "number" && Number.isInteger(v) && v >= 0) return new Array(n).fill(v);
      if (Array.isArray(v) && v.length === n && v.every((x) => Number.isInteger(x) && x >= 0)) {
        return [...(v as number[])];
      }
      return problem(`must be ${what}`);
    },
  );
}

function convSig(n: number) {
  return [
    p.int("inChannels", { min: 1 }),
    p.int("outChannels", { min: 1 }),
    intTuple("kernelSize", n, 1),
    intTuple("stride", n, 1).default(new Array<number>(n).fill(1)),
    paddingParam(n).default(new Array<number>(n).fill(0)),
    intTuple("dilation", n, 1).default(new Array<number>(n).fill(1)),
    p.int("groups", { min: 1 }).default(1),
    p.bool("bias").default(true),
    p.oneOf("paddingMode", ["zeros", "reflect", "replicate", "circular"]).default("zeros"),
  ] as const;
}

const conv1dSig = convSig(1);
const conv2dSig = convSig(2);

/** The parts Conv1d and Conv2d share: arguments, parameters, padding, repr. */
abstract class ConvNd extends Module {
  readonly inChannels: number;
  readonly outChannels: number;
  readonly kernelSize: number[];
  readonly stride: number[];
  readonly padding: Padding;
  readonly dilation: number[];
  readonly groups: number;
  readonly paddingMode: PaddingMode;
  weight: Parameter;
  bias: Parameter | null;

  constructor(layer: string, sig: typeof conv2dSig | typeof conv1dSig, args: readonly unknown[]) {
    super();
    const a = parseArgs(layer, sig, args);
    for (const k of ["inChannels", "outChannels"] as const) {
      if (a[k] % a.groups !== 0) {
        throw new ArgumentError(layer, k, `(${a[k]}) must be divisible by groups (${a.groups})`);
      }
    }
    if (a.padding === "same" && a.stride.some((s) => s !== 1)) {
      throw new ArgumentError(
        layer,
        "padding",
        `'same' is not supported for strided convolutions (stride ${pyRepr(a.stride)})`,
      );
    }
    this.inChannels = a.inChannels;
    this.outChannels = a.outChannels;
    this.kernelSize = a.kernelSize;
    this.stride = a.stride;
    this.padding = a.padding;
    this.dilation = a.dilation;
    this.groups = a.groups;
    this.paddingMode = a.paddingMode;
    const shape = [a.outChannels, a.inChannels / a.groups, ...a.kernelSize];
    this.weight = new Parameter(kaimingUniform(shape));
    this.bias = a.bias ? new Parameter(fanInUniform([a.outChannels], fans(shape).fanIn)) : null;
  }

  /** PyTorch's `_reversed_padding_repeated_twice`: ops.pad's list, last dim first. */
  protected padList(): number[] {
    const out: number[] = [];
    for (let i = this.kernelSize.length - 1; i >= 0; i--) {
      if (this.padding === "same") {
        const total = this.dilation[i]! * (this.kernelSize[i]! - 1);
        const left = Math.floor(total / 2);
        out.push(left, total - left);
      } else if (this.padding === "valid") {
        out.push(0, 0);
      } else {
        out.push(this.padding[i]!, this.padding[i]!);
      }
    }
    return out;
  }

  /** The input padded by paddingMode, and the padding left for the convolution itself. */
  protected prepared(input: Tensor): [Tensor, Padding] {
    if (this.paddingMode === "zeros") return [input, this.padding];
    const padded = ops.pad(input, this.padList(), { mode: this.paddingMode });
    return [padded, new Array<number>(this.kernelSize.length).fill(0)];
  }

  override extraRepr(): string {
    let s =
      `${this.inChannels}, ${this.outChannels}, kernel_size=${pyRepr(this.kernelSize)}, ` +
      `stride=${pyRepr(this.stride)}`;
    if (typeof this.padding === "string") s += `, padding=${this.padding}`;
    else if (this.padding.some((x) => x !== 0)) s += `, padding=${pyRepr(this.padding)}`;
    if (this.dilation.some((x) => x !== 1)) s += `, dilation=${pyRepr(this.dilation)}`;
    if (this.groups !== 1) s += `, groups=${this.groups}`;
    if (this.bias === null) s += ", bias=False";
    if (this.paddingMode !== "zeros") s += `, padding_mode=${this.paddingMode}`;
    return s;
  }
}

/** 1-D convolution over [N, C, L] (or unbatched [C, L]). */
export class Conv1d extends ConvNd {
  constructor(...args: CallForms<typeof conv1dSig>) {
    super(new.target.name, conv1dSig, args);
  }

  forward(input: Tensor): Tensor {
    const [x, padding] = this.prepared(input);
    return ops.conv1d(x, this.weight, {
      bias: this.bias,
      stride: this.stride,
      padding,
      dilation: this.dilation,
      groups: this.groups,
    });
  }
}

/** 2-D convolution over [N, C, H, W] (or unbatched [C, H, W]). */
export class Conv2d extends ConvNd {
  constructor(...args: CallForms<typeof conv2dSig>) {
    super(new.target.name, conv2dSig, args);
  }

  forward(input: Tensor): Tensor {
    const [x, padding] = this.prepared(input);
    return ops.conv2d(x, this.weight, {
      bias: this.bias,
      stride: this.stride,
      padding,
      dilation: this.dilation,
      groups: this.groups,
    });
  }
}

const convTranspose2dSig = [
  p.int("inChannels", { min: 1 }),
  p.int("outChannels", { min: 1 }),
  intTuple("kernelSize", 2, 1),
  intTuple("stride", 2, 1).default([1, 1]),
  intTuple("padding", 2, 0).default([0, 0]),
  intTuple("outputPadding", 2, 0).default([0, 0]),
  p.int("groups", { min: 1 }).default(1),
  p.bool("bias").default(true),
  intTuple("dilation", 2, 1).default([1, 1]),
  p.oneOf("paddingMode", ["zeros"]).default("zeros"),
] as const;

/** Transposed 2-D convolution; weight [inChannels, outChannels/groups, kH, kW]. */
export class ConvTranspose2d extends Module {
  readonly inChannels: number;
  readonly outChannels: number;
  readonly kernelSize: number[];
  readonly stride: number[];
  readonly padding: number[];
  readonly outputPadding: number[];
  readonly groups: number;
  readonly dilation: number[];
  readonly paddingMode: "zeros";
  weight: Parameter;
  bias: Parameter | null;

  constructor(...args: CallForms<typeof convTranspose2dSig>) {
    super();
    const layer = new.target.name;
    const a = parseArgs(layer, convTranspose2dSig, args);
    for (const k of ["inChannels", "outChannels"] as const) {
      if (a[k] % a.groups !== 0) {
        throw new ArgumentError(layer, k, `(${a[k]}) must be divisible by groups (${a.groups})`);
      }
    }
    this.inChannels = a.inChannels;
    this.outChannels = a.outChannels;
    this.kernelSize = a.kernelSize;
    this.stride = a.stride;
    this.padding = a.padding;
    this.outputPadding = a.outputPadding;
    this.groups = a.groups;
    this.dilation = a.dilation;
    this.paddingMode = a.paddingMode;
    const shape = [a.inChannels, a.outChannels / a.groups, ...a.kernelSize];
    this.weight = new Parameter(kaimingUniform(shape));
    this.bias = a.bias ? new Parameter(fanInUniform([a.outChannels], fans(shape).fanIn)) : null;
  }

  forward(input: Tensor): Tensor {
    return ops.convTranspose2d(input, this.weight, {
      bias: this.bias,
      stride: this.stride,
      padding: this.padding,
      outputPadding: this.outputPadding,
      groups: this.groups,
      dilation: this.dilation,
    });
  }

  override extraRepr(): string {
    let s =
      `${this.inChannels}, ${this.outChannels}, kernel_size=${pyRepr(this.kernelSize)}, ` +
      `stride=${pyRepr(this.stride)}`;
    if (this.padding.some((x) => x !== 0)) s += `, padding=${pyRepr(this.padding)}`;
    if (this.dilation.some((x) => x !== 1)) s += `, dilation=${pyRepr(this.dilation)}`;
    if (this.outputPadding.some((x) => x !== 0)) {
      s += `, output_padding=${pyRepr(this.outputPadding)}`;
    }
    if (this.groups !== 1) s += `, groups=${this.groups}`;
    if (this.bias === null) s += ", bias=False";
    return s;
  }
}
