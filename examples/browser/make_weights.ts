// Writes the example page's weights: GPT-2 tiny (models/gpt2.ts, tinyConfig) made by Kiln itself
// from a fixed seed, as a safetensors file with the config in its metadata (`kiln.config`), so
// the page downloads nothing but this file from the server next to it. The weight matrices are
// drawn N(0, 0.3) rather than GPT-2's N(0, 0.02): an untrained tiny model at 0.02 greedily
// repeats one token forever, which would make "the page's tokens equal Node's" a weak check.
//
//   npx tsx examples/browser/make_weights.ts [out.safetensors]   (default: next to this file)

import { join } from "node:path";
import { manualSeed, randn, saveSafetensorsFile, type Tensor } from "../../index.ts";
import { GPT2, tinyConfig } from "../../models/gpt2.ts";

export const WEIGHTS_FILE = "gpt2-tiny.safetensors";
/** The seed the weights are drawn with. */
export const SEED = 17;
/** The weight matrices' standard deviation. */
export const SCALE = 0.3;

/** Writes the weights to `path` and returns it. */
export function makeWeights(path = join(import.meta.dirname, WEIGHTS_FILE)): string {
  manualSeed(SEED);
  const model = new GPT2(tinyConfig).eval();
  const weights: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(model.stateDict())) {
    // LayerNorms and biases keep their initial values.
    weights[name] = /(^|\.)ln_|\.bias$/.test(name) ? t : randn(...t.shape).mul(SCALE);
  }
  saveSafetensorsFile(path, weights, {
    metadata: { "kiln.config": JSON.stringify(tinyConfig), "kiln.seed": String(SEED) },
  });
  return path;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`wrote ${makeWeights(process.argv[2])}`);
}
