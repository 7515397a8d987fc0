// Buffer assignment for the entry computation (an analysis; it changes nothing): which array
// values need memory, when each is live, which may be written in place over a dying operand,
// and where each lives in one preallocated arena. Parameters are caller-owned and constants
// read-only, so neither is in the arena (a donated parameter may take an in-place result);
// tuples and get-tuple-element alias their elements; the ROOT's buffers live to the end.
// Offsets come from heap simulation: several heuristics (XLA's decreasing-size and live-range
// best fit, TFLite's greedy by breadth, a linear scan, bottom-up lowest-first packing) each
// place every buffer, and the smallest arena wins, as in XLA's ChooseBestHeapAlgorithm. The
// result reports the arena size (peakBytes) against the largest simultaneously live set
// (lowerBoundBytes), which no plan can beat.

import { isLoopFusion } from "./fuse_rules.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import { OPCODE_INFO } from "../ir/opcodes.ts";
import {
  type ArrayShape,
  type ElementType,
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
  /** The heap-simulation heuristics to try, in order (default: all of HEAP_HEURISTICS). */
  heuristics?: readonly HeapHeuristic[];
  /**
   * Bytes per element of a type (default: as XLA stores it, elementByteSize). A backend whose
   * storage differs (the Literals' f16 and bf16 are Float32Arrays) plans with its own.
   */
  elementBytes?: (t: ElementType) => number;
  /**
   * reshape and copy results are views of their operand's buffer (row-major storage does not
   * change), so they take no memory of their own and keep the operand alive (default false).
   */
  views?: boolean;
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

/** The buffers of a value: one for an array, a tree for a tuple (aliases resolved). */
export type BufferTree = LogicalBuffer | BufferTree[];
type Tree = BufferTree;

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
  /** The heap-simulation heuristic whose offsets the plan uses ("" when nothing is placed). */
  readonly heuristic: HeapHeuristic | "";
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
    heuristic: HeapHeuristic | "";
    alignment: number;
    trees: Map<Instruction, Tree>;
  }) {
    this.computation = init.computation;
    this.buffers = init.buffers;
    this.slots = init.slots;
    this.inPlace = init.inPlace;
    this.peakBytes = init.peakBytes;
    this.lowerBoundBytes = init.lowerBoundBytes;
    this.heuristic = init.heuristic;
    this.alignment = init.alignment;
    this.trees = init.trees;
  }

  /** The buffers of an instruction's value (a tree for a tuple); aliases resolved. */
  treeOf(instr: Instruction): BufferTree {
    const t = this.trees.get(instr);
    if (t === undefined) {
      throw new Error(`buffer assignment: %${instr.name} is not in '${this.computation.name}'`);
    }
    return t;
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
  const heuristics = options.heuristics ?? HEAP_HEURISTICS;
  const unknown = heuristics.filter((h) => !Object.hasOwn(HEURISTICS, h));
  if (heuristics.length === 0 || unknown.length > 0) {
    throw new Error(
      `assignBuffers: heuristics must be a non-empty list of ${HEAP_HEURISTICS.join(", ")}` +
        (unknown.length > 0 ? `; got unknown ${unknown.map((h) => `'${h}'`).join(", ")}` : ""),
    );
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
    const bytes = elementCount(shape) * (options.elementBytes ?? elementByteSize)(shape.type);
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
      case "reshape":
      case "copy":
        if (options.views && instr.shape.kind === "array") {
          t = trees.get(instr.operand(0))!;
          break;
        }
        t = define(instr, instr.shape, [], "arena");
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
  const nonEmpty = allocations.filter((a) => a.size > 0);
  const placement = placeIntervals(nonEmpty, lowerBoundBytes, heuristics);
  for (const a of allocations) a.offset = 0;
  nonEmpty.forEach((a, i) => (a.offset = placement.offsets[i]!));
  const peakBytes = placement.top;

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
    heuristic: placement.heuristic,
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

/** What a heuristic sees of an allocation: its reserved size and inclusive live range. */
interface Interval {
  readonly size: number;
  readonly start: number;
  readonly end: number;
}

/** Offsets by interval index and the arena size they need. */
interface Placement {
  readonly offsets: readonly number[];
  readonly top: number;
}

/** What every heuristic shares: the intervals, who overlaps whom, and the sort keys. */
interface HeapProblem {
  readonly items: readonly Interval[];
  readonly neighbours: readonly (readonly number[])[];
  /** Decreasing size, then longer live range, then earlier start. */
  readonly spatial: () => number[];
  /** Longer live range, then decreasing size, then earlier start. */
  readonly temporal: () => number[];
  /** Decreasing size × live-range length, then decreasing size, then earlier start. */
  readonly area: () => number[];
  /** Earlier start, then decreasing size. */
  readonly byStart: () => number[];
}

const HEURISTICS = {
  // XLA's GlobalDecreasingSizeBestFitHeap, kSpatial and kTemporal.
  "size-best-fit": (h) => bestFit(h, h.spatial(), false),
  "live-range-best-fit": (h) => bestFit(h, h.temporal(), false),
  "area-best-fit": (h) => bestFit(h, h.area(), false),
  // TFLite's greedy by breadth: the values of the most crowded instruction first.
  "breadth-best-fit": (h) => bestFit(h, breadthOrder(h), false),
  // A linear scan: values in program order, each in the lowest gap that fits.
  "start-first-fit": (h) => bestFit(h, h.byStart(), true),
  // Bottom-up: whichever value can sit lowest goes next (the canonical order of MiniMalloc's
  // solutions), the key breaking ties; it packs the small values best fit scatters.
  "area-lowest-first": (h) => lowestFirst(h, rankOf(h.area())),
  "live-range-lowest-first": (h) => lowestFirst(h, rankOf(h.temporal())),
  "size-lowest-first": (h) => lowestFirst(h, rankOf(h.spatial())),
} satisfies Record<string, (h: HeapProblem) => Placement>;

/** The heap-simulation heuristics, in the order the planner tries them. */
export type HeapHeuristic = keyof typeof HEURISTICS;
export const HEAP_HEURISTICS: readonly HeapHeuristic[] = Object.freeze(
  Object.keys(HEURISTICS) as HeapHeuristic[],
);

/**
 * Packing intervals into the smallest arena is NP-hard (dynamic storage allocation), and each
 * greedy heuristic has graphs it packs badly: decreasing size alone left a ViT 1.43x over the
 * bound, because best fit scatters the small values that later block a large one. So, like
 * XLA's ChooseBestHeapAlgorithm, several heuristics run and the smallest arena wins (ties: the
 * earlier one); the search stops as soon as one reaches the lower bound, which no plan can
 * beat. Each is O(n²) at worst, so even the whole portfolio plans a transformer in milliseconds.
 */
function placeIntervals(
  items: readonly Interval[],
  lowerBound: number,
  heuristics: readonly HeapHeuristic[],
): Placement & { heuristic: HeapHeuristic | "" } {
  const n = items.length;
  if (n === 0) return { heuristic: "", offsets: [], top: 0 };
  const length = (i: number) => items[i]!.end - items[i]!.start + 1;
  const size = (i: number) => items[i]!.size;
  const start = (i: number) => items[i]!.start;
  const problem: HeapProblem = {
    items,
    neighbours: overlapLists(items),
    spatial: () => sortedBy(n, [(i) => -size(i), (i) => -length(i), start]),
    temporal: () => sortedBy(n, [(i) => -length(i), (i) => -size(i), start]),
    area: () => sortedBy(n, [(i) => -size(i) * length(i), (i) => -size(i), start]),
    byStart: () => sortedBy(n, [start, (i) => -size(i)]),
  };
  let best: (Placement & { heuristic: HeapHeuristic }) | undefined;
  for (const name of heuristics) {
    const p = HEURISTICS[name](problem);
    if (best === undefined || p.top < best.top) best = { ...p, heuristic: name };
    if (best.top <= lowerBound) break;
  }
  return best!;
}

/** For each interval, the others live at some common position. */
function overlapLists(items: readonly Interval[]): number[][] {
  const byStart = sortedBy(items.length, [(i) => items[i]!.start]);
  const lists: number[][] = items.map(() => []);
  for (let x = 0; x < byStart.length; x++) {
    const i = byStart[x]!;
    for (let y = x + 1; y < byStart.length; y++) {
      const j = byStart[y]!;
      if (items[j]!.start > items[i]!.end) break;
      lists[i]!.push(j);
      lists[j]!.push(i);
    }
  }
  return lists;
}

/** Indices 0..n-1 sorted by the keys in turn, then by index (so every order is total). */
function sortedBy(n: number, keys: readonly ((i: number) => number)[]): number[] {
  return Array.from({ length: n }, (_, i) => i).sort((x, y) => {
    for (const k of keys) {
      const d = k(x) - k(y);
      if (d !== 0) return d;
    }
    return x - y;
  });
}

function rankOf(order: readonly number[]): number[] {
  const rank = new Array<number>(order.length);
  order.forEach((i, r) => (rank[i] = r));
  return rank;
}

/**
 * Places intervals in `order`, each in the smallest gap between the placed intervals it
 * overlaps that fits (the lowest such gap with `firstFit`), else above them all.
 */
function bestFit(h: HeapProblem, order: readonly number[], firstFit: boolean): Placement {
  const { items, neighbours } = h;
  const offsets = new Array<number>(items.length).fill(-1);
  const busy: number[] = [];
  let top = 0;
  for (const i of order) {
    busy.length = 0;
    for (const j of neighbours[i]!) if (offsets[j]! >= 0) busy.push(j);
    busy.sort((x, y) => offsets[x]! - offsets[y]!);
    const size = items[i]!.size;
    let best = -1;
    let bestGap = Infinity;
    let cursor = 0;
    for (const j of busy) {
      const gap = offsets[j]! - cursor;
      if (gap >= size && gap < bestGap) {
        best = cursor;
        bestGap = gap;
        if (firstFit) break;
      }
      cursor = Math.max(cursor, offsets[j]! + items[j]!.size);
    }
    const offset = best >= 0 ? best : cursor;
    offsets[i] = offset;
    top = Math.max(top, offset + size);
  }
  return { offsets, top };
}

/**
 * Bottom-up packing: each step places, at its floor (the top of the placed intervals it
 * overlaps), the unplaced interval whose floor is lowest, ties to the lowest rank.
 */
function lowestFirst(h: HeapProblem, rank: readonly number[]): Placement {
  const { items, neighbours } = h;
  const n = items.length;
  const floor = new Array<number>(n).fill(0);
  const offsets = new Array<number>(n).fill(-1);
  let top = 0;
  for (let step = 0; step < n; step++) {
    let pick = -1;
    for (let i = 0; i < n; i++) {
      if (offsets[i]! >= 0) continue;
      if (pick < 0 || floor[i]! < floor[pick]! ||
        (floor[i] === floor[pick] && rank[i]! < rank[pick]!)) {
        pick = i;
      }
    }
    const offset = floor[pick]!;
    const topOfPick = offset + items[pick]!.size;
    offsets[pick] = offset;
    top = Math.max(top, topOfPick);
    for (const j of neighbours[pick]!) {
      if (offsets[j]! < 0) floor[j] = Math.max(floor[j]!, topOfPick);
    }
  }
  return { offsets, top };
}

/**
 * The intervals of the most crowded positions first (largest total live size; the live set at
 * an interval's start is it and the overlapping intervals that started no later), each
 * position's not yet listed intervals by decreasing size.
 */
function breadthOrder(h: HeapProblem): number[] {
  const { items, neighbours } = h;
  const liveAt = (i: number) => [
    i,
    ...neighbours[i]!.filter((j) => items[j]!.start <= items[i]!.start),
  ];
  const breadth = items.map((_, i) => liveAt(i).reduce((s, j) => s + items[j]!.size, 0));
  const seen = new Set<number>();
  const order: number[] = [];
  for (const i of sortedBy(items.length, [(i) => -breadth[i]!, (i) => items[i]!.start])) {
    const live = liveAt(i).sort(
      (x, y) => items[y]!.size - items[x]!.size || items[x]!.start - items[y]!.start || x - y,
    );
    for (const j of live) {
      if (seen.has(j)) continue;
      seen.add(j);
      order.push(j);
    }
  }
  return order;
}
