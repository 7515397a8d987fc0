// Turns a chosen cluster of instructions into a `fusion` instruction calling a new fused
// computation (FUSION_CONTRACT.md: parameter i ↔ operand i, the ROOT's shape is the fusion's
// shape). Members move into the computation under their own names; duplicated members are
// copied (the original stays for its other users and is removed once nothing uses it);
// existing kLoop fusions among the members are inlined. The fusion instruction takes the
// position and the metadata of the cluster's root.

import { extentsOf } from "../ir/extents.ts";
import type { FusionKind } from "../ir/attributes.ts";
import { cloneAttributes } from "../ir/clone.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";

export interface ClusterPlan {
  readonly root: Instruction;
  readonly members: ReadonlySet<Instruction>;
  readonly dup: ReadonlySet<Instruction>;
}

/** `layerNorm` → `layer_norm`, anything else non-identifier → `_`. */
function snake(s: string): string {
  return s
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/[^A-Za-z0-9_]+/g, "_")
    .toLowerCase();
}

function baseName(root: Instruction, kind: FusionKind, members: ReadonlySet<Instruction>): string {
  const op = root.metadata.opType;
  if (op !== undefined && snake(op) !== "") return `fused_${snake(op)}`;
  switch (kind) {
    case "kLoop":
      return "fused_loop";
    case "kInput":
      return "fused_reduce";
    case "kOutput":
      return [...members].some((m) => m.opcode === "convolution") ? "fused_conv" : "fused_dot";
    case "kCustom":
      return "fused_custom";
    default: {
      const never: never = kind;
      throw new Error(`unknown fusion kind ${String(never)}`);
    }
  }
}

/**
 * Rewrites `comp` so the cluster becomes one fusion instruction; returns it. `position` gives
 * each member's index in the computation (members are copied in that order).
 */
export function materializeFusion(
  comp: Computation,
  plan: ClusterPlan,
  kind: FusionKind,
  position: (i: Instruction) => number,
): Instruction {
  const module = comp.parent;
  const { root, members, dup } = plan;
  const ordered = [...members].sort((a, b) => position(a) - position(b));
  // Operand lists are read now: removing a member drops its operands.
  const operandsOf = new Map<Instruction, readonly Instruction[]>(
    ordered.map((m) => [m, [...m.operands]]),
  );
  const externals: Instruction[] = [];
  for (const m of ordered) {
    for (const o of operandsOf.get(m)!) {
      if (!members.has(o) && !externals.includes(o)) externals.push(o);
    }
  }
  const fused = module.addComputation(
    module.uniqueComputationName(baseName(root, kind, members)),
  );
  // Fresh names for copies must avoid the names moved members are about to take back.
  const reserved = new Set([...members].filter((m) => !dup.has(m)).map((m) => m.name));
  const fresh = (base: string) => {
    const n = freshName(module, base, reserved);
    reserved.add(n);
    return n;
  };
  const inner = new Map<Instruction, Instruction>();
  externals.forEach((e, k) => {
    inner.set(
      e,
      fused.addInstruction({
        opcode: "parameter",
        shape: e.shape,
        attrs: { parameterNumber: k },
        name: fresh(`param_${k}`),
      }),
    );
  });
  const before = [...comp.instructions];
  const fusion = comp.addInstruction({
    opcode: "fusion",
    shape: root.shape,
    operands: externals,
    // The root's extent hint (ir/extents.ts) is the fusion's: it computes the root's value.
    attrs: {
      fusionKind: kind,
      ...(extentsOf(root) !== undefined && { backendConfig: root.attrs.backendConfig }),
    },
    called: [fused],
    metadata: { ...root.metadata },
    name: fresh("fusion"),
  });
  root.replaceAllUsesWith(fusion);
  const removed = new Set<Instruction>();
  for (const m of [...ordered].reverse()) {
    if (dup.has(m)) continue;
    comp.removeInstruction(m);
    removed.add(m);
  }
  const inlined: Computation[] = [];
  for (const m of ordered) {
    const ops = operandsOf.get(m)!.map((o) => inner.get(o)!);
    if (m.opcode === "fusion") {
      inner.set(m, inlineBody(fused, m.called[0]!, ops, fresh));
      if (!dup.has(m)) inlined.push(m.called[0]!);
      continue;
    }
    inner.set(
      m,
      fused.addInstruction({
        opcode: m.opcode,
        shape: m.shape,
        operands: ops,
        attrs: cloneAttributes(m.attrs),
        called: m.called,
        metadata: { ...m.metadata },
        // A moved member keeps its name (released by removeInstruction above), so logs and
        // dumps still say %exponential.1; a copy gets a fresh one.
        name: dup.has(m) ? fresh(m.opcode) : m.name,
      }),
    );
  }
  fused.root = inner.get(root)!;
  const order: Instruction[] = [];
  for (const i of before) {
    if (i === root) order.push(fusion);
    else if (!removed.has(i)) order.push(i);
  }
  comp.setOrder(order);
  for (const c of inlined) removeIfUncalled(module, c);
  removeDeadCopies(comp, ordered.filter((m) => dup.has(m)));
  return fusion;
}

/** Copies a fused computation's body into `into`, its parameters bound to `args`. */
function inlineBody(
  into: Computation,
  body: Computation,
  args: readonly Instruction[],
  fresh: (base: string) => string,
) {
  const map = new Map<Instruction, Instruction>();
  for (const i of body.instructions) {
    if (i.opcode === "parameter") {
      map.set(i, args[i.attrs.parameterNumber ?? 0]!);
      continue;
    }
    map.set(
      i,
      into.addInstruction({
        opcode: i.opcode,
        shape: i.shape,
        operands: i.operands.map((o) => map.get(o)!),
        attrs: cloneAttributes(i.attrs),
        called: i.called,
        metadata: { ...i.metadata },
        name: fresh(i.opcode),
      }),
    );
  }
  return map.get(body.root)!;
}

/** `base.N` not yet used in the module (addInstruction claims it). */
function freshName(module: Module, base: string, reserved: ReadonlySet<string>): string {
  for (let k = 1; ; k++) {
    const n = `${base}.${k}`;
    if (!module.hasName(n) && !reserved.has(n)) return n;
  }
}

function removeIfUncalled(module: Module, c: Computation): void {
  for (const other of module.computations) {
    for (const i of other.instructions) if (i.called.includes(c)) return;
  }
  module.removeComputation(c);
}

/** Originals of duplicated members that every user now reads from a fusion's copy. */
function removeDeadCopies(comp: Computation, originals: readonly Instruction[]): void {
  for (const o of [...originals].reverse()) {
    if (o.users.length === 0 && !o.isRoot) comp.removeInstruction(o);
  }
}
