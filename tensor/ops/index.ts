// The `ops` namespace: every frontend op in functional form (`ops.add(x, y)`). An op module
// adds itself here with one `export *` line; creation and random ops are listed too, so the
// namespace is the complete catalogue.

export * from "./core.ts";
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
