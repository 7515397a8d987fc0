// Building a Kernel: buffer and size parameters, nested loops and statements, then `build()`
// freezes it. A small mutable scaffold over kir.ts's immutable statements, so generators read
// top-down (open a loop, emit into it, open the next) the way the kernels run.

import type { ElementType } from "../../ir/shape.ts";
import {
  type Access,
  type Ix,
  type IxAtom,
  type IxCmp,
  type Kernel,
  type KernelBuffer,
  type LoopTag,
  Pool,
  type Stmt,
  type Sx,
} from "./kir.ts";

/** A statement list being filled. */
export type Block = Stmt[];

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class KernelBuilder {
  readonly pool = new Pool();
  readonly root: Block = [];
  private readonly bufs: KernelBuffer[] = [];
  private sizeCount = 0;

  /** A buffer parameter; returns its index. */
  buf(type: ElementType, access: Access, name: string): number {
    this.bufs.push({ type, access, name });
    return this.bufs.length - 1;
  }

  get bufferCount(): number {
    return this.bufs.length;
  }

  /** Marks buffer `i` as read as well as written (an accumulating output). */
  markReadWrite(i: number): void {
    const b = this.bufs[i]!;
    if (b.access !== "rw") this.bufs[i] = { ...b, access: "rw" };
  }

  /** A new size parameter. */
  size(): Ix {
    return this.pool.size(this.sizeCount++);
  }

  /** Opens a loop `for v in [lo, hi)` as the last statement of `parent`. */
  loop(
    parent: Block,
    lo: Ix,
    hi: Ix,
    tag: LoopTag,
    range?: 0 | 1,
  ): { v: IxAtom; body: Block } {
    const v = this.pool.newVar();
    const body: Block = [];
    const stmt: Mutable<Extract<Stmt, { k: "loop" }>> = { k: "loop", v: v.id, lo, hi, tag, body };
    if (range !== undefined) stmt.range = range;
    parent.push(stmt);
    return { v, body };
  }

  /** Nested loops over `extents` in `parent` (from 0); the innermost block and the variables. */
  nest(parent: Block, extents: readonly Ix[], tag: LoopTag): { body: Block; vars: Ix[] } {
    let b = parent;
    const vars: Ix[] = [];
    for (const e of extents) {
      const l = this.loop(b, this.pool.c(0), e, tag);
      vars.push(l.v);
      b = l.body;
    }
    return { body: b, vars };
  }

  store(at: Block, buf: number, index: Ix, value: Sx): void {
    at.push({ k: "store", buf, index, value });
  }

  /** Declares an accumulator initialized to `value`; returns its current-value node. */
  accInit(at: Block, type: ElementType, value: Sx): { id: number; value: Sx } {
    const id = this.pool.newAcc();
    at.push({ k: "accInit", acc: id, type, value });
    return { id, value: this.pool.acc(type, id) };
  }

  accSet(at: Block, accs: readonly number[], values: readonly Sx[], combiner?: string): void {
    at.push({ k: "accSet", accs: [...accs], values: [...values], ...(combiner && { combiner }) });
  }

  /** Opens `if (when) { ... }` in `at`. */
  when(at: Block, when: readonly IxCmp[]): Block {
    const body: Block = [];
    at.push({ k: "if", when: [...when], body });
    return body;
  }

  build(name: string, comment: string, ranges: 0 | 1 | 2): Kernel {
    return {
      name,
      comment,
      bufs: [...this.bufs],
      sizes: this.sizeCount,
      ranges,
      body: this.root,
      vars: this.pool.vars,
      accs: this.pool.accs,
    };
  }
}
