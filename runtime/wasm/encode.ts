// A small WebAssembly binary encoder: what the wasm backend's renderer needs and nothing more.
// A module is one imported memory ("env" "memory"), function types (deduplicated), functions
// with their locals and code, and exports; the code is written op by op through `Fn`, whose
// methods are named after the instructions (`fn.f32Add()`, `fn.localGet(3)`). Immediates are
// LEB128 (signed for constants, unsigned for indices and memargs). SIMD128 instructions are the
// 0xFD-prefixed ones; relaxed-SIMD FMA is encoded only when asked for (the caller probes the
// engine with `WebAssembly.validate` first: see `relaxedSimdSupported`).
//
// Why our own encoder: a module is built in one pass over byte arrays, with no text format to
// parse and no dependency; WebAssembly.Module on the result is the only compile step.

export type ValType = "i32" | "i64" | "f32" | "f64" | "v128";

const VALTYPE: Readonly<Record<ValType, number>> = {
  i32: 0x7f,
  i64: 0x7e,
  f32: 0x7d,
  f64: 0x7c,
  v128: 0x7b,
};

/** Unsigned LEB128. */
export function uleb(out: number[], v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
    throw new Error(`wasm encoder: ${v} is not an unsigned 32-bit immediate`);
  }
  do {
    let b = v & 0x7f;
    v = Math.floor(v / 128);
    if (v !== 0) b |= 0x80;
    out.push(b);
  } while (v !== 0);
}

/** Signed LEB128 of a 32-bit (or 64-bit, as bigint) integer. */
export function sleb(out: number[], value: number | bigint): void {
  let v = BigInt(value);
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    const signBit = (b & 0x40) !== 0;
    if ((v === 0n && !signBit) || (v === -1n && signBit)) {
      out.push(b);
      return;
    }
    out.push(b | 0x80);
  }
}

function name(out: number[], s: string): void {
  const bytes = new TextEncoder().encode(s);
  uleb(out, bytes.length);
  for (const b of bytes) out.push(b);
}

function vec(out: number[], items: readonly number[][]): void {
  uleb(out, items.length);
  for (const it of items) out.push(...it);
}

function section(out: number[], id: number, body: number[]): void {
  out.push(id);
  uleb(out, body.length);
  for (const b of body) out.push(b);
}

const f32buf = new DataView(new ArrayBuffer(8));

/** Element size log2 → the natural alignment of a load or store. */
type Align = 0 | 1 | 2 | 3 | 4;

/**
 * The code of one function. Locals are declared with `local(type)` (parameters come first:
 * indices 0..params-1); `end()` is appended by the module.
 */
export class Fn {
  readonly code: number[] = [];
  private readonly localTypes: ValType[] = [];

  constructor(
    readonly params: readonly ValType[],
    readonly results: readonly ValType[],
  ) {}

  /** A new local of `type`; returns its index. */
  local(type: ValType): number {
    this.localTypes.push(type);
    return this.params.length + this.localTypes.length - 1;
  }

  /** The local declarations, run-length grouped. */
  localDecls(): number[] {
    const groups: [number, ValType][] = [];
    for (const t of this.localTypes) {
      const last = groups[groups.length - 1];
      if (last && last[1] === t) last[0]++;
      else groups.push([1, t]);
    }
    const out: number[] = [];
    uleb(out, groups.length);
    for (const [n, t] of groups) {
      uleb(out, n);
      out.push(VALTYPE[t]);
    }
    return out;
  }

  op(...bytes: number[]): this {
    for (const b of bytes) this.code.push(b);
    return this;
  }

  private simd(code: number): this {
    this.code.push(0xfd);
    uleb(this.code, code);
    return this;
  }

  private memarg(align: Align, offset: number): this {
    uleb(this.code, align);
    uleb(this.code, offset);
    return this;
  }

  // -- control --
  block(type?: ValType): this {
    return this.op(0x02, type ? VALTYPE[type] : 0x40);
  }
  loop(type?: ValType): this {
    return this.op(0x03, type ? VALTYPE[type] : 0x40);
  }
  if(type?: ValType): this {
    return this.op(0x04, type ? VALTYPE[type] : 0x40);
  }
  else(): this {
    return this.op(0x05);
  }
  end(): this {
    return this.op(0x0b);
  }
  br(depth: number): this {
    this.op(0x0c);
    uleb(this.code, depth);
    return this;
  }
  brIf(depth: number): this {
    this.op(0x0d);
    uleb(this.code, depth);
    return this;
  }
  return(): this {
    return this.op(0x0f);
  }
  call(fn: number): this {
    this.op(0x10);
    uleb(this.code, fn);
    return this;
  }
  drop(): this {
    return this.op(0x1a);
  }
  /** `c ? a : b` of the stack's a, b, c (numeric or v128 operands). */
  select(): this {
    return this.op(0x1b);
  }

  // -- locals --
  localGet(i: number): this {
    this.op(0x20);
    uleb(this.code, i);
    return this;
  }
  localSet(i: number): this {
    this.op(0x21);
    uleb(this.code, i);
    return this;
  }
  localTee(i: number): this {
    this.op(0x22);
    uleb(this.code, i);
    return this;
  }

  // -- memory --
  i32Load(offset = 0): this {
    return this.op(0x28).memarg(2, offset);
  }
  i64Load(offset = 0): this {
    return this.op(0x29).memarg(3, offset);
  }
  f32Load(offset = 0): this {
    return this.op(0x2a).memarg(2, offset);
  }
  f64Load(offset = 0): this {
    return this.op(0x2b).memarg(3, offset);
  }
  i32Load8U(offset = 0): this {
    return this.op(0x2d).memarg(0, offset);
  }
  i32Store(offset = 0): this {
    return this.op(0x36).memarg(2, offset);
  }
  i64Store(offset = 0): this {
    return this.op(0x37).memarg(3, offset);
  }
  f32Store(offset = 0): this {
    return this.op(0x38).memarg(2, offset);
  }
  f64Store(offset = 0): this {
    return this.op(0x39).memarg(3, offset);
  }
  i32Store8(offset = 0): this {
    return this.op(0x3a).memarg(0, offset);
  }

  // -- constants --
  i32Const(v: number): this {
    this.op(0x41);
    sleb(this.code, v | 0);
    return this;
  }
  i64Const(v: bigint): this {
    this.op(0x42);
    sleb(this.code, BigInt.asIntN(64, v));
    return this;
  }
  f32Const(v: number): this {
    this.op(0x43);
    f32buf.setFloat32(0, v, true);
    for (let i = 0; i < 4; i++) this.code.push(f32buf.getUint8(i));
    return this;
  }
  /** An f32 constant given by its bit pattern (a NaN payload survives). */
  f32Bits(bits: number): this {
    this.op(0x43);
    f32buf.setUint32(0, bits >>> 0, true);
    for (let i = 0; i < 4; i++) this.code.push(f32buf.getUint8(i));
    return this;
  }
  f64Const(v: number): this {
    this.op(0x44);
    f32buf.setFloat64(0, v, true);
    for (let i = 0; i < 8; i++) this.code.push(f32buf.getUint8(i));
    return this;
  }

  // -- i32 --
  i32Eqz(): this {
    return this.op(0x45);
  }
  i32Eq(): this {
    return this.op(0x46);
  }
  i32Ne(): this {
    return this.op(0x47);
  }
  i32LtS(): this {
    return this.op(0x48);
  }
  i32LtU(): this {
    return this.op(0x49);
  }
  i32GtS(): this {
    return this.op(0x4a);
  }
  i32GtU(): this {
    return this.op(0x4b);
  }
  i32LeS(): this {
    return this.op(0x4c);
  }
  i32LeU(): this {
    return this.op(0x4d);
  }
  i32GeS(): this {
    return this.op(0x4e);
  }
  i32GeU(): this {
    return this.op(0x4f);
  }
  i32Add(): this {
    return this.op(0x6a);
  }
  i32Sub(): this {
    return this.op(0x6b);
  }
  i32Mul(): this {
    return this.op(0x6c);
  }
  i32DivS(): this {
    return this.op(0x6d);
  }
  i32DivU(): this {
    return this.op(0x6e);
  }
  i32RemS(): this {
    return this.op(0x6f);
  }
  i32RemU(): this {
    return this.op(0x70);
  }
  i32And(): this {
    return this.op(0x71);
  }
  i32Or(): this {
    return this.op(0x72);
  }
  i32Xor(): this {
    return this.op(0x73);
  }
  i32Shl(): this {
    return this.op(0x74);
  }
  i32ShrS(): this {
    return this.op(0x75);
  }
  i32ShrU(): this {
    return this.op(0x76);
  }

  // -- i64 --
  i64Eqz(): this {
    return this.op(0x50);
  }
  i64Eq(): this {
    return this.op(0x51);
  }
  i64Ne(): this {
    return this.op(0x52);
  }
  i64LtS(): this {
    return this.op(0x53);
  }
  i64GtS(): this {
    return this.op(0x55);
  }
  i64LeS(): this {
    return this.op(0x57);
  }
  i64GeS(): this {
    return this.op(0x59);
  }
  i64GeU(): this {
    return this.op(0x5a);
  }
  i64Add(): this {
    return this.op(0x7c);
  }
  i64Sub(): this {
    return this.op(0x7d);
  }
  i64Mul(): this {
    return this.op(0x7e);
  }
  i64DivS(): this {
    return this.op(0x7f);
  }
  i64RemS(): this {
    return this.op(0x81);
  }
  i64And(): this {
    return this.op(0x83);
  }
  i64Or(): this {
    return this.op(0x84);
  }
  i64Xor(): this {
    return this.op(0x85);
  }
  i64Shl(): this {
    return this.op(0x86);
  }
  i64ShrS(): this {
    return this.op(0x87);
  }
  i64ShrU(): this {
    return this.op(0x88);
  }
  f32ConvertI64S(): this {
    return this.op(0xb4);
  }
  /** Saturating f32 → s64 (NaN → 0). */
  i64TruncSatF32S(): this {
    return this.op(0xfc, 0x04);
  }

  // -- f32 --
  f32Eq(): this {
    return this.op(0x5b);
  }
  f32Ne(): this {
    return this.op(0x5c);
  }
  f32Lt(): this {
    return this.op(0x5d);
  }
  f32Gt(): this {
    return this.op(0x5e);
  }
  f32Le(): this {
    return this.op(0x5f);
  }
  f32Ge(): this {
    return this.op(0x60);
  }
  f32Abs(): this {
    return this.op(0x8b);
  }
  f32Neg(): this {
    return this.op(0x8c);
  }
  f32Ceil(): this {
    return this.op(0x8d);
  }
  f32Floor(): this {
    return this.op(0x8e);
  }
  f32Trunc(): this {
    return this.op(0x8f);
  }
  f32Nearest(): this {
    return this.op(0x90);
  }
  f32Sqrt(): this {
    return this.op(0x91);
  }
  f32Add(): this {
    return this.op(0x92);
  }
  f32Sub(): this {
    return this.op(0x93);
  }
  f32Mul(): this {
    return this.op(0x94);
  }
  f32Div(): this {
    return this.op(0x95);
  }
  f32Min(): this {
    return this.op(0x96);
  }
  f32Max(): this {
    return this.op(0x97);
  }
  f32Copysign(): this {
    return this.op(0x98);
  }

  // -- f64 --
  f64Eq(): this {
    return this.op(0x61);
  }
  f64Ne(): this {
    return this.op(0x62);
  }
  f64Lt(): this {
    return this.op(0x63);
  }
  f64Gt(): this {
    return this.op(0x64);
  }
  f64Ge(): this {
    return this.op(0x66);
  }
  f64Sqrt(): this {
    return this.op(0x9f);
  }
  f64Abs(): this {
    return this.op(0x99);
  }
  f64Neg(): this {
    return this.op(0x9a);
  }
  f64Floor(): this {
    return this.op(0x9c);
  }
  f64Nearest(): this {
    return this.op(0x9e);
  }
  f64Min(): this {
    return this.op(0xa4);
  }
  f64Max(): this {
    return this.op(0xa5);
  }
  f64ConvertI64S(): this {
    return this.op(0xb9);
  }
  i64ReinterpretF64(): this {
    return this.op(0xbd);
  }
  f64ReinterpretI64(): this {
    return this.op(0xbf);
  }
  /** Saturating f64 → s64 (NaN → 0). */
  i64TruncSatF64S(): this {
    return this.op(0xfc, 0x06);
  }
  f64Add(): this {
    return this.op(0xa0);
  }
  f64Sub(): this {
    return this.op(0xa1);
  }
  f64Mul(): this {
    return this.op(0xa2);
  }
  f64Div(): this {
    return this.op(0xa3);
  }
  f64Trunc(): this {
    return this.op(0x9d);
  }
  f64Copysign(): this {
    return this.op(0xa6);
  }

  // -- conversions --
  i32WrapI64(): this {
    return this.op(0xa7);
  }
  i64ExtendI32S(): this {
    return this.op(0xac);
  }
  f32ConvertI32S(): this {
    return this.op(0xb2);
  }
  f32DemoteF64(): this {
    return this.op(0xb6);
  }
  f64ConvertI32S(): this {
    return this.op(0xb7);
  }
  f64PromoteF32(): this {
    return this.op(0xbb);
  }
  i32ReinterpretF32(): this {
    return this.op(0xbc);
  }
  f32ReinterpretI32(): this {
    return this.op(0xbe);
  }
  /** Saturating f32 → s32 (NaN → 0). */
  i32TruncSatF32S(): this {
    return this.op(0xfc, 0x00);
  }

  // -- SIMD128 --
  v128Load(offset = 0): this {
    return this.simd(0x00).memarg(4, offset);
  }
  /** One f32 from memory in all four lanes. */
  v128Load32Splat(offset = 0): this {
    return this.simd(0x09).memarg(2, offset);
  }
  v128Store(offset = 0): this {
    return this.simd(0x0b).memarg(4, offset);
  }
  /** A v128 constant of four f32 lanes (or i32 lanes by bits, `bits` true). */
  v128Const(lanes: readonly number[], bits = false): this {
    this.simd(0x0c);
    for (let l = 0; l < 4; l++) {
      if (bits) f32buf.setUint32(0, lanes[l]! >>> 0, true);
      else f32buf.setFloat32(0, lanes[l]!, true);
      for (let i = 0; i < 4; i++) this.code.push(f32buf.getUint8(i));
    }
    return this;
  }
  i32x4Splat(): this {
    return this.simd(0x11);
  }
  f32x4Splat(): this {
    return this.simd(0x13);
  }
  i32x4ExtractLane(l: number): this {
    return this.simd(0x1b).op(l);
  }
  f32x4ExtractLane(l: number): this {
    return this.simd(0x1f).op(l);
  }
  f32x4ReplaceLane(l: number): this {
    return this.simd(0x20).op(l);
  }
  i32x4Eq(): this {
    return this.simd(0x37);
  }
  i32x4Ne(): this {
    return this.simd(0x38);
  }
  i32x4LtS(): this {
    return this.simd(0x39);
  }
  i32x4GtS(): this {
    return this.simd(0x3b);
  }
  i32x4LeS(): this {
    return this.simd(0x3d);
  }
  i32x4GeS(): this {
    return this.simd(0x3f);
  }
  f32x4Eq(): this {
    return this.simd(0x41);
  }
  f32x4Ne(): this {
    return this.simd(0x42);
  }
  f32x4Lt(): this {
    return this.simd(0x43);
  }
  f32x4Gt(): this {
    return this.simd(0x44);
  }
  f32x4Le(): this {
    return this.simd(0x45);
  }
  f32x4Ge(): this {
    return this.simd(0x46);
  }
  v128Not(): this {
    return this.simd(0x4d);
  }
  v128And(): this {
    return this.simd(0x4e);
  }
  v128AndNot(): this {
    return this.simd(0x4f);
  }
  v128Or(): this {
    return this.simd(0x50);
  }
  v128Xor(): this {
    return this.simd(0x51);
  }
  /** `(a & c) | (b & ~c)` of the stack's a, b, c. */
  v128Bitselect(): this {
    return this.simd(0x52);
  }
  f32x4Ceil(): this {
    return this.simd(0x67);
  }
  f32x4Floor(): this {
    return this.simd(0x68);
  }
  f32x4Trunc(): this {
    return this.simd(0x69);
  }
  f32x4Nearest(): this {
    return this.simd(0x6a);
  }
  i32x4Shl(): this {
    return this.simd(0xab);
  }
  i32x4ShrS(): this {
    return this.simd(0xac);
  }
  i32x4ShrU(): this {
    return this.simd(0xad);
  }
  i32x4Add(): this {
    return this.simd(0xae);
  }
  i32x4Sub(): this {
    return this.simd(0xb1);
  }
  i32x4Mul(): this {
    return this.simd(0xb5);
  }
  i32x4MinS(): this {
    return this.simd(0xb6);
  }
  i32x4MaxS(): this {
    return this.simd(0xb8);
  }
  f32x4Abs(): this {
    return this.simd(0xe0);
  }
  f32x4Neg(): this {
    return this.simd(0xe1);
  }
  f32x4Sqrt(): this {
    return this.simd(0xe3);
  }
  f32x4Add(): this {
    return this.simd(0xe4);
  }
  f32x4Sub(): this {
    return this.simd(0xe5);
  }
  f32x4Mul(): this {
    return this.simd(0xe6);
  }
  f32x4Div(): this {
    return this.simd(0xe7);
  }
  f32x4Min(): this {
    return this.simd(0xe8);
  }
  f32x4Max(): this {
    return this.simd(0xe9);
  }
  /** `b < a ? b : a` per lane. */
  f32x4Pmin(): this {
    return this.simd(0xea);
  }
  /** `a < b ? b : a` per lane. */
  f32x4Pmax(): this {
    return this.simd(0xeb);
  }
  i32x4TruncSatF32x4S(): this {
    return this.simd(0xf8);
  }
  f32x4ConvertI32x4S(): this {
    return this.simd(0xfa);
  }
  /** Relaxed SIMD: a * b + c, fused or not (only where `relaxedSimdSupported()`). */
  f32x4RelaxedMadd(): this {
    return this.simd(0x105);
  }
}

interface FnEntry {
  readonly type: number;
  readonly fn: Fn;
}

/** A module under construction. */
export class ModuleBuilder {
  private readonly types: string[] = [];
  private readonly typeBytes: number[][] = [];
  private readonly fns: FnEntry[] = [];
  private readonly exports: { name: string; fn: number }[] = [];
  private memory: { min: number; max?: number; shared: boolean } | undefined;

  /** Imports the memory as `env.memory` (pages of 64 KiB). */
  importMemory(min: number, max?: number, shared = false): void {
    this.memory = { min, ...(max !== undefined && { max }), shared };
  }

  private typeIndex(params: readonly ValType[], results: readonly ValType[]): number {
    const key = `${params.join(",")}->${results.join(",")}`;
    const known = this.types.indexOf(key);
    if (known >= 0) return known;
    const b: number[] = [0x60];
    uleb(b, params.length);
    for (const p of params) b.push(VALTYPE[p]);
    uleb(b, results.length);
    for (const r of results) b.push(VALTYPE[r]);
    this.types.push(key);
    this.typeBytes.push(b);
    return this.types.length - 1;
  }

  /** A new function (its index: functions are numbered in the order added). */
  addFunction(fn: Fn, exportName?: string): number {
    const index = this.fns.length;
    this.fns.push({ type: this.typeIndex(fn.params, fn.results), fn });
    if (exportName !== undefined) this.exports.push({ name: exportName, fn: index });
    return index;
  }

  get functionCount(): number {
    return this.fns.length;
  }

  encode(): Uint8Array {
    const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    const types: number[] = [];
    vec(types, this.typeBytes);
    section(out, 1, types);
    if (this.memory) {
      const imp: number[] = [];
      uleb(imp, 1);
      name(imp, "env");
      name(imp, "memory");
      imp.push(0x02);
      const m = this.memory;
      const flags = (m.max !== undefined ? 1 : 0) | (m.shared ? 2 : 0);
      imp.push(flags);
      uleb(imp, m.min);
      if (m.max !== undefined) uleb(imp, m.max);
      section(out, 2, imp);
    }
    const funcs: number[] = [];
    uleb(funcs, this.fns.length);
    for (const f of this.fns) uleb(funcs, f.type);
    section(out, 3, funcs);
    const exps: number[] = [];
    uleb(exps, this.exports.length);
    for (const e of this.exports) {
      name(exps, e.name);
      exps.push(0x00);
      uleb(exps, e.fn);
    }
    section(out, 7, exps);
    const code: number[] = [];
    uleb(code, this.fns.length);
    for (const { fn } of this.fns) {
      const body = fn.localDecls();
      for (const b of fn.code) body.push(b);
      body.push(0x0b);
      uleb(code, body.length);
      for (const b of body) code.push(b);
    }
    section(out, 10, code);
    return Uint8Array.from(out);
  }
}

let relaxedMemo: boolean | undefined;

/** Whether the engine validates relaxed-SIMD's f32x4.relaxed_madd (probed once). */
export function relaxedSimdSupported(): boolean {
  if (relaxedMemo === undefined) {
    const m = new ModuleBuilder();
    const f = new Fn(["v128", "v128", "v128"], ["v128"]);
    f.localGet(0).localGet(1).localGet(2).f32x4RelaxedMadd();
    m.addFunction(f);
    relaxedMemo = WebAssembly.validate(m.encode());
  }
  return relaxedMemo;
}

let simdMemo: boolean | undefined;

/** Whether the engine validates SIMD128 (probed once). */
export function simdSupported(): boolean {
  if (simdMemo === undefined) {
    const m = new ModuleBuilder();
    const f = new Fn(["f32"], ["f32"]);
    f.localGet(0).f32x4Splat().localGet(0).f32x4Splat().f32x4Add().f32x4ExtractLane(0);
    m.addFunction(f);
    simdMemo = WebAssembly.validate(m.encode());
  }
  return simdMemo;
}
