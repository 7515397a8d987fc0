// Every model of the zoo compiled (tiny configs, eval mode): results equal the eager model
// within a float32 tolerance, the whole forward is ONE graph (no break, graph mode), a second
// call with the same shapes runs the cached program, a new input size recompiles naming the
// dim, and loading another instance's weights changes the results without recompiling.
// GPT-2 also runs with its KV cache (nested outputs, and a cache passed back in).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile } from "../../compiler/index.ts";
import { getModel, gpt2, zoo } from "../../models/index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { manualSeed } from "../../index.ts";
import { expectTreeClose as expectClose } from "./fixtures/close.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));

/** Float tolerance: the compiled program fuses and reorders float32 arithmetic. */
const TOL = 2e-4;
const expectTreeClose = (actual: unknown, expected: unknown) => expectClose(actual, expected, TOL);


/** A size spec one step bigger in the model's first size that is not the batch. */
function biggerSpec(name: string): Record<string, number> | undefined {
  const sizes = getModel(name).sizes;
  if (sizes.includes("seq")) return { seq: 9 };
  if (sizes.includes("frames")) return undefined;
  return { batch: 3 };
}

describe.each(Object.keys(zoo))("compile(%s)", (name) => {
  it("equals eager, is one graph, hits the cache, recompiles per size, takes new weights", () => {
    manualSeed(0);
    const m = getModel(name);
    const model = m.create("tiny").eval();
    const args = m.inputs({}, "tiny");
    const fast = compile(model);
    const call = fast as unknown as (...a: unknown[]) => unknown;
    const eager = (...a: unknown[]) => (model.call as (...b: unknown[]) => unknown)(...a);
    expectTreeClose(call(...args), eager(...args));
    expect(fast.stats).toMatchObject({ mode: "graph", compiles: 1, graphBreaks: [] });
    expectTreeClose(call(...args), eager(...args));
    expect(fast.stats).toMatchObject({ compiles: 1, cacheHits: 1, recompiles: [] });

    const spec = biggerSpec(name);
    if (spec) {
      const bigger = m.inputs(spec, "tiny");
      expectTreeClose(call(...bigger), eager(...bigger));
      expect(fast.stats.recompiles.length).toBe(1);
      expect(fast.stats.recompiles[0]!.reason).toMatch(
        /\.shape\[\d\] was \d+, now \d+: dim \d of \S+ is now dynamic/,
      );
    }

    manualSeed(1);
    const other = m.create("tiny").eval();
    model.loadStateDict(other.stateDict());
    const compiles = fast.stats.compiles;
    expectTreeClose(call(...args), eager(...args));
    expect(fast.stats.compiles).toBe(compiles);
  });
});

describe("compile(gpt2) with the KV cache", () => {
  it("returns the cache and takes it back, equal to eager", () => {
    manualSeed(0);
    const model = gpt2.default("tiny").eval();
    const fast = compile(model);
    const [ids] = gpt2.inputs({ seq: 5 });
    const first = fast(ids, { useCache: true });
    const firstEager = model.call(ids, { useCache: true });
    expectTreeClose(first, firstEager);
    const next = ids.narrow(1, 4, 1);
    const step = fast(next, { pastKeyValues: first.pastKeyValues, useCache: true });
    const past = firstEager.pastKeyValues;
    expectTreeClose(step, model.call(next, { pastKeyValues: past, useCache: true }));
    expect(fast.stats.mode).toBe("graph");
  });
});
