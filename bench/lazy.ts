// Lazy mode against eager on GPT-2 greedy generation with the growing KV cache (issue #15's
// target: lazy within 1.3x of eager's time per token on the same backend, with at most
// #buckets + 2 compiles in all). Per config: a cold lazy generation from empty caches (its
// compiles, programs per token, eager ops, the buckets the cache's length falls in, and that
// its tokens are eager's), then warm generations, eager and lazy alternating batch by batch so
// both see the same machine load; per-token time is reported as the median and the best batch,
// by wall clock and, on Linux, by the main thread's own CPU time (schedstat: time waiting for a
// CPU on a loaded machine is left out). Configs: the zoo's tiny GPT-2 (2 layers, 32 wide, 32
// positions), the bench's quick "small" one (bench/peers: 2 layers, 128 wide, 256 positions,
// vocabulary 1000) and the full GPT-2 small (12 layers, 768 wide). Prints a table; never used by
// tests.
//
//   npm run bench:lazy    (or: npx tsx bench/lazy.ts [--quick] [--only tiny,small,full]
//                          [--tokens tiny=24,small=128,full=16] [--batches 9] [--backend js])

import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { GPT2, type GPT2Config, fullConfig, tinyConfig } from "../models/gpt2.ts";
import { getBackend, ProgramCache, setDefaultProgramCache } from "../runtime/index.ts";
import { setEagerBackend } from "../tensor/dispatch.ts";
import {
  clearLazyGraphs,
  Generator,
  lazy,
  lazyStats,
  manualSeed,
  randint,
  resetLazyStats,
  type Tensor,
} from "../tensor/index.ts";

const argv = process.argv.slice(2);
function flag(name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}
const QUICK = argv.includes("--quick");
const CONFIGS: Record<string, GPT2Config> = {
  tiny: tinyConfig,
  small: { ...tinyConfig, vocabSize: 1000, nPositions: 256, nEmbd: 128 },
  full: fullConfig,
};
const TOKENS: Record<string, number> = QUICK
  ? { tiny: 24, small: 64, full: 8 }
  : { tiny: 24, small: 128, full: 16 };
for (const part of (flag("tokens") ?? "").split(",").filter(Boolean)) {
  const [k, v] = part.split("=");
  if (k === undefined || !(k in CONFIGS) || !Number.isInteger(Number(v))) {
    throw new Error(`bench:lazy: --tokens takes name=count pairs, got '${part}'`);
  }
  TOKENS[k] = Number(v);
}
const ONLY = (flag("only") ?? (QUICK ? "tiny,small" : "tiny,small,full")).split(",");
const BATCHES = Number(flag("batches") ?? (QUICK ? 5 : 9));
const PROMPT = 4;
const backendFlag = flag("backend");
if (backendFlag !== undefined) setEagerBackend(backendFlag);

/** The main thread's on-CPU time in ms (Linux schedstat), or undefined elsewhere. */
function threadMs(): number | undefined {
  try {
    const text = readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8");
    return Number(text.split(" ")[0]) / 1e6;
  } catch {
    return undefined;
  }
}

/** How many of compile()'s pow2 buckets the sizes lo..hi fall in (sizes 0 and 1 alone). */
function bucketsOf(lo: number, hi: number): number {
  const tops = new Set<number>();
  for (let n = lo; n <= hi; n++) tops.add(n <= 1 ? n : 2 ** Math.ceil(Math.log2(n)));
  return tops.size;
}

const median = (a: readonly number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
const fmt = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

interface Row {
  config: string;
  tokens: number;
  eager: { wall: number[]; cpu: number[] };
  lazy: { wall: number[]; cpu: number[] };
  coldLazyMs: number;
  compiles: number;
  budget: number;
  graphsPerToken: number;
  eagerOps: number;
  same: boolean;
}

function run(name: string): Row {
  const config = CONFIGS[name]!;
  const tokens = TOKENS[name]!;
  if (PROMPT + tokens > config.nPositions) {
    throw new Error(`bench:lazy: ${name} has ${config.nPositions} positions, too few for ${tokens}`);
  }
  manualSeed(0);
  const model = new GPT2(config);
  model.eval();
  const prompt = randint(0, config.vocabSize, [1, PROMPT], { generator: new Generator(4) });
  const gen = (): Tensor => model.generate(prompt, { maxNewTokens: tokens });
  const want = JSON.stringify(gen().toArray()); // also warms eager's one-op programs
  setDefaultProgramCache(new ProgramCache({ disk: false }));
  clearLazyGraphs();
  resetLazyStats();
  let t = performance.now();
  const got = JSON.stringify(lazy(gen).toArray());
  const coldLazyMs = (performance.now() - t) / tokens;
  const s = lazyStats();
  const row: Row = {
    config: name,
    tokens,
    eager: { wall: [], cpu: [] },
    lazy: { wall: [], cpu: [] },
    coldLazyMs,
    compiles: s.compiled,
    // The steps see caches of PROMPT .. PROMPT + tokens - 2 positions.
    budget: bucketsOf(PROMPT, PROMPT + tokens - 2) + 2,
    graphsPerToken: s.graphs / tokens,
    eagerOps: s.eagerOps,
    same: got === want,
  };
  // Batches long enough to time (about 0.3 s each), eager and lazy alternating.
  t = performance.now();
  gen().toArray();
  const once = performance.now() - t;
  const per = Math.max(1, Math.min(20, Math.round(300 / Math.max(once, 1))));
  lazy(gen).toArray();
  for (let b = 0; b < BATCHES; b++) {
    for (const [mode, f] of [["eager", gen], ["lazy", () => lazy(gen)]] as const) {
      const c0 = threadMs();
      const t0 = performance.now();
      for (let i = 0; i < per; i++) f().toArray();
      const wall = (performance.now() - t0) / per / tokens;
      const c1 = threadMs();
      row[mode].wall.push(wall);
      if (c0 !== undefined && c1 !== undefined) row[mode].cpu.push((c1 - c0) / per / tokens);
    }
  }
  return row;
}

function main(): void {
  const backend = getBackend(backendFlag).name;
  const cpu = cpus()[0]?.model ?? "unknown CPU";
  console.log(
    `GPT-2 greedy generation, growing KV cache, prompt ${PROMPT}, batch 1, backend ${backend} ` +
      `(${cpus().length} x ${cpu}); warm figures: median / best of ${BATCHES} alternating batches`,
  );
  console.log("");
  const head = [
    "config", "tokens", "eager ms/tok", "lazy ms/tok", "lazy/eager", "cpu lazy/eager",
    "compiles", "<= #buckets+2", "graphs/tok", "eager ops", "cold lazy ms/tok", "same ids",
  ];
  console.log(head.join(" | "));
  for (const name of ONLY) {
    if (!(name in CONFIGS)) throw new Error(`bench:lazy: unknown config '${name}'`);
    const r = run(name);
    const e = median(r.eager.wall);
    const l = median(r.lazy.wall);
    const cpuRatio = r.lazy.cpu.length > 0
      ? `${(median(r.lazy.cpu) / median(r.eager.cpu)).toFixed(2)}`
      : "n/a";
    console.log([
      r.config,
      String(r.tokens),
      `${fmt(e)} / ${fmt(Math.min(...r.eager.wall))}`,
      `${fmt(l)} / ${fmt(Math.min(...r.lazy.wall))}`,
      (l / e).toFixed(2),
      cpuRatio,
      String(r.compiles),
      `${r.budget} (${r.compiles <= r.budget ? "ok" : "OVER"})`,
      r.graphsPerToken.toFixed(2),
      String(r.eagerOps),
      fmt(r.coldLazyMs),
      r.same ? "yes" : "NO",
    ].join(" | "));
  }
}

main();
