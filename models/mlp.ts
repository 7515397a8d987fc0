// A multilayer perceptron: Linear layers of configurable widths with an activation between
// them, held in one Sequential so the state-dict keys are PyTorch's `layers.0.weight`,
// `layers.2.weight`, ... (the activations take the odd slots). The smallest model of the zoo,
// and the one to read first.

import { Generator, nn, randn, type Tensor } from "../index.ts";
import { type ConfigChoice, readSpec, resolveConfig } from "./spec.ts";

export type Activation = "relu" | "gelu" | "tanh" | "silu";

export interface MLPConfig {
  inFeatures: number;
  /** The widths of the hidden layers, in order (empty: a single Linear). */
  hiddenFeatures: number[];
  outFeatures: number;
  activation: Activation;
}

/** Test-sized: 16 → 32 → 32 → 10 with GELU. */
export const tinyConfig: MLPConfig = {
  inFeatures: 16,
  hiddenFeatures: [32, 32],
  outFeatures: 10,
  activation: "gelu",
};

/** An MNIST-sized classifier: 784 → 1024 → 1024 → 10 with ReLU. */
export const fullConfig: MLPConfig = {
  inFeatures: 784,
  hiddenFeatures: [1024, 1024],
  outFeatures: 10,
  activation: "relu",
};

export const configs = { tiny: tinyConfig, full: fullConfig } as const;

function activation(name: Activation): nn.Module {
  switch (name) {
    case "relu":
      return new nn.ReLU();
    case "gelu":
      return new nn.GELU();
    case "tanh":
      return new nn.Tanh();
    case "silu":
      return new nn.SiLU();
    default: {
      const never: never = name;
      throw new Error(`MLP: unknown activation '${String(never)}' (relu, gelu, tanh, silu)`);
    }
  }
}

export class MLP extends nn.Module {
  readonly config: MLPConfig;
  layers: nn.Sequential;

  constructor(config: MLPConfig = tinyConfig) {
    super();
    this.config = config;
    const layers: nn.Module[] = [];
    let width = config.inFeatures;
    for (const hidden of config.hiddenFeatures) {
      layers.push(new nn.Linear(width, hidden), activation(config.activation));
      width = hidden;
    }
    layers.push(new nn.Linear(width, config.outFeatures));
    this.layers = new nn.Sequential(...layers);
  }

  /** [..., inFeatures] → [..., outFeatures]. */
  forward(x: Tensor): Tensor {
    return this.layers.call(x);
  }
}

/** The model-file factory: an MLP for a config or a config name (default "tiny"). */
export default function createMLP(
  config: ConfigChoice<MLPConfig, keyof typeof configs> = "tiny",
): MLP {
  return new MLP(resolveConfig("mlp", configs, config));
}

/** Example inputs for `{ batch }` (default 2): `[x]` with x [batch, inFeatures]. */
export function inputs(
  spec: Record<string, number> = {},
  config: ConfigChoice<MLPConfig, keyof typeof configs> = "tiny",
): [Tensor] {
  const c = resolveConfig("mlp", configs, config);
  const { batch } = readSpec("mlp", spec, { batch: 2 });
  return [randn([batch, c.inFeatures], { generator: new Generator(0) })];
}
