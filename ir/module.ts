// The IR's object graph: a Module holds Computations (one ENTRY, plus reducers, fusion bodies,
// loop bodies, branches); a Computation holds Instructions in topological order with one ROOT.
// Instructions keep use-def links both ways: changing an operand through `setOperand` or
// `replaceAllUsesWith` updates the users lists, so passes never edit `operands` by hand.
// Nothing here infers shapes; ir/builder.ts does, and ir/verify.ts checks them.

import { dropExtentsIfShared, inheritExtents } from "./extents.ts";
import type { Attributes, Metadata } from "./attributes.ts";
import { OPCODE_INFO, type Opcode } from "./opcodes.ts";
import type { Shape } from "./shape.ts";

export interface InstructionSpec {
  opcode: Opcode;
  shape: Shape;
  operands?: readonly Instruction[];
  attrs?: Attributes;
  called?: readonly Computation[];
  metadata?: Metadata;
  /** Without one, the module picks a unique name from the opcode (`add.3`). */
  name?: string;
}

export class Instruction {
  /** Unique within the module; stable for the instruction's life. */
  readonly id: number;
  private instrName: string;
  readonly opcode: Opcode;
  shape: Shape;
  attrs: Attributes;
  /** Called computations in the roles of OPCODE_INFO[opcode].called. */
  called: Computation[];
  metadata: Metadata;
  readonly parent: Computation;
  private readonly ops: Instruction[];
  private readonly userList: Instruction[] = [];

  /** @internal use Computation.addInstruction */
  constructor(parent: Computation, id: number, name: string, spec: InstructionSpec) {
    this.parent = parent;
    this.id = id;
    this.instrName = name;
    this.opcode = spec.opcode;
    this.shape = spec.shape;
    this.attrs = spec.attrs ? { ...spec.attrs } : {};
    this.called = spec.called ? [...spec.called] : [];
    this.metadata = spec.metadata ? { ...spec.metadata } : {};
    this.ops = [];
    for (const op of spec.operands ?? []) {
      if (op.parent !== parent) {
        throw new Error(
          `${spec.opcode} '${name}': operand '${op.name}' belongs to computation ` +
            `'${op.parent.name}', not '${parent.name}'`,
        );
      }
      this.ops.push(op);
      op.addUser(this);
    }
  }

  get name(): string {
    return this.instrName;
  }

  /** Renames the instruction; the new name must be unused in the module. */
  set name(value: string) {
    if (value === this.instrName) return;
    const module = this.parent.parent;
    module.claimName(value);
    module.releaseName(this.instrName);
    this.instrName = value;
  }

  get operands(): readonly Instruction[] {
    return this.ops;
  }

  operand(i: number): Instruction {
    const op = this.ops[i];
    if (!op) throw new Error(`${this.opcode} '${this.name}' has no operand ${i}`);
    return op;
  }

  /** Distinct instructions that use this one, in the order they started using it. */
  get users(): readonly Instruction[] {
    return this.userList;
  }

  get isRoot(): boolean {
    return this.parent.root === this;
  }

  setOperand(i: number, value: Instruction): void {
    const old = this.operand(i);
    if (value.parent !== this.parent) {
      throw new Error(`setOperand: '${value.name}' is not in computation '${this.parent.name}'`);
    }
    if (value !== old) dropExtentsIfShared(old, value);
    this.ops[i] = value;
    value.addUser(this);
    if (!this.ops.includes(old)) old.removeUser(this);
  }

  /** Points every user (and the root, if this is it) at `other` instead of this instruction. */
  replaceAllUsesWith(other: Instruction): void {
    if (other === this) return;
    inheritExtents(this, other);
    for (const user of [...this.userList]) {
      user.ops.forEach((op, i) => {
        if (op === this) user.setOperand(i, other);
      });
    }
    if (this.parent.root === this) {
      dropExtentsIfShared(this, other);
      this.parent.root = other;
    }
  }

  /** @internal */
  dropOperands(): void {
    for (const op of new Set(this.ops)) op.removeUser(this);
    this.ops.length = 0;
  }

  private addUser(u: Instruction): void {
    if (!this.userList.includes(u)) this.userList.push(u);
  }

  private removeUser(u: Instruction): void {
    const i = this.userList.indexOf(u);
    if (i >= 0) this.userList.splice(i, 1);
  }

  toString(): string {
    return `%${this.name} (${this.opcode})`;
  }
}

export class Computation {
  name: string;
  readonly parent: Module;
  private readonly list: Instruction[] = [];
  private rootInstr: Instruction | undefined;

  /** @internal use Module.addComputation */
  constructor(parent: Module, name: string) {
    this.parent = parent;
    this.name = name;
  }

  /** Instructions in topological order (operands before users). */
  get instructions(): readonly Instruction[] {
    return this.list;
  }

  /** The ROOT: the last instruction added, unless set explicitly. */
  get root(): Instruction {
    const r = this.rootInstr ?? this.list[this.list.length - 1];
    if (!r) throw new Error(`computation '${this.name}' is empty`);
    return r;
  }

  set root(instr: Instruction) {
    if (instr.parent !== this) {
      throw new Error(`'${instr.name}' cannot be ROOT of '${this.name}': it is not in it`);
    }
    this.rootInstr = instr;
  }

  get hasExplicitRoot(): boolean {
    return this.rootInstr !== undefined;
  }

  get isEntry(): boolean {
    return this.parent.entryOrUndefined === this;
  }

  /** Parameters ordered by parameter number. */
  get parameters(): Instruction[] {
    return this.list
      .filter((i) => i.opcode === "parameter")
      .sort((a, b) => (a.attrs.parameterNumber ?? 0) - (b.attrs.parameterNumber ?? 0));
  }

  parameter(n: number): Instruction {
    const p = this.list.find((i) => i.opcode === "parameter" && i.attrs.parameterNumber === n);
    if (!p) throw new Error(`computation '${this.name}' has no parameter ${n}`);
    return p;
  }

  /** Appends an instruction (no shape inference: the spec's shape is taken as given). */
  addInstruction(spec: InstructionSpec): Instruction {
    const name = spec.name ?? this.parent.uniqueName(spec.opcode);
    this.parent.claimName(name);
    const instr = new Instruction(this, this.parent.nextId(), name, spec);
    this.list.push(instr);
    return instr;
  }

  /** Removes an instruction that nothing uses and that is not the root. */
  removeInstruction(instr: Instruction): void {
    if (instr.parent !== this || !this.list.includes(instr)) {
      throw new Error(`'${instr.name}' is not in '${this.name}' (removed already?)`);
    }
    if (instr.users.length > 0) {
      throw new Error(
        `cannot remove '${instr.name}': used by ${instr.users.map((u) => `'${u.name}'`).join(", ")}`,
      );
    }
    if (this.rootInstr === instr || (!this.rootInstr && this.root === instr)) {
      throw new Error(`cannot remove '${instr.name}': it is the ROOT of '${this.name}'`);
    }
    instr.dropOperands();
    this.list.splice(this.list.indexOf(instr), 1);
    this.parent.releaseName(instr.name);
  }

  /**
   * Removes many unused instructions at once in O(n): each must be in this computation, not the
   * ROOT, and used only by other instructions of the same batch.
   */
  removeInstructions(batch: Iterable<Instruction>): void {
    const dead = new Set(batch);
    for (const i of dead) {
      if (i.parent !== this) throw new Error(`'${i.name}' is not in '${this.name}'`);
      if (i === this.root) {
        throw new Error(`cannot remove '${i.name}': it is the ROOT of '${this.name}'`);
      }
      const live = i.users.filter((u) => !dead.has(u));
      if (live.length > 0) {
        throw new Error(
          `cannot remove '${i.name}': used by ${live.map((u) => `'${u.name}'`).join(", ")}`,
        );
      }
    }
    const before = this.list.length;
    const kept = this.list.filter((i) => !dead.has(i));
    if (before - kept.length !== dead.size) {
      throw new Error(`removeInstructions: some instructions are not in '${this.name}'`);
    }
    if (!this.rootInstr) this.rootInstr = this.root;
    for (const i of dead) {
      i.dropOperands();
      this.parent.releaseName(i.name);
    }
    this.list.splice(0, this.list.length, ...kept);
  }

  /**
   * Reorders the instruction list (e.g. after a pass inserted instructions out of order).
   * `order` must be a permutation of the current instructions.
   */
  setOrder(order: readonly Instruction[]): void {
    if (order.length !== this.list.length || order.some((i) => i.parent !== this)) {
      throw new Error(`setOrder: not a permutation of '${this.name}'s instructions`);
    }
    this.list.splice(0, this.list.length, ...order);
  }

  /** Computations this one calls directly. */
  get calledComputations(): Computation[] {
    const out: Computation[] = [];
    for (const i of this.list) for (const c of i.called) if (!out.includes(c)) out.push(c);
    return out;
  }
}

export class Module {
  name: string;
  private readonly comps: Computation[] = [];
  private entryComp: Computation | undefined;
  private idCounter = 0;
  private readonly names = new Set<string>();
  private readonly nameCounters = new Map<string, number>();

  constructor(name: string) {
    this.name = name;
  }

  /** Computations in the order they were added. */
  get computations(): readonly Computation[] {
    return this.comps;
  }

  get entry(): Computation {
    if (!this.entryComp) throw new Error(`module '${this.name}' has no ENTRY computation`);
    return this.entryComp;
  }

  set entry(c: Computation) {
    if (c.parent !== this) throw new Error(`'${c.name}' is not in module '${this.name}'`);
    this.entryComp = c;
  }

  get entryOrUndefined(): Computation | undefined {
    return this.entryComp;
  }

  addComputation(name: string): Computation {
    if (this.comps.some((c) => c.name === name)) {
      throw new Error(`module '${this.name}' already has a computation named '${name}'`);
    }
    const c = new Computation(this, name);
    this.comps.push(c);
    return c;
  }

  getComputation(name: string): Computation {
    const c = this.comps.find((x) => x.name === name);
    if (!c) throw new Error(`module '${this.name}' has no computation '${name}'`);
    return c;
  }

  removeComputation(c: Computation): void {
    if (c === this.entryComp) throw new Error(`cannot remove the ENTRY computation '${c.name}'`);
    for (const other of this.comps) {
      for (const i of other.instructions) {
        if (i.called.includes(c)) {
          throw new Error(`cannot remove '${c.name}': called by '${i.name}' in '${other.name}'`);
        }
      }
    }
    this.comps.splice(this.comps.indexOf(c), 1);
    for (const i of c.instructions) this.releaseName(i.name);
  }

  /** A fresh computation name derived from `base` (`add`, `add.1`, ...). */
  uniqueComputationName(base: string): string {
    if (!this.comps.some((c) => c.name === base)) return base;
    for (let k = 1; ; k++) {
      const n = `${base}.${k}`;
      if (!this.comps.some((c) => c.name === n)) return n;
    }
  }

  /** All instructions of all computations. */
  *allInstructions(): Generator<Instruction> {
    for (const c of this.comps) yield* c.instructions;
  }

  /** @internal */
  nextId(): number {
    return this.idCounter++;
  }

  /**
   * An unused instruction name `base.N` (XLA's naming). It is not reserved: pass it to
   * addInstruction (which claims it) before asking for another.
   */
  uniqueName(base: string): string {
    let k = this.nameCounters.get(base) ?? 0;
    let n: string;
    do {
      k += 1;
      n = `${base}.${k}`;
    } while (this.names.has(n));
    this.nameCounters.set(base, k);
    return n;
  }

  /** @internal records a user-chosen name; duplicates are an error (XLA names are unique). */
  claimName(name: string): void {
    if (this.names.has(name)) {
      throw new Error(`module '${this.name}' already has an instruction named '${name}'`);
    }
    this.names.add(name);
  }

  /** @internal */
  releaseName(name: string): void {
    this.names.delete(name);
  }

  hasName(name: string): boolean {
    return this.names.has(name);
  }
}

/** Callee roles of an instruction's called computations, for printing and checks. */
export function calledRoleNames(instr: Instruction): string[] {
  const role = OPCODE_INFO[instr.opcode].called;
  switch (role) {
    case "none":
      return [];
    case "to_apply":
      return ["to_apply"];
    case "calls":
      return ["calls"];
    case "async":
      return instr.called.map(() => "calls");
    case "while":
      return ["condition", "body"];
    case "branches":
      return instr.called.map((_, i) => `branch ${i}`);
    case "list":
      return instr.called.map((_, i) => `called computation ${i}`);
    default: {
      const never: never = role;
      throw new Error(`unknown called role ${String(never)}`);
    }
  }
}
