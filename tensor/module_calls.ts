// Which call is running, for lazy mode (tensor/lazy.ts): runModuleCall counts the calls in
// progress and numbers the top-level ones (a call made from outside any other), so lazy mode
// can keep its cuts between calls, never inside one, and can treat what a top-level call returns
// as live (its pending tensors are results of the program that computes them, like the tensors a
// lazy() scope returns). The calls are an nn.Module's forward, autograd's backward sweep
// (`backward()`, `autograd.grad`), an optimizer's update (`step()`) and gradient clipping: each repeats the same
// ops (per layer, per parameter) without being a loop's iterations, and a training step cut
// there would be many programs — recomputing the forward's values each backward program needs.
// Kept apart from lazy mode and the callers so that none imports another.

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
