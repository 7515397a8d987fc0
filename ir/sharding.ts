// XLA's instruction sharding (`sharding={devices=[2,2]<=[4]}`): Kiln computes nothing from it,
// but keeps it, prints it and writes it to the proto's OpSharding. The forms read into a
// structure (and so written to the proto) are XLA's classic ones: replicated, manual, unknown,
// maximal device=N, tiled device lists (`devices=[2,2]0,1,2,3`) and iota tile assignments
// (`devices=[2,2]<=[2,2]T(1,0)`), with last_tile_dim_replicate or last_tile_dims={...}, and
// tuples of them, each with the OpMetadata XLA attaches (`metadata={op_name="a"}`). Any other
// form (named meshes, shard groups) is kept as its text and printed back; writing it to a proto
// is a ProtoError naming it, never a silent drop.

import type { Metadata } from "./attributes.ts";

/** OpSharding.Type values. */
export const SHARDING_TYPE = {
  replicated: 0,
  maximal: 1,
  tuple: 2,
  other: 3,
  manual: 4,
  unknown: 5,
} as const;

/** The OpMetadata of a sharding (where it came from): XLA's OpSharding.metadata. */
interface WithMetadata {
  readonly metadata?: readonly Metadata[];
}

export type Sharding =
  | ({ readonly kind: "replicated" | "manual" | "unknown" } & WithMetadata)
  | ({ readonly kind: "maximal"; readonly device: number } & WithMetadata)
  | { readonly kind: "tuple"; readonly elements: readonly Sharding[] }
  | ({
      readonly kind: "tiled";
      /** tile_assignment_dimensions. */
      readonly dims: readonly number[];
      /** Explicit device list, or an iota assignment (`<=[reshape]T(perm)`). */
      readonly devices?: readonly number[];
      readonly iotaReshape?: readonly number[];
      readonly iotaTranspose?: readonly number[];
      readonly lastTileDimReplicate?: boolean;
      /** last_tile_dims, as OpSharding.Type names (manual, replicated, ...). */
      readonly lastTileDims?: readonly LastTileType[];
    } & WithMetadata);

export type LastTileType = "replicated" | "manual" | "unknown" | "maximal" | "other";

const LAST_TILE_TYPES: readonly LastTileType[] = [
  "replicated",
  "manual",
  "unknown",
  "maximal",
  "other",
];

/** The sharding of XLA's text form `{...}`, or undefined for a form Kiln does not structure. */
export function parseSharding(text: string): Sharding | undefined {
  const r = new Reader(text);
  try {
    const s = r.sharding();
    r.ws();
    return r.atEnd() ? s : undefined;
  } catch {
    return undefined;
  }
}

/** XLA's text of a sharding (HloSharding::ToString): `{devices=[2,2]<=[4]}`. */
export function shardingToString(s: Sharding): string {
  switch (s.kind) {
    case "replicated":
    case "manual":
    case "unknown":
      return `{${s.kind}${metadataText(s.metadata)}}`;
    case "maximal":
      return `{maximal device=${s.device}${metadataText(s.metadata)}}`;
    case "tuple":
      return `{${s.elements.map(shardingToString).join(", ")}}`;
    case "tiled": {
      let t = `{devices=[${s.dims.join(",")}]`;
      if (s.devices) t += s.devices.join(",");
      else {
        t += `<=[${(s.iotaReshape ?? []).join(",")}]`;
        const perm = s.iotaTranspose ?? [];
        if (perm.some((p, k) => p !== k)) t += `T(${perm.join(",")})`;
      }
      if (s.lastTileDimReplicate) t += " last_tile_dim_replicate";
      if (s.lastTileDims && s.lastTileDims.length > 0) {
        t += ` last_tile_dims={${s.lastTileDims.join(", ")}}`;
      }
      return `${t}${metadataText(s.metadata)}}`;
    }
    default: {
      const never: never = s;
      throw new Error(`unknown sharding ${String(never)}`);
    }
  }
}

/** ` metadata={op_name="a"}`, or ` metadata={{...}, {...}}` for several (XLA's text). */
function metadataText(ms: readonly Metadata[] | undefined): string {
  if (ms === undefined || ms.length === 0) return "";
  const one = (m: Metadata) => {
    const q = (v: string) => `"${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
    const parts: string[] = [];
    if (m.opType !== undefined) parts.push(`op_type=${q(m.opType)}`);
    if (m.opName !== undefined) parts.push(`op_name=${q(m.opName)}`);
    if (m.sourceFile !== undefined) parts.push(`source_file=${q(m.sourceFile)}`);
    if (m.sourceLine !== undefined) parts.push(`source_line=${m.sourceLine}`);
    if (m.sourceColumn !== undefined) parts.push(`source_column=${m.sourceColumn}`);
    return `{${parts.join(" ")}}`;
  };
  return ms.length === 1 ? ` metadata=${one(ms[0]!)}` : ` metadata={${ms.map(one).join(", ")}}`;
}

/** The OpSharding.Type number of a last-tile type name. */
export function lastTileTypeNumber(t: LastTileType): number {
  return SHARDING_TYPE[t];
}

/** The last-tile type name of an OpSharding.Type number, or undefined. */
export function lastTileTypeOf(n: number): LastTileType | undefined {
  return LAST_TILE_TYPES.find((t) => SHARDING_TYPE[t] === n);
}

class Reader {
  pos = 0;
  constructor(readonly text: string) {}

  ws(): void {
    while (this.pos < this.text.length && /\s/.test(this.text[this.pos]!)) this.pos++;
  }

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  eat(s: string): boolean {
    this.ws();
    if (this.text.startsWith(s, this.pos)) {
      this.pos += s.length;
      return true;
    }
    return false;
  }

  expect(s: string): void {
    if (!this.eat(s)) throw new Error(`expected '${s}' at ${this.pos}`);
  }

  int(): number {
    this.ws();
    const m = /^-?[0-9]+/.exec(this.text.slice(this.pos));
    if (!m) throw new Error(`expected an integer at ${this.pos}`);
    this.pos += m[0].length;
    return Number(m[0]);
  }

  ints(open: string, close: string): number[] {
    this.expect(open);
    const out: number[] = [];
    if (this.eat(close)) return out;
    for (;;) {
      out.push(this.int());
      if (this.eat(",")) continue;
      this.expect(close);
      return out;
    }
  }

  sharding(): Sharding {
    this.expect("{");
    this.ws();
    if (this.text[this.pos] === "{" || this.text[this.pos] === "}") {
      const elements: Sharding[] = [];
      if (!this.eat("}")) {
        for (;;) {
          elements.push(this.sharding());
          if (this.eat(",")) continue;
          this.expect("}");
          break;
        }
      }
      return { kind: "tuple", elements };
    }
    for (const k of ["replicated", "manual", "unknown"] as const) {
      if (this.eat(k)) {
        const metadata = this.metadata();
        this.expect("}");
        return metadata ? { kind: k, metadata } : { kind: k };
      }
    }
    if (this.eat("maximal")) {
      this.expect("device=");
      const device = this.int();
      const metadata = this.metadata();
      this.expect("}");
      return metadata ? { kind: "maximal", device, metadata } : { kind: "maximal", device };
    }
    this.expect("devices=");
    const dims = this.ints("[", "]");
    let s: {
      kind: "tiled";
      dims: number[];
      devices?: number[];
      iotaReshape?: number[];
      iotaTranspose?: number[];
      lastTileDimReplicate?: boolean;
      lastTileDims?: LastTileType[];
      metadata?: Metadata[];
    } = { kind: "tiled", dims };
    if (this.eat("<=")) {
      const reshape = this.ints("[", "]");
      const perm = this.eat("T") ? this.ints("(", ")") : reshape.map((_, k) => k);
      s = { ...s, iotaReshape: reshape, iotaTranspose: perm };
    } else {
      const devices: number[] = [this.int()];
      while (this.eat(",")) devices.push(this.int());
      s = { ...s, devices };
    }
    if (this.eat("last_tile_dim_replicate")) s.lastTileDimReplicate = true;
    if (this.eat("last_tile_dims=")) {
      this.expect("{");
      const types: LastTileType[] = [];
      for (;;) {
        this.ws();
        const t = LAST_TILE_TYPES.find((x) => this.text.startsWith(x, this.pos));
        if (t === undefined) throw new Error(`expected a last tile type at ${this.pos}`);
        this.pos += t.length;
        types.push(t);
        if (this.eat(",")) continue;
        this.expect("}");
        break;
      }
      s.lastTileDims = types;
    }
    const metadata = this.metadata();
    if (metadata) s.metadata = metadata;
    this.expect("}");
    return s;
  }

  /** ` metadata={op_name="a" ...}` or ` metadata={{...}, {...}}`, if there. */
  metadata(): Metadata[] | undefined {
    if (!this.eat("metadata=")) return undefined;
    this.expect("{");
    this.ws();
    if (this.text[this.pos] !== "{") return [this.metadataBody()];
    const out: Metadata[] = [];
    for (;;) {
      this.expect("{");
      out.push(this.metadataBody());
      if (this.eat(",")) continue;
      this.expect("}");
      return out;
    }
  }

  /** The fields of one OpMetadata through its `}`; an unknown field is an error. */
  private metadataBody(): Metadata {
    const m: Metadata = {};
    for (;;) {
      this.ws();
      if (this.eat("}")) return m;
      const key = /^[a-z_]+/.exec(this.text.slice(this.pos))?.[0];
      if (key === undefined) throw new Error(`expected a metadata field at ${this.pos}`);
      this.pos += key.length;
      this.expect("=");
      switch (key) {
        case "op_type":
          m.opType = this.string();
          break;
        case "op_name":
          m.opName = this.string();
          break;
        case "source_file":
          m.sourceFile = this.string();
          break;
        case "source_line":
          m.sourceLine = this.int();
          break;
        case "source_column":
          m.sourceColumn = this.int();
          break;
        default:
          throw new Error(`sharding metadata field '${key}' is not read here`);
      }
    }
  }

  /** A double-quoted string with `\\` and `\"` escapes (others are not read here). */
  private string(): string {
    this.expect('"');
    let out = "";
    for (;;) {
      const ch = this.text[this.pos++];
      if (ch === undefined) throw new Error("unterminated string");
      if (ch === '"') return out;
      if (ch === "\\") {
        const next = this.text[this.pos++];
        if (next !== '"' && next !== "\\") throw new Error(`escape \\${next} is not read here`);
        out += next;
      } else {
        out += ch;
      }
    }
  }
}
