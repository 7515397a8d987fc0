// The wasm encoder (runtime/wasm/encode.ts): LEB128, and modules built with it validate,
// instantiate over an imported memory and compute what their code says (scalar, loops,
// loads/stores, SIMD128), plus the compile latency of a module of a few hundred functions.

import { describe, expect, it } from "vitest";
import {
  Fn,
  ModuleBuilder,
  relaxedSimdSupported,
  simdSupported,
  sleb,
  uleb,
} from "../../runtime/wasm/encode.ts";

function instance(m: ModuleBuilder, memory: WebAssembly.Memory): Record<string, Function> {
  const bytes = m.encode();
  expect(WebAssembly.validate(bytes)).toBe(true);
  const inst = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { memory } });
  return inst.exports as Record<string, Function>;
}

describe("wasm encoder", () => {
  it("writes LEB128 as the spec's examples", () => {
    const u: number[] = [];
    uleb(u, 624485);
    expect(u).toEqual([0xe5, 0x8e, 0x26]);
    const s: number[] = [];
    sleb(s, -123456);
    expect(s).toEqual([0xc0, 0xbb, 0x78]);
    const z: number[] = [];
    sleb(z, 64);
    expect(z).toEqual([0xc0, 0x00]);
    expect(() => uleb([], -1)).toThrow(/not an unsigned/);
  });

  it("builds a module that adds, loops, loads and stores", () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const m = new ModuleBuilder();
    m.importMemory(1);
    const add = new Fn(["i32", "i32"], ["i32"]);
    add.localGet(0).localGet(1).i32Add();
    m.addFunction(add, "add");
    // scale(ptr, n, k): f32[i] *= k for i < n
    const scale = new Fn(["i32", "i32", "f32"], []);
    const i = scale.local("i32");
    scale.i32Const(0).localSet(i);
    scale.block().loop();
    scale.localGet(i).localGet(1).i32GeS().brIf(1);
    scale.localGet(0).localGet(i).i32Const(2).i32Shl().i32Add();
    scale.localGet(0).localGet(i).i32Const(2).i32Shl().i32Add().f32Load();
    scale.localGet(2).f32Mul().f32Store();
    scale.localGet(i).i32Const(1).i32Add().localSet(i).br(0);
    scale.end().end();
    m.addFunction(scale, "scale");
    const big = new Fn([], ["i64"]);
    big.i64Const(-(2n ** 40n)).i64Const(3n).i64Mul();
    m.addFunction(big, "big");
    const ex = instance(m, memory);
    expect(ex.add!(2, -5)).toBe(-3);
    const f = new Float32Array(memory.buffer, 16, 5);
    f.set([1, 2, 3, 4, 5]);
    ex.scale!(16, 5, 0.5);
    expect([...f]).toEqual([0.5, 1, 1.5, 2, 2.5]);
    expect(ex.big!()).toBe(-3n * 2n ** 40n);
  });

  it("encodes constants exactly (f32, f64, NaN bits, negative i32)", () => {
    const m = new ModuleBuilder();
    const a = new Fn([], ["f32"]);
    a.f32Const(0.1);
    m.addFunction(a, "a");
    const b = new Fn([], ["f64"]);
    b.f64Const(-1e-300);
    m.addFunction(b, "b");
    const c = new Fn([], ["i32"]);
    c.f32Bits(0x7fc00001).i32ReinterpretF32();
    m.addFunction(c, "c");
    const d = new Fn([], ["i32"]);
    d.i32Const(-2147483648);
    m.addFunction(d, "d");
    const ex = instance(m, new WebAssembly.Memory({ initial: 1 }));
    expect(ex.a!()).toBe(Math.fround(0.1));
    expect(ex.b!()).toBe(-1e-300);
    expect(ex.c!()).toBe(0x7fc00001);
    expect(ex.d!()).toBe(-2147483648);
  });

  it("runs SIMD128: four f32 lanes added, selected and stored", () => {
    expect(simdSupported()).toBe(true);
    const memory = new WebAssembly.Memory({ initial: 1 });
    const m = new ModuleBuilder();
    m.importMemory(1);
    // out = a > b ? a + b : pmax(a, b) * 2
    const f = new Fn(["i32", "i32", "i32"], []);
    const va = f.local("v128");
    const vb = f.local("v128");
    f.localGet(0).v128Load().localSet(va);
    f.localGet(1).v128Load().localSet(vb);
    f.localGet(2);
    f.localGet(va).localGet(vb).f32x4Add();
    f.localGet(va).localGet(vb).f32x4Pmax().v128Const([2, 2, 2, 2]).f32x4Mul();
    f.localGet(va).localGet(vb).f32x4Gt();
    f.v128Bitselect().v128Store();
    m.addFunction(f, "f");
    const ex = instance(m, memory);
    const x = new Float32Array(memory.buffer, 0, 12);
    x.set([1, -2, 3, 8, 0, 5, 1, -1]);
    ex.f!(0, 16, 32);
    expect([...x.subarray(8, 12)]).toEqual([1, 10, 4, 7]);
    // relaxed SIMD is a probe, never required: it answers a boolean either way.
    expect(typeof relaxedSimdSupported()).toBe("boolean");
  });

  it("compiles a module of 400 functions quickly (latency noted)", () => {
    const m = new ModuleBuilder();
    m.importMemory(1);
    for (let k = 0; k < 400; k++) {
      const f = new Fn(["i32", "i32", "i32", "i32"], []);
      const i = f.local("i32");
      f.localGet(2).localSet(i).block().loop();
      f.localGet(i).localGet(3).i32GeS().brIf(1);
      f.localGet(1).localGet(i).i32Const(2).i32Shl().i32Add();
      f.localGet(0).localGet(i).i32Const(2).i32Shl().i32Add().f32Load();
      f.f32Const(k).f32Mul().f32Const(1).f32Add().f32Sqrt().f32Store();
      f.localGet(i).i32Const(1).i32Add().localSet(i).br(0).end().end();
      m.addFunction(f, `k${k}`);
    }
    const t0 = performance.now();
    const bytes = m.encode();
    const t1 = performance.now();
    const mod = new WebAssembly.Module(bytes);
    const t2 = performance.now();
    expect(WebAssembly.Module.exports(mod)).toHaveLength(400);
    // Measured on the 2-core dev machine: encode ~3 ms, WebAssembly.Module ~1-3 ms (Liftoff,
    // lazy tier-up) for ~30 KB; the bound only catches a pathology.
    expect(t2 - t0).toBeLessThan(2000);
    console.log(
      `wasm encoder: 400 functions, ${bytes.length} bytes: encode ${(t1 - t0).toFixed(1)} ms, ` +
        `compile ${(t2 - t1).toFixed(1)} ms`,
    );
  });
});
