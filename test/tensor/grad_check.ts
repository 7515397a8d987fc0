// The machinery of the per-op gradient checks (test/tensor/grad_ops.test.ts; the cases are in
// grad_cases.ts):
//   - `traceCase` runs a case's op once under a recording dispatch mode that also lowers every
//     op it dispatches into one IR module (tensor/grad_check.ts traceToModule), so a
//     decomposition (scaledDotProductAttention, chunk) becomes the module of its lowerings;
//   - `toF64` (tensor/grad_check.ts) clones a module with every f32 made f64;
//   - `checkF64` takes the module's vjpModule (the IR derivative rules), rewrites the forward
//     and the vjp to f64, and compares the vjp with central differences of the f64 forward
//     (tensor/grad_check.ts checkVjpF64, which the library's gradCheck uses too);
//   - `eagerGrads` runs the same case through the frontend's autograd (requiresGrad_, the op,
//     backward) in float32 on the current eager backend.
// No vitest here (grad_cases.ts, which scripts/gen_ops_doc.ts reads, imports its types).

import { backward, noGrad } from "../../tensor/autograd.ts";
import { isFloatingDType } from "../../tensor/dtype.ts";
import {
  checkVjpF64,
  type F64Result,
  floatOutputs,
  traceToModule,
  type Traced,
} from "../../tensor/grad_check.ts";
import { Tensor } from "../../tensor/tensor.ts";
import { tensor } from "../../tensor/creation.ts";
import { rng } from "../passes/support.ts";

// ---- Cases ------------------------------------------------------------------------------------

/** One input of a case: a float tensor drawn at random, or a given tensor. */
export type Input =
  | {
      readonly shape: readonly number[];
      /** Uniform range of the values (default [-1, 1]). */
      readonly range?: readonly [number, number];
      /** Differentiate with respect to it (default true). */
      readonly grad?: boolean;
    }
  | { readonly value: () => Tensor; readonly grad?: boolean };

export interface GradCase {
  /** `op/variant`, unique. */
  readonly name: string;
  /** The registered op this case checks (its row in docs/ops.md). */
  readonly op: string;
  readonly inputs: readonly Input[];
  /** Calls the op on the inputs (in order). */
  readonly call: (...xs: Tensor[]) => Tensor | readonly Tensor[];
  /** Relative tolerance of the f64 check (default 1e-6). */
  readonly fdTol?: number;
  /** Relative tolerance of the float32 eager check against the f64 gradient (default 1e-4). */
  readonly eagerTol?: number;
  /**
   * Where the op's gradient is a convention rather than the function's derivative (PyTorch's,
   * stated by the op's own vjp: embedding's paddingIdx row gets none), input `a`'s f64
   * gradient as the convention has it, for the eager check.
   */
  readonly convention?: (a: number, grad: number[]) => number[];
}

function seedOf(name: string): number {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return h >>> 0;
}

const numel = (shape: readonly number[]) => shape.reduce((a, d) => a * d, 1);

/** A case's concrete values: inputs (float32 or given), output cotangents (float32). */
export interface CaseValues {
  readonly inputs: Tensor[];
  /** Which inputs are differentiated. */
  readonly wrt: boolean[];
}

export function caseInputs(c: GradCase): CaseValues {
  const r = rng(seedOf(c.name));
  const inputs = c.inputs.map((spec) => {
    if ("value" in spec) return spec.value();
    const [lo, hi] = spec.range ?? [-1, 1];
    const values = Array.from({ length: numel(spec.shape) }, () => lo + (hi - lo) * r());
    return tensor(values, { shape: [...spec.shape] });
  });
  const wrt = c.inputs.map((spec, k) => (spec.grad ?? true) && isFloatingDType(inputs[k]!.dtype));
  return { inputs, wrt };
}

/** Random float32 cotangents for a case's float outputs (seeded by its name). */
export function cotangents(c: GradCase, outs: readonly Tensor[]): Tensor[] {
  const r = rng(seedOf(`${c.name}#ct`));
  return outs.map((o) =>
    tensor(Array.from({ length: o.numel() }, () => 2 * r() - 1), { shape: [...o.shape] }),
  );
}


// ---- Tracing, f64, the vjp check: tensor/grad_check.ts (the library's gradCheck) -----------

export { floatOutputs, toF64, type F64Result, type Traced } from "../../tensor/grad_check.ts";

/** The case's op traced into one module (tensor/grad_check.ts traceToModule). */
export function traceCase(c: GradCase, inputs: readonly Tensor[]): Traced {
  return traceToModule(c.name, c.call, inputs);
}

/** The vjp of the traced case in f64 against central differences (checkVjpF64). */
export function checkF64(
  traced: Traced,
  values: CaseValues,
  cts: readonly Tensor[],
  eps = 1e-6,
): F64Result {
  const wrt = values.wrt.flatMap((w, k) => (w ? [k] : []));
  return checkVjpF64(traced, values.inputs, wrt, cts, eps);
}

// ---- The eager check ----------------------------------------------------------------------------

/**
 * The case through the frontend: fresh leaves (copies of the inputs) with requiresGrad_ on the
 * differentiated ones, the op, backward(float outputs, cts); each leaf's .grad (zeros where no
 * gradient reached it), as float32 values.
 */
export function eagerGrads(
  c: GradCase,
  values: CaseValues,
  cts: readonly Tensor[],
): (Float32Array | undefined)[] {
  const leavesIn = values.inputs.map((x, k) => {
    const copy = noGrad(() => x.detach());
    return values.wrt[k] ? copy.requiresGrad_() : copy;
  });
  const outs = floatOutputs(c.call(...leavesIn));
  backward(outs, [...cts]);
  return leavesIn.map((x, k) => {
    if (!values.wrt[k]) return undefined;
    if (x.grad === null) return new Float32Array(x.numel());
    return Float32Array.from(x.grad.data() as Float32Array);
  });
}
