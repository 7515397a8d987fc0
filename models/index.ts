// The model zoo's catalogue: every model file under one name (`zoo.gpt2`), in the shape the
// CLI and the benchmarks consume — a factory taking a config name, the example-input builder
// taking a size spec, and what each accepts — plus each file's classes and configs re-exported
// as a namespace (`gpt2.GPT2`, `gpt2.tinyConfig`). The model-file contract is in
// models/README.md.

import type { nn } from "../index.ts";
import * as bert from "./bert.ts";
import * as gpt2 from "./gpt2.ts";
import * as mlp from "./mlp.ts";
import * as resnet from "./resnet.ts";
import * as vit from "./vit.ts";
import * as whisper from "./whisper.ts";

export { bert, gpt2, mlp, resnet, vit, whisper };

/** The config names every model has: "tiny" (tests) and "full" (the published size). */
export type ConfigName = "tiny" | "full";

export interface ZooModel {
  name: string;
  description: string;
  /** The keys `inputs` accepts in its size spec (each with a default). */
  sizes: readonly string[];
  create(config?: ConfigName): nn.Module;
  /** The arguments of one forward call (`model.call(...inputs(spec, config))`). */
  inputs(spec?: Record<string, number>, config?: ConfigName): unknown[];
}

export const zoo = {
  mlp: {
    name: "mlp",
    description: "MLP: Linear layers with an activation (full: 784-1024-1024-10, ReLU)",
    sizes: ["batch"],
    create: (config) => mlp.default(config),
    inputs: (spec, config) => mlp.inputs(spec, config),
  },
  resnet: {
    name: "resnet",
    description: "ResNet-18-style CNN, torchvision's names (full: ResNet-18)",
    sizes: ["batch", "size"],
    create: (config) => resnet.default(config),
    inputs: (spec, config) => resnet.inputs(spec, config),
  },
  bert: {
    name: "bert",
    description: "BERT-style post-LN encoder with pooler, Hugging Face's names (full: BERT-base)",
    sizes: ["batch", "seq"],
    create: (config) => bert.default(config),
    inputs: (spec, config) => bert.inputs(spec, config),
  },
  gpt2: {
    name: "gpt2",
    description: "GPT-2-style decoder with a KV cache, Hugging Face's names (full: GPT-2 small)",
    sizes: ["batch", "seq"],
    create: (config) => gpt2.default(config),
    inputs: (spec, config) => gpt2.inputs(spec, config),
  },
  vit: {
    name: "vit",
    description: "Vision Transformer, timm's names (full: ViT-B/16 at 224x224)",
    sizes: ["batch"],
    create: (config) => vit.default(config),
    inputs: (spec, config) => vit.inputs(spec, config),
  },
  whisper: {
    name: "whisper",
    description: "Whisper-style audio encoder, Hugging Face's names (full: Whisper-tiny's)",
    sizes: ["batch", "frames"],
    create: (config) => whisper.default(config),
    inputs: (spec, config) => whisper.inputs(spec, config),
  },
} as const satisfies Record<string, ZooModel>;

export type ModelName = keyof typeof zoo;

/** The zoo entry called `name`; an unknown name lists the models. */
export function getModel(name: string): ZooModel {
  if (!Object.hasOwn(zoo, name)) {
    throw new Error(`unknown model '${name}' (models: ${Object.keys(zoo).join(", ")})`);
  }
  return zoo[name as ModelName];
}
