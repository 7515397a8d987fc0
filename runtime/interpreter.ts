// The `interpreter` backend: runs modules with the reference evaluator (ir/evaluate.ts). Slow and
// obviously correct; it is the oracle the other backends are tested against, and the fallback
// that can run every opcode.

import { evaluate, type EvalValue } from "../ir/evaluate.ts";
import type { Module } from "../ir/module.ts";
import { verifyModule } from "../ir/verify.ts";
import { type Backend, type Executable, registerBackend } from "./backend.ts";

function executable(module: Module): Executable {
  return {
    backend: "interpreter",
    module,
    run: (inputs: readonly EvalValue[]) => evaluate(module, inputs),
  };
}

export const interpreterBackend: Backend = {
  name: "interpreter",
  priority: 0,
  compile(module: Module): Executable {
    verifyModule(module);
    return executable(module);
  },
  // The module is the whole program, and the program cache stores the module itself.
  serialize: () => new Uint8Array(0),
  deserialize(module: Module, payload: Uint8Array): Executable {
    if (payload.length !== 0) {
      throw new Error(`interpreter: expected an empty cache payload, got ${payload.length} bytes`);
    }
    return executable(module);
  },
};

registerBackend(interpreterBackend);
