// Functional transforms (torch.func / JAX): `grad(f)`, `valueAndGrad(f)`, `vjp(f, ...primals)`
// and `jvp(f, primals, tangents)` over functions of tensors. They are built on the autograd
// engine (tensor/autograd.ts), whose backward is the IR derivative rules of every recorded op,
// dispatched through the current mode — so a transform inside compile() is part of the traced
// program (the joint forward + backward graph), and under lazy() part of the pending graph.
// Transforms compose: inside another transform (depth > 0) the inputs are not detached and
// every backward is recorded (createGraph), so grad(grad(f)) is the second derivative.
// Forward mode is the double-vjp identity: with g(u) = vjp(f, x)(u) = J^T u (linear in u),
// J t = vjp(g, u)(t), so jvp needs no rules of its own.

import { grad as autogradGrad, withGradMode } from "./autograd.ts";
import { zerosLike } from "./creation.ts";
import { OpError } from "./errors.ts";
import { isFloatingDType } from "./dtype.ts";
import { Tensor } from "./tensor.ts";

let depth = 0;

type TensorFn = (...args: never[]) => Tensor | readonly Tensor[];

export interface GradOptions {
  /** Which positional arguments to differentiate with respect to (default 0). */
  argnums?: number | readonly number[];
  /** `f` returns [value, aux]: aux is returned beside the gradient, not differentiated. */
  hasAux?: boolean;
}

function argIndices(op: string, argnums: number | readonly number[] | undefined, n: number): number[] {
  const list = argnums === undefined ? [0] : typeof argnums === "number" ? [argnums] : [...argnums];
  for (const i of list) {
    if (!Number.isInteger(i) || i < 0 || i >= n) {
      throw new OpError(op, `argnums ${i} is out of range for ${n} argument(s)`);
    }
  }
  return list;
}

/** The primal as a tensor gradients flow to: a fresh leaf, or itself inside a transform. */
function prepare(op: string, x: unknown, what: string): Tensor {
  if (!(x instanceof Tensor)) throw new OpError(op, `${what} is not a Tensor`);
  if (!isFloatingDType(x.dtype)) {
    throw new OpError(op, `${what} must be a floating-point tensor, got ${x.dtype}`);
  }
  if (depth > 0 && x.requiresGrad) return x;
  return x.detach().requiresGrad_();
}

/** Runs `body` one transform deeper, with grad recording on. */
function nested<T>(body: () => T): T {
  depth++;
  try {
    return withGradMode(true, body);
  } finally {
    depth--;
  }
}

function outputsOf(op: string, r: Tensor | readonly Tensor[]): Tensor[] {
  const list = r instanceof Tensor ? [r] : [...r];
  for (const [k, t] of list.entries()) {
    if (!(t instanceof Tensor)) throw new OpError(op, `output ${k} of the function is not a Tensor`);
  }
  return list;
}

/** The gradient of each input, zeros where the output does not depend on it (JAX's rule). */
function gradsOf(
  outputs: readonly Tensor[],
  inputs: readonly Tensor[],
  cotangents: readonly Tensor[] | undefined,
  retain: boolean,
): Tensor[] {
  const live = outputs.filter((o) => o.requiresGrad);
  if (live.length === 0) return inputs.map((x) => zerosLike(x));
  const cts = cotangents === undefined ? undefined : outputs.flatMap((o, k) => (o.requiresGrad ? [cotangents[k]!] : []));
  const gs = autogradGrad(live, inputs, cts, {
    createGraph: depth > 1,
    retainGraph: retain || depth > 1,
    allowUnused: true,
  });
  return gs.map((g, k) => g ?? zerosLike(inputs[k]!));
}

/**
 * `valueAndGrad(f, { argnums, hasAux })(...args)`: [f(...args), gradient] where f returns a
 * scalar (one element) tensor; the gradient is one tensor (a single argnum) or a list.
 * With hasAux, f returns [value, aux] and the result is [[value, aux], gradient].
 */
export function valueAndGrad<A extends unknown[]>(
  f: (...args: A) => unknown,
  options: GradOptions = {},
): (...args: A) => [unknown, Tensor | Tensor[]] {
  const op = "valueAndGrad";
  return (...args: A) => {
    const idx = argIndices(op, options.argnums, args.length);
    return nested(() => {
      const ins = idx.map((i) => prepare(op, args[i], `argument ${i}`));
      const call = [...args] as unknown[];
      idx.forEach((i, k) => (call[i] = ins[k]));
      const r = f(...(call as A));
      let value: unknown = r;
      let aux: unknown;
      if (options.hasAux) {
        if (!Array.isArray(r) || r.length !== 2) {
          throw new OpError(op, "with hasAux the function must return [value, aux]");
        }
        [value, aux] = r as [unknown, unknown];
      }
      if (!(value instanceof Tensor) || value.numel() !== 1) {
        throw new OpError(
          op,
          `the function must return a one-element tensor (a scalar loss), got ${
            value instanceof Tensor ? `shape [${value.shape.join(", ")}]` : typeof value
          }`,
        );
      }
      const gs = gradsOf([value], ins, undefined, false);
      const g = typeof options.argnums === "object" ? gs : gs[0]!;
      // At the top level the value is a plain result (its graph is not kept alive by it).
      const v = depth === 1 ? value.detach() : value;
      return [options.hasAux ? [v, aux] : v, g];
    });
  };
}

/** `grad(f, { argnums, hasAux })(...args)`: the gradient of scalar-valued f (JAX's grad). */
export function grad<A extends unknown[]>(
  f: (...args: A) => unknown,
  options: GradOptions = {},
): (...args: A) => Tensor | Tensor[] | [Tensor | Tensor[], unknown] {
  const vg = valueAndGrad(f, options);
  return (...args: A) => {
    const [value, g] = vg(...args);
    return options.hasAux ? [g, (value as [unknown, unknown])[1]] : g;
  };
}

/**
 * `vjp(f, ...primals)`: [f(...primals), vjpFn] where vjpFn(cotangents) gives, for each primal,
 * the cotangents pulled back through f (zeros for a primal f does not use). vjpFn may be called
 * more than once. f may return one tensor or a list; cotangents match it.
 */
export function vjp(
  f: (...primals: Tensor[]) => Tensor | readonly Tensor[],
  ...primals: Tensor[]
): [Tensor | Tensor[], (cotangents: Tensor | readonly Tensor[]) => Tensor[]] {
  const op = "vjp";
  const level = depth;
  return nested(() => {
    const ins = primals.map((x, i) => prepare(op, x, `primal ${i}`));
    const r = f(...ins);
    const outs = outputsOf(op, r);
    const pull = (cotangents: Tensor | readonly Tensor[]): Tensor[] => {
      const cts = cotangents instanceof Tensor ? [cotangents] : [...cotangents];
      if (cts.length !== outs.length) {
        throw new OpError(op, `expected ${outs.length} cotangent(s), got ${cts.length}`);
      }
      cts.forEach((c, k) => {
        const o = outs[k]!;
        if (!(c instanceof Tensor) || c.shape.join() !== o.shape.join()) {
          throw new OpError(
            op,
            `cotangent ${k} must be a tensor of the output's shape [${o.shape.join(", ")}]`,
          );
        }
      });
      const saved = depth;
      depth = level + 1;
      try {
        return withGradMode(true, () => gradsOf(outs, ins, cts, true));
      } finally {
        depth = saved;
      }
    };
    const shown = level === 0 ? outs.map((o) => o.detach()) : outs;
    return [r instanceof Tensor ? shown[0]! : shown, pull];
  });
}

/**
 * `jvp(f, primals, tangents)`: [f(...primals), J·tangents] — the directional derivative of f at
 * the primals along the tangents (forward mode), computed as the vjp of a vjp.
 */
export function jvp(
  f: (...primals: Tensor[]) => Tensor | readonly Tensor[],
  primals: readonly Tensor[],
  tangents: readonly Tensor[],
): [Tensor | Tensor[], Tensor | Tensor[]] {
  const op = "jvp";
  const level = depth;
  if (tangents.length !== primals.length) {
    throw new OpError(op, `expected ${primals.length} tangent(s), got ${tangents.length}`);
  }
  tangents.forEach((t, k) => {
    const x = primals[k]!;
    if (!(t instanceof Tensor) || t.shape.join() !== x.shape.join()) {
      throw new OpError(op, `tangent ${k} must be a tensor of primal ${k}'s shape [${x.shape.join(", ")}]`);
    }
  });
  return nested(() => {
    depth++; // the inner vjp records its backward: it is differentiated below
    try {
      const ins = primals.map((x, i) => prepare(op, x, `primal ${i}`));
      const r = f(...ins);
      const outs = outputsOf(op, r);
      // u: dummy cotangents; g(u) = J^T u is linear in u, and d<g(u), t>/du = J t.
      const us = outs.map((o) => zerosLike(o).requiresGrad_());
      const live = outs.flatMap((o, k) => (o.requiresGrad ? [k] : []));
      if (live.length === 0) {
        const zeros = outs.map((o) => zerosLike(o));
        return [r instanceof Tensor ? outs[0]! : outs, r instanceof Tensor ? zeros[0]! : zeros];
      }
      const gx = autogradGrad(
        live.map((k) => outs[k]!),
        ins,
        live.map((k) => us[k]!),
        { createGraph: true, retainGraph: true, allowUnused: true },
      );
      const pairs = gx.flatMap((g, k) => (g !== null && g.requiresGrad ? [[g, tangents[k]!] as const] : []));
      let jt: Tensor[];
      if (pairs.length === 0) jt = outs.map((o) => zerosLike(o));
      else {
        const gs = autogradGrad(
          pairs.map(([g]) => g),
          us,
          pairs.map(([, t]) => t),
          { createGraph: depth > 2, retainGraph: depth > 2, allowUnused: true },
        );
        jt = gs.map((g, k) => g ?? zerosLike(outs[k]!));
      }
      const top = level === 0;
      const ys = top ? outs.map((o) => o.detach()) : outs;
      const ts = top ? jt.map((t) => t.detach()) : jt;
      return [r instanceof Tensor ? ys[0]! : ys, r instanceof Tensor ? ts[0]! : ts];
    } finally {
      depth--;
    }
  });
}
