// The algebraic simplifier pass (`algebraic-simplifier`): walks every computation in
// topological order and tries the rewrite rules of passes/simplify_rules.ts on each
// instruction; when one fires, the instruction's users (and the ROOT) move to the replacement
// and whatever that left unused is deleted. A replacement is tried again at once, so chains
// (transpose of transpose of transpose) collapse in one run; the pipeline's fixpoint group
// catches what a later rewrite enables upstream.

import { ComputationBuilder } from "../ir/builder.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import type { Opcode } from "../ir/opcodes.ts";
import { shapesEqual, shapeToString } from "../ir/shape.ts";
import { log } from "../util/log.ts";
import type { Pass } from "./pass.ts";
import { RULES, type Rule } from "./simplify_rules.ts";
import { pinRoots, removeDeadTree, restoreOrder } from "./simplify_support.ts";

export interface AlgebraicSimplifierOptions {
  /** The rules to use (default: all of RULES). */
  rules?: readonly Rule[];
  /** Rule names to leave out. */
  disableRules?: readonly string[];
}

/** Rewrites tried on one instruction in a row before moving on (a guard against a rule loop). */
const MAX_REWRITES_PER_INSTRUCTION = 32;

export class AlgebraicSimplifier implements Pass {
  readonly name = "algebraic-simplifier";
  /** How many times each rule fired in the last run. */
  readonly fired = new Map<string, number>();
  private readonly byOpcode = new Map<Opcode, Rule[]>();

  constructor(options: AlgebraicSimplifierOptions = {}) {
    const disabled = new Set(options.disableRules ?? []);
    for (const r of options.rules ?? RULES) {
      if (disabled.has(r.name)) continue;
      for (const op of r.opcodes) {
        const list = this.byOpcode.get(op) ?? [];
        list.push(r);
        this.byOpcode.set(op, list);
      }
    }
  }

  run(module: Module): boolean {
    this.fired.clear();
    pinRoots(module);
    let changed = false;
    for (const c of [...module.computations]) {
      if (this.simplifyComputation(c)) changed = true;
    }
    if (changed) {
      log("passes", () => {
        const counts = [...this.fired].map(([name, n]) => `${name} x${n}`).join(", ");
        return `${this.name}: ${counts}`;
      });
    }
    return changed;
  }

  private simplifyComputation(c: Computation): boolean {
    const b = new ComputationBuilder(c);
    const removed = new Set<Instruction>();
    let added = false;
    let changed = false;
    for (const instr of [...c.instructions]) {
      let cur = instr;
      for (let step = 0; step < MAX_REWRITES_PER_INSTRUCTION; step++) {
        if (removed.has(cur)) break;
        const count = c.instructions.length;
        const hit = this.rewriteOnce(cur, b);
        if (c.instructions.length > count) added = true;
        if (hit === undefined) break;
        cur.replaceAllUsesWith(hit);
        removeDeadTree(cur, removed);
        changed = true;
        cur = hit;
      }
    }
    if (added) restoreOrder(c);
    return changed;
  }

  /** The replacement from the first rule that fires on `i`, if any. */
  private rewriteOnce(i: Instruction, b: ComputationBuilder): Instruction | undefined {
    for (const r of this.byOpcode.get(i.opcode) ?? []) {
      b.metadata = { ...i.metadata };
      let rep: Instruction | undefined;
      try {
        rep = r.rewrite(i, b);
      } catch (e) {
        const err = new Error(
          `rule '${r.name}' failed on %${i.name} (${i.opcode} ` +
            `${shapeToString(i.shape, false)}): ${e instanceof Error ? e.message : String(e)}`,
        );
        err.cause = e;
        throw err;
      }
      if (rep === undefined || rep === i) continue;
      if (!shapesEqual(rep.shape, i.shape) || rep.operands.includes(i)) {
        throw new Error(
          `rule '${r.name}' replaced %${i.name} (${shapeToString(i.shape, false)}) with ` +
            `%${rep.name} (${shapeToString(rep.shape, false)}), which cannot stand for it`,
        );
      }
      this.fired.set(r.name, (this.fired.get(r.name) ?? 0) + 1);
      return rep;
    }
    return undefined;
  }
}
