// A BERT-style encoder written as Hugging Face's BertModel is, with its module tree and
// parameter names (`embeddings.word_embeddings.weight`, `encoder.layer.0.attention.self.query`,
// `encoder.layer.0.output.LayerNorm.bias`, `pooler.dense.weight`), so a BertModel state dict
// loads as is: token + position + token-type embeddings with LayerNorm, post-LN transformer
// layers (self-attention with a padding mask, then a GELU MLP, each added to its input and
// normalized), and a tanh pooler over the first token.

import { arange, Generator, nn, ops, randint, type Tensor, zerosLike } from "../index.ts";
import { type ConfigChoice, readSpec, resolveConfig } from "./spec.ts";

export interface BertConfig {
  vocabSize: number;
  hiddenSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  intermediateSize: number;
  maxPositionEmbeddings: number;
  typeVocabSize: number;
  layerNormEps: number;
  hiddenDropoutProb: number;
  attentionProbsDropoutProb: number;
}

/** Test-sized: 2 layers, 32 wide, 4 heads. */
export const tinyConfig: BertConfig = {
  vocabSize: 100,
  hiddenSize: 32,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  intermediateSize: 64,
  maxPositionEmbeddings: 64,
  typeVocabSize: 2,
  layerNormEps: 1e-12,
  hiddenDropoutProb: 0.1,
  attentionProbsDropoutProb: 0.1,
};

/** BERT-base (bert-base-uncased): 12 layers, 768 wide, 12 heads, 110M parameters. */
export const fullConfig: BertConfig = {
  vocabSize: 30522,
  hiddenSize: 768,
  numHiddenLayers: 12,
  numAttentionHeads: 12,
  intermediateSize: 3072,
  maxPositionEmbeddings: 512,
  typeVocabSize: 2,
  layerNormEps: 1e-12,
  hiddenDropoutProb: 0.1,
  attentionProbsDropoutProb: 0.1,
};

export const configs = { tiny: tinyConfig, full: fullConfig } as const;

export class BertEmbeddings extends nn.Module {
  word_embeddings: nn.Embedding;
  position_embeddings: nn.Embedding;
  token_type_embeddings: nn.Embedding;
  LayerNorm: nn.LayerNorm;
  dropout: nn.Dropout;

  constructor(c: BertConfig) {
    super();
    this.word_embeddings = new nn.Embedding(c.vocabSize, c.hiddenSize);
    this.position_embeddings = new nn.Embedding(c.maxPositionEmbeddings, c.hiddenSize);
    this.token_type_embeddings = new nn.Embedding(c.typeVocabSize, c.hiddenSize);
    this.LayerNorm = new nn.LayerNorm(c.hiddenSize, { eps: c.layerNormEps });
    this.dropout = new nn.Dropout(c.hiddenDropoutProb);
  }

  forward(inputIds: Tensor, tokenTypeIds: Tensor): Tensor {
    const seq = inputIds.size(-1);
    const max = this.position_embeddings.numEmbeddings;
    if (seq > max) {
      throw new Error(`BertModel: sequence length ${seq} exceeds maxPositionEmbeddings (${max})`);
    }
    const positions = arange(seq).unsqueeze(0);
    const x = this.word_embeddings
      .call(inputIds)
      .add(this.token_type_embeddings.call(tokenTypeIds))
      .add(this.position_embeddings.call(positions));
    return this.dropout.call(this.LayerNorm.call(x));
  }
}

export class BertSelfAttention extends nn.Module {
  readonly numHeads: number;
  readonly dropoutP: number;
  query: nn.Linear;
  key: nn.Linear;
  value: nn.Linear;

  constructor(c: BertConfig) {
    super();
    if (c.hiddenSize % c.numAttentionHeads !== 0) {
      throw new Error(
        `BertSelfAttention: hiddenSize (${c.hiddenSize}) must be divisible by ` +
          `numAttentionHeads (${c.numAttentionHeads})`,
      );
    }
    this.numHeads = c.numAttentionHeads;
    this.dropoutP = c.attentionProbsDropoutProb;
    this.query = new nn.Linear(c.hiddenSize, c.hiddenSize);
    this.key = new nn.Linear(c.hiddenSize, c.hiddenSize);
    this.value = new nn.Linear(c.hiddenSize, c.hiddenSize);
  }

  /** x [B, S, D]; mask [B, 1, 1, S] bool, true where a key may be attended to. */
  forward(x: Tensor, mask: Tensor): Tensor {
    const [b, s, d] = x.shape as [number, number, number];
    const heads = (t: Tensor) =>
      t.reshape(b, s, this.numHeads, d / this.numHeads).transpose(1, 2);
    const out = ops.scaledDotProductAttention(
      heads(this.query.call(x)),
      heads(this.key.call(x)),
      heads(this.value.call(x)),
      { attnMask: mask, dropoutP: this.training ? this.dropoutP : 0 },
    );
    return out.transpose(1, 2).reshape(b, s, d);
  }
}

export class BertSelfOutput extends nn.Module {
  dense: nn.Linear;
  LayerNorm: nn.LayerNorm;
  dropout: nn.Dropout;

  constructor(c: BertConfig) {
    super();
    this.dense = new nn.Linear(c.hiddenSize, c.hiddenSize);
    this.LayerNorm = new nn.LayerNorm(c.hiddenSize, { eps: c.layerNormEps });
    this.dropout = new nn.Dropout(c.hiddenDropoutProb);
  }

  /** Post-LN: normalize (attention output + the attention's input). */
  forward(hidden: Tensor, input: Tensor): Tensor {
    return this.LayerNorm.call(this.dropout.call(this.dense.call(hidden)).add(input));
  }
}

export class BertAttention extends nn.Module {
  self: BertSelfAttention;
  output: BertSelfOutput;

  constructor(c: BertConfig) {
    super();
    this.self = new BertSelfAttention(c);
    this.output = new BertSelfOutput(c);
  }

  forward(x: Tensor, mask: Tensor): Tensor {
    return this.output.call(this.self.call(x, mask), x);
  }
}

export class BertIntermediate extends nn.Module {
  dense: nn.Linear;

  constructor(c: BertConfig) {
    super();
    this.dense = new nn.Linear(c.hiddenSize, c.intermediateSize);
  }

  forward(x: Tensor): Tensor {
    return ops.gelu(this.dense.call(x));
  }
}

export class BertOutput extends nn.Module {
  dense: nn.Linear;
  LayerNorm: nn.LayerNorm;
  dropout: nn.Dropout;

  constructor(c: BertConfig) {
    super();
    this.dense = new nn.Linear(c.intermediateSize, c.hiddenSize);
    this.LayerNorm = new nn.LayerNorm(c.hiddenSize, { eps: c.layerNormEps });
    this.dropout = new nn.Dropout(c.hiddenDropoutProb);
  }

  /** Post-LN: normalize (MLP output + the MLP's input). */
  forward(hidden: Tensor, input: Tensor): Tensor {
    return this.LayerNorm.call(this.dropout.call(this.dense.call(hidden)).add(input));
  }
}

export class BertLayer extends nn.Module {
  attention: BertAttention;
  intermediate: BertIntermediate;
  output: BertOutput;

  constructor(c: BertConfig) {
    super();
    this.attention = new BertAttention(c);
    this.intermediate = new BertIntermediate(c);
    this.output = new BertOutput(c);
  }

  forward(x: Tensor, mask: Tensor): Tensor {
    const a = this.attention.call(x, mask);
    return this.output.call(this.intermediate.call(a), a);
  }
}

export class BertEncoder extends nn.Module {
  layer: nn.ModuleList<BertLayer>;

  constructor(c: BertConfig) {
    super();
    const layers = Array.from({ length: c.numHiddenLayers }, () => new BertLayer(c));
    this.layer = new nn.ModuleList(layers);
  }

  forward(x: Tensor, mask: Tensor): Tensor {
    for (const layer of this.layer) x = layer.call(x, mask);
    return x;
  }
}

export class BertPooler extends nn.Module {
  dense: nn.Linear;
  activation = new nn.Tanh();

  constructor(c: BertConfig) {
    super();
    this.dense = new nn.Linear(c.hiddenSize, c.hiddenSize);
  }

  /** The first token's hidden state, through dense + tanh. */
  forward(hidden: Tensor): Tensor {
    const first = hidden.narrow(1, 0, 1).squeeze(1);
    return this.activation.call(this.dense.call(first));
  }
}

export interface BertInputs {
  /** [B, S], 1 for tokens to attend to and 0 for padding (default: all ones). */
  attentionMask?: Tensor;
  /** [B, S] segment ids (default: all zeros). */
  tokenTypeIds?: Tensor;
}

export interface BertModelOutput {
  /** [B, S, hiddenSize]. */
  lastHiddenState: Tensor;
  /** [B, hiddenSize]. */
  poolerOutput: Tensor;
}

export class BertModel extends nn.Module {
  readonly config: BertConfig;
  embeddings: BertEmbeddings;
  encoder: BertEncoder;
  pooler: BertPooler;

  constructor(config: BertConfig = tinyConfig) {
    super();
    this.config = config;
    this.embeddings = new BertEmbeddings(config);
    this.encoder = new BertEncoder(config);
    this.pooler = new BertPooler(config);
  }

  /** Token ids [B, S] (int64 or int32) → hidden states and the pooled first token. */
  forward(inputIds: Tensor, options: BertInputs = {}): BertModelOutput {
    const [b, s] = inputIds.shape as [number, number];
    const types = options.tokenTypeIds ?? zerosLike(inputIds);
    // Padded keys are masked out for every query and head: [B, 1, 1, S], true = attend.
    const mask =
      options.attentionMask === undefined
        ? ops.ones([b, 1, 1, s], { dtype: "bool" })
        : options.attentionMask.ne(0).reshape(b, 1, 1, s);
    const hidden = this.encoder.call(this.embeddings.call(inputIds, types), mask);
    return { lastHiddenState: hidden, poolerOutput: this.pooler.call(hidden) };
  }
}

/** The model-file factory: a BertModel for a config or a config name (default "tiny"). */
export default function createBert(
  config: ConfigChoice<BertConfig, keyof typeof configs> = "tiny",
): BertModel {
  return new BertModel(resolveConfig("bert", configs, config));
}

/**
 * Example inputs for `{ batch, seq }` (defaults 2 and 16): `[inputIds, { attentionMask }]`
 * with random token ids [batch, seq] and an attention mask that pads the last quarter of every
 * row after the first.
 */
export function inputs(
  spec: Record<string, number> = {},
  config: ConfigChoice<BertConfig, keyof typeof configs> = "tiny",
): [Tensor, BertInputs] {
  const c = resolveConfig("bert", configs, config);
  const { batch, seq } = readSpec("bert", spec, { batch: 2, seq: 16 });
  if (seq > c.maxPositionEmbeddings) {
    throw new Error(
      `bert inputs: seq ${seq} exceeds maxPositionEmbeddings ${c.maxPositionEmbeddings}`,
    );
  }
  const ids = randint(0, c.vocabSize, [batch, seq], { generator: new Generator(0) });
  const keep = seq - Math.floor(seq / 4);
  const rows = Array.from({ length: batch }, (_, r) =>
    Array.from({ length: seq }, (_, i) => (r === 0 || i < keep ? 1 : 0)),
  );
  return [ids, { attentionMask: ops.tensor(rows, { dtype: "int64" }) }];
}
