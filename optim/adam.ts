// Adam (with amsgrad and L2 weight decay) and AdamW (decoupled weight decay), following
// torch.optim.Adam / AdamW's single-tensor rule. Bias corrections are computed on the host in
// float64 (prepareStep) and reach the ops as 0-d operands, like lr.

import { add, div, maximum, mul } from "../tensor/ops/core.ts";
import { sqrt } from "../tensor/ops/elementwise.ts";
import type { Tensor } from "../tensor/tensor.ts";
import {
  Optimizer,
  type ParamGroup,
  type ParamGroupInput,
  type Scalars,
  zeroState,
} from "./optimizer.ts";

/** Numbers prepareStep gives per parameter (see update). */
const PER_PARAM = 8;

export interface AdamOptions {
  lr?: number;
  betas?: readonly [number, number];
  eps?: number;
  weightDecay?: number;
  amsgrad?: boolean;
  maximize?: boolean;
}

export class Adam extends Optimizer {
  /** AdamW decouples weight decay: the parameter shrinks by lr·wd instead of a grad term. */
  protected readonly decoupled: boolean = false;

  constructor(
    params: Iterable<Tensor> | Iterable<ParamGroupInput>,
    options: AdamOptions = {},
    defaultWeightDecay = 0,
  ) {
    super(params, {
      lr: options.lr ?? 1e-3,
      betas: options.betas ?? [0.9, 0.999],
      eps: options.eps ?? 1e-8,
      weightDecay: options.weightDecay ?? defaultWeightDecay,
      amsgrad: options.amsgrad ?? false,
      maximize: options.maximize ?? false,
    });
  }

  protected override validate(g: ParamGroup): void {
    if (this.num(g, "lr") < 0) throw new Error(`invalid learning rate ${g.lr}`);
    if (this.num(g, "eps") < 0) throw new Error(`invalid epsilon ${g.eps}`);
    const b = g.betas as readonly number[];
    if (!Array.isArray(b) || b.length !== 2 || b.some((x) => !(x >= 0 && x < 1))) {
      throw new Error(`invalid betas ${String(g.betas)}`);
    }
    if (this.num(g, "weightDecay") < 0) throw new Error(`invalid weightDecay ${g.weightDecay}`);
  }

  protected structure(g: ParamGroup): string {
    return [this.num(g, "weightDecay") !== 0, this.flag(g, "amsgrad"), this.flag(g, "maximize")]
      .map((b) => (b ? 1 : 0)).join("");
  }

  prepareStep(params: readonly Tensor[]): number[] {
    const out: number[] = [];
    for (const p of params) {
      const g = this.groupOf(p);
      const lr = this.num(g, "lr");
      const [beta1, beta2] = g.betas as readonly number[];
      const wd = this.num(g, "weightDecay");
      const st = this.state.get(p) ?? this.initState(p, {
        step: 0,
        exp_avg: zeroState(p),
        exp_avg_sq: zeroState(p),
        ...(this.flag(g, "amsgrad") && { max_exp_avg_sq: zeroState(p) }),
      });
      const step = (st.step as number) + 1;
      st.step = step;
      const bc1 = 1 - beta1! ** step;
      const bc2Sqrt = Math.sqrt(1 - beta2! ** step);
      out.push(
        this.decoupled ? 1 - lr * wd : wd,
        beta1!,
        1 - beta1!,
        beta2!,
        1 - beta2!,
        1 / bc2Sqrt,
        this.num(g, "eps"),
        -lr / bc1,
      );
    }
    return out;
  }

  protected update(params: readonly Tensor[], s: Scalars): void {
    for (const [i, p] of params.entries()) {
      const k = i * PER_PARAM;
      const g = this.groupOf(p);
      const st = this.state.get(p)!;
      let grad = this.gradOf(p, g);
      let param: Tensor = p;
      if (this.num(g, "weightDecay") !== 0) {
        if (this.decoupled) param = mul(p, s(k));
        else grad = add(grad, mul(p, s(k)));
      }
      const expAvg = st.exp_avg as Tensor;
      const expAvgSq = st.exp_avg_sq as Tensor;
      const m = add(mul(expAvg, s(k + 1)), mul(grad, s(k + 2)));
      const v = add(mul(expAvgSq, s(k + 3)), mul(mul(grad, grad), s(k + 4)));
      expAvg.impl = m.impl;
      expAvgSq.impl = v.impl;
      let second = v;
      if (this.flag(g, "amsgrad")) {
        const maxSq = st.max_exp_avg_sq as Tensor;
        second = maximum(maxSq, v);
        maxSq.impl = second.impl;
      }
      const denom = add(mul(sqrt(second), s(k + 5)), s(k + 6));
      p.impl = add(param, mul(div(m, denom), s(k + 7))).impl;
    }
  }
}

export class AdamW extends Adam {
  protected override readonly decoupled: boolean = true;

  constructor(params: Iterable<Tensor> | Iterable<ParamGroupInput>, options: AdamOptions = {}) {
    super(params, options, 1e-2);
  }
}
