// A character-level tokenizer for the training example (examples/train.ts) and the training
// tests (test/train/): one id per character of printable ASCII plus the newline, 96 ids, which
// fits GPT-2 tiny's vocabulary of 100 (ids 96..99 are never produced).
//
//   id 0        '\n'
//   id 1 .. 95  ' ' (0x20) .. '~' (0x7e), in code order: id = code - 31
//
// Normalization (`normalize`, applied by `encode`): "\r\n" and "\r" become "\n", a tab becomes
// a space, letters with diacritics lose them (NFKD, then the combining marks are dropped: "é"
// → "e"), curly quotes and dashes become their ASCII forms, and any other character outside
// the vocabulary becomes "?". data/tinyshakespeare.txt is plain ASCII already, so it encodes
// unchanged. The same table is committed as data/vocab.json (`chars`, indexed by id) for the
// PyTorch reference (scripts/fixtures/gen_train.py); test/train/chars.test.ts checks that the
// two agree.

/** How many ids the tokenizer produces (the model's vocabulary may be larger). */
export const VOCAB_SIZE = 96;

/** The character of each id. */
export const CHARS: readonly string[] = [
  "\n",
  ...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)),
];

const ASCII_FORMS: Record<string, string> = {
  "\u2018": "'",
  "\u2019": "'",
  "\u201a": "'",
  "\u201c": '"',
  "\u201d": '"',
  "\u201e": '"',
  "\u2013": "-",
  "\u2014": "-",
  "\u2026": "...",
  "\u00a0": " ",
};

/** The text with every character in the vocabulary (see the header for the rules). */
export function normalize(text: string): string {
  let out = "";
  const flat = text.replace(/\r\n?/g, "\n").replace(/\t/g, " ");
  for (const ch of flat) {
    if (isInVocab(ch)) {
      out += ch;
      continue;
    }
    const ascii = ASCII_FORMS[ch];
    if (ascii !== undefined) {
      out += ascii;
      continue;
    }
    const bare = ch.normalize("NFKD").replace(/\p{M}/gu, "");
    out += bare.length > 0 && [...bare].every(isInVocab) ? bare : "?";
  }
  return out;
}

function isInVocab(ch: string): boolean {
  const c = ch.charCodeAt(0);
  return ch.length === 1 && (c === 10 || (c >= 32 && c <= 126));
}

/** The id of one character of the vocabulary. */
export function charId(ch: string): number {
  if (!isInVocab(ch)) throw new Error(`chars: ${JSON.stringify(ch)} is not in the vocabulary`);
  const c = ch.charCodeAt(0);
  return c === 10 ? 0 : c - 31;
}

/** The ids of `text`, after normalize(). */
export function encode(text: string): Int32Array {
  const s = normalize(text);
  const ids = new Int32Array(s.length);
  for (let i = 0; i < s.length; i++) ids[i] = charId(s[i]!);
  return ids;
}

/** The text of `ids`; an id outside 0..95 (the model's unused ids 96..99) decodes as "?". */
export function decode(ids: Iterable<number | bigint>): string {
  let out = "";
  for (const id of ids) {
    const k = Number(id);
    out += Number.isInteger(k) && k >= 0 && k < VOCAB_SIZE ? CHARS[k]! : "?";
  }
  return out;
}
