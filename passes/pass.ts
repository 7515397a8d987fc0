// The pass interface: a pass has a kebab-case name and rewrites a module in place, returning
// true when it changed something. Pipelines, fixpoint groups, verification after each pass and
// per-pass dumps are in passes/pipeline.ts.

import type { Module } from "../ir/module.ts";

export interface Pass {
  /** kebab-case, e.g. `algebraic-simplifier`, `fuse-elementwise`. */
  readonly name: string;
  /** Rewrites `module` in place; true when anything changed. */
  run(module: Module): boolean;
}
