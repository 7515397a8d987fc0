// Models for the fusion and buffer-assignment tests, built with the builder the way the
// frontend lowers them: RMS norm, a GELU MLP (tanh form), and a transformer-like stack of
// pre-norm blocks (layer norm, causal-free attention, GELU MLP, residuals). Each comes with
// deterministic inputs; the tests compare fused and unfused modules with the evaluator.

import { type ComputationBuilder, ModuleBuilder } from "../../ir/builder.ts";
import { literal, type Literal } from "../../ir/literal.ts";
import type { Instruction, Module } from "../../ir/module.ts";
import { arrayShape } from "../../ir/shape.ts";

/** Deterministic values in [-scale, scale). */
export function randomF32(dims: number[], seed: number, scale = 1): Literal {
  let s = seed >>> 0;
  const n = dims.reduce((a, b) => a * b, 1);
  const v = Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 31 - 1) * scale;
  });
  return literal("f32", dims, v);
}

/** Every parameter of the entry, filled deterministically. */
export function inputsFor(m: Module, seed = 1, scale = 0.5): Literal[] {
  return m.entry.parameters.map((p, k) => {
    if (p.shape.kind !== "array") throw new Error("fusion_models: tuple parameter");
    return randomF32([...p.shape.dims], seed * 1000 + k, scale);
  });
}

function scalarBcast(b: ComputationBuilder, v: number, dims: number[]): Instruction {
  return b.broadcast(b.scalar("f32", v), dims, []);
}

/** x * rsqrt(mean(x^2) + eps) * w over the last dim of [rows, cols]. */
export function rmsNorm(
  b: ComputationBuilder,
  x: Instruction,
  w: Instruction,
  rows: number,
  cols: number,
): Instruction {
  const add = b.moduleBuilder!.reducer("add", "f32");
  return b.withMetadata({ opType: "rmsNorm" }, () => {
    const ss = b.reduce(b.multiply(x, x), b.scalar("f32", 0), [1], add);
    const ms = b.divide(ss, scalarBcast(b, cols, [rows]));
    const inv = b.rsqrt(b.add(ms, scalarBcast(b, 1e-6, [rows])));
    const y = b.multiply(x, b.broadcast(inv, [rows, cols], [0]));
    return b.multiply(y, b.broadcast(w, [rows, cols], [1]));
  });
}

export function buildRmsNorm(rows = 4, cols = 16): Module {
  const mb = new ModuleBuilder("rms_norm");
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [rows, cols]), "x");
    const w = b.parameter(arrayShape("f32", [cols]), "w");
    return rmsNorm(b, x, w, rows, cols);
  });
  return mb.build();
}

/** 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))). */
export function gelu(b: ComputationBuilder, x: Instruction, dims: number[]): Instruction {
  return b.withMetadata({ opType: "gelu" }, () => {
    const x3 = b.multiply(b.multiply(x, x), x);
    const inner = b.add(x, b.multiply(scalarBcast(b, 0.044715, dims), x3));
    const t = b.tanh(b.multiply(scalarBcast(b, Math.sqrt(2 / Math.PI), dims), inner));
    const half = b.multiply(scalarBcast(b, 0.5, dims), x);
    return b.multiply(half, b.add(scalarBcast(b, 1, dims), t));
  });
}

/** y = x @ w + bias over the last dim of a [..., k] value. */
function linear(
  b: ComputationBuilder,
  x: Instruction,
  w: Instruction,
  bias: Instruction,
  dims: number[],
): Instruction {
  return b.withMetadata({ opType: "linear" }, () => {
    const last = dims.length - 1;
    const y = b.dot(x, w, { lhsContracting: [last], rhsContracting: [0] });
    return b.add(y, b.broadcast(bias, dims, [last]));
  });
}

export function buildGeluMlp(rows = 4, d = 16, ff = 32): Module {
  const mb = new ModuleBuilder("gelu_mlp");
  mb.entry("main", (b) => {
    const x = b.parameter(arrayShape("f32", [rows, d]), "x");
    const w1 = b.parameter(arrayShape("f32", [d, ff]), "w1");
    const b1 = b.parameter(arrayShape("f32", [ff]), "b1");
    const w2 = b.parameter(arrayShape("f32", [ff, d]), "w2");
    const b2 = b.parameter(arrayShape("f32", [d]), "b2");
    const h = gelu(b, linear(b, x, w1, b1, [rows, ff]), [rows, ff]);
    return linear(b, h, w2, b2, [rows, d]);
  });
  return mb.build();
}

function layerNorm(
  b: ComputationBuilder,
  x: Instruction,
  g: Instruction,
  beta: Instruction,
  rows: number,
  cols: number,
): Instruction {
  const add = b.moduleBuilder!.reducer("add", "f32");
  return b.withMetadata({ opType: "layerNorm" }, () => {
    const mean = b.divide(b.reduce(x, b.scalar("f32", 0), [1], add), scalarBcast(b, cols, [rows]));
    const xc = b.subtract(x, b.broadcast(mean, [rows, cols], [0]));
    const v = b.divide(
      b.reduce(b.multiply(xc, xc), b.scalar("f32", 0), [1], add),
      scalarBcast(b, cols, [rows]),
    );
    const inv = b.rsqrt(b.add(v, scalarBcast(b, 1e-5, [rows])));
    const y = b.multiply(xc, b.broadcast(inv, [rows, cols], [0]));
    return b.add(b.multiply(y, b.broadcast(g, [rows, cols], [1])),
      b.broadcast(beta, [rows, cols], [1]));
  });
}

/**
 * A stack of `layers` pre-norm transformer blocks over T tokens of width D with H heads and an
 * FF-wide GELU MLP; every weight is its own parameter.
 */
export function buildTransformer(layers = 12, T = 8, D = 16, H = 2, FF = 64): Module {
  const HD = D / H;
  const mb = new ModuleBuilder(`transformer_${layers}`);
  mb.entry("main", (b) => {
    let x = b.parameter(arrayShape("f32", [T, D]), "x");
    const p = (dims: number[], n: string) => b.parameter(arrayShape("f32", dims), n);
    const max = mb.reducer("max", "f32");
    const add = mb.reducer("add", "f32");
    for (let l = 0; l < layers; l++) {
      const [g1, be1, g2, be2] = ["g1", "be1", "g2", "be2"].map((n) => p([D], `${n}_${l}`));
      const [wq, wk, wv, wo] = ["wq", "wk", "wv", "wo"].map((n) => p([D, D], `${n}_${l}`));
      const w1 = p([D, FF], `w1_${l}`);
      const b1 = p([FF], `b1_${l}`);
      const w2 = p([FF, D], `w2_${l}`);
      const b2 = p([D], `b2_${l}`);
      const h = layerNorm(b, x, g1!, be1!, T, D);
      const heads = (w: Instruction) =>
        b.transpose(
          b.reshape(b.dot(h, w, { lhsContracting: [1], rhsContracting: [0] }), [T, H, HD]),
          [1, 0, 2],
        );
      const q = heads(wq!);
      const k = heads(wk!);
      const v = heads(wv!);
      const s = b.multiply(
        b.dot(q, k, { lhsBatch: [0], rhsBatch: [0], lhsContracting: [2], rhsContracting: [2] }),
        scalarBcast(b, 1 / Math.sqrt(HD), [H, T, T]),
      );
      const probs = b.withMetadata({ opType: "softmax" }, () => {
        const m = b.reduce(s, b.scalar("f32", -Infinity), [2], max);
        const e = b.exp(b.subtract(s, b.broadcast(m, [H, T, T], [0, 1])));
        const z = b.reduce(e, b.scalar("f32", 0), [2], add);
        return b.divide(e, b.broadcast(z, [H, T, T], [0, 1]));
      });
      const ctx = b.dot(probs, v, { lhsBatch: [0], rhsBatch: [0], lhsContracting: [2],
        rhsContracting: [1] });
      const merged = b.reshape(b.transpose(ctx, [1, 0, 2]), [T, D]);
      x = b.add(x, b.dot(merged, wo!, { lhsContracting: [1], rhsContracting: [0] }));
      const h2 = layerNorm(b, x, g2!, be2!, T, D);
      x = b.add(x, linear(b, gelu(b, linear(b, h2, w1, b1, [T, FF]), [T, FF]), w2, b2, [T, D]));
    }
    return x;
  });
  return mb.build();
}
