// A Whisper-style audio encoder written as Hugging Face's WhisperEncoder is, with its parameter
// names (`conv1.weight`, `embed_positions.weight`, `layers.0.self_attn.k_proj.weight`,
// `layers.0.final_layer_norm.bias`, `layer_norm.weight`), so the encoder half of a Whisper
// checkpoint loads after dropping its `model.encoder.` prefix: a log-mel spectrogram goes
// through two 1-D convolutions with GELU (the second halves the frame rate), gets sinusoidal
// positions added, then pre-LN transformer layers and a final LayerNorm. The position table is
// a parameter holding Whisper's sinusoids (as HF stores it), sliced to the number of frames.

import { arange, cat, Generator, nn, ops, randn, type Tensor } from "../index.ts";
import { type ConfigChoice, readSpec, resolveConfig } from "./spec.ts";

export interface WhisperEncoderConfig {
  numMelBins: number;
  dModel: number;
  encoderLayers: number;
  encoderAttentionHeads: number;
  encoderFfnDim: number;
  /** Positions after the stride-2 convolution: inputs have up to 2x this many frames. */
  maxSourcePositions: number;
}

/** Test-sized: 8 mel bins, 32 wide, 2 layers, up to 32 frames. */
export const tinyConfig: WhisperEncoderConfig = {
  numMelBins: 8,
  dModel: 32,
  encoderLayers: 2,
  encoderAttentionHeads: 4,
  encoderFfnDim: 64,
  maxSourcePositions: 16,
};

/** Whisper-tiny's encoder (80 mel bins, 30 s = 3000 frames → 1500 positions, 384 wide). */
export const fullConfig: WhisperEncoderConfig = {
  numMelBins: 80,
  dModel: 384,
  encoderLayers: 4,
  encoderAttentionHeads: 6,
  encoderFfnDim: 1536,
  maxSourcePositions: 1500,
};

export const configs = { tiny: tinyConfig, full: fullConfig } as const;

/**
 * Whisper's position table [length, channels]: sin(t * f_i) then cos(t * f_i) for
 * f_i = 10000^(-i / (channels/2 - 1)), i < channels/2.
 */
export function sinusoids(length: number, channels: number, maxTimescale = 10000): Tensor {
  if (channels % 2 !== 0 || channels < 4) {
    throw new Error(`sinusoids: channels must be even and >= 4, got ${channels}`);
  }
  const increment = Math.log(maxTimescale) / (channels / 2 - 1);
  const inv = arange(channels / 2).to("float32").mul(-increment).exp();
  const t = arange(length).to("float32").unsqueeze(1).mul(inv.unsqueeze(0));
  return cat([t.sin(), t.cos()], 1);
}

export class WhisperAttention extends nn.Module {
  readonly numHeads: number;
  k_proj: nn.Linear;
  v_proj: nn.Linear;
  q_proj: nn.Linear;
  out_proj: nn.Linear;

  constructor(c: WhisperEncoderConfig) {
    super();
    const d = c.dModel;
    if (d % c.encoderAttentionHeads !== 0) {
      throw new Error(
        `WhisperAttention: dModel (${d}) must be divisible by encoderAttentionHeads ` +
          `(${c.encoderAttentionHeads})`,
      );
    }
    this.numHeads = c.encoderAttentionHeads;
    this.k_proj = new nn.Linear(d, d, { bias: false });
    this.v_proj = new nn.Linear(d, d);
    this.q_proj = new nn.Linear(d, d);
    this.out_proj = new nn.Linear(d, d);
  }

  forward(x: Tensor): Tensor {
    const [b, t, d] = x.shape as [number, number, number];
    const heads = (u: Tensor) =>
      u.reshape(b, t, this.numHeads, d / this.numHeads).transpose(1, 2);
    const out = ops.scaledDotProductAttention(
      heads(this.q_proj.call(x)),
      heads(this.k_proj.call(x)),
      heads(this.v_proj.call(x)),
    );
    return this.out_proj.call(out.transpose(1, 2).reshape(b, t, d));
  }
}

/** Pre-LN: x + attn(ln(x)), then + fc2(gelu(fc1(ln(x)))). */
export class WhisperEncoderLayer extends nn.Module {
  self_attn: WhisperAttention;
  self_attn_layer_norm: nn.LayerNorm;
  fc1: nn.Linear;
  fc2: nn.Linear;
  final_layer_norm: nn.LayerNorm;

  constructor(c: WhisperEncoderConfig) {
    super();
    this.self_attn = new WhisperAttention(c);
    this.self_attn_layer_norm = new nn.LayerNorm(c.dModel);
    this.fc1 = new nn.Linear(c.dModel, c.encoderFfnDim);
    this.fc2 = new nn.Linear(c.encoderFfnDim, c.dModel);
    this.final_layer_norm = new nn.LayerNorm(c.dModel);
  }

  forward(x: Tensor): Tensor {
    const h = x.add(this.self_attn.call(this.self_attn_layer_norm.call(x)));
    const mlp = this.fc2.call(ops.gelu(this.fc1.call(this.final_layer_norm.call(h))));
    return h.add(mlp);
  }
}

export class WhisperEncoder extends nn.Module {
  readonly config: WhisperEncoderConfig;
  conv1: nn.Conv1d;
  conv2: nn.Conv1d;
  embed_positions: nn.Embedding;
  layers: nn.ModuleList<WhisperEncoderLayer>;
  layer_norm: nn.LayerNorm;

  constructor(config: WhisperEncoderConfig = tinyConfig) {
    super();
    this.config = config;
    const d = config.dModel;
    this.conv1 = new nn.Conv1d(config.numMelBins, d, 3, { padding: 1 });
    this.conv2 = new nn.Conv1d(d, d, 3, { stride: 2, padding: 1 });
    this.embed_positions = new nn.Embedding(config.maxSourcePositions, d);
    const table = sinusoids(config.maxSourcePositions, d);
    this.embed_positions.weight = new nn.Parameter(table, false);
    const layers = Array.from(
      { length: config.encoderLayers },
      () => new WhisperEncoderLayer(config),
    );
    this.layers = new nn.ModuleList(layers);
    this.layer_norm = new nn.LayerNorm(d);
  }

  /** Log-mel features [B, numMelBins, frames] → [B, ceil(frames / 2), dModel]. */
  forward(features: Tensor): Tensor {
    let x = ops.gelu(this.conv1.call(features));
    x = ops.gelu(this.conv2.call(x)).permute(0, 2, 1);
    const t = x.size(1);
    const max = this.config.maxSourcePositions;
    if (t > max) {
      throw new Error(
        `WhisperEncoder: ${features.size(-1)} frames give ${t} positions, more than ` +
          `maxSourcePositions (${max})`,
      );
    }
    x = x.add(this.embed_positions.weight.narrow(0, 0, t));
    for (const layer of this.layers) x = layer.call(x);
    return this.layer_norm.call(x);
  }
}

/** The model-file factory: a WhisperEncoder for a config or a name (default "tiny"). */
export default function createWhisperEncoder(
  config: ConfigChoice<WhisperEncoderConfig, keyof typeof configs> = "tiny",
): WhisperEncoder {
  return new WhisperEncoder(resolveConfig("whisper", configs, config));
}

/**
 * Example inputs for `{ batch, frames }` (defaults 2 and 2 * maxSourcePositions, Whisper's
 * 30-second window): `[features]` [batch, numMelBins, frames].
 */
export function inputs(
  spec: Record<string, number> = {},
  config: ConfigChoice<WhisperEncoderConfig, keyof typeof configs> = "tiny",
): [Tensor] {
  const c = resolveConfig("whisper", configs, config);
  const max = 2 * c.maxSourcePositions;
  const { batch, frames } = readSpec("whisper", spec, { batch: 2, frames: max });
  if (frames > max) {
    throw new Error(`whisper inputs: frames ${frames} exceeds 2 * maxSourcePositions (${max})`);
  }
  return [randn([batch, c.numMelBins, frames], { generator: new Generator(0) })];
}
