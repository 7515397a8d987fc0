// Control flow under the dynamic padder. `call` and `fusion` are inlined (their bodies are
// rewritten in place of the call, so the sizes flow through them like any other op). A `while`
// or `conditional` that touches a bounded dynamic dim gets new computations whose parameter and
// result carry the real sizes next to the padded value — `(value, s32[] size...)`, one size per
// dynamic dim of the original shape — so a loop-carried dynamic dim keeps its real size across
// iterations and each branch reports the sizes of what it returns. Loops and conditionals that
// see no dynamic dim are kept as they are.

import type { Computation, Instruction } from "../ir/module.ts";
import { type Shape, scalarShape, tupleShape } from "../ir/shape.ts";
import {
  type DynamicDim,
  dynamicDims,
  fullSizes,
  hasTracked,
  type Padded,
  type PadCtx,
  sizeAt,
  sizesFrom,
  staticShape,
} from "./dynamic_sizes.ts";
import type { Rule } from "./dynamic_rules.ts";


export const callRule: Rule = (ctx, instr, ops) => ctx.inline(instr.called[0]!, ops);

export const fusionRule: Rule = callRule;

/** True when `c` or anything it calls has a bounded dynamic dim. */
export function touchesDynamic(c: Computation, seen = new Set<Computation>()): boolean {
  if (seen.has(c)) return false;
  seen.add(c);
  return c.instructions.some(
    (i) => hasDynamicShape(i.shape) || i.called.some((k) => touchesDynamic(k, seen)),
  );
}

function hasDynamicShape(s: Shape): boolean {
  return s.kind === "tuple" ? s.elements.some(hasDynamicShape) : s.dynamic.some((d) => d);
}

/** `(static shape, s32[] per dynamic dim)`: how a value travels with its sizes. */
function carrierShape(shape: Shape, dyn: readonly DynamicDim[]): Shape {
  return tupleShape([staticShape(shape), ...dyn.map(() => scalarShape("s32"))]);
}

/** Packs a padded value and its sizes at `dyn` into one carrier tuple. */
function pack(ctx: PadCtx, p: Padded, dyn: readonly DynamicDim[]): Instruction {
  const em = ctx.em;
  return em.b.tuple([p.value, ...dyn.map((d) => em.size(sizeAt(p.sizes, d.path, d.dim), d.bound))]);
}

/** Unpacks a carrier tuple of a value of `shape` back into a padded value. */
function unpack(ctx: PadCtx, carrier: Instruction, shape: Shape, dyn: readonly DynamicDim[]) {
  const b = ctx.em.b;
  const value = b.getTupleElement(carrier, 0);
  const sizes = dyn.map((_, k) => b.getTupleElement(carrier, k + 1));
  return { value, sizes: sizesFrom(shape, dyn, sizes) };
}

export const whileRule: Rule = (ctx, instr, ops) => {
  const [cond, body] = [instr.called[0]!, instr.called[1]!];
  const init = ops[0]!;
  const dyn = dynamicDims(instr.shape);
  const quiet =
    dyn.length === 0 && !hasTracked(init.sizes) && !touchesDynamic(cond) && !touchesDynamic(body);
  if (quiet) {
    return { value: ctx.copy(instr, [init.value]), sizes: fullSizes(instr.shape) };
  }
  const state = carrierShape(instr.shape, dyn);
  const newCond = ctx.subComputation(`${cond.name}.padded`, [state], (sub, [p]) => {
    return sub.inline(cond, [unpack(sub, p!, instr.shape, dyn)]).value;
  });
  const newBody = ctx.subComputation(`${body.name}.padded`, [state], (sub, [p]) => {
    return pack(sub, sub.inline(body, [unpack(sub, p!, instr.shape, dyn)]), dyn);
  });
  const loop = ctx.em.b.while(pack(ctx, init, dyn), newCond, newBody);
  return unpack(ctx, loop, instr.shape, dyn);
};

export const conditionalRule: Rule = (ctx, instr, ops) => {
  const branches = instr.called;
  const args = ops.slice(1);
  const resultDyn = dynamicDims(instr.shape);
  const argDyn = args.map((_, j) => dynamicDims(instr.operand(j + 1).shape));
  const quiet =
    resultDyn.length === 0 &&
    argDyn.every((d) => d.length === 0) &&
    !args.some((a) => hasTracked(a.sizes)) &&
    !branches.some((c) => touchesDynamic(c));
  if (quiet) {
    return { value: ctx.copy(instr, ops.map((o) => o.value)), sizes: fullSizes(instr.shape) };
  }
  const newBranches = branches.map((c, j) => {
    const argShape = instr.operand(j + 1).shape;
    const param = carrierShape(argShape, argDyn[j]!);
    return ctx.subComputation(`${c.name}.padded`, [param], (sub, [p]) =>
      pack(sub, sub.inline(c, [unpack(sub, p!, argShape, argDyn[j]!)]), resultDyn),
    );
  });
  const packed = args.map((a, j) => pack(ctx, a, argDyn[j]!));
  const r = ctx.em.b.conditional(ops[0]!.value, packed, newBranches);
  return unpack(ctx, r, instr.shape, resultDyn);
};
