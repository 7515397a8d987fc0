// Reverse-mode automatic differentiation as an IR transformation. `vjpModule` copies a module and
// appends to its ENTRY the backward pass: one cotangent parameter per root output, then every
// instruction's cotangent in reverse topological order (fan-out cotangents summed with add), each
// emitted by the rule for its opcode (autodiff_rules.ts) under its forward instruction's
// metadata. Only instructions that depend on a parameter in `wrt` are visited.

import { ComputationBuilder } from "../ir/builder.ts";
import { cloneModule } from "../ir/clone.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import { isFloatType, scalarShape, type ArrayShape, type Shape } from "../ir/shape.ts";
import { verifyModule } from "../ir/verify.ts";
import { argReduceVjp, VJP_RULES, type VjpContext } from "./autodiff_rules.ts";

export class AutodiffError extends Error {
  constructor(instr: Instruction, reason: string) {
    const md = instr.metadata;
    const where: string[] = [];
    if (md.opType !== undefined) where.push(`op_type=${md.opType}`);
    if (md.opName !== undefined) where.push(`op_name=${md.opName}`);
    if (md.sourceFile !== undefined || md.sourceLine !== undefined) {
      where.push(`source=${md.sourceFile ?? "?"}:${md.sourceLine ?? "?"}`);
    }
    const tail = where.length > 0 ? ` (${where.join(", ")})` : "";
    super(`autodiff: no derivative for ${instr.opcode} %${instr.name}${tail}: ${reason}`);
    this.name = "AutodiffError";
  }
}

export interface VjpOptions {
  /** Parameter numbers to differentiate with respect to (default: every float parameter). */
  wrt?: number[];
}

/** A cotangent: an array instruction, or one per element of a tuple. */
export type Ct = Instruction | (Ct | undefined)[];

const isFloatArray = (s: Shape): s is ArrayShape => s.kind === "array" && isFloatType(s.type);

export function vjpModule(module: Module, options: VjpOptions = {}): Module {
  const out = cloneModule(module, `${module.name}_vjp`);
  const entry = out.entry;
  const b = new ComputationBuilder(entry);
  const root = entry.root;
  const forward = [...entry.instructions];
  const rootShapes = root.shape.kind === "tuple" ? root.shape.elements : [root.shape];
  const cts = rootShapes.map((s, k) => b.parameter(s, `cotangent.${k}`));
  const seed: Ct = root.shape.kind === "tuple" ? cts : cts[0]!;
  const grads = backward(entry, forward, b, seed, options.wrt);
  entry.root = b.tuple(grads);
  verifyModule(out);
  return out;
}

export function valueAndGradModule(module: Module, options: VjpOptions = {}): Module {
  const root = module.entry.root;
  const s = root.shape;
  if (s.kind !== "array" || s.dims.length !== 0 || !isFloatType(s.type)) {
    throw new Error("valueAndGradModule: the ENTRY root must be a float scalar");
  }
  const out = cloneModule(module, `${module.name}_value_and_grad`);
  const entry = out.entry;
  const b = new ComputationBuilder(entry);
  const value = entry.root;
  const forward = [...entry.instructions];
  const one = b.withMetadata(value.metadata, () => b.scalar(s.type, 1));
  const grads = backward(entry, forward, b, one, options.wrt);
  entry.root = b.tuple([value, ...grads]);
  verifyModule(out);
  return out;
}

function backward(
  entry: Computation,
  forward: readonly Instruction[],
  b: ComputationBuilder,
  seed: Ct,
  wrtOpt: readonly number[] | undefined,
): Instruction[] {
  const params = forward.filter((i) => i.opcode === "parameter");
  const byNumber = new Map(params.map((p) => [p.attrs.parameterNumber!, p]));
  const wrt =
    wrtOpt ??
    params.filter((p) => isFloatArray(p.shape)).map((p) => p.attrs.parameterNumber!);
  for (const n of wrt) {
    const p = byNumber.get(n);
    if (p === undefined) throw new Error(`vjpModule: no parameter ${n}`);
    if (!isFloatArray(p.shape)) throw new Error(`vjpModule: parameter ${n} is not a float array`);
  }
  if (b.computation !== entry) throw new Error("vjpModule: the builder must be on the ENTRY");
  return reverseSweep(b, forward, [[entry.root, seed]], wrt.map((n) => byNumber.get(n)!));
}

/**
 * The reverse sweep, appended to `b`'s computation: given forward instructions in topological
 * order (the instructions a gradient may flow through; anything else is a constant to it), the
 * cotangents of some of their results (`seeds`) and the float array instructions to
 * differentiate with respect to (`wrt`, typically parameters or an op's inputs), emits the
 * backward pass and returns one gradient per `wrt` (zeros where nothing flows). vjpModule uses
 * it over a whole ENTRY; the eager tape (tensor/autograd.ts) over one op's lowering.
 */
export function reverseSweep(
  b: ComputationBuilder,
  forward: readonly Instruction[],
  seeds: readonly (readonly [Instruction, Ct])[],
  wrt: readonly Instruction[],
): Instruction[] {
  const entry = b.computation;
  const wrtParams = new Set(wrt);
  // Instructions that depend on a wrt instruction.
  const needs = new Set<Instruction>(wrt);
  for (const i of forward) {
    if (wrtParams.has(i) || i.operands.some((o) => needs.has(o))) needs.add(i);
  }
  const ct = new Map<Instruction, Ct>();
  const accumulate = (a: Ct | undefined, c: Ct): Ct => {
    if (a === undefined) return c;
    if (Array.isArray(a) && Array.isArray(c)) {
      const n = Math.max(a.length, c.length);
      return Array.from({ length: n }, (_, k) => {
        const x = a[k];
        const y = c[k];
        return x === undefined ? y : y === undefined ? x : accumulate(x, y);
      }) as Ct;
    }
    if (!Array.isArray(a) && !Array.isArray(c)) return b.add(a, c);
    throw new Error("autodiff: mismatched cotangent structure");
  };
  const give = (i: Instruction, c: Ct | undefined): void => {
    if (c === undefined || !needs.has(i)) return;
    if (!Array.isArray(c) && !isFloatArray(i.shape)) return;
    ct.set(i, accumulate(ct.get(i), c));
  };
  const zerosLike = (s: ArrayShape): Instruction =>
    b.broadcast(b.scalar(s.type, 0), s.dims, []);
  const adder = new Map<string, Computation>();
  const addReducer = (type: ArrayShape["type"]): Computation => {
    const hit = adder.get(type);
    if (hit) return hit;
    const m = entry.parent;
    const c = m.addComputation(m.uniqueComputationName(`vjp_add_${type}`));
    const rb = new ComputationBuilder(c);
    const x = rb.parameter(scalarShape(type));
    const y = rb.parameter(scalarShape(type));
    c.root = rb.add(x, y);
    adder.set(type, c);
    return c;
  };
  for (const [i, c] of seeds) give(i, c);
  for (let k = forward.length - 1; k >= 0; k--) {
    const instr = forward[k]!;
    const g = ct.get(instr);
    if (g === undefined) continue;
    b.metadata = { ...instr.metadata };
    if (instr.opcode === "tuple") {
      if (!Array.isArray(g)) throw new Error("autodiff: array cotangent for a tuple");
      instr.operands.forEach((o, j) => give(o, g[j]));
      continue;
    }
    if (instr.opcode === "get-tuple-element") {
      const idx = instr.attrs.tupleIndex!;
      const c: (Ct | undefined)[] = [];
      c[idx] = g;
      give(instr.operand(0), c);
      continue;
    }
    const rule = VJP_RULES[instr.opcode];
    if (Array.isArray(g) && instr.opcode === "reduce" && instr.operands.length === 4) {
      let gs: (Instruction | undefined)[];
      try {
        gs = argReduceVjp(b, instr, g);
      } catch (e) {
        if (e instanceof AutodiffError) throw e;
        throw new AutodiffError(instr, (e as Error).message);
      }
      instr.operands.forEach((o, j) => give(o, gs[j]));
      continue;
    }
    if (Array.isArray(g)) {
      throw new AutodiffError(
        instr,
        typeof rule === "function"
          ? `a tuple-shaped result (a variadic ${instr.opcode}, such as an argmax or a max ` +
              "with indices, has no derivative rule)"
          : rule.none,
      );
    }
    if (!(typeof rule === "function")) throw new AutodiffError(instr, rule.none);
    const s = instr.shape as ArrayShape;
    const ctx: VjpContext = {
      b,
      instr,
      g,
      full: (v, dims) => b.broadcast(b.scalar(s.type, v), dims, []),
      sum: (x, dims) =>
        dims.length === 0 ? x : b.reduce(x, b.scalar(s.type, 0), dims, addReducer(s.type)),
      addReducer: () => addReducer(s.type),
    };
    let gs: (Instruction | undefined)[];
    try {
      gs = rule(ctx);
    } catch (e) {
      if (e instanceof AutodiffError) throw e;
      throw new AutodiffError(instr, (e as Error).message);
    }
    instr.operands.forEach((o, j) => give(o, gs[j]));
  }
  b.metadata = {};
  return wrt.map((p) => {
    const g = ct.get(p);
    if (g === undefined || Array.isArray(g)) return zerosLike(p.shape as ArrayShape);
    return g;
  });
}
