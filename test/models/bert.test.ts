// The BERT-style encoder against PyTorch (scripts/fixtures/gen_models.py, Hugging Face's
// BertModel architecture and names): state-dict keys, strict loading, and both outputs (hidden
// states and pooler) within 1e-4 for a batch whose second row is padded and whose token types
// are mixed; plus the model-file contract.

import { describe, expect, it } from "vitest";
import createBert, { BertModel, inputs, tinyConfig } from "../../models/bert.ts";
import { ops } from "../../index.ts";
import { asTensors, expectClose, getCase, loadPyTorch, modelCases, TOL } from "./fixtures.ts";

const cases = modelCases("bert");
const model = loadPyTorch("bert", new BertModel(tinyConfig), tinyConfig, cases);

describe("models/bert", () => {
  it("matches PyTorch with a padding mask and token types", () => {
    const c = getCase(cases, "forward");
    const [ids, mask, types] = asTensors(c.args);
    const [hidden, pooled] = asTensors(c.out);
    const out = model.call(ids, { attentionMask: mask, tokenTypeIds: types });
    expectClose(out.lastHiddenState, hidden, TOL);
    expectClose(out.poolerOutput, pooled, TOL);
  });

  it("ignores padded tokens: the unpadded prefix gives the same hidden states", () => {
    const [ids, { attentionMask }] = inputs({ batch: 2, seq: 8 });
    const full = model.call(ids, { attentionMask }).lastHiddenState;
    // Row 1 pads its last 2 tokens; running only its first 6 must give the same 6 states.
    const prefix = ids.narrow(0, 1, 1).narrow(1, 0, 6);
    const alone = model.call(prefix).lastHiddenState;
    expectClose(alone, full.narrow(0, 1, 1).narrow(1, 0, 6), { atol: 1e-5, rtol: 1e-5 });
    expect(ops.ne(full, full).any().item()).toBe(0);
  });

  it("builds from a config name and makes inputs for a size spec", () => {
    const [ids, opts] = inputs({ batch: 3, seq: 12 });
    expect(ids.shape).toEqual([3, 12]);
    expect(opts.attentionMask!.sum().item()).toBe(12 + 2 * 9);
    const out = createBert().eval().call(ids, opts);
    expect(out.lastHiddenState.shape).toEqual([3, 12, 32]);
    expect(out.poolerOutput.shape).toEqual([3, 32]);
    expect(() => inputs({ seq: 65 })).toThrow(/exceeds maxPositionEmbeddings/);
  });
});
