// A ResNet-18-style CNN, written the way torchvision writes it (and with torchvision's
// parameter names, so `conv1.weight`, `layer2.0.downsample.1.running_var`, `fc.bias` load from a
// torchvision state dict): a 7x7/2 stem convolution with BatchNorm and ReLU, a 3x3/2 max pool,
// four stages of BasicBlocks (conv3x3-bn-relu-conv3x3-bn plus the shortcut, which is a 1x1
// convolution and BatchNorm where the shape changes), adaptive average pooling and a Linear
// classifier. The stage widths and block counts are the config.

import { Generator, nn, ops, randn, type Tensor } from "../index.ts";
import { type ConfigChoice, readSpec, resolveConfig } from "./spec.ts";

export interface ResNetConfig {
  inChannels: number;
  /** Channels of the four stages (the stem has the first). */
  widths: [number, number, number, number];
  /** BasicBlocks per stage. */
  blocks: [number, number, number, number];
  numClasses: number;
}

/** Test-sized: narrow stages, two blocks in the first stage, one in the others. */
export const tinyConfig: ResNetConfig = {
  inChannels: 3,
  widths: [8, 16, 24, 32],
  blocks: [2, 1, 1, 1],
  numClasses: 10,
};

/** ResNet-18 (11.7M parameters; ImageNet inputs are [N, 3, 224, 224]). */
export const fullConfig: ResNetConfig = {
  inChannels: 3,
  widths: [64, 128, 256, 512],
  blocks: [2, 2, 2, 2],
  numClasses: 1000,
};

export const configs = { tiny: tinyConfig, full: fullConfig } as const;

/** Two 3x3 convolutions with BatchNorm, added to the (possibly downsampled) input. */
export class BasicBlock extends nn.Module {
  conv1: nn.Conv2d;
  bn1: nn.BatchNorm2d;
  relu = new nn.ReLU({ inplace: true });
  conv2: nn.Conv2d;
  bn2: nn.BatchNorm2d;
  downsample: nn.Sequential | null;

  constructor(inplanes: number, planes: number, stride = 1, downsample: nn.Sequential | null) {
    super();
    this.conv1 = new nn.Conv2d(inplanes, planes, 3, { stride, padding: 1, bias: false });
    this.bn1 = new nn.BatchNorm2d(planes);
    this.conv2 = new nn.Conv2d(planes, planes, 3, { padding: 1, bias: false });
    this.bn2 = new nn.BatchNorm2d(planes);
    this.downsample = downsample;
  }

  forward(x: Tensor): Tensor {
    let out = this.relu.call(this.bn1.call(this.conv1.call(x)));
    out = this.bn2.call(this.conv2.call(out));
    const identity = this.downsample === null ? x : this.downsample.call(x);
    return this.relu.call(out.add(identity));
  }
}

export class ResNet extends nn.Module {
  readonly config: ResNetConfig;
  conv1: nn.Conv2d;
  bn1: nn.BatchNorm2d;
  relu = new nn.ReLU({ inplace: true });
  maxpool = new nn.MaxPool2d(3, { stride: 2, padding: 1 });
  layer1: nn.Sequential;
  layer2: nn.Sequential;
  layer3: nn.Sequential;
  layer4: nn.Sequential;
  avgpool = new nn.AdaptiveAvgPool2d([1, 1]);
  fc: nn.Linear;

  constructor(config: ResNetConfig = tinyConfig) {
    super();
    this.config = config;
    const [w0, w1, w2, w3] = config.widths;
    this.conv1 = new nn.Conv2d(config.inChannels, w0, 7, { stride: 2, padding: 3, bias: false });
    this.bn1 = new nn.BatchNorm2d(w0);
    let inplanes = w0;
    const stage = (planes: number, blocks: number, stride: number): nn.Sequential => {
      let downsample: nn.Sequential | null = null;
      if (stride !== 1 || inplanes !== planes) {
        downsample = new nn.Sequential(
          new nn.Conv2d(inplanes, planes, 1, { stride, bias: false }),
          new nn.BatchNorm2d(planes),
        );
      }
      const layers = [new BasicBlock(inplanes, planes, stride, downsample)];
      inplanes = planes;
      for (let i = 1; i < blocks; i++) layers.push(new BasicBlock(planes, planes, 1, null));
      return new nn.Sequential(...layers);
    };
    this.layer1 = stage(w0, config.blocks[0], 1);
    this.layer2 = stage(w1, config.blocks[1], 2);
    this.layer3 = stage(w2, config.blocks[2], 2);
    this.layer4 = stage(w3, config.blocks[3], 2);
    this.fc = new nn.Linear(w3, config.numClasses);
  }

  /** Images [N, inChannels, H, W] → class logits [N, numClasses]. */
  forward(x: Tensor): Tensor {
    x = this.maxpool.call(this.relu.call(this.bn1.call(this.conv1.call(x))));
    x = this.layer4.call(this.layer3.call(this.layer2.call(this.layer1.call(x))));
    return this.fc.call(ops.flatten(this.avgpool.call(x), 1));
  }
}

/** The model-file factory: a ResNet for a config or a config name (default "tiny"). */
export default function createResNet(
  config: ConfigChoice<ResNetConfig, keyof typeof configs> = "tiny",
): ResNet {
  return new ResNet(resolveConfig("resnet", configs, config));
}

/**
 * Example inputs for `{ batch, size }` (defaults 2 and 32 — use 224 for ImageNet-sized
 * images): `[images]` with images [batch, inChannels, size, size].
 */
export function inputs(
  spec: Record<string, number> = {},
  config: ConfigChoice<ResNetConfig, keyof typeof configs> = "tiny",
): [Tensor] {
  const c = resolveConfig("resnet", configs, config);
  const { batch, size } = readSpec("resnet", spec, { batch: 2, size: 32 });
  return [randn([batch, c.inChannels, size, size], { generator: new Generator(0) })];
}
