// Constant folding (`constant-folding`): an instruction whose operands are all constants is
// replaced by a constant computed WITH THE REFERENCE EVALUATOR (ir/evaluate.ts), so folding
// means exactly what running means. Only small results are materialized (<= maxElements, 1024 by
// default); broadcast and iota are never folded themselves (they are cheap to generate and
// would only grow the program). An elementwise op whose operands are all splats (a constant or
// a broadcast of one with every element equal) folds to a broadcast of one scalar constant, so
// big splats stay unmaterialized. Parameters, custom-calls (and callers of computations that
// contain one), while loops and dynamic shapes are left alone.

import { ComputationBuilder } from "../ir/builder.ts";
import { evaluate, evaluateComputation, EVALUATORS, type EvalValue } from "../ir/evaluate.ts";
import { conformanceProblem } from "../ir/evaluate_support.ts";
import { Literal, scalarLiteral } from "../ir/literal.ts";
import { type Computation, type Instruction, Module } from "../ir/module.ts";
import { isCollective, OPCODE_INFO, type Opcode } from "../ir/opcodes.ts";
import { elementCount, scalarShape } from "../ir/shape.ts";
import { log } from "../util/log.ts";
import type { Pass } from "./pass.ts";
import {
  arrayShapeOf,
  containsWhere,
  isStatic,
  pinRoots,
  removeDeadTree,
  restoreOrder,
  splatValue,
} from "./simplify_support.ts";

export interface ConstantFoldingOptions {
  /** Largest result (in elements) folded into a constant literal. Default 1024. */
  maxElements?: number;
  /** Largest operand (in elements) the folder evaluates, to bound compile time. Default 65536. */
  maxOperandElements?: number;
}

/** Opcodes never folded: inputs, generators kept unmaterialized, and possible non-termination. */
const NEVER_FOLD: ReadonlySet<Opcode> = new Set<Opcode>([
  "parameter",
  "constant",
  "iota",
  "broadcast",
  "custom-call",
  "while",
]);

/**
 * True for what must run where the program runs: a loop (it might not end), a custom-call (it
 * might have effects), transfers, orderings and random numbers, and what depends on which
 * device runs it (replica-id, partition-id and the collectives: folding them would compute one
 * device's answer for every device).
 */
function unsafeAtCompileTime(i: Instruction): boolean {
  return (
    i.opcode === "while" ||
    i.opcode === "custom-call" ||
    dependsOnDevice(i.opcode) ||
    SIDE_EFFECTS.has(i.opcode)
  );
}

/** Transfers, orderings and random numbers: what they do is more than the value they give. */
const SIDE_EFFECTS: ReadonlySet<Opcode> = new Set<Opcode>([
  "add-dependency",
  "opt-barrier",
  "send",
  "send-done",
  "recv",
  "recv-done",
  "infeed",
  "outfeed",
  "rng",
  "rng-bit-generator",
  "ragged-all-to-all",
  "collective-broadcast",
]);

function dependsOnDevice(op: Opcode): boolean {
  return op === "replica-id" || op === "partition-id" || isCollective(op);
}

export class ConstantFolding implements Pass {
  readonly name = "constant-folding";
  private readonly maxElements: number;
  private readonly maxOperandElements: number;

  constructor(options: ConstantFoldingOptions = {}) {
    this.maxElements = options.maxElements ?? 1024;
    this.maxOperandElements = options.maxOperandElements ?? 65536;
  }

  run(module: Module): boolean {
    pinRoots(module);
    let changed = false;
    for (const c of [...module.computations]) {
      if (this.foldComputation(c)) changed = true;
    }
    return changed;
  }

  private foldComputation(c: Computation): boolean {
    const b = new ComputationBuilder(c);
    const removed = new Set<Instruction>();
    const unsafeCallees = new Map<Computation, boolean>();
    let changed = false;
    for (const instr of [...c.instructions]) {
      // A callee holding a loop or a custom-call is never run at compile time: the loop might
      // not end (even in a branch the program never takes), the custom-call might have effects.
      if (
        removed.has(instr) ||
        NEVER_FOLD.has(instr.opcode) ||
        dependsOnDevice(instr.opcode) ||
        instr.called.some((k) => containsWhere(k, unsafeAtCompileTime, unsafeCallees))
      ) {
        continue;
      }
      const shape = arrayShapeOf(instr.shape);
      if (!shape || !isStatic(shape) || instr.operands.some((o) => !isStatic(o.shape))) continue;
      b.metadata = { ...instr.metadata };
      const rep = this.foldSplat(instr, b) ?? this.foldSmall(instr, b);
      if (rep === undefined) continue;
      instr.replaceAllUsesWith(rep);
      removeDeadTree(instr, removed);
      changed = true;
    }
    if (changed) restoreOrder(c);
    return changed;
  }

  /** op(splat a, splat b, ...) → broadcast(constant(op(a, b, ...))) for elementwise ops. */
  private foldSplat(instr: Instruction, b: ComputationBuilder): Instruction | undefined {
    if (!OPCODE_INFO[instr.opcode].elementwise || instr.operands.length === 0) return undefined;
    const shape = arrayShapeOf(instr.shape)!;
    if (shape.dims.length === 0) return undefined; // a scalar folds as a plain constant
    // A bitcast between widths regroups elements: one scalar in does not give one scalar out.
    const x = arrayShapeOf(instr.operand(0).shape);
    if (instr.opcode === "bitcast-convert" && x?.dims.length !== shape.dims.length) {
      return undefined;
    }
    const values: Literal[] = [];
    for (const o of instr.operands) {
      const s = arrayShapeOf(o.shape);
      const v = splatValue(o);
      if (!s || v === undefined) return undefined;
      values.push(scalarOf(s.type, v));
    }
    let result: Literal;
    try {
      result = evalScalar(instr, values);
    } catch (e) {
      log("passes", `${this.name}: %${instr.name} not folded: ${(e as Error).message}`);
      return undefined;
    }
    return b.op("broadcast", [b.constant(result)], { dimensions: [] }, [], instr.shape);
  }

  /** A constant for an instruction whose operands are all constants, if the result is small. */
  private foldSmall(instr: Instruction, b: ComputationBuilder): Instruction | undefined {
    const shape = arrayShapeOf(instr.shape)!;
    if (elementCount(shape) > this.maxElements) return undefined;
    const values: EvalValue[] = [];
    for (const o of instr.operands) {
      const v = this.constantValue(o);
      if (v === undefined) return undefined;
      values.push(v);
    }
    let result: EvalValue;
    try {
      result = EVALUATORS[instr.opcode](instr, values, { call: evaluateComputation });
      const problem = conformanceProblem(result, instr.shape);
      if (problem !== null) throw new Error(problem);
    } catch (e) {
      // Left for the runtime, which reports the failure when the program runs.
      log("passes", `${this.name}: %${instr.name} not folded: ${(e as Error).message}`);
      return undefined;
    }
    if (Array.isArray(result)) return undefined;
    return b.computation.addInstruction({
      opcode: "constant",
      shape: instr.shape,
      attrs: { literal: result },
      metadata: { ...instr.metadata },
    });
  }

  /**
   * The value of a constant operand: a constant's literal, or the (small) value of a broadcast
   * of a constant or of an iota, generated by the evaluator.
   */
  private constantValue(o: Instruction): Literal | undefined {
    const s = arrayShapeOf(o.shape);
    if (!s || !isStatic(s) || elementCount(s) > this.maxOperandElements) return undefined;
    if (o.opcode === "constant") return o.attrs.literal;
    const generator =
      o.opcode === "iota" || (o.opcode === "broadcast" && o.operand(0).opcode === "constant");
    if (!generator) return undefined;
    const inputs = o.operands.map((x) => x.attrs.literal);
    if (inputs.some((x) => x === undefined)) return undefined;
    try {
      const v = EVALUATORS[o.opcode](o, inputs as Literal[], { call: evaluateComputation });
      return Array.isArray(v) ? undefined : v;
    } catch {
      return undefined;
    }
  }
}

/** A rank-0 literal holding one stored element. */
function scalarOf(type: Literal["type"], v: number | bigint): Literal {
  return scalarLiteral(type, type === "pred" ? v !== 0 : v);
}

/**
 * Runs `instr`'s elementwise op on scalar operands through the evaluator, in a scratch module
 * that holds the operands as constants and the op with a rank-0 result.
 */
function evalScalar(instr: Instruction, operands: readonly Literal[]): Literal {
  const m = new Module("fold");
  const comp = m.addComputation("fold");
  m.entry = comp;
  const ops = operands.map((lit) =>
    comp.addInstruction({ opcode: "constant", shape: lit.shape, attrs: { literal: lit } }),
  );
  const shape = arrayShapeOf(instr.shape)!;
  comp.addInstruction({
    opcode: instr.opcode,
    shape: scalarShape(shape.type),
    operands: ops,
    attrs: instr.attrs,
  });
  const v = evaluate(m, []);
  if (Array.isArray(v)) throw new Error(`${instr.opcode} produced a tuple`);
  return v;
}
