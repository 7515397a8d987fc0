// The verifier: checks a module's invariants and changes nothing. Structure (an ENTRY exists;
// computation and instruction names are unique; called computations belong to the module and the
// call graph has no cycle), each computation (instructions in topological order with operands in
// the same computation, users lists that agree with operands, parameters numbered 0..n-1 once
// each, a ROOT inside it), and every instruction's stored shape against its opcode's shape rule,
// re-run from the operand shapes (ir/shape_inference.ts). Errors are VerifyErrors naming the
// computation and the instruction.

import { ShapeError, VerifyError } from "./errors.ts";
import type { Computation, Instruction, Module } from "./module.ts";
import { OPCODE_INFO } from "./opcodes.ts";
import { MAX_TUPLE_DEPTH, type Shape, shapesEqual, shapeToString, tupleDepth } from "./shape.ts";
import { inferShape } from "./shape_inference.ts";

/** Throws a VerifyError at the first broken invariant of `module`. */
export function verifyModule(module: Module): void {
  const where = `module '${module.name}'`;
  const entry = module.entryOrUndefined;
  if (entry === undefined) throw new VerifyError(where, undefined, "the module has no ENTRY");
  if (!module.computations.includes(entry)) {
    throw new VerifyError(where, undefined, `the ENTRY '${entry.name}' is not in the module`);
  }
  const compNames = new Set<string>();
  for (const c of module.computations) {
    if (c.parent !== module) {
      throw new VerifyError(c.name, undefined, `belongs to module '${c.parent.name}'`);
    }
    if (compNames.has(c.name)) {
      throw new VerifyError(c.name, undefined, `two computations are named '${c.name}'`);
    }
    compNames.add(c.name);
  }
  const names = new Map<string, Computation>();
  for (const c of module.computations) {
    for (const i of c.instructions) {
      const prev = names.get(i.name);
      if (prev !== undefined) {
        throw new VerifyError(
          c.name,
          i.name,
          `the instruction name '${i.name}' is also used in computation '${prev.name}'`,
        );
      }
      names.set(i.name, c);
    }
  }
  checkCallGraph(module);
  for (const c of module.computations) verifyComputation(c);
}

/**
 * Checks one computation: its instruction list, parameters, ROOT, operands, users, called
 * computations (membership in the module) and every instruction's shape.
 */
export function verifyComputation(c: Computation): void {
  const list = c.instructions;
  if (list.length === 0) throw new VerifyError(c.name, undefined, "the computation is empty");
  const position = new Map<Instruction, number>();
  list.forEach((instr, k) => {
    if (instr.parent !== c) {
      throw new VerifyError(c.name, instr.name, `its parent is computation '${instr.parent.name}'`);
    }
    if (position.has(instr)) {
      throw new VerifyError(c.name, instr.name, "it appears twice in the instruction list");
    }
    position.set(instr, k);
  });
  const root = c.root;
  if (!position.has(root)) {
    throw new VerifyError(c.name, root.name, "the ROOT is not in the computation");
  }
  checkParameters(c);
  list.forEach((instr, k) => {
    checkOperands(c, instr, k, position);
    checkUsers(c, instr, position);
    checkCalled(c, instr);
    checkControlPredecessors(c, instr, k, position);
    checkShape(c, instr);
  });
}

function checkParameters(c: Computation): void {
  const byNumber = new Map<number, Instruction>();
  for (const p of c.instructions) {
    if (p.opcode !== "parameter") continue;
    const n = p.attrs.parameterNumber;
    if (n === undefined || !Number.isInteger(n) || n < 0) {
      throw new VerifyError(c.name, p.name, `bad parameter number ${String(n)}`);
    }
    const other = byNumber.get(n);
    if (other !== undefined) {
      throw new VerifyError(
        c.name,
        p.name,
        `parameter number ${n} is also used by %${other.name}; each number must appear once`,
      );
    }
    byNumber.set(n, p);
  }
  for (let n = 0; n < byNumber.size; n++) {
    if (!byNumber.has(n)) {
      const [highest] = [...byNumber.entries()].sort((a, b) => b[0] - a[0]);
      throw new VerifyError(
        c.name,
        highest![1].name,
        `parameters must be numbered 0..${byNumber.size - 1}; number ${n} is missing`,
      );
    }
  }
}

function checkOperands(
  c: Computation,
  instr: Instruction,
  k: number,
  position: ReadonlyMap<Instruction, number>,
): void {
  const arity = OPCODE_INFO[instr.opcode].arity;
  if (typeof arity === "number" && instr.operands.length !== arity) {
    throw new VerifyError(
      c.name,
      instr.name,
      `${instr.opcode} takes ${arity} operand${arity === 1 ? "" : "s"}, it has ` +
        `${instr.operands.length}`,
    );
  }
  instr.operands.forEach((op, j) => {
    if (op.parent !== c) {
      throw new VerifyError(
        c.name,
        instr.name,
        `operand ${j} %${op.name} is in computation '${op.parent.name}'`,
      );
    }
    const at = position.get(op);
    if (at === undefined) {
      throw new VerifyError(
        c.name,
        instr.name,
        `operand ${j} %${op.name} is not in the computation's instruction list`,
      );
    }
    if (at >= k) {
      const cycle = dependencyPath(op, instr);
      throw new VerifyError(
        c.name,
        instr.name,
        cycle !== undefined
          ? `operand ${j} %${op.name} depends on it: a cycle ` +
              [instr, ...cycle].map((i) => `%${i.name}`).join(" -> ")
          : `operand ${j} %${op.name} comes after it; instructions must be in topological order`,
      );
    }
  });
}

/** A path of operand edges from `from` to `to` (from, ..., to), when one exists. */
function dependencyPath(from: Instruction, to: Instruction): Instruction[] | undefined {
  const seen = new Set<Instruction>();
  const walk = (i: Instruction): Instruction[] | undefined => {
    if (i === to) return [i];
    if (seen.has(i)) return undefined;
    seen.add(i);
    for (const op of i.operands) {
      const rest = walk(op);
      if (rest) return [i, ...rest];
    }
    return undefined;
  };
  return walk(from);
}

function checkUsers(
  c: Computation,
  instr: Instruction,
  position: ReadonlyMap<Instruction, number>,
): void {
  instr.operands.forEach((op, j) => {
    if (!op.users.includes(instr)) {
      throw new VerifyError(
        c.name,
        instr.name,
        `it uses %${op.name} (operand ${j}) but is missing from its users list`,
      );
    }
  });
  for (const u of instr.users) {
    if (!u.operands.includes(instr)) {
      throw new VerifyError(
        c.name,
        instr.name,
        `its users list names %${u.name}, which does not use it`,
      );
    }
    if (u.parent !== c || !position.has(u)) {
      throw new VerifyError(
        c.name,
        instr.name,
        `its user %${u.name} is not in the computation's instruction list`,
      );
    }
  }
}

function checkCalled(c: Computation, instr: Instruction): void {
  const module = c.parent;
  for (const callee of instr.called) {
    if (callee.parent !== module || !module.computations.includes(callee)) {
      throw new VerifyError(
        c.name,
        instr.name,
        `it calls computation '${callee.name}', which is not in module '${module.name}'`,
      );
    }
  }
}

/** control-predecessors name instructions of the computation that come earlier. */
function checkControlPredecessors(
  c: Computation,
  instr: Instruction,
  k: number,
  position: ReadonlyMap<Instruction, number>,
): void {
  for (const name of instr.attrs.controlPredecessors ?? []) {
    const x = c.instructions.find((i) => i.name === name);
    if (x === undefined) {
      const why = `control predecessor '${name}' is not in '${c.name}'`;
      throw new VerifyError(c.name, instr.name, why);
    }
    if (position.get(x)! >= k) {
      throw new VerifyError(c.name, instr.name, `control predecessor '${name}' comes after it`);
    }
  }
}

function checkShape(c: Computation, instr: Instruction): void {
  // Before the shape rule, which recurses into nested tuples.
  if (tupleDepth(instr.shape) > MAX_TUPLE_DEPTH) {
    throw new VerifyError(
      c.name,
      instr.name,
      `its shape nests tuples deeper than ${MAX_TUPLE_DEPTH} (the limit on nesting)`,
    );
  }
  let inferred: Shape;
  try {
    inferred = inferShape(
      instr.opcode,
      instr.operands.map((o) => o.shape),
      instr.attrs,
      instr.called,
      instr.shape,
    );
  } catch (e) {
    if (e instanceof ShapeError) throw new VerifyError(c.name, instr.name, e.message);
    throw e;
  }
  if (!shapesEqual(inferred, instr.shape)) {
    throw new VerifyError(
      c.name,
      instr.name,
      `its stored shape is ${shapeToString(instr.shape, false)} but the ${instr.opcode} ` +
        `shape rule gives ${shapeToString(inferred, false)}`,
    );
  }
}

/** Called computations belong to the module, the ENTRY is never called, and nothing recurses. */
function checkCallGraph(module: Module): void {
  const comps = module.computations;
  for (const c of comps) {
    for (const i of c.instructions) {
      for (const callee of i.called) {
        if (callee.parent !== module || !comps.includes(callee)) {
          throw new VerifyError(
            c.name,
            i.name,
            `it calls computation '${callee.name}', which is not in module '${module.name}'`,
          );
        }
        if (callee === module.entryOrUndefined) {
          throw new VerifyError(c.name, i.name, `it calls the ENTRY computation '${callee.name}'`);
        }
      }
    }
  }
  const state = new Map<Computation, "visiting" | "done">();
  const stack: Computation[] = [];
  const visit = (c: Computation): void => {
    state.set(c, "visiting");
    stack.push(c);
    for (const i of c.instructions) {
      for (const callee of i.called) {
        const s = state.get(callee);
        if (s === "visiting") {
          const cycle = [...stack.slice(stack.indexOf(callee)), callee].map((x) => x.name);
          throw new VerifyError(
            c.name,
            i.name,
            `recursion: the call graph has a cycle ${cycle.join(" -> ")}`,
          );
        }
        if (s === undefined) visit(callee);
      }
    }
    stack.pop();
    state.set(c, "done");
  };
  for (const c of comps) if (!state.has(c)) visit(c);
}
