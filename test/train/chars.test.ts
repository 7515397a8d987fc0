// The character tokenizer (examples/chars.ts): the id table, the committed copy the PyTorch
// reference reads (data/vocab.json), normalization, and the corpus encoding unchanged.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CHARS, decode, encode, normalize, VOCAB_SIZE } from "../../examples/chars.ts";
import { tinyConfig } from "../../models/gpt2.ts";

const ROOT = join(import.meta.dirname, "..", "..");

describe("examples/chars", () => {
  it("has 96 ids, within GPT-2 tiny's vocabulary, equal to data/vocab.json", () => {
    expect(VOCAB_SIZE).toBe(96);
    expect(CHARS).toHaveLength(VOCAB_SIZE);
    expect(VOCAB_SIZE).toBeLessThanOrEqual(tinyConfig.vocabSize);
    const file = JSON.parse(readFileSync(join(ROOT, "data", "vocab.json"), "utf8"));
    expect(file.chars).toEqual(CHARS);
    expect(CHARS[0]).toBe("\n");
    expect(CHARS[1]).toBe(" ");
    expect(CHARS[95]).toBe("~");
  });

  it("encodes and decodes round trip; normalizes what is outside the vocabulary", () => {
    const text = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
    expect(decode(encode(text))).toBe(text);
    expect([...encode("\nA a~")]).toEqual([0, 34, 1, 66, 95]);
    expect(normalize("caf\u00e9\r\nna\u00efve\tend \u2019tis \u2014 \u4e2d")).toBe(
      "cafe\nnaive end 'tis - ?",
    );
    expect(decode([96, 0, 1n])).toBe("?\n ");
  });

  it("the corpus is ASCII and encodes one id per byte, unchanged", () => {
    const text = readFileSync(join(ROOT, "data", "tinyshakespeare.txt"), "utf8");
    expect(text.length).toBe(299_868);
    expect(normalize(text)).toBe(text);
    const ids = encode(text);
    expect(ids.length).toBe(text.length);
    expect(new Set(ids).size).toBe(62);
  });
});
