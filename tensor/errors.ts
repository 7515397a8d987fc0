// Errors of the tensor frontend. Every one names the frontend op; an ArgumentError also names
// the argument. Lowerings report shape and dtype problems in the frontend's terms (PyTorch's
// dims, negative dims, broadcasting) so a user never has to read an IR ShapeError; the
// dispatcher wraps any IR error that still escapes a lowering into an OpError naming the op.

/** A frontend op cannot run on these inputs: `add: shapes [2,3] and [4] cannot be broadcast`. */
export class OpError extends Error {
  readonly op: string;
  readonly detail: string;

  constructor(op: string, detail: string, options?: { cause?: unknown }) {
    super(`${op}: ${detail}`, options);
    this.name = "OpError";
    this.op = op;
    this.detail = detail;
  }
}

/** A bad argument: `sum: argument 'dim' must be an integer or a list of integers, got "a"`. */
export class ArgumentError extends OpError {
  readonly argument: string | undefined;

  constructor(op: string, argument: string | undefined, detail: string) {
    super(op, argument !== undefined ? `argument '${argument}' ${detail}` : detail);
    this.name = "ArgumentError";
    this.argument = argument;
  }
}
