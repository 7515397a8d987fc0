// Dead code elimination (`dce`): in every computation, deletes the instructions the ROOT does
// not depend on; then deletes the computations the ENTRY no longer reaches through calls.
// Parameters stay (they are the computation's signature), and so do effectful instructions
// (custom-calls, and callers of computations that contain one) together with what they use.

import type { Computation, Instruction, Module } from "../ir/module.ts";
import type { Pass } from "./pass.ts";
import { hasEffects, pinRoots } from "./simplify_support.ts";

export class DCE implements Pass {
  readonly name = "dce";

  run(module: Module): boolean {
    pinRoots(module);
    let changed = false;
    const effects = new Map<Computation, boolean>();
    for (const c of module.computations) {
      if (c.instructions.length > 0 && dceComputation(c, effects)) changed = true;
    }
    if (removeUncalledComputations(module)) changed = true;
    return changed;
  }
}

function dceComputation(c: Computation, effects: Map<Computation, boolean>): boolean {
  const live = new Set<Instruction>();
  const stack: Instruction[] = [c.root];
  for (const i of c.instructions) {
    if (i.opcode === "parameter" || hasEffects(i, effects)) stack.push(i);
  }
  while (stack.length > 0) {
    const i = stack.pop()!;
    if (live.has(i)) continue;
    live.add(i);
    for (const o of i.operands) if (!live.has(o)) stack.push(o);
  }
  if (live.size === c.instructions.length) return false;
  // Users come after their operands, so deleting back to front never meets a used instruction.
  const dead = c.instructions.filter((i) => !live.has(i));
  for (let k = dead.length - 1; k >= 0; k--) c.removeInstruction(dead[k]!);
  return true;
}

/** Deletes every computation that the ENTRY does not reach through called computations. */
function removeUncalledComputations(module: Module): boolean {
  const entry = module.entryOrUndefined;
  if (!entry) return false;
  const reached = new Set<Computation>([entry]);
  const stack = [entry];
  while (stack.length > 0) {
    const c = stack.pop()!;
    for (const callee of c.calledComputations) {
      if (!reached.has(callee)) {
        reached.add(callee);
        stack.push(callee);
      }
    }
  }
  const unreached = module.computations.filter((c) => !reached.has(c));
  // Drop the calls out of unreached computations first, so removal order does not matter.
  for (const c of unreached) for (const i of c.instructions) i.called = [];
  for (const c of unreached) module.removeComputation(c);
  return unreached.length > 0;
}
