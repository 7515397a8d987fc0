// nn.Module's machinery (the layers' numerics are in nn_layers.test.ts): registration by class
// fields and by constructor assignment, the named views (parameters, buffers, children,
// modules), train/eval recursion and Dropout, state dicts with PyTorch's keys and strict /
// non-strict loading that leaves the module unchanged on any error, the repr, the containers'
// indexing and keys, apply and to(dtype), Parameter, default initialisation distributions, and
// the errors for bad arguments.

import { describe, expect, it } from "vitest";
import {
  ArgumentError,
  manualSeed,
  nn,
  OpError,
  ops,
  Parameter,
  randn,
  tensor,
  Tensor,
  zeros,
} from "../../tensor/index.ts";

// ---- Models used below --------------------------------------------------------------------------

/** The issue's example, with class fields. */
class MLP extends nn.Module {
  fc1 = new nn.Linear(4, 8);
  act = new nn.ReLU();
  fc2 = new nn.Linear(8, 2);

  forward(x: Tensor): Tensor {
    return this.fc2.call(this.act.call(this.fc1.call(x)));
  }
}

/** The same model with constructor assignments. */
class MLP2 extends nn.Module {
  fc1: nn.Linear;
  act: nn.ReLU;
  fc2: nn.Linear;

  constructor() {
    super();
    this.fc1 = new nn.Linear(4, 8);
    this.act = new nn.ReLU();
    this.fc2 = new nn.Linear(8, 2);
  }

  forward(x: Tensor): Tensor {
    return this.fc2.call(this.act.call(this.fc1.call(x)));
  }
}

class Attn extends nn.Module {
  q = new nn.Linear(4, 4);
  k = new nn.Linear(4, 4, { bias: false });
}

class Layer extends nn.Module {
  attn = new Attn();
  norm = new nn.LayerNorm(4);
}

class Net extends nn.Module {
  layers = new nn.ModuleList([new Layer(), new Layer()]);
  bn = new nn.BatchNorm2d(3);
  scale = new Parameter(tensor([2]));
  notState = tensor([1, 2, 3]); // a plain Tensor property is not state (as in PyTorch)
  plainList = [new nn.Linear(2, 2)]; // an array is not a container: use ModuleList
}

function values(t: Tensor): number[] {
  return Array.from(t.data() as Float32Array);
}

/** Every parameter and buffer's identity and values, to check a failed load changed nothing. */
function snapshot(m: nn.Module): Map<string, { obj: Tensor; dtype: string; data: unknown[] }> {
  const out = new Map<string, { obj: Tensor; dtype: string; data: unknown[] }>();
  for (const [k, p] of [...m.namedParameters(), ...m.namedBuffers()]) {
    out.set(k, { obj: p, dtype: p.dtype, data: Array.from(p.data() as ArrayLike<unknown>) });
  }
  return out;
}

function expectUnchanged(m: nn.Module, before: ReturnType<typeof snapshot>): void {
  const after = snapshot(m);
  expect([...after.keys()]).toEqual([...before.keys()]);
  for (const [k, b] of before) {
    const a = after.get(k)!;
    expect(a.obj, k).toBe(b.obj);
    expect(a.dtype, k).toBe(b.dtype);
    expect(a.data, k).toEqual(b.data);
  }
}

// ---- Registration -------------------------------------------------------------------------------

describe("registration", () => {
  it("registers class fields and constructor assignments alike, in order", () => {
    const keys = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
    expect(new MLP().namedParameters().map(([k]) => k)).toEqual(keys);
    expect(new MLP2().namedParameters().map(([k]) => k)).toEqual(keys);
    expect(Object.keys(new MLP().stateDict())).toEqual(keys);
    expect(new MLP().namedChildren().map(([k]) => k)).toEqual(["fc1", "act", "fc2"]);
    const shapes = new MLP2().parameters().map((p) => p.shape);
    expect(shapes).toEqual([[8, 4], [8], [2, 8], [2]]);
  });

  it("uses PyTorch's nested key names and skips non-state properties", () => {
    const net = new Net();
    expect(Object.keys(net.stateDict())).toEqual([
      "scale",
      "layers.0.attn.q.weight",
      "layers.0.attn.q.bias",
      "layers.0.attn.k.weight",
      "layers.0.norm.weight",
      "layers.0.norm.bias",
      "layers.1.attn.q.weight",
      "layers.1.attn.q.bias",
      "layers.1.attn.k.weight",
      "layers.1.norm.weight",
      "layers.1.norm.bias",
      "bn.weight",
      "bn.bias",
      "bn.running_mean",
      "bn.running_var",
      "bn.num_batches_tracked",
    ]);
    expect(net.namedBuffers().map(([k, t]) => [k, t.dtype])).toEqual([
      ["bn.running_mean", "float32"],
      ["bn.running_var", "float32"],
      ["bn.num_batches_tracked", "int64"],
    ]);
    expect(net.namedModules().map(([k]) => k)).toEqual([
      "",
      "layers",
      "layers.0",
      "layers.0.attn",
      "layers.0.attn.q",
      "layers.0.attn.k",
      "layers.0.norm",
      "layers.1",
      "layers.1.attn",
      "layers.1.attn.q",
      "layers.1.attn.k",
      "layers.1.norm",
      "bn",
    ]);
    expect(net.children()).toEqual([net.layers, net.bn]);
    expect(net.modules()[0]).toBe(net);
    expect(net.namedParameters("", false).map(([k]) => k)).toEqual(["scale"]);
    expect(net.namedParameters("model").map(([k]) => k)[1]).toBe("model.layers.0.attn.q.weight");
    expect(net.getSubmodule("layers.1.attn.q")).toBe(net.layers[1]!.attn.q);
    expect(() => net.getSubmodule("layers.2")).toThrow(/no submodule 'layers.2'/);
  });

  it("counts tied parameters and shared modules once, but keys them under every path", () => {
    class Tied extends nn.Module {
      embed = new nn.Embedding(5, 3);
      head = new nn.Linear(3, 5, { bias: false });
      again: nn.Linear;
      constructor() {
        super();
        this.head.weight = this.embed.weight;
        this.again = this.head;
      }
    }
    const m = new Tied();
    expect(m.namedParameters().map(([k]) => k)).toEqual(["embed.weight"]);
    expect(m.namedModules().map(([k]) => k)).toEqual(["", "embed", "head"]);
    expect(Object.keys(m.stateDict())).toEqual(["embed.weight", "head.weight", "again.weight"]);
    const w = randn(5, 3);
    m.loadStateDict({ "embed.weight": w, "head.weight": w, "again.weight": w });
    expect(values(m.head.weight)).toEqual(values(w));
  });

  it("registers buffers, persistent or not, and parameters and modules by name", () => {
    class M extends nn.Module {
      constructor() {
        super();
        this.registerBuffer("mask", tensor([true, false]));
        this.registerBuffer("cache", zeros(2), { persistent: false });
        this.registerBuffer("empty", null);
        this.registerParameter("w", new Parameter(tensor([1, 2])));
        this.registerParameter("b", null);
        this.addModule("sub", new nn.Linear(1, 1));
        this.registerModule("gone", null);
      }
    }
    const m = new M();
    expect(m.namedBuffers().map(([k]) => k)).toEqual(["mask", "cache"]);
    expect(Object.keys(m.stateDict())).toEqual(["w", "mask", "sub.weight", "sub.bias"]);
    expect((m as unknown as { mask: Tensor }).mask.dtype).toBe("bool");
    expect(m.namedParameters().map(([k]) => k)).toEqual(["w", "sub.weight", "sub.bias"]);
  });

  it("rejects bad names and values with the attribute named", () => {
    const m = new nn.Linear(2, 2);
    expect(() => m.registerBuffer("a.b", zeros(1))).toThrow(/can't contain "\."/);
    expect(() => m.registerBuffer("", zeros(1))).toThrow(/non-empty string/);
    expect(() => m.registerBuffer("forward", zeros(1))).toThrow(
      /attribute 'forward' already exists/,
    );
    expect(() => m.registerBuffer("weight", zeros(1))).toThrow(/attribute 'weight' already exists/);
    expect(() => m.addModule("weight", new nn.ReLU())).toThrow(/'weight' already exists/);
    expect(() => m.registerParameter("extra", zeros(2) as Parameter)).toThrow(
      /'extra' must be a Parameter or null.*new Parameter/,
    );
    expect(() => m.registerParameter("bias", new Parameter(zeros(2)))).not.toThrow();
    expect(() => m.addModule("x", zeros(1) as unknown as nn.Module)).toThrow(/must be a Module/);
    expect(() => new Parameter([1, 2] as unknown as Tensor)).toThrow(/data must be a Tensor/);
  });
});

// ---- Parameter ----------------------------------------------------------------------------------

describe("Parameter", () => {
  it("is a Tensor sharing the value; ops on it give plain Tensors", () => {
    const t = tensor([1, 2, 3]);
    const p = new Parameter(t);
    expect(p).toBeInstanceOf(Tensor);
    expect(p.requiresGrad).toBe(true);
    expect(new Parameter(t, false).requiresGrad).toBe(false);
    expect(p.toArray()).toEqual([1, 2, 3]);
    const y = ops.mul(p, 2);
    expect(y).not.toBeInstanceOf(Parameter);
    expect(y.toArray()).toEqual([2, 4, 6]);
    expect(p.toString()).toBe("Parameter containing:\ntensor([1., 2., 3.])");
  });
});

// ---- Modes, Dropout, apply, to ------------------------------------------------------------------

describe("train and eval", () => {
  it("set training on every submodule", () => {
    const net = new Net();
    expect(net.modules().every((m) => m.training)).toBe(true);
    expect(net.eval()).toBe(net);
    expect(net.modules().every((m) => !m.training)).toBe(true);
    net.layers.train();
    expect(net.training).toBe(false);
    expect(net.layers.modules().every((m) => m.training)).toBe(true);
    net.train(false);
    expect(net.modules().some((m) => m.training)).toBe(false);
  });

  it("Dropout is the identity in eval mode and drops with probability p in training", () => {
    const d = new nn.Dropout(0.25);
    const x = ops.add(randn(4000), 3);
    d.eval();
    expect(values(d.call(x))).toEqual(values(x));
    d.train();
    manualSeed(7);
    const y = values(d.call(x));
    const xs = values(x);
    let zeros = 0;
    y.forEach((v, i) => {
      if (v === 0) zeros++;
      else expect(Math.abs(v - xs[i]! / 0.75)).toBeLessThan(1e-5);
    });
    // 4000 draws at p = 0.25: the count of zeros is 1000 +- 27 (1 sd).
    expect(zeros).toBeGreaterThan(850);
    expect(zeros).toBeLessThan(1150);
    manualSeed(7);
    expect(values(d.call(x))).toEqual(y);
    const none = new nn.Dropout({ p: 0 });
    expect(values(none.call(x))).toEqual(xs);
    expect(values(new nn.Dropout(1).call(x)).every((v) => v === 0)).toBe(true);
  });

  it("MultiheadAttention applies attention dropout only in training", () => {
    const mha = new nn.MultiheadAttention(4, 2, { dropout: 0.5 });
    const x = randn(3, 1, 4);
    mha.eval();
    const [a] = mha.call(x, x, x);
    const [b] = mha.call(x, x, x);
    expect(values(a)).toEqual(values(b));
    mha.train();
    manualSeed(1);
    const [, w] = mha.call(x, x, x, { averageAttnWeights: false });
    // Dropped weights are 0, the rest scaled by 2; a row's weights no longer sum to 1.
    const ws = values(w!);
    expect(ws.some((v) => v === 0)).toBe(true);
    expect(ws.some((v) => v > 1)).toBe(true);
  });
});

describe("apply and to", () => {
  it("apply visits children before their parent", () => {
    const seen: string[] = [];
    const m = new MLP();
    expect(m.apply((x) => seen.push(x.className()))).toBe(m);
    expect(seen).toEqual(["Linear", "ReLU", "Linear", "MLP"]);
  });

  it("to(dtype) converts floating parameters and buffers in place, not integer buffers", () => {
    const net = new Net();
    const w = net.layers[0]!.attn.q.weight;
    const before = values(w);
    expect(net.to("float16")).toBe(net);
    expect(net.layers[0]!.attn.q.weight).toBe(w);
    expect(w.dtype).toBe("float16");
    const back = values(w);
    back.forEach((v, i) => expect(Math.abs(v - before[i]!)).toBeLessThan(1e-3));
    expect(net.bn.running_var!.dtype).toBe("float16");
    expect(net.bn.num_batches_tracked!.dtype).toBe("int64");
    expect(net.parameters().every((p) => p.dtype === "float16")).toBe(true);
    expect(() => net.to("int32")).toThrow(/only floating point dtypes.*got int32/);
    expect(() => net.to("f32" as "float32")).toThrow(/'f32'/);
  });
});

// ---- State dicts --------------------------------------------------------------------------------

describe("stateDict and loadStateDict", () => {
  function sourceFor(m: nn.Module): Record<string, Tensor> {
    return Object.fromEntries(
      Object.entries(m.stateDict()).map(([k, t]) => [
        k,
        t.isFloatingPoint() ? ops.add(randn([...t.shape]), 1) : ops.add(t, 5),
      ]),
    );
  }

  it("loads every value, keeping parameter identity; a taken state dict is a snapshot", () => {
    const net = new Net();
    const params = net.parameters();
    const old = net.stateDict();
    const oldValues = values(old["layers.1.norm.weight"]!);
    const src = sourceFor(net);
    expect(net.loadStateDict(src)).toEqual({ missingKeys: [], unexpectedKeys: [] });
    expect(net.parameters()).toEqual(params);
    net.parameters().forEach((p, i) => expect(p).toBe(params[i]));
    for (const [k, t] of Object.entries(net.stateDict())) {
      expect(Array.from(t.data() as ArrayLike<unknown>), k).toEqual(
        Array.from(src[k]!.data() as ArrayLike<unknown>),
      );
    }
    expect(net.bn.num_batches_tracked!.item()).toBe(5);
    expect(values(old["layers.1.norm.weight"]!)).toEqual(oldValues);
    // A Map works too, and `false` is strict = false.
    const m = new MLP();
    expect(m.loadStateDict(new Map(Object.entries(sourceFor(m))), false)).toEqual({
      missingKeys: [],
      unexpectedKeys: [],
    });
  });

  it("strict: missing and unexpected keys are an error listing them; nothing changes", () => {
    const net = new Net();
    const src = sourceFor(net);
    delete src["bn.running_mean"];
    delete src["layers.0.attn.k.weight"];
    src["layers.2.attn.q.weight"] = randn(4, 4);
    const before = snapshot(net);
    let err: unknown;
    try {
      net.loadStateDict(src);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(nn.StateDictError);
    const e = err as nn.StateDictError;
    expect(e.message).toContain(
      'missing keys: "layers.0.attn.k.weight", "bn.running_mean"',
    );
    expect(e.message).toContain('unexpected keys: "layers.2.attn.q.weight"');
    expect(e.message).toContain("into Net (the module is unchanged)");
    expect(e.missingKeys).toEqual(["layers.0.attn.k.weight", "bn.running_mean"]);
    expect(e.unexpectedKeys).toEqual(["layers.2.attn.q.weight"]);
    expectUnchanged(net, before);
  });

  it("non-strict: loads what matches and reports the rest", () => {
    const m = new MLP();
    const fc2 = values(m.fc2.weight);
    const w = randn(8, 4);
    const r = m.loadStateDict({ "fc1.weight": w, extra: zeros(1) }, { strict: false });
    expect(r).toEqual({
      missingKeys: ["fc1.bias", "fc2.weight", "fc2.bias"],
      unexpectedKeys: ["extra"],
    });
    expect(values(m.fc1.weight)).toEqual(values(w));
    expect(values(m.fc2.weight)).toEqual(fc2);
  });

  it("a shape or dtype mismatch is an error naming the key and both, even non-strict", () => {
    for (const strict of [true, false]) {
      const net = new Net();
      const src = sourceFor(net);
      src["layers.1.attn.q.weight"] = randn(4, 5);
      src["bn.running_var"] = ops.to(src["bn.running_var"]!, "float16");
      src["layers.0.norm.bias"] = [1, 2] as unknown as Tensor;
      const before = snapshot(net);
      const load = () => net.loadStateDict(src, { strict });
      expect(load).toThrow(
        "layers.1.attn.q.weight: the state dict has [4,5] float32, the module's parameter is " +
          "[4,4] float32",
      );
      expect(load).toThrow(
        "bn.running_var: the state dict has [3] float16, the module's buffer is [3] float32 " +
          '(convert with .to("float32"))',
      );
      expect(() => net.loadStateDict(src, { strict })).toThrow(
        /layers\.0\.norm\.bias: expected a Tensor, got a Array/,
      );
      expectUnchanged(net, before);
    }
  });

  it("non-persistent buffers stay out of the state dict; null slots are skipped", () => {
    const bn = new nn.BatchNorm2d(2, { trackRunningStats: false, affine: false });
    expect(bn.stateDict()).toEqual({});
    expect(bn.namedBuffers()).toEqual([]);
    const lin = new nn.Linear(3, 2, false);
    expect(Object.keys(lin.stateDict())).toEqual(["weight"]);
    expect(() => lin.loadStateDict({ weight: randn(2, 3), bias: randn(2) })).toThrow(
      /unexpected keys: "bias"/,
    );
  });
});

// ---- Repr ---------------------------------------------------------------------------------------

describe("toString", () => {
  it("prints PyTorch's module repr", () => {
    expect(new MLP().toString()).toBe(
      "MLP(\n" +
        "  (fc1): Linear(in_features=4, out_features=8, bias=True)\n" +
        "  (act): ReLU()\n" +
        "  (fc2): Linear(in_features=8, out_features=2, bias=True)\n" +
        ")",
    );
    expect(new Net().toString()).toBe(
      [
        "Net(",
        "  (layers): ModuleList(",
        "    (0): Layer(",
        "      (attn): Attn(",
        "        (q): Linear(in_features=4, out_features=4, bias=True)",
        "        (k): Linear(in_features=4, out_features=4, bias=False)",
        "      )",
        "      (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True)",
        "    )",
        "    (1): Layer(",
        "      (attn): Attn(",
        "        (q): Linear(in_features=4, out_features=4, bias=True)",
        "        (k): Linear(in_features=4, out_features=4, bias=False)",
        "      )",
        "      (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True)",
        "    )",
        "  )",
        "  (bn): BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)",
        ")",
      ].join("\n"),
    );
    expect(new nn.Sequential().toString()).toBe("Sequential()");
    expect(new nn.BatchNorm2d(2, { momentum: null }).toString()).toContain("momentum=None");
    expect(new nn.ReLU({ inplace: true }).toString()).toBe("ReLU(inplace=True)");
    expect(new nn.Softmax().toString()).toBe("Softmax(dim=None)");
    expect(new nn.Conv2d(1, 2, 3, { paddingMode: "circular", padding: 1 }).toString()).toBe(
      "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=circular)",
    );
  });
});

// ---- Containers ---------------------------------------------------------------------------------

describe("containers", () => {
  it("ModuleList is indexable and iterable with keys 0, 1, ...", () => {
    const a = new nn.Linear(1, 2);
    const b = new nn.Linear(2, 3);
    const c = new nn.Linear(3, 4);
    const list = new nn.ModuleList([a, b]);
    expect(list[0]).toBe(a);
    expect(list.get(-1)).toBe(b);
    expect(list.length).toBe(2);
    expect([...list]).toEqual([a, b]);
    list.append(c);
    expect(list[2]).toBe(c);
    list.insert(0, c);
    expect([...list]).toEqual([c, a, b, c]);
    expect(Object.keys(list.stateDict()).filter((k) => k.endsWith("weight"))).toEqual([
      "0.weight",
      "1.weight",
      "2.weight",
      "3.weight",
    ]);
    list.set(-1, a);
    expect(list[3]).toBe(a);
    list.extend([b]);
    expect(list.length).toBe(5);
    expect(() => list.get(5)).toThrow(/ModuleList: index 5 is out of range for 5 modules/);
    expect(() => list.append({} as nn.Linear)).toThrow(/must be a Module/);
    expect(() => (list as unknown as nn.Sequential).forward(zeros(1))).toThrow();
    expect(() => (list as unknown as MLP).call(zeros(1))).toThrow(
      /ModuleList: has no forward method/,
    );
  });

  it("Sequential chains forward, by position or by name", () => {
    const seq = new nn.Sequential(new nn.Linear(4, 3), new nn.ReLU(), new nn.Linear(3, 2));
    const x = randn(5, 4);
    const manual = seq[2]!.call(seq[1]!.call(seq[0]!.call(x)));
    expect(values(seq.call(x))).toEqual(values(manual));
    expect(seq.length).toBe(3);
    expect(seq.get(-1)).toBe(seq[2]);
    expect([...seq].map((m) => m.className())).toEqual(["Linear", "ReLU", "Linear"]);
    const named = new nn.Sequential({ fc: new nn.Linear(4, 2), act: new nn.Tanh() });
    expect(Object.keys(named.stateDict())).toEqual(["fc.weight", "fc.bias"]);
    expect(named.get(1).className()).toBe("Tanh");
    named.append(new nn.Sigmoid());
    expect(named.namedChildren().map(([k]) => k)).toEqual(["2", "fc", "act"]);
    expect(() => new nn.Sequential(new nn.ReLU(), 3 as unknown as nn.Module)).toThrow(
      /Sequential: argument 1 must be a Module/,
    );
  });

  it("ModuleDict maps names to modules", () => {
    const d = new nn.ModuleDict({ cls: new nn.Linear(2, 3), box: new nn.Linear(2, 4) });
    expect(d.keys()).toEqual(["cls", "box"]);
    expect([...d]).toEqual(["cls", "box"]);
    expect(d.get("box").outFeatures).toBe(4);
    expect(d.has("cls")).toBe(true);
    expect(d.size).toBe(2);
    expect(Object.keys(d.stateDict())).toEqual([
      "cls.weight",
      "cls.bias",
      "box.weight",
      "box.bias",
    ]);
    d.set("extra", new nn.Linear(1, 1));
    expect(d.entries().map(([k]) => k)).toEqual(["cls", "box", "extra"]);
    expect(d.delete("cls").outFeatures).toBe(3);
    expect(d.values().map((m) => m.outFeatures)).toEqual([4, 1]);
    expect(() => d.get("cls")).toThrow(/no module under the key 'cls'/);
    expect(() => d.set("a.b", new nn.Linear(1, 1))).toThrow(/can't contain/);
    expect(() => d.set("keys", new nn.Linear(1, 1))).toThrow(/attribute 'keys' already exists/);
    expect(new nn.ModuleDict(new Map([["x", new nn.ReLU()]])).keys()).toEqual(["x"]);
  });
});

// ---- Calling ------------------------------------------------------------------------------------

describe("calling", () => {
  it("call(x) runs forward", () => {
    const m = new MLP2();
    const x = randn(3, 4);
    expect(values(m.call(x))).toEqual(values(m.forward(x)));
    const bare = new nn.Module();
    expect(() => (bare as unknown as MLP).call(x)).toThrow(/Module: has no forward method/);
  });

  it("works through a Proxy (as the compiler's tracer will wrap modules)", () => {
    const reads: string[] = [];
    const m = new MLP();
    const proxy = new Proxy(m, {
      get(target, key, receiver) {
        if (typeof key === "string") reads.push(key);
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const x = randn(2, 4);
    expect(values(proxy.call(x))).toEqual(values(m.call(x)));
    expect(reads).toContain("fc1");
    expect(Object.keys(proxy.stateDict())).toEqual(Object.keys(m.stateDict()));
    proxy.eval();
    expect(m.fc1.training).toBe(false);
    proxy.registerBuffer("extra", zeros(1));
    expect(proxy.loadStateDict(m.stateDict())).toEqual({ missingKeys: [], unexpectedKeys: [] });
    expect(proxy.toString()).toBe(m.toString());
  });

  it("nn.functional holds the functional forms (the same functions as ops)", () => {
    const F = nn.functional;
    expect(F.conv2d).toBe(ops.conv2d);
    expect(F.linear).toBe(ops.linear);
    expect(F.softmax).toBe(ops.softmax);
    expect(F.scaledDotProductAttention).toBe(ops.scaledDotProductAttention);
    const lin = new nn.Linear(3, 2);
    const x = randn(4, 3);
    expect(values(F.linear(x, lin.weight, lin.bias))).toEqual(values(lin.call(x)));
  });
});

// ---- Initialisation -----------------------------------------------------------------------------

/** Mean and standard deviation of a tensor's values. */
function stats(t: Tensor): { mean: number; std: number; min: number; max: number } {
  const v = values(t);
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const std = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length);
  return { mean, std, min: Math.min(...v), max: Math.max(...v) };
}

describe("initialisation (PyTorch's distributions, Kiln's random stream)", () => {
  it("Linear and conv: kaiming_uniform(a = sqrt(5)), biases uniform on 1/sqrt(fan_in)", () => {
    manualSeed(0);
    const cases: [Tensor, number][] = [];
    const lin = new nn.Linear(64, 128);
    cases.push([lin.weight, 1 / 8], [lin.bias!, 1 / 8]);
    const conv = new nn.Conv2d(8, 32, 3, { groups: 2 });
    const convBound = 1 / Math.sqrt(4 * 9);
    cases.push([conv.weight, convBound], [conv.bias!, convBound]);
    const tconv = new nn.ConvTranspose2d(16, 8, 3);
    cases.push([tconv.weight, 1 / Math.sqrt(8 * 9)]);
    for (const [t, bound] of cases) {
      const s = stats(t);
      expect(s.min).toBeGreaterThanOrEqual(-bound);
      expect(s.max).toBeLessThanOrEqual(bound);
      // Uniform on [-b, b]: std b/sqrt(3), so the extremes come near the bounds.
      if (t.numel() > 1000) {
        expect(Math.abs(s.std - bound / Math.sqrt(3))).toBeLessThan(0.05 * bound);
        expect(Math.abs(s.mean)).toBeLessThan(0.05 * bound);
        expect(s.max).toBeGreaterThan(0.95 * bound);
      }
    }
  });

  it("MultiheadAttention: xavier_uniform projections, zero biases", () => {
    const mha = new nn.MultiheadAttention(32, 4);
    const bound = Math.sqrt(6 / (32 + 96));
    const s = stats(mha.in_proj_weight!);
    expect(s.min).toBeGreaterThanOrEqual(-bound);
    expect(s.max).toBeLessThanOrEqual(bound);
    expect(Math.abs(s.std - bound / Math.sqrt(3))).toBeLessThan(0.05 * bound);
    expect(values(mha.in_proj_bias!).every((v) => v === 0)).toBe(true);
    expect(values(mha.out_proj.bias!).every((v) => v === 0)).toBe(true);
    const split = new nn.MultiheadAttention(8, 2, { kdim: 3, vdim: 5, bias: false });
    expect(Object.keys(split.stateDict())).toEqual([
      "q_proj_weight",
      "k_proj_weight",
      "v_proj_weight",
      "out_proj.weight",
    ]);
    expect(split.k_proj_weight!.shape).toEqual([8, 3]);
  });

  it("Embedding: standard normal with the padding row zero; norms: ones and zeros", () => {
    const emb = new nn.Embedding(100, 50, { paddingIdx: -3 });
    expect(emb.paddingIdx).toBe(97);
    const rows = emb.weight.toArray() as number[][];
    expect(rows[97]!.every((v) => v === 0)).toBe(true);
    const s = stats(emb.weight);
    expect(Math.abs(s.mean)).toBeLessThan(0.05);
    expect(Math.abs(s.std - 1)).toBeLessThan(0.05);
    const ln = new nn.LayerNorm([2, 3]);
    expect(ln.weight!.toArray()).toEqual([[1, 1, 1], [1, 1, 1]]);
    expect(ln.bias!.toArray()).toEqual([[0, 0, 0], [0, 0, 0]]);
    const bn = new nn.BatchNorm2d(2);
    expect(bn.running_mean!.toArray()).toEqual([0, 0]);
    expect(bn.running_var!.toArray()).toEqual([1, 1]);
    expect(bn.num_batches_tracked!.item()).toBe(0);
    expect(new nn.RMSNorm(3, { elementwiseAffine: false }).weight).toBeNull();
  });
});

// ---- Arguments and errors -----------------------------------------------------------------------

describe("constructor arguments", () => {
  it("takes PyTorch's order positionally or one options object", () => {
    const a = new nn.Conv2d(4, 8, 3, 2, 1, 1, 2, false);
    const b = new nn.Conv2d({
      inChannels: 4,
      outChannels: 8,
      kernelSize: 3,
      stride: 2,
      padding: 1,
      groups: 2,
      bias: false,
    });
    expect(a.toString()).toBe(b.toString());
    expect(a.toString()).toBe(
      "Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2, bias=False)",
    );
    expect(new nn.Linear(2, 3, { bias: false }).bias).toBeNull();
    expect(new nn.MaxPool2d(3).stride).toBe(3);
  });

  it("reports bad arguments naming the layer and the argument", () => {
    expect(() => new nn.Linear("4" as unknown as number, 2)).toThrow(ArgumentError);
    expect(() => new nn.Linear("4" as unknown as number, 2)).toThrow(
      /Linear: argument 'inFeatures' must be an integer >= 0/,
    );
    expect(() => new nn.Linear(2, 3, { bais: true } as never)).toThrow(/unknown argument 'bais'/);
    expect(() => new nn.Conv2d(3, 4, 3, { groups: 2 })).toThrow(
      /Conv2d: argument 'inChannels' \(3\) must be divisible by groups \(2\)/,
    );
    expect(() => new nn.Conv2d(2, 4, 3, { stride: 2, padding: "same" })).toThrow(
      /'same' is not supported for strided convolutions/,
    );
    expect(() => new nn.Conv2d(2, 4, [3, 3, 3] as never)).toThrow(/'kernelSize' must be/);
    expect(() => new nn.MultiheadAttention(10, 3)).toThrow(
      /embedDim' \(10\) must be divisible by numHeads \(3\)/,
    );
    expect(() => new nn.MultiheadAttention(4, 2, { addBiasKv: true })).toThrow(/not supported/);
    expect(() => new nn.GroupNorm(3, 4)).toThrow(
      /numChannels \(4\) must be divisible by numGroups \(3\)/,
    );
    expect(() => new nn.Embedding(5, 2, { paddingIdx: 5 })).toThrow(/paddingIdx' must be within/);
    expect(() => new nn.Dropout(1.5)).toThrow(/Dropout: argument 'p' must be a probability/);
    expect(() => new nn.BatchNorm2d(2, { momentum: 2 })).toThrow(/'momentum' must be in \[0, 1\]/);
    expect(() => new nn.GELU("fast" as "tanh")).toThrow(
      /'approximate' must be one of 'none', 'tanh'/,
    );
    expect(() => new nn.MaxPool2d(2, { returnIndices: true })).toThrow(/returnIndices/);
  });

  it("reports bad forward inputs naming the layer and the shapes", () => {
    const bn = new nn.BatchNorm2d(3);
    expect(() => bn.call(zeros(2, 3, 4))).toThrow(
      /BatchNorm2d: expected 4D input \[N, C, H, W\] \(got 3D input of shape \[2,3,4\]\)/,
    );
    expect(() => bn.call(zeros(2, 4, 1, 1))).toThrow(/expected 3 channels/);
    bn.train();
    expect(() => bn.call(zeros(1, 3, 1, 1))).toThrow(/more than 1 value per channel/);
    const mha = new nn.MultiheadAttention(4, 2);
    expect(() => mha.call(zeros(3, 2, 5), zeros(3, 2, 5), zeros(3, 2, 5))).toThrow(
      /MultiheadAttention: expected embedding dim 4, got 5 \(query \[3,2,5\]/,
    );
    const q = zeros(3, 2, 4);
    expect(() => mha.call(q, q, q, { attnMask: zeros(2, 2) })).toThrow(
      /attnMask of shape \[2,2\] must be \[L, S\] = \[3,3\] or \[N\*numHeads, L, S\] = \[4,3,3\]/,
    );
    expect(() => mha.call(q, q, q, { keyPaddingMask: zeros(3, 3) })).toThrow(
      /keyPaddingMask of shape \[3,3\] must be \[N, S\] = \[2,3\]/,
    );
    expect(() => new nn.Linear(3, 2).call(zeros(2, 4))).toThrow(OpError);
  });

  it("Softmax without a dim uses PyTorch's implicit dim", () => {
    const x = randn(2, 3);
    expect(values(new nn.Softmax().call(x))).toEqual(values(ops.softmax(x, 1)));
    const y = randn(2, 3, 4);
    expect(values(new nn.Softmax().call(y))).toEqual(values(ops.softmax(y, 0)));
  });
});
