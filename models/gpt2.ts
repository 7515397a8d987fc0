// A GPT-2-style decoder with Hugging Face's GPT-2 module tree and parameter names (`wte.weight`,
// `h.0.attn.c_attn.weight`, `h.0.mlp.c_fc.bias`, `ln_f.weight`) AND layouts: the projections
// are HF's Conv1D, a Linear whose weight is stored transposed ([in, out]), so the weights of a
// GPT2Model / GPT2LMHeadModel checkpoint load without transposing (`fromHuggingFace` only
// renames and drops HF's mask buffers). Learned token and position embeddings, pre-LN blocks
// with causal self-attention (c_attn computes q, k and v in one matmul) and a tanh-GELU MLP, a
// final LayerNorm, and the LM head tied to the token embedding. A KV cache makes generation one
// token per step: forward returns each layer's keys and values and takes them back as
// `pastKeyValues`. A static cache (Hugging Face's StaticCache, the pattern for compiled
// generation) is preallocated at its full length; each step writes the new keys and values at
// the current position with a dynamic-update-slice and masks the positions not written yet, and
// the position is a runtime tensor, so every decoding step has the same shapes and one program.

import {
  arange,
  Generator,
  nn,
  noGrad,
  ops,
  randint,
  randn,
  type Tensor,
  tensor,
  zeros,
} from "../index.ts";
import { type ConfigChoice, readSpec, resolveConfig } from "./spec.ts";

export interface GPT2Config {
  vocabSize: number;
  /** The context length: the most positions a sequence (cache included) may have. */
  nPositions: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  layerNormEpsilon: number;
  embdPdrop: number;
  attnPdrop: number;
  residPdrop: number;
}

/** Test-sized: 2 layers, 32 wide, 4 heads, 100 tokens, 32 positions. */
export const tinyConfig: GPT2Config = {
  vocabSize: 100,
  nPositions: 32,
  nEmbd: 32,
  nLayer: 2,
  nHead: 4,
  layerNormEpsilon: 1e-5,
  embdPdrop: 0.1,
  attnPdrop: 0.1,
  residPdrop: 0.1,
};

/** GPT-2 small (124M parameters). */
export const fullConfig: GPT2Config = {
  vocabSize: 50257,
  nPositions: 1024,
  nEmbd: 768,
  nLayer: 12,
  nHead: 12,
  layerNormEpsilon: 1e-5,
  embdPdrop: 0.1,
  attnPdrop: 0.1,
  residPdrop: 0.1,
};

export const configs = { tiny: tinyConfig, full: fullConfig } as const;

/** One layer's cached keys and values, each [B, nHead, T, nEmbd / nHead]. */
export type LayerCache = [key: Tensor, value: Tensor];

/** The KV cache: one entry per layer. */
export type KVCache = LayerCache[];

/**
 * A static cache: one [key, value] per layer, each preallocated [B, nHead, maxLen, headDim]
 * (GPT2.createStaticCache). Positions at or past the current length hold zeros or stale values
 * and are masked out.
 */
export type StaticKVCache = KVCache;

/** HF's Conv1D: y = x W + b with W stored [nx (in), nf (out)], initialised N(0, 0.02). */
export class Conv1D extends nn.Module {
  readonly nf: number;
  weight: nn.Parameter;
  bias: nn.Parameter;

  constructor(nf: number, nx: number) {
    super();
    this.nf = nf;
    this.weight = new nn.Parameter(randn(nx, nf).mul(0.02));
    this.bias = new nn.Parameter(zeros(nf));
  }

  forward(x: Tensor): Tensor {
    return x.matmul(this.weight).add(this.bias);
  }

  override extraRepr(): string {
    return `nf=${this.nf}, nx=${this.weight.size(0)}`;
  }
}

export class GPT2Attention extends nn.Module {
  readonly numHeads: number;
  readonly attnPdrop: number;
  c_attn: Conv1D;
  c_proj: Conv1D;
  resid_dropout: nn.Dropout;

  constructor(c: GPT2Config) {
    super();
    if (c.nEmbd % c.nHead !== 0) {
      throw new Error(
        `GPT2Attention: nEmbd (${c.nEmbd}) must be divisible by nHead (${c.nHead})`,
      );
    }
    this.numHeads = c.nHead;
    this.attnPdrop = c.attnPdrop;
    this.c_attn = new Conv1D(3 * c.nEmbd, c.nEmbd);
    this.c_proj = new Conv1D(c.nEmbd, c.nEmbd);
    this.resid_dropout = new nn.Dropout(c.residPdrop);
  }

  /**
   * x [B, S, D] and this layer's cache (T cached positions) → output and the new cache. With
   * `position` (an int64 scalar tensor) `past` is a static cache: the new keys and values are
   * written at `position` and query i sees the keys 0 .. position + i.
   */
  forward(x: Tensor, past: LayerCache | null, position?: Tensor): [Tensor, LayerCache] {
    const [b, s, d] = x.shape as [number, number, number];
    const heads = (t: Tensor) =>
      t.reshape(b, s, this.numHeads, d / this.numHeads).transpose(1, 2);
    const [q, k0, v0] = this.c_attn.call(x).split(d, 2).map(heads) as [Tensor, Tensor, Tensor];
    if (position !== undefined) {
      if (past === null) throw new Error("GPT2Attention: a cache position needs a static cache");
      return this.forwardStatic(x, q, k0, v0, past, position);
    }
    const k = past === null ? k0 : ops.cat([past[0], k0], -2);
    const v = past === null ? v0 : ops.cat([past[1], v0], -2);
    const t = k.size(-2);
    // Query i is at absolute position t - s + i and sees keys 0 .. t - s + i. Without a cache
    // (s == t) that is the plain causal mask. The test is on `past`, not on `s === t`, so the
    // code does not branch on a size (compile() would keep it static; docs/dynamic-shapes.md).
    const dropoutP = this.training ? this.attnPdrop : 0;
    const out =
      past === null
        ? ops.scaledDotProductAttention(q, k, v, { isCausal: true, dropoutP })
        : ops.scaledDotProductAttention(q, k, v, {
            attnMask: ops.tril(ops.ones([s, t], { dtype: "bool" }), t - s),
            dropoutP,
          });
    const merged = out.transpose(1, 2).reshape(b, s, d);
    return [this.resid_dropout.call(this.c_proj.call(merged)), [k, v]];
  }

  private forwardStatic(
    x: Tensor,
    q: Tensor,
    k0: Tensor,
    v0: Tensor,
    past: LayerCache,
    position: Tensor,
  ): [Tensor, LayerCache] {
    const [b, s, d] = x.shape as [number, number, number];
    // Starts [0, 0, position, 0]: the write lands at the step's position along the cache's T.
    const zero = zeros([2], { dtype: "int64" });
    const starts = ops.cat([zero, position.reshape(1), zero.narrow(0, 0, 1)], 0);
    const k = ops.dynamicUpdateSlice(past[0], k0, starts);
    const v = ops.dynamicUpdateSlice(past[1], v0, starts);
    // Key j is visible to query i iff j <= position + i: causal, and blind to the slots not
    // written yet. Built from tensors, so the program does not depend on the step.
    const queryPos = arange(s).add(position);
    const mask = arange(k.size(-2)).unsqueeze(0).le(queryPos.unsqueeze(1));
    const dropoutP = this.training ? this.attnPdrop : 0;
    const out = ops.scaledDotProductAttention(q, k, v, { attnMask: mask, dropoutP });
    const merged = out.transpose(1, 2).reshape(b, s, d);
    return [this.resid_dropout.call(this.c_proj.call(merged)), [k, v]];
  }
}

export class GPT2MLP extends nn.Module {
  c_fc: Conv1D;
  c_proj: Conv1D;
  dropout: nn.Dropout;

  constructor(c: GPT2Config) {
    super();
    this.c_fc = new Conv1D(4 * c.nEmbd, c.nEmbd);
    this.c_proj = new Conv1D(c.nEmbd, 4 * c.nEmbd);
    this.dropout = new nn.Dropout(c.residPdrop);
  }

  forward(x: Tensor): Tensor {
    const h = ops.gelu(this.c_fc.call(x), { approximate: "tanh" });
    return this.dropout.call(this.c_proj.call(h));
  }
}

export class GPT2Block extends nn.Module {
  ln_1: nn.LayerNorm;
  attn: GPT2Attention;
  ln_2: nn.LayerNorm;
  mlp: GPT2MLP;

  constructor(c: GPT2Config) {
    super();
    this.ln_1 = new nn.LayerNorm(c.nEmbd, { eps: c.layerNormEpsilon });
    this.attn = new GPT2Attention(c);
    this.ln_2 = new nn.LayerNorm(c.nEmbd, { eps: c.layerNormEpsilon });
    this.mlp = new GPT2MLP(c);
  }

  forward(x: Tensor, past: LayerCache | null, position?: Tensor): [Tensor, LayerCache] {
    const [a, present] = this.attn.call(this.ln_1.call(x), past, position);
    const h = x.add(a);
    return [h.add(this.mlp.call(this.ln_2.call(h))), present];
  }
}

export interface GPT2ForwardOptions {
  /** The cache a previous call returned; the new ids continue that sequence. */
  pastKeyValues?: KVCache | null;
  /** Return the cache (keys and values of every position so far). Default false. */
  useCache?: boolean;
  /**
   * A static cache (createStaticCache) to write the new positions into, at `cachePosition`;
   * the output's pastKeyValues is the updated cache (always returned). Not with pastKeyValues.
   */
  staticCache?: StaticKVCache;
  /**
   * Where the ids' first token goes in the static cache (the number of positions already
   * written): an int64 scalar tensor, so a compiled forward serves every step with one
   * program (a number works too but is a constant of the program). Default 0.
   */
  cachePosition?: Tensor | number;
}

export interface GPT2Output {
  /** [B, S, vocabSize] for the S new positions. */
  logits: Tensor;
  /** The cache including the new positions, when useCache was true; else null. */
  pastKeyValues: KVCache | null;
}

export interface GenerateOptions {
  maxNewTokens: number;
  /** Feed one token per step through the KV cache (default true); false recomputes all. */
  useCache?: boolean;
  /**
   * Use a static cache (preallocated, written with dynamic-update-slice): after the prompt
   * every step has the same shapes, so a compiled forward compiles twice (prompt and step)
   * whatever the number of tokens. Default false.
   */
  staticCache?: boolean;
  /** The static cache's length; default: prompt + maxNewTokens - 1 (what the steps need). */
  cacheLength?: number;
  /** What runs each step (default: this model); e.g. `compile(model)`. */
  forward?: (inputIds: Tensor, options: GPT2ForwardOptions) => GPT2Output;
}

/** GPT-2 with its LM head (tied to `wte`), under GPT2Model's state-dict keys. */
export class GPT2 extends nn.Module {
  readonly config: GPT2Config;
  wte: nn.Embedding;
  wpe: nn.Embedding;
  drop: nn.Dropout;
  h: nn.ModuleList<GPT2Block>;
  ln_f: nn.LayerNorm;

  constructor(config: GPT2Config = tinyConfig) {
    super();
    this.config = config;
    this.wte = new nn.Embedding(config.vocabSize, config.nEmbd);
    this.wpe = new nn.Embedding(config.nPositions, config.nEmbd);
    this.drop = new nn.Dropout(config.embdPdrop);
    const blocks = Array.from({ length: config.nLayer }, () => new GPT2Block(config));
    this.h = new nn.ModuleList(blocks);
    this.ln_f = new nn.LayerNorm(config.nEmbd, { eps: config.layerNormEpsilon });
  }

  /**
   * An empty static cache for `batch` sequences of up to `maxLen` positions (default the
   * context length): per layer, zero keys and values [batch, nHead, maxLen, nEmbd / nHead] in
   * the weights' dtype.
   */
  createStaticCache(batch: number, maxLen: number = this.config.nPositions): StaticKVCache {
    const c = this.config;
    for (const [what, n] of [["batch", batch], ["maxLen", maxLen]] as const) {
      if (!Number.isInteger(n) || n < 1) {
        throw new Error(`GPT2.createStaticCache: ${what} must be an integer >= 1, got ${n}`);
      }
    }
    if (maxLen > c.nPositions) {
      throw new Error(`GPT2.createStaticCache: maxLen ${maxLen} exceeds the context length ` +
        `(nPositions ${c.nPositions})`);
    }
    const shape = [batch, c.nHead, maxLen, c.nEmbd / c.nHead];
    const dtype = this.wte.weight.dtype;
    return Array.from({ length: c.nLayer }, (): LayerCache => [
      zeros(shape, { dtype }),
      zeros(shape, { dtype }),
    ]);
  }

  /** Token ids [B, S] (int64 or int32) → next-token logits, and the cache if asked for. */
  forward(inputIds: Tensor, options: GPT2ForwardOptions = {}): GPT2Output {
    if (options.staticCache !== undefined) return this.forwardStatic(inputIds, options);
    const past = options.pastKeyValues ?? null;
    if (past !== null && past.length !== this.h.length) {
      throw new Error(
        `GPT2: pastKeyValues has ${past.length} layers, the model has ${this.h.length}`,
      );
    }
    const start = past === null ? 0 : past[0]![0].size(-2);
    const s = inputIds.size(-1);
    if (start + s > this.config.nPositions) {
      throw new Error(
        `GPT2: ${start} cached + ${s} new positions exceed the context length ` +
          `(nPositions ${this.config.nPositions})`,
      );
    }
    const positions = arange(start, start + s).unsqueeze(0);
    let x = this.drop.call(this.wte.call(inputIds).add(this.wpe.call(positions)));
    const presents: KVCache = [];
    for (const [i, block] of [...this.h].entries()) {
      const [y, present] = block.call(x, past === null ? null : past[i]!);
      x = y;
      presents.push(present);
    }
    // The LM head is a bias-free Linear sharing its weight with the token embedding.
    const logits = ops.linear(this.ln_f.call(x), this.wte.weight);
    return { logits, pastKeyValues: options.useCache ? presents : null };
  }

  private forwardStatic(inputIds: Tensor, options: GPT2ForwardOptions): GPT2Output {
    const cache = options.staticCache!;
    if ((options.pastKeyValues ?? null) !== null) {
      throw new Error("GPT2: pass either pastKeyValues (a growing cache) or staticCache");
    }
    if (cache.length !== this.h.length) {
      throw new Error(
        `GPT2: staticCache has ${cache.length} layers, the model has ${this.h.length}`,
      );
    }
    const s = inputIds.size(-1);
    const maxLen = cache[0]![0].size(-2);
    const at = options.cachePosition ?? 0;
    // Written as separate range checks that throw (not one compound condition), so compile()'s
    // source analysis reads them as guards rather than as branches on a size.
    const misfit = () =>
      new Error(`GPT2: cachePosition ${String(at)} + ${s} new positions do not fit the static ` +
        `cache's ${maxLen}`);
    if (typeof at === "number") {
      if (!Number.isInteger(at)) throw misfit();
      if (at < 0) throw misfit();
      if (at + s > maxLen) throw misfit();
    }
    const position = typeof at === "number" ? tensor(BigInt(at)) : at.to("int64");
    // The rank only: a check on its element count would read as a branch on a size to
    // compile(); reshape([]) below rejects a vector with more than one element itself.
    if (position.ndim > 1) {
      throw new Error(`GPT2: cachePosition must be a scalar, got shape [${position.shape}]`);
    }
    const pos = position.reshape([]);
    const positions = arange(s).add(pos).unsqueeze(0);
    let x = this.drop.call(this.wte.call(inputIds).add(this.wpe.call(positions)));
    const presents: KVCache = [];
    for (const [i, block] of [...this.h].entries()) {
      const [y, present] = block.call(x, cache[i]!, pos);
      x = y;
      presents.push(present);
    }
    const logits = ops.linear(this.ln_f.call(x), this.wte.weight);
    return { logits, pastKeyValues: presents };
  }

  /**
   * Greedy decoding: appends `maxNewTokens` argmax tokens to each row of `inputIds` [B, S] and
   * returns [B, S + maxNewTokens] in the ids' dtype. With the cache (the default) the prompt runs
   * once and every later step feeds one token. Call eval() first to turn dropout off.
   */
  generate(inputIds: Tensor, options: GenerateOptions): Tensor {
    const { maxNewTokens, useCache = true } = options;
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 0) {
      throw new Error(
        `GPT2.generate: maxNewTokens must be an integer >= 0, got ${String(maxNewTokens)}`,
      );
    }
    // Decoding computes no gradients (as Hugging Face's generate runs under no_grad): without
    // this a KV cache would chain every step's graph to the next, keeping them all alive.
    return noGrad(() => this.generateGreedy(inputIds, options));
  }

  private generateGreedy(inputIds: Tensor, options: GenerateOptions): Tensor {
    const { maxNewTokens, useCache = true } = options;
    const model: GPT2 = this; // `call` types its arguments from the concrete class
    if (options.staticCache) return this.generateStatic(inputIds, options);
    const run = options.forward ?? ((x, o) => model.call(x, o));
    let ids = inputIds;
    let next = inputIds;
    let past: KVCache | null = null;
    for (let step = 0; step < maxNewTokens; step++) {
      const out: GPT2Output = useCache
        ? run(next, { pastKeyValues: past, useCache: true })
        : run(ids, {});
      past = out.pastKeyValues;
      const last = out.logits.narrow(1, out.logits.size(1) - 1, 1);
      next = ops.argmax(last, -1).to(ids.dtype);
      ids = ops.cat([ids, next], 1);
    }
    return ids;
  }

  private generateStatic(inputIds: Tensor, options: GenerateOptions): Tensor {
    const { maxNewTokens } = options;
    if (maxNewTokens === 0) return inputIds;
    const model: GPT2 = this;
    const run = options.forward ?? ((ids, o) => model.call(ids, o));
    const length = options.cacheLength ?? inputIds.size(-1) + maxNewTokens - 1;
    let cache = this.createStaticCache(inputIds.size(0), length);
    let ids = inputIds;
    let next = inputIds;
    let written = 0;
    for (let step = 0; step < maxNewTokens; step++) {
      const cachePosition = tensor(BigInt(written));
      const out = run(next, { staticCache: cache, cachePosition });
      cache = out.pastKeyValues!;
      written += next.size(-1);
      const last = out.logits.narrow(1, out.logits.size(1) - 1, 1);
      next = ops.argmax(last, -1).to(ids.dtype);
      ids = ops.cat([ids, next], 1);
    }
    return ids;
  }
}

/**
 * A Hugging Face GPT-2 state dict (GPT2Model, or GPT2LMHeadModel with its `transformer.`
 * prefix) in this model's keys: the prefix is removed, and the causal-mask buffers
 * (`h.N.attn.bias`, `h.N.attn.masked_bias`) and the tied `lm_head.weight` are dropped. The
 * weights need no transposing (both use Conv1D's [in, out] layout).
 */
export function fromHuggingFace(stateDict: Record<string, Tensor>): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [key, value] of Object.entries(stateDict)) {
    const k = key.startsWith("transformer.") ? key.slice("transformer.".length) : key;
    if (k === "lm_head.weight" || /\.attn\.(bias|masked_bias)$/.test(k)) continue;
    out[k] = value;
  }
  return out;
}

/** The model-file factory: a GPT2 for a config or a config name (default "tiny"). */
export default function createGPT2(
  config: ConfigChoice<GPT2Config, keyof typeof configs> = "tiny",
): GPT2 {
  return new GPT2(resolveConfig("gpt2", configs, config));
}

/** Example inputs for `{ batch, seq }` (defaults 2 and 16): `[inputIds]` [batch, seq] int64. */
export function inputs(
  spec: Record<string, number> = {},
  config: ConfigChoice<GPT2Config, keyof typeof configs> = "tiny",
): [Tensor] {
  const c = resolveConfig("gpt2", configs, config);
  const { batch, seq } = readSpec("gpt2", spec, { batch: 2, seq: 16 });
  if (seq > c.nPositions) {
    throw new Error(`gpt2 inputs: seq ${seq} exceeds the context length ${c.nPositions}`);
  }
  return [randint(0, c.vocabSize, [batch, seq], { generator: new Generator(0) })];
}
