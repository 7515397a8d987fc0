// The `interpreter` backend: runs modules with the reference evaluator (ir/evaluate.ts). Slow and
// obviously correct; it is the oracle the other backends are tested against, and the fallback
// that can run every opcode.

import { evaluate, type EvalValue } from "../ir/evaluate.ts";
import type { Module } from "../ir/module.ts";
import { verifyModule } from "../ir/verify.ts";
import { type Backend, type Executable, registerBackend } from "./backend.ts";

export const interpreterBackend: Backend = {
  name: "interpreter",
  priority: 0,
  compile(module: Module): Executable {
    verifyModule(module);
    return {
      backend: "interpreter",
      module,
      run: (inputs: readonly EvalValue[]) => evaluate(module, inputs),
    };
  },
};

registerBackend(interpreterBackend);
