// Which nn.Module call is running, for lazy mode (tensor/lazy.ts): callForward counts the
// forward calls in progress and numbers the top-level ones (a forward called from outside any
// other), so lazy mode can keep its cuts between a model's calls, never inside one, and can
// treat what a top-level call returns as live (its pending tensors are results of the program
// that computes them, like the tensors a lazy() scope returns). Kept apart from both so that
// neither imports the other.

/** `depth`: forwards in progress; `top`: the number of top-level calls begun so far. */
export const moduleCalls = { depth: 0, top: 0 };

let topLevelReturn: ((result: unknown) => void) | undefined;

/** Called with the value every top-level forward call returns (lazy mode marks it live). */
export function onTopLevelReturn(fn: ((result: unknown) => void) | undefined): void {
  topLevelReturn = fn;
}

/** Runs `forward` as a module call: counted, and a top-level call's result reported. */
export function runModuleCall<T>(forward: () => T): T {
  const calls = moduleCalls;
  if (calls.depth++ === 0) calls.top++;
  let out: T;
  try {
    out = forward();
  } finally {
    calls.depth--;
  }
  if (calls.depth === 0 && topLevelReturn !== undefined) topLevelReturn(out);
  return out;
}
