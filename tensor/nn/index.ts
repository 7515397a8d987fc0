// The `nn` namespace: Module and Parameter, the layers, and the containers, with PyTorch's
// names and constructor arguments (tensor/nn/*.ts; docs/guide.md shows how to write, call and
// load a model). Exported from tensor/index.ts as `nn` only — the root index.ts already has
// the IR's `Module` (an HLO module), so the nn one is always `nn.Module`.

export {
  Module,
  Parameter,
  StateDictError,
  type Forward,
  type LoadOptions,
  type LoadResult,
  type StateDict,
} from "./module.ts";
export { Identity, Linear } from "./linear.ts";
export { Conv1d, Conv2d, ConvTranspose2d } from "./conv.ts";
export { BatchNorm2d, GroupNorm, LayerNorm, RMSNorm } from "./normalization.ts";
export { Embedding } from "./sparse.ts";
export { Dropout } from "./dropout.ts";
export { checkpoint, uncheckpoint } from "../checkpoint.ts";
export { GELU, ReLU, Sigmoid, SiLU, Softmax, Tanh } from "./activation.ts";
export { Flatten } from "./flatten.ts";
export { AdaptiveAvgPool2d, AvgPool2d, MaxPool2d } from "./pooling.ts";
export { MultiheadAttention, NonDynamicallyQuantizableLinear } from "./attention.ts";
export { ModuleDict, ModuleList, Sequential, type TensorModule } from "./container.ts";
export * as functional from "./functional.ts";
