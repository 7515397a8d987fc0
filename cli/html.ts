// `kiln dump --format html`: one self-contained HTML file (inline CSS, inline SVG, a few lines
// of inline JS; no server, no network) showing each stage's entry computation as a layered
// graph. A fusion is drawn as a group box listing the instructions of its body; every edge is
// labelled with the shape that flows along it; every node shows the user's `file:line` from
// its metadata; a list of stages (captured, each pass that changed the module, optimized)
// switches the view. The layout is computed here (rank = longest path from a parameter), so
// the page needs nothing but a browser.

import type { Computation, Instruction, Module } from "../ir/module.ts";
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

/** The SVG of one computation (entry), fusions drawn as groups. */
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
    const lines: string[] = [
      `<g class="${cls}" data-name="${esc(i.name)}" data-opcode="${esc(i.opcode)}" ` +
        `data-source="${esc(src)}"><title>${esc(title)}</title>`,
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
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" ` +
    `markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>` +
    parts.join("\n") +
    `</svg>`;
  return { svg, nodes: placed.size, groups };
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
`;

const SCRIPT = `
const items = document.querySelectorAll("nav li");
function show(i) {
  document.querySelectorAll(".stage").forEach((s, k) => s.classList.toggle("active", k === i));
  items.forEach((s, k) => s.classList.toggle("active", k === i));
}
items.forEach((li, i) => li.addEventListener("click", () => show(i)));
document.addEventListener("keydown", (e) => {
  const cur = [...items].findIndex((li) => li.classList.contains("active"));
  if (e.key === "ArrowDown" && cur + 1 < items.length) show(cur + 1);
  if (e.key === "ArrowUp" && cur > 0) show(cur - 1);
});
show(items.length - 1);
`;

/** The HTML page for a model's snapshots (see the file comment). */
export function renderHtml(title: string, snaps: readonly Snapshot[]): string {
  const nav: string[] = [];
  const stages: string[] = [];
  for (const [k, s] of snaps.entries()) {
    const m: Module = s.module;
    const r = renderComputation(m.entry);
    nav.push(
      `<li data-stage="${esc(s.stage)}">${String(k).padStart(3, "0")} ${esc(s.stage)} ` +
        `<small>(${r.nodes} nodes${r.groups ? `, ${r.groups} fusions` : ""})</small></li>`,
    );
    stages.push(
      `<section class="stage" data-stage="${esc(s.stage)}" data-nodes="${r.nodes}" ` +
        `data-groups="${r.groups}"><h2>${esc(s.stage)}: ${esc(m.name)}</h2>${r.svg}</section>`,
    );
  }
  return (
    `<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">` +
    `<title>kiln dump: ${esc(title)}</title><style>${CSS}</style></head><body>` +
    `<nav><h1>${esc(title)}</h1><p>Stages (click, or arrow keys):</p><ul>${nav.join("")}</ul>` +
    `</nav><main>${stages.join("\n")}</main><script>${SCRIPT}</script></body></html>\n`
  );
}
