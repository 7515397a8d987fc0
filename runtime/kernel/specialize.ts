// Bounded dynamism by specialization (shared by the backends that compile static programs): for the actual dims of a run's
// arguments, a static copy of the module is made in which every shape is the actual shape the
// evaluator would compute (broadcast and reshape take their dynamic dims from the operand, a
// full slice of a dynamic dim keeps its actual size, iota takes its bound, get-dimension-size
// reads the now static dim, set-dimension-size to a size known from the shapes becomes a slice).
// A backend compiles one program per distinct set of argument dims. What cannot be known
// from the argument dims is rejected with UnsupportedError naming the instruction: a
// set-dimension-size to a computed size, a loop whose body changes the actual dims of its state,
// conditional branches returning different actual dims.

import type { Attributes } from "../../ir/attributes.ts";
import type { EvalValue } from "../../ir/evaluate.ts";
import { type Computation, type Instruction, Module } from "../../ir/module.ts";
import {
  arrayShape,
  type ArrayShape,
  type Shape,
  shapesEqual,
  shapeToString,
  tupleShape,
} from "../../ir/shape.ts";
import { bitcastConvertShape, inferShape } from "../../ir/shape_inference.ts";
import { verifyModule } from "../../ir/verify.ts";
import { UnsupportedError } from "../backend.ts";

/** The backend whose compile asked (for error messages); set by specializeModule. */
let backendName = "js";

function unsupported(instr: Instruction, detail: string): UnsupportedError {
  return new UnsupportedError(backendName, detail, instr.name, instr.opcode);
}

/** The static shape of a runtime value (its actual dims). */
export function valueShape(v: EvalValue): Shape {
  return Array.isArray(v) ? tupleShape(v.map(valueShape)) : arrayShape(v.type, v.dims);
}

/** A key of argument shapes: one compiled specialization per distinct key. */
export function shapesKey(shapes: readonly Shape[]): string {
  return shapes.map((s) => shapeToString(s, false)).join(";");
}

function asArray(s: Shape, instr: Instruction): ArrayShape {
  if (s.kind !== "array") throw unsupported(instr, `expected an array shape, got a tuple`);
  return s;
}

const product = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);

/**
 * Actual dims of a reshape (the evaluator's rule): static dims as declared; dynamic dims that
 * line up with an operand dim of the same bound and flag (a common prefix or suffix) keep that
 * dim's actual size; at most one dynamic dim may remain, and it is what the count leaves.
 */
function reshapeDims(
  instr: Instruction,
  declared: ArrayShape,
  orig: ArrayShape,
  actual: readonly number[],
): number[] {
  const dims = [...declared.dims];
  const total = product(actual);
  const open = new Set<number>();
  declared.dynamic.forEach((dyn, i) => dyn && open.add(i));
  if (open.size > 1) {
    const n = Math.min(dims.length, orig.dims.length);
    const same = (i: number, j: number) =>
      declared.dims[i] === orig.dims[j] && declared.dynamic[i] === orig.dynamic[j];
    for (let k = 0; k < n && same(k, k); k++) if (open.delete(k)) dims[k] = actual[k]!;
    for (let k = 1; k <= n && same(dims.length - k, orig.dims.length - k); k++) {
      if (open.delete(dims.length - k)) dims[dims.length - k] = actual[actual.length - k]!;
    }
  }
  const bad = () =>
    unsupported(instr, `cannot reshape [${actual.join(",")}] to ${shapeToString(declared)}`);
  if (open.size === 0) {
    if (product(dims) !== total) throw bad();
    return dims;
  }
  if (open.size > 1) {
    if (product(dims) === total) return dims;
    throw unsupported(instr, `a reshape with ${open.size} dynamic dims is ambiguous`);
  }
  const [d] = [...open];
  dims[d!] = 1;
  const rest = product(dims);
  if (rest === 0) {
    if (total !== 0) throw bad();
    dims[d!] = declared.dims[d!]!;
    return dims;
  }
  const size = total / rest;
  if (!Number.isInteger(size) || size > declared.dims[d!]!) throw bad();
  dims[d!] = size;
  return dims;
}

/** The size a set-dimension-size sets, when the (specialized) shapes determine it. */
function knownSize(size: Instruction): number | undefined {
  if (size.opcode === "constant") return Number(size.attrs.literal!.data[0]);
  if (size.opcode === "get-dimension-size") {
    const s = size.operand(0).shape;
    if (s.kind === "array") return s.dims[size.attrs.dimensions![0]!];
  }
  return undefined;
}

class Specializer {
  readonly out: Module;
  private readonly memo = new Map<string, Computation>();

  constructor(readonly source: Module) {
    this.out = new Module(source.name);
  }

  /** A static copy of `c` for parameters of `params` (memoized per computation and shapes). */
  computation(c: Computation, params: readonly Shape[]): Computation {
    const key = `${c.name}(${shapesKey(params)})`;
    const known = this.memo.get(key);
    if (known) return known;
    const copy = this.out.addComputation(this.out.uniqueComputationName(c.name));
    this.memo.set(key, copy);
    const map = new Map<Instruction, Instruction>();
    for (const instr of c.instructions) {
      const ops = instr.operands.map((o) => map.get(o)!);
      map.set(instr, this.instruction(copy, instr, ops, params));
    }
    copy.root = map.get(c.root)!;
    return copy;
  }

  private add(
    comp: Computation,
    orig: Instruction,
    shape: Shape,
    ops: readonly Instruction[],
    attrs: Attributes = orig.attrs,
    called: readonly Computation[] = [],
    opcode = orig.opcode,
  ): Instruction {
    const name = this.out.hasName(orig.name) ? undefined : orig.name;
    return comp.addInstruction({
      opcode,
      shape,
      operands: ops,
      attrs: { ...attrs },
      called,
      metadata: orig.metadata,
      ...(name !== undefined ? { name } : {}),
    });
  }

  private instruction(
    comp: Computation,
    instr: Instruction,
    ops: Instruction[],
    params: readonly Shape[],
  ): Instruction {
    const shapes = ops.map((o) => o.shape);
    const s = instr.shape;
    switch (instr.opcode) {
      case "parameter":
        return this.add(comp, instr, params[instr.attrs.parameterNumber!]!, ops);
      case "constant":
        return this.add(comp, instr, s, ops);
      case "iota": {
        const a = asArray(s, instr);
        return this.add(comp, instr, arrayShape(a.type, a.dims), ops);
      }
      case "broadcast": {
        const x = asArray(shapes[0]!, instr);
        const a = asArray(s, instr);
        const dims = [...a.dims];
        instr.attrs.dimensions!.forEach((r, i) => (dims[r] = x.dims[i]!));
        return this.add(comp, instr, arrayShape(a.type, dims), ops);
      }
      case "reshape": {
        const x = asArray(shapes[0]!, instr);
        const a = asArray(s, instr);
        const orig = asArray(instr.operand(0).shape, instr);
        return this.add(comp, instr, arrayShape(a.type, reshapeDims(instr, a, orig, x.dims)), ops);
      }
      case "convert": {
        const x = asArray(shapes[0]!, instr);
        return this.add(comp, instr, arrayShape(asArray(s, instr).type, x.dims), ops);
      }
      case "bitcast-convert": {
        const x = asArray(shapes[0]!, instr);
        return this.add(comp, instr, bitcastConvertShape(x, asArray(s, instr).type), ops);
      }
      case "slice": {
        // A full slice of a dynamic dim takes the actual size (the evaluator's rule).
        const orig = asArray(instr.operand(0).shape, instr);
        const x = asArray(shapes[0]!, instr);
        const slice = instr.attrs.slice!.map((d, i) =>
          orig.dynamic[i] && d.start === 0 && d.stride === 1 && d.limit === orig.dims[i]
            ? { ...d, limit: x.dims[i]! }
            : d,
        );
        const attrs = { ...instr.attrs, slice };
        return this.add(comp, instr, this.infer(instr, shapes, attrs, []), ops, attrs);
      }
      case "set-dimension-size": {
        const x = asArray(shapes[0]!, instr);
        const d = instr.attrs.dimensions![0]!;
        const n = knownSize(ops[1]!);
        if (n === undefined) {
          throw unsupported(instr, "the size is computed at run time (not known from shapes)");
        }
        const bound = asArray(s, instr).dims[d]!;
        if (n < 0 || n > bound || n > x.dims[d]!) {
          throw unsupported(instr, `size ${n} is outside [0, ${Math.min(bound, x.dims[d]!)}]`);
        }
        // Keeping the first n entries of dim d is a slice.
        const slice = x.dims.map((size, i) => ({ start: 0, limit: i === d ? n : size, stride: 1 }));
        const attrs: Attributes = { slice };
        const shape = this.infer(instr, [x], attrs, [], "slice");
        return this.add(comp, instr, shape, [ops[0]!], attrs, [], "slice");
      }
      default:
        break;
    }
    const called = this.callees(instr, shapes);
    return this.add(comp, instr, this.infer(instr, shapes, instr.attrs, called), ops, instr.attrs,
      called);
  }

  /** Specialized callees of `instr` for its operand shapes. */
  private callees(instr: Instruction, shapes: readonly Shape[]): Computation[] {
    const c = instr.called;
    switch (instr.opcode) {
      case "fusion":
      case "call":
        return [this.computation(c[0]!, shapes)];
      case "while": {
        const cond = this.computation(c[0]!, shapes);
        const body = this.computation(c[1]!, shapes);
        if (!shapesEqual(body.root.shape, shapes[0]!)) {
          throw unsupported(
            instr,
            `the loop body changes the actual dims of its state from ` +
              `${shapeToString(shapes[0]!, false)} to ${shapeToString(body.root.shape, false)}`,
          );
        }
        return [cond, body];
      }
      case "conditional": {
        const branches = c.map((b, j) => this.computation(b, [shapes[j + 1]!]));
        const first = branches[0]!.root.shape;
        for (const b of branches) {
          if (!shapesEqual(b.root.shape, first)) {
            throw unsupported(instr, `branches return different actual dims`);
          }
        }
        return branches;
      }
      default:
        // Reducers, combiners and comparators take scalars: copies with their own shapes.
        return c.map((k) => this.computation(k, k.parameters.map((p) => p.shape)));
    }
  }

  private infer(
    instr: Instruction,
    shapes: readonly Shape[],
    attrs: Attributes,
    called: readonly Computation[],
    opcode = instr.opcode,
  ): Shape {
    try {
      return inferShape(opcode, shapes, attrs, called, instr.shape);
    } catch (e) {
      throw unsupported(
        instr,
        `with the actual operand dims (${shapes.map((x) => shapeToString(x, false)).join(", ")}) ` +
          `${e instanceof Error ? e.message : String(e)}`,
      );
    }
  }
}

/** A static module equivalent to `module` on arguments of exactly the shapes `args`. */
export function specializeModule(
  module: Module,
  args: readonly Shape[],
  backend = "js",
): Module {
  backendName = backend;
  const sp = new Specializer(module);
  sp.out.entry = sp.computation(module.entry, args);
  verifyModule(sp.out);
  return sp.out;
}
