// Module code generation for the `js` backend: one program function per computation that runs
// as a program (the ENTRY, call/while/conditional targets, fusions without a fast kernel,
// reducers too complex to inline), which allocates each instruction's result and calls one
// generated kernel per instruction or per fusion. Fusions map to their kernels by kind (the
// fusion contract shared with passes/fuse.ts): kLoop → one loop nest; kInput → one row kernel
// (reductions, then the epilogue); kOutput → the dot/convolution kernel with its epilogue run
// on each finished block of rows. A fusion that does not fit its kind's kernel runs its fused
// computation per instruction (correct, slower) and says so under KILN_LOGS=fusion. Values are
// typed arrays (Literal storage, never mutated once made) and JS arrays for tuples.

import { roundToBF16, roundToF16 } from "../../ir/literal.ts";
import { type Extent, extentsOf, reduceExtentsOf } from "../../ir/extents.ts";
import { OPCODE_INFO } from "../../ir/opcodes.ts";
import type { Computation, Instruction, Module } from "../../ir/module.ts";
import { type ArrayShape, type ElementType, type Shape, shapeToString } from "../../ir/shape.ts";
import { log } from "../../util/log.ts";
import { arrayOf, isExpressible, isFloatT, NotFast, stridesOf } from "./codegen_expr.ts";
import {
  genDynamicUpdateSliceKernel,
  genGatherKernel,
  genScatterKernel,
  genSortKernel,
} from "./codegen_indexing.ts";
import { genLoopKernel, type KernelCtx } from "./codegen_loop.ts";
import { genReduceKernel, genReduceWindowKernel, storageName } from "./codegen_reduce.ts";
import { commentText, ExtTable } from "./emitter.ts";
import { conv, planConv } from "./kernels_conv.ts";
import { dotFloat, dotInt, planDot } from "./kernels_dot.ts";
import { bitcastArray, convertArray } from "./runtime_lib.ts";

function sanitize(s: string): string {
  return s.replace(/[^A-Za-z0-9_]/g, "_").slice(0, 40);
}

function count(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** `%add.3 = f32[4,16] add(%x, %y)` (for comments in the generated source). */
export function describe(instr: Instruction): string {
  const ops = instr.operands.map((o) => `%${o.name}`).join(", ");
  const kind = instr.attrs.fusionKind ? ` kind=${instr.attrs.fusionKind}` : "";
  const called = instr.called.length ? ` calls=${instr.called.map((c) => c.name).join(",")}` : "";
  const text = `%${instr.name} = ${shapeToString(instr.shape, false)} ${instr.opcode}(${ops})`;
  return commentText(text + kind + called);
}

/** Test seams of code generation (see `alloc`). */
export const codegenTesting = { poison: false };

/** Generates the JavaScript source of a module. */
export class ModuleGen implements KernelCtx {
  readonly ext = new ExtTable();
  /** Data arrays of constants (results that alias them are copied before they are returned). */
  readonly constants = new Set<object>();
  private readonly functions: string[] = [];
  private derived: Map<Instruction, (string | undefined)[]> | undefined;
  private readonly programs = new Map<Computation, string>();
  private kernels = 0;

  constructor(readonly module: Module) {}

  kernelName(hint: string): string {
    return `k${this.kernels++}_${sanitize(hint)}`;
  }

  addFunction(source: string): void {
    this.functions.push(source);
  }

  program(c: Computation): string {
    const known = this.programs.get(c);
    if (known !== undefined) return known;
    const name = `c${this.programs.size}_${sanitize(c.name)}`;
    this.programs.set(c, name);
    this.genProgram(c, name);
    return name;
  }

  /** The whole module source: the table of externals, every function, the entry returned. */
  source(): string {
    const entry = this.program(this.module.entry);
    return [
      `// Kiln js backend: module '${commentText(this.module.name)}'`,
      `"use strict";`,
      ...this.ext.declarations(),
      "",
      ...this.functions.flatMap((f) => [f, ""]),
      `return ${entry};`,
    ].join("\n");
  }

  // ---- programs ------------------------------------------------------------------------------

  private genProgram(c: Computation, name: string): void {
    const params = c.parameters.map((_, i) => `p${i}`);
    const lines: string[] = [];
    const vals = new Map<Instruction, string>();
    for (const instr of c.instructions) this.emit(instr, vals, lines);
    lines.push(`return ${vals.get(c.root)!};`);
    const body = lines.map((l) => `  ${l}`).join("\n");
    const header = `function ${name}(${params.join(", ")}) {`;
    this.addFunction(`// computation ${commentText(c.name)}\n${header}\n${body}\n}`);
  }

  /**
   * How far each output dim of an ENTRY instruction must be computed, as JS expressions over
   * the size parameters, from its extent hint (ir/extents.ts); undefined: all of it.
   */
  private limits(instr: Instruction): (string | undefined)[] | undefined {
    return this.hintLimits(instr) ?? this.derivedLimits().get(instr);
  }

  /**
   * Limits for ENTRY instructions without a hint, derived from what their users compute: an
   * elementwise user (or a kLoop fusion reading it elementwise) that computes only part of its
   * result reads only that part; a row reduction (or kInput fusion) reads the rows it computes
   * whole; a dot reads the lhs rows and rhs columns it computes. A dim is limited only when every
   * user limits it the same way. The masks and masked copies the dynamic padder makes for a
   * reduction or a dot have no hint of their own (the reduction reads their padding); this is
   * what lets their other dims shrink too.
   */
  private derivedLimits(): Map<Instruction, (string | undefined)[]> {
    if (this.derived) return this.derived;
    const derived = new Map<Instruction, (string | undefined)[]>();
    this.derived = derived;
    const entry = this.module.entry;
    const eff = (u: Instruction) => this.hintLimits(u) ?? derived.get(u);
    for (const I of [...entry.instructions].reverse()) {
      if (I.shape.kind !== "array" || I === entry.root) continue;
      if (I.opcode === "parameter" || I.opcode === "constant") continue;
      if (this.hintLimits(I) !== undefined || I.users.length === 0) continue;
      let acc: (string | undefined)[] | undefined;
      let ok = true;
      for (const u of I.users) {
        // A float dot with a reduction hint contracts only up to it (contractLimit).
        const contract =
          u.opcode === "dot" && isFloatT(arrayOf(u).type) ? this.reduceLimits(u, u) : undefined;
        const d = demandOf(u, I, eff(u), contract);
        if (!d) {
          ok = false;
          break;
        }
        acc = acc ? acc.map((x, k) => (x !== undefined && x === d[k] ? x : undefined)) : d;
      }
      if (ok && acc && acc.some((x) => x !== undefined)) derived.set(I, acc);
    }
    return derived;
  }

  /** Limits from the instruction's own extent hint (ENTRY only). */
  private hintLimits(instr: Instruction): (string | undefined)[] | undefined {
    if (instr.parent !== this.module.entry || instr.shape.kind !== "array") return undefined;
    return this.exprs(extentsOf(instr), instr.shape.dims);
  }

  /**
   * Per dim of the operand of a reduce (or of a dot's lhs), how far the reduction must run
   * (its reduction hint), when `at` — the reduce, or the fusion holding it — is in the ENTRY.
   */
  reduceLimits(r: Instruction, at: Instruction): (string | undefined)[] | undefined {
    if (at.parent !== this.module.entry) return undefined;
    const operand = r.operand(0);
    if (operand.shape.kind !== "array") return undefined;
    return this.exprs(reduceExtentsOf(r), operand.shape.dims);
  }

  /** The reduction limits every reduce of a fused computation shares, if they all agree. */
  private fusedReduceLimits(
    comp: Computation,
    at: Instruction,
  ): (string | undefined)[] | undefined {
    const rs = comp.instructions.filter((i) => i.opcode === "reduce");
    if (rs.length === 0) return undefined;
    const all = rs.map((r) => this.reduceLimits(r, at));
    const key = JSON.stringify(all[0] ?? null);
    return all.every((l) => JSON.stringify(l ?? null) === key) ? all[0] : undefined;
  }

  /** JS expressions `min(bound, max(0, a * size + c))` for hints over dims of `dims`. */
  private exprs(
    hint: readonly Extent[] | undefined,
    dims: readonly number[],
  ): (string | undefined)[] | undefined {
    if (!hint) return undefined;
    const params = this.module.entry.parameters;
    const out: (string | undefined)[] = dims.map(() => undefined);
    for (const e of hint) {
      const p = params[e.param];
      const ok =
        e.dim < dims.length &&
        p !== undefined &&
        p.attrs.parameterNumber === e.param &&
        p.shape.kind === "array" &&
        p.shape.type === "s32" &&
        p.shape.dims.length === 0;
      if (!ok) continue;
      const n = e.a === 1 && e.c === 0 ? `p${e.param}[0]` : `${e.a} * p${e.param}[0] + ${e.c}`;
      out[e.dim] = `Math.min(${dims[e.dim]}, Math.max(0, ${n}))`;
    }
    return out.some((x) => x !== undefined) ? out : undefined;
  }

  /**
   * A new result array. For an instruction with an extent hint under `codegenTesting.poison`,
   * filled with NaN (floats) or an extreme integer, so tests show that no result depends on
   * what the kernels skipped.
   */
  private alloc(s: Shape, hinted?: Instruction): string {
    if (s.kind !== "array") throw new Error("alloc of a tuple shape");
    const fresh = `new ${storageName(s.type)}(${count(s.dims)})`;
    if (!codegenTesting.poison || !hinted || this.limits(hinted) === undefined) return fresh;
    const junk = isFloatT(s.type)
      ? "NaN"
      : s.type === "s64"
        ? "-(2n ** 62n)"
        : s.type === "s32"
          ? "1000000007"
          : "201";
    return `${fresh}.fill(${junk})`;
  }

  private emit(instr: Instruction, vals: Map<Instruction, string>, lines: string[]): void {
    const v = `v${instr.id}`;
    const ops = instr.operands.map((o) => vals.get(o)!);
    const set = (code: string) => {
      lines.push(`const ${v} = ${code}; // ${describe(instr)}`);
      vals.set(instr, v);
    };
    switch (instr.opcode) {
      case "parameter":
        vals.set(instr, `p${instr.attrs.parameterNumber!}`);
        return;
      case "constant": {
        const data = instr.attrs.literal!.data;
        this.constants.add(data);
        vals.set(instr, this.ext.ref(data, `data of %${instr.name}`));
        return;
      }
      case "reshape":
      case "copy":
        // Values are never mutated, and a reshape keeps row-major order: same storage.
        vals.set(instr, ops[0]!);
        return;
      case "tuple":
        set(`[${ops.join(", ")}]`);
        return;
      case "get-tuple-element":
        set(`${ops[0]!}[${instr.attrs.tupleIndex!}]`);
        return;
      case "bitcast-convert": {
        const f = this.ext.ref(bitcastArray, "bitcastArray");
        const from = arrayOf(instr.operand(0)).type;
        set(`${f}(${ops[0]!}, "${from}", "${arrayOf(instr).type}")`);
        return;
      }
      case "call":
        set(`${this.program(instr.called[0]!)}(${ops.join(", ")})`);
        return;
      case "while": {
        const cond = this.program(instr.called[0]!);
        const body = this.program(instr.called[1]!);
        lines.push(`let ${v} = ${ops[0]!}; // ${describe(instr)}`);
        lines.push(`while (${cond}(${v})[0] !== 0) ${v} = ${body}(${v});`);
        vals.set(instr, v);
        return;
      }
      case "conditional": {
        const n = instr.called.length;
        const sel = `${ops[0]!}[0]`;
        const branch =
          arrayOf(instr.operand(0)).type === "pred"
            ? `(${sel} !== 0 ? 0 : 1)`
            : `(${sel} < 0 || ${sel} >= ${n} ? ${n - 1} : ${sel})`;
        lines.push(`let ${v}; // ${describe(instr)}`);
        lines.push(`switch (${branch}) {`);
        instr.called.forEach((c, i) => {
          lines.push(`  case ${i}: ${v} = ${this.program(c)}(${ops[i + 1]!}); break;`);
        });
        lines.push(`}`);
        vals.set(instr, v);
        return;
      }
      case "get-dimension-size": {
        const d = arrayOf(instr.operand(0)).dims[instr.attrs.dimensions![0]!]!;
        const data = Int32Array.of(d);
        this.constants.add(data);
        vals.set(instr, this.ext.ref(data, `size ${d}`, `dimsize:${d}`));
        return;
      }
      case "fusion":
        this.emitFusion(instr, ops, v, lines);
        vals.set(instr, v);
        return;
      case "dot":
      case "convolution": {
        const leafVals = new Map<Instruction, string>(instr.operands.map((o, i) => [o, ops[i]!]));
        this.emitContraction(instr, instr, undefined, leafVals, v, lines);
        vals.set(instr, v);
        return;
      }
      case "reduce": {
        const leaves = [...new Set(instr.operands)];
        const name = this.kernelName(instr.name);
        const outs = genReduceKernel(this, {
          name,
          comment: describe(instr),
          root: instr,
          leaves,
          limits: this.limits(instr),
          reduceLimits: this.reduceLimits(instr, instr),
        });
        const args = [...leaves.map((l) => vals.get(l)!), ...outs.limitArgs];
        this.callMulti(instr, name, outs.shapes, args, v, lines);
        vals.set(instr, v);
        return;
      }
      case "reduce-window": {
        const name = this.kernelName(instr.name);
        genReduceWindowKernel(this, name, describe(instr), instr);
        const shapes = instr.shape.kind === "array" ? [instr.shape] : instr.shape.elements;
        this.callMulti(instr, name, shapes.map((s) => s as ArrayShape), ops, v, lines);
        vals.set(instr, v);
        return;
      }
      case "gather": {
        const name = this.kernelName(instr.name);
        genGatherKernel(this, name, describe(instr), instr);
        set(this.alloc(instr.shape));
        if (count(arrayOf(instr).dims) > 0) lines.push(`${name}(${v}, ${ops[0]}, ${ops[1]});`);
        return;
      }
      case "scatter": {
        const n = (ops.length - 1) / 2;
        const name = this.kernelName(instr.name);
        genScatterKernel(this, name, describe(instr), instr);
        const outs = ops.slice(0, n).map((o, i) => {
          lines.push(`const ${v}_${i} = ${o}.slice();`);
          return `${v}_${i}`;
        });
        lines.push(`${name}(${[...outs, ...ops.slice(n)].join(", ")});`);
        set(n === 1 ? outs[0]! : `[${outs.join(", ")}]`);
        return;
      }
      case "sort": {
        const name = this.kernelName(instr.name);
        const dims = arrayOf(instr.operand(0)).dims;
        const outs = instr.operands.map((o, i) => {
          lines.push(`const ${v}_${i} = ${this.alloc(o.shape)};`);
          return `${v}_${i}`;
        });
        if (count(dims) > 0) {
          genSortKernel(this, name, describe(instr), instr);
          lines.push(`${name}(${[...outs, ...ops].join(", ")});`);
        }
        set(outs.length === 1 ? outs[0]! : `[${outs.join(", ")}]`);
        return;
      }
      case "dynamic-update-slice": {
        lines.push(`const ${v} = ${ops[0]!}.slice(); // ${describe(instr)}`);
        vals.set(instr, v);
        if (count(arrayOf(instr.operand(1)).dims) > 0) {
          const name = this.kernelName(instr.name);
          genDynamicUpdateSliceKernel(this, name, describe(instr), instr);
          lines.push(`${name}(${v}, ${ops.slice(1).join(", ")});`);
        }
        return;
      }
      case "set-dimension-size":
      case "custom-call":
        // Rejected before code generation (runtime/js/backend.ts).
        throw new Error(`js: ${instr.opcode} reached code generation`);
      default:
        break;
    }
    if (!isExpressible(instr)) throw new Error(`js: no code generator for ${instr.opcode}`);
    const leaves = [...new Set(instr.operands)];
    const name = this.kernelName(instr.name);
    set(this.alloc(instr.shape, instr));
    if (count(arrayOf(instr).dims) === 0) return;
    const comment = describe(instr);
    const limits = this.limits(instr);
    const k = genLoopKernel(this, { name, comment, root: instr, leaves, group: 1, limits });
    const args = leaves.map((l) => vals.get(l)!);
    lines.push(`${name}(${[v, "0", k.rowLimit, ...args, ...k.limitArgs].join(", ")});`);
  }

  /** Allocates the outputs of a multi-output kernel, calls it, names the (tuple) result. */
  private callMulti(
    instr: Instruction,
    name: string,
    shapes: readonly ArrayShape[],
    args: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const outs = shapes.map((s, i) => {
      lines.push(`const ${v}_${i} = ${this.alloc(s, shapes.length === 1 ? instr : undefined)};`);
      return `${v}_${i}`;
    });
    if (shapes.some((s) => count(s.dims) > 0)) {
      lines.push(`${name}(${[...outs, ...args].join(", ")});`);
    }
    const tuple = instr.shape.kind === "tuple";
    lines.push(`const ${v} = ${tuple ? `[${outs.join(", ")}]` : outs[0]!}; // ${describe(instr)}`);
  }

  // ---- fusions -------------------------------------------------------------------------------

  private emitFusion(instr: Instruction, ops: readonly string[], v: string, lines: string[]): void {
    const comp = instr.called[0]!;
    const kind = instr.attrs.fusionKind ?? "kLoop";
    const local: string[] = [];
    try {
      switch (kind) {
        case "kLoop":
          this.loopFusion(instr, comp, ops, v, local);
          break;
        case "kInput":
          this.inputFusion(instr, comp, ops, v, local);
          break;
        case "kOutput":
          this.outputFusion(instr, comp, ops, v, local);
          break;
        case "kCustom":
          throw new NotFast("kCustom fusions have no fast kernel");
        default: {
          const never: never = kind;
          throw new NotFast(`unknown fusion kind ${String(never)}`);
        }
      }
      lines.push(...local);
    } catch (e) {
      if (!(e instanceof NotFast)) throw e;
      log("fusion", `js: %${instr.name} (${kind}) runs per instruction: ${e.message}`);
      lines.push(`const ${v} = ${this.program(comp)}(${ops.join(", ")}); // ${describe(instr)}`);
    }
  }

  private loopFusion(
    instr: Instruction,
    comp: Computation,
    ops: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const root = comp.root;
    if (root.shape.kind !== "array") throw new NotFast("the fused root is a tuple");
    const name = this.kernelName(comp.name);
    lines.push(`const ${v} = ${this.alloc(root.shape, instr)}; // ${describe(instr)}`);
    if (count(root.shape.dims) === 0) return;
    const k = genLoopKernel(this, {
      name,
      comment: describe(instr),
      root,
      leaves: comp.parameters,
      group: 1,
      limits: this.limits(instr),
    });
    lines.push(`${name}(${[v, "0", k.rowLimit, ...ops, ...k.limitArgs].join(", ")});`);
  }

  private inputFusion(
    instr: Instruction,
    comp: Computation,
    ops: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const name = this.kernelName(comp.name);
    const outs = genReduceKernel(this, {
      name,
      comment: describe(instr),
      root: comp.root,
      leaves: comp.parameters,
      limits: this.limits(instr),
      reduceLimits: this.fusedReduceLimits(comp, instr),
    });
    this.callMulti(instr, name, outs.shapes, [...ops, ...outs.limitArgs], v, lines);
  }

  private outputFusion(
    instr: Instruction,
    comp: Computation,
    ops: readonly string[],
    v: string,
    lines: string[],
  ): void {
    const contractions = comp.instructions.filter(
      (i) => i.opcode === "dot" || i.opcode === "convolution",
    );
    if (contractions.length !== 1) {
      throw new NotFast(`expected one dot or convolution, found ${contractions.length}`);
    }
    const D = contractions[0]!;
    for (const i of comp.instructions) {
      if (i !== D && !isExpressible(i)) {
        throw new NotFast(`%${i.name} (${i.opcode}) is not elementwise or data movement`);
      }
    }
    if (comp.root.shape.kind !== "array") throw new NotFast("the fused root is a tuple");
    const leafVals = new Map<Instruction, string>(comp.parameters.map((p, i) => [p, ops[i]!]));
    this.emitContraction(instr, D, comp.root === D ? undefined : comp.root, leafVals, v, lines);
  }

  /**
   * A dot or convolution `D` writing `v`, or with an epilogue `root` (a kOutput fusion) writing
   * its result to `v`. `leafVals` maps D's computation's leaves to program values; operands that
   * are not leaves (a transpose of a parameter, say) are materialized first.
   */
  private emitContraction(
    instr: Instruction,
    D: Instruction,
    root: Instruction | undefined,
    leafVals: Map<Instruction, string>,
    v: string,
    lines: string[],
  ): void {
    const t = arrayOf(D).type;
    const leaves = [...leafVals.keys()];
    const operand = (i: number): View => {
      const o = D.operand(i);
      const view = viewOf(o, leafVals);
      let code = view?.code;
      if (code === undefined) {
        const name = this.kernelName(o.name);
        const k = genLoopKernel(this, {
          name,
          comment: `operand ${i} of ${describe(D)}`,
          root: o,
          leaves,
          group: 1,
        });
        code = `${v}_op${i}`;
        lines.push(`const ${code} = ${this.alloc(o.shape)};`);
        if (count(arrayOf(o).dims) > 0) {
          const args = leaves.map((l) => leafVals.get(l)!);
          lines.push(`${name}(${[code, "0", String(k.rows), ...args].join(", ")});`);
        }
      }
      const from = arrayOf(o).type;
      if (from !== t) {
        const f = this.ext.ref(convertArray, "convertArray");
        code = `${f}(${code}, "${from}", "${t}")`;
      }
      return { code, strides: view?.strides ?? stridesOf(arrayOf(o).dims) };
    };
    const A = operand(0);
    const B = operand(1);
    const dShape = arrayOf(D);
    const target = root ? `${v}_t` : v;
    if (root) lines.push(`const ${target} = ${this.alloc(dShape, instr)};`);
    lines.push(`const ${v} = ${this.alloc(root ? root.shape : dShape, instr)}; // ${describe(instr)}`);
    if (count(dShape.dims) === 0 && (!root || count(arrayOf(root).dims) === 0)) return;
    let epi = "null";
    let after = "";
    // The extent hint of what this writes (the fusion's, i.e. its root's, or the dot's).
    const limits = this.limits(instr);
    let restrictD = limits !== undefined;
    if (root) {
      const rShape = arrayOf(root);
      const isDot = D.opcode === "dot";
      // A dot's epilogue runs on rows (batch and lhs free dims); a convolution's on images.
      const rowDims = isDot ? dShape.dims.length - countFree(D, 1) : 1;
      const group = sameDims(rShape.dims, dShape.dims) ? rowDims : 1;
      const name = this.kernelName(`${D.name}_epilogue`);
      const k = genLoopKernel(this, {
        name,
        comment: `epilogue of ${describe(instr)}`,
        root,
        leaves: [D, ...leaves],
        group,
        identityLeaf: D,
        ...(limits !== undefined && { limits }),
      });
      const args = [target, ...leaves.map((l) => leafVals.get(l)!), ...k.limitArgs].join(", ");
      const inPlace =
        k.identityOnly &&
        sameDims(rShape.dims, dShape.dims) &&
        isFloatT(t) &&
        (isDot || D.attrs.convDims!.outputBatch === 0);
      if (inPlace) epi = `(lo, hi) => ${name}(${v}, lo, hi, ${args})`;
      else after = `${name}(${v}, 0, ${k.rows}, ${args});`;
      // The dot may skip what the epilogue never reads only if it reads the dot in place.
      restrictD &&= k.identityOnly && sameDims(rShape.dims, dShape.dims);
    }
    const lim = restrictD && limits ? dotLimits(D, limits) : undefined;
    const k = D.opcode === "dot" ? contractLimit(D, this.reduceLimits(D, instr)) : undefined;
    lines.push(this.contractionCall(D, t, A, B, target, epi, lim, k));
    if (after) lines.push(after);
  }

  private contractionCall(
    D: Instruction,
    t: ElementType,
    a: View,
    b: View,
    out: string,
    epi: string,
    lim?: { m: string; n: string },
    kLim?: string,
  ): string {
    const A = a.code;
    const B = b.code;
    const round =
      t === "f16"
        ? this.ext.ref(roundToF16, "roundToF16")
        : t === "bf16"
          ? this.ext.ref(roundToBF16, "roundToBF16")
          : "null";
    const lhs = arrayOf(D.operand(0)).dims;
    const rhs = arrayOf(D.operand(1)).dims;
    if (D.opcode === "dot") {
      const p = planDot(lhs, rhs, D.attrs.dot!, a.strides, b.strides);
      const plan = this.ext.ref(p, `dot plan of %${D.name}`);
      if (isFloatT(t)) {
        const f = this.ext.ref(dotFloat, "dotFloat");
        // `undefined` takes dotFloat's default (the whole M or N).
        const mn = lim ?? (kLim !== undefined ? { m: "undefined", n: "undefined" } : undefined);
        const tail = mn ? `, ${mn.m}, ${mn.n}${kLim !== undefined ? `, ${kLim}` : ""}` : "";
        return `${f}(${A}, ${B}, ${out}, ${plan}, ${round}, ${epi}${tail});`;
      }
      return `${this.ext.ref(dotInt, "dotInt")}("${t}", ${A}, ${B}, ${out}, ${plan});`;
    }
    const plan = planConv(
      lhs,
      rhs,
      arrayOf(D).dims,
      D.attrs.convDims!,
      D.attrs.window!,
      D.attrs.featureGroupCount ?? 1,
      D.attrs.batchGroupCount ?? 1,
      a.strides,
      b.strides,
    );
    const p = this.ext.ref(plan, `convolution plan of %${D.name}`);
    const f = this.ext.ref(conv, "conv");
    return `${f}("${t}", ${A}, ${B}, ${out}, ${p}, ${isFloatT(t) ? round : "null"}, ${epi});`;
  }
}

/** An operand read in place: the array and its element stride per dim. */
interface View {
  code: string;
  strides: number[];
}

/**
 * A dot/convolution operand that needs no copy: a leaf, or transposes and broadcasts of one
 * (a transpose permutes the strides, a broadcast gives new dims stride 0).
 */
function viewOf(o: Instruction, leafVals: Map<Instruction, string>): View | undefined {
  const leaf = leafVals.get(o);
  if (leaf !== undefined) return { code: leaf, strides: stridesOf(arrayOf(o).dims) };
  if (o.opcode === "transpose") {
    const v = viewOf(o.operand(0), leafVals);
    if (!v) return undefined;
    return { code: v.code, strides: o.attrs.dimensions!.map((p) => v.strides[p]!) };
  }
  if (o.opcode === "broadcast") {
    const v = viewOf(o.operand(0), leafVals);
    if (!v) return undefined;
    const strides = new Array<number>(arrayOf(o).dims.length).fill(0);
    o.attrs.dimensions!.forEach((r, i) => (strides[r] = v.strides[i]!));
    return { code: v.code, strides };
  }
  return undefined;
}

/**
 * A dot's row and column limits (dotFloat's mLim, nLim) from per-output-dim limits: rows (lhs
 * free dims, row-major) are a prefix when the one limited lhs free dim has only unit dims
 * before it; the same for columns. Batch dims are computed whole. Undefined when nothing can
 * be skipped.
 */
function dotLimits(
  D: Instruction,
  limits: readonly (string | undefined)[],
): { m: string; n: string } | undefined {
  if (D.opcode !== "dot") return undefined;
  const dims = arrayOf(D).dims;
  const nb = D.attrs.dot!.lhsBatch.length;
  const nl = countFree(D, 0);
  const prefix = (from: number, to: number): string | undefined => {
    const limited = [];
    for (let k = from; k < to; k++) if (limits[k] !== undefined) limited.push(k);
    if (limited.length !== 1) return undefined;
    const j = limited[0]!;
    for (let k = from; k < j; k++) if (dims[k] !== 1) return undefined;
    const after = dims.slice(j + 1, to).reduce((a, b) => a * b, 1);
    return after === 1 ? `(${limits[j]!})` : `(${limits[j]!}) * ${after}`;
  };
  const m = prefix(nb, nb + nl);
  const n = prefix(nb + nl, dims.length);
  if (m === undefined && n === undefined) return undefined;
  const count = (from: number, to: number) => dims.slice(from, to).reduce((a, b) => a * b, 1);
  return { m: m ?? String(count(nb, nb + nl)), n: n ?? String(count(nb + nl, dims.length)) };
}

/**
 * What part of `I` the user `u` reads when it computes `lu` of its result (per dim of `I`;
 * undefined entries: the whole dim), or undefined when it may read all of `I`.
 */
function demandOf(
  u: Instruction,
  I: Instruction,
  lu: readonly (string | undefined)[] | undefined,
  contract?: readonly (string | undefined)[],
): (string | undefined)[] | undefined {
  if (u.opcode === "dot") return dotDemand(u, I, lu, contract);
  if (!lu || u.shape.kind !== "array") return undefined;
  const dims = arrayOf(I).dims;
  const uDims = u.shape.dims;
  if (OPCODE_INFO[u.opcode].elementwise) return sameDims(dims, uDims) ? [...lu] : undefined;
  const rows = (reduced: readonly number[], rowShaped: boolean): (string | undefined)[] => {
    const kept = dims.map((_, d) => d).filter((d) => !reduced.includes(d));
    return dims.map((_, d) => {
      if (reduced.includes(d)) return undefined;
      return rowShaped ? lu[kept.indexOf(d)] : lu[d];
    });
  };
  switch (u.opcode) {
    case "reduce": {
      const half = u.operands.length / 2;
      if (half !== 1 || u.operand(1) === I) return undefined;
      return rows(u.attrs.dimensions!, true);
    }
    case "fusion": {
      const comp = u.called[0]!;
      const kind = u.attrs.fusionKind ?? "kLoop";
      if (kind !== "kLoop" && kind !== "kInput") return undefined;
      let out: (string | undefined)[] | undefined;
      for (const [k, o] of u.operands.entries()) {
        if (o !== I) continue;
        const p = comp.parameters.find((q) => q.attrs.parameterNumber === k);
        if (!p) return undefined;
        const reach = pointwiseReach(p, comp.root, dims);
        if (!reach) return undefined;
        let d: (string | undefined)[];
        if (kind === "kLoop") {
          if (reach.reduce || !sameDims(dims, uDims)) return undefined;
          d = [...lu];
        } else {
          if (reach.reduce === undefined) {
            if (!sameDims(dims, uDims)) return undefined;
            d = [...lu];
          } else {
            const rowShaped = !sameDims(dims, uDims);
            if (reach.root && rowShaped) return undefined;
            d = rows(reach.reduce, rowShaped);
          }
        }
        out = out ? out.map((x, j) => (x !== undefined && x === d[j] ? x : undefined)) : d;
      }
      return out;
    }
    default:
      return undefined;
  }
}

/**
 * What part of operand `I` a dot reads: the lhs rows and rhs columns it computes (dotLimits of
 * its own limits `lu`), and the contracting positions up to its reduction hint (`contract`,
 * over the lhs dims, as contractLimit applies it); the rest whole.
 */
function dotDemand(
  u: Instruction,
  I: Instruction,
  lu: readonly (string | undefined)[] | undefined,
  contract: readonly (string | undefined)[] | undefined,
): (string | undefined)[] | undefined {
  if (u.operand(0) === u.operand(1)) return undefined;
  const dims = arrayOf(I).dims;
  const dn = u.attrs.dot!;
  const side = u.operand(0) === I ? 0 : 1;
  const out: (string | undefined)[] = dims.map(() => undefined);
  const lim = lu ? dotLimits(u, lu) : undefined;
  if (lu && lim) {
    const used = side === 0 ? [...dn.lhsBatch, ...dn.lhsContracting]
      : [...dn.rhsBatch, ...dn.rhsContracting];
    const free = dims.map((_, d) => d).filter((d) => !used.includes(d));
    const first = dn.lhsBatch.length + (side === 0 ? 0 : countFree(u, 0));
    // Only the one dim dotLimits cut along (the others are computed whole).
    const limitedAt = free.map((_, k) => first + k).filter((o) => lu[o] !== undefined);
    if (limitedAt.length === 1) {
      const o = limitedAt[0]!;
      if ((side === 0 ? lim.m : lim.n).includes(lu[o]!)) out[free[o - first]!] = lu[o];
    }
  }
  if (contract && contractLimit(u, contract) !== undefined) {
    const j = dn.lhsContracting.findIndex((d) => contract[d] !== undefined);
    const mine = side === 0 ? dn.lhsContracting[j]! : dn.rhsContracting[j]!;
    out[mine] = contract[dn.lhsContracting[j]!];
  }
  return out;
}

/**
 * How parameter `p` of a fused computation flows: only through elementwise ops of `dims`
 * (reaching the root, `root: true`) or into reduces of one set of dims as their data operand
 * (`reduce`: the reduced dims). Undefined for anything else (a broadcast, a transpose...).
 */
function pointwiseReach(
  p: Instruction,
  root: Instruction,
  dims: readonly number[],
): { root: boolean; reduce: readonly number[] | undefined } | undefined {
  let toRoot = false;
  let reduce: readonly number[] | undefined;
  const seen = new Set<Instruction>();
  const stack = [p];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    if (n === root) toRoot = true;
    for (const u of n.users) {
      if (u.opcode === "reduce") {
        const half = u.operands.length / 2;
        if (u.operands.some((o, i) => o === n && i >= half)) return undefined;
        const rd = [...u.attrs.dimensions!].sort((a, b) => a - b);
        if (reduce !== undefined && reduce.join() !== rd.join()) return undefined;
        reduce = rd;
        continue;
      }
      if (!OPCODE_INFO[u.opcode].elementwise || u.shape.kind !== "array") return undefined;
      if (!sameDims(u.shape.dims, dims)) return undefined;
      stack.push(u);
    }
  }
  return { root: toRoot, reduce };
}

/**
 * dotFloat's kLim from a dot's reduction hint over its lhs operand's dims: contracting positions
 * are row-major in lhsContracting order, so a prefix when the one hinted contracting dim has only
 * unit dims before it.
 */
function contractLimit(
  D: Instruction,
  limits: readonly (string | undefined)[] | undefined,
): string | undefined {
  if (!limits) return undefined;
  const lhs = arrayOf(D.operand(0)).dims;
  const cs = D.attrs.dot!.lhsContracting;
  const hinted = cs.map((d, j) => [d, j] as const).filter(([d]) => limits[d] !== undefined);
  if (hinted.length !== 1) return undefined;
  const [d, j] = hinted[0]!;
  if (cs.slice(0, j).some((e) => lhs[e] !== 1)) return undefined;
  const after = cs.slice(j + 1).reduce((a, e) => a * lhs[e]!, 1);
  return after === 1 ? `(${limits[d]!})` : `(${limits[d]!}) * ${after}`;
}

/** Number of free (result) dims a dot operand contributes. */
function countFree(D: Instruction, side: 0 | 1): number {
  const dn = D.attrs.dot!;
  const rank = arrayOf(D.operand(side)).dims.length;
  const used =
    side === 0 ? [...dn.lhsBatch, ...dn.lhsContracting] : [...dn.rhsBatch, ...dn.rhsContracting];
  return rank - used.length;
}
