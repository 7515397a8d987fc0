// Adam (with amsgrad and L2 weight decay) and AdamW (decoupled weight decay), following
// torch.optim.Adam / AdamW's single-tensor rule. Bias corrections are computed in JS and reach
// the ops as scalars, like lr.

import { add, div, maximum, mul } from "../tensor/ops/core.ts";
import { sqrt } from "../tensor/ops/elementwise.ts";
import { zerosLike } from "../tensor/creation.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { hyper, Optimizer, type ParamGroup, type ParamGroupInput } from "./optimizer.ts";

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

  protected update(): void {
    for (const g of this.paramGroups) {
      const lr = this.num(g, "lr");
      const [beta1, beta2] = g.betas as readonly number[];
      const eps = this.num(g, "eps");
      const wd = this.num(g, "weightDecay");
      const amsgrad = this.flag(g, "amsgrad");
      for (const [p, g0] of this.withGrads(g)) {
        let grad: Tensor = g0;
        let st = this.state.get(p);
        if (!st) {
          st = { step: 0, exp_avg: zerosLike(p), exp_avg_sq: zerosLike(p) };
          if (amsgrad) st.max_exp_avg_sq = zerosLike(p);
          this.state.set(p, st);
        }
        const step = (st.step as number) + 1;
        st.step = step;
        let param: Tensor = p;
        if (wd !== 0) {
          if (this.decoupled) param = mul(p, hyper(1 - lr * wd));
          else grad = add(grad, mul(p, hyper(wd)));
        }
        const m = add(mul(st.exp_avg as Tensor, hyper(beta1)), mul(grad, hyper(1 - beta1)));
        const v = add(mul(st.exp_avg_sq as Tensor, hyper(beta2)), mul(mul(grad, grad), hyper(1 - beta2)));
        st.exp_avg = m;
        st.exp_avg_sq = v;
        const bc1 = 1 - beta1 ** step;
        const bc2Sqrt = Math.sqrt(1 - beta2 ** step);
        let second = v;
        if (amsgrad) {
          second = maximum(st.max_exp_avg_sq as Tensor, v);
          st.max_exp_avg_sq = second;
        }
        const denom = add(mul(sqrt(second), hyper(1 / bc2Sqrt)), hyper(eps));
        p.impl = add(param, mul(div(m, denom), hyper(-lr / bc1))).impl;
      }
    }
  }
}

export class AdamW extends Adam {
  protected override readonly decoupled: boolean = true;

  constructor(params: Iterable<Tensor> | Iterable<ParamGroupInput>, options: AdamOptions = {}) {
    super(params, options, 1e-2);
  }
}
