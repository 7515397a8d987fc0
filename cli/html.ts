// `kiln dump --format html`: one self-contained HTML file (inline CSS, inline SVG, a few lines
// of inline JS; no server, no network) showing each stage of a module as layered graphs: the
// entry computation first, then every computation it reaches through control flow (while
// conditions and bodies, conditional branches, call targets) as its own collapsible panel. A
// fusion is drawn as a group box listing the instructions of its body; every edge is labelled
// with the shape that flows along it; every node shows the user's `file:line` from its
// metadata; a list of stages (captured, each pass that changed the module, optimized) and a
// slider over the same stages switch the view. The layout is computed here (rank = longest path
// from a parameter), so the page needs nothing but a browser.

import { calledRoleNames, type Computation, type Instruction, type Module } from "../ir/module.ts";
import { shapeToString } from "../ir/shape.ts";
import type { Snapshot } from "./capture.ts";

const NODE_W = 270;
const GAP_X = 40;
const GAP_Y = 56;
const HEAD_H = 34;
const LINE_H = 15;

function esc(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

function source(i: Instruction): string {
  const m = i.metadata;
  if (m.sourceFile === undefined) return "";
  const col = m.sourceColumn !== undefined ? `:${m.sourceColumn}` : "";
  return `${m.sourceFile}:${m.sourceLine ?? "?"}${col}`;
}

function shapeText(i: Instruction): string {
  return shapeToString(i.shape, false);
}

interface Placed {
  readonly instr: Instruction;
  readonly body: Computation | undefined;
  x: number;
  y: number;
  h: number;
}

function bodyLines(c: Computation): Instruction[] {
  return c.instructions.filter((i) => i.opcode !== "parameter");
}

/** The SVG of one computation, fusions drawn as groups. */
function renderComputation(c: Computation): { svg: string; nodes: number; groups: number } {
  const rank = new Map<Instruction, number>();
  for (const i of c.instructions) {
    let r = 0;
    for (const o of i.operands) r = Math.max(r, (rank.get(o) ?? 0) + 1);
    rank.set(i, r);
  }
  const rows: Placed[][] = [];
  for (const i of c.instructions) {
    const r = rank.get(i) ?? 0;
    const body = i.opcode === "fusion" ? i.called[0] : undefined;
    const h = HEAD_H + (body ? bodyLines(body).length * LINE_H + 8 : 0);
    (rows[r] ??= []).push({ instr: i, body, x: 0, y: 0, h });
  }
  const placed = new Map<Instruction, Placed>();
  let y = 20;
  let width = 0;
  for (const row of rows) {
    if (!row) continue;
    let x = 20;
    for (const p of row) {
      p.x = x;
      p.y = y;
      x += NODE_W + GAP_X;
      placed.set(p.instr, p);
    }
    width = Math.max(width, x);
    y += Math.max(...row.map((p) => p.h)) + GAP_Y;
  }
  const parts: string[] = [];
  let groups = 0;
  for (const p of placed.values()) {
    for (const o of p.instr.operands) {
      const q = placed.get(o);
      if (!q) continue;
      const x1 = q.x + NODE_W / 2;
      const y1 = q.y + q.h;
      const x2 = p.x + NODE_W / 2;
      const y2 = p.y;
      parts.push(
        `<g class="edge"><line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" ` +
          `marker-end="url(#arrow)"/><text class="edge-label" x="${(x1 + x2) / 2 + 4}" ` +
          `y="${(y1 + y2) / 2}">${esc(shapeText(o))}</text></g>`,
      );
    }
  }
  for (const p of placed.values()) {
    const i = p.instr;
    const src = source(i);
    const title = `${i.name} = ${shapeText(i)} ${i.opcode}${src ? `  (${src})` : ""}`;
    const isGroup = p.body !== undefined;
    if (isGroup) groups++;
    const cls = isGroup ? "node fusion" : i.opcode === "parameter" ? "node param" : "node";
    const kind = isGroup ? ` ${i.attrs.fusionKind ?? ""}` : "";
    const calls = isGroup ? [] : i.called.map((c) => c.name);
    const callsAttr = calls.length > 0 ? ` data-calls="${esc(calls.join(" "))}"` : "";
    const callsText = calls.length > 0 ? `  calls ${calls.map((n) => `%${n}`).join(", ")}` : "";
    const lines: string[] = [
      `<g class="${cls}" data-name="${esc(i.name)}" data-opcode="${esc(i.opcode)}" ` +
        `data-source="${esc(src)}"${callsAttr}><title>${esc(title + callsText)}</title>`,
      `<rect x="${p.x}" y="${p.y}" width="${NODE_W}" height="${p.h}" rx="6"/>`,
      `<text class="op" x="${p.x + 8}" y="${p.y + 14}">${esc(`${i.opcode}${kind}`)} ` +
        `<tspan class="name">%${esc(i.name)}</tspan></text>`,
      `<text class="src" x="${p.x + 8}" y="${p.y + 28}">${esc(src || shapeText(i))}</text>`,
    ];
    if (p.body) {
      for (const [k, b] of bodyLines(p.body).entries()) {
        const bs = source(b);
        const line = bs.split(":").slice(0, 2).join(":");
        const short = bs ? ` <tspan class="src">${esc(line)}</tspan>` : "";
        lines.push(
          `<text class="member" data-source="${esc(bs)}" x="${p.x + 14}" ` +
            `y="${p.y + HEAD_H + 10 + k * LINE_H}">${esc(`${b.opcode} ${shapeText(b)}`)}` +
            short +
            `<title>${esc(`${b.name}${bs ? ` (${bs})` : ""}`)}</title></text>`,
        );
      }
    }
    lines.push("</g>");
    parts.push(lines.join(""));
  }
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}">` +
    parts.join("\n") +
    `</svg>`;
  return { svg, nodes: placed.size, groups };
}

// One marker for every graph, in an SVG that is never display:none: Chromium draws no marker
// whose definition sits inside a hidden element (every stage but the shown one is hidden).
const MARKER_DEFS =
  `<svg class="defs" width="0" height="0" aria-hidden="true"><defs><marker id="arrow" ` +
  `viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" ` +
  `orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs></svg>`;

/** Opcodes whose called computations run as control flow (drawn as panels, not groups). */
const CONTROL_FLOW: ReadonlySet<string> = new Set(["while", "conditional", "call"]);

interface CalledPanel {
  readonly comp: Computation;
  /** Why it is shown: e.g. `body of %while.1 (in %main)`. */
  readonly role: string;
}

/** Computations reached from the entry through control flow, callers before callees. */
function calledPanels(m: Module): CalledPanel[] {
  const out: CalledPanel[] = [];
  const seen = new Set<Computation>([m.entry]);
  const visit = (c: Computation): void => {
    for (const i of c.instructions) {
      if (!CONTROL_FLOW.has(i.opcode)) continue;
      const roles = calledRoleNames(i);
      for (const [k, callee] of i.called.entries()) {
        if (seen.has(callee)) continue;
        seen.add(callee);
        const role = i.opcode === "call" ? "target" : (roles[k] ?? `callee ${k}`);
        out.push({ comp: callee, role: `${role} of %${i.name} (in %${c.name})` });
        visit(callee);
      }
    }
  };
  visit(m.entry);
  return out;
}

interface RenderedModule {
  readonly html: string;
  readonly nodes: number;
  readonly groups: number;
  readonly called: number;
}

/** The entry panel and one collapsible panel per control-flow callee. */
function renderModule(m: Module): RenderedModule {
  const entry = renderComputation(m.entry);
  const parts = [
    `<div class="comp entry" data-computation="${esc(m.entry.name)}" ` +
      `data-nodes="${entry.nodes}">${entry.svg}</div>`,
  ];
  const panels = calledPanels(m);
  for (const p of panels) {
    const r = renderComputation(p.comp);
    parts.push(
      `<details class="comp called" open data-computation="${esc(p.comp.name)}" ` +
        `data-nodes="${r.nodes}"><summary>%${esc(p.comp.name)}: ${esc(p.role)} ` +
        `<small>(${r.nodes} nodes${r.groups ? `, ${r.groups} fusions` : ""})</small>` +
        `</summary>${r.svg}</details>`,
    );
  }
  const html = parts.join("\n");
  return { html, nodes: entry.nodes, groups: entry.groups, called: panels.length };
}

const CSS = `
body{font:13px system-ui,sans-serif;margin:0;display:flex;height:100vh}
nav{width:230px;border-right:1px solid #ccc;overflow:auto;padding:8px;flex:none}
nav h1{font-size:15px;margin:4px 0 8px}
nav li{cursor:pointer;padding:3px 4px;list-style:none;border-radius:4px}
nav ul{padding:0;margin:0}
nav li.active{background:#246;color:#fff}
main{flex:1;overflow:auto}
.stage{display:none}.stage.active{display:block}
.stage h2{font-size:14px;margin:8px 12px}
.node rect{fill:#f4f6fa;stroke:#567}
.node.param rect{fill:#eef8ee}
.node.fusion rect{fill:#fff7e6;stroke:#c80;stroke-width:2}
.op{font-weight:600;font-size:12px}.name{font-weight:400;fill:#555}
.src{font-size:10px;fill:#468}
.member{font-size:10px;font-family:ui-monospace,monospace}
.edge line{stroke:#889}.edge-label{font-size:10px;fill:#a44}
marker path{fill:#889}
svg.defs{position:absolute}
.slider{margin:8px 0}.slider input{width:100%}.slider output{font-weight:600}
details.comp{margin:4px 12px;border-top:1px solid #ddd}
details.comp summary{cursor:pointer;padding:4px 0;font-weight:600}
.node[data-calls]{cursor:pointer}.node[data-calls] rect{stroke:#36a;stroke-width:2}
`;

const SCRIPT = `
const items = document.querySelectorAll("nav li");
const slider = document.getElementById("stage-slider");
const label = document.getElementById("stage-name");
function show(i) {
  document.querySelectorAll(".stage").forEach((s, k) => s.classList.toggle("active", k === i));
  items.forEach((s, k) => s.classList.toggle("active", k === i));
  slider.value = String(i);
  label.textContent = items[i].getAttribute("data-stage");
}
items.forEach((li, i) => li.addEventListener("click", () => show(i)));
slider.addEventListener("input", () => show(Number(slider.value)));
document.addEventListener("keydown", (e) => {
  // The slider moves itself on arrow keys; handling them here too would move two steps.
  if (e.target === slider) return;
  const cur = [...items].findIndex((li) => li.classList.contains("active"));
  if (e.key === "ArrowDown" && cur + 1 < items.length) show(cur + 1);
  if (e.key === "ArrowUp" && cur > 0) show(cur - 1);
});
// Clicking a while/conditional/call node opens its callees' panels in the same stage.
document.querySelectorAll(".node[data-calls]").forEach((n) => n.addEventListener("click", () => {
  const stage = n.closest(".stage");
  let first = null;
  for (const name of n.getAttribute("data-calls").split(" ")) {
    const panel = stage.querySelector('details.comp[data-computation="' + name + '"]');
    if (!panel) continue;
    panel.open = true;
    first = first || panel;
  }
  if (first) first.scrollIntoView({ block: "start" });
}));
show(items.length - 1);
`;

/** The HTML page for a model's snapshots (see the file comment). */
export function renderHtml(title: string, snaps: readonly Snapshot[]): string {
  if (snaps.length === 0) throw new Error(`renderHtml('${title}'): no stages to draw`);
  const nav: string[] = [];
  const stages: string[] = [];
  for (const [k, s] of snaps.entries()) {
    const m: Module = s.module;
    const r = renderModule(m);
    const extra =
      (r.groups ? `, ${r.groups} fusions` : "") + (r.called ? `, ${r.called} called` : "");
    nav.push(
      `<li data-stage="${esc(s.stage)}">${String(k).padStart(3, "0")} ${esc(s.stage)} ` +
        `<small>(${r.nodes} nodes${extra})</small></li>`,
    );
    stages.push(
      `<section class="stage" data-stage="${esc(s.stage)}" data-nodes="${r.nodes}" ` +
        `data-groups="${r.groups}" data-called="${r.called}"><h2>${esc(s.stage)}: ` +
        `${esc(m.name)}</h2>${r.html}</section>`,
    );
  }
  const last = snaps.length - 1;
  const slider =
    `<div class="slider"><label for="stage-slider">Stage (drag, or arrow keys):</label>` +
    `<input type="range" id="stage-slider" min="0" max="${last}" step="1" value="${last}">` +
    `<output id="stage-name" for="stage-slider">${esc(snaps[last]!.stage)}</output></div>`;
  return (
    `<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">` +
    `<title>kiln dump: ${esc(title)}</title><style>${CSS}</style></head><body>${MARKER_DEFS}` +
    `<nav><h1>${esc(title)}</h1>${slider}<p>Stages (click, or arrow keys):</p>` +
    `<ul>${nav.join("")}</ul></nav><main>${stages.join("\n")}</main>` +
    `<script>${SCRIPT}</script></body></html>\n`
  );
}
