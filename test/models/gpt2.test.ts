// The GPT-2-style decoder against PyTorch (scripts/fixtures/gen_models.py, Hugging Face's
// GPT-2 architecture, names and Conv1D [in, out] layout): state-dict keys, strict loading, the
// logits of a prompt, the logits through the KV cache (the prompt, then one token per call)
// within 1e-4, and greedy generate's token ids exactly — with the cache and without it, which
// must agree. Plus the cache's shapes, fromHuggingFace, errors and the model-file contract.

import { describe, expect, it } from "vitest";
import createGPT2, { fromHuggingFace, GPT2, inputs, tinyConfig } from "../../models/gpt2.ts";
import { ops, type Tensor, tensor } from "../../index.ts";
import {
  asTensor,
  asTensors,
  expectClose,
  getCase,
  loadPyTorch,
  modelCases,
  TOL,
  weights,
} from "./fixtures.ts";

const cases = modelCases("gpt2");
const model = loadPyTorch("gpt2", new GPT2(tinyConfig), tinyConfig, cases);

describe("models/gpt2", () => {
  it("matches PyTorch's logits for a prompt", () => {
    const c = getCase(cases, "forward");
    const out = model.call(asTensor(c.args[0]));
    expectClose(out.logits, asTensor(c.out), TOL);
    expect(out.pastKeyValues).toBeNull();
  });

  it("matches PyTorch through the KV cache, and the cache matches recomputation", () => {
    const c = getCase(cases, "cached");
    const [prompt, cont] = asTensors(c.args);
    let out = model.call(prompt, { useCache: true });
    const steps: Tensor[] = [out.logits];
    for (let i = 0; i < cont.size(1); i++) {
      out = model.call(cont.narrow(1, i, 1), { pastKeyValues: out.pastKeyValues, useCache: true });
      steps.push(out.logits);
    }
    const cached = ops.cat(steps, 1);
    expectClose(cached, asTensor(c.out), TOL);
    const full = model.call(ops.cat([prompt, cont], 1)).logits;
    expectClose(cached, full, { atol: 1e-5, rtol: 1e-5 });
    // One [B, H, T, D] key and value per layer, T = every position so far.
    expect(out.pastKeyValues).toHaveLength(2);
    for (const [k, v] of out.pastKeyValues!) {
      expect(k.shape).toEqual([2, 4, 8, 8]);
      expect(v.shape).toEqual([2, 4, 8, 8]);
    }
  });

  it("generates PyTorch's greedy tokens, with and without the cache", () => {
    const c = getCase(cases, "generate");
    const prompt = asTensor(c.args[0]);
    const maxNewTokens = c.args[1] as number;
    const cached = model.generate(prompt, { maxNewTokens });
    expectClose(cached, asTensor(c.out));
    const recomputed = model.generate(prompt, { maxNewTokens, useCache: false });
    expectClose(recomputed, cached);
    // int32 prompts give int32 ids.
    expectClose(model.generate(prompt.to("int32"), { maxNewTokens }), cached.to("int32"));
    expect(model.generate(prompt, { maxNewTokens: 0 }).toArray()).toEqual(prompt.toArray());
  });

  it("loads a Hugging Face state dict through fromHuggingFace", () => {
    const hf: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(weights("gpt2"))) hf[`transformer.${k}`] = v;
    hf["transformer.h.0.attn.bias"] = ops.ones([1, 1, 32, 32]);
    hf["transformer.h.1.attn.masked_bias"] = tensor(-1e4);
    hf["lm_head.weight"] = hf["transformer.wte.weight"]!;
    const fresh = new GPT2(tinyConfig);
    fresh.loadStateDict(fromHuggingFace(hf));
    const c = getCase(cases, "forward");
    expectClose(fresh.eval().call(asTensor(c.args[0])).logits, asTensor(c.out), TOL);
  });

  it("rejects a sequence past the context length and a bad maxNewTokens", () => {
    const ids = ops.zeros([1, 30], { dtype: "int64" });
    const out = model.call(ids, { useCache: true });
    expect(() =>
      model.call(ops.zeros([1, 3], { dtype: "int64" }), { pastKeyValues: out.pastKeyValues }),
    ).toThrow(/30 cached \+ 3 new positions exceed the context length \(nPositions 32\)/);
    expect(() => model.generate(ids, { maxNewTokens: -1 })).toThrow(/maxNewTokens/);
  });

  it("builds from a config name and makes inputs for a size spec", () => {
    const [ids] = inputs({ batch: 1, seq: 7 });
    expect(ids.shape).toEqual([1, 7]);
    expect(ids.dtype).toBe("int64");
    expect(createGPT2().eval().call(ids).logits.shape).toEqual([1, 7, 100]);
    expect(() => inputs({ seq: 33 })).toThrow(/exceeds the context length 32/);
  });
});
