// Guard construction: the guards of a new cache entry, as data (compiler/guards.ts compiles
// them into one function). In order: Kiln's settings that change generated code, the
// arguments' structure (container by container, parents before children), each leaf (a
// tensor's dtype and shape, a primitive's value, an opaque object's identity), the free
// variables read per call, what const free variables hold, what the code read from the module
// tree (values, identities, keys), and the dtype and shape of every parameter and buffer the
// program reads (right after its identity guard, so the check loads it once). A bucketed
// entry's dynamic dims are freed from their shape guards and get a range guard each, and the
// dims of one size group an equality guard.

import { Module as NNModule } from "../tensor/nn/module.ts";
import { getBackend } from "../runtime/index.ts";
import { eagerBackendName } from "../tensor/dispatch.ts";
import { isLazy } from "../tensor/lazy.ts";
import { isGradEnabled } from "../tensor/autograd.ts";
import { Tensor } from "../tensor/tensor.ts";
import type { Capture, Flat } from "./capture.ts";
import type { ProgramBuild } from "./build.ts";
import type { CompileConfig } from "./config.ts";
import { readFreeVariables } from "./freevars.ts";
import { type GuardInputs, GuardSet, type GuardSpec } from "./guards.ts";
import { formatPath, isContainer, type Leaf, sameKeys, type TreeSpec } from "./pytree.ts";
import type { SizeGroup } from "./size_groups.ts";
import type { Target } from "./target.ts";
import type { Binding, InputSlot } from "./trace.ts";

const SETTING_NAMES = [
  "kiln.defaultBackend",
  "kiln.eagerBackend",
  "kiln.lazy",
  "autograd.isGradEnabled()",
] as const;

/**
 * Kiln's global settings a compiled program depends on, in SETTING_NAMES order. Grad mode is
 * one (as Dynamo guards it): a step traced with grad enabled records backward's ops, and under
 * noGrad the same code computes no gradients.
 */
export function settingsNow(): unknown[] {
  return [getBackend().name, eagerBackendName(), isLazy(), isGradEnabled()];
}

/** The guards of the entry for captured call `c` with program `p` (see the file comment). */
export function entryGuards(
  target: Target,
  config: CompileConfig,
  flat: Flat,
  inputs: GuardInputs,
  c: Capture,
  p: ProgramBuild,
  groups: readonly SizeGroup[] | undefined,
): GuardSet {
  const specs = buildGuards({
    spec: flat.spec,
    leaves: flat.leaves,
    pathText: (path) => target.pathText(path),
    settings: inputs.settings,
    free: inputs.free,
    freeNames: target.analysis().perCall,
    // A const tensor the trace made an input (an optimizer's parameter) changes value every
    // step: its shape and dtype are guarded as an input's, not its value's identity.
    fixed: fixedGuards(target).filter(
      (g) => !(g.access.root === "ref" && g.access.key === "impl" &&
        g.access.ref instanceof Tensor && c.tracer.isInput(g.access.ref)),
    ),
    reads: c.tracer.reads,
    slots: c.tracer.slots,
    used: p.bindings,
    freeze: config.freeze,
    backendGiven: config.backend !== undefined,
  });
  return new GuardSet(p.dynamicModule && groups ? withRangeGuards(specs, groups) : specs);
}

interface GuardSources {
  readonly spec: TreeSpec;
  readonly leaves: readonly Leaf[];
  readonly pathText: (path: readonly (string | number)[]) => string;
  readonly settings: readonly unknown[];
  readonly free: readonly unknown[];
  readonly freeNames: readonly string[];
  readonly fixed: readonly GuardSpec[];
  readonly reads: readonly GuardSpec[];
  readonly slots: readonly InputSlot[];
  readonly used: readonly Binding[];
  readonly freeze: boolean;
  readonly backendGiven: boolean;
}

function buildGuards(s: GuardSources): GuardSpec[] {
  const out: GuardSpec[] = [];
  for (const [i, n] of SETTING_NAMES.entries()) {
    if (i === 0 && s.backendGiven) continue;
    out.push({
      guard: { kind: "value", path: n, expected: s.settings[i] },
      access: { root: "setting", index: i },
      test: "plain",
    });
  }
  // Argument structure, container by container, then leaves (parents before children).
  const walk = (spec: TreeSpec, keys: (string | number)[]): void => {
    const path = s.pathText(keys);
    switch (spec.type) {
      case "array":
        if (keys.length === 0) {
          out.push({
            guard: { kind: "value", path: "arguments.length", expected: spec.items.length },
            access: { root: "argCount" },
            test: "plain",
          });
        } else {
          out.push({
            guard: { kind: "value", path, expected: spec.items.length },
            access: { root: "arg", keys },
            test: "array",
          });
        }
        spec.items.forEach((c, i) => walk(c, [...keys, i]));
        return;
      case "object":
        out.push({
          guard: { kind: "value", path, expected: "object" },
          access: { root: "arg", keys },
          test: "object",
        });
        out.push({
          guard: { kind: "value", path: `Object.keys(${path})`, expected: spec.keys.join(",") },
          access: { root: "keys", of: { root: "arg", keys } },
          test: "plain",
        });
        spec.keys.forEach((k, i) => walk(spec.items[i]!, [...keys, k]));
        return;
      case "leaf":
        return;
      default: {
        const never: never = spec;
        throw new Error(`unknown spec ${String(never)}`);
      }
    }
  };
  walk(s.spec, []);
  for (const l of s.leaves) {
    const path = s.pathText(l.path);
    const access = { root: "arg", keys: l.path } as const;
    if (l.kind === "tensor") {
      const t = l.value as Tensor;
      out.push({ guard: { kind: "dtype", path, expected: t.dtype }, access, test: "tensor" });
      out.push({ guard: { kind: "shape", path, expected: [...t.shape] }, access, test: "tensor" });
    } else if (l.kind === "opaque") {
      out.push({ guard: { kind: "identity", path, expected: l.value }, access, test: "plain" });
    } else {
      out.push({ guard: { kind: "value", path, expected: l.value }, access, test: "plain" });
    }
  }
  for (const [i, n] of s.freeNames.entries()) {
    const v = s.free[i];
    const primitive = v === null || (typeof v !== "object" && typeof v !== "function");
    out.push({
      guard: { kind: primitive ? "value" : "identity", path: n, expected: v },
      access: { root: "free", index: i },
      test: "plain",
    });
  }
  out.push(...s.fixed);
  const reads = [...s.reads];
  const usedSlots = new Set<number>();
  for (const b of s.used) if (b.kind === "slot") usedSlots.add(b.slot);
  for (const [i, slot] of s.slots.entries()) {
    if (slot.kind === "host") {
      // An optimizer's tensors and gradients: read where they live, checked by dtype and shape.
      if (slot.access === undefined || !usedSlots.has(i)) continue;
      const access = slot.access;
      reads.push(
        { guard: { kind: "dtype", path: slot.path, expected: slot.dtype }, access, test: "tensor" },
        { guard: { kind: "shape", path: slot.path, expected: [...slot.shape] }, access, test: "tensor" },
      );
      continue;
    }
    if (slot.kind !== "state") continue;
    const access = { root: "ref", ref: slot.owner, key: slot.key } as const;
    if (s.freeze) {
      // The value is folded in: guard the very tensor value (its impl) by identity.
      const t = (slot.owner as Record<string, Tensor>)[slot.key]!;
      out.push({
        guard: { kind: "identity", path: `${slot.path}.impl`, expected: t.impl },
        access: { root: "ref", ref: t, key: "impl" },
        test: "plain",
      });
      continue;
    }
    if (!usedSlots.has(i)) continue;
    const impl = (slot.owner as Record<string, Tensor>)[slot.key]?.impl;
    const base: GuardSpec[] = [
      { guard: { kind: "dtype", path: slot.path, expected: slot.dtype }, access, test: "tensor" },
      {
        guard: { kind: "shape", path: slot.path, expected: [...slot.shape] },
        access,
        test: "tensor",
      },
    ];
    const pair = base.map((g) => (impl ? { ...g, impl } : g));
    // Right after the identity guard on the same property, so the check loads it once.
    const at = reads.findIndex(
      (r) => r.access.root === "ref" && r.access.ref === slot.owner && r.access.key === slot.key,
    );
    if (at >= 0) reads.splice(at + 1, 0, ...pair);
    else reads.push(...pair);
  }
  out.push(...reads);
  return out;
}

/** Guards on free variables whose binding cannot change (const): what they hold. */
function fixedGuards(target: Target): GuardSpec[] {
  const a = target.analysis();
  if (a.fixed.length === 0) return [];
  const { values } = readFreeVariables(target.fn, a.fixed);
  const out: GuardSpec[] = [];
  const deep = (v: unknown, path: string, depth: number): void => {
    if (depth > 8 || !isContainer(v)) return;
    const entries: [string | number, unknown][] = Array.isArray(v)
      ? v.map((x, i) => [i, x])
      : Object.entries(v);
    if (Array.isArray(v)) {
      out.push({
        guard: { kind: "value", path: `${path}.length`, expected: v.length },
        access: { root: "ref", ref: v, key: "length" },
        test: "plain",
      });
    }
    for (const [k, x] of entries) {
      const p = formatPath(path, [k]);
      const at = { root: "ref", ref: v, key: k } as const;
      if (x === null || (typeof x !== "object" && typeof x !== "function")) {
        out.push({ guard: { kind: "value", path: p, expected: x }, access: at, test: "plain" });
      } else if (x instanceof Tensor) {
        out.push({
          guard: { kind: "identity", path: `${p}.impl`, expected: x.impl },
          access: { root: "ref", ref: x, key: "impl" },
          test: "plain",
        });
      } else {
        out.push({ guard: { kind: "identity", path: p, expected: x }, access: at, test: "plain" });
        if (x instanceof NNModule) trainingGuards(x, p);
        else deep(x, p, depth + 1);
      }
    }
  };
  /** A module's (and its submodules') train()/eval() flags. */
  const trainingGuards = (v: NNModule, n: string): void => {
    for (const [p, m] of v.namedModules()) {
      out.push({
        guard: {
          kind: "value",
          path: formatPath(n, p === "" ? ["training"] : [...p.split("."), "training"]),
          expected: m.training,
        },
        access: { root: "ref", ref: m, key: "training" },
        test: "plain",
      });
    }
  };
  for (const [i, n] of a.fixed.entries()) {
    const v = values[i];
    if (v instanceof Tensor) {
      out.push({
        guard: { kind: "identity", path: `${n}.impl`, expected: v.impl },
        access: { root: "ref", ref: v, key: "impl" },
        test: "plain",
      });
    } else if (v instanceof NNModule) {
      trainingGuards(v, n);
    } else {
      deep(v, n, 0);
    }
  }
  return out;
}


/**
 * An entry's guards with its dynamic dims freed: the shape guard of each dynamic tensor skips
 * those dims (`null`) and a range guard right after checks each one's bucket (`65 <=
 * x.shape[1] <= 128`); the dims of one size group must also stay equal to its first.
 */
function withRangeGuards(specs: readonly GuardSpec[], groups: readonly SizeGroup[]): GuardSpec[] {
  const out: GuardSpec[] = [];
  const dims = groups.flatMap((g) => g.dims.map((d) => ({ d, g })));
  for (const s of specs) {
    const a = s.access;
    const mine =
      s.guard.kind === "shape" && a.root === "arg"
        ? dims.filter(({ d }) => sameKeys(d.keys, a.keys))
        : [];
    if (mine.length === 0 || a.root !== "arg") {
      out.push(s);
      continue;
    }
    const expected = (s.guard.expected as readonly (number | null)[]).map((v, i) =>
      mine.some(({ d }) => d.dim === i) ? null : v,
    );
    out.push({ ...s, guard: { ...s.guard, expected } });
    for (const { d, g } of mine) {
      out.push({
        guard: { kind: "range", path: `${d.path}.shape[${d.dim}]`, expected: [g.lo, g.hi] },
        access: { root: "arg", keys: [...a.keys, "shape", d.dim] },
        test: "plain",
      });
    }
  }
  // One program has one size per group: dims that were equal when traced must still be.
  for (const g of groups) {
    const [first, ...rest] = g.dims;
    for (const d of first ? rest : []) {
      out.push({
        guard: {
          kind: "equal",
          path: `${d.path}.shape[${d.dim}]`,
          expected: `${first!.path}.shape[${first!.dim}]`,
        },
        access: { root: "arg", keys: [...d.keys, "shape", d.dim] },
        other: { root: "arg", keys: [...first!.keys, "shape", first!.dim] },
        test: "plain",
      });
    }
  }
  return out;
}
