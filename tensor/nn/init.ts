// PyTorch's default parameter initialisations (torch.nn.init), drawn from Kiln's seeded
// generator: kaiming_uniform for Linear and conv weights (a = sqrt(5), which makes the bound
// 1/sqrt(fan_in)), the matching uniform bias, xavier_uniform for attention projections, and
// standard normal for embeddings. The distributions are PyTorch's; the values differ because
// the random stream does (tensor/random.ts). Values are made in JS like any random tensor: they
// are data, not programs.

import { allocateStorage } from "../dtype.ts";
import { defaultGenerator, type Generator, randn } from "../random.ts";
import { numelOf } from "../shape.ts";
import { fromStorage, type Tensor } from "../tensor.ts";

/** PyTorch's fan_in / fan_out of a weight: dims 1 and 0 times the receptive field. */
export function fans(shape: readonly number[]): { fanIn: number; fanOut: number } {
  if (shape.length < 2) {
    throw new Error(
      `fan in and fan out need a tensor of at least 2 dims, got shape [${shape.join(",")}]`,
    );
  }
  const receptive = numelOf(shape.slice(2));
  return { fanIn: shape[1]! * receptive, fanOut: shape[0]! * receptive };
}

/** Uniform on [low, high) as float32. */
export function uniform(
  shape: readonly number[],
  low: number,
  high: number,
  generator: Generator = defaultGenerator,
): Tensor {
  const n = numelOf(shape);
  const s = allocateStorage("float32", n, "nn.init.uniform") as Float32Array;
  for (let i = 0; i < n; i++) s[i] = low + (high - low) * generator.uniform(53);
  return fromStorage("float32", shape, s);
}

/** kaiming_uniform_(w, a): bound = gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + a^2)). */
export function kaimingUniform(shape: readonly number[], a = Math.sqrt(5)): Tensor {
  const { fanIn } = fans(shape);
  const gain = Math.sqrt(2 / (1 + a * a));
  const bound = fanIn === 0 ? 0 : gain * Math.sqrt(3 / fanIn);
  return uniform(shape, -bound, bound);
}

/** The bias PyTorch's Linear and conv layers draw: uniform on +-1/sqrt(fan_in). */
export function fanInUniform(shape: readonly number[], fanIn: number): Tensor {
  const bound = fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0;
  return uniform(shape, -bound, bound);
}

/** xavier_uniform_(w, gain): bound = gain * sqrt(6 / (fan_in + fan_out)). */
export function xavierUniform(shape: readonly number[], gain = 1): Tensor {
  const { fanIn, fanOut } = fans(shape);
  const bound = fanIn + fanOut === 0 ? 0 : gain * Math.sqrt(6 / (fanIn + fanOut));
  return uniform(shape, -bound, bound);
}

/** Standard normal (nn.init.normal_ with mean 0, std 1). */
export function normal(shape: readonly number[]): Tensor {
  return randn([...shape]);
}
