// `kiln dump --format html`: one self-contained HTML file (inline CSS, inline JS, the graph
// layout library inlined from node_modules; no server, no network) showing each stage of a
// module as layered graphs: the entry computation first, then every computation it reaches
// through control flow (while conditions and bodies, conditional branches, call targets) as
// its own collapsible panel. This file turns each computation into data (nodes with their
// text lines, edges labelled with the shape that flows along them, repeated blocks); the page
// measures the boxes and lays them out with dagre (`@dagrejs/dagre`) when a panel is first
// shown, and draws nodes as HTML boxes over an SVG of routed edges, panned and zoomed inside
// the panel (the page itself never scrolls sideways). Source paths are shown relative to the
// project root (the working directory) and shortened to fit their box, the full path in a
// tooltip. Repeated structure — identical layers, the steps of an unrolled loop — is found
// here (a run of instructions whose opcodes, shapes, source locations and fusion bodies repeat
// with the same internal edges) and drawn as blocks that collapse to one box each.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { isAbsolute, relative, sep } from "node:path";
import { calledRoleNames, type Computation, type Instruction, type Module } from "../ir/module.ts";
import { shapeToString } from "../ir/shape.ts";
import type { Snapshot } from "./capture.ts";

/** The longest text a node line shows; longer lines are shortened, the full text a tooltip. */
const MAX_LINE = 56;
/** The longest edge label. */
const MAX_LABEL = 32;
/** The shortest run of instructions counted as a repeated block. */
const MIN_BLOCK = 3;

export interface RenderHtmlOptions {
  /** Source paths under this directory are shown relative to it (default: the cwd). */
  readonly root?: string;
}

/** `s` cut to `max` characters: paths keep their end (the file name), other text its start. */
export function shorten(s: string, max: number, keep: "start" | "end" = "start"): string {
  if (s.length <= max) return s;
  if (keep === "end") return `…${s.slice(s.length - max + 1)}`;
  return `${s.slice(0, max - 1)}…`;
}

/** A source path relative to `root` when it lies under it (else as recorded). */
export function relativePath(file: string, root: string): string {
  if (!isAbsolute(file)) return file;
  const rel = relative(root, file);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel)
    ? rel
    : file;
}

function source(i: Instruction, root: string): string {
  const m = i.metadata;
  if (m.sourceFile === undefined) return "";
  const col = m.sourceColumn !== undefined ? `:${m.sourceColumn}` : "";
  return `${relativePath(m.sourceFile, root)}:${m.sourceLine ?? "?"}${col}`;
}

function shapeText(i: Instruction): string {
  return shapeToString(i.shape, false);
}

function bodyLines(c: Computation): Instruction[] {
  return c.instructions.filter((i) => i.opcode !== "parameter");
}

/** One line of a node box: what it shows, its class, and the full text when shortened. */
interface Line {
  readonly t: string;
  readonly c: string;
  readonly full?: string;
}

function line(text: string, cls: string, max: number, keep: "start" | "end" = "start"): Line {
  const t = shorten(text, max, keep);
  return t === text ? { t, c: cls } : { t, c: cls, full: text };
}

interface GraphNode {
  /** Instruction name (unique in its computation). */
  readonly id: string;
  readonly op: string;
  readonly cls: string;
  readonly src: string;
  readonly title: string;
  readonly lines: readonly Line[];
  readonly calls?: string;
  readonly members?: number;
  /** A parameter, constant or view of one (see `leaves`): not drawn into collapsed blocks. */
  readonly leaf?: boolean;
}

interface GraphEdge {
  readonly from: string;
  readonly to: string;
  readonly label: string;
  readonly full?: string;
}

/** A repeated block: `copies` runs of instructions with the same structure. */
interface GraphGroup {
  readonly id: string;
  /** Node ids of each copy. */
  readonly copies: readonly (readonly string[])[];
}

interface GraphData {
  readonly nodes: readonly GraphNode[];
  readonly edges: readonly GraphEdge[];
  readonly groups: readonly GraphGroup[];
}

function nodeData(i: Instruction, root: string): GraphNode {
  const src = source(i, root);
  const body = i.opcode === "fusion" ? i.called[0] : undefined;
  const kind = body ? ` ${i.attrs.fusionKind ?? ""}` : "";
  const calls = body ? [] : i.called.map((c) => c.name);
  const callsText = calls.length > 0 ? `  calls ${calls.map((n) => `%${n}`).join(", ")}` : "";
  const title = `${i.name} = ${shapeText(i)} ${i.opcode}${src ? `  (${src})` : ""}${callsText}`;
  const lines: Line[] = [line(`${i.opcode}${kind} %${i.name}`, "op", MAX_LINE)];
  lines.push(src ? line(src, "src", MAX_LINE, "end") : line(shapeText(i), "src", MAX_LINE));
  const members = body ? bodyLines(body) : [];
  for (const b of members) {
    const bs = source(b, root);
    const at = bs.split(":").slice(0, 2).join(":");
    const text = `${b.opcode} ${shapeText(b)}${at ? `  ${at}` : ""}`;
    const l = line(text, "member", MAX_LINE);
    lines.push({ ...l, full: `${b.name}: ${b.opcode} ${shapeText(b)}${bs ? `  (${bs})` : ""}` });
  }
  const cls = body ? "fusion" : i.opcode === "parameter" ? "param" : "";
  return {
    id: i.name,
    op: i.opcode,
    cls,
    src,
    title,
    lines,
    ...(calls.length > 0 && { calls: calls.join(" ") }),
    ...(body && { members: members.length }),
  };
}

/**
 * The structure of a fusion body for block matching: its opcodes and shapes as a sorted list,
 * names left out. Sorted because a fusion numbers its parameters, and places the instructions
 * that read them, in the order it met its operands, which differs between copies when the first
 * meets a value shared by all of them (one scalar parameter read by every step) elsewhere.
 */
function bodyShapeKey(c: Computation): string {
  return c.instructions.map((i) => `${i.opcode}:${shapeText(i)}`).sort().join(";");
}

/** Opcodes that only view or retype their operand (a weight's slice, a broadcast constant). */
const VIEW_OPS: ReadonlySet<string> = new Set([
  "slice", "reshape", "broadcast", "transpose", "convert", "bitcast", "bitcast-convert", "copy",
]);

/**
 * Parameters, constants, iotas and views of them (a weight's slices, a broadcast constant):
 * shared by the repeated blocks or owned by one, never a step of one.
 */
function leaves(c: Computation): Set<Instruction> {
  const out = new Set<Instruction>();
  for (const i of c.instructions) {
    if (i.opcode === "parameter" || i.opcode === "constant" || i.opcode === "iota") out.add(i);
    else if (VIEW_OPS.has(i.opcode) && i.operands.every((o) => out.has(o))) out.add(i);
  }
  return out;
}

/**
 * Repeated blocks of `c` (see the file comment): the longest-saving tandem repeat of the
 * instruction sequence (leaves left out), its copies checked for the same internal edges, then
 * the same search before and after it. Leaves used only inside one copy join that copy.
 */
export function findRepeats(c: Computation): Instruction[][][] {
  const leaf = leaves(c);
  const seq = c.instructions.filter((i) => !leaf.has(i));
  const ids = new Map<string, number>();
  const tok = seq.map((i) => {
    const m = i.metadata;
    const body = i.opcode === "fusion" && i.called[0] ? bodyShapeKey(i.called[0]) : "";
    const key = `${i.opcode}|${shapeText(i)}|${m.sourceFile}:${m.sourceLine}:${m.sourceColumn}|` +
      `${i.operands.length}|${body}`;
    let id = ids.get(key);
    if (id === undefined) ids.set(key, (id = ids.size));
    return id;
  });
  const pos = new Map<Instruction, number>();
  seq.forEach((i, k) => pos.set(i, k));
  // The internal edges of the copy starting at `s` (operand offsets inside the copy, as a
  // sorted list per instruction: a fusion's operand order follows the order it met them in).
  const shape = (s: number, p: number): string =>
    seq
      .slice(s, s + p)
      .map((i) =>
        i.operands
          .map((o) => {
            const q = pos.get(o);
            return q !== undefined && q >= s && q < s + p ? String(q - s) : "x";
          })
          .sort()
          .join(","),
      )
      .join(";");
  const found: Instruction[][][] = [];
  const search = (lo: number, hi: number): void => {
    let best: { s: number; p: number; copies: number } | undefined;
    for (let p = MIN_BLOCK; p * 2 <= hi - lo; p++) {
      let run = 0;
      for (let i = hi - p - 1; i >= lo - 1; i--) {
        // Scanning backwards: `run` is the match length starting at i + 1.
        if (i >= lo && tok[i] === tok[i + p]) {
          run++;
          continue;
        }
        const copies = Math.floor(run / p) + 1;
        if (copies >= 2 && (!best || (copies - 1) * p > (best.copies - 1) * best.p)) {
          best = { s: i + 1, p, copies };
        }
        run = 0;
      }
    }
    if (!best) return;
    const { s, p } = best;
    const first = shape(s, p);
    let copies = 1;
    while (copies < best.copies && shape(s + copies * p, p) === first) copies++;
    if (copies < 2) {
      search(s + 1, hi);
      return;
    }
    const blocks: Instruction[][] = [];
    for (let k = 0; k < copies; k++) blocks.push(seq.slice(s + k * p, s + (k + 1) * p));
    found.push(blocks);
    search(lo, s);
    search(s + copies * p, hi);
  };
  search(0, seq.length);
  // A leaf whose users all lie in one copy belongs to it (latest leaves first: a slice of a
  // weight joins before the weight, which then finds all its users inside).
  const copyOf = new Map<Instruction, Instruction[]>();
  for (const blocks of found) for (const b of blocks) for (const i of b) copyOf.set(i, b);
  const ordered = c.instructions.filter((i) => leaf.has(i) && i !== c.root).reverse();
  for (const l of ordered) {
    const homes = new Set(l.users.map((u) => copyOf.get(u)));
    const [home] = homes;
    if (homes.size === 1 && home !== undefined) {
      home.push(l);
      copyOf.set(l, home);
    }
  }
  return found;
}

/** The data the page lays out for one computation. */
function graphData(c: Computation, root: string): GraphData {
  const leaf = leaves(c);
  const nodes = c.instructions.map((i) => ({
    ...nodeData(i, root),
    ...(leaf.has(i) && { leaf: true }),
  }));
  const edges: GraphEdge[] = [];
  for (const i of c.instructions) {
    for (const o of i.operands) {
      const full = shapeText(o);
      const label = shorten(full, MAX_LABEL);
      edges.push({ from: o.name, to: i.name, label, ...(label !== full && { full }) });
    }
  }
  const groups = findRepeats(c).map((blocks, k) => ({
    id: `r${k}`,
    copies: blocks.map((b) => b.map((i) => i.name)),
  }));
  return { nodes, edges, groups };
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

function esc(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

const TOOLBAR =
  `<div class="toolbar"><button data-act="fit" title="fit the width">fit</button>` +
  `<button data-act="in" title="zoom in (or ctrl + wheel)">+</button>` +
  `<button data-act="out" title="zoom out">−</button>` +
  `<button data-act="one" title="actual size">1:1</button>` +
  `<button data-act="expand" class="rep">expand repeats</button>` +
  `<button data-act="collapse" class="rep">collapse repeats</button>` +
  `<span class="hint">drag or wheel to pan, ctrl + wheel to zoom</span></div>`;

function panelBody(graph: number, data: GraphData): string {
  const reps = data.groups.length > 0 ? "" : " no-repeats";
  return (
    `<div class="graph${reps}" data-graph="${graph}">${TOOLBAR}` +
    `<div class="viewport"><div class="canvas"></div></div></div>`
  );
}

interface RenderedModule {
  readonly html: string;
  readonly nodes: number;
  readonly groups: number;
  readonly repeats: number;
  readonly called: number;
}

/** The entry panel and one collapsible panel per control-flow callee. */
function renderModule(m: Module, root: string, graphs: GraphData[]): RenderedModule {
  const entry = graphData(m.entry, root);
  graphs.push(entry);
  const fusions = (d: GraphData): number => d.nodes.filter((n) => n.cls === "fusion").length;
  const parts = [
    `<div class="comp entry" data-computation="${esc(m.entry.name)}" ` +
      `data-nodes="${entry.nodes.length}" data-repeats="${entry.groups.length}">` +
      `${panelBody(graphs.length - 1, entry)}</div>`,
  ];
  const panels = calledPanels(m);
  for (const p of panels) {
    const d = graphData(p.comp, root);
    graphs.push(d);
    const f = fusions(d);
    parts.push(
      `<details class="comp called" open data-computation="${esc(p.comp.name)}" ` +
        `data-nodes="${d.nodes.length}"><summary>%${esc(p.comp.name)}: ${esc(p.role)} ` +
        `<small>(${d.nodes.length} nodes${f ? `, ${f} fusions` : ""})</small>` +
        `</summary>${panelBody(graphs.length - 1, d)}</details>`,
    );
  }
  return {
    html: parts.join("\n"),
    nodes: entry.nodes.length,
    groups: fusions(entry),
    repeats: entry.groups.length,
    called: panels.length,
  };
}

const CSS = `
body{font:13px system-ui,sans-serif;margin:0;display:flex;height:100vh;overflow:hidden}
nav{width:230px;border-right:1px solid #ccc;overflow:auto;padding:8px;flex:none}
nav h1{font-size:15px;margin:4px 0 8px;overflow-wrap:anywhere}
nav li{cursor:pointer;padding:3px 4px;list-style:none;border-radius:4px}
nav ul{padding:0;margin:0}
nav li.active{background:#246;color:#fff}
main{flex:1;min-width:0;overflow-x:hidden;overflow-y:auto}
.stage{display:none}.stage.active{display:block}
.stage h2{font-size:14px;margin:8px 12px;overflow-wrap:anywhere}
.graph{margin:0 12px 8px}
.toolbar{display:flex;gap:4px;align-items:center;margin:2px 0;flex-wrap:wrap}
.toolbar button{font-size:11px;padding:1px 6px}.toolbar .hint{font-size:11px;color:#777}
.graph.no-repeats .rep{display:none}
.viewport{position:relative;overflow:hidden;border:1px solid #ddd;border-radius:4px;
  cursor:grab;min-height:80px;touch-action:none}
.canvas{position:absolute;left:0;top:0;transform-origin:0 0}
.canvas svg.edges{position:absolute;left:0;top:0;overflow:visible}
.edges path{fill:none;stroke:#889;stroke-width:1.2}
marker path{fill:#889}
svg.defs{position:absolute}
.node,.block,.edge-label,.cluster{position:absolute;box-sizing:border-box;white-space:nowrap}
.node,.block{width:max-content;padding:3px 7px;border:1px solid #567;border-radius:6px;
  background:#f4f6fa;font-size:11px;line-height:14px;cursor:default}
.node.param{background:#eef8ee}
.node.fusion{background:#fff7e6;border:2px solid #c80}
.node[data-calls]{cursor:pointer;border:2px solid #36a}
.l.op{font-weight:600}.l.src{font-size:10px;color:#468}
.l.member{font-size:10px;font-family:ui-monospace,monospace;padding-left:6px}
.block{background:#eef0ff;border:2px dashed #66a;cursor:pointer}
.block .l.op::before{content:"▸ "}
.cluster{border:1.5px dashed #66a;border-radius:8px;background:rgba(100,100,200,.04)}
.cluster .tab{position:absolute;left:6px;top:2px;font-size:10px;color:#447;cursor:pointer;
  background:#fff;padding:0 4px;border-radius:3px}
.edge-label{font-size:10px;line-height:12px;color:#a44;background:rgba(255,255,255,.85);
  padding:0 2px}
.slider{margin:8px 0}.slider input{width:100%}.slider output{font-weight:600}
details.comp{margin:4px 12px;border-top:1px solid #ddd}
details.comp summary{cursor:pointer;padding:4px 0;font-weight:600}
`;

// The page's script (plain JS; no template literals, so it sits in this file's one). It lays a
// panel out the first time it is shown, and again when a repeated block is toggled.
const SCRIPT = String.raw`
const GRAPHS = JSON.parse(document.getElementById("kiln-graphs").textContent);
const items = document.querySelectorAll("nav li");
const slider = document.getElementById("stage-slider");
const label = document.getElementById("stage-name");
const states = new Map();

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function addLines(box, lines) {
  for (const l of lines) {
    const d = el("div", "l " + l.c, l.t);
    if (l.full) d.title = l.full;
    box.appendChild(d);
  }
}
function stateOf(panel) {
  let st = states.get(panel);
  if (st) return st;
  const g = GRAPHS[Number(panel.getAttribute("data-graph"))];
  const collapsed = new Set();
  // Every copy but the first starts collapsed: the first shows what the others repeat.
  for (const r of g.groups) {
    r.copies.forEach((c, k) => { if (k > 0) collapsed.add(r.id + ":" + k); });
  }
  st = { g: g, collapsed: collapsed, s: 1, tx: 0, ty: 0, w: 0, h: 0, laid: false };
  states.set(panel, st);
  return st;
}
function apply(panel, st) {
  const vp = panel.querySelector(".viewport");
  const cv = panel.querySelector(".canvas");
  const vw = vp.clientWidth, vh = vp.clientHeight;
  const minX = Math.min(0, vw - st.w * st.s), minY = Math.min(0, vh - st.h * st.s);
  st.tx = Math.max(minX, Math.min(Math.max(0, (vw - st.w * st.s) / 2), st.tx));
  st.ty = Math.max(minY, Math.min(0, st.ty));
  cv.style.transform = "translate(" + st.tx + "px," + st.ty + "px) scale(" + st.s + ")";
}
function fit(panel, st) {
  const vp = panel.querySelector(".viewport");
  st.s = Math.min(1, (vp.clientWidth - 2) / Math.max(1, st.w));
  const want = Math.max(80, Math.min(st.h * st.s + 2, window.innerHeight * 0.8));
  vp.style.height = want + "px";
  st.tx = (vp.clientWidth - st.w * st.s) / 2;
  st.ty = 0;
  apply(panel, st);
}
function layout(panel) {
  const st = stateOf(panel);
  const g = st.g;
  const cv = panel.querySelector(".canvas");
  cv.textContent = "";
  const owner = new Map();
  for (const r of g.groups) {
    r.copies.forEach((c, k) => { for (const id of c) owner.set(id, { r: r, k: k }); });
  }
  const rep = (id) => {
    const o = owner.get(id);
    return o && st.collapsed.has(o.r.id + ":" + o.k) ? "block:" + o.r.id + ":" + o.k : id;
  };
  const boxes = new Map();
  const byId = new Map();
  for (const n of g.nodes) {
    byId.set(n.id, n);
    if (rep(n.id) !== n.id) continue;
    const d = el("div", "node" + (n.cls ? " " + n.cls : ""));
    d.setAttribute("data-name", n.id);
    d.setAttribute("data-opcode", n.op);
    d.setAttribute("data-source", n.src);
    if (n.calls) d.setAttribute("data-calls", n.calls);
    d.title = n.title;
    addLines(d, n.lines);
    if (n.calls) d.addEventListener("click", () => openCalled(panel, n.calls));
    boxes.set(n.id, d);
  }
  for (const r of g.groups) {
    r.copies.forEach((c, k) => {
      const key = r.id + ":" + k;
      if (!st.collapsed.has(key)) return;
      const d = el("div", "block");
      d.setAttribute("data-group", r.id);
      d.setAttribute("data-copy", String(k));
      const srcs = c.map((id) => byId.get(id).src).filter((s) => s).sort();
      addLines(d, [{ t: "block " + (k + 1) + " of " + r.copies.length + " (" + c.length + " ops)",
        c: "op" }, { t: "same structure as block 1", c: "src" }]);
      d.title = "click to expand" +
        (srcs.length ? "; from " + srcs[0] + " … " + srcs[srcs.length - 1] : "");
      d.addEventListener("click", () => { st.collapsed.delete(key); layout(panel); });
      boxes.set("block:" + key, d);
    });
  }
  const edges = [];
  const seen = new Set();
  const shared = new Map();
  // Where a shared weight's own box goes: with its first reader (a block's key, or "" outside).
  const homes = new Map();
  const home = (id) => {
    if (!homes.has(id)) {
      const first = g.edges.find((e) => e.from === id);
      const o = first && owner.get(first.to);
      homes.set(id, o ? o.r.id + ":" + o.k : "");
    }
    return homes.get(id);
  };
  for (const e of g.edges) {
    const a = rep(e.from), b = rep(e.to);
    if (a === b) continue;
    // A weight or constant read by every step would tie every collapsed block to it: the
    // block's tooltip names it instead of an edge.
    if (b !== e.to && a === e.from && byId.get(e.from).leaf) {
      if (!shared.has(b)) shared.set(b, new Set());
      shared.get(b).add("%" + e.from);
      continue;
    }
    // So would one read by several expanded copies: its edges go to its first reader's copy
    // only (one edge per step down the whole graph is also what makes dagre slow: every rank
    // an edge crosses is a node to order).
    const from = owner.get(e.from), to = owner.get(e.to);
    if (!from && to && byId.get(e.from).leaf && home(e.from) !== to.r.id + ":" + to.k) {
      if (!shared.has(b)) shared.set(b, new Set());
      shared.get(b).add("%" + e.from);
      continue;
    }
    if (a !== e.from || b !== e.to) {
      const k = a + "|" + b + "|" + e.label;
      if (seen.has(k)) continue;
      seen.add(k);
    }
    const d = el("div", "edge-label", e.label);
    if (e.full) d.title = e.full;
    edges.push({ a: a, b: b, d: d });
  }
  for (const [b, names] of shared) {
    const d = boxes.get(b);
    d.title += "; also reads " + [...names].join(", ") + " (drawn once, elsewhere)";
  }
  for (const d of boxes.values()) cv.appendChild(d);
  for (const e of edges) cv.appendChild(e.d);
  const G = new dagre.graphlib.Graph({ multigraph: true });
  G.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 30, edgesep: 8, marginx: 12, marginy: 12 });
  G.setDefaultEdgeLabel(() => ({}));
  for (const [id, d] of boxes) G.setNode(id, { width: d.offsetWidth, height: d.offsetHeight });
  // Expanded copies are drawn as the box around their nodes, not as dagre clusters: compound
  // layout costs minutes at a thousand nodes, and the steps of a block stay together anyway.
  const clusters = [];
  for (const r of g.groups) {
    r.copies.forEach((c, k) => {
      const key = r.id + ":" + k;
      if (!st.collapsed.has(key)) clusters.push({ key: key, r: r, k: k, ids: c });
    });
  }
  edges.forEach((e, k) => {
    G.setEdge(e.a, e.b, { width: e.d.offsetWidth, height: e.d.offsetHeight, labelpos: "c" },
      "e" + k);
  });
  dagre.layout(G);
  const gr = G.graph();
  st.w = Math.ceil(gr.width || 0);
  st.h = Math.ceil(gr.height || 0);
  cv.style.width = st.w + "px";
  cv.style.height = st.h + "px";
  for (const c of clusters) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const id of c.ids) {
      const p = G.node(id);
      x0 = Math.min(x0, p.x - p.width / 2); x1 = Math.max(x1, p.x + p.width / 2);
      y0 = Math.min(y0, p.y - p.height / 2); y1 = Math.max(y1, p.y + p.height / 2);
    }
    const d = el("div", "cluster");
    d.setAttribute("data-group", c.r.id);
    d.setAttribute("data-copy", String(c.k));
    d.style.left = (x0 - 6) + "px";
    d.style.top = (y0 - 16) + "px";
    d.style.width = (x1 - x0 + 12) + "px";
    d.style.height = (y1 - y0 + 22) + "px";
    const tab = el("span", "tab", "▾ block " + (c.k + 1) + " of " + c.r.copies.length);
    tab.title = "collapse this block";
    tab.addEventListener("click", () => { st.collapsed.add(c.key); layout(panel); });
    d.appendChild(tab);
    cv.insertBefore(d, cv.firstChild);
  }
  for (const [id, d] of boxes) {
    const p = G.node(id);
    d.style.left = (p.x - p.width / 2) + "px";
    d.style.top = (p.y - p.height / 2) + "px";
  }
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "edges");
  svg.setAttribute("width", String(st.w));
  svg.setAttribute("height", String(st.h));
  edges.forEach((e, k) => {
    const p = G.edge(e.a, e.b, "e" + k);
    const path = document.createElementNS(NS, "path");
    path.setAttribute("d", p.points.map((q, j) => (j ? "L" : "M") + q.x + "," + q.y).join(" "));
    path.setAttribute("marker-end", "url(#arrow)");
    svg.appendChild(path);
    e.d.style.left = (p.x - e.d.offsetWidth / 2) + "px";
    e.d.style.top = (p.y - e.d.offsetHeight / 2) + "px";
  });
  cv.insertBefore(svg, cv.firstChild);
  if (!st.laid) { st.laid = true; fit(panel, st); } else apply(panel, st);
}
function renderVisible() {
  const stage = document.querySelector(".stage.active");
  if (!stage) return;
  stage.querySelectorAll(".graph").forEach((panel) => {
    const d = panel.closest("details");
    if (d && !d.open) return;
    if (!stateOf(panel).laid) layout(panel);
  });
}
function openCalled(panel, names) {
  const stage = panel.closest(".stage");
  let first = null;
  for (const name of names.split(" ")) {
    const d = stage.querySelector('details.comp[data-computation="' + name + '"]');
    if (!d) continue;
    d.open = true;
    first = first || d;
  }
  renderVisible();
  if (first) first.scrollIntoView({ block: "start" });
}
document.querySelectorAll("details.comp").forEach((d) => {
  d.addEventListener("toggle", renderVisible);
});
document.querySelectorAll(".graph").forEach((panel) => {
  const vp = panel.querySelector(".viewport");
  const zoom = (f, mx, my) => {
    const st = stateOf(panel);
    const ns = Math.max(0.05, Math.min(4, st.s * f));
    st.tx = mx - (mx - st.tx) * ns / st.s;
    st.ty = my - (my - st.ty) * ns / st.s;
    st.s = ns;
    apply(panel, st);
  };
  panel.querySelector(".toolbar").addEventListener("click", (ev) => {
    const act = ev.target.getAttribute && ev.target.getAttribute("data-act");
    if (!act) return;
    const st = stateOf(panel);
    const w = vp.clientWidth / 2, h = vp.clientHeight / 2;
    if (act === "fit") fit(panel, st);
    if (act === "in") zoom(1.25, w, h);
    if (act === "out") zoom(0.8, w, h);
    if (act === "one") zoom(1 / st.s, w, h);
    if (act === "expand") { st.collapsed.clear(); layout(panel); }
    if (act === "collapse") {
      for (const r of st.g.groups) r.copies.forEach((c, k) => st.collapsed.add(r.id + ":" + k));
      layout(panel);
    }
  });
  vp.addEventListener("wheel", (ev) => {
    const st = stateOf(panel);
    const r = vp.getBoundingClientRect();
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault();
      zoom(Math.exp(-ev.deltaY * 0.002), ev.clientX - r.left, ev.clientY - r.top);
      return;
    }
    const x = st.tx, y = st.ty;
    st.tx -= ev.deltaX; st.ty -= ev.deltaY;
    apply(panel, st);
    if (st.tx !== x || st.ty !== y) ev.preventDefault();
  }, { passive: false });
  let drag = null;
  vp.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest(".block, .tab, .node[data-calls]")) return;
    const st = stateOf(panel);
    drag = { x: ev.clientX - st.tx, y: ev.clientY - st.ty };
  });
  window.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const st = stateOf(panel);
    st.tx = ev.clientX - drag.x; st.ty = ev.clientY - drag.y;
    apply(panel, st);
  });
  window.addEventListener("pointerup", () => { drag = null; });
});
function show(i) {
  document.querySelectorAll(".stage").forEach((s, k) => s.classList.toggle("active", k === i));
  items.forEach((s, k) => s.classList.toggle("active", k === i));
  slider.value = String(i);
  label.textContent = items[i].getAttribute("data-stage");
  renderVisible();
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
show(items.length - 1);
`;

let layoutLibrary: string | undefined;

/** dagre's browser build (it carries graphlib), read from node_modules once per process. */
function dagreSource(): string {
  if (layoutLibrary === undefined) {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve("@dagrejs/dagre/package.json");
    layoutLibrary = readFileSync(pkg.replace(/package\.json$/, "dist/dagre.min.js"), "utf8");
  }
  return layoutLibrary;
}

/** JSON that is safe inside a <script> element. */
function scriptJson(v: unknown): string {
  return JSON.stringify(v).replace(/</g, "\\u003c");
}

/** The HTML page for a model's snapshots (see the file comment). */
export function renderHtml(
  title: string,
  snaps: readonly Snapshot[],
  options: RenderHtmlOptions = {},
): string {
  if (snaps.length === 0) throw new Error(`renderHtml('${title}'): no stages to draw`);
  const root = options.root ?? process.cwd();
  const nav: string[] = [];
  const stages: string[] = [];
  const graphs: GraphData[] = [];
  for (const [k, s] of snaps.entries()) {
    const m: Module = s.module;
    const r = renderModule(m, root, graphs);
    const extra =
      (r.groups ? `, ${r.groups} fusions` : "") +
      (r.repeats ? `, ${r.repeats} repeated` : "") +
      (r.called ? `, ${r.called} called` : "");
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
    `<script type="application/json" id="kiln-graphs">${scriptJson(graphs)}</script>` +
    `<script>/* @dagrejs/dagre (MIT) */\n${dagreSource()}</script>` +
    `<script>${SCRIPT}</script></body></html>\n`
  );
}
