// The reference evaluator: runs a Module on Literal arguments with XLA's HLO semantics. It is
// the oracle every backend is tested against, so it is slow and direct: one implementation per
// opcode in a table keyed on Opcode (elementwise kernels in evaluate_elementwise.ts, data
// movement in evaluate_movement.ts, dot/convolution in evaluate_contraction.ts, reduce and
// reduce-window in evaluate_reduction.ts, gather/scatter/sort in evaluate_indexing.ts), control
// flow here. Values carry ACTUAL dims (a bounded dynamic dim of a shape only bounds them); every
// result is checked against its instruction's declared shape, and every failure is an EvalError
// naming the instruction, its operands' shapes and what went wrong.

import { EvalError } from "./errors.ts";
import {
  allocate,
  bf16BitsToNumber,
  f16BitsToNumber,
  f32ToBF16Bits,
  f32ToF16Bits,
  Literal,
} from "./literal.ts";
import type { Computation, Instruction, Module } from "./module.ts";
import { isCollective, type Opcode } from "./opcodes.ts";
import { type Shape, shapeToString } from "./shape.ts";
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
import { collectiveImpl, type DeviceCount } from "./evaluate_collective.ts";
import {
  asLiteral,
  asTuple,
  conformanceProblem,
  elems,
  fail,
  scalarIndex,
  valueShapeString,
  zeros,
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

/**
 * async-start runs its callee at once (a program's result does not depend on when it runs) and
 * gives ((operands...), result, contexts...); the contexts, which only XLA's runtime reads, are
 * zeros of their declared types.
 */
const asyncStartOp: OpImpl = (instr, ops, ctx) =>
  asyncStartValue(instr, ops, ctx.call(callee(instr, 0, "async"), [...ops]));

function asyncStartValue(instr: Instruction, ops: readonly EvalValue[], result: EvalValue) {
  const s = instr.shape;
  const contexts = s.kind === "tuple" ? s.elements.slice(2) : [];
  return [[...ops], result, ...contexts.map((e) => zeroValue(e))];
}

function zeroValue(s: Shape): EvalValue {
  return s.kind === "tuple" ? s.elements.map(zeroValue) : zeros(s.type, s.dims);
}

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

/**
 * A collective run by one device alone (evaluate(), or a collective evaluated outside lockstep):
 * its groups may name only device 0; evaluateReplicated runs it over N devices.
 */
function oneDevice(op: Opcode): OpImpl {
  const impl = collectiveImpl(op)!;
  return (instr, ops, ctx) => {
    if (ctx.device !== undefined && (ctx.device.replica !== 0 || ctx.device.partition !== 0)) {
      fail(`${op} runs over every device at once: evaluate it with evaluateReplicated`);
    }
    try {
      return impl(instr, ops.map((v) => [v]), ONE_DEVICE, [ctx])[0]!;
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      fail(`${why} (evaluate() runs one device; evaluateReplicated runs N)`);
    }
  };
}

// ---- transfers, random numbers, reduce-precision ------------------------------------------

/** An opcode the evaluator does not run, with why. */
const notEvaluated =
  (why: string): OpImpl =>
  (instr) =>
    fail(`the evaluator does not run ${instr.opcode}: ${why}`);

const TRANSFER =
  "a transfer between devices or with the host, which a lone program has no peer for";
const RANDOM = "its numbers are the backend's (XLA defines no values to check them against)";

/** The bit layout of the float types reduce-precision rounds: total, exponent and mantissa bits. */
const FLOAT_BITS: Partial<Record<string, { bits: number; exp: number; mant: number }>> = {
  f16: { bits: 16, exp: 5, mant: 10 },
  bf16: { bits: 16, exp: 8, mant: 7 },
  f32: { bits: 32, exp: 8, mant: 23 },
  f64: { bits: 64, exp: 11, mant: 52 },
};

function floatToBits(type: string, v: number): bigint {
  switch (type) {
    case "f16":
      return BigInt(f32ToF16Bits(v));
    case "bf16":
      return BigInt(f32ToBF16Bits(v));
    case "f32":
      return BigInt(new Uint32Array(Float32Array.of(v).buffer)[0]!);
    default:
      return new BigUint64Array(Float64Array.of(v).buffer)[0]!;
  }
}

function bitsToFloat(type: string, b: bigint): number {
  switch (type) {
    case "f16":
      return f16BitsToNumber(Number(b));
    case "bf16":
      return bf16BitsToNumber(Number(b));
    case "f32":
      return new Float32Array(Uint32Array.of(Number(b)).buffer)[0]!;
    default:
      return new Float64Array(BigUint64Array.of(b).buffer)[0]!;
  }
}

/**
 * XLA's reduce-precision (the HLO evaluator's and the CPU emitter's bit arithmetic): round the
 * mantissa to `mant` bits to nearest even, then flush exponents beyond an `exp`-bit format's
 * range to zero or infinity; a NaN stays itself (or becomes infinity with no mantissa bits).
 */
export function reducePrecision(type: string, v: number, exp: number, mant: number): number {
  const f = FLOAT_BITS[type];
  if (f === undefined) throw new Error(`reduce-precision of ${type} is not supported`);
  if (Number.isNaN(v)) return mant > 0 ? v : Infinity;
  let x = floatToBits(type, v);
  const srcMant = BigInt(f.mant);
  if (mant < f.mant) {
    const shift = srcMant - BigInt(mant);
    const lastBit = 1n << shift;
    const baseBias = (lastBit >> 1n) - 1n;
    const bias = ((x & lastBit) >> shift) + baseBias;
    const truncation = ~(lastBit - 1n);
    x = (x + bias) & truncation & ((1n << BigInt(f.bits)) - 1n);
  }
  if (exp < f.exp) {
    const signMask = 1n << BigInt(f.bits - 1);
    const expMask = ((1n << BigInt(f.exp)) - 1n) << srcMant;
    const bias = (1n << BigInt(f.exp - 1)) - 1n;
    const reducedBias = (1n << BigInt(exp - 1)) - 1n;
    const maxExp = bias + reducedBias;
    const minExp = bias - reducedBias;
    const xExp = x & expMask;
    const signedZero = x & signMask;
    if (xExp > maxExp << srcMant) x = signedZero | expMask;
    else if (xExp <= minExp << srcMant) x = signedZero;
  }
  return bitsToFloat(type, x);
}

const reducePrecisionOp: OpImpl = (instr, ops) => {
  const x = asLiteral(ops[0], "the operand");
  const exp = instr.attrs.exponentBits ?? fail("attribute 'exponentBits' is missing");
  const mant = instr.attrs.mantissaBits ?? fail("attribute 'mantissaBits' is missing");
  if (FLOAT_BITS[x.type] === undefined) {
    fail(`reduce-precision of ${x.type} is not computed (the evaluator rounds f16 bf16 f32 f64)`);
  }
  const src = elems(x);
  const out = allocate(x.type, src.length);
  const dst = out as unknown as number[];
  for (let k = 0; k < src.length; k++) {
    dst[k] = reducePrecision(x.type, src[k] as number, exp, mant);
  }
  return new Literal(x.type, x.dims, out);
};

/** copy-start: (destination, source, context); the copy is done at once. */
const copyStartOp: OpImpl = (_instr, ops) => [
  ops[0]!,
  ops[0]!,
  new Literal("u32", [], new Uint32Array(1)),
];

/** map: to_apply on each element of the operands (scalars in, a scalar out). */
const mapOp: OpImpl = (instr, ops, ctx) => {
  const comp = callee(instr, 0, "to_apply");
  const xs = ops.map((o, i) => asLiteral(o, `operand ${i}`));
  const first = xs[0] ?? fail("map needs an operand");
  const n = elems(first).length;
  const shape = instr.shape;
  if (shape.kind !== "array") fail(`the result must be an array, got ${shapeToString(shape)}`);
  const out = allocate(shape.type, n);
  const dst = out as unknown as (number | bigint)[];
  for (let k = 0; k < n; k++) {
    const args = xs.map((x) => {
      const one = allocate(x.type, 1) as unknown as (number | bigint)[];
      one[0] = elems(x)[k]!;
      return new Literal(x.type, [], one as unknown as ReturnType<typeof allocate>);
    });
    const r = asLiteral(ctx.call(comp, args), "to_apply's result");
    dst[k] = elems(r)[0]!;
  }
  return new Literal(shape.type, first.dims, out);
};

const ONE_DEVICE: DeviceCount = { replicas: 1, partitions: 1 };

export const EVALUATORS = {
  parameter: parameterOp,
  constant: constantOp,
  iota: iotaOp,
  // evaluate() runs a program as replica 0 of partition 0; evaluateReplicated on N devices.
  "replica-id": (_i, _o, ctx) => new Literal("u32", [], Uint32Array.of(ctx.device?.replica ?? 0)),
  "partition-id": (_i, _o, ctx) =>
    new Literal("u32", [], Uint32Array.of(ctx.device?.partition ?? 0)),
  "all-reduce": oneDevice("all-reduce"),
  "all-reduce-start": oneDevice("all-reduce-start"),
  "all-reduce-done": oneDevice("all-reduce-done"),
  "all-gather": oneDevice("all-gather"),
  "all-gather-start": oneDevice("all-gather-start"),
  "all-gather-done": oneDevice("all-gather-done"),
  "reduce-scatter": oneDevice("reduce-scatter"),
  "all-to-all": oneDevice("all-to-all"),
  "collective-permute": oneDevice("collective-permute"),
  "collective-permute-start": oneDevice("collective-permute-start"),
  "collective-permute-done": oneDevice("collective-permute-done"),
  // A token carries nothing: its value is the one token literal.
  "after-all": () => new Literal("token", [], new Uint8Array(1)),
  // Orderings only: the value is the operand's.
  "add-dependency": (_instr, ops) => ops[0]!,
  "opt-barrier": (_instr, ops) => ops[0]!,
  send: notEvaluated(TRANSFER),
  "send-done": notEvaluated(TRANSFER),
  recv: notEvaluated(TRANSFER),
  "recv-done": notEvaluated(TRANSFER),
  infeed: notEvaluated(TRANSFER),
  outfeed: notEvaluated(TRANSFER),
  "copy-start": copyStartOp,
  "copy-done": (_instr, ops) => asTuple(ops[0], "the copy-start value")[0]!,
  "reduce-precision": reducePrecisionOp,
  rng: notEvaluated(RANDOM),
  "rng-bit-generator": notEvaluated(RANDOM),
  "ragged-dot": notEvaluated("the evaluator has no ragged-dot yet (grouped matmuls)"),
  map: mapOp,
  scan: notEvaluated("the evaluator has no scan yet"),
  "ragged-all-to-all": notEvaluated("a collective the replicated evaluator does not have yet"),
  "collective-broadcast": notEvaluated("a collective the replicated evaluator does not have yet"),
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
  "async-start": asyncStartOp,
  // The callee ran at the start: an update passes the state on, a done takes the result.
  "async-update": (_instr, ops) => ops[0]!,
  "async-done": (_instr, ops) => asTuple(ops[0], "the async-start value")[1]!,
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

function runInstruction(instr: Instruction, ops: EvalValue[], ctx: EvalContext): EvalValue {
  const result = guarded(instr, ops, () => EVALUATORS[instr.opcode](instr, ops, ctx));
  checkResult(instr, ops, result);
  return result;
}

/** Runs `fn` for `instr`, turning any failure into an EvalError naming it and its operands. */
function guarded<T>(instr: Instruction, ops: readonly EvalValue[], fn: () => T): T {
  try {
    return fn();
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
}

function checkResult(instr: Instruction, ops: readonly EvalValue[], result: EvalValue): void {
  const problem = conformanceProblem(result, instr.shape);
  if (problem !== null) {
    throw new EvalError(
      instr.name,
      `${instr.opcode}(${operandShapes(ops)}) produced ${valueShapeString(result)}, which does ` +
        `not fit the declared shape ${shapeToString(instr.shape, false)}: ${problem}`,
    );
  }
}

/** Runs one computation on argument values (used for the entry and for called computations). */
export function evaluateComputation(
  c: Computation,
  args: readonly EvalValue[],
  ctx: EvalContext = CONTEXT,
): EvalValue {
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
    env.set(instr, runInstruction(instr, ops, ctx));
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

// ---- N devices in lockstep ----------------------------------------------------------------

export type { DeviceCount } from "./evaluate_collective.ts";

/**
 * Runs module.entry on `replicas x partitions` simulated devices in lockstep, device d
 * (replica floor(d / partitions), partition d mod partitions) on `args[d]`; returns every
 * device's result. Each instruction runs on every device before the next one starts, so a
 * collective sees every device's operands (ir/evaluate_collective.ts). A collective inside a
 * loop or a branch needs every device to take the same path (as on real devices, where
 * diverging ones would wait forever); one inside a reducer or comparator is an error.
 */
export function evaluateReplicated(
  module: Module,
  args: readonly (readonly EvalValue[])[],
  devices: Partial<DeviceCount> = {},
): EvalValue[] {
  const count: DeviceCount = {
    replicas: devices.replicas ?? args.length / (devices.partitions ?? 1),
    partitions: devices.partitions ?? 1,
  };
  const n = count.replicas * count.partitions;
  if (!Number.isInteger(count.replicas) || count.replicas < 1 || count.partitions < 1 ||
    args.length !== n) {
    throw new EvalError(
      undefined,
      `evaluateReplicated needs one argument list per device: ${count.replicas} replica(s) x ` +
        `${count.partitions} partition(s), got ${args.length} list(s)`,
    );
  }
  const entry = module.entryOrUndefined;
  if (!entry) throw new EvalError(undefined, `module '${module.name}' has no ENTRY computation`);
  const ctxs: EvalContext[] = [];
  for (let d = 0; d < n; d++) {
    const device = { replica: Math.floor(d / count.partitions), partition: d % count.partitions };
    const ctx: EvalContext = { call: (c, a) => evaluateComputation(c, a, ctx), device };
    ctxs.push(ctx);
  }
  return lockstep(entry, args, ctxs, count, new Map());
}

/** async-update and async-done name the async computation but do not run it. */
function runsCallees(instr: Instruction): boolean {
  return instr.opcode !== "async-update" && instr.opcode !== "async-done";
}

/** True when `c` or a computation it calls holds a collective. */
function holdsCollective(c: Computation, memo: Map<Computation, boolean>): boolean {
  const known = memo.get(c);
  if (known !== undefined) return known;
  memo.set(c, false); // the call graph has no cycles (the verifier checks)
  const v = c.instructions.some(
    (i) => isCollective(i.opcode) || i.called.some((k) => holdsCollective(k, memo)),
  );
  memo.set(c, v);
  return v;
}

function lockstep(
  c: Computation,
  args: readonly (readonly EvalValue[])[],
  ctxs: readonly EvalContext[],
  devices: DeviceCount,
  memo: Map<Computation, boolean>,
): EvalValue[] {
  const envs = args.map((a) => bindParameters(c, a));
  for (const instr of c.instructions) {
    if (instr.opcode === "parameter") continue;
    const ops = envs.map((env) =>
      instr.operands.map((o) => {
        const v = env.get(o);
        if (v === undefined) {
          throw new EvalError(instr.name, `operand '${o.name}' has no value (used before defined)`);
        }
        return v;
      }),
    );
    const impl = collectiveImpl(instr.opcode);
    let results: EvalValue[];
    if (impl !== undefined) {
      const byOperand = instr.operands.map((_, k) => ops.map((o) => o[k]!));
      results = guarded(instr, ops[0]!, () => impl(instr, byOperand, devices, ctxs));
      results.forEach((r, d) => checkResult(instr, ops[d]!, r));
    } else if (runsCallees(instr) && instr.called.some((k) => holdsCollective(k, memo))) {
      results = guarded(instr, ops[0]!, () => lockstepCall(instr, ops, ctxs, devices, memo));
      results.forEach((r, d) => checkResult(instr, ops[d]!, r));
    } else {
      results = ops.map((o, d) => runInstruction(instr, o, ctxs[d]!));
    }
    envs.forEach((env, d) => env.set(instr, results[d]!));
  }
  return envs.map((env) => {
    const root = env.get(c.root);
    if (root === undefined) {
      throw new EvalError(c.root.name, `the ROOT of '${c.name}' has no value`);
    }
    return root;
  });
}

/** call, fusion, while and conditional whose callees hold a collective, on every device. */
function lockstepCall(
  instr: Instruction,
  ops: readonly EvalValue[][],
  ctxs: readonly EvalContext[],
  devices: DeviceCount,
  memo: Map<Computation, boolean>,
): EvalValue[] {
  const run = (k: Computation, a: readonly (readonly EvalValue[])[]) =>
    lockstep(k, a, ctxs, devices, memo);
  const same = (vs: readonly number[], what: string): number => {
    if (vs.some((v) => v !== vs[0])) {
      fail(`the devices disagree on ${what} (${vs.join(", ")}), and a collective inside needs ` +
        "every device");
    }
    return vs[0]!;
  };
  switch (instr.opcode) {
    case "call":
    case "fusion":
      return run(callee(instr, 0, "called"), ops);
    case "async-start":
      return run(callee(instr, 0, "async"), ops).map((r, d) => asyncStartValue(instr, ops[d]!, r));
    case "while": {
      const cond = callee(instr, 0, "condition");
      const body = callee(instr, 1, "body");
      let state = ops.map((o) => o[0]!);
      for (;;) {
        const preds = run(cond, state.map((s) => [s])).map(
          (p) => elems(asLiteral(p, "the condition's result"))[0] as number,
        );
        if (same(preds, "the loop condition") !== 1) return state;
        state = run(body, state.map((s) => [s]));
      }
    }
    case "conditional": {
      const n = instr.called.length;
      const picks = ops.map((o) => {
        const sel = asLiteral(o[0], "the branch selector");
        if (sel.type === "pred") return elems(sel)[0] === 1 ? 0 : 1;
        const i = scalarIndex(sel, "the branch index");
        return i < 0 || i >= n ? n - 1 : i;
      });
      const b = same(picks, "the branch to take");
      return run(instr.called[b]!, ops.map((o) => [o[b + 1]!]));
    }
    default:
      return fail(`a collective inside the computation ${instr.opcode} calls is not supported`);
  }
}
