// Errors of the tensor frontend. Every one names the frontend op; an ArgumentError also names
// the argument. Lowerings report shape and dtype problems in the frontend's terms (PyTorch's
// dims, negative dims, broadcasting) so a user never has to read an IR ShapeError; the
// dispatcher wraps any IR error that still escapes a lowering into an OpError naming the op.
// Every message ends with the user's line, ` at file:line:col` (util/user_frame.ts), found when
// the error is made — never on a call that succeeds — and also kept as `userFrame`.

import { type UserFrame, captureUserFrame, nameLocation, STACK_DEPTH } from "../util/user_frame.ts";

/** A frontend op cannot run on these inputs: `add: shapes [2,3] and [4] cannot be broadcast`. */
export class OpError extends Error {
  readonly op: string;
  /** The message after `op: `, without the location. */
  readonly detail: string;
  /** Where the user's code called the op (the message ends with it); absent if none is found. */
  declare readonly userFrame?: UserFrame;

  constructor(op: string, detail: string, options?: { cause?: unknown }) {
    // Ops raise errors 13-18 frames deep: the stack is captured deep enough to reach the user.
    const limit = Error.stackTraceLimit;
    if (limit < STACK_DEPTH) Error.stackTraceLimit = STACK_DEPTH;
    try {
      super(`${op}: ${detail}`, options);
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.name = "OpError";
    this.op = op;
    this.detail = detail;
    nameLocation(this, captureUserFrame());
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
