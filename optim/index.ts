// kiln/optim: optimizers (SGD, Adam, AdamW) over parameters whose `grad` is set, with PyTorch's
// parameter groups and state-dict layout, LR schedulers and grad clipping (docs/training.md).

export {
  Optimizer,
  type GroupOptions,
  type Hyper,
  type OptimizerStateDict,
  type ParamGroup,
  type ParamGroupInput,
  type ParamState,
} from "./optimizer.ts";
export { SGD, type SGDOptions } from "./sgd.ts";
export { Adam, AdamW, type AdamOptions } from "./adam.ts";
export {
  CosineAnnealingLR,
  LambdaLR,
  LinearLR,
  LRScheduler,
  MultiStepLR,
  SequentialLR,
  StepLR,
  type SchedulerStateDict,
  type SequentialStateDict,
} from "./lr_scheduler.ts";
export { clipGradNorm, clipGradValue } from "./clip.ts";
