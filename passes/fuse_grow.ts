// The fusion driver shared by the three fusion passes. Per computation it visits instructions
// from the ROOT upward (reverse topological order, as XLA's InstructionFusion does); each
// not-yet-fused instruction seeds a cluster that grows toward its producers: a producer whose
// users are all in the cluster moves in, one with other users is copied in only when that is
// cheap (fuse_rules.ts), and every step must leave a kernel the fusion contract allows. A
// cluster of the pass's kind with at least two real ops becomes a fusion (fuse_build.ts).
// Every decision is recorded with its reason for explainFusion and KILN_LOGS=fusion.
//
// Clusters have one output (their seed) and every member reaches it through members, so
// fusing can never create a cycle: any path from the fusion's output back to one of its
// operands would also be a cycle of the original graph.

import type { FusionKind } from "../ir/attributes.ts";
import type { Computation, Instruction, Module } from "../ir/module.ts";
import { isDynamic, shapeToString } from "../ir/shape.ts";
import { log } from "../util/log.ts";
import { materializeFusion } from "./fuse_build.ts";
import {
  clusterKind,
  type ClusterView,
  type Decision,
  duplicationDecision,
  fusionRole,
  isHero,
  isLoopFusion,
  isSmallConstant,
  MAX_FUSION_SIZE,
  name,
  no,
  SMALL_CONSTANT_ELEMENTS,
  validateCluster,
  validateLoopAddition,
  YES,
} from "./fuse_rules.ts";

/** What one fusion pass builds and may put inside. */
export interface FusionPolicy {
  readonly passName: string;
  /** The kind of fusion this pass creates; clusters of other kinds are left alone. */
  readonly target: Exclude<FusionKind, "kCustom">;
}

/** One decision about fusing `producer` into the fusion that `consumer` belongs to. */
export interface FusionRecord {
  readonly pass: string;
  readonly computation: string;
  readonly producer: string;
  readonly consumer: string;
  readonly decision: Decision;
  /** The producer was copied in (it has users outside the fusion). */
  readonly duplicated: boolean;
  /** The fusion instruction made, when the decision is yes. */
  readonly fusion?: string;
  readonly kind?: FusionKind;
}

/** A record as one line: `fused %a into %b (kLoop %fusion.1)` / `not fusing %a into %b: why`. */
export function describeRecord(r: FusionRecord): string {
  if (!r.decision.ok) return `not fusing %${r.producer} into %${r.consumer}: ${r.decision.why}`;
  const how = r.duplicated ? "duplicated" : "fused";
  return `${how} %${r.producer} into %${r.consumer} (${r.kind ?? "?"} %${r.fusion ?? "?"})`;
}

/** Computations fusion works in: the entry and, through call/while/conditional, their bodies. */
export function fusibleComputations(module: Module): Computation[] {
  const out: Computation[] = [];
  const visit = (c: Computation) => {
    if (out.includes(c)) return;
    out.push(c);
    for (const i of c.instructions) {
      if (i.opcode === "while" || i.opcode === "conditional" || i.opcode === "call") {
        for (const callee of i.called) visit(callee);
      }
    }
  };
  const entry = module.entryOrUndefined;
  if (entry) visit(entry);
  // A computation that is also a reducer or comparator must stay scalar code.
  const scalarCode = new Set<Computation>();
  for (const i of module.allInstructions()) {
    if (i.opcode !== "while" && i.opcode !== "conditional" && i.opcode !== "call" &&
      i.opcode !== "fusion") {
      for (const c of i.called) scalarCode.add(c);
    }
  }
  return out.filter((c) => !scalarCode.has(c));
}

/** Runs one fusion policy over every fusible computation; returns whether anything changed. */
export function runFusion(module: Module, policy: FusionPolicy, records: FusionRecord[]): boolean {
  let changed = false;
  for (const c of fusibleComputations(module)) {
    if (new ComputationFuser(c, policy, records).run()) changed = true;
  }
  return changed;
}

interface Grown {
  root: Instruction;
  members: Set<Instruction>;
  dup: Set<Instruction>;
  /** Reuse factors of the members while the cluster has no hero (see validateLoopAddition). */
  reuse: Map<Instruction, number>;
  heroes: number;
  records: Map<Instruction, Omit<FusionRecord, "pass" | "computation">>;
}

class ComputationFuser {
  private readonly positions = new Map<Instruction, number>();
  /**
   * Steps up through loop ops to the nearest reduce (resp. dot/convolution): only seeds within
   * a fusion's size of a hero can grow into a kInput/kOutput fusion.
   */
  private readonly toReduce = new Map<Instruction, number>();
  private readonly toContraction = new Map<Instruction, number>();
  private readonly fused = new Set<Instruction>();
  private readonly reported = new Set<string>();

  constructor(
    private readonly comp: Computation,
    private readonly policy: FusionPolicy,
    private readonly records: FusionRecord[],
  ) {
    const distance = (i: Instruction, hero: boolean, d: Map<Instruction, number>) => {
      if (hero) return d.set(i, 0);
      if (fusionRole(i.opcode).role !== "loop") return d;
      let best = Infinity;
      for (const o of i.operands) best = Math.min(best, (d.get(o) ?? Infinity) + 1);
      return best <= MAX_FUSION_SIZE ? d.set(i, best) : d;
    };
    comp.instructions.forEach((i, k) => {
      this.positions.set(i, k);
      const role = fusionRole(i.opcode).role;
      distance(i, role === "reduce", this.toReduce);
      distance(i, role === "contraction", this.toContraction);
    });
  }

  private position = (i: Instruction): number => {
    const p = this.positions.get(i);
    if (p === undefined) throw new Error(`fusion: %${i.name} has no position`);
    return p;
  };

  run(): boolean {
    let changed = false;
    const seeds = [...this.comp.instructions].reverse();
    for (const seed of seeds) {
      // Dead seeds include duplicated originals that fusions removed along the way.
      const dead = seed.users.length === 0 && !seed.isRoot;
      if (dead || this.fused.has(seed) || !this.isSeed(seed)) continue;
      const optimistic = this.policy.target === "kInput";
      let g = this.grow(seed, optimistic);
      if (optimistic && !validateCluster(this.view(seed, g)).ok) g = this.grow(seed, false);
      const kind = clusterKind(g.members);
      const ops = [...g.members].filter((m) => m.opcode !== "constant").length;
      const build = kind === this.policy.target && ops >= 2;
      let fusion: Instruction | undefined;
      if (build) {
        for (const m of g.members) if (!g.dup.has(m)) this.fused.add(m);
        fusion = materializeFusion(this.comp, g, kind, this.position);
        this.positions.set(fusion, this.position(seed));
        changed = true;
      }
      for (const r of g.records.values()) {
        // Yes-decisions of clusters that were not built are not decisions at all; a refusal
        // seen from several seeds is reported once.
        if (r.decision.ok && !build) continue;
        const key = `${r.producer} ${r.consumer} ${r.decision.ok ? "" : r.decision.why}`;
        if (this.reported.has(key)) continue;
        this.reported.add(key);
        const rec: FusionRecord = {
          pass: this.policy.passName,
          computation: this.comp.name,
          ...r,
          ...(r.decision.ok && fusion ? { fusion: fusion.name, kind } : {}),
        };
        this.records.push(rec);
        log("fusion", () => `${this.policy.passName}: ${describeRecord(rec)}`);
      }
    }
    return changed;
  }

  private isSeed(i: Instruction): boolean {
    if ([i, ...i.operands].some((x) => isDynamic(x.shape))) return false;
    const role = fusionRole(i.opcode).role;
    switch (this.policy.target) {
      case "kInput":
        return (role === "loop" || role === "reduce") && this.toReduce.has(i);
      case "kOutput":
        return (role === "loop" || role === "contraction") && this.toContraction.has(i);
      case "kLoop":
        return role === "loop" || isLoopFusion(i);
      default: {
        const never: never = this.policy.target;
        throw new Error(`unknown fusion target ${String(never)}`);
      }
    }
  }

  private view(root: Instruction, g: Pick<Grown, "members" | "dup">): ClusterView {
    return { root, members: g.members, dup: g.dup, position: this.position };
  }

  /** Users that will still read the original: non-members, duplicated members, the ROOT slot. */
  private outsideUses(p: Instruction, g: Pick<Grown, "members" | "dup">): number {
    let n = p.isRoot ? 1 : 0;
    for (const u of p.users) if (!g.members.has(u) || g.dup.has(u)) n++;
    return n;
  }

  private grow(seed: Instruction, optimistic: boolean): Grown {
    const g: Grown = {
      root: seed,
      members: new Set([seed]),
      dup: new Set(),
      reuse: new Map([[seed, 1]]),
      heroes: isHero(seed) ? 1 : 0,
      records: new Map(),
    };
    const refused = { move: new Set<Instruction>(), dup: new Set<Instruction>() };
    // Operands of members that are not members, each with the first member that reads it.
    let frontier: [Instruction, Instruction][] = [];
    const seen = new Set<Instruction>();
    const extend = (m: Instruction) => {
      for (const p of m.operands) {
        if (g.members.has(p) || seen.has(p) || p.opcode === "parameter") continue;
        seen.add(p);
        frontier.push([p, m]);
      }
    };
    extend(seed);
    /** Decides on `p` (read by member `m`); adds it on a yes. */
    const attempt = (p: Instruction, m: Instruction, dup: boolean, outside: number) => {
      const r = this.decide(p, g, dup, optimistic, outside);
      g.records.set(p, { producer: p.name, consumer: m.name, decision: r.decision,
        duplicated: dup });
      if (!r.decision.ok) return false;
      g.members.add(p);
      if (dup) g.dup.add(p);
      if (isHero(p)) g.heroes++;
      if (g.heroes === 0) g.reuse.set(p, r.reuse);
      extend(p);
      return true;
    };
    for (;;) {
      frontier = frontier.filter(([p]) => !g.members.has(p));
      let added = false;
      // Moves first: each may bring the remaining users of a shared producer inside, so that
      // producer moves too instead of being copied.
      for (const [p, m] of frontier) {
        if (refused.move.has(p) || this.outsideUses(p, g) > 0) continue;
        if ((added = attempt(p, m, false, 0))) break;
        refused.move.add(p);
      }
      if (added) continue;
      for (const [p, m] of frontier) {
        if (refused.dup.has(p) || refused.move.has(p)) continue;
        const outside = this.outsideUses(p, g);
        if (outside === 0) continue;
        if ((added = attempt(p, m, true, outside))) break;
        refused.dup.add(p);
      }
      if (!added) return g;
    }
  }

  /** May `p` join the cluster (moved, or copied when `dup`)? With p's reuse factor. */
  private decide(
    p: Instruction,
    g: Grown,
    dup: boolean,
    optimistic: boolean,
    outside: number,
  ): { decision: Decision; reuse: number } {
    const pre = this.admissible(p);
    if (!pre.ok) return { decision: pre, reuse: 1 };
    if (dup) {
      const d = duplicationDecision(p, outside);
      if (!d.ok) return { decision: d, reuse: 1 };
    }
    g.members.add(p);
    if (dup) g.dup.add(p);
    const opts = optimistic ? { deferReuseFor: this.toReduce } : {};
    try {
      // Most additions are checked locally, so growing a loop cluster stays linear.
      return g.heroes === 0 && !isHero(p)
        ? validateLoopAddition(this.view(g.root, g), p, g.reuse, opts)
        : { decision: validateCluster(this.view(g.root, g), opts), reuse: 1 };
    } finally {
      g.members.delete(p);
      g.dup.delete(p);
    }
  }

  /** Whether `p` may be in a fusion of this pass at all (independent of the cluster). */
  private admissible(p: Instruction): Decision {
    if (this.fused.has(p)) return no(`${name(p)} is already fused`);
    const r = fusionRole(p.opcode);
    if (p.opcode === "fusion") {
      if (!isLoopFusion(p)) return no(`${name(p)} is a ${p.attrs.fusionKind ?? "?"} fusion`);
      if (this.policy.target !== "kLoop") {
        return no(`${name(p)} is a loop fusion; only fuse-elementwise merges fusions`);
      }
    } else if (r.role === "never") {
      return no(`${name(p)} is ${r.why}`);
    }
    if (r.role === "leaf" && !isSmallConstant(p)) {
      return no(
        `${name(p)} is a constant of more than ${SMALL_CONSTANT_ELEMENTS} elements; it stays ` +
          `a fusion parameter`,
      );
    }
    const dynamic = [p, ...p.operands].find((i) => isDynamic(i.shape));
    if (dynamic !== undefined) {
      // Kernels of the fusion contract iterate static shapes; the dynamic padder runs first.
      return no(
        `${name(dynamic)} has the bounded-dynamic shape ${shapeToString(dynamic.shape, false)}` +
          `; run the dynamic padder before fusion`,
      );
    }
    if (r.role === "reduce" && this.policy.target !== "kInput") {
      return no(`${name(p)} is a reduce; only fuse-reductions fuses reductions`);
    }
    if (r.role === "contraction" && this.policy.target !== "kOutput") {
      return no(`${name(p)} is a ${p.opcode}; only fuse-output fuses dots and convolutions`);
    }
    return YES;
  }
}
