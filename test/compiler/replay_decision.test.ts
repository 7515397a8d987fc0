// Replay mode can be slower than eager (its JS and lazy mode's bookkeeping run on every call):
// after the switch compile() times replay and eager calls, falls back to eager when replay is
// slower, and says so in fast.stats, explain() and KILN_LOGS. The clock is injected here, so
// the decision is the test's, not the machine's.

import { afterEach, beforeAll, afterAll, describe, expect, it } from "vitest";
import { compile, explain } from "../../compiler/index.ts";
import {
  REPLAY_SAMPLES,
  REPLAY_WARMUP,
  setReplayClock,
} from "../../compiler/replay.ts";
import { type Tensor, tensor } from "../../index.ts";
import { ProgramCache, setDefaultProgramCache } from "../../runtime/index.ts";
import { setLogTopics } from "../../util/log.ts";
import { expectTreeClose } from "./fixtures/close.ts";

beforeAll(() => setDefaultProgramCache(new ProgramCache({ disk: false })));
afterAll(() => setDefaultProgramCache(undefined));
afterEach(() => {
  setReplayClock(undefined);
  setLogTopics(undefined);
});

function gate(x: Tensor): Tensor {
  const h = x.mul(2);
  if ((h.sum().item() as number) > 0) return h.add(1);
  return h.sub(1);
}

/** A clock under which a timed call of `kind` takes `ms[kind]`. */
function fakeClock(ms: { replay: number; eager: number }) {
  let t = 0;
  return (kind: "replay" | "eager") => (t += ms[kind]);
}

const PER_KIND = REPLAY_WARMUP + REPLAY_SAMPLES;
const input = (i: number) => tensor([1, -2, 3 + i]);

describe("replay mode: measured against eager", () => {
  it("slower replay falls back to eager, with the figures in stats", () => {
    setReplayClock(fakeClock({ replay: 3.5, eager: 1.25 }));
    const fast = compile(gate);
    const calls = 1 + 2 * PER_KIND + 3;
    for (let i = 0; i < calls; i++) expectTreeClose(fast(input(i)), gate(input(i)));
    const s = fast.stats;
    expect(s.mode).toBe("eager");
    expect(s.replayDecision).toEqual({
      call: 1 + 2 * PER_KIND,
      choice: "eager",
      replayMs: 3.5,
      eagerMs: 1.25,
      samples: REPLAY_SAMPLES,
      reason:
        "replay mode measured slower than eager: replay 3.50 ms vs eager 1.25 ms a call " +
        `(median of ${REPLAY_SAMPLES} timed calls each); running eagerly from now on`,
    });
    // The switching call and the replay samples ran in replay mode; the rest eagerly.
    expect(s.replayCalls).toBe(1 + PER_KIND);
    expect(s.eagerCalls).toBe(PER_KIND + 3);
    // Eager calls run no lazy segments: the count stopped when replay did.
    const segments = s.segments;
    fast(input(99));
    expect(fast.stats.segments).toBe(segments);
  });

  it("faster replay is kept", () => {
    setReplayClock(fakeClock({ replay: 1, eager: 2 }));
    const fast = compile(gate);
    for (let i = 0; i < 1 + 2 * PER_KIND + 2; i++) fast(input(i));
    expect(fast.stats.mode).toBe("replay");
    expect(fast.stats.replayDecision?.choice).toBe("replay");
    expect(fast.stats.replayDecision?.reason).toMatch(/^replay mode kept: replay 1\.00 ms/);
    expect(fast.stats.replayCalls).toBe(1 + PER_KIND + 2);
  });

  it("no decision before the timed calls are done; reset() forgets it", () => {
    setReplayClock(fakeClock({ replay: 5, eager: 1 }));
    const fast = compile(gate);
    for (let i = 0; i < 2 * PER_KIND; i++) fast(input(i));
    expect(fast.stats.replayDecision).toBeUndefined();
    fast(input(0));
    expect(fast.stats.mode).toBe("eager");
    fast.reset();
    expect(fast.stats.replayDecision).toBeUndefined();
    fast(input(1));
    expect(fast.stats.mode).toBe("replay");
  });

  it("KILN_LOGS=recompiles logs the decision; explain says what replay costs", () => {
    setReplayClock(fakeClock({ replay: 4, eager: 1 }));
    setLogTopics(["recompiles"]);
    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((s: string) => (lines.push(String(s)), true)) as typeof write;
    try {
      const fast = compile(gate);
      for (let i = 0; i < 1 + 2 * PER_KIND; i++) fast(input(i));
    } finally {
      process.stderr.write = write;
    }
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^\[kiln:recompiles\] gate: replay mode measured slower than eager: replay 4\.00 ms/,
      ),
    );
    const e = String(explain(gate, input(0)));
    expect(e).toContain("replay cost: the JavaScript runs on every call");
    expect(e).toContain("runs eagerly when replay is slower (fast.stats.replayDecision)");
  });
});
