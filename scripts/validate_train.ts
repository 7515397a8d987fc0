// `npm run validate:train`: the training runs of test/train/ with their figures — per model
// and mode, Kiln's loss agreement with PyTorch's reference run (the largest relative difference
// over steps 1-50 and the difference at the last step), the first step's time (its compiles)
// and the steps per second after it. The tests assert the same bounds; this prints the numbers.
// Warm runs (the second of each mode) show steady speed without compiles: pass --warm.

import {
  agreement,
  reference,
  type Run,
  trainGPT2,
  trainResNet,
} from "../test/train/reference.ts";

const warm = process.argv.includes("--warm");
const rows: string[] = [];
const report = (name: string, mode: string, run: Run, torch: number[]) => {
  const a = agreement(run.losses, torch);
  rows.push(
    `| ${name} | ${mode} | ${a.steps} | ${a.maxRel50.toExponential(2)} | ` +
      `${a.relLast.toExponential(2)} | ${run.firstStepMs.toFixed(0)} | ` +
      `${run.stepsPerSecond.toFixed(1)} |`,
  );
  console.log(rows.at(-1));
};

console.log("| model | mode | steps | max rel diff, steps 1-50 | rel diff, last step | " +
  "first step, ms | steps/s after it |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
const gpt2 = reference("gpt2_tiny").losses;
const resnet = reference("resnet_tiny").losses;
for (const mode of ["eager", "lazy"] as const) {
  if (warm) trainGPT2(mode, 2);
  report("GPT-2 tiny, AdamW, batch 4 x 32", mode, trainGPT2(mode), gpt2);
  if (warm) trainResNet(mode, 2);
  report("ResNet tiny, AdamW, batch 8 x 3x32x32", mode, trainResNet(mode), resnet);
}
