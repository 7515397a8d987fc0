// Error types of the IR layer. Each carries the facts a user needs to act on it (the opcode and
// operand shapes for a shape error, line and column for a parse error, the instruction for a
// verifier error), and its message states them in words.

/** A shape rule failed: names the opcode, the operand shapes and the rule. */
export class ShapeError extends Error {
  readonly opcode: string;
  readonly operandShapes: string[];
  readonly rule: string;

  constructor(opcode: string, operandShapes: string[], rule: string) {
    super(`${opcode}(${operandShapes.join(", ")}): ${rule}`);
    this.name = "ShapeError";
    this.opcode = opcode;
    this.operandShapes = operandShapes;
    this.rule = rule;
  }
}

/** Malformed HLO text: 1-based line and column, and what was expected there. */
export class ParseError extends Error {
  readonly line: number;
  readonly column: number;
  readonly detail: string;

  constructor(line: number, column: number, detail: string, sourceLine?: string) {
    const excerpt =
      sourceLine !== undefined ? `\n  ${sourceLine}\n  ${" ".repeat(Math.max(column - 1, 0))}^` : "";
    super(`HLO parse error at line ${line}, column ${column}: ${detail}${excerpt}`);
    this.name = "ParseError";
    this.line = line;
    this.column = column;
    this.detail = detail;
  }
}

/** The verifier found a broken invariant; names the computation and instruction. */
export class VerifyError extends Error {
  readonly computation: string;
  readonly instruction: string | undefined;

  constructor(computation: string, instruction: string | undefined, detail: string) {
    const where = instruction !== undefined ? `%${instruction} in ${computation}` : computation;
    super(`verifier: ${where}: ${detail}`);
    this.name = "VerifyError";
    this.computation = computation;
    this.instruction = instruction;
  }
}

/** Malformed or unsupported protobuf bytes. */
export class ProtoError extends Error {
  constructor(detail: string) {
    super(`HLO proto: ${detail}`);
    this.name = "ProtoError";
  }
}

/** The evaluator could not run an instruction (bad argument, unsupported runtime case). */
export class EvalError extends Error {
  readonly instruction: string | undefined;

  constructor(instruction: string | undefined, detail: string) {
    super(instruction !== undefined ? `evaluate %${instruction}: ${detail}` : `evaluate: ${detail}`);
    this.name = "EvalError";
    this.instruction = instruction;
  }
}
