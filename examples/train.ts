// `npm run train`: trains GPT-2 tiny (no dropout) on data/tinyshakespeare.txt with AdamW, one
// plain eager step at a time (examples/training.ts lmStep), for about a minute or --steps N;
// shows one progress line (step, loss, tokens/s); saves a checkpoint (weights and optimizer
// state, one safetensors file) that --resume continues from bit-identically; and samples text
// from the model at the end. docs/training.md ("Training a model") describes it.
//
//   npm run train                                   about 60 s, then a checkpoint and a sample
//   npm run train -- --steps 500                    exactly 500 steps
//   npm run train -- --resume --steps 500           500 more, from the checkpoint
//   npm run train -- --steps 0 --resume --sample 400 --prompt "ROMEO:"   sample only

import { mkdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import { AdamW } from "../optim/index.ts";
import {
  createModel,
  lazyStep,
  lmStep,
  loadCheckpoint,
  readCorpus,
  ROOT,
  sample,
  saveCheckpoint,
  stepOffsets,
  trainConfig,
  windows,
} from "./training.ts";

const USAGE = `usage: npm run train -- [options]
  --steps N          train N steps (default: as many as fit in --seconds)
  --seconds S        train for about S seconds when --steps is not given (default 60)
  --batch B          windows per batch (default 16; each is ${trainConfig.nPositions} tokens)
  --lr X             AdamW learning rate (default 1e-3; weight decay 0.01)
  --seed K           initialisation and batch-order seed (default 0)
  --checkpoint PATH  where to save (and, with --resume, load) the checkpoint
                     (default checkpoints/gpt2_tiny.safetensors)
  --resume           continue from the checkpoint: its weights, optimizer state, step, batch
                     size and seed (--steps then counts the steps to add)
  --lazy             run each step under lazy() (one fused program per step)
  --sample N         characters to sample at the end (default 200; 0: none)
  --prompt TEXT      the text the sample continues (default "\\n")
  --temperature T    sampling temperature, 0 for greedy (default 0.8)
  --help`;

function main(): void {
  const { values } = parseArgs({
    options: {
      steps: { type: "string" },
      seconds: { type: "string", default: "60" },
      batch: { type: "string", default: "16" },
      lr: { type: "string", default: "1e-3" },
      seed: { type: "string", default: "0" },
      checkpoint: { type: "string", default: join(ROOT, "checkpoints", "gpt2_tiny.safetensors") },
      resume: { type: "boolean", default: false },
      lazy: { type: "boolean", default: false },
      sample: { type: "string", default: "200" },
      prompt: { type: "string", default: "\n" },
      temperature: { type: "string", default: "0.8" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const int = (name: string, v: string, min = 0): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return n;
  };
  const num = (name: string, v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number >= 0`);
    return n;
  };
  const maxSteps = values.steps === undefined ? Infinity : int("steps", values.steps);
  const seconds = num("seconds", values.seconds);
  let batch = int("batch", values.batch, 1);
  let seed = int("seed", values.seed);
  const lr = num("lr", values.lr);
  const checkpoint = values.checkpoint;
  const seq = trainConfig.nPositions;

  const ids = readCorpus();
  const model = createModel(undefined, seed);
  const opt = new AdamW(model.parameters(), { lr, weightDecay: 0.01 });
  let start = 0;
  if (values.resume) {
    const saved = loadCheckpoint(checkpoint, model, opt);
    start = saved.step;
    batch = Number(saved.info.batch ?? batch);
    seed = Number(saved.info.seed ?? seed);
    console.log(
      `resumed from ${shown(checkpoint)} at step ${start} (batch ${batch}, seed ${seed})`,
    );
  }
  const params = model.parameters().reduce((n, p) => n + p.numel(), 0);
  console.log(
    `GPT-2 tiny (${params} parameters), ${ids.length} characters of Shakespeare, ` +
      `batch ${batch} x ${seq} tokens, AdamW lr ${opt.paramGroups[0]!.lr}` +
      (values.lazy ? ", lazy" : ""),
  );

  const progress = new Progress(process.stdout.isTTY === true);
  const t0 = performance.now();
  let step = start;
  let loss = NaN;
  let smooth = NaN;
  while (step - start < maxSteps) {
    const elapsed = (performance.now() - t0) / 1000;
    if (maxSteps === Infinity && elapsed >= seconds) break;
    const offsets = stepOffsets(step, { batch, seq, corpusLength: ids.length, seed });
    const { x, y } = windows(ids, offsets, seq);
    const run = () => lmStep(model, opt, x, y);
    loss = values.lazy ? lazyStep(model, opt, run) : (run().item() as number);
    smooth = Number.isNaN(smooth) ? loss : 0.9 * smooth + 0.1 * loss;
    step++;
    const secs = (performance.now() - t0) / 1000;
    const tokens = ((step - start) * batch * seq) / secs;
    const total = maxSteps === Infinity ? "" : `/${start + maxSteps}`;
    progress.show(
      `step ${step}${total}  loss ${loss.toFixed(4)} (avg ${smooth.toFixed(4)})  ` +
        `${Math.round(tokens)} tokens/s  ${((step - start) / secs).toFixed(1)} steps/s  ` +
        `${secs.toFixed(1)} s`,
    );
  }
  progress.done();

  if (step > start || !values.resume) {
    mkdirSync(dirname(checkpoint), { recursive: true });
    saveCheckpoint(checkpoint, model, opt, step, { batch, seed, config: trainConfig });
    console.log(`saved ${shown(checkpoint)} (step ${step}; --resume continues from it)`);
  }
  const n = int("sample", values.sample);
  if (n > 0) {
    const temperature = num("temperature", values.temperature);
    const text = sample(model, values.prompt, n, { temperature, seed });
    const how = temperature === 0 ? "greedy" : `temperature ${temperature}, seed ${seed}`;
    console.log(`\n--- ${n} sampled characters (${how}) ---\n${values.prompt}${text}\n---`);
  }
}

function shown(path: string): string {
  const r = relative(process.cwd(), path);
  return r.startsWith("..") ? path : r;
}

/**
 * One progress line: rewritten in place on a terminal (at most 10 times a second); elsewhere
 * (a pipe, a log file, CI) printed as a new line every 5 seconds, so a log stays short.
 */
class Progress {
  private last = 0;
  private pending: string | undefined;

  constructor(private readonly tty: boolean) {}

  show(line: string): void {
    const now = performance.now();
    this.pending = line;
    if (now - this.last < (this.tty ? 100 : 5000) && this.last !== 0) return;
    this.flush();
    this.last = now;
  }

  done(): void {
    this.flush();
    if (this.tty) process.stdout.write("\n");
  }

  private flush(): void {
    if (this.pending === undefined) return;
    if (this.tty) process.stdout.write(`\r\x1b[K${this.pending}`);
    else process.stdout.write(`${this.pending}\n`);
    this.pending = undefined;
  }
}

try {
  main();
} catch (e) {
  console.error(`train: ${(e as Error).message}`);
  process.exitCode = 1;
}
