// Deep copies of modules and computations, so a pass pipeline can optimize a copy and leave the
// caller's module (the captured graph, the cache key's source) untouched.

import type { Attributes } from "./attributes.ts";
import { Literal } from "./literal.ts";
import { type Computation, type Instruction, Module } from "./module.ts";
import { computationPrintOrder } from "./print.ts";

/** A structurally identical module: same names, ids may differ, attributes deep-copied. */
export function cloneModule(module: Module, name = module.name): Module {
  const out = new Module(name);
  const comps = new Map<Computation, Computation>();
  // Callees first, so every called computation exists before its callers are copied.
  for (const c of computationPrintOrder(module)) {
    const copy = out.addComputation(c.name);
    comps.set(c, copy);
    const instrs = new Map<Instruction, Instruction>();
    for (const i of c.instructions) {
      instrs.set(
        i,
        copy.addInstruction({
          opcode: i.opcode,
          shape: i.shape,
          operands: i.operands.map((o) => instrs.get(o)!),
          attrs: cloneAttributes(i.attrs),
          called: i.called.map((k) => comps.get(k)!),
          metadata: { ...i.metadata },
          name: i.name,
        }),
      );
    }
    if (c.instructions.length > 0) copy.root = instrs.get(c.root)!;
    if (c.isEntry) out.entry = copy;
  }
  return out;
}

/** A deep copy of an attribute record (literals share no storage with the original). */
export function cloneAttributes(a: Attributes): Attributes {
  const out = structuredClone({ ...a, literal: undefined }) as Attributes;
  if (a.literal) out.literal = new Literal(a.literal.type, a.literal.dims, a.literal.data.slice());
  else delete out.literal;
  return out;
}
