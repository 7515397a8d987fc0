// The tensor frontend's public surface: Tensor, dtypes and promotion, creation and random
// tensors, the `ops` namespace (every op in functional form; importing it installs the Tensor
// methods), the common ops at top level, and the dispatcher's controls (op cache statistics,
// eager backend, dispatch modes) plus what op authors need to define ops (tensor/README.md).

import "./ops/index.ts";

export {
  ConcreteImpl,
  fromStorage,
  registerRealizer,
  Tensor,
  type NestedArray,
  type Realizer,
  type TensorImpl,
  type ToArrayOptions,
} from "./tensor.ts";
export {
  DEFAULT_FLOAT,
  DEFAULT_INT,
  DTYPES,
  isDType,
  isFloatingDType,
  isIntegralDType,
  promoteTypes,
  resultType,
  type DType,
  type Scalar,
} from "./dtype.ts";
export { ArgumentError, OpError } from "./errors.ts";
export {
  arange,
  eye,
  fromBytes,
  full,
  fullLike,
  linspace,
  ones,
  onesLike,
  tensor,
  zeros,
  zerosLike,
  type NestedData,
  type TensorData,
} from "./creation.ts";
export {
  defaultGenerator,
  Generator,
  manualSeed,
  rand,
  randint,
  randintLike,
  randLike,
  randn,
  randnLike,
} from "./random.ts";
export * as ops from "./ops/index.ts";
export {
  add,
  div,
  eq,
  exp,
  expand,
  lt,
  matmul,
  maximum,
  mean,
  mul,
  neg,
  permute,
  relu,
  reshape,
  squeeze,
  sub,
  sum,
  transpose,
  unsqueeze,
  view,
  where,
} from "./ops/core.ts";
export {
  currentMode,
  defineDecomposition,
  defineOp,
  eagerMode,
  installMethods,
  lowerOp,
  opCacheStats,
  registeredOps,
  resetOpCache,
  setEagerBackend,
  setOpCacheCapacity,
  withMode,
  type DispatchMode,
  type Lowering,
  type MethodOf,
  type OpCacheStats,
  type OpDefinition,
  type OpFunction,
  type Operand,
} from "./dispatch.ts";
