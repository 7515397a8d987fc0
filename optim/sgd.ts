// SGD with momentum, dampening, Nesterov, weight decay and maximize (torch.optim.SGD's rule).

import { add, mul } from "../tensor/ops/core.ts";
import type { Tensor } from "../tensor/tensor.ts";
import {
  Optimizer,
  type ParamGroup,
  type ParamGroupInput,
  type Scalars,
  zeroState,
} from "./optimizer.ts";

/** Numbers prepareStep gives per parameter (see update). */
const PER_PARAM = 5;

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

  protected override validate(g: ParamGroup): void {
    if (this.num(g, "lr") < 0) throw new Error(`invalid learning rate ${g.lr}`);
    if (this.num(g, "momentum") < 0) throw new Error(`invalid momentum ${g.momentum}`);
    if (this.num(g, "weightDecay") < 0) throw new Error(`invalid weightDecay ${g.weightDecay}`);
    if (this.flag(g, "nesterov") && (this.num(g, "momentum") <= 0 || this.num(g, "dampening"))) {
      throw new Error("Nesterov momentum requires a momentum and zero dampening");
    }
  }

  protected structure(g: ParamGroup): string {
    const flags = [
      this.num(g, "momentum") !== 0,
      this.num(g, "weightDecay") !== 0,
      this.flag(g, "nesterov"),
      this.flag(g, "maximize"),
    ];
    return flags.map((b) => (b ? 1 : 0)).join("");
  }

  /**
   * The momentum buffer starts as zeros with coefficients (0, 1) on its first step, so that
   * buf = 0·0 + 1·d = d is PyTorch's clone of the first d exactly, and every step has one code.
   */
  prepareStep(params: readonly Tensor[]): number[] {
    const out: number[] = [];
    for (const p of params) {
      const g = this.groupOf(p);
      const momentum = this.num(g, "momentum");
      let first = false;
      if (momentum === 0) {
        if (!this.state.has(p)) this.initState(p, { momentum_buffer: null });
      } else {
        const st = this.state.get(p) ?? this.initState(p, { momentum_buffer: null });
        if (st.momentum_buffer === null || st.momentum_buffer === undefined) {
          st.momentum_buffer = zeroState(p);
          first = true;
        }
      }
      out.push(
        this.num(g, "weightDecay"),
        first ? 0 : momentum,
        first ? 1 : 1 - this.num(g, "dampening"),
        momentum,
        -this.num(g, "lr"),
      );
    }
    return out;
  }

  protected update(params: readonly Tensor[], s: Scalars): void {
    for (const [i, p] of params.entries()) {
      const k = i * PER_PARAM;
      const g = this.groupOf(p);
      let d = this.gradOf(p, g);
      if (this.num(g, "weightDecay") !== 0) d = add(d, mul(p, s(k)));
      if (this.num(g, "momentum") !== 0) {
        const buf = this.state.get(p)!.momentum_buffer as Tensor;
        const next = add(mul(buf, s(k + 1)), mul(d, s(k + 2)));
        buf.impl = next.impl;
        d = this.flag(g, "nesterov") ? add(d, mul(next, s(k + 3))) : next;
      }
      p.impl = add(p, mul(d, s(k + 4))).impl;
    }
  }
}
