// The IR corpus: small but real modules written with the builder, the way the frontend will
// lower models (an MLP, softmax, layer norm, a conv block, a causal attention block, a
// bounded-dynamic masked mean, an embedding lookup feeding a while loop). Each entry also has
// example inputs and a plain-JS reference of what the module computes, so the corpus checks the
// evaluator's numerics as well as the text and proto round trips (test/ir/corpus.test.ts).

import { literal, type Literal } from "../../../ir/literal.ts";
import type { Module } from "../../../ir/module.ts";
import { type ComputationBuilder, ModuleBuilder } from "../../../ir/builder.ts";
import type { Instruction } from "../../../ir/module.ts";
import { arrayShape, scalarShape, tupleShape } from "../../../ir/shape.ts";

export interface CorpusEntry {
  build(): Module;
  inputs(): Literal[];
  /** Expected flat output values (row-major), computed without the IR. */
  reference(inputs: Literal[]): number[];
  /** Expected output dims (actual sizes). */
  outputDims: number[];
}

/** Deterministic pseudo-random values in [-1, 1). */
function values(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  });
}

function f32(dims: number[], seed: number, scale = 1): Literal {
  const n = dims.reduce((a, b) => a * b, 1);
  return literal("f32", dims, values(n, seed).map((v) => v * scale));
}

const at = (line: number, opType: string, opName?: string) => ({
  opType,
  ...(opName !== undefined ? { opName } : {}),
  sourceFile: "models/example.ts",
  sourceLine: line,
  sourceColumn: 5,
});

// ---- plain-JS helpers for the references ---------------------------------------------------

function matmul(a: ArrayLike<number>, b: ArrayLike<number>, m: number, k: number, n: number) {
  const out = new Array<number>(m * n).fill(0);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += a[i * k + p]! * b[p * n + j]!;
      out[i * n + j] = s;
    }
  }
  return out;
}

function softmaxRows(x: number[], rows: number, cols: number): number[] {
  const out = new Array<number>(rows * cols);
  for (let r = 0; r < rows; r++) {
    const row = x.slice(r * cols, (r + 1) * cols);
    const m = Math.max(...row);
    const e = row.map((v) => Math.exp(v - m));
    const s = e.reduce((a, b) => a + b, 0);
    e.forEach((v, c) => (out[r * cols + c] = v / s));
  }
  return out;
}

/** softmax over the last dim of a [rows, cols] value, built with max/sub/exp/sum/div. */
function softmax(b: ComputationBuilder, x: Instruction, dims: number[], line: number) {
  const mb = b.moduleBuilder!;
  const last = dims.length - 1;
  const keep = dims.map((_, i) => i).slice(0, last);
  return b.withMetadata(at(line, "softmax"), () => {
    const m = b.reduce(x, b.scalar("f32", -Infinity), [last], mb.reducer("max", "f32"));
    const e = b.exp(b.subtract(x, b.broadcast(m, dims, keep)));
    const s = b.reduce(e, b.scalar("f32", 0), [last], mb.reducer("add", "f32"));
    return b.divide(e, b.broadcast(s, dims, keep));
  });
}

// ---- the corpus -------------------------------------------------------------------------------

const mlp: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("mlp");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [4, 16]), "x");
      const w1 = b.parameter(arrayShape("f32", [16, 32]), "w1");
      const b1 = b.parameter(arrayShape("f32", [32]), "b1");
      const w2 = b.parameter(arrayShape("f32", [32, 10]), "w2");
      const b2 = b.parameter(arrayShape("f32", [10]), "b2");
      const h = b.withMetadata(at(10, "linear", "mlp/fc1"), () =>
        b.add(
          b.dot(x, w1, { lhsContracting: [1], rhsContracting: [0] }),
          b.broadcast(b1, [4, 32], [1]),
        ),
      );
      const r = b.withMetadata(at(11, "relu", "mlp/relu"), () =>
        b.maximum(h, b.broadcast(b.scalar("f32", 0), [4, 32], [])),
      );
      return b.withMetadata(at(12, "linear", "mlp/fc2"), () =>
        b.add(
          b.dot(r, w2, { lhsContracting: [1], rhsContracting: [0] }),
          b.broadcast(b2, [4, 10], [1]),
        ),
      );
    });
    return mb.build();
  },
  inputs: () => [f32([4, 16], 1), f32([16, 32], 2, 0.3), f32([32], 3, 0.1), f32([32, 10], 4, 0.3),
    f32([10], 5, 0.1)],
  reference([x, w1, b1, w2, b2]) {
    const h = matmul(x!.data as Float32Array, w1!.data as Float32Array, 4, 16, 32).map(
      (v, i) => Math.max(v + (b1!.data[i % 32] as number), 0),
    );
    return matmul(h, w2!.data as Float32Array, 4, 32, 10).map(
      (v, i) => v + (b2!.data[i % 10] as number),
    );
  },
  outputDims: [4, 10],
};

const softmaxEntry: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("softmax");
    mb.entry("main", (b) => softmax(b, b.parameter(arrayShape("f32", [4, 10]), "x"), [4, 10], 20));
    return mb.build();
  },
  inputs: () => [f32([4, 10], 7, 4)],
  reference: ([x]) => softmaxRows(Array.from(x!.data as Float32Array), 4, 10),
  outputDims: [4, 10],
};

const layerNorm: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("layer_norm");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [4, 16]), "x");
      const gamma = b.parameter(arrayShape("f32", [16]), "gamma");
      const beta = b.parameter(arrayShape("f32", [16]), "beta");
      return b.withMetadata(at(30, "layerNorm", "encoder/ln"), () => {
        const add = mb.reducer("add", "f32");
        const n = b.broadcast(b.scalar("f32", 16), [4], []);
        const mean = b.divide(b.reduce(x, b.scalar("f32", 0), [1], add), n);
        const xc = b.subtract(x, b.broadcast(mean, [4, 16], [0]));
        const v = b.divide(b.reduce(b.multiply(xc, xc), b.scalar("f32", 0), [1], add), n);
        const inv = b.rsqrt(b.add(v, b.broadcast(b.scalar("f32", 1e-5), [4], [])));
        const y = b.multiply(xc, b.broadcast(inv, [4, 16], [0]));
        return b.add(
          b.multiply(y, b.broadcast(gamma, [4, 16], [1])),
          b.broadcast(beta, [4, 16], [1]),
        );
      });
    });
    return mb.build();
  },
  inputs: () => [f32([4, 16], 11, 3), f32([16], 12), f32([16], 13)],
  reference([x, g, bt]) {
    const out: number[] = [];
    for (let r = 0; r < 4; r++) {
      const row = Array.from((x!.data as Float32Array).subarray(r * 16, r * 16 + 16));
      const mean = row.reduce((a, c) => a + c, 0) / 16;
      const v = row.reduce((a, c) => a + (c - mean) ** 2, 0) / 16;
      row.forEach((c, i) =>
        out.push(((c - mean) / Math.sqrt(v + 1e-5)) * (g!.data[i] as number) +
          (bt!.data[i] as number)),
      );
    }
    return out;
  },
  outputDims: [4, 16],
};

const conv: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("conv_block");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [2, 3, 8, 8]), "x");
      const w = b.parameter(arrayShape("f32", [4, 3, 3, 3]), "w");
      const bias = b.parameter(arrayShape("f32", [4]), "bias");
      const y = b.withMetadata(at(40, "conv2d", "cnn/conv1"), () =>
        b.add(
          b.convolution(x, w, {
            window: [
              { size: 3, padLow: 1, padHigh: 1 },
              { size: 3, padLow: 1, padHigh: 1 },
            ],
            dims: "bf01_oi01->bf01",
          }),
          b.broadcast(bias, [2, 4, 8, 8], [1]),
        ),
      );
      const r = b.withMetadata(at(41, "relu", "cnn/relu"), () =>
        b.maximum(y, b.broadcast(b.scalar("f32", 0), [2, 4, 8, 8], [])),
      );
      return b.withMetadata(at(42, "maxPool2d", "cnn/pool"), () =>
        b.reduceWindow(
          r,
          b.scalar("f32", -Infinity),
          [{ size: 1 }, { size: 1 }, { size: 2, stride: 2 }, { size: 2, stride: 2 }],
          mb.reducer("max", "f32"),
        ),
      );
    });
    return mb.build();
  },
  inputs: () => [f32([2, 3, 8, 8], 21), f32([4, 3, 3, 3], 22, 0.5), f32([4], 23, 0.1)],
  reference([x, w, bias]) {
    const X = x!.data as Float32Array;
    const W = w!.data as Float32Array;
    const conv = (n: number, o: number, i: number, j: number) => {
      let s = bias!.data[o] as number;
      for (let c = 0; c < 3; c++) {
        for (let di = 0; di < 3; di++) {
          for (let dj = 0; dj < 3; dj++) {
            const ii = i + di - 1;
            const jj = j + dj - 1;
            if (ii < 0 || ii >= 8 || jj < 0 || jj >= 8) continue;
            s += X[((n * 3 + c) * 8 + ii) * 8 + jj]! * W[((o * 3 + c) * 3 + di) * 3 + dj]!;
          }
        }
      }
      return Math.max(s, 0);
    };
    const out: number[] = [];
    for (let n = 0; n < 2; n++) {
      for (let o = 0; o < 4; o++) {
        for (let i = 0; i < 4; i++) {
          for (let j = 0; j < 4; j++) {
            out.push(Math.max(conv(n, o, 2 * i, 2 * j), conv(n, o, 2 * i, 2 * j + 1),
              conv(n, o, 2 * i + 1, 2 * j), conv(n, o, 2 * i + 1, 2 * j + 1)));
          }
        }
      }
    }
    return out;
  },
  outputDims: [2, 4, 4, 4],
};

// Causal self-attention: batch 2, sequence 6, model width 16, 2 heads of 8, residual add.
const B = 2;
const T = 6;
const D = 16;
const H = 2;
const HD = 8;

const attention: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("attention_block");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [B, T, D]), "x");
      const ws = ["wq", "wk", "wv", "wo"].map((n) => b.parameter(arrayShape("f32", [D, D]), n));
      const proj = (w: Instruction, line: number, name: string) =>
        b.withMetadata(at(line, "linear", `attn/${name}`), () =>
          b.dot(x, w, { lhsContracting: [2], rhsContracting: [0] }),
        );
      // [B, T, D] -> [B, H, T, HD]
      const heads = (t: Instruction) => b.transpose(b.reshape(t, [B, T, H, HD]), [0, 2, 1, 3]);
      const q = heads(proj(ws[0]!, 50, "q"));
      const k = heads(proj(ws[1]!, 51, "k"));
      const v = heads(proj(ws[2]!, 52, "v"));
      const scores = b.withMetadata(at(53, "matmul", "attn/scores"), () =>
        b.multiply(
          b.dot(q, k, { lhsBatch: [0, 1], rhsBatch: [0, 1], lhsContracting: [3],
            rhsContracting: [3] }),
          b.broadcast(b.scalar("f32", 1 / Math.sqrt(HD)), [B, H, T, T], []),
        ),
      );
      const masked = b.withMetadata(at(54, "maskedFill", "attn/causal"), () => {
        const row = b.iota(arrayShape("s32", [T, T]), 0);
        const col = b.iota(arrayShape("s32", [T, T]), 1);
        const allowed = b.broadcast(b.compare(col, row, "LE"), [B, H, T, T], [2, 3]);
        const ninf = b.broadcast(b.scalar("f32", -Infinity), [B, H, T, T], []);
        return b.select(allowed, scores, ninf);
      });
      const p = softmax(b, masked, [B, H, T, T], 55);
      const ctx = b.withMetadata(at(56, "matmul", "attn/context"), () =>
        b.dot(p, v, { lhsBatch: [0, 1], rhsBatch: [0, 1], lhsContracting: [3],
          rhsContracting: [2] }),
      );
      const merged = b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [B, T, D]);
      const out = b.withMetadata(at(57, "linear", "attn/out"), () =>
        b.dot(merged, ws[3]!, { lhsContracting: [2], rhsContracting: [0] }),
      );
      return b.withMetadata(at(58, "add", "attn/residual"), () => b.add(x, out));
    });
    return mb.build();
  },
  inputs: () => [f32([B, T, D], 31), f32([D, D], 32, 0.3), f32([D, D], 33, 0.3),
    f32([D, D], 34, 0.3), f32([D, D], 35, 0.3)],
  reference([x, wq, wk, wv, wo]) {
    const X = x!.data as Float32Array;
    const out: number[] = [];
    for (let bb = 0; bb < B; bb++) {
      const xb = X.subarray(bb * T * D, (bb + 1) * T * D);
      const q = matmul(xb, wq!.data as Float32Array, T, D, D);
      const k = matmul(xb, wk!.data as Float32Array, T, D, D);
      const v = matmul(xb, wv!.data as Float32Array, T, D, D);
      const ctx = new Array<number>(T * D).fill(0);
      for (let h = 0; h < H; h++) {
        const s: number[] = [];
        for (let i = 0; i < T; i++) {
          for (let j = 0; j < T; j++) {
            let dotv = 0;
            for (let d = 0; d < HD; d++) dotv += q[i * D + h * HD + d]! * k[j * D + h * HD + d]!;
            s.push(j <= i ? dotv / Math.sqrt(HD) : -Infinity);
          }
        }
        const p = softmaxRows(s, T, T);
        for (let i = 0; i < T; i++) {
          for (let d = 0; d < HD; d++) {
            let acc = 0;
            for (let j = 0; j < T; j++) acc += p[i * T + j]! * v[j * D + h * HD + d]!;
            ctx[i * D + h * HD + d] = acc;
          }
        }
      }
      matmul(ctx, wo!.data as Float32Array, T, D, D).forEach((val, i) => out.push(xb[i]! + val));
    }
    return out;
  },
  outputDims: [B, T, D],
};

// Mean over a bounded dynamic sequence dim: the runtime length comes from get-dimension-size.
const maskedMean: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("dynamic_mean");
    mb.entry("main", (b) => {
      const x = b.parameter(arrayShape("f32", [2, "<=16", 8]), "x");
      return b.withMetadata(at(60, "mean", "pool/mean"), () => {
        const sum = b.reduce(x, b.scalar("f32", 0), [1], mb.reducer("add", "f32"));
        const len = b.convert(b.getDimensionSize(x, 1), "f32");
        return b.divide(sum, b.broadcast(len, [2, 8], []));
      });
    });
    return mb.build();
  },
  inputs: () => [f32([2, 5, 8], 41)],
  reference([x]) {
    const X = x!.data as Float32Array;
    const out: number[] = [];
    for (let n = 0; n < 2; n++) {
      for (let c = 0; c < 8; c++) {
        let s = 0;
        for (let t = 0; t < 5; t++) s += X[(n * 5 + t) * 8 + c]!;
        out.push(s / 5);
      }
    }
    return out;
  },
  outputDims: [2, 8],
};

// Embedding lookup (gather) whose rows are then updated `steps` times in a while loop:
// h <- tanh(h * 0.5 + 0.1).
const embedLoop: CorpusEntry = {
  build() {
    const mb = new ModuleBuilder("embedding_loop");
    const state = tupleShape([scalarShape("s32"), arrayShape("f32", [3, 4])]);
    const cond = mb.computation("cond", (b) => {
      const s = b.parameter(state, "s");
      return b.compare(b.getTupleElement(s, 0), b.scalar("s32", 3), "LT");
    });
    const body = mb.computation("body", (b) => {
      const s = b.parameter(state, "state");
      const i = b.getTupleElement(s, 0);
      const h = b.getTupleElement(s, 1);
      const next = b.tanh(
        b.add(
          b.multiply(h, b.broadcast(b.scalar("f32", 0.5), [3, 4], [])),
          b.broadcast(b.scalar("f32", 0.1), [3, 4], []),
        ),
      );
      return b.tuple([b.add(i, b.scalar("s32", 1)), next]);
    });
    mb.entry("main", (b) => {
      const table = b.parameter(arrayShape("f32", [10, 4]), "table");
      const ids = b.parameter(arrayShape("s32", [3]), "ids");
      const rows = b.withMetadata(at(70, "embedding", "embed"), () =>
        b.gather(
          table,
          ids,
          { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0], indexVectorDim: 1 },
          [1, 4],
        ),
      );
      const loop = b.while(b.tuple([b.scalar("s32", 0), rows]), cond, body);
      return b.getTupleElement(loop, 1);
    });
    return mb.build();
  },
  inputs: () => [f32([10, 4], 51), literal("s32", [3], [7, 0, 7])],
  reference([table, ids]) {
    const out: number[] = [];
    for (const id of ids!.data as Int32Array) {
      for (let c = 0; c < 4; c++) {
        let h = table!.data[id * 4 + c] as number;
        for (let s = 0; s < 3; s++) h = Math.tanh(h * 0.5 + 0.1);
        out.push(h);
      }
    }
    return out;
  },
  outputDims: [3, 4],
};

export const CORPUS: Record<string, CorpusEntry> = {
  mlp,
  softmax: softmaxEntry,
  layer_norm: layerNorm,
  conv_block: conv,
  attention_block: attention,
  dynamic_mean: maskedMean,
  embedding_loop: embedLoop,
};
