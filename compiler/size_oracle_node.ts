// The coverage oracle (Node): the SizeBranchOracle of compiler/size_oracle.ts built on the
// source analysis and V8's block coverage. Every branch whose condition depends on a size
// (compiler/analyze_sizes.ts) is a candidate for keeping the dim static; a candidate keeps it
// static only if the traces compile() ran for this call EVALUATED its condition (coverage.ts,
// over the one shared inspector session of inspector.ts), at any of the sizes traced. Why a
// candidate the traces never reached is safe to ignore, even though an untraced size of the
// bucket might behave differently: run the code at a traced size t and at an untraced size s
// side by side. Both start alike and take the same path until the first decision whose outcome
// differs between t and s, and only a decision on a size can differ. Up to that decision the
// run at t executed everything the run at s did, so that decision was evaluated at t; being a
// size decision in the code the analysis reads, it is a candidate that was executed, and the
// dim stays static. If no decision differs, s takes t's path and never reaches the candidate
// either. So "condition evaluated" (not "branch taken") is the test: a condition whose
// enclosing code runs at every size is evaluated at every size, whichever way it goes, and
// code reached only at some sizes sits behind a size decision that was itself evaluated.
// (`if (cond) throw` guards are not candidates: the sizes they reject are a prefix or suffix
// of the bucket, which the traces at its ends hit, and a `catch` reached only there is then
// traced.) The argument assumes every size decision on the way is in code the analysis reads,
// the same assumption the source check already makes; a decision in code it does not read (an
// imported helper, Kiln's own layers) is caught only by comparing the traces. Where coverage
// cannot answer (someone else recording, no source map, code analysed from `fn.toString()`),
// every candidate counts as executed: the answer before coverage.

import type { Module as NNModule } from "../tensor/nn/module.ts";
import { log } from "../util/log.ts";
import { analyzeFunction, analyzeModuleForward, type SourceAnalysis } from "./analyze.ts";
import { locateOriginal } from "./analyze_locate.ts";
import { isKilnFile } from "./analyze_walk.ts";
import { TraceCoverage, type SourcePoint, type Verdict } from "./coverage.ts";
import type { OracleCode, SizeBranchOracle, SizeBranchQuestion } from "./size_oracle.ts";
import { formatLocation } from "./source.ts";

/** A branch on a size in the compiled code: the reason it gives and where it is. */
export interface SizeBranchSite {
  /** `kept static: the code branches on a size at file:line:col (kind `expr`)`. */
  readonly reason: string;
  /** Its place in a file; absent when the source was read from `fn.toString()`. */
  readonly point?: SourcePoint;
}

/**
 * Every branch on a size (compiler/analyze_sizes.ts) in `fn` (absent when the root is a
 * module), or in the forward (and the methods it reaches) of any module in the trees of
 * `modules` — the compiled model itself first — or, as a string, why the source could not be
 * read. Kiln's own layers (tensor/nn) are not read: they branch on sizes only to throw or for
 * sizes 0 and 1, which are always specialized. A branch on a `number` parameter counts except
 * in the compiled function's own parameters, which are guarded by value.
 */
export function sizeBranchSites(
  fn: Function | undefined,
  modules: readonly NNModule[],
): SizeBranchSite[] | string {
  const out: SizeBranchSite[] = [];
  const add = (a: SourceAnalysis, top: boolean): void => {
    for (const b of a.sizeBranches) {
      if (top && b.parameter !== undefined && b.via === undefined) continue;
      const file = b.file ?? a.file;
      const where =
        file !== undefined
          ? formatLocation({ file, line: b.line, column: b.column })
          : `line ${b.line} of the function's text`;
      const via = b.via !== undefined ? ` in ${b.via}` : "";
      out.push({
        reason: `kept static: the code branches on a size at ${where}${via} (${b.kind} \`${
          b.expr
        }\`)`,
        ...(file !== undefined && {
          point: { file, line: b.line, column: b.column, text: b.expr },
        }),
      });
    }
  };
  try {
    if (fn) add(analyzeFunction(fn), true);
    const done = new Set<SourceAnalysis>();
    for (const [i, root] of modules.entries()) {
      for (const m of root.modules()) {
        if (typeof (m as { forward?: unknown }).forward !== "function") continue;
        const a = analyzeModuleForward(m);
        if (done.has(a) || isKilnModule(m, a)) continue;
        done.add(a);
        add(a, fn === undefined && i === 0 && m === root);
      }
    }
  } catch (e) {
    return `kept static: the source could not be analysed for branches on a size (${
      e instanceof Error ? e.message : String(e)
    })`;
  }
  return out;
}

/**
 * Kiln's own layers (nn.Linear, nn.MultiheadAttention...) are shape-generic by construction:
 * their argument checks are not the user's branches. Their file is the analysis's, or (when
 * the transformed text could not be matched to the file and `toString()` was analysed) where
 * V8 says the class's forward is.
 */
function isKilnModule(m: NNModule, a: SourceAnalysis): boolean {
  if (a.file !== undefined) return isKilnFile(a.file);
  const forward = (m as { forward?: unknown }).forward;
  const file = typeof forward === "function" ? locateOriginal(forward)?.file : undefined;
  return file !== undefined && isKilnFile(file);
}

/**
 * The question of one bucketed call: made before the call's own trace (it starts V8's
 * coverage when there is a branch to ask about), then `decide` runs the other traces and
 * builds the bucket's program, and says whether the program may be used. `close` ends the
 * recording whatever happened; coverage is never left on after a trace.
 */
class CoverageQuestion implements SizeBranchQuestion {
  private readonly coverage: TraceCoverage | undefined;
  /** Why coverage is not used, when there are branches and it is not. */
  private readonly unavailable: string | undefined;
  private readonly knownExecuted: SizeBranchSite | undefined;

  constructor(
    private readonly sites: readonly SizeBranchSite[] | string,
    private readonly name: string,
  ) {
    if (typeof sites === "string" || sites.length === 0) return;
    // A branch read from `fn.toString()` has no place in a file to ask about: it counts.
    if (sites.some((s) => s.point === undefined)) {
      this.unavailable = "a size branch was read from the function's text, not its file";
      return;
    }
    // A branch an earlier trace executed keeps the dim static from then on (safe, if coarse
    // when it ran under a flag that has changed since), so coverage is not recorded again.
    const known = sites.find((s) => executedBefore.has(s));
    if (known) {
      this.unavailable = `${known.reason.replace(/^kept static: the code branches/, "a branch")}` +
        ` was executed (or not ruled out) by an earlier trace`;
      this.knownExecuted = known;
      return;
    }
    const c = TraceCoverage.start(sites.map((s) => s.point!));
    if (c.kind === "recording") this.coverage = c.coverage;
    else if (c.kind === "unavailable") this.unavailable = c.why;
    else {
      const site = sites[c.index]!;
      executedBefore.add(site);
      this.knownExecuted = site;
      this.unavailable =
        `${site.reason.replace(/^kept static: the code branches/, "a branch")} counts as ` +
        `executed: ${c.why}`;
    }
  }

  /**
   * `build`'s result (the other traces and the bucket's program), or why the dim is kept
   * static: the first size branch the traces executed (every one, without coverage).
   */
  decide<T extends { ok: boolean }>(build: () => T): T | { ok: false; why: string } {
    const sites = this.sites;
    if (typeof sites === "string") return { ok: false, why: sites };
    if (sites.length === 0) return build();
    const coverage = this.coverage;
    if (!coverage) {
      const why = this.unavailable ?? "no coverage";
      log("recompiles", () => `${this.name}: every size branch counts as executed (${why})`);
      return { ok: false, why: (this.knownExecuted ?? sites[0]!).reason };
    }
    try {
      // Asked once after the call's own trace, so an executed branch costs no more traces.
      const first = this.executed(coverage, sites);
      if (first) return { ok: false, why: first.reason };
      const built = build();
      const ran = this.executed(coverage, sites);
      if (ran) return { ok: false, why: ran.reason };
      if (built.ok) {
        for (const s of sites) {
          log("recompiles", () =>
            `${this.name}: ${s.reason.replace(/^kept static: the code branches/, "a branch")} ` +
              `was not executed in this trace; the bucket shares one program`);
        }
      }
      return built;
    } finally {
      coverage.stop();
    }
  }

  /** Ends the recording (idempotent). */
  close(): void {
    this.coverage?.stop();
  }

  private executed(
    coverage: TraceCoverage,
    sites: readonly SizeBranchSite[],
  ): SizeBranchSite | undefined {
    let verdicts: Verdict[];
    try {
      verdicts = coverage.check(sites.map((s) => s.point!));
    } catch (e) {
      log("recompiles", () => `${this.name}: coverage could not be read (${String(e)})`);
      return sites[0];
    }
    if (coverage.spoiledBy !== undefined) {
      log("recompiles", () => `${this.name}: coverage cannot rule out a size branch: ${
        coverage.spoiledBy}`);
    }
    const found = sites.find((_, i) => verdicts[i] !== "not executed");
    if (found) executedBefore.add(found);
    return found;
  }
}

/** Size branches some trace executed (or coverage could not rule out). */
const executedBefore = new WeakSet<SizeBranchSite>();

/** Each compiled function's size branches, read from its source once (its first bucket). */
const sitesOf = new WeakMap<OracleCode, SizeBranchSite[] | string>();

export const coverageOracle: SizeBranchOracle = {
  kind: "coverage",
  ask(code: OracleCode): SizeBranchQuestion {
    let sites = sitesOf.get(code);
    if (sites === undefined) {
      sites = sizeBranchSites(code.fn, code.modules());
      sitesOf.set(code, sites);
    }
    return new CoverageQuestion(sites, code.name);
  },
};
