// MultiheadAttention with PyTorch's parameter layout and state-dict keys: `in_proj_weight`
// [3E, E] and `in_proj_bias` [3E] packing the q, k, v projections (or `q_proj_weight`,
// `k_proj_weight`, `v_proj_weight` when kdim/vdim differ from embedDim) and `out_proj` (a
// Linear, under PyTorch's class name NonDynamicallyQuantizableLinear so reprs match), with
// PyTorch's initialisation (xavier_uniform projections, zero biases). forward follows
// F.multi_head_attention_forward: project, split heads, scaled dot product with the masks
// (bool masks mean "masked out" here, as in PyTorch's MHA; float masks are added), softmax,
// dropout in training, merge heads, project out. Returns [output, weights]; weights are null
// unless needWeights, and averaged over heads unless averageAttnWeights is false. Without
// needWeights the attention itself is ops.scaledDotProductAttention.
//
// One deliberate difference: PyTorch treats isCausal only as a hint and requires attnMask with
// it; here isCausal with no attnMask applies the causal mask (query i sees keys j <= i).

import { type CallForms, p, parseArgs } from "../args.ts";
import { arange, zeros } from "../creation.ts";
import { ArgumentError, OpError } from "../errors.ts";
import * as ops from "../ops/index.ts";
import { shapeString } from "../shape.ts";
import type { Tensor } from "../tensor.ts";
import { xavierUniform } from "./init.ts";
import { probability } from "./layer_args.ts";
import { Linear } from "./linear.ts";
import { Module, Parameter } from "./module.ts";

/** PyTorch's name for MultiheadAttention's output projection (a plain Linear). */
export class NonDynamicallyQuantizableLinear extends Linear {}

const mhaSig = [
  p.int("embedDim", { min: 1 }),
  p.int("numHeads", { min: 1 }),
  probability("dropout").default(0),
  p.bool("bias").default(true),
  p.bool("addBiasKv").default(false),
  p.bool("addZeroAttn").default(false),
  p.int("kdim", { min: 1 }).optional(),
  p.int("vdim", { min: 1 }).optional(),
  p.bool("batchFirst").default(false),
] as const;

const forwardSig = [
  p.tensor("query"),
  p.tensor("key"),
  p.tensor("value"),
  p.tensor("keyPaddingMask").optional(),
  p.bool("needWeights").default(true),
  p.tensor("attnMask").optional(),
  p.bool("averageAttnWeights").default(true),
  p.bool("isCausal").default(false),
] as const;

/**
 * `new MultiheadAttention(embedDim, numHeads, { dropout, bias, kdim, vdim, batchFirst })`;
 * `mha.forward(query, key, value, { keyPaddingMask, needWeights, attnMask, isCausal })`.
 * Inputs are [L, N, E] ([N, L, E] with batchFirst) or unbatched [L, E].
 */
export class MultiheadAttention extends Module {
  readonly embedDim: number;
  readonly kdim: number;
  readonly vdim: number;
  readonly numHeads: number;
  readonly dropout: number;
  readonly batchFirst: boolean;
  readonly headDim: number;
  in_proj_weight: Parameter | null;
  q_proj_weight: Parameter | null;
  k_proj_weight: Parameter | null;
  v_proj_weight: Parameter | null;
  in_proj_bias: Parameter | null;
  out_proj: NonDynamicallyQuantizableLinear;

  constructor(...args: CallForms<typeof mhaSig>) {
    super();
    const layer = new.target.name;
    const a = parseArgs(layer, mhaSig, args);
    const e = a.embedDim;
    if (e % a.numHeads !== 0) {
      throw new ArgumentError(
        layer,
        "embedDim",
        `(${e}) must be divisible by numHeads (${a.numHeads})`,
      );
    }
    for (const k of ["addBiasKv", "addZeroAttn"] as const) {
      if (a[k]) throw new ArgumentError(layer, k, "true is not supported");
    }
    this.embedDim = e;
    this.kdim = a.kdim ?? e;
    this.vdim = a.vdim ?? e;
    this.numHeads = a.numHeads;
    this.dropout = a.dropout;
    this.batchFirst = a.batchFirst;
    this.headDim = e / a.numHeads;
    const packed = this.kdim === e && this.vdim === e;
    this.in_proj_weight = packed ? new Parameter(xavierUniform([3 * e, e])) : null;
    this.q_proj_weight = packed ? null : new Parameter(xavierUniform([e, e]));
    this.k_proj_weight = packed ? null : new Parameter(xavierUniform([e, this.kdim]));
    this.v_proj_weight = packed ? null : new Parameter(xavierUniform([e, this.vdim]));
    this.in_proj_bias = a.bias ? new Parameter(zeros([3 * e])) : null;
    this.out_proj = new NonDynamicallyQuantizableLinear(e, e, { bias: a.bias });
    if (a.bias) this.out_proj.bias = new Parameter(zeros([e]));
  }

  /** The q, k, v projection weights and biases (slices of the packed ones when packed). */
  private projections(): [Tensor, Tensor | null][] {
    const e = this.embedDim;
    const part = (t: Tensor, i: number) => ops.narrow(t, 0, i * e, e);
    const b = this.in_proj_bias;
    const bias = (i: number) => (b === null ? null : part(b, i));
    if (this.in_proj_weight !== null) {
      const w = this.in_proj_weight;
      return [0, 1, 2].map((i) => [part(w, i), bias(i)]);
    }
    return [this.q_proj_weight!, this.k_proj_weight!, this.v_proj_weight!].map((w, i) => [
      w,
      bias(i),
    ]);
  }

  forward(...args: CallForms<typeof forwardSig>): [Tensor, Tensor | null] {
    const layer = this.className();
    const a = parseArgs(layer, forwardSig, args);
    let { query, key, value } = a;
    const shapes = () =>
      `query ${shapeString(a.query.shape)}, key ${shapeString(a.key.shape)}, ` +
      `value ${shapeString(a.value.shape)}`;
    const fail = (detail: string): never => {
      throw new OpError(layer, `${detail} (${shapes()})`);
    };
    const batched = query.ndim === 3;
    if (!batched && query.ndim !== 2) fail("query must be 3-D (batched) or 2-D (unbatched)");
    if (key.ndim !== query.ndim || value.ndim !== query.ndim) {
      fail("query, key and value must have the same number of dims");
    }
    if (batched && this.batchFirst) {
      [query, key, value] = [query, key, value].map((t) => ops.transpose(t, 0, 1));
    } else if (!batched) {
      [query, key, value] = [query, key, value].map((t) => ops.unsqueeze(t, 1));
    }
    const [tgtLen, batch, e] = query.shape as [number, number, number];
    const srcLen = key.shape[0]!;
    if (e !== this.embedDim) fail(`expected embedding dim ${this.embedDim}, got ${e}`);
    if (key.shape[2] !== this.kdim) fail(`expected key dim ${this.kdim}, got ${key.shape[2]}`);
    if (value.shape[2] !== this.vdim) {
      fail(`expected value dim ${this.vdim}, got ${value.shape[2]}`);
    }
    if (value.shape[0] !== srcLen || key.shape[1] !== batch || value.shape[1] !== batch) {
      fail("key and value must have the same length and batch size as query's batch size");
    }

    const h = this.numHeads;
    const hd = this.headDim;
    const [[wq, bq], [wk, bk], [wv, bv]] = this.projections() as [
      [Tensor, Tensor | null],
      [Tensor, Tensor | null],
      [Tensor, Tensor | null],
    ];
    // [len, N, E] -> [N, H, len, hd]
    const heads = (t: Tensor, len: number) =>
      ops.permute(ops.reshape(t, [len, batch, h, hd]), [1, 2, 0, 3]);
    const q = heads(ops.linear(query, wq, bq), tgtLen);
    const k = heads(ops.linear(key, wk, bk), srcLen);
    const v = heads(ops.linear(value, wv, bv), srcLen);

    const mask = this.additiveMask(a.attnMask, a.keyPaddingMask, a.isCausal, {
      batched,
      batch,
      tgtLen,
      srcLen,
      dtype: q.dtype,
      fail,
    });
    const dropoutP = this.training ? this.dropout : 0;
    let out: Tensor;
    let weights: Tensor | null = null;
    if (a.needWeights) {
      let scores = ops.matmul(ops.mul(q, 1 / Math.sqrt(hd)), ops.transpose(k, -2, -1));
      if (mask !== null) scores = ops.add(scores, mask);
      let attn = ops.softmax(scores, -1);
      if (dropoutP > 0) attn = ops.dropout(attn, { p: dropoutP, training: true });
      out = ops.matmul(attn, v);
      weights = a.averageAttnWeights ? ops.mean(attn, 1) : attn;
      if (!batched) weights = ops.squeeze(weights, 0);
    } else {
      out = ops.scaledDotProductAttention(q, k, v, { attnMask: mask, dropoutP });
    }
    // [N, H, L, hd] -> [L, N, E]
    out = ops.reshape(ops.permute(out, [2, 0, 1, 3]), [tgtLen, batch, e]);
    out = this.out_proj.forward(out);
    if (!batched) out = ops.squeeze(out, 1);
    else if (this.batchFirst) out = ops.transpose(out, 0, 1);
    return [out, weights];
  }

  /**
   * The masks as one float tensor added to the [N, H, L, S] scores: attnMask ([L, S] or
   * [N*H, L, S]), the causal mask, keyPaddingMask ([N, S], or [S] unbatched). Bool entries
   * that are true become -inf.
   */
  private additiveMask(
    attnMask: Tensor | undefined,
    keyPaddingMask: Tensor | undefined,
    isCausal: boolean,
    c: {
      batched: boolean;
      batch: number;
      tgtLen: number;
      srcLen: number;
      dtype: Tensor["dtype"];
      fail: (detail: string) => never;
    },
  ): Tensor | null {
    const { batch, tgtLen, srcLen, fail } = c;
    const h = this.numHeads;
    const additive = (m: Tensor, what: string): Tensor => {
      if (m.dtype === "bool") return ops.to(ops.where(m, -Infinity, 0), c.dtype);
      if (!m.isFloatingPoint()) fail(`${what} must be bool or floating point, got ${m.dtype}`);
      return ops.to(m, c.dtype);
    };
    let mask: Tensor | null = null;
    if (attnMask !== undefined) {
      const s = attnMask.shape;
      const m = additive(attnMask, "attnMask");
      if (s.length === 2 && s[0] === tgtLen && s[1] === srcLen) {
        mask = ops.reshape(m, [1, 1, tgtLen, srcLen]);
      } else if (s.length === 3 && s[0] === batch * h && s[1] === tgtLen && s[2] === srcLen) {
        mask = ops.reshape(m, [batch, h, tgtLen, srcLen]);
      } else {
        fail(
          `attnMask of shape ${shapeString(s)} must be [L, S] = ${shapeString([tgtLen, srcLen])} ` +
            `or [N*numHeads, L, S] = ${shapeString([batch * h, tgtLen, srcLen])}`,
        );
      }
    } else if (isCausal) {
      const future = ops.lt(
        ops.unsqueeze(arange(tgtLen), 1),
        ops.unsqueeze(arange(srcLen), 0),
      );
      mask = ops.reshape(additive(future, "the causal mask"), [1, 1, tgtLen, srcLen]);
    }
    if (keyPaddingMask !== undefined) {
      let kpm = keyPaddingMask;
      if (!c.batched && kpm.ndim === 1) kpm = ops.unsqueeze(kpm, 0);
      if (kpm.ndim !== 2 || kpm.shape[0] !== batch || kpm.shape[1] !== srcLen) {
        fail(
          `keyPaddingMask of shape ${shapeString(keyPaddingMask.shape)} must be [N, S] = ` +
            `${shapeString([batch, srcLen])}${c.batched ? "" : " or [S]"}`,
        );
      }
      const m = ops.reshape(additive(kpm, "keyPaddingMask"), [batch, 1, 1, srcLen]);
      mask = mask === null ? m : ops.add(mask, m);
    }
    return mask;
  }
}
