// Gradient checking (PyTorch's torch.autograd.gradcheck) in float64 although the frontend
// computes in float32: the function is traced into ONE IR module (each op it dispatches runs
// eagerly and appends its lowering), the module and its vjp (the IR derivative rules,
// passes/autodiff.ts) are rewritten to f64 (the reference evaluator computes f64 in double
// precision), and the vjp is compared with central differences of the f64 forward; then the
// frontend's own autograd (eager float32 backward, which also applies ops' own derivatives) is
// compared with the differences at float32's tolerance. Also used by the per-op gradient tests
// (test/tensor/grad_check.ts).

import { ModuleBuilder } from "../ir/builder.ts";
import { cloneAttributes } from "../ir/clone.ts";
import { evaluate, type EvalValue } from "../ir/evaluate.ts";
import { Literal } from "../ir/literal.ts";
import { type Computation, type Instruction, Module } from "../ir/module.ts";
import { computationPrintOrder } from "../ir/print.ts";
import { arrayShape, type Shape, tupleShape } from "../ir/shape.ts";
import { verifyModule } from "../ir/verify.ts";
import { AutodiffError, vjpModule } from "../passes/autodiff.ts";
import { backward, noGrad } from "./autograd.ts";
import { tensor } from "./creation.ts";
import { type DispatchMode, eagerMode, lowerOp, operandLiteral, withMode } from "./dispatch.ts";
import { isFloatingDType, toElementType } from "./dtype.ts";
import { OpError } from "./errors.ts";
import { markScalarOperand } from "./lower.ts";
import { Tensor } from "./tensor.ts";

/** The float results of a call, in order (integer results, e.g. indices, take no gradient). */
export function floatOutputs(out: Tensor | readonly Tensor[]): Tensor[] {
  const list: readonly Tensor[] = out instanceof Tensor ? [out] : out;
  return list.filter((t) => isFloatingDType(t.dtype));
}

// ---- Tracing a function into one module ---------------------------------------------------

export interface Traced {
  /** ENTRY: one parameter per input (parameter k is input k); root: the float outputs. */
  readonly module: Module;
  /** The float32 results of the call (the trace also runs the ops eagerly). */
  readonly outputs: Tensor[];
  /** The registered lowerings the call dispatched, in order. */
  readonly lowerings: string[];
}

/**
 * Runs `call` on `inputs` with a dispatch mode that runs each op eagerly and also appends its
 * lowering to one module, mapping tensors to the instructions that computed them. A tensor the
 * trace did not make (a constant a decomposition built with `tensor()`) enters as a constant;
 * a JS scalar as a constant marked as a wrapped number (as compile()'s scalar parameter is).
 */
export function traceToModule(
  name: string,
  call: (...xs: Tensor[]) => Tensor | readonly Tensor[],
  inputs: readonly Tensor[],
): Traced {
  const mb = new ModuleBuilder(name.replace(/\W/g, "_") || "fn");
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
    const out = noGrad(() => withMode(mode, () => call(...inputs)));
    outputs = floatOutputs(out);
    const roots = outputs.map((t) => {
      const i = of.get(t);
      if (i === undefined) throw new Error(`${name}: a result was not computed by a traced op`);
      return i;
    });
    if (roots.length === 0) throw new Error(`${name}: the function has no floating-point result`);
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

// ---- The f64 check --------------------------------------------------------------------------

export interface F64Result {
  /** Per input: its f64 vjp gradient (undefined for inputs not differentiated). */
  readonly grads: (Float64Array | undefined)[];
  /** Per input: the central differences (undefined for inputs not differentiated). */
  readonly fds: (Float64Array | undefined)[];
  /** The worst element: |vjp - fd| / (1 + |fd|), and where. */
  readonly worst: { error: number; input: number; index: number; vjp: number; fd: number };
  /** Forward evaluations the differences took. */
  readonly evaluations: number;
}

/**
 * The vjp of the traced module (IR rules), in f64, against central differences (step `eps`)
 * of L(x) = sum_k <ct_k, y_k(x)> with the f64 forward, for the inputs `wrt` lists. Throws what
 * vjpModule throws (an AutodiffError for an opcode without a rule).
 */
export function checkVjpF64(
  traced: Traced,
  inputs: readonly Tensor[],
  wrt: readonly number[],
  cts: readonly Tensor[],
  eps = 1e-6,
): F64Result {
  const vjp = toF64(vjpModule(traced.module, { wrt: [...wrt] }));
  const args = inputs.map(argF64);
  const ctArgs = cts.map(argF64);
  const gs = leaves(evaluate(vjp, [...args, ...ctArgs]));
  const fd = centralDifferencesF64(traced, inputs, wrt, cts, eps);
  const grads: (Float64Array | undefined)[] = inputs.map(() => undefined);
  let worst = { error: 0, input: -1, index: -1, vjp: 0, fd: 0 };
  wrt.forEach((a, n) => {
    const g = gs[n]!.data as Float64Array;
    grads[a] = g;
    const f = fd.fds[a]!;
    for (let j = 0; j < g.length; j++) {
      const error = Math.abs(g[j]! - f[j]!) / (1 + Math.abs(f[j]!));
      if (error > worst.error || worst.input < 0) {
        worst = { error, input: a, index: j, vjp: g[j]!, fd: f[j]! };
      }
    }
  });
  return { grads, fds: fd.fds, worst, evaluations: fd.evaluations };
}

/**
 * Central differences (step `eps`) of L(x) = sum_k <ct_k, y_k(x)> with the traced module's f64
 * forward, for the inputs `wrt` lists: the gradient any derivative must give, rules or not.
 */
export function centralDifferencesF64(
  traced: Traced,
  inputs: readonly Tensor[],
  wrt: readonly number[],
  cts: readonly Tensor[],
  eps = 1e-6,
): { fds: (Float64Array | undefined)[]; evaluations: number } {
  const fwd = toF64(traced.module);
  const args = inputs.map(argF64);
  const ctData = cts.map((c) => argF64(c).data as Float64Array);
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
  const fds: (Float64Array | undefined)[] = inputs.map(() => undefined);
  let evaluations = 0;
  for (const a of wrt) {
    const base = args[a]!;
    const data = base.data as Float64Array;
    const fdOut = new Float64Array(data.length);
    fds[a] = fdOut;
    for (let j = 0; j < data.length; j++) {
      const at = (d: number): number => {
        const moved = Float64Array.from(data);
        moved[j] = moved[j]! + d;
        const xs = [...args];
        xs[a] = new Literal("f64", base.dims, moved);
        evaluations++;
        return loss(xs);
      };
      fdOut[j] = (at(eps) - at(-eps)) / (2 * eps);
    }
  }
  return { fds, evaluations };
}

// ---- gradCheck --------------------------------------------------------------------------------

export interface GradCheckOptions {
  /** The central differences' step, in f64 (default 1e-6). */
  eps?: number;
  /** The f64 check: |vjp - fd| <= atol + rtol·|fd| (defaults 1e-5, 1e-3, PyTorch's). */
  atol?: number;
  rtol?: number;
  /** Also check the frontend's float32 autograd against the f64 gradient (default true). */
  checkEager?: boolean;
  /** The float32 check: |eager - fd| <= eagerAtol + eagerRtol·|fd| (defaults 1e-4, 1e-3). */
  eagerAtol?: number;
  eagerRtol?: number;
  /** Throw a GradCheckError on a mismatch (default true, as PyTorch); else return false. */
  raiseException?: boolean;
  /** Seed of the random output cotangents (default 0). */
  seed?: number;
}

/** A gradient check that failed: which input, which element, the two values. */
export class GradCheckError extends OpError {}

function lcg(seed: number): () => number {
  let s = (seed >>> 0) || 0x9e3779b9;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * `gradCheck(fn, inputs, options?)`: checks the gradients of `fn` at `inputs` (PyTorch's
 * gradcheck): for every floating-point input that requires grad (all of them when none does),
 * the IR derivative rules in f64 against f64 central differences (skipped when an opcode has no
 * rule: the op's own derivative serves), and the frontend's autograd (float32) against the
 * differences. True when both hold; else a GradCheckError naming the input, the
 * element and the values (or false, with raiseException: false).
 */
export function gradCheck(
  fn: (...xs: Tensor[]) => Tensor | readonly Tensor[],
  inputs: readonly Tensor[],
  options: GradCheckOptions = {},
): boolean {
  const op = "gradCheck";
  const eps = options.eps ?? 1e-6;
  const atol = options.atol ?? 1e-5;
  const rtol = options.rtol ?? 1e-3;
  const fail = (message: string): boolean => {
    if (options.raiseException === false) return false;
    throw new GradCheckError(op, message);
  };
  inputs.forEach((x, k) => {
    if (!(x instanceof Tensor)) throw new OpError(op, `input ${k} is not a Tensor`);
  });
  const floats = inputs.flatMap((x, k) => (isFloatingDType(x.dtype) ? [k] : []));
  const marked = floats.filter((k) => inputs[k]!.requiresGrad);
  const wrt = marked.length > 0 ? marked : floats;
  if (wrt.length === 0) throw new OpError(op, "no floating-point input to differentiate");
  const values = inputs.map((x) => noGrad(() => x.detach()));
  const traced = traceToModule(fn.name || "fn", fn, values);
  const r = lcg(options.seed ?? 0);
  const cts = traced.outputs.map((o) =>
    tensor(Array.from({ length: o.numel() }, () => 2 * r() - 1), { shape: [...o.shape] }),
  );
  // The IR rules in f64 against the differences; an op whose lowering has an opcode without a
  // rule (its derivative is the op's own: sort, topk, prod) skips this half.
  let rules: F64Result | undefined;
  try {
    rules = checkVjpF64(traced, values, wrt, cts, eps);
  } catch (e) {
    if (!(e instanceof AutodiffError)) throw e;
  }
  const fds = rules?.fds ?? centralDifferencesF64(traced, values, wrt, cts, eps).fds;
  for (const a of rules ? wrt : []) {
    const g = rules!.grads[a]!;
    const fd = fds[a]!;
    for (let j = 0; j < g.length; j++) {
      if (!(Math.abs(g[j]! - fd[j]!) <= atol + rtol * Math.abs(fd[j]!))) {
        return fail(
          `input ${a}, element ${j}: the derivative rules give ${g[j]}, central differences ` +
            `${fd[j]} (f64, eps ${eps}; allowed ${atol} + ${rtol}·|fd|)`,
        );
      }
    }
  }
  if (options.checkEager === false) return true;
  const eAtol = options.eagerAtol ?? 1e-4;
  const eRtol = options.eagerRtol ?? 1e-3;
  const leavesIn = values.map((x, k) => {
    const copy = noGrad(() => x.detach());
    return wrt.includes(k) ? copy.requiresGrad_() : copy;
  });
  backward(floatOutputs(fn(...leavesIn)), cts);
  for (const a of wrt) {
    const x = leavesIn[a]!;
    const got = x.grad === null ? new Float32Array(x.numel()) : (x.grad.data() as Float32Array);
    const want = fds[a]!;
    for (let j = 0; j < want.length; j++) {
      if (!(Math.abs(got[j]! - want[j]!) <= eAtol + eRtol * Math.abs(want[j]!))) {
        return fail(
          `input ${a}, element ${j}: autograd (float32) gives ${got[j]}, the f64 derivative ` +
            `(central differences) ${want[j]} (allowed ${eAtol} + ${eRtol}·|fd|)`,
        );
      }
    }
  }
  return true;
}
