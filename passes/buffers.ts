// Buffer assignment for the entry computation (an analysis; it changes nothing): which array
// values need memory, when each is live, which may be written in place over a dying operand,
// and where each lives in one preallocated arena. Parameters are caller-owned and constants
// read-only, so neither is in the arena (a donated parameter may take an in-place result);
// tuples and get-tuple-element alias their elements; the ROOT's buffers live to the end.
// Offsets come from XLA's global decreasing-size best-fit heap: the largest buffers are placed
// first, each in the tightest gap left by the buffers it is live with. The result reports the
// arena size (peakBytes) against the largest simultaneously live set (lowerBoundBytes).

import { isLoopFusion } from "./fuse_rules.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import { OPCODE_INFO } from "../ir/opcodes.ts";
import {
  type ArrayShape,
  elementByteSize,
  elementCount,
  sameDims,
  type Shape,
  shapeToString,
} from "../ir/shape.ts";

export interface BufferOptions {
  /** Entry parameter numbers whose buffers the program may overwrite (donated inputs). */
  donate?: readonly number[];
  /** Every arena offset and reserved size is a multiple of this (default 8 bytes). */
  alignment?: number;
  /** Write elementwise results over a dying operand of the same size (default true). */
  inPlace?: boolean;
}

/** Where a buffer's bytes live: the arena, the caller's argument, or the program's constants. */
export type BufferKind = "arena" | "parameter" | "constant";

/** One array value of the entry computation (a tuple-shaped value has one per leaf). */
export interface LogicalBuffer {
  readonly id: number;
  /** The instruction that writes it. */
  readonly instruction: Instruction;
  /** Tuple index of the leaf in the instruction's shape ([] for an array). */
  readonly index: readonly number[];
  readonly shape: ArrayShape;
  /** Element bytes × element count (at the bound of a dynamic dim). */
  readonly bytes: number;
  readonly kind: BufferKind;
  /** Positions in the entry's instruction order: written at `defined`, last read at `lastUse`. */
  readonly defined: number;
  readonly lastUse: number;
  /** Part of the ROOT's value: lives to the end of the program. */
  readonly output: boolean;
  /** Written in place over this operand buffer, which dies at this buffer's instruction. */
  readonly reuses: LogicalBuffer | undefined;
  /** Arena slot and byte offset; -1 outside the arena (and for empty buffers). */
  readonly slot: number;
  readonly offset: number;
  /** Bytes reserved in the arena: `bytes` rounded up to the alignment (0 outside it). */
  readonly size: number;
}

/** A region of the arena that holds one buffer at a time, for several buffers in turn. */
export interface ArenaSlot {
  readonly index: number;
  readonly offset: number;
  readonly size: number;
  /** The buffers placed here, in program order. */
  readonly buffers: readonly LogicalBuffer[];
}

export interface InPlaceUpdate {
  readonly instruction: Instruction;
  /** Operand number whose buffer the instruction overwrites. */
  readonly operand: number;
  readonly buffer: LogicalBuffer;
}

type Tree = LogicalBuffer | Tree[];

type MutableBuffer = { -readonly [K in keyof LogicalBuffer]: LogicalBuffer[K] };

/** Storage shared by a buffer and the buffers written in place over it. */
interface Allocation {
  buffers: MutableBuffer[];
  size: number;
  start: number;
  end: number;
  offset: number;
}

export class BufferAssignment {
  readonly computation: Computation;
  readonly buffers: readonly LogicalBuffer[];
  readonly slots: readonly ArenaSlot[];
  readonly inPlace: readonly InPlaceUpdate[];
  /** Arena size of this plan. */
  readonly peakBytes: number;
  /** The largest total size of arena buffers live at one time: no plan can use less. */
  readonly lowerBoundBytes: number;
  readonly alignment: number;
  private readonly trees: ReadonlyMap<Instruction, Tree>;

  /** @internal use assignBuffers */
  constructor(init: {
    computation: Computation;
    buffers: LogicalBuffer[];
    slots: ArenaSlot[];
    inPlace: InPlaceUpdate[];
    peakBytes: number;
    lowerBoundBytes: number;
    alignment: number;
    trees: Map<Instruction, Tree>;
  }) {
    this.computation = init.computation;
    this.buffers = init.buffers;
    this.slots = init.slots;
    this.inPlace = init.inPlace;
    this.peakBytes = init.peakBytes;
    this.lowerBoundBytes = init.lowerBoundBytes;
    this.alignment = init.alignment;
    this.trees = init.trees;
  }

  /** The buffer of an array value, or of the tuple leaf at `index`; aliases resolved. */
  bufferOf(instr: Instruction, index: readonly number[] = []): LogicalBuffer {
    let t = this.trees.get(instr);
    if (t === undefined) {
      throw new Error(`buffer assignment: %${instr.name} is not in '${this.computation.name}'`);
    }
    for (const k of index) {
      if (!Array.isArray(t) || t[k] === undefined) {
        throw new Error(
          `buffer assignment: %${instr.name} (${shapeToString(instr.shape, false)}) has no ` +
            `tuple index {${index.join(",")}}`,
        );
      }
      t = t[k];
    }
    if (Array.isArray(t)) {
      throw new Error(
        `buffer assignment: %${instr.name}{${index.join(",")}} is a tuple; give a leaf index`,
      );
    }
    return t;
  }

  /** Every leaf of an instruction's value with its tuple index. */
  leaves(instr: Instruction): { index: number[]; buffer: LogicalBuffer }[] {
    const out: { index: number[]; buffer: LogicalBuffer }[] = [];
    const walk = (t: Tree, index: number[]) => {
      if (Array.isArray(t)) t.forEach((c, k) => walk(c, [...index, k]));
      else out.push({ index, buffer: t });
    };
    walk(this.bufferOfTree(instr), []);
    return out;
  }

  private bufferOfTree(instr: Instruction): Tree {
    const t = this.trees.get(instr);
    if (t === undefined) {
      throw new Error(`buffer assignment: %${instr.name} is not in '${this.computation.name}'`);
    }
    return t;
  }

  /** A printable report: totals, then one line per buffer. */
  summary(): string {
    const ratio = this.lowerBoundBytes > 0 ? this.peakBytes / this.lowerBoundBytes : 1;
    const lines = [
      `buffers of %${this.computation.name}: ${this.buffers.length} buffers, ` +
        `${this.slots.length} slots, peak ${this.peakBytes} B, lower bound ` +
        `${this.lowerBoundBytes} B (x${ratio.toFixed(3)}), ${this.inPlace.length} in place`,
    ];
    for (const b of this.buffers) {
      const at = b.kind === "arena" ? `slot ${b.slot} @${b.offset}+${b.size}` : b.kind;
      const idx = b.index.length > 0 ? `{${b.index.join(",")}}` : "";
      const extra = [
        b.reuses ? `in place of %${b.reuses.instruction.name}` : "",
        b.output ? "output" : "",
      ].filter((s) => s !== "");
      lines.push(
        `  %${b.instruction.name}${idx} ${shapeToString(b.shape, false)} ${b.bytes} B ${at} ` +
          `live [${b.defined},${b.lastUse}]${extra.length ? ` ${extra.join(", ")}` : ""}`,
      );
    }
    return lines.join("\n");
  }
}

/** Plans the buffers of `module`'s entry computation (run after fusion). */
export function assignBuffers(module: Module, options: BufferOptions = {}): BufferAssignment {
  return assignComputationBuffers(module.entry, options);
}

export function assignComputationBuffers(
  comp: Computation,
  options: BufferOptions = {},
): BufferAssignment {
  const alignment = options.alignment ?? 8;
  if (!Number.isInteger(alignment) || alignment < 1) {
    throw new Error(`assignBuffers: alignment must be a positive integer, got ${alignment}`);
  }
  const donated = new Set(options.donate ?? []);
  for (const n of donated) {
    if (!comp.parameters.some((p) => p.attrs.parameterNumber === n)) {
      throw new Error(`assignBuffers: cannot donate parameter ${n}; '${comp.name}' has no such`);
    }
  }
  const order = comp.instructions;
  const end = order.length;
  const pos = new Map<Instruction, number>(order.map((i, k) => [i, k]));
  const align = (n: number) => Math.ceil(n / alignment) * alignment;
  const buffers: MutableBuffer[] = [];
  const trees = new Map<Instruction, Tree>();

  const define = (instr: Instruction, shape: Shape, index: number[], kind: BufferKind): Tree => {
    if (shape.kind === "tuple") {
      return shape.elements.map((e, k) => define(instr, e, [...index, k], kind));
    }
    const bytes = elementCount(shape) * elementByteSize(shape.type);
    const b: MutableBuffer = {
      id: buffers.length,
      instruction: instr,
      index,
      shape,
      bytes,
      kind,
      defined: pos.get(instr)!,
      lastUse: pos.get(instr)!,
      output: false,
      reuses: undefined,
      slot: -1,
      offset: -1,
      size: 0,
    };
    buffers.push(b);
    return b;
  };

  for (const instr of order) {
    let t: Tree;
    switch (instr.opcode) {
      case "parameter":
        t = define(instr, instr.shape, [], "parameter");
        break;
      case "constant":
        t = define(instr, instr.shape, [], "constant");
        break;
      case "tuple":
        t = instr.operands.map((o) => trees.get(o)!);
        break;
      case "get-tuple-element": {
        const whole = trees.get(instr.operand(0))!;
        const k = instr.attrs.tupleIndex ?? 0;
        if (!Array.isArray(whole) || whole[k] === undefined) {
          throw new Error(`assignBuffers: %${instr.name} reads tuple index ${k} of a non-tuple`);
        }
        t = whole[k];
        break;
      }
      default:
        t = define(instr, instr.shape, [], "arena");
    }
    trees.set(instr, t);
  }

  const leavesOf = (t: Tree): MutableBuffer[] =>
    Array.isArray(t) ? t.flatMap(leavesOf) : [t as MutableBuffer];
  order.forEach((instr, k) => {
    for (const o of instr.operands) {
      for (const b of leavesOf(trees.get(o)!)) b.lastUse = Math.max(b.lastUse, k);
    }
  });
  for (const b of leavesOf(trees.get(comp.root)!)) {
    b.output = true;
    b.lastUse = end;
  }

  // Storage: each arena buffer starts its own allocation; in place joins the operand's.
  const allocOf = new Map<MutableBuffer, Allocation>();
  const allocations: Allocation[] = [];
  const inPlace: InPlaceUpdate[] = [];
  for (const b of buffers) {
    if (b.kind !== "arena") continue;
    const target = options.inPlace === false ? undefined : inPlaceTarget(b, trees, donated);
    if (target !== undefined) {
      b.reuses = target.buffer;
      inPlace.push({ instruction: b.instruction, operand: target.operand, buffer: target.buffer });
      if (target.buffer.kind === "parameter") {
        // The result lives in the donated argument's memory, outside the arena.
        b.kind = "parameter";
        continue;
      }
      const a = allocOf.get(target.buffer)!;
      a.buffers.push(b);
      a.end = Math.max(a.end, b.lastUse);
      allocOf.set(b, a);
      continue;
    }
    const a: Allocation = {
      buffers: [b],
      size: align(b.bytes),
      start: b.defined,
      end: b.lastUse,
      offset: -1,
    };
    allocations.push(a);
    allocOf.set(b, a);
  }

  const lowerBoundBytes = liveMaximum(allocations, end);
  const peakBytes = placeBestFit(allocations);

  const byOffset = new Map<number, Allocation[]>();
  for (const a of allocations) {
    if (a.size === 0) continue;
    const list = byOffset.get(a.offset) ?? [];
    list.push(a);
    byOffset.set(a.offset, list);
  }
  const slotLists = [...byOffset.entries()].sort(
    (x, y) => Math.min(...x[1].map((a) => a.start)) - Math.min(...y[1].map((a) => a.start)),
  );
  const slots: ArenaSlot[] = slotLists.map(([offset, list], index) => {
    const members = list.flatMap((a) => a.buffers).sort((x, y) => x.defined - y.defined);
    for (const a of list) {
      for (const b of a.buffers) {
        b.slot = index;
        b.offset = offset;
        b.size = a.size;
      }
    }
    return { index, offset, size: Math.max(...list.map((a) => a.size)), buffers: members };
  });
  for (const a of allocations) {
    if (a.size !== 0) continue;
    for (const b of a.buffers) b.size = 0;
  }
  return new BufferAssignment({
    computation: comp,
    buffers,
    slots,
    inPlace,
    peakBytes,
    lowerBoundBytes,
    alignment,
    trees,
  });
}

/**
 * The operand buffer `b`'s instruction may overwrite: an array operand that dies there (its
 * last read is this instruction and it is not an output), of the same byte size, in the arena
 * or a donated parameter, read only elementwise (same index as the output element written).
 */
function inPlaceTarget(
  b: MutableBuffer,
  trees: ReadonlyMap<Instruction, Tree>,
  donated: ReadonlySet<number>,
): { operand: number; buffer: MutableBuffer } | undefined {
  const instr = b.instruction;
  if (b.index.length > 0 || instr.shape.kind !== "array") return undefined;
  const candidates = inPlaceOperands(instr);
  for (const k of candidates) {
    const t = trees.get(instr.operand(k));
    if (t === undefined || Array.isArray(t)) continue;
    const o = t as MutableBuffer;
    const owned = o.kind === "arena" || (o.kind === "parameter" && isDonated(o, donated));
    if (!owned || o.output || o.lastUse !== b.defined || o.bytes !== b.bytes) continue;
    // Every operand slot that reads this buffer must read it elementwise.
    const readers = instr.operands
      .map((op, j) => ({ op, j }))
      .filter(({ op }) => trees.get(op) === o)
      .map(({ j }) => j);
    if (readers.every((j) => candidates.includes(j))) return { operand: k, buffer: o };
  }
  return undefined;
}

/** A parameter-kind buffer whose memory is a donated argument (directly or through in place). */
function isDonated(b: LogicalBuffer, donated: ReadonlySet<number>): boolean {
  let root = b;
  while (root.reuses !== undefined) root = root.reuses;
  const p = root.instruction;
  return p.opcode === "parameter" && donated.has(p.attrs.parameterNumber ?? -1);
}

/** Operand numbers an instruction reads only at the index it writes (so may overwrite). */
function inPlaceOperands(instr: Instruction): number[] {
  const shape = instr.shape;
  if (shape.kind !== "array") return [];
  const sameIndexSpace = (j: number) => {
    const s = instr.operand(j).shape;
    return s.kind === "array" && sameDims(s, shape);
  };
  if (instr.opcode === "dynamic-update-slice") return sameIndexSpace(0) ? [0] : [];
  if (OPCODE_INFO[instr.opcode].elementwise) {
    return instr.operands.map((_, j) => j).filter(sameIndexSpace);
  }
  if (isLoopFusion(instr)) {
    const body = instr.called[0]!;
    return instr.operands
      .map((_, j) => j)
      .filter((j) => sameIndexSpace(j) && readElementwise(body.parameter(j), body.root));
  }
  return [];
}

/** Every use of `p` inside a fused body is elementwise in the root's index space. */
function readElementwise(p: Instruction, root: Instruction): boolean {
  const rootShape = root.shape;
  if (rootShape.kind !== "array") return false;
  const stack = [p];
  const seen = new Set<Instruction>();
  while (stack.length > 0) {
    const i = stack.pop()!;
    for (const u of i.users) {
      if (seen.has(u)) continue;
      seen.add(u);
      const s = u.shape;
      if (!OPCODE_INFO[u.opcode].elementwise || s.kind !== "array" || !sameDims(s, rootShape)) {
        return false;
      }
      stack.push(u);
    }
  }
  return true;
}

/** The largest total size of allocations live at one position (intervals are inclusive). */
function liveMaximum(allocations: readonly Allocation[], end: number): number {
  const delta = new Array<number>(end + 2).fill(0);
  for (const a of allocations) {
    delta[a.start]! += a.size;
    delta[a.end + 1]! -= a.size;
  }
  let live = 0;
  let max = 0;
  for (const d of delta) {
    live += d;
    max = Math.max(max, live);
  }
  return max;
}

/**
 * XLA's GlobalDecreasingSizeBestFitHeap: biggest first (ties: earlier start), each at the
 * smallest gap between the allocations it overlaps in time that fits, else above them all.
 * Returns the arena size.
 */
function placeBestFit(allocations: Allocation[]): number {
  const sorted = [...allocations].sort(
    (a, b) => b.size - a.size || a.start - b.start || a.buffers[0]!.id - b.buffers[0]!.id,
  );
  const placed: Allocation[] = [];
  let top = 0;
  for (const a of sorted) {
    if (a.size === 0) {
      a.offset = 0;
      continue;
    }
    const busy = placed
      .filter((p) => p.start <= a.end && a.start <= p.end)
      .sort((x, y) => x.offset - y.offset);
    let best = -1;
    let bestGap = Infinity;
    let cursor = 0;
    for (const p of busy) {
      const gap = p.offset - cursor;
      if (gap >= a.size && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      cursor = Math.max(cursor, p.offset + p.size);
    }
    a.offset = best >= 0 ? best : cursor;
    placed.push(a);
    top = Math.max(top, a.offset + a.size);
  }
  return top;
}
