// The machinery of the per-op gradient checks (test/tensor/grad_ops.test.ts; the cases are in
// grad_cases.ts):
//   - `traceCase` runs a case's op once under a recording dispatch mode that also lowers every
//     op it dispatches into one IR module (as the eager `compile()` of tensor/dispatch.ts does
//     for one op: ModuleBuilder, a parameter per input, lowerOp), so a decomposition
//     (scaledDotProductAttention, chunk) becomes the module of the lowerings it calls;
//   - `toF64` clones a module with every f32 shape, constant and literal made f64 (the
//     reference evaluator computes f64 in double precision);
//   - `checkF64` takes the module's vjpModule (the IR derivative rules), rewrites the forward
//     and the vjp to f64, and compares the vjp with central differences of the f64 forward;
//   - `eagerGrads` runs the same case through the frontend's autograd (requiresGrad_, the op,
//     backward) in float32 on the current eager backend.
// No vitest here (grad_cases.ts, which scripts/gen_ops_doc.ts reads, imports its types).

import { ModuleBuilder } from "../../ir/builder.ts";
import { evaluate, type EvalValue } from "../../ir/evaluate.ts";
import { Literal } from "../../ir/literal.ts";
import { type Computation, type Instruction, Module } from "../../ir/module.ts";
import { computationPrintOrder } from "../../ir/print.ts";
import { arrayShape, type Shape, tupleShape } from "../../ir/shape.ts";
import { verifyModule } from "../../ir/verify.ts";
import { cloneAttributes } from "../../ir/clone.ts";
import { vjpModule } from "../../passes/autodiff.ts";
import { backward, noGrad } from "../../tensor/autograd.ts";
import {
  type DispatchMode,
  eagerMode,
  lowerOp,
  operandLiteral,
  withMode,
} from "../../tensor/dispatch.ts";
import { isFloatingDType, toElementType } from "../../tensor/dtype.ts";
import { markScalarOperand } from "../../tensor/lower.ts";
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

/** The float results of a call, in order (integer results, e.g. indices, take no gradient). */
export function floatOutputs(out: Tensor | readonly Tensor[]): Tensor[] {
  const list: readonly Tensor[] = out instanceof Tensor ? [out] : out;
  return list.filter((t) => isFloatingDType(t.dtype));
}

// ---- Tracing a case into one module ---------------------------------------------------------

export interface Traced {
  /** ENTRY: one parameter per input (parameter k is input k); root: the float outputs. */
  readonly module: Module;
  /** The float32 results of the call (the trace also runs the op eagerly). */
  readonly outputs: Tensor[];
  /** The registered lowerings the call dispatched, in order. */
  readonly lowerings: string[];
}

/**
 * Runs `c.call` on `inputs` with a dispatch mode that runs each op eagerly and also appends its
 * lowering to one module, mapping tensors to the instructions that computed them. A tensor the
 * trace did not make (a constant a decomposition built with `tensor()`) enters as a constant;
 * a JS scalar as a constant marked as a wrapped number (as compile()'s scalar parameter is).
 */
export function traceCase(c: GradCase, inputs: readonly Tensor[]): Traced {
  const mb = new ModuleBuilder(c.name.replace(/\W/g, "_"));
  let outputs: Tensor[] = [];
  const lowerings: string[] = [];
  mb.entry("main", (b) => {
    const of = new Map<Tensor, Instruction>();
    inputs.forEach((x) => of.set(x, b.parameter(arrayShape(toElementType(x.dtype), x.shape))));
    const mode: DispatchMode = {
      name: "grad-trace",
      run(op, operands, attrs) {
        const out = eagerMode.run(op, operands, attrs);
        const ins = operands.map((o) => {
          if (!(o instanceof Tensor)) return markScalarOperand(b.constant(operandLiteral(o)));
          return of.get(o) ?? b.constant(operandLiteral(o));
        });
        const r = lowerOp(b, op, ins, attrs);
        lowerings.push(op.name);
        const ts = Array.isArray(out) ? out : [out];
        const rs = Array.isArray(r) ? r : [r];
        ts.forEach((t, k) => of.set(t, rs[k]!));
        return out;
      },
    };
    const out = noGrad(() => withMode(mode, () => c.call(...inputs)));
    outputs = floatOutputs(out);
    const roots = outputs.map((t) => {
      const i = of.get(t);
      if (i === undefined) throw new Error(`${c.name}: a result was not computed by a traced op`);
      return i;
    });
    return roots.length === 1 ? roots[0]! : b.tuple(roots);
  });
  return { module: mb.build(), outputs, lowerings };
}

// ---- f32 -> f64 ---------------------------------------------------------------------------------

function shapeF64(s: Shape): Shape {
  if (s.kind === "tuple") return tupleShape(s.elements.map(shapeF64));
  return s.type === "f32" ? arrayShape("f64", s.dims, s.dynamic, s.layout) : s;
}

/**
 * A copy of `module` in which every f32 is f64: instruction shapes (parameters, results,
 * converts' targets, reducers' scalars) and constants' literals (their f32 values, exactly).
 * Verified, so a rule that depends on the type shows up here rather than as a wrong number.
 */
export function toF64(module: Module): Module {
  const out = new Module(`${module.name}_f64`);
  const comps = new Map<Computation, Computation>();
  for (const c of computationPrintOrder(module)) {
    const copy = out.addComputation(c.name);
    comps.set(c, copy);
    const instrs = new Map<Instruction, Instruction>();
    for (const i of c.instructions) {
      const attrs = cloneAttributes(i.attrs);
      const lit = attrs.literal;
      if (lit !== undefined && lit.type === "f32") {
        attrs.literal = new Literal("f64", lit.dims, Float64Array.from(lit.data as Float32Array));
      }
      instrs.set(
        i,
        copy.addInstruction({
          opcode: i.opcode,
          shape: shapeF64(i.shape),
          operands: i.operands.map((o) => instrs.get(o)!),
          attrs,
          called: i.called.map((k) => comps.get(k)!),
          metadata: { ...i.metadata },
          name: i.name,
        }),
      );
    }
    if (c.instructions.length > 0) copy.root = instrs.get(c.root)!;
    if (c.isEntry) out.entry = copy;
  }
  verifyModule(out);
  return out;
}

/** A tensor's value as an f64 literal (float) or its own literal (integers, bool). */
function argF64(t: Tensor): Literal {
  const lit = operandLiteral(t);
  if (lit.type !== "f32") return lit;
  return new Literal("f64", lit.dims, Float64Array.from(lit.data as Float32Array));
}

function leaves(v: EvalValue): Literal[] {
  return Array.isArray(v) ? v.flatMap(leaves) : [v];
}

// ---- The f64 check ------------------------------------------------------------------------------

export interface F64Result {
  /** Per input: its f64 vjp gradient (undefined for inputs not differentiated). */
  readonly grads: (Float64Array | undefined)[];
  /** The worst element: |vjp - fd| / (1 + |fd|), and where. */
  readonly worst: { error: number; input: number; index: number; vjp: number; fd: number };
  /** Forward evaluations the differences took. */
  readonly evaluations: number;
}

/**
 * The vjp of the traced module (IR rules), in f64, against central differences (step `eps`)
 * of L(x) = sum_k <ct_k, y_k(x)> with the f64 forward. Throws what vjpModule throws (an
 * AutodiffError for an opcode without a rule).
 */
export function checkF64(
  traced: Traced,
  values: CaseValues,
  cts: readonly Tensor[],
  eps = 1e-6,
): F64Result {
  const wrt = values.wrt.flatMap((w, k) => (w ? [k] : []));
  const vjp = toF64(vjpModule(traced.module, { wrt }));
  const fwd = toF64(traced.module);
  const args = values.inputs.map(argF64);
  const ctArgs = cts.map(argF64);
  const gs = leaves(evaluate(vjp, [...args, ...ctArgs]));
  const ctData = ctArgs.map((l) => l.data as Float64Array);
  const loss = (xs: Literal[]): number => {
    const ys = leaves(evaluate(fwd, xs));
    let acc = 0;
    ys.forEach((y, k) => {
      const d = y.data as Float64Array;
      const w = ctData[k]!;
      for (let j = 0; j < d.length; j++) acc += d[j]! * w[j]!;
    });
    return acc;
  };
  const grads: (Float64Array | undefined)[] = values.inputs.map(() => undefined);
  let worst = { error: 0, input: -1, index: -1, vjp: 0, fd: 0 };
  let evaluations = 0;
  wrt.forEach((a, n) => {
    const g = gs[n]!.data as Float64Array;
    grads[a] = g;
    const base = args[a]!;
    const data = base.data as Float64Array;
    for (let j = 0; j < data.length; j++) {
      const at = (d: number): number => {
        const moved = Float64Array.from(data);
        moved[j] = moved[j]! + d;
        const xs = [...args];
        xs[a] = new Literal("f64", base.dims, moved);
        evaluations++;
        return loss(xs);
      };
      const fd = (at(eps) - at(-eps)) / (2 * eps);
      const error = Math.abs(g[j]! - fd) / (1 + Math.abs(fd));
      if (error > worst.error || worst.input < 0) {
        worst = { error, input: a, index: j, vjp: g[j]!, fd };
      }
    }
  });
  return { grads, worst, evaluations };
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
