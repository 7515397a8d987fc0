// Modules in forms of XLA's dialect that Kiln's printer does not write itself (written here, not
// taken from XLA): tiled and memory-space layouts, inferred result shapes, nested instructions,
// a scalar broadcast without dimensions=, shardings and frontend attributes, bitcast, replica
// and partition ids, tokens, collectives, custom-call / dot / call attributes, async calls,
// 8-bit floats, transfers (send/recv, infeed/outfeed), copies, rng, reduce-precision, ragged-dot,
// map, scan, ragged-all-to-all, collective-broadcast.
// test/xla/xla.test.ts checks XLA loads what Kiln makes of each and that XLA's
// own print and proto of it read back into the same module.

export const XLA_DIALECT_MODULES: Record<string, string> = {
  layouts: `HloModule layouts

ENTRY e {
  p = f32[8,4,1]{0,1,2:T(4,128)} parameter(0)
  s = u32[]{:S(2)} constant(3)
  c = f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)} copy(p)
  ROOT t = (f32[8,4,1]{1,2,0:T(1,128)(2,1)E(32)S(1)}, u32[]{:S(2)}) tuple(c, s)
}
`,
  inferred_nested: `HloModule inferred_nested:

ENTRY e {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  b = f32[2,3] broadcast(z)
  t = transpose(p), dimensions={1,0}
  m = maximum(p, b)
  ROOT r = tuple(f32[3,2] negate(t), add(exponential(m), p))
}
`,
  sharding: `HloModule sharding

ENTRY e {
  p = f32[4,4] parameter(0), sharding={devices=[2,2]0,1,2,3}
  a = f32[4,4] negate(p), sharding={replicated}
  b = f32[4,4] negate(a), sharding={maximal device=3}
  c = f32[4,4] negate(b), sharding={devices=[2,2]<=[2,2]T(1,0)}
  d = f32[4,4] negate(c), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
  e = f32[4,4] negate(d), sharding={devices=[2,2,2]<=[8] last_tile_dims={manual}}
  f = f32[4,4] negate(e), frontend_attributes={_xla_x="1",attr="{n = 1 : i32}"}
  g = f32[4,4] negate(f), sharding={devices=[2,2]0,1,2,3 metadata={op_name="a" source_line=3}}
  h = f32[4,4] negate(g), sharding={replicated metadata={{op_name="b"}, {op_type="x\\"y"}}}
  ROOT t = (f32[4,4], f32[4,4], f32[4,4]) tuple(a, c, f),
    sharding={{replicated}, {maximal device=1}, {unknown}}
}
`,
  bitcast: `HloModule bitcast

ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  t = f32[3,2]{0,1} bitcast(p)
  ROOT r = f32[6]{0} bitcast(t)
}
`,
  ids: `HloModule ids

ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}
`,
  collectives: `HloModule collectives, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[4] parameter(0)
  ar = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add
  ag = f32[8] all-gather(x), replica_groups=[1,2]<=[2], dimensions={0}
  rs = f32[2] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add
  a2a = f32[4] all-to-all(x), replica_groups={{0,1}}, dimensions={0}
  cp = f32[4] collective-permute(x), source_target_pairs={{0,1},{1,0}}
  ars = f32[4] all-reduce-start(x), replica_groups={{0,1}}, to_apply=add
  ard = f32[4] all-reduce-done(ars)
  ags = (f32[4], f32[8]) all-gather-start(x), replica_groups={{0,1}}, dimensions={0}
  agd = f32[8] all-gather-done(ags)
  cps = (f32[4], f32[4]) collective-permute-start(x), source_target_pairs={{1,0}}
  cpd = f32[4] collective-permute-done(cps)
  ROOT t = (f32[4], f32[8], f32[2], f32[4], f32[4], f32[4], f32[8], f32[4])
    tuple(ar, ag, rs, a2a, cp, ard, agd, cpd)
}
`,
  attributes: `HloModule attributes

neg {
  a = f32[2] parameter(0)
  ROOT n = f32[2] negate(a)
}

ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2,2] parameter(1)
  d = f32[2] dot(y, x), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    algorithm=dot_f32_f32_f32
  c = f32[2] call(d), to_apply=neg, is_composite=true,
    frontend_attributes={composite.name="kiln.neg",composite.attributes={},composite.version="0"}
  cc = (f32[2], f32[2]) custom-call(x, y), custom_call_target="kiln.pair",
    custom_call_has_side_effect=true, output_to_operand_aliasing={{0}: (0, {})},
    api_version=API_VERSION_TYPED_FFI, operand_layout_constraints={f32[2], f32[2,2]{0,1}}
  ROOT t = (f32[2], f32[2], (f32[2], f32[2])) tuple(d, c, cc)
}
`,
  async: `HloModule async

wrapped {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT m = f32[2] multiply(a, b)
}

ENTRY e {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  s = ((f32[2], f32[2]), f32[2], s32[]) async-start(x, y), calls=wrapped
  u = ((f32[2], f32[2]), f32[2], s32[]) async-update(s)
  ROOT d = f32[2] async-done(u)
}
`,
  f8: `HloModule f8

ENTRY e {
  x = f32[4] parameter(0)
  a = f8e4m3fn[4] constant({0, -0, 448, nan})
  c = f8e4m3fn[4] convert(x)
  s = f8e4m3fn[4] add(a, c)
  b = f8e5m2[3] constant({1.5, -inf, 57344})
  d = f8e4m3fnuz[2] constant({240, -0.125})
  e = f8e5m2fnuz[2] constant({57344, 1})
  f = f8e4m3b11fnuz[2] constant({30, -1})
  g = f8e4m3[2] constant({240, inf})
  h = f8e3m4[2] constant({15.5, 0.25})
  ROOT t = (f8e4m3fn[4], f8e5m2[3], f8e4m3fnuz[2], f8e5m2fnuz[2], f8e4m3b11fnuz[2], f8e4m3[2],
    f8e3m4[2]) tuple(s, b, d, e, f, g, h)
}
`,
  tokens: `HloModule tokens

ENTRY e {
  p = token[] parameter(0)
  a = token[] after-all()
  ROOT b = token[] after-all(p, a)
}
`,
  transfers: `HloModule transfers

ENTRY e {
  x = f32[4] parameter(0)
  s = u64[2] parameter(1)
  tok = token[] after-all()
  dep = f32[4] add-dependency(x, tok)
  snd = (f32[4], u32[], token[]) send(dep, tok), channel_id=1, is_host_transfer=true
  sd = token[] send-done(snd), channel_id=1, is_host_transfer=true
  rcv = (f32[4], u32[], token[]) recv(sd), channel_id=2
  rd = (f32[4], token[]) recv-done(rcv), channel_id=2
  rx = f32[4] get-tuple-element(rd), index=0
  feed = (f32[2], token[]) infeed(tok), infeed_config="cfg"
  outf = token[] outfeed(x, tok), outfeed_config="out"
  cs = (f32[4], f32[4], u32[]) copy-start(x), cross_program_prefetch_index=0
  cd = f32[4] copy-done(cs)
  ob = (f32[4], token[]) opt-barrier(rd)
  obx = f32[4] get-tuple-element(ob), index=0
  y = bf16[4] convert(x)
  rp = bf16[4] reduce-precision(y), exponent_bits=5, mantissa_bits=2
  zero = f32[] constant(0)
  one = f32[] constant(1)
  r = f32[3] rng(zero, one), distribution=rng_normal
  rbg = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_philox
  ROOT t = (f32[4], token[], f32[4], (f32[2], token[]), token[], f32[4], f32[4], bf16[4], f32[3],
    (u64[2], u32[4])) tuple(dep, sd, rx, feed, outf, cd, obx, rp, r, rbg)
}
`,
  grouped: `HloModule grouped

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

step {
  x = f32[] parameter(0)
  c = f32[] parameter(1)
  n = f32[] add(x, c)
  ROOT t = (f32[], f32[]) tuple(n, n)
}

ENTRY e {
  l = f32[11,5] parameter(0)
  r = f32[3,5,7] parameter(1)
  g = s32[3] parameter(2)
  rd = f32[11,7] ragged-dot(l, r, g), lhs_contracting_dims={1}, rhs_contracting_dims={1},
    lhs_ragged_dims={0}, rhs_group_dims={0}
  v = f32[4] parameter(3)
  z = f32[] constant(0)
  m = f32[4] map(v, v), dimensions={0}, to_apply=add
  sc = (f32[4], f32[]) scan(v, z), dimensions={0}, num_carries=1, is_associative=true, to_apply=step
  sr = (f32[4], f32[]) scan(v, z), dimensions={0}, num_carries=1, is_reverse=true,
    is_associative=false, to_apply=step
  o = f32[6] parameter(4)
  off = s32[2] parameter(5)
  ra = f32[6] ragged-all-to-all(v, o, off, off, off, off), replica_groups={{0,1}}
  cb = f32[4] collective-broadcast(v), replica_groups={{0,1}}, channel_id=2
  ROOT t = (f32[11,7], f32[4], (f32[4], f32[]), (f32[4], f32[]), f32[6], f32[4])
    tuple(rd, m, sc, sr, ra, cb)
}
`,
  custom_called: `HloModule custom_called

%gt (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = pred[] compare(f32[] %a, f32[] %b), direction=GT
}

%host (p: f32[2,2]) -> f32[2,2] {
  %p = f32[2,2] parameter(0)
  ROOT %n = f32[2,2] negate(f32[2,2] %p)
}

ENTRY %main (x: f32[8,64], y: f32[2,2]) -> ((f32[8,4], s32[8,4]), f32[2,2]) {
  %x = f32[8,64] parameter(0)
  %y = f32[2,2] parameter(1)
  %topk = (f32[8,4], s32[8,4]) custom-call(f32[8,64] %x), custom_call_target="TopK",
      called_computations={%gt}
  %h = f32[2,2] custom-call(f32[2,2] %y), custom_call_target="HostExecute",
      called_computations={%host, %gt}, output_to_operand_aliasing={{}: (0, {})}
  ROOT %t = ((f32[8,4], s32[8,4]), f32[2,2]) tuple((f32[8,4], s32[8,4]) %topk, f32[2,2] %h)
}
`,
};
