// XLA's instruction sharding (`sharding={devices=[2,2]<=[4]}`): Kiln computes nothing from it,
// but keeps it, prints it and writes it to the proto's OpSharding. The forms read into a
// structure (and so written to the proto) are XLA's classic ones: replicated, manual, unknown,
// maximal device=N, tiled device lists (`devices=[2,2]0,1,2,3`) and iota tile assignments
// (`devices=[2,2]<=[2,2]T(1,0)`), with last_tile_dim_replicate or last_tile_dims={...}, and
// tuples of them. Any other form (named meshes, shard groups, sharding metadata) is kept as its
// text and printed back; writing it to a proto is a ProtoError naming it, never a silent drop.

/** OpSharding.Type values. */
export const SHARDING_TYPE = {
  replicated: 0,
  maximal: 1,
  tuple: 2,
  other: 3,
  manual: 4,
  unknown: 5,
} as const;

export type Sharding =
  | { readonly kind: "replicated" | "manual" | "unknown" }
  | { readonly kind: "maximal"; readonly device: number }
  | { readonly kind: "tuple"; readonly elements: readonly Sharding[] }
  | {
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
    };

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
      return `{${s.kind}}`;
    case "maximal":
      return `{maximal device=${s.device}}`;
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
      return `${t}}`;
    }
    default: {
      const never: never = s;
      throw new Error(`unknown sharding ${String(never)}`);
    }
  }
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
        this.expect("}");
        return { kind: k };
      }
    }
    if (this.eat("maximal")) {
      this.expect("device=");
      const device = this.int();
      this.expect("}");
      return { kind: "maximal", device };
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
    this.expect("}");
    return s;
  }
}
