// A Vision Transformer written as timm's VisionTransformer is, with its parameter names
// (`cls_token`, `pos_embed`, `patch_embed.proj.weight`, `blocks.0.attn.qkv.weight`,
// `blocks.0.mlp.fc2.bias`, `norm.weight`, `head.weight`), so a timm ViT state dict loads as is:
// the image is cut into patches by a convolution whose stride is the patch size, a learned
// class token is prepended and learned positions added, pre-LN transformer blocks (fused qkv
// projection, GELU MLP) follow, and the classifier reads the class token after the final norm.

import { Generator, nn, ops, randn, type Tensor } from "../index.ts";
import { type ConfigChoice, readSpec, resolveConfig } from "./spec.ts";

export interface ViTConfig {
  /** Square input images of imageSize x imageSize pixels. */
  imageSize: number;
  patchSize: number;
  inChannels: number;
  numClasses: number;
  embedDim: number;
  depth: number;
  numHeads: number;
  /** The MLP's hidden width is embedDim * mlpRatio. */
  mlpRatio: number;
  layerNormEps: number;
}

/** Test-sized: 32x32 images in 16 patches of 8x8, 2 blocks, 32 wide. */
export const tinyConfig: ViTConfig = {
  imageSize: 32,
  patchSize: 8,
  inChannels: 3,
  numClasses: 10,
  embedDim: 32,
  depth: 2,
  numHeads: 4,
  mlpRatio: 2,
  layerNormEps: 1e-6,
};

/** ViT-B/16 (vit_base_patch16_224: 86M parameters). */
export const fullConfig: ViTConfig = {
  imageSize: 224,
  patchSize: 16,
  inChannels: 3,
  numClasses: 1000,
  embedDim: 768,
  depth: 12,
  numHeads: 12,
  mlpRatio: 4,
  layerNormEps: 1e-6,
};

export const configs = { tiny: tinyConfig, full: fullConfig } as const;

/** [B, C, H, W] → [B, (H/p)(W/p), embedDim]: one token per patch. */
export class PatchEmbed extends nn.Module {
  proj: nn.Conv2d;

  constructor(c: ViTConfig) {
    super();
    this.proj = new nn.Conv2d(c.inChannels, c.embedDim, c.patchSize, { stride: c.patchSize });
  }

  forward(x: Tensor): Tensor {
    return this.proj.call(x).flatten(2).transpose(1, 2);
  }
}

export class Attention extends nn.Module {
  readonly numHeads: number;
  qkv: nn.Linear;
  proj: nn.Linear;

  constructor(c: ViTConfig) {
    super();
    if (c.embedDim % c.numHeads !== 0) {
      throw new Error(
        `ViT Attention: embedDim (${c.embedDim}) must be divisible by numHeads (${c.numHeads})`,
      );
    }
    this.numHeads = c.numHeads;
    this.qkv = new nn.Linear(c.embedDim, 3 * c.embedDim);
    this.proj = new nn.Linear(c.embedDim, c.embedDim);
  }

  forward(x: Tensor): Tensor {
    const [b, n, d] = x.shape as [number, number, number];
    // [B, N, 3D] → [3, B, heads, N, D/heads]: q, k and v from one matmul.
    const qkv = this.qkv
      .call(x)
      .reshape(b, n, 3, this.numHeads, d / this.numHeads)
      .permute(2, 0, 3, 1, 4);
    const [q, k, v] = qkv.split(1, 0).map((t) => t.squeeze(0)) as [Tensor, Tensor, Tensor];
    const out = ops.scaledDotProductAttention(q, k, v);
    return this.proj.call(out.transpose(1, 2).reshape(b, n, d));
  }
}

export class Mlp extends nn.Module {
  fc1: nn.Linear;
  act = new nn.GELU();
  fc2: nn.Linear;

  constructor(dim: number, hidden: number) {
    super();
    this.fc1 = new nn.Linear(dim, hidden);
    this.fc2 = new nn.Linear(hidden, dim);
  }

  forward(x: Tensor): Tensor {
    return this.fc2.call(this.act.call(this.fc1.call(x)));
  }
}

/** Pre-LN: x + attn(norm1(x)), then + mlp(norm2(x)). */
export class Block extends nn.Module {
  norm1: nn.LayerNorm;
  attn: Attention;
  norm2: nn.LayerNorm;
  mlp: Mlp;

  constructor(c: ViTConfig) {
    super();
    this.norm1 = new nn.LayerNorm(c.embedDim, { eps: c.layerNormEps });
    this.attn = new Attention(c);
    this.norm2 = new nn.LayerNorm(c.embedDim, { eps: c.layerNormEps });
    this.mlp = new Mlp(c.embedDim, Math.floor(c.embedDim * c.mlpRatio));
  }

  forward(x: Tensor): Tensor {
    const h = x.add(this.attn.call(this.norm1.call(x)));
    return h.add(this.mlp.call(this.norm2.call(h)));
  }
}

export class VisionTransformer extends nn.Module {
  readonly config: ViTConfig;
  patch_embed: PatchEmbed;
  cls_token: nn.Parameter;
  pos_embed: nn.Parameter;
  blocks: nn.Sequential;
  norm: nn.LayerNorm;
  head: nn.Linear;

  constructor(config: ViTConfig = tinyConfig) {
    super();
    if (config.imageSize % config.patchSize !== 0) {
      throw new Error(
        `VisionTransformer: imageSize (${config.imageSize}) must be a multiple of patchSize ` +
          `(${config.patchSize})`,
      );
    }
    this.config = config;
    const patches = (config.imageSize / config.patchSize) ** 2;
    this.patch_embed = new PatchEmbed(config);
    this.cls_token = new nn.Parameter(randn(1, 1, config.embedDim).mul(0.02));
    this.pos_embed = new nn.Parameter(randn(1, patches + 1, config.embedDim).mul(0.02));
    const blocks = Array.from({ length: config.depth }, () => new Block(config));
    this.blocks = new nn.Sequential(...blocks);
    this.norm = new nn.LayerNorm(config.embedDim, { eps: config.layerNormEps });
    this.head = new nn.Linear(config.embedDim, config.numClasses);
  }

  /** Images [B, inChannels, imageSize, imageSize] → class logits [B, numClasses]. */
  forward(images: Tensor): Tensor {
    const size = this.config.imageSize;
    const [h, w] = images.shape.slice(-2);
    if (images.ndim !== 4 || h !== size || w !== size) {
      throw new Error(
        `VisionTransformer: expected images [B, ${this.config.inChannels}, ${size}, ${size}], ` +
          `got [${images.shape.join(", ")}]`,
      );
    }
    const x = this.patch_embed.call(images);
    const cls = this.cls_token.expand(x.size(0), -1, -1);
    const tokens = this.blocks.call(ops.cat([cls, x], 1).add(this.pos_embed));
    const first = this.norm.call(tokens).narrow(1, 0, 1).squeeze(1);
    return this.head.call(first);
  }
}

/** The model-file factory: a VisionTransformer for a config or a name (default "tiny"). */
export default function createViT(
  config: ConfigChoice<ViTConfig, keyof typeof configs> = "tiny",
): VisionTransformer {
  return new VisionTransformer(resolveConfig("vit", configs, config));
}

/**
 * Example inputs for `{ batch }` (default 2): `[images]` [batch, inChannels, imageSize,
 * imageSize] (the learned positions fix the image size).
 */
export function inputs(
  spec: Record<string, number> = {},
  config: ConfigChoice<ViTConfig, keyof typeof configs> = "tiny",
): [Tensor] {
  const c = resolveConfig("vit", configs, config);
  const { batch } = readSpec("vit", spec, { batch: 2 });
  const shape = [batch, c.inChannels, c.imageSize, c.imageSize];
  return [randn(shape, { generator: new Generator(0) })];
}
