// LR schedulers (torch.optim.lr_scheduler, PyTorch 1.13's chainable rules): each step() sets
// every group's lr from its current lr and the epoch count. Construction records base lrs
// (`initialLr` in each group) and takes step 0, as PyTorch does. SequentialLR chains schedulers
// at milestones, restarting each at epoch 0 with PyTorch's closed forms.

import { type Optimizer, runHostWork } from "./optimizer.ts";

export type SchedulerStateDict = Record<string, number | number[]>;

export abstract class LRScheduler {
  readonly optimizer: Optimizer;
  readonly baseLrs: number[];
  lastEpoch = -1;
  private lastLr: number[] = [];

  constructor(optimizer: Optimizer) {
    this.optimizer = optimizer;
    for (const g of optimizer.paramGroups) if (g.initialLr === undefined) g.initialLr = g.lr;
    this.baseLrs = optimizer.paramGroups.map((g) => g.initialLr as number);
  }

  /** Call at the end of the subclass constructor: PyTorch's initial step (epoch 0). */
  protected init(): void {
    this.step();
  }

  /** Each group's next lr, given its current one (`this.lastEpoch` already advanced). */
  protected abstract nextLr(lr: number, base: number, group: number): number;

  /** The lr at `this.lastEpoch` from the base lr alone (PyTorch's _get_closed_form_lr). */
  protected closedFormLr(_base: number, _group: number): number | undefined {
    return undefined;
  }

  /**
   * Jumps to `epoch` (PyTorch's deprecated `step(epoch)`: the closed form where there is one),
   * as SequentialLR restarts a scheduler at its milestone.
   */
  stepTo(epoch: number): void {
    runHostWork(() => {
      this.lastEpoch = epoch;
      this.optimizer.paramGroups.forEach((g, i) => {
        g.lr = this.closedFormLr(this.baseLrs[i]!, i) ?? this.nextLr(g.lr as number, this.baseLrs[i]!, i);
      });
      this.lastLr = this.optimizer.paramGroups.map((g) => g.lr as number);
    }, () => this.snapshot());
  }

  /**
   * Advances the epoch and sets every group's lr. Host work only: inside a compiled step it
   * runs again on every call, before the program (which reads lr as an input).
   */
  step(): void {
    runHostWork(() => this.advance(), () => this.snapshot());
  }

  private advance(): void {
    this.lastEpoch++;
    this.optimizer.paramGroups.forEach((g, i) => {
      g.lr = this.nextLr(g.lr as number, this.baseLrs[i], i);
    });
    this.lastLr = this.optimizer.paramGroups.map((g) => g.lr as number);
  }

  /** Saves what step() changes; returns what puts it back (a trace at another size). */
  snapshot(): () => void {
    const { lastEpoch, lastLr } = this;
    const lrs = this.optimizer.paramGroups.map((g) => g.lr);
    return () => {
      this.lastEpoch = lastEpoch;
      this.lastLr = lastLr;
      this.optimizer.paramGroups.forEach((g, i) => (g.lr = lrs[i]!));
    };
  }

  /** The lrs the last step() set, one per group. */
  getLastLr(): number[] {
    return [...this.lastLr];
  }

  protected own(): Record<string, number | number[]> {
    return {};
  }

  stateDict(): SchedulerStateDict {
    return {
      ...this.own(),
      base_lrs: [...this.baseLrs],
      last_epoch: this.lastEpoch,
      _last_lr: this.getLastLr(),
    };
  }

  loadStateDict(sd: SchedulerStateDict): void {
    this.lastEpoch = sd.last_epoch as number;
    this.baseLrs.splice(0, this.baseLrs.length, ...(sd.base_lrs as number[]));
    this.lastLr = [...(sd._last_lr as number[])];
  }
}

export class StepLR extends LRScheduler {
  constructor(optimizer: Optimizer, readonly stepSize: number, readonly gamma = 0.1) {
    super(optimizer);
    this.init();
  }
  protected nextLr(lr: number): number {
    return this.lastEpoch === 0 || this.lastEpoch % this.stepSize !== 0 ? lr : lr * this.gamma;
  }
  protected override closedFormLr(base: number): number {
    return base * this.gamma ** Math.floor(this.lastEpoch / this.stepSize);
  }
  protected override own() {
    return { step_size: this.stepSize, gamma: this.gamma };
  }
}

export class MultiStepLR extends LRScheduler {
  constructor(optimizer: Optimizer, readonly milestones: number[], readonly gamma = 0.1) {
    super(optimizer);
    this.init();
  }
  protected nextLr(lr: number): number {
    const hits = this.milestones.filter((m) => m === this.lastEpoch).length;
    return hits === 0 ? lr : lr * this.gamma ** hits;
  }
  protected override closedFormLr(base: number): number {
    return base * this.gamma ** bisectRight(this.milestones, this.lastEpoch);
  }
  protected override own() {
    return { milestones: [...this.milestones], gamma: this.gamma };
  }
}

export class LinearLR extends LRScheduler {
  constructor(
    optimizer: Optimizer,
    readonly startFactor = 1 / 3,
    readonly endFactor = 1,
    readonly totalIters = 5,
  ) {
    super(optimizer);
    if (!(startFactor > 0 && startFactor <= 1) || !(endFactor >= 0 && endFactor <= 1)) {
      throw new Error("LinearLR factors must lie in (0, 1] (start) and [0, 1] (end)");
    }
    this.init();
  }
  protected nextLr(lr: number): number {
    const e = this.lastEpoch;
    if (e === 0) return lr * this.startFactor;
    if (e > this.totalIters) return lr;
    const d = this.endFactor - this.startFactor;
    return lr * (1 + d / (this.totalIters * this.startFactor + (e - 1) * d));
  }
  protected override closedFormLr(base: number): number {
    const d = this.endFactor - this.startFactor;
    return base * (this.startFactor + (d * Math.min(this.totalIters, this.lastEpoch)) / this.totalIters);
  }
  protected override own() {
    return {
      start_factor: this.startFactor,
      end_factor: this.endFactor,
      total_iters: this.totalIters,
    };
  }
}

export class CosineAnnealingLR extends LRScheduler {
  constructor(optimizer: Optimizer, readonly tMax: number, readonly etaMin = 0) {
    super(optimizer);
    this.init();
  }
  protected nextLr(lr: number, base: number): number {
    const e = this.lastEpoch;
    const t = this.tMax;
    if (e === 0) return lr;
    const m = 2 * t;
    if ((((e - 1 - t) % m) + m) % m === 0) {
      return lr + ((base - this.etaMin) * (1 - Math.cos(Math.PI / t))) / 2;
    }
    const ratio = (1 + Math.cos((Math.PI * e) / t)) / (1 + Math.cos((Math.PI * (e - 1)) / t));
    return ratio * (lr - this.etaMin) + this.etaMin;
  }
  protected override closedFormLr(base: number): number {
    return this.etaMin + ((base - this.etaMin) * (1 + Math.cos((Math.PI * this.lastEpoch) / this.tMax))) / 2;
  }
  protected override own() {
    return { T_max: this.tMax, eta_min: this.etaMin };
  }
}

export class LambdaLR extends LRScheduler {
  private readonly lambdas: ((epoch: number) => number)[];
  constructor(
    optimizer: Optimizer,
    lrLambda: ((epoch: number) => number) | ((epoch: number) => number)[],
  ) {
    super(optimizer);
    const n = optimizer.paramGroups.length;
    this.lambdas = Array.isArray(lrLambda) ? lrLambda : Array(n).fill(lrLambda);
    if (this.lambdas.length !== n) throw new Error(`expected ${n} lr lambdas`);
    this.init();
  }
  protected nextLr(_lr: number, base: number, group: number): number {
    return base * this.lambdas[group](this.lastEpoch);
  }
}

/** SequentialLR's state: its own counters and each scheduler's state dict. */
export interface SequentialStateDict {
  last_epoch: number;
  _milestones: number[];
  _last_lr: number[];
  _schedulers: SchedulerStateDict[];
}

/** The number of sorted `xs` that are <= v (Python's bisect_right). */
function bisectRight(xs: readonly number[], v: number): number {
  let n = 0;
  for (const x of xs) if (x <= v) n++;
  return n;
}

/**
 * SequentialLR(opt, schedulers, milestones): schedulers[i] drives the lr from milestones[i-1] on,
 * restarted at its own epoch 0 (PyTorch 1.13's rule: a linear warm-up then cosine annealing is
 * `new SequentialLR(opt, [new LinearLR(opt, 0.1, 1, 100), new CosineAnnealingLR(opt, 900)],
 * [100])`). Construction undoes the schedulers' own initial steps and takes the first's.
 */
export class SequentialLR {
  readonly optimizer: Optimizer;
  lastEpoch: number;
  private lastLr: number[];

  constructor(
    optimizer: Optimizer,
    readonly schedulers: readonly LRScheduler[],
    readonly milestones: readonly number[],
  ) {
    if (schedulers.length === 0) throw new Error("SequentialLR expects at least one scheduler");
    if (milestones.length !== schedulers.length - 1) {
      throw new Error(
        `SequentialLR expects ${schedulers.length - 1} milestone(s) for ${schedulers.length} ` +
          `schedulers, got ${milestones.length}`,
      );
    }
    schedulers.forEach((s, i) => {
      if (s.optimizer !== optimizer) {
        throw new Error(`SequentialLR: scheduler ${i} belongs to another optimizer`);
      }
    });
    this.optimizer = optimizer;
    this.lastEpoch = 0;
    for (const g of optimizer.paramGroups) g.lr = g.initialLr as number;
    for (const s of schedulers) s.lastEpoch -= 1;
    schedulers[0]!.step();
    this.lastLr = schedulers[0]!.getLastLr();
  }

  step(): void {
    runHostWork(() => {
      this.lastEpoch++;
      const idx = bisectRight(this.milestones, this.lastEpoch);
      const s = this.schedulers[idx]!;
      if (idx > 0 && this.milestones[idx - 1] === this.lastEpoch) s.stepTo(0);
      else s.step();
      this.lastLr = s.getLastLr();
    }, () => this.snapshot());
  }

  getLastLr(): number[] {
    return [...this.lastLr];
  }

  private snapshot(): () => void {
    const { lastEpoch, lastLr } = this;
    const subs = this.schedulers.map((s) => s.snapshot());
    return () => {
      for (const undo of subs) undo();
      this.lastEpoch = lastEpoch;
      this.lastLr = lastLr;
    };
  }

  stateDict(): SequentialStateDict {
    return {
      last_epoch: this.lastEpoch,
      _milestones: [...this.milestones],
      _last_lr: this.getLastLr(),
      _schedulers: this.schedulers.map((s) => s.stateDict()),
    };
  }

  loadStateDict(sd: SequentialStateDict): void {
    this.lastEpoch = sd.last_epoch;
    this.lastLr = [...sd._last_lr];
    sd._schedulers.forEach((s, i) => this.schedulers[i]?.loadStateDict(s));
  }
}
