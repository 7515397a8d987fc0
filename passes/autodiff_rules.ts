// Reverse-mode derivative rules, one per opcode: each rule gets the forward instruction (in the
// module being differentiated), its output cotangent and a builder on that module's ENTRY, and
// returns one cotangent per operand (undefined where none flows). Opcodes without a derivative
// map to `{ none: reason }`; autodiff.ts throws an AutodiffError when a gradient reaches one.

import type { ComputationBuilder } from "../ir/builder.ts";
import type { Instruction } from "../ir/module.ts";
import type { Opcode } from "../ir/opcodes.ts";
import type { ArrayShape } from "../ir/shape.ts";

export interface VjpContext {
  readonly b: ComputationBuilder;
  /** The forward instruction (its operands are the forward values). */
  readonly instr: Instruction;
  /** The cotangent of the forward instruction's (array) result. */
  readonly g: Instruction;
  /** A scalar of the result's element type broadcast to `dims`. */
  full(v: number, dims: readonly number[]): Instruction;
  /** Sum of `x` over `dims`. */
  sum(x: Instruction, dims: readonly number[]): Instruction;
}

export type VjpRule = (ctx: VjpContext) => (Instruction | undefined)[];

const arr = (i: Instruction): ArrayShape => {
  if (i.shape.kind !== "array") throw new Error(`%${i.name} is not an array`);
  return i.shape;
};
const dimsOf = (i: Instruction): readonly number[] => arr(i).dims;
const range = (n: number): number[] => Array.from({ length: n }, (_, k) => k);

const none = (reason: string): { none: string } => ({ none: reason });
const notFloat = none("its result is not a float (integer, pred or index)");

function maskedPair(c: VjpContext, dir: "GE" | "LE"): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [x, y] = instr.operands as [Instruction, Instruction];
  const zero = c.full(0, dimsOf(g));
  // Ties go to the first operand (first-wins).
  const m = b.compare(x, y, dir);
  return [b.select(m, g, zero), b.select(m, zero, g)];
}

function broadcastVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const bd = instr.attrs.dimensions ?? [];
  const outRank = dimsOf(g).length;
  const reduced = range(outRank).filter((d) => !bd.includes(d));
  let r = c.sum(g, reduced);
  const sorted = [...bd].sort((p, q) => p - q);
  const perm = bd.map((d) => sorted.indexOf(d));
  if (perm.some((p, k) => p !== k)) r = b.transpose(r, perm);
  return [r];
}

function dotVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const [lhs, rhs] = instr.operands as [Instruction, Instruction];
  const dn = instr.attrs.dot!;
  const lr = dimsOf(lhs).length;
  const rr = dimsOf(rhs).length;
  const nb = dn.lhsBatch.length;
  const lFree = range(lr).filter((d) => !dn.lhsBatch.includes(d) && !dn.lhsContracting.includes(d));
  const rFree = range(rr).filter((d) => !dn.rhsBatch.includes(d) && !dn.rhsContracting.includes(d));
  const gBatch = range(nb);
  const gL = lFree.map((_, k) => nb + k);
  const gR = rFree.map((_, k) => nb + lFree.length + k);
  const side = (
    other: Instruction,
    otherBatch: readonly number[],
    otherFree: readonly number[],
    gFreeOther: readonly number[],
    selfRank: number,
    selfBatch: readonly number[],
    selfFree: readonly number[],
    selfContr: readonly number[],
    otherContr: readonly number[],
  ): Instruction => {
    // Result dims: batch, g's dims for self's free dims, other's contracting dims ascending.
    let r = b.dot(g, other, {
      lhsBatch: gBatch,
      rhsBatch: [...otherBatch],
      lhsContracting: [...gFreeOther],
      rhsContracting: [...otherFree],
    });
    const sortedOther = [...otherContr].sort((p, q) => p - q);
    const perm = range(selfRank).map((d) => {
      const bi = selfBatch.indexOf(d);
      if (bi >= 0) return bi;
      const fi = selfFree.indexOf(d);
      if (fi >= 0) return nb + fi;
      const ci = selfContr.indexOf(d);
      return nb + selfFree.length + sortedOther.indexOf(otherContr[ci]!);
    });
    if (perm.some((p, k) => p !== k)) r = b.transpose(r, perm);
    return r;
  };
  return [
    side(rhs, dn.rhsBatch, rFree, gR, lr, dn.lhsBatch, lFree, dn.lhsContracting, dn.rhsContracting),
    side(lhs, dn.lhsBatch, lFree, gL, rr, dn.rhsBatch, rFree, dn.rhsContracting, dn.lhsContracting),
  ];
}

function reduceVjp(c: VjpContext): (Instruction | undefined)[] {
  const { b, instr, g } = c;
  const reducer = instr.called[0]!;
  if (instr.operands.length !== 2 || reducer.root.opcode !== "add") {
    throw new Error("only a single-input reduce with an add reducer has a derivative so far");
  }
  const x = instr.operands[0]!;
  const red = instr.attrs.dimensions ?? [];
  const kept = range(dimsOf(x).length).filter((d) => !red.includes(d));
  const gx = b.broadcast(g, dimsOf(x), kept);
  const ginit = c.sum(g, range(dimsOf(g).length));
  return [gx, ginit];
}

const U = (f: (c: VjpContext, x: Instruction) => Instruction): VjpRule => {
  return (c) => [f(c, c.instr.operands[0]!)];
};

export const VJP_RULES: Record<Opcode, VjpRule | { none: string }> = {
  parameter: () => [],
  constant: () => [],
  iota: notFloat,
  abs: U(({ b, g }, x) => b.multiply(g, b.sign(x))),
  negate: U(({ b, g }) => b.negate(g)),
  sign: none("sign is piecewise constant"),
  exponential: U(({ b, g, instr }) => b.multiply(g, instr)),
  "exponential-minus-one": none("not implemented yet"),
  log: U(({ b, g }, x) => b.divide(g, x)),
  "log-plus-one": none("not implemented yet"),
  sqrt: U((c) => c.b.divide(c.b.multiply(c.g, c.full(0.5, dimsOf(c.g))), c.instr)),
  rsqrt: U((c, x) => {
    const { b, g, instr } = c;
    return b.multiply(b.multiply(g, c.full(-0.5, dimsOf(g))), b.divide(instr, x));
  }),
  cbrt: none("not implemented yet"),
  tanh: U((c) => {
    const { b, g, instr: y } = c;
    return b.multiply(g, b.subtract(c.full(1, dimsOf(g)), b.multiply(y, y)));
  }),
  logistic: U((c) => {
    const { b, g, instr: y } = c;
    return b.multiply(g, b.multiply(y, b.subtract(c.full(1, dimsOf(g)), y)));
  }),
  sine: none("not implemented yet"),
  cosine: none("not implemented yet"),
  tan: none("not implemented yet"),
  erf: none("not implemented yet"),
  floor: none("floor is piecewise constant"),
  ceil: none("ceil is piecewise constant"),
  "round-nearest-afz": none("rounding is piecewise constant"),
  "round-nearest-even": none("rounding is piecewise constant"),
  "is-finite": notFloat,
  not: notFloat,
  copy: U(({ g }) => g),
  convert: U(({ b, g }, x) => b.convert(g, arr(x).type)),
  "bitcast-convert": none("a bit reinterpretation has no derivative"),
  add: ({ g }) => [g, g],
  subtract: ({ b, g }) => [g, b.negate(g)],
  multiply: ({ b, g, instr }) => [
    b.multiply(g, instr.operands[1]!),
    b.multiply(g, instr.operands[0]!),
  ],
  divide: ({ b, g, instr }) => {
    const y = instr.operands[1]!;
    const gx = b.divide(g, y);
    return [gx, b.negate(b.multiply(gx, instr))];
  },
  remainder: none("not implemented yet"),
  power: none("not implemented yet"),
  maximum: (c) => maskedPair(c, "GE"),
  minimum: (c) => maskedPair(c, "LE"),
  atan2: none("not implemented yet"),
  and: notFloat,
  or: notFloat,
  xor: notFloat,
  "shift-left": notFloat,
  "shift-right-arithmetic": notFloat,
  "shift-right-logical": notFloat,
  compare: notFloat,
  select: (c) => {
    const { b, g, instr } = c;
    const p = instr.operands[0]!;
    const zero = c.full(0, dimsOf(g));
    return [undefined, b.select(p, g, zero), b.select(p, zero, g)];
  },
  clamp: none("not implemented yet"),
  broadcast: broadcastVjp,
  reshape: U(({ b, g }, x) => b.reshape(g, dimsOf(x))),
  transpose: U(({ b, g, instr }) => {
    const perm = instr.attrs.dimensions ?? [];
    const inv: number[] = [];
    perm.forEach((p, i) => (inv[p] = i));
    return b.transpose(g, inv);
  }),
  slice: none("not implemented yet"),
  "dynamic-slice": none("not implemented yet"),
  "dynamic-update-slice": none("not implemented yet"),
  concatenate: none("not implemented yet"),
  pad: none("not implemented yet"),
  reverse: none("not implemented yet"),
  dot: dotVjp,
  convolution: none("not implemented yet"),
  reduce: reduceVjp,
  "reduce-window": none("not implemented yet"),
  gather: none("not implemented yet"),
  scatter: none("not implemented yet"),
  sort: none("sort has no derivative here"),
  tuple: () => {
    throw new Error("tuple is handled by the driver");
  },
  "get-tuple-element": () => {
    throw new Error("get-tuple-element is handled by the driver");
  },
  fusion: none("differentiate before fusion"),
  call: none("calls are not differentiated (inline first)"),
  while: none("loops are not differentiated"),
  conditional: none("conditionals are not differentiated"),
  "get-dimension-size": notFloat,
  "set-dimension-size": none("bounded dynamism is not differentiated"),
  "custom-call": none("a custom-call is opaque"),
};
