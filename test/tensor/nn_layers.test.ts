// Every nn layer against PyTorch (scripts/fixtures/gen_nn.py → test/fixtures/nn.json and
// test/fixtures/nn/*.safetensors): each case builds the Kiln module from the same constructor
// options, checks that its state-dict keys, shapes and dtypes are exactly those of the PyTorch
// state dict in the weights file, loads the file strictly, runs forward in the same mode with
// the same inputs, and compares the output (and BatchNorm's updated running statistics) within
// 1e-5. The repr must equal PyTorch's. Two whole models — a small transformer with a ModuleList
// of blocks (class fields and constructor assignments mixed), and a CNN with a Sequential and
// a ModuleDict of heads — load PyTorch's state dicts the same way.

import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectClose, type FixtureValue, loadFixtures } from "../fixtures/load.ts";
import { loadSafetensors, nn, ops, Tensor } from "../../tensor/index.ts";

const fixtureDir = join(import.meta.dirname, "..", "fixtures", "nn");
const TOL = { atol: 1e-5, rtol: 1e-5 };

// ---- The two whole models, as a PyTorch user would port them ------------------------------------

/** Constructor assignments (PyTorch's style). */
class Attn extends nn.Module {
  d: number;
  q: nn.Linear;
  k: nn.Linear;
  v: nn.Linear;
  o: nn.Linear;

  constructor(d: number) {
    super();
    this.d = d;
    this.q = new nn.Linear(d, d);
    this.k = new nn.Linear(d, d);
    this.v = new nn.Linear(d, d);
    this.o = new nn.Linear(d, d);
  }

  forward(x: Tensor): Tensor {
    const scores = ops.div(ops.matmul(this.q.call(x), ops.transpose(this.k.call(x), -2, -1)),
      Math.sqrt(this.d));
    return this.o.call(ops.matmul(ops.softmax(scores, -1), this.v.call(x)));
  }
}

/** Class fields: registered although they are defined after Module's constructor ran. */
class Block extends nn.Module {
  norm = new nn.LayerNorm(8);
  attn = new Attn(8);
  mlp = new nn.Sequential(new nn.Linear(8, 16), new nn.GELU(), new nn.Linear(16, 8));

  forward(x: Tensor): Tensor {
    const h = ops.add(x, this.attn.call(this.norm.call(x)));
    return ops.add(h, this.mlp.call(h));
  }
}

class Tiny extends nn.Module {
  embed = new nn.Embedding(11, 8);
  layers = new nn.ModuleList([new Block(), new Block()]);
  norm = new nn.LayerNorm(8);
  head = new nn.Linear(8, 11);

  forward(ids: Tensor): Tensor {
    let x = this.embed.call(ids);
    for (const layer of this.layers) x = layer.call(x);
    return this.head.call(this.norm.call(x));
  }
}

/** Constructor assignments, with a Sequential and a ModuleDict. */
class SmallCNN extends nn.Module {
  features: nn.Sequential;
  heads: nn.ModuleDict<nn.Linear>;

  constructor() {
    super();
    this.features = new nn.Sequential(
      new nn.Conv2d(3, 4, 3, { padding: 1 }),
      new nn.BatchNorm2d(4),
      new nn.ReLU(),
      new nn.MaxPool2d(2),
      new nn.Conv2d(4, 6, 3),
      new nn.GroupNorm(2, 6),
      new nn.SiLU(),
      new nn.AdaptiveAvgPool2d(1),
      new nn.Flatten(),
    );
    this.heads = new nn.ModuleDict({ cls: new nn.Linear(6, 3), box: new nn.Linear(6, 4) });
  }

  forward(x: Tensor): Tensor[] {
    const h = this.features.call(x);
    return [this.heads.get("cls").call(h), this.heads.get("box").call(h)];
  }
}

// ---- Building modules from fixture configs ------------------------------------------------------

type Config = Record<string, unknown>;
type AnyCtor = new (...args: unknown[]) => nn.Module;

/** Each layer by its PyTorch class name; each takes the one options object the fixture holds. */
const LAYERS: Record<string, (c: Config) => nn.Module> = {
  Linear: (c) => new (nn.Linear as unknown as AnyCtor)(c),
  Identity: () => new nn.Identity(),
  Flatten: (c) => new (nn.Flatten as unknown as AnyCtor)(c),
  Conv1d: (c) => new (nn.Conv1d as unknown as AnyCtor)(c),
  Conv2d: (c) => new (nn.Conv2d as unknown as AnyCtor)(c),
  ConvTranspose2d: (c) => new (nn.ConvTranspose2d as unknown as AnyCtor)(c),
  LayerNorm: (c) => new (nn.LayerNorm as unknown as AnyCtor)(c),
  RMSNorm: (c) => new (nn.RMSNorm as unknown as AnyCtor)(c),
  GroupNorm: (c) => new (nn.GroupNorm as unknown as AnyCtor)(c),
  BatchNorm2d: (c) => new (nn.BatchNorm2d as unknown as AnyCtor)(c),
  Embedding: (c) => new (nn.Embedding as unknown as AnyCtor)(c),
  Dropout: (c) => new (nn.Dropout as unknown as AnyCtor)(c),
  ReLU: () => new nn.ReLU(),
  GELU: (c) => new (nn.GELU as unknown as AnyCtor)(c),
  SiLU: () => new nn.SiLU(),
  Tanh: () => new nn.Tanh(),
  Sigmoid: () => new nn.Sigmoid(),
  Softmax: (c) => new (nn.Softmax as unknown as AnyCtor)(c),
  MaxPool2d: (c) => new (nn.MaxPool2d as unknown as AnyCtor)(c),
  AvgPool2d: (c) => new (nn.AvgPool2d as unknown as AnyCtor)(c),
  AdaptiveAvgPool2d: (c) => new (nn.AdaptiveAvgPool2d as unknown as AnyCtor)(c),
  MultiheadAttention: (c) => new (nn.MultiheadAttention as unknown as AnyCtor)(c),
  Sequential: () =>
    new nn.Sequential(
      new nn.Linear(4, 8),
      new nn.ReLU(),
      new nn.Linear(8, 8),
      new nn.Tanh(),
      new nn.Dropout(0.2),
      new nn.Linear(8, 3),
    ),
  Tiny: () => new Tiny(),
  SmallCNN: () => new SmallCNN(),
};

/** Every layer the nn namespace exports is exercised by some fixture case. */
const EXPORTED_LAYERS = Object.entries(nn)
  .filter(
    ([name, v]) =>
      typeof v === "function" &&
      v.prototype instanceof nn.Module &&
      name !== "NonDynamicallyQuantizableLinear",
  )
  .map(([name]) => name);

function compareOutputs(actual: unknown, expected: FixtureValue, label: string): void {
  if (expected === null) {
    expect(actual, label).toBeNull();
    return;
  }
  if (Array.isArray(expected)) {
    expect(Array.isArray(actual), `${label}: expected a list`).toBe(true);
    const a = actual as unknown[];
    expect(a.length, label).toBe(expected.length);
    expected.forEach((e, i) => compareOutputs(a[i], e, `${label}[${i}]`));
    return;
  }
  expectClose(actual as Tensor, expected as Tensor, TOL, label);
}

const cases = loadFixtures("nn");

describe("nn layers against PyTorch", () => {
  it("covers every exported layer and container", () => {
    const ops = new Set(cases.map((c) => c.op));
    const missing = EXPORTED_LAYERS.filter(
      (n) => !ops.has(n) && !(n === "ModuleList" && ops.has("Tiny")) &&
        !(n === "ModuleDict" && ops.has("SmallCNN")) && n !== "Module",
    );
    expect(missing).toEqual([]);
    expect(EXPORTED_LAYERS.length).toBeGreaterThan(20);
  });

  for (const c of cases) {
    it(c.name, () => {
      const make = LAYERS[c.op];
      if (make === undefined) throw new Error(`no Kiln layer for fixture op ${c.op}`);
      const kw = c.kwargs;
      const m = make(kw.config as unknown as Config);

      // State-dict keys, shapes and dtypes exactly PyTorch's; load strictly.
      const sd = m.stateDict();
      if (kw.weights !== null) {
        const weights = loadSafetensors(join(fixtureDir, kw.weights as string));
        const describe = (r: Record<string, Tensor>) =>
          Object.fromEntries(
            Object.entries(r).map(([k, t]) => [k, `${t.dtype}[${t.shape.join(",")}]`]),
          );
        expect(describe(sd)).toEqual(describe(weights));
        expect(m.loadStateDict(weights)).toEqual({ missingKeys: [], unexpectedKeys: [] });
      } else {
        expect(Object.keys(sd)).toEqual([]);
      }
      if (kw.repr !== null) expect(m.toString()).toBe(kw.repr);

      m.train(kw.train as boolean);
      const options = { ...(kw.call as unknown as Record<string, unknown>) };
      for (const [k, v] of Object.entries(kw)) {
        if (v instanceof Tensor && !k.startsWith("after:")) options[k] = v;
      }
      const args: unknown[] = [...c.args];
      if (Object.keys(options).length > 0) args.push(options);
      const out = (m as unknown as { forward(...a: unknown[]): unknown }).forward(...args);
      compareOutputs(out, c.out, c.name);

      for (const [k, v] of Object.entries(kw)) {
        if (!k.startsWith("after:")) continue;
        const key = k.slice("after:".length);
        expectClose(m.stateDict()[key]!, v as Tensor, TOL, `${c.name}: ${key} after forward`);
      }
    });
  }
});
