// The reference evaluator: runs a Module on Literal arguments with XLA's HLO semantics. It is
// the oracle every backend is tested against, so it is slow and direct: one implementation per
// opcode in a table keyed on Opcode (elementwise kernels in evaluate_elementwise.ts, data
// movement in evaluate_movement.ts, dot/convolution in evaluate_contraction.ts, reduce and
// reduce-window in evaluate_reduction.ts, gather/scatter/sort in evaluate_indexing.ts), control
// flow here. Values carry ACTUAL dims (a bounded dynamic dim of a shape only bounds them); every
// result is checked against its instruction's declared shape, and every failure is an EvalError
// naming the instruction, its operands' shapes and what went wrong.

import { EvalError } from "./errors.ts";
import { Literal } from "./literal.ts";
import type { Computation, Instruction, Module } from "./module.ts";
import type { Opcode } from "./opcodes.ts";
import { shapeToString } from "./shape.ts";
import {
  binaryOp,
  bitcastConvertOp,
  clampOp,
  compareOp,
  convertOp,
  isFiniteOp,
  selectOp,
  unaryOp,
} from "./evaluate_elementwise.ts";
import {
  broadcastOp,
  concatenateOp,
  dynamicSliceOp,
  dynamicUpdateSliceOp,
  getDimensionSizeOp,
  iotaOp,
  padOp,
  reshapeOp,
  bitcastOp,
  reverseOp,
  setDimensionSizeOp,
  sliceOp,
  transposeOp,
} from "./evaluate_movement.ts";
import { convolutionOp, dotOp } from "./evaluate_contraction.ts";
import { reduceOp, reduceWindowOp } from "./evaluate_reduction.ts";
import { gatherOp, scatterOp, sortOp } from "./evaluate_indexing.ts";
import {
  asLiteral,
  asTuple,
  conformanceProblem,
  elems,
  fail,
  scalarIndex,
  valueShapeString,
  type EvalContext,
  type EvalValue,
  type OpImpl,
} from "./evaluate_support.ts";

export type { EvalValue } from "./evaluate_support.ts";
export { erf } from "./evaluate_elementwise.ts";

// ---- custom-call targets ------------------------------------------------------------------

/** A custom-call target: operand values in, a value of the instruction's shape out. */
export type CustomCallImpl = (operands: readonly EvalValue[], instr: Instruction) => EvalValue;

/** Registered custom-call targets by `custom_call_target` name (none are built in). */
export const CUSTOM_CALL_TARGETS = new Map<string, CustomCallImpl>();

export function registerCustomCallTarget(target: string, impl: CustomCallImpl): void {
  if (CUSTOM_CALL_TARGETS.has(target)) {
    throw new Error(`custom-call target '${target}' is already registered`);
  }
  CUSTOM_CALL_TARGETS.set(target, impl);
}

export function unregisterCustomCallTarget(target: string): boolean {
  return CUSTOM_CALL_TARGETS.delete(target);
}

const customCallOp: OpImpl = (instr, ops) => {
  const target = instr.attrs.customCallTarget ?? fail("attribute 'customCallTarget' is missing");
  const impl = CUSTOM_CALL_TARGETS.get(target);
  if (!impl) {
    const known = [...CUSTOM_CALL_TARGETS.keys()].map((k) => `'${k}'`).join(", ") || "none";
    fail(`custom-call target '${target}' is not registered (registered: ${known})`);
  }
  return impl(ops, instr);
};

// ---- control flow -------------------------------------------------------------------------

function callee(instr: Instruction, i: number, role: string): Computation {
  return instr.called[i] ?? fail(`the ${role} computation is missing`);
}

const callOp: OpImpl = (instr, ops, ctx) => ctx.call(callee(instr, 0, "to_apply"), [...ops]);

const fusionOp: OpImpl = (instr, ops, ctx) => ctx.call(callee(instr, 0, "fused"), [...ops]);

const whileOp: OpImpl = (instr, ops, ctx) => {
  const cond = callee(instr, 0, "condition");
  const body = callee(instr, 1, "body");
  if (ops.length !== 1) fail(`while takes one operand, got ${ops.length}`);
  let state = ops[0]!;
  for (;;) {
    const p = asLiteral(ctx.call(cond, [state]), "the condition's result");
    if (p.type !== "pred" || p.dims.length !== 0) {
      fail(`condition '${cond.name}' must return pred[], got ${valueShapeString(p)}`);
    }
    if (elems(p)[0] !== 1) return state;
    state = ctx.call(body, [state]);
  }
};

/**
 * pred form: true → branch 0, false → branch 1. Index form: an index out of range runs the last
 * branch (XLA).
 */
const conditionalOp: OpImpl = (instr, ops, ctx) => {
  const sel = asLiteral(ops[0], "the branch selector");
  const n = instr.called.length;
  if (n === 0) fail("conditional has no branch computations");
  if (ops.length !== n + 1) fail(`${n} branches need ${n} branch operands, got ${ops.length - 1}`);
  let branch: number;
  if (sel.type === "pred") {
    if (sel.dims.length !== 0) fail(`the predicate must be a scalar, got ${valueShapeString(sel)}`);
    if (n !== 2) fail(`a pred conditional needs 2 branches, got ${n}`);
    branch = elems(sel)[0] === 1 ? 0 : 1;
  } else {
    const i = scalarIndex(sel, "the branch index");
    branch = i < 0 || i >= n ? n - 1 : i;
  }
  return ctx.call(instr.called[branch]!, [ops[branch + 1]!]);
};

// ---- the opcode table ---------------------------------------------------------------------

const parameterOp: OpImpl = () => fail("parameters are bound by the caller");

const constantOp: OpImpl = (instr) => instr.attrs.literal ?? fail("attribute 'literal' is missing");

const tupleOp: OpImpl = (_instr, ops) => [...ops];

const getTupleElementOp: OpImpl = (instr, ops) => {
  const t = asTuple(ops[0], "operand");
  const i = instr.attrs.tupleIndex ?? fail("attribute 'tupleIndex' is missing");
  if (i < 0 || i >= t.length) fail(`index ${i} is out of range for a ${t.length}-tuple`);
  return t[i]!;
};

const copyArray = unaryOp("copy");

export const EVALUATORS = {
  parameter: parameterOp,
  constant: constantOp,
  iota: iotaOp,
  // The evaluator runs a program as one replica of one partition (docs/ir.md).
  "replica-id": () => new Literal("u32", [], new Uint32Array(1)),
  "partition-id": () => new Literal("u32", [], new Uint32Array(1)),
  // A token carries nothing: its value is the one token literal.
  "after-all": () => new Literal("token", [], new Uint8Array(1)),
  abs: unaryOp("abs"),
  negate: unaryOp("negate"),
  sign: unaryOp("sign"),
  exponential: unaryOp("exponential"),
  "exponential-minus-one": unaryOp("exponential-minus-one"),
  log: unaryOp("log"),
  "log-plus-one": unaryOp("log-plus-one"),
  sqrt: unaryOp("sqrt"),
  rsqrt: unaryOp("rsqrt"),
  cbrt: unaryOp("cbrt"),
  tanh: unaryOp("tanh"),
  logistic: unaryOp("logistic"),
  sine: unaryOp("sine"),
  cosine: unaryOp("cosine"),
  tan: unaryOp("tan"),
  erf: unaryOp("erf"),
  floor: unaryOp("floor"),
  ceil: unaryOp("ceil"),
  "round-nearest-afz": unaryOp("round-nearest-afz"),
  "round-nearest-even": unaryOp("round-nearest-even"),
  "is-finite": isFiniteOp,
  not: unaryOp("not"),
  // A copy of a tuple is the same (immutable) tuple value.
  copy: (instr, ops, ctx) => (Array.isArray(ops[0]) ? ops[0] : copyArray(instr, ops, ctx)),
  convert: convertOp,
  "bitcast-convert": bitcastConvertOp,
  add: binaryOp("add"),
  subtract: binaryOp("subtract"),
  multiply: binaryOp("multiply"),
  divide: binaryOp("divide"),
  remainder: binaryOp("remainder"),
  power: binaryOp("power"),
  maximum: binaryOp("maximum"),
  minimum: binaryOp("minimum"),
  atan2: binaryOp("atan2"),
  and: binaryOp("and"),
  or: binaryOp("or"),
  xor: binaryOp("xor"),
  "shift-left": binaryOp("shift-left"),
  "shift-right-arithmetic": binaryOp("shift-right-arithmetic"),
  "shift-right-logical": binaryOp("shift-right-logical"),
  compare: compareOp,
  select: selectOp,
  clamp: clampOp,
  broadcast: broadcastOp,
  reshape: reshapeOp,
  bitcast: bitcastOp,
  transpose: transposeOp,
  slice: sliceOp,
  "dynamic-slice": dynamicSliceOp,
  "dynamic-update-slice": dynamicUpdateSliceOp,
  concatenate: concatenateOp,
  pad: padOp,
  reverse: reverseOp,
  dot: dotOp,
  convolution: convolutionOp,
  reduce: reduceOp,
  "reduce-window": reduceWindowOp,
  gather: gatherOp,
  scatter: scatterOp,
  sort: sortOp,
  tuple: tupleOp,
  "get-tuple-element": getTupleElementOp,
  fusion: fusionOp,
  call: callOp,
  while: whileOp,
  conditional: conditionalOp,
  "get-dimension-size": getDimensionSizeOp,
  "set-dimension-size": setDimensionSizeOp,
  "custom-call": customCallOp,
} satisfies { [K in Opcode]: OpImpl };

// ---- running computations -----------------------------------------------------------------

const CONTEXT: EvalContext = { call: (c, args) => evaluateComputation(c, args) };

function operandShapes(values: readonly EvalValue[]): string {
  return values.map(valueShapeString).join(", ");
}

/** Binds arguments to the parameters of `c`, checking count, type and (actual) dims. */
function bindParameters(c: Computation, args: readonly EvalValue[]): Map<Instruction, EvalValue> {
  const params = c.parameters;
  if (args.length !== params.length) {
    throw new EvalError(
      undefined,
      `computation '${c.name}' takes ${params.length} argument(s), got ${args.length}`,
    );
  }
  const env = new Map<Instruction, EvalValue>();
  params.forEach((p, i) => {
    const arg = args[i]!;
    const problem = conformanceProblem(arg, p.shape);
    if (problem !== null) {
      throw new EvalError(
        p.name,
        `argument ${i} is ${valueShapeString(arg)} but parameter ${i} '${p.name}' of ` +
          `'${c.name}' is ${shapeToString(p.shape, false)}: ${problem}`,
      );
    }
    env.set(p, arg);
  });
  return env;
}

function runInstruction(instr: Instruction, ops: EvalValue[]): EvalValue {
  let result: EvalValue;
  try {
    result = EVALUATORS[instr.opcode](instr, ops, CONTEXT);
  } catch (e) {
    const what = `${instr.opcode}(${operandShapes(ops)})`;
    if (e instanceof EvalError) {
      const err = new EvalError(instr.name, `${what}: in a called computation: ${e.message}`);
      err.cause = e;
      throw err;
    }
    const err = new EvalError(instr.name, `${what}: ${e instanceof Error ? e.message : String(e)}`);
    err.cause = e;
    throw err;
  }
  const problem = conformanceProblem(result, instr.shape);
  if (problem !== null) {
    throw new EvalError(
      instr.name,
      `${instr.opcode}(${operandShapes(ops)}) produced ${valueShapeString(result)}, which does ` +
        `not fit the declared shape ${shapeToString(instr.shape, false)}: ${problem}`,
    );
  }
  return result;
}

/** Runs one computation on argument values (used for the entry and for called computations). */
export function evaluateComputation(c: Computation, args: readonly EvalValue[]): EvalValue {
  const env = bindParameters(c, args);
  for (const instr of c.instructions) {
    if (instr.opcode === "parameter") continue;
    const ops = instr.operands.map((o) => {
      const v = env.get(o);
      if (v === undefined) {
        throw new EvalError(instr.name, `operand '${o.name}' has no value (used before defined)`);
      }
      return v;
    });
    env.set(instr, runInstruction(instr, ops));
  }
  const root = env.get(c.root);
  if (root === undefined) throw new EvalError(c.root.name, `the ROOT of '${c.name}' has no value`);
  return root;
}

/**
 * Runs module.entry on `args`. An array result is a Literal; a tuple result an array of values
 * (nested tuples as nested arrays). Arguments for bounded dynamic dims may be shorter than the
 * bound; static dims must match exactly.
 */
export function evaluate(module: Module, args: readonly EvalValue[]): EvalValue {
  const entry = module.entryOrUndefined;
  if (!entry) throw new EvalError(undefined, `module '${module.name}' has no ENTRY computation`);
  return evaluateComputation(entry, args);
}

/** Narrows a result known to be an array value. */
export function expectLiteral(v: EvalValue): Literal {
  if (Array.isArray(v)) {
    throw new EvalError(undefined, `expected an array value, got ${valueShapeString(v)}`);
  }
  return v;
}
