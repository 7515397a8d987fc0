// The `ops` namespace: every frontend op in functional form (`ops.add(x, y)`). An op module
// adds itself here with one `export *` line; creation and random ops are listed too, so the
// namespace is the complete catalogue.

export * from "./core.ts";
export * from "./elementwise.ts"; // elementwise: pow, float functions, activations, clamp, logic
export * from "./reduction.ts"; // reduction: reductions, scans, sort/topk, softmax family
export * from "./linalg.ts"; // linalg: bmm, linear, einsum, outer, baddbmm
export * from "./shape.ts"; // shape: flatten, cat, stack, split, slice, pad, flip, roll, ...
export * from "./indexing.ts"; // indexing: gather, scatter, indexSelect, embedding, tril, ...
export * from "./nn_functional.ts"; // nn_functional: conv, pooling, norms, losses, attention
export {
  arange,
  eye,
  full,
  fullLike,
  linspace,
  ones,
  onesLike,
  tensor,
  zeros,
  zerosLike,
} from "../creation.ts";
export { rand, randint, randintLike, randLike, randn, randnLike } from "../random.ts";
