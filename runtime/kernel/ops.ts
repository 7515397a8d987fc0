// The op tables renderers are built from. An `OpTable` has one entry per scalar opcode (the
// elementwise opcodes of ir/opcodes.ts), typed so that a renderer missing one does not compile.
// `baseOps` spells the opcodes whose C-style infix form is the same in every C-like target; a
// renderer spreads it and overrides what its language or its numerics need (the js renderer
// rounds every float op to its type, the C renderer wraps signed integer arithmetic).

import type { ElementType } from "../../ir/shape.ts";
import type { ScalarOpcode, Sx } from "./kir.ts";

export interface OpArgs {
  /** The rendered operands. */
  readonly args: readonly string[];
  /** Whether each operand is a name or a literal (safe to repeat in the expression). */
  readonly atoms: readonly boolean[];
  /** The result's element type and the (first array) operand's. */
  readonly type: ElementType;
  readonly argType: ElementType;
  readonly node: Extract<Sx, { op: "apply" }>;
}

export type OpFn = (a: OpArgs) => string;
export type OpTable = { readonly [K in ScalarOpcode]: OpFn };

const bin = (sym: string): OpFn => ({ args: [a, b] }) => `(${a} ${sym} ${b})`;

/** C-style spellings shared by C-like renderers (each overrides what its numerics need). */
export const baseOps = {
  and: bin("&"),
  or: bin("|"),
  xor: bin("^"),
  select: ({ args: [p, a, b] }) => `(${p} ? ${a} : ${b})`,
  copy: ({ args: [a] }) => a!,
} satisfies Partial<OpTable>;

export const COMPARE_SYMBOL = {
  EQ: "==",
  NE: "!=",
  LT: "<",
  LE: "<=",
  GT: ">",
  GE: ">=",
} as const;
