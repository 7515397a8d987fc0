// `nn.functional`: PyTorch's torch.nn.functional under one name (`const F = nn.functional`),
// re-exporting the frontend ops it covers (camelCase, as in `ops`). Nothing is defined here;
// each op lives in its tensor/ops module and is also in `ops`.

export { linear } from "../ops/linalg.ts";
export { embedding, oneHot } from "../ops/indexing.ts";
export { pad } from "../ops/shape.ts";
export { relu } from "../ops/core.ts";
export {
  elu,
  gelu,
  leakyRelu,
  mish,
  relu6,
  sigmoid,
  silu,
  softplus,
  tanh,
} from "../ops/elementwise.ts";
export { logSoftmax, softmax } from "../ops/reduction.ts";
export {
  adaptiveAvgPool2d,
  avgPool2d,
  batchNorm,
  conv1d,
  conv2d,
  convTranspose2d,
  crossEntropy,
  dropout,
  groupNorm,
  interpolate,
  layerNorm,
  maxPool2d,
  maxPool2dWithIndices,
  mseLoss,
  nllLoss,
  rmsNorm,
  scaledDotProductAttention,
} from "../ops/nn_functional.ts";
