// `kiln dump --format html`: the page is one self-contained file (no external URL), and in
// headless Chromium (Debian's package, driven by playwright-core) it renders with no console
// errors, shows one node per entry instruction of each stage (checked against the HLO dump of
// the same stages), fusions as groups with their members, shapes on edges, source lines on
// nodes, and a stage list that switches the view. Only the browser part needs Chromium; CI
// installs it (.ci/run), and without it that test is skipped with the reason in its name.

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { describe, expect, it } from "vitest";
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

// Run in the page (a string: the test's TypeScript has no DOM types): what the active stage shows.
const SHOWN = `(() => {
  const active = document.querySelector(".stage.active");
  const nodes = [...active.querySelectorAll(".node")];
  return {
    stage: active.getAttribute("data-stage"),
    nodes: nodes.length,
    names: nodes.map((n) => n.getAttribute("data-name")),
    fusions: active.querySelectorAll(".node.fusion").length,
    members: active.querySelectorAll(".node.fusion .member").length,
    edgeLabels: [...active.querySelectorAll(".edge-label")].map((e) => e.textContent),
    sources: nodes.filter((n) => (n.getAttribute("data-source") || "") !== "").length,
    width: active.querySelector("svg").getBoundingClientRect().width,
  };
})()`;

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

  it.skipIf(!haveChromium)(
    `renders in headless Chromium (skipped when ${CHROMIUM} is missing: apt-get install chromium)`,
    async () => {
      const { file, stages } = dumpBoth("gpt2");
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
      });
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
});
