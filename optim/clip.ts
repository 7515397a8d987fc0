// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_). Params whose grad is
// null are ignored. Everything is tensor work, as in PyTorch: the total norm is the norm of the
// per-grad norms (float32), the scale min(1, maxNorm / (total + 1e-6)) a 0-d tensor every grad
// is multiplied by; nothing is read back to the host, so a compiled training step that clips
// stays one program. Bounds reach the ops as 0-d float32 operands (`hyper`).

import { add, div, mul } from "../tensor/ops/core.ts";
import { hyper } from "./optimizer.ts";
import { clamp } from "../tensor/ops/elementwise.ts";
import { norm } from "../tensor/ops/reduction.ts";
import { stack } from "../tensor/ops/shape.ts";
import { runModuleCall } from "../tensor/module_calls.ts";
import type { Tensor } from "../tensor/tensor.ts";

function grads(params: Iterable<Tensor>): Tensor[] {
  return [...params].flatMap((p) => (p.grad === null ? [] : [p.grad]));
}

/**
 * Scales every grad by min(1, maxNorm / (total + 1e-6)), as PyTorch does, where total is the
 * normType-norm of all grads together (Infinity: the largest |g|). Returns the total norm, a 0-d
 * float32 tensor (PyTorch's return value; `.item()` reads it).
 */
export function clipGradNorm(params: Iterable<Tensor>, maxNorm: number, normType = 2): Tensor {
  const list = [...params];
  if (!(normType > 0)) throw new Error(`normType must be positive, got ${normType}`);
  const gs = grads(list);
  if (gs.length === 0) return hyper(0);
  // One call for lazy mode's cuts (tensor/module_calls.ts): the same ops per grad are not a
  // loop's iterations.
  return runModuleCall(() => {
    const total = norm(stack(gs.map((g) => norm(g, normType))), normType);
    const coef = clamp(div(hyper(maxNorm), add(total, hyper(1e-6))), undefined, hyper(1));
    for (const p of list) if (p.grad !== null) p.grad = mul(p.grad, coef);
    return total;
  });
}

/** Clamps every grad elementwise to [-clipValue, clipValue] (the bounds as 0-d operands). */
export function clipGradValue(params: Iterable<Tensor>, clipValue: number): void {
  const lo = hyper(-clipValue);
  const hi = hyper(clipValue);
  runModuleCall(() => {
    for (const p of params) if (p.grad !== null) p.grad = clamp(p.grad, lo, hi);
  });
}
