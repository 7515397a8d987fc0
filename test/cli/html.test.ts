// `kiln dump --format html`: the page is one self-contained file (no external URL), and in
// headless Chromium (Debian's package, driven by playwright-core) it renders with no console
// errors, shows one node per entry instruction of each stage (checked against the HLO dump of
// the same stages), fusions as groups with their members, shapes on edges, source lines on
// nodes, a stage list and a stage slider that switch the view, and the computations a while
// loop calls (condition, body) as panels of their own. Only the browser part needs Chromium;
// CI installs it (.ci/run), and without it those tests are skipped with the reason in the name.

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { describe, expect, it } from "vitest";
import { optimizeWithSnapshots } from "../../cli/capture.ts";
import type { Snapshot } from "../../cli/capture.ts";
import { renderHtml } from "../../cli/html.ts";
import type { Computation } from "../../ir/module.ts";
import { parseHlo } from "../../ir/parse.ts";

const root = new URL("../../", import.meta.url).pathname;
const CHROMIUM = "/usr/bin/chromium";
const haveChromium = existsSync(CHROMIUM);
const cacheDir = mkdtempSync(join(tmpdir(), "kiln-html-cache-"));

function kiln(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["cli/kiln.js", ...args], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_LOGS: "", KILN_DUMP_DIR: "" },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Shown {
  stage: string | null;
  nodes: number;
  names: (string | null)[];
  fusions: number;
  members: number;
  edgeLabels: (string | null)[];
  sources: number;
  width: number;
}

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

// Run in the page (a string: the test's TypeScript has no DOM types): what the active stage's
// entry panel shows.
const SHOWN = `(() => {
  const active = document.querySelector(".stage.active");
  const nodes = [...active.querySelectorAll(".comp.entry .node")];
  return {
    stage: active.getAttribute("data-stage"),
    nodes: nodes.length,
    names: nodes.map((n) => n.getAttribute("data-name")),
    fusions: active.querySelectorAll(".comp.entry .node.fusion").length,
    members: active.querySelectorAll(".comp.entry .node.fusion .member").length,
    edgeLabels: [...active.querySelectorAll(".comp.entry .edge-label")].map((e) => e.textContent),
    sources: nodes.filter((n) => (n.getAttribute("data-source") || "") !== "").length,
    width: active.querySelector("svg").getBoundingClientRect().width,
  };
})()`;

/** The while-loop corpus module through the pipeline: every stage, and the optimized loop. */
function loopStages(): { snaps: Snapshot[]; loop: { called: Computation[] } } {
  const text = readFileSync(join(root, "test/ir/corpus/embedding_loop.hlo"), "utf8");
  const captured = parseHlo(text);
  const { optimized, passes } = optimizeWithSnapshots(captured);
  const snaps: Snapshot[] = [
    { stage: "captured", pass: undefined, module: captured },
    ...passes,
    { stage: "optimized", pass: undefined, module: optimized },
  ];
  const loop = optimized.entry.instructions.find((i) => i.opcode === "while");
  if (!loop) throw new Error("embedding_loop: the optimized module lost its while loop");
  return { snaps, loop };
}

/** The HTML page and, for comparison, the HLO text of the same stages. */
function dumpBoth(model: string): { page: string; file: string; stages: string[] } {
  const htmlDir = mkdtempSync(join(tmpdir(), "kiln-html-"));
  const r = kiln("dump", model, "--format", "html", "--out", htmlDir);
  expect(r.code, r.stderr).toBe(0);
  const file = r.stdout.trim();
  const hloDir = mkdtempSync(join(tmpdir(), "kiln-html-hlo-"));
  expect(kiln("dump", model, "--stage", "all", "--out", hloDir).code).toBe(0);
  const stages = readdirSync(hloDir)
    .sort()
    .map((f) => readFileSync(join(hloDir, f), "utf8"));
  return { page: readFileSync(file, "utf8"), file, stages };
}

describe("kiln dump --format html", () => {
  it("writes one self-contained page with every stage", () => {
    const { page, stages } = dumpBoth("mlp");
    expect(page.startsWith("<!DOCTYPE html>")).toBe(true);
    // No network: nothing is loaded from anywhere (the SVG namespace is an identifier).
    const urls = page.match(/(?:src|href)=["'][^"'#]/g) ?? [];
    expect(urls).toEqual([]);
    expect(page).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(page.match(/<section class="stage"/g)?.length).toBe(stages.length);
    expect(page).toContain('data-source="models/mlp.ts:73:24"');
  });

  it("draws the computations a while loop calls as panels", () => {
    const { snaps, loop } = loopStages();
    const page = renderHtml("embedding_loop", snaps);
    expect(page.match(/<section class="stage"/g)?.length).toBe(snaps.length);
    expect(page.match(/<input type="range" id="stage-slider"/g)?.length).toBe(1);
    expect(page).toContain(`max="${snaps.length - 1}"`);
    for (const c of loop.called) {
      // One panel per stage (the loop survives every pass of this module).
      const panels = page.match(
        new RegExp(`<details class="comp called" open data-computation="${c.name}"`, "g"),
      );
      expect(panels?.length).toBe(snaps.length);
    }
    expect(page).toContain(`data-calls="${loop.called.map((c) => c.name).join(" ")}"`);
  });

  it.skipIf(!haveChromium)(
    `renders in headless Chromium (skipped when ${CHROMIUM} is missing: apt-get install chromium)`,
    async () => {
      const { file, stages } = dumpBoth("gpt2");
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("console", (m) => {
          if (m.type() === "error") errors.push(m.text());
        });
        page.on("pageerror", (e) => errors.push(e.message));
        const requests: string[] = [];
        page.on("request", (r) => {
          if (!r.url().startsWith("file:")) requests.push(r.url());
        });
        await page.goto(pathToFileURL(file).href);
        const shown = (await page.evaluate(SHOWN)) as Shown;
        const optimized = parseHlo(stages.at(-1)!);
        const entry = optimized.entry.instructions;
        expect(shown.stage).toBe("optimized");
        expect(shown.nodes).toBe(entry.length);
        expect(new Set(shown.names)).toEqual(new Set(entry.map((i) => i.name)));
        const fusions = entry.filter((i) => i.opcode === "fusion");
        expect(shown.fusions).toBe(fusions.length);
        expect(shown.members).toBe(
          fusions.reduce(
            (n, f) => n + f.called[0]!.instructions.filter((i) => i.opcode !== "parameter").length,
            0,
          ),
        );
        expect(shown.edgeLabels).toContain("f32[1,16,32]");
        expect(shown.sources).toBeGreaterThan(entry.length / 2);
        expect(shown.width).toBeGreaterThan(0);
        // The stage list switches the view to the captured program.
        await page.click('nav li[data-stage="captured"]');
        const captured = (await page.evaluate(SHOWN)) as Shown;
        expect(captured.stage).toBe("captured");
        expect(captured.nodes).toBe(parseHlo(stages[0]!).entry.instructions.length);
        expect(errors).toEqual([]);
        expect(requests).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
  it.skipIf(!haveChromium)(
    `shows a while loop's body and switches stages with the slider (skipped without ${CHROMIUM})`,
    async () => {
      const { snaps, loop } = loopStages();
      const file = join(mkdtempSync(join(tmpdir(), "kiln-html-loop-")), "loop.html");
      writeFileSync(file, renderHtml("embedding_loop", snaps));
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("console", (m) => {
          if (m.type() === "error") errors.push(m.text());
        });
        page.on("pageerror", (e) => errors.push(e.message));
        await page.goto(pathToFileURL(file).href);
        // What the active stage's called-computation panels show, by computation name.
        const PANELS = `(() => Object.fromEntries(
          [...document.querySelectorAll(".stage.active details.comp.called")].map((d) => [
            d.getAttribute("data-computation"),
            { open: d.open, visible: d.getBoundingClientRect().height > 0,
              names: [...d.querySelectorAll(".node")].map((n) => n.getAttribute("data-name")) },
          ])))()`;
        type Panels = Record<string, { open: boolean; visible: boolean; names: string[] }>;
        const expectPanels = (shown: Panels, callees: readonly Computation[]): void => {
          expect(Object.keys(shown).sort()).toEqual(callees.map((c) => c.name).sort());
          for (const c of callees) {
            expect(shown[c.name]!.visible).toBe(true);
            expect(new Set(shown[c.name]!.names)).toEqual(
              new Set(c.instructions.map((i) => i.name)),
            );
          }
        };
        const last = (await page.evaluate(SHOWN)) as Shown;
        expect(last.stage).toBe("optimized");
        expectPanels((await page.evaluate(PANELS)) as Panels, loop.called);
        const SLIDER = `(() => [document.getElementById("stage-slider").value,
          document.getElementById("stage-name").textContent,
          document.querySelector("nav li.active").getAttribute("data-stage")])()`;
        expect(await page.evaluate(SLIDER)).toEqual([String(snaps.length - 1), "optimized",
          "optimized"]);

        // Moving the slider (keyboard on the focused range input) switches the stage.
        await page.focus("#stage-slider");
        await page.keyboard.press("Home");
        const first = (await page.evaluate(SHOWN)) as Shown;
        expect(first.stage).toBe("captured");
        expect(first.nodes).toBe(snaps[0]!.module.entry.instructions.length);
        expect(await page.evaluate(SLIDER)).toEqual(["0", "captured", "captured"]);
        const capturedLoop = snaps[0]!.module.entry.instructions.find((i) => i.opcode === "while");
        expectPanels((await page.evaluate(PANELS)) as Panels, capturedLoop!.called);
        await page.keyboard.press("ArrowRight");
        expect(((await page.evaluate(SHOWN)) as Shown).stage).toBe(snaps[1]!.stage);
        expect(await page.evaluate(SLIDER)).toEqual(["1", snaps[1]!.stage, snaps[1]!.stage]);

        // A collapsed body panel reopens when its while node is clicked.
        const body = loop.called[1]!.name;
        await page.keyboard.press("End");
        await page.click(`.stage.active details[data-computation="${body}"] > summary`);
        expect(((await page.evaluate(PANELS)) as Panels)[body]!.open).toBe(false);
        await page.click(`.stage.active .comp.entry .node[data-opcode="while"] rect`);
        expect(((await page.evaluate(PANELS)) as Panels)[body]!.open).toBe(true);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
