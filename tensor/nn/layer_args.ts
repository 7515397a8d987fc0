// Parameter kinds for layer constructors, on top of the op argument convention (tensor/args.ts):
// layers take PyTorch's constructor arguments in PyTorch's order, positionally or as one
// trailing camelCase options object, and report bad values as ArgumentErrors naming the layer
// and the argument (`Conv2d: argument 'kernelSize' must be ...`).

import { p, problem } from "../args.ts";

function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}

/** An int or a list of `n` ints (PyTorch's `_pair`): normalized to a list of `n`. */
export function intTuple<N extends string>(name: N, n: number, min: number) {
  const what = `an integer >= ${min} or a list of ${n} such integers`;
  return p.custom<N, number | readonly number[], number[]>(name, (v) => {
    if (isInt(v)) {
      if (v < min) problem(`must be ${what}`);
      return new Array<number>(n).fill(v);
    }
    if (Array.isArray(v) && v.length === n && v.every((x) => isInt(x) && x >= min)) {
      return [...(v as number[])];
    }
    return problem(`must be ${what}`);
  });
}

/** As intTuple, but keeps the value as given (pooling layers print what the user wrote). */
export function intOrTuple<N extends string>(name: N, n: number, min: number) {
  const what = `an integer >= ${min} or a list of ${n} such integers`;
  return p.custom<N, number | readonly number[], number | number[]>(name, (v) => {
    if (isInt(v) && v >= min) return v;
    if (Array.isArray(v) && v.length === n && v.every((x) => isInt(x) && x >= min)) {
      return [...(v as number[])];
    }
    return problem(`must be ${what}`);
  });
}

/** A normalized shape: an int or a list of ints >= 0, as a list. */
export function shapeParam<N extends string>(name: N) {
  return p.custom<N, number | readonly number[], number[]>(name, (v) => {
    if (isInt(v) && v >= 0) return [v];
    if (Array.isArray(v) && v.every((x) => isInt(x) && x >= 0)) return [...(v as number[])];
    return problem("must be an integer >= 0 or a list of such integers");
  });
}

/** A probability in [0, 1]. */
export function probability<N extends string>(name: N) {
  return p.custom<N, number, number>(name, (v) =>
    typeof v === "number" && v >= 0 && v <= 1
      ? v
      : problem("must be a probability between 0 and 1"),
  );
}

/** A finite number >= 0 (eps). */
export function nonNegative<N extends string>(name: N) {
  return p.custom<N, number, number>(name, (v) =>
    typeof v === "number" && Number.isFinite(v) && v >= 0
      ? v
      : problem("must be a finite number >= 0"),
  );
}
