// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_). Params whose grad is
// null are ignored. The total norm is computed on the host in float64 from the grads' values
// (one read-back per grad); the scale reaches the multiply as a 0-d float32 operand (`hyper`),
// so a coef of exactly 1 is no new program.

import { mul } from "../tensor/ops/core.ts";
import { hyper } from "./optimizer.ts";
import { clamp } from "../tensor/ops/elementwise.ts";
import type { Tensor } from "../tensor/tensor.ts";

function grads(params: Iterable<Tensor>): Tensor[] {
  return [...params].flatMap((p) => (p.grad === null ? [] : [p.grad]));
}

/**
 * Scales every grad by min(1, maxNorm / (total + 1e-6)), as PyTorch does, where total is the
 * normType-norm of all grads together (Infinity: the largest |g|). Returns the total norm.
 */
export function clipGradNorm(params: Iterable<Tensor>, maxNorm: number, normType = 2): number {
  const list = [...params];
  const gs = grads(list);
  if (gs.length === 0) return 0;
  if (!(normType > 0)) throw new Error(`normType must be positive, got ${normType}`);
  let acc = 0;
  for (const g of gs) {
    for (const v of g.data() as Float32Array) {
      const a = Math.abs(v);
      if (normType === Infinity) acc = Math.max(acc, a);
      else acc += a ** normType;
    }
  }
  const total = normType === Infinity ? acc : acc ** (1 / normType);
  const coef = Math.min(1, maxNorm / (total + 1e-6));
  for (const p of list) if (p.grad !== null) p.grad = mul(p.grad, hyper(coef));
  return total;
}

/** Clamps every grad elementwise to [-clipValue, clipValue]. */
export function clipGradValue(params: Iterable<Tensor>, clipValue: number): void {
  for (const p of params) if (p.grad !== null) p.grad = clamp(p.grad, -clipValue, clipValue);
}
