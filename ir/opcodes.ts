// The opcode table: every opcode of the IR is listed here once, with its HLO text name, its arity,
// its group, and the roles of the computations it calls. Shape rules, the evaluator, the printer,
// the parser and the proto form key their own tables on `Opcode`, typed so a missing entry is a
// compile error.

export const OPCODES = [
  // Leaves
  "parameter",
  "constant",
  "iota",
  // Unary elementwise
  "abs",
  "negate",
  "sign",
  "exponential",
  "exponential-minus-one",
  "log",
  "log-plus-one",
  "sqrt",
  "rsqrt",
  "cbrt",
  "tanh",
  "logistic",
  "sine",
  "cosine",
  "tan",
  "erf",
  "floor",
  "ceil",
  "round-nearest-afz",
  "round-nearest-even",
  "is-finite",
  "not",
  "copy",
  "convert",
  "bitcast-convert",
  // Binary elementwise
  "add",
  "subtract",
  "multiply",
  "divide",
  "remainder",
  "power",
  "maximum",
  "minimum",
  "atan2",
  "and",
  "or",
  "xor",
  "shift-left",
  "shift-right-arithmetic",
  "shift-right-logical",
  "compare",
  // Ternary elementwise
  "select",
  "clamp",
  // Shape and data movement
  "broadcast",
  "reshape",
  "bitcast",
  "transpose",
  "slice",
  "dynamic-slice",
  "dynamic-update-slice",
  "concatenate",
  "pad",
  "reverse",
  // Contractions
  "dot",
  "convolution",
  // Reductions, windows, indexing, sorting
  "reduce",
  "reduce-window",
  "gather",
  "scatter",
  "sort",
  // Tuples and control flow
  "tuple",
  "get-tuple-element",
  "fusion",
  "call",
  "while",
  "conditional",
  // Bounded dynamism
  "get-dimension-size",
  "set-dimension-size",
  // Replicas and partitions (the evaluator runs one of each: both are 0)
  "replica-id",
  "partition-id",
  // Collectives over replica groups (the evaluator runs N simulated devices in lockstep)
  "all-reduce",
  "all-reduce-start",
  "all-reduce-done",
  "all-gather",
  "all-gather-start",
  "all-gather-done",
  "reduce-scatter",
  "all-to-all",
  "collective-permute",
  "collective-permute-start",
  "collective-permute-done",
  // Asynchronous calls (the evaluator runs the callee at the start)
  "async-start",
  "async-update",
  "async-done",
  // Ordering of side effects
  "after-all",
  "add-dependency",
  "opt-barrier",
  // Transfers: between devices (send/recv) and with the host (infeed/outfeed). They parse,
  // print, round-trip and verify; the evaluator does not run them.
  "send",
  "send-done",
  "recv",
  "recv-done",
  "infeed",
  "outfeed",
  // Asynchronous copies
  "copy-start",
  "copy-done",
  // Rounding to a narrower float format
  "reduce-precision",
  // Random numbers (the evaluator does not compute them: XLA's values are backend-defined)
  "rng",
  "rng-bit-generator",
  // Grouped and scanned computations
  "ragged-dot",
  "map",
  "scan",
  // Collectives the evaluator does not run (read, printed, round-tripped and verified)
  "ragged-all-to-all",
  "collective-broadcast",
  // Escape hatch
  "custom-call",
] as const;

export type Opcode = (typeof OPCODES)[number];

export function isOpcode(s: string): s is Opcode {
  return OPCODE_SET.has(s);
}
const OPCODE_SET: ReadonlySet<string> = new Set(OPCODES);

export type OpGroup =
  | "leaf"
  | "unary"
  | "binary"
  | "ternary"
  | "movement"
  | "contraction"
  | "reduction"
  | "indexing"
  | "control"
  | "dynamic"
  | "collective"
  | "other";

/**
 * Roles of called computations, in the order they are stored in `Instruction.called`:
 * `to_apply` (reducers, comparators, call), `calls` (fusion), `condition`+`body` (while),
 * `branches` (conditional), `async` (async-update and async-done: the async computation, which
 * the text may leave out), `list` (custom-call: any number, XLA's called_computations).
 */
export type CalledRole = "none" | "to_apply" | "calls" | "while" | "branches" | "async" | "list";

export interface OpcodeInfo {
  readonly group: OpGroup;
  /** Number of operands, or "variadic" (tuple, concatenate, reduce, fusion, ...). */
  readonly arity: number | "variadic";
  readonly called: CalledRole;
  /** True when the opcode is elementwise over its array operands. */
  readonly elementwise: boolean;
}

const leaf: OpcodeInfo = { group: "leaf", arity: 0, called: "none", elementwise: false };
const unary: OpcodeInfo = { group: "unary", arity: 1, called: "none", elementwise: true };
const binary: OpcodeInfo = { group: "binary", arity: 2, called: "none", elementwise: true };
const ternary: OpcodeInfo = { group: "ternary", arity: 3, called: "none", elementwise: true };
const move = (arity: number | "variadic"): OpcodeInfo => ({
  group: "movement",
  arity,
  called: "none",
  elementwise: false,
});

const collective = (arity: number | "variadic", called: CalledRole = "none"): OpcodeInfo => ({
  group: "collective",
  arity,
  called,
  elementwise: false,
});

export const OPCODE_INFO = {
  parameter: leaf,
  constant: leaf,
  iota: leaf,
  abs: unary,
  negate: unary,
  sign: unary,
  exponential: unary,
  "exponential-minus-one": unary,
  log: unary,
  "log-plus-one": unary,
  sqrt: unary,
  rsqrt: unary,
  cbrt: unary,
  tanh: unary,
  logistic: unary,
  sine: unary,
  cosine: unary,
  tan: unary,
  erf: unary,
  floor: unary,
  ceil: unary,
  "round-nearest-afz": unary,
  "round-nearest-even": unary,
  "is-finite": unary,
  not: unary,
  copy: unary,
  convert: unary,
  "bitcast-convert": unary,
  add: binary,
  subtract: binary,
  multiply: binary,
  divide: binary,
  remainder: binary,
  power: binary,
  maximum: binary,
  minimum: binary,
  atan2: binary,
  and: binary,
  or: binary,
  xor: binary,
  "shift-left": binary,
  "shift-right-arithmetic": binary,
  "shift-right-logical": binary,
  compare: binary,
  select: ternary,
  clamp: ternary,
  broadcast: move(1),
  reshape: move(1),
  bitcast: move(1),
  transpose: move(1),
  slice: move(1),
  "dynamic-slice": move("variadic"),
  "dynamic-update-slice": move("variadic"),
  concatenate: move("variadic"),
  pad: move(2),
  reverse: move(1),
  dot: { group: "contraction", arity: 2, called: "none", elementwise: false },
  convolution: { group: "contraction", arity: 2, called: "none", elementwise: false },
  reduce: { group: "reduction", arity: "variadic", called: "to_apply", elementwise: false },
  "reduce-window": {
    group: "reduction",
    arity: "variadic",
    called: "to_apply",
    elementwise: false,
  },
  gather: { group: "indexing", arity: 2, called: "none", elementwise: false },
  scatter: { group: "indexing", arity: "variadic", called: "to_apply", elementwise: false },
  sort: { group: "indexing", arity: "variadic", called: "to_apply", elementwise: false },
  tuple: { group: "control", arity: "variadic", called: "none", elementwise: false },
  "get-tuple-element": { group: "control", arity: 1, called: "none", elementwise: false },
  fusion: { group: "control", arity: "variadic", called: "calls", elementwise: false },
  call: { group: "control", arity: "variadic", called: "to_apply", elementwise: false },
  while: { group: "control", arity: 1, called: "while", elementwise: false },
  conditional: { group: "control", arity: "variadic", called: "branches", elementwise: false },
  "get-dimension-size": { group: "dynamic", arity: 1, called: "none", elementwise: false },
  "replica-id": leaf,
  "partition-id": leaf,
  "all-reduce": collective("variadic", "to_apply"),
  "all-reduce-start": collective("variadic", "to_apply"),
  "all-reduce-done": collective(1),
  "all-gather": collective("variadic"),
  "all-gather-start": collective("variadic"),
  "all-gather-done": collective(1),
  "reduce-scatter": collective("variadic", "to_apply"),
  "all-to-all": collective("variadic"),
  "collective-permute": collective(1),
  "collective-permute-start": collective(1),
  "collective-permute-done": collective(1),
  "async-start": { group: "control", arity: "variadic", called: "calls", elementwise: false },
  "async-update": { group: "control", arity: 1, called: "async", elementwise: false },
  "async-done": { group: "control", arity: 1, called: "async", elementwise: false },
  "after-all": { group: "other", arity: "variadic", called: "none", elementwise: false },
  "add-dependency": { group: "other", arity: 2, called: "none", elementwise: false },
  "opt-barrier": { group: "other", arity: 1, called: "none", elementwise: false },
  send: { group: "other", arity: 2, called: "none", elementwise: false },
  "send-done": { group: "other", arity: 1, called: "none", elementwise: false },
  recv: { group: "other", arity: 1, called: "none", elementwise: false },
  "recv-done": { group: "other", arity: 1, called: "none", elementwise: false },
  infeed: { group: "other", arity: 1, called: "none", elementwise: false },
  outfeed: { group: "other", arity: 2, called: "none", elementwise: false },
  "copy-start": { group: "other", arity: 1, called: "none", elementwise: false },
  "copy-done": { group: "other", arity: 1, called: "none", elementwise: false },
  "reduce-precision": unary,
  rng: { group: "other", arity: 2, called: "none", elementwise: false },
  "rng-bit-generator": { group: "other", arity: 1, called: "none", elementwise: false },
  "ragged-dot": { group: "contraction", arity: 3, called: "none", elementwise: false },
  map: { group: "other", arity: "variadic", called: "to_apply", elementwise: false },
  scan: { group: "control", arity: "variadic", called: "to_apply", elementwise: false },
  "ragged-all-to-all": { group: "other", arity: 6, called: "none", elementwise: false },
  "collective-broadcast": { group: "other", arity: 1, called: "none", elementwise: false },
  "set-dimension-size": { group: "dynamic", arity: 2, called: "none", elementwise: false },
  "custom-call": { group: "other", arity: "variadic", called: "list", elementwise: false },
} satisfies { [K in Opcode]: OpcodeInfo };

export function opcodeInfo(op: Opcode): OpcodeInfo {
  return OPCODE_INFO[op];
}

/** The collectives: their results depend on the values of the other devices of their group. */
export function isCollective(op: Opcode): boolean {
  return OPCODE_INFO[op].group === "collective";
}
