// The training bench's peer rows (bench/peers/train_graph.ts): which entry parameters of a
// captured loss graph are the model's parameters, the first-step loss check, how many timed
// steps fit a budget, and the row's cells. Nothing here times anything or needs the peers.

import { describe, expect, it } from "vitest";
import {
  lossAgrees,
  medianMs,
  PEER_HEADER,
  peerRowCells,
  stepsWithin,
  trainableSlots,
} from "../../bench/peers/train_graph.ts";

const f32 = (...xs: number[]) => Float32Array.from(xs);

describe("trainableSlots", () => {
  it("maps each parameter to the entry parameter with its type, dims and bytes", () => {
    const entry = [
      { type: "s64", dims: [2], data: BigInt64Array.of(1n, 2n) }, // ids
      { type: "f32", dims: [2], data: f32(3, 4) },
      { type: "f32", dims: [1, 2], data: f32(1, 2) },
      { type: "f32", dims: [2], data: f32(1, 2) },
    ];
    const weights = [
      { type: "f32", dims: [2], data: f32(1, 2) },
      { type: "f32", dims: [2], data: f32(3, 4) },
      { type: "f32", dims: [1, 2], data: f32(1, 2) },
    ];
    expect(trainableSlots(entry, weights)).toEqual([3, 1, 2]);
  });

  it("gives parameters with equal values distinct slots, in order", () => {
    const ones = () => ({ type: "f32", dims: [3], data: f32(1, 1, 1) });
    expect(trainableSlots([ones(), ones()], [ones(), ones()])).toEqual([0, 1]);
  });

  it("throws when a parameter is not an input of the graph", () => {
    const entry = [{ type: "f32", dims: [2], data: f32(1, 2) }];
    const weights = [
      { type: "f32", dims: [2], data: f32(1, 2) },
      { type: "f32", dims: [2], data: f32(1, 2) },
    ];
    expect(() => trainableSlots(entry, weights)).toThrow(/parameter 1 f32\[2\]/);
    expect(() =>
      trainableSlots(entry, [{ type: "f32", dims: [2], data: f32(1, 2.5) }]),
    ).toThrow(/not an input/);
  });
});

describe("lossAgrees", () => {
  it("holds the peer's loss to 1e-3 of Kiln's (absolute below 1)", () => {
    expect(lossAgrees(4.6188, 4.6188)).toBe(true);
    expect(lossAgrees(4.6188 + 4e-3, 4.6188)).toBe(true);
    expect(lossAgrees(4.6188 + 6e-3, 4.6188)).toBe(false);
    expect(lossAgrees(0.0105, 0.01)).toBe(true);
    expect(lossAgrees(0.0115, 0.01)).toBe(false);
    expect(lossAgrees(NaN, 1)).toBe(false);
    expect(lossAgrees(Infinity, 1)).toBe(false);
  });
});

describe("stepsWithin", () => {
  it("runs the wanted steps when they fit, fewer when not, never none", () => {
    expect(stepsWithin(10, 5, 1000)).toBe(5);
    expect(stepsWithin(300, 5, 1000)).toBe(3);
    expect(stepsWithin(5000, 5, 1000)).toBe(1);
    expect(stepsWithin(0, 5, 1000)).toBe(5);
  });
});

describe("peerRowCells", () => {
  it("puts steps/s, the ratio to Kiln compiled and the loss check in the row", () => {
    const cells = peerRowCells(
      "GPT-2 tiny",
      { runtime: "tfjs cpu", firstMs: 2200, losses: [4.6188, 4.6106], times: [500, 400, 600] },
      [4.6188, 4.6106],
      100,
    );
    expect(cells).toHaveLength(PEER_HEADER.length);
    expect(cells[0]).toBe("GPT-2 tiny");
    expect(cells[2]).toBe("2.00"); // 1000 / 500 ms
    expect(cells[3]).toBe("50.0x"); // peer step 500 ms / Kiln compiled 10 ms
    expect(cells[4]).toBe("2.2 s");
    expect(cells[5]).toContain("ok");
    expect(cells[6]).toBe("3 timed steps");
  });

  it("says MISMATCH and leaves the figures out for an untimed row", () => {
    const cells = peerRowCells(
      "ResNet tiny",
      { runtime: "jax-js", firstMs: 900, losses: [3], note: "not timed" },
      [2.3, 2.2],
      50,
    );
    expect(cells[2]).toBe("-");
    expect(cells[3]).toBe("-");
    expect(cells[5]).toContain("MISMATCH");
    expect(cells[6]).toBe("not timed");
  });
});

describe("medianMs", () => {
  it("takes the upper middle, as bench/train.ts does", () => {
    expect(medianMs([3, 1, 2])).toBe(2);
    expect(medianMs([4, 1, 3, 2])).toBe(3);
    expect(() => medianMs([])).toThrow();
  });
});
