// The collectives, evaluated over N simulated devices (replicas x partitions) that run the same
// program in lockstep (ir/evaluate.ts, evaluateReplicated): each implementation gets every
// device's operand values at once and returns every device's result. Which devices exchange
// values follows XLA's CollectiveOpGroupMode: replica_groups hold replica ids (no channel_id),
// partition ids (all-to-all and collective-permute with a channel_id), replica ids expanded over
// every partition (channel_id without use_global_device_ids), or flattened device ids
// (use_global_device_ids). Device d is replica floor(d / P), partition d mod P.

import { concatLiterals, sliceAlong } from "./evaluate_movement.ts";
import { converter } from "./evaluate_elementwise.ts";
import { makeCombiner } from "./evaluate_reduction.ts";
import {
  asLiteral,
  asTuple,
  elems,
  fail,
  mutableElems,
  zeros,
  type EvalContext,
  type EvalValue,
} from "./evaluate_support.ts";
import { allocate, Literal } from "./literal.ts";
import type { Instruction } from "./module.ts";
import type { Opcode } from "./opcodes.ts";
import type { Shape } from "./shape.ts";

/** How many devices run the program: replicas x partitions. */
export interface DeviceCount {
  replicas: number;
  partitions: number;
}

/** Every device's value of one operand or result, indexed by device. */
type PerDevice = EvalValue[];

/**
 * One collective: per operand, every device's value in; every device's result out. `ctxs[d]`
 * runs called computations (reducers) for device d.
 */
export type CollectiveImpl = (
  instr: Instruction,
  ops: readonly PerDevice[],
  devices: DeviceCount,
  ctxs: readonly EvalContext[],
) => PerDevice;

type CollectiveOpcode =
  | "all-reduce"
  | "all-reduce-start"
  | "all-reduce-done"
  | "all-gather"
  | "all-gather-start"
  | "all-gather-done"
  | "reduce-scatter"
  | "all-to-all"
  | "collective-permute"
  | "collective-permute-start"
  | "collective-permute-done";

/**
 * The groups of flattened device ids a collective runs over, in group order: every device is in
 * exactly one (XLA's verifier requires it).
 */
export function deviceGroups(instr: Instruction, devices: DeviceCount): number[][] {
  const { replicas: R, partitions: P } = devices;
  const listed = instr.attrs.replicaGroups ?? [];
  const channel = (instr.attrs.channelId ?? 0) > 0;
  const perPartition = instr.opcode.startsWith("all-to-all") ||
    instr.opcode.startsWith("collective-permute");
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);
  const check = (ids: readonly number[], limit: number, what: string) => {
    for (const id of ids) {
      if (id >= limit) {
        fail(`replica_groups name ${what} ${id}, but the program runs on ${R} replica(s) x ${P} ` +
          `partition(s)`);
      }
    }
  };
  let groups: number[][];
  if (channel && instr.attrs.useGlobalDeviceIds) {
    groups = listed.length > 0 ? listed.map((g) => [...g]) : [range(R * P)];
    groups.forEach((g) => check(g, R * P, "device"));
  } else if (channel && perPartition) {
    const parts = listed.length > 0 ? listed : [range(P)];
    parts.forEach((g) => check(g, P, "partition"));
    groups = [];
    for (let r = 0; r < R; r++) for (const g of parts) groups.push(g.map((p) => r * P + p));
  } else if (channel) {
    const reps = listed.length > 0 ? listed : [range(R)];
    reps.forEach((g) => check(g, R, "replica"));
    groups = reps.map((g) => g.flatMap((r) => range(P).map((p) => r * P + p)));
  } else {
    const reps = listed.length > 0 ? listed : [range(R)];
    reps.forEach((g) => check(g, R, "replica"));
    groups = [];
    for (let p = 0; p < P; p++) for (const g of reps) groups.push(g.map((r) => r * P + p));
  }
  const seen = new Set(groups.flat());
  if (seen.size !== R * P) {
    const missing = range(R * P).filter((d) => !seen.has(d));
    fail(`replica_groups leave device(s) ${missing.join(", ")} out of every group`);
  }
  return groups;
}

function literalsOf(values: PerDevice, what: string): Literal[] {
  return values.map((v, d) => asLiteral(v, `${what} on device ${d}`));
}

/**
 * Reduces the members' values elementwise with the reducer, in group order. A float reducer of
 * another float type than the operands (mixed precision) combines the values converted to its
 * type, and the result is converted back.
 */
function reduceGroup(
  instr: Instruction,
  lits: readonly Literal[],
  ctx: EvalContext,
): Literal {
  const first = lits[0]!;
  const red = instr.called[0]?.root.shape;
  const rt = red?.kind === "array" ? red.type : first.type;
  const into = converter(first.type, rt);
  const back = converter(rt, first.type);
  const combine = makeCombiner(ctx, instr.called[0], [rt], "to_apply");
  const out = allocate(first.type, first.size);
  const o = mutableElems(out);
  const xs = lits.map(elems);
  for (let i = 0; i < first.size; i++) {
    let acc = into(xs[0]![i]!);
    for (let m = 1; m < xs.length; m++) acc = combine([acc], [into(xs[m]![i]!)])[0]!;
    o[i] = back(acc);
  }
  return new Literal(first.type, first.dims, out);
}

const oneOrTuple = (vs: EvalValue[]): EvalValue => (vs.length === 1 ? vs[0]! : vs);

const allReduce: CollectiveImpl = (instr, ops, devices, ctxs) => {
  const groups = deviceGroups(instr, devices);
  const out: EvalValue[][] = ops[0]!.map(() => []);
  ops.forEach((perDevice, k) => {
    const lits = literalsOf(perDevice, `operand ${k}`);
    for (const g of groups) {
      const sum = reduceGroup(instr, g.map((d) => lits[d]!), ctxs[g[0]!]!);
      for (const d of g) out[d]!.push(sum);
    }
  });
  return out.map(oneOrTuple);
};

function theDim(instr: Instruction): number {
  const d = instr.attrs.dimensions?.[0];
  if (d === undefined) fail("attribute 'dimensions' is missing");
  return d;
}

const allGather: CollectiveImpl = (instr, ops, devices) => {
  const groups = deviceGroups(instr, devices);
  const dim = theDim(instr);
  const out: EvalValue[][] = ops[0]!.map(() => []);
  ops.forEach((perDevice, k) => {
    const lits = literalsOf(perDevice, `operand ${k}`);
    for (const g of groups) {
      const all = concatLiterals(g.map((d) => lits[d]!), dim);
      for (const d of g) out[d]!.push(all);
    }
  });
  return out.map(oneOrTuple);
};

const reduceScatter: CollectiveImpl = (instr, ops, devices, ctxs) => {
  const groups = deviceGroups(instr, devices);
  const dim = theDim(instr);
  const out: EvalValue[][] = ops[0]!.map(() => []);
  ops.forEach((perDevice, k) => {
    const lits = literalsOf(perDevice, `operand ${k}`);
    for (const g of groups) {
      const sum = reduceGroup(instr, g.map((d) => lits[d]!), ctxs[g[0]!]!);
      const n = sum.dims[dim]! / g.length;
      if (!Number.isInteger(n)) {
        fail(`dimension ${dim} (${sum.dims[dim]}) does not split over ${g.length} devices`);
      }
      g.forEach((d, j) => out[d]!.push(sliceAlong(sum, dim, j * n, (j + 1) * n)));
    }
  });
  return out.map(oneOrTuple);
};

const allToAll: CollectiveImpl = (instr, ops, devices) => {
  const groups = deviceGroups(instr, devices);
  const out: EvalValue[] = new Array<EvalValue>(ops[0]!.length);
  if (instr.attrs.dimensions !== undefined) {
    const dim = theDim(instr);
    const lits = literalsOf(ops[0]!, "operand 0");
    for (const g of groups) {
      const n = lits[g[0]!]!.dims[dim]! / g.length;
      if (!Number.isInteger(n)) {
        fail(`dimension ${dim} does not split into ${g.length} chunks (the group size)`);
      }
      g.forEach((d, j) => {
        out[d] = concatLiterals(g.map((src) => sliceAlong(lits[src]!, dim, j * n, (j + 1) * n)),
          dim);
      });
    }
    return out;
  }
  for (const g of groups) {
    if (ops.length !== g.length) {
      fail(`the tuple form needs ${g.length} operands (one per device of the group), got ` +
        `${ops.length}`);
    }
    // Device j of the group receives operand j of every member, in group order.
    g.forEach((d, j) => {
      out[d] = oneOrTuple(g.map((src) => ops[j]![src]!));
    });
  }
  return out;
};

/** Flattened (source, target) device pairs: ids are replicas (no channel) or partitions. */
function devicePairs(instr: Instruction, devices: DeviceCount): [number, number][] {
  const { replicas: R, partitions: P } = devices;
  const channel = (instr.attrs.channelId ?? 0) > 0;
  const pairs = instr.attrs.sourceTargetPairs ?? fail("attribute 'sourceTargetPairs' is missing");
  const limit = channel ? P : R;
  for (const [x, y] of pairs) {
    if (x >= limit || y >= limit) {
      fail(`source_target_pairs name ${channel ? "partition" : "replica"} ${Math.max(x, y)}, ` +
        `but the program runs on ${R} replica(s) x ${P} partition(s)`);
    }
  }
  const out: [number, number][] = [];
  if (channel) {
    for (let r = 0; r < R; r++) for (const [x, y] of pairs) out.push([r * P + x, r * P + y]);
  } else {
    for (let p = 0; p < P; p++) for (const [x, y] of pairs) out.push([x * P + p, y * P + p]);
  }
  return out;
}

const collectivePermute: CollectiveImpl = (instr, ops, devices) => {
  const lits = literalsOf(ops[0]!, "operand 0");
  const out: EvalValue[] = lits.map((l) => zeros(l.type, l.dims));
  for (const [src, dst] of devicePairs(instr, devices)) out[dst] = lits[src]!;
  return out;
};

function zeroContexts(s: Shape): EvalValue[] {
  if (s.kind !== "tuple") fail("a -start result must be a tuple");
  return s.elements.slice(2).map((e) => zeros(e.kind === "array" ? e.type : "u32", []));
}

/** Element 1 of every device's -start tuple. */
const done: CollectiveImpl = (_instr, ops) =>
  ops[0]!.map((v, d) => asTuple(v, `the -start value on device ${d}`)[1]!);

export const COLLECTIVES = {
  "all-reduce": allReduce,
  "all-reduce-start": allReduce,
  "all-reduce-done": (_instr, ops) => ops[0]!,
  "all-gather": allGather,
  // (operand(s), result(s)) on every device.
  "all-gather-start": (instr, ops, devices, ctxs) =>
    allGather(instr, ops, devices, ctxs).map((r, d) => [oneOrTuple(ops.map((o) => o[d]!)), r]),
  "all-gather-done": done,
  "reduce-scatter": reduceScatter,
  "all-to-all": allToAll,
  "collective-permute": collectivePermute,
  // (operand, result, contexts...): the contexts are u32[]/s32[] zeros.
  "collective-permute-start": (instr, ops, devices, ctxs) => {
    const extra = zeroContexts(instr.shape);
    return collectivePermute(instr, ops, devices, ctxs).map((r, d) => [ops[0]![d]!, r, ...extra]);
  },
  "collective-permute-done": done,
} satisfies { [K in CollectiveOpcode]: CollectiveImpl } & Partial<Record<Opcode, CollectiveImpl>>;

export function collectiveImpl(op: Opcode): CollectiveImpl | undefined {
  return (COLLECTIVES as Partial<Record<Opcode, CollectiveImpl>>)[op];
}
