// The passes/ public surface: the Pass interface, the pipeline (fixpoint groups, verification,
// dumps, timing), the default pipeline with its extension point for later stages, and the
// simplification passes (algebraic simplifier, constant folding, CSE, DCE), fusion, buffer
// assignment, and the dynamic padder with its calling convention (runPadded).

export type { Pass } from "./pass.ts";
export {
  defaultPipeline,
  fixpoint,
  PassError,
  Pipeline,
  simplificationGroup,
  type FixpointGroup,
  type PassReport,
  type PipelineItem,
  type PipelineOptions,
} from "./pipeline.ts";
export { AlgebraicSimplifier, type AlgebraicSimplifierOptions } from "./simplify.ts";
export { RULES, type Rewrite, type Rule } from "./simplify_rules.ts";
export { ConstantFolding, type ConstantFoldingOptions } from "./constant_fold.ts";
export { CSE, type CSEOptions } from "./cse.ts";
export { DCE } from "./dce.ts";
export {
  describeRecord,
  explainFusion,
  formatFusionSummary,
  fuseElementwise,
  fuseOutput,
  fuseReductions,
  FusionPass,
  fusionPasses,
  fusionSummary,
  type Decision,
  type FusionRecord,
  type FusionSummary,
  type KernelInfo,
} from "./fuse.ts";
export {
  assignBuffers,
  assignComputationBuffers,
  BufferAssignment,
  HEAP_HEURISTICS,
  type BufferOptions,
  type HeapHeuristic,
  type LogicalBuffer,
} from "./buffers.ts";

export {
  DynamicPadder,
  DynamicPadderError,
  hasDynamicDims,
  paddedSignature,
  runPadded,
  type PaddedSignature,
  type RunPaddedOptions,
  type SizeParameter,
} from "./dynamic_padder.ts";

import { fusionPasses as allFusionPasses } from "./fuse.ts";
import {
  defaultPipeline as simplifyPipeline,
  type Pipeline,
  type PipelineOptions,
} from "./pipeline.ts";

/** The full optimization pipeline for compiled programs: simplify/CSE/DCE, then fusion. */
export function optimizationPipeline(options: PipelineOptions = {}): Pipeline {
  return simplifyPipeline(options, allFusionPasses());
}

export {
  AutodiffError,
  valueAndGradModule,
  vjpModule,
  type VjpOptions,
} from "./autodiff.ts";
export { VJP_RULES, type VjpContext, type VjpRule } from "./autodiff_rules.ts";
