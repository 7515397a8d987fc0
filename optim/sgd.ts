// SGD with momentum, dampening, Nesterov, weight decay and maximize (torch.optim.SGD's rule).

import { add, mul } from "../tensor/ops/core.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { hyper, Optimizer, type ParamGroupInput } from "./optimizer.ts";

export interface SGDOptions {
  lr?: number;
  momentum?: number;
  dampening?: number;
  weightDecay?: number;
  nesterov?: boolean;
  maximize?: boolean;
}

export class SGD extends Optimizer {
  constructor(params: Iterable<Tensor> | Iterable<ParamGroupInput>, options: SGDOptions = {}) {
    super(params, {
      lr: options.lr ?? 1e-3,
      momentum: options.momentum ?? 0,
      dampening: options.dampening ?? 0,
      weightDecay: options.weightDecay ?? 0,
      nesterov: options.nesterov ?? false,
      maximize: options.maximize ?? false,
    });
  }

  protected override validate(g: import("./optimizer.ts").ParamGroup): void {
    if (this.num(g, "lr") < 0) throw new Error(`invalid learning rate ${g.lr}`);
    if (this.num(g, "momentum") < 0) throw new Error(`invalid momentum ${g.momentum}`);
    if (this.num(g, "weightDecay") < 0) throw new Error(`invalid weightDecay ${g.weightDecay}`);
    if (this.flag(g, "nesterov") && (this.num(g, "momentum") <= 0 || this.num(g, "dampening"))) {
      throw new Error("Nesterov momentum requires a momentum and zero dampening");
    }
  }

  protected update(): void {
    for (const g of this.paramGroups) {
      const lr = this.num(g, "lr");
      const momentum = this.num(g, "momentum");
      const dampening = this.num(g, "dampening");
      const wd = this.num(g, "weightDecay");
      for (const [p, g0] of this.withGrads(g)) {
        let d: Tensor = g0;
        if (wd !== 0) d = add(d, mul(p, hyper(wd)));
        if (momentum === 0) this.state.set(p, { momentum_buffer: null });
        else {
          const st = this.state.get(p) ?? {};
          const prev = st.momentum_buffer;
          const buf = prev === undefined || prev === null
            ? d
            : add(mul(prev as Tensor, hyper(momentum)), mul(d, hyper(1 - dampening)));
          st.momentum_buffer = buf;
          this.state.set(p, st);
          d = this.flag(g, "nesterov") ? add(d, mul(buf, hyper(momentum))) : buf;
        }
        p.impl = add(p, mul(d, hyper(-lr))).impl;
      }
    }
  }
}
