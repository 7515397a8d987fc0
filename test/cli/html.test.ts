// `kiln dump --format html`: the page is one self-contained file (no external URL; the layout
// library inlined), its graph data names every instruction with its source path relative to
// the project root and finds repeated blocks (the steps of an unrolled GRU loop), and in
// headless Chromium (Debian's package, driven by playwright-core) it renders with no console
// errors, shows one node per entry instruction of each stage (checked against the HLO dump of
// the same stages), fusions with their members, shapes on edges, source lines on nodes, a
// stage list and a stage slider that switch the view, and the computations a while loop calls
// (condition, body) as panels of their own. At a real model's size no text overflows its box,
// no two edge labels overlap, the page never scrolls sideways, and repeated blocks collapse
// and expand. Only the browser part needs Chromium; CI installs it (.ci/run), and without it
// those tests are skipped with the reason in the name.

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium, type Page } from "playwright-core";
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
const GRU = "test/cli/fixtures/gru_loop.ts";
/** Steps of the GRU fixture's time loop. */
const GRU_STEPS = 12;

function kiln(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["cli/kiln.js", ...args], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, KILN_CACHE_DIR: cacheDir, KILN_LOGS: "", KILN_DUMP_DIR: "" },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The graph data the page embeds (one entry per drawn computation, stages in order). */
interface PageGraph {
  nodes: { id: string; op: string; src: string; lines: { t: string; full?: string }[] }[];
  edges: { from: string; to: string; label: string }[];
  groups: { id: string; copies: string[][] }[];
}

function graphsOf(page: string): PageGraph[] {
  const m = /<script type="application\/json" id="kiln-graphs">(.*?)<\/script>/s.exec(page);
  if (!m) throw new Error("the page has no kiln-graphs data");
  return JSON.parse(m[1]!) as PageGraph[];
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
    width: active.querySelector(".viewport").getBoundingClientRect().width,
  };
})()`;

/** What a user would see go wrong at size, measured in the active stage's entry panel. */
interface Fit {
  /** Boxes (nodes, collapsed blocks, edge labels) whose text is wider than the box. */
  overflowing: string[];
  /** Pairs of edge labels whose boxes intersect (page coordinates, at the current zoom). */
  overlappingLabels: string[];
  /** Pairs of node boxes that intersect. */
  overlappingNodes: string[];
  pageScrollWidth: number;
  pageWidth: number;
  nodes: number;
  blocks: number;
  clusters: number;
  labels: number;
}

const FIT = `(() => {
  const panel = document.querySelector(".stage.active .comp.entry");
  const boxes = [...panel.querySelectorAll(".node, .block, .edge-label")];
  const overflowing = boxes.filter((b) => b.scrollWidth > b.clientWidth ||
    b.scrollHeight > b.clientHeight).map((b) => b.getAttribute("data-name") || b.textContent);
  const pairs = (els) => {
    const r = els.map((e) => [e, e.getBoundingClientRect()]).sort((a, b) => a[1].left - b[1].left);
    const out = [];
    for (let i = 0; i < r.length; i++) {
      for (let j = i + 1; j < r.length && r[j][1].left < r[i][1].right - 0.5; j++) {
        const a = r[i][1], b = r[j][1];
        if (a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) {
          out.push((r[i][0].getAttribute("data-name") || r[i][0].textContent) + " / " +
            (r[j][0].getAttribute("data-name") || r[j][0].textContent));
        }
      }
    }
    return out;
  };
  return {
    overflowing,
    overlappingLabels: pairs([...panel.querySelectorAll(".edge-label")]),
    overlappingNodes: pairs([...panel.querySelectorAll(".node, .block")]),
    pageScrollWidth: document.documentElement.scrollWidth,
    pageWidth: document.documentElement.clientWidth,
    nodes: panel.querySelectorAll(".node").length,
    blocks: panel.querySelectorAll(".block").length,
    clusters: panel.querySelectorAll(".cluster").length,
    labels: panel.querySelectorAll(".edge-label").length,
  };
})()`;

function expectFits(fit: Fit): void {
  expect(fit.overflowing).toEqual([]);
  expect(fit.overlappingLabels).toEqual([]);
  expect(fit.overlappingNodes).toEqual([]);
  expect(fit.pageScrollWidth).toBeLessThanOrEqual(fit.pageWidth);
}

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

/** A page in headless Chromium, with the console errors and non-file requests it made. */
async function inBrowser(
  file: string,
  body: (page: Page, errors: string[], requests: string[]) => Promise<void>,
): Promise<void> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
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
    await body(page, errors, requests);
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
  } finally {
    await browser.close();
  }
}

/** Expands every repeated block of the shown entry graph (its button is hidden when none). */
async function expandAll(page: Page): Promise<void> {
  await page.evaluate(
    `document.querySelector(".stage.active .comp.entry button[data-act=expand]").click()`,
  );
}

/** A one-stage snapshot list of an HLO text. */
function oneStage(text: string): Snapshot[] {
  return [{ stage: "captured", pass: undefined, module: parseHlo(text) }];
}

describe("kiln dump --format html", () => {
  it("writes one self-contained page with every stage and the layout library inlined", () => {
    const { page, stages } = dumpBoth("mlp");
    expect(page.startsWith("<!DOCTYPE html>")).toBe(true);
    // No network: nothing is loaded from anywhere (the SVG namespace is an identifier).
    const urls = page.match(/(?:src|href)=["'][^"'#]/g) ?? [];
    expect(urls).toEqual([]);
    expect(page).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(page.match(/<section class="stage"/g)?.length).toBe(stages.length);
    const require = createRequire(import.meta.url);
    const dagre = require.resolve("@dagrejs/dagre/package.json").replace(/package\.json$/, "");
    expect(page).toContain(readFileSync(join(dagre, "dist/dagre.min.js"), "utf8"));
    const graphs = graphsOf(page);
    expect(graphs.length).toBe(stages.length);
    for (const [k, text] of stages.entries()) {
      const entry = parseHlo(text).entry;
      expect(new Set(graphs[k]!.nodes.map((n) => n.id))).toEqual(
        new Set(entry.instructions.map((i) => i.name)),
      );
      const operands = entry.instructions.reduce((n, i) => n + i.operands.length, 0);
      expect(graphs[k]!.edges.length).toBe(operands);
    }
    expect(graphs.at(-1)!.nodes.map((n) => n.src)).toContain("models/mlp.ts:73:24");
  });

  it("shows source paths relative to the project root, long ones shortened", () => {
    const deep = `/elsewhere/${"very-long-directory-name/".repeat(6)}layer.ts`;
    const text =
      `HloModule paths\n\nENTRY %main (p: f32[4]) -> f32[4] {\n` +
      `  %p = f32[4] parameter(0)\n` +
      `  %inside = f32[4] tanh(f32[4] %p), metadata={source_file="/proj/models/gru.ts" ` +
      `source_line=7 source_column=12}\n` +
      `  ROOT %outside = f32[4] negate(f32[4] %inside), metadata={source_file="${deep}" ` +
      `source_line=3 source_column=5}\n}\n`;
    const [graph] = graphsOf(renderHtml("paths", oneStage(text), { root: "/proj" }));
    const byId = new Map(graph!.nodes.map((n) => [n.id, n]));
    expect(byId.get("inside")!.src).toBe("models/gru.ts:7:12");
    expect(byId.get("inside")!.lines[1]).toEqual({ t: "models/gru.ts:7:12", c: "src" });
    const outside = byId.get("outside")!;
    expect(outside.src).toBe(`${deep}:3:5`);
    const shown = outside.lines[1]!;
    expect(shown.full).toBe(`${deep}:3:5`);
    expect(shown.t.length).toBeLessThan(shown.full!.length);
    expect(shown.t.endsWith("layer.ts:3:5")).toBe(true);
    // The same file seen from another root keeps its absolute path.
    const [other] = graphsOf(renderHtml("paths", oneStage(text), { root: "/pro" }));
    expect(other!.nodes.find((n) => n.id === "inside")!.src).toBe("/proj/models/gru.ts:7:12");
  });

  it("finds the steps of an unrolled GRU loop as one repeated block per step", () => {
    const { page, stages } = dumpBoth(GRU);
    const graphs = graphsOf(page);
    for (const [k, text] of stages.entries()) {
      const groups = graphs[k]!.groups;
      expect(groups.length, `stage ${k}`).toBe(1);
      const copies = groups[0]!.copies;
      expect(copies.length, `stage ${k}`).toBe(GRU_STEPS);
      // Disjoint copies, each of the entry's instructions, all but the first the same size
      // (the first also owns the loop's initial state).
      const all = copies.flat();
      expect(new Set(all).size).toBe(all.length);
      const names = new Set(parseHlo(text).entry.instructions.map((i) => i.name));
      for (const n of all) expect(names.has(n)).toBe(true);
      expect(new Set(copies.slice(1).map((c) => c.length)).size).toBe(1);
    }
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
    const optimized = graphsOf(page).find((g) => g.nodes.some((n) => n.op === "while"))!;
    const node = optimized.nodes.find((n) => n.op === "while") as { calls?: string };
    expect(node.calls).toBe(loop.called.map((c) => c.name).join(" "));
  });

  it.skipIf(!haveChromium)(
    `renders in headless Chromium (skipped when ${CHROMIUM} is missing: apt-get install chromium)`,
    async () => {
      const { file, stages } = dumpBoth("gpt2");
      await inBrowser(file, async (page) => {
        // Every repeated block expanded: then every instruction has its own box.
        await expandAll(page);
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
        expectFits((await page.evaluate(FIT)) as Fit);
        // The stage list switches the view to the captured program (282 instructions).
        await page.click('nav li[data-stage="captured"]');
        await expandAll(page);
        const captured = (await page.evaluate(SHOWN)) as Shown;
        expect(captured.stage).toBe("captured");
        expect(captured.nodes).toBe(parseHlo(stages[0]!).entry.instructions.length);
        expectFits((await page.evaluate(FIT)) as Fit);
      });
    },
    120_000,
  );

  it.skipIf(!haveChromium)(
    `lays out an unrolled GRU loop readably, its steps collapsible (skipped without ${CHROMIUM})`,
    async () => {
      const { file, stages } = dumpBoth(GRU);
      const entry = parseHlo(stages.at(-1)!).entry.instructions;
      const groups = graphsOf(readFileSync(file, "utf8")).at(-1)!.groups;
      const copies = groups[0]!.copies;
      await inBrowser(file, async (page) => {
        // The default view: the first step drawn, the other steps one box each.
        let fit = (await page.evaluate(FIT)) as Fit;
        expectFits(fit);
        expect(fit.blocks).toBe(GRU_STEPS - 1);
        expect(fit.clusters).toBe(1);
        expect(fit.nodes).toBe(entry.length - copies.slice(1).flat().length);
        // Expanding step 2 draws its instructions in a block of their own.
        await page.click(".stage.active .comp.entry .block[data-copy='1']");
        fit = (await page.evaluate(FIT)) as Fit;
        expectFits(fit);
        expect(fit.blocks).toBe(GRU_STEPS - 2);
        expect(fit.clusters).toBe(2);
        const step2 = (await page.evaluate(
          `[...document.querySelectorAll(".stage.active .cluster[data-copy='1']")].length`,
        )) as number;
        expect(step2).toBe(1);
        // ... and collapsing it again (its tab) restores the default.
        await page.click(".stage.active .comp.entry .cluster[data-copy='1'] .tab");
        expect(((await page.evaluate(FIT)) as Fit).blocks).toBe(GRU_STEPS - 1);
        // Everything expanded: still no overflow, no overlap, no sideways scrolling.
        await page.click(".stage.active .comp.entry button[data-act=expand]");
        fit = (await page.evaluate(FIT)) as Fit;
        expectFits(fit);
        expect(fit.nodes).toBe(entry.length);
        expect(fit.blocks).toBe(0);
        expect(fit.clusters).toBe(GRU_STEPS);
        await page.click(".stage.active .comp.entry button[data-act=collapse]");
        fit = (await page.evaluate(FIT)) as Fit;
        expect(fit.blocks).toBe(GRU_STEPS);
        expect(fit.clusters).toBe(0);
        expectFits(fit);
        // Zooming scales the drawing inside its panel; the page itself stays put.
        const scale = `(() => new DOMMatrix(getComputedStyle(document.querySelector(
          ".stage.active .comp.entry .canvas")).transform).a)()`;
        const before = (await page.evaluate(scale)) as number;
        await page.click(".stage.active .comp.entry button[data-act=out]");
        expect((await page.evaluate(scale)) as number).toBeCloseTo(before * 0.8, 5);
        fit = (await page.evaluate(FIT)) as Fit;
        expect(fit.pageScrollWidth).toBeLessThanOrEqual(fit.pageWidth);
      });
    },
    120_000,
  );

  it.skipIf(!haveChromium)(
    `shows a while loop's body and switches stages with the slider (skipped without ${CHROMIUM})`,
    async () => {
      const { snaps, loop } = loopStages();
      const file = join(mkdtempSync(join(tmpdir(), "kiln-html-loop-")), "loop.html");
      writeFileSync(file, renderHtml("embedding_loop", snaps));
      await inBrowser(file, async (page) => {
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

        // A collapsed body panel reopens (and is drawn) when its while node is clicked.
        const body = loop.called[1]!.name;
        await page.keyboard.press("End");
        await page.click(`.stage.active details[data-computation="${body}"] > summary`);
        expect(((await page.evaluate(PANELS)) as Panels)[body]!.open).toBe(false);
        await page.click(`.stage.active .comp.entry .node[data-opcode="while"]`);
        const reopened = ((await page.evaluate(PANELS)) as Panels)[body]!;
        expect(reopened.open).toBe(true);
        expect(new Set(reopened.names)).toEqual(
          new Set(loop.called[1]!.instructions.map((i) => i.name)),
        );
      });
    },
    60_000,
  );
});
