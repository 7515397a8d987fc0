// Modules in forms of XLA's dialect that Kiln reads and writes (kept custom-call/dot/call
// attributes and control-predecessors, async ops, 8-bit floats, collectives, transfers, copies,
// rng, reduce-precision, ragged-dot, map, scan, ragged-all-to-all, collective-broadcast), shared
// by the text round trip (test/ir/print_parse.test.ts) and the proto round trip
// (test/ir/proto.test.ts).

export const DIALECT_FORMS: Record<string, string> = {
  xla_attrs: `
HloModule xla_attrs

%f (a: f32[2]) -> f32[2] {
  %a = f32[2]{0} parameter(0)
  ROOT %n = f32[2]{0} negate(f32[2]{0} %a)
}

%g (b: f32[2]) -> f32[2] {
  %b = f32[2]{0} parameter(0)
  ROOT %e = f32[2]{0} exponential(f32[2]{0} %b)
}

ENTRY %main (x: f32[2], y: f32[2,2]) -> (f32[2], f32[2], (f32[2], f32[2]), f32[2]) {
  %x = f32[2]{0} parameter(0)
  %y = f32[2,2]{1,0} parameter(1)
  %d = f32[2]{0} dot(f32[2,2]{1,0} %y, f32[2]{0} %x), lhs_contracting_dims={1},
      rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32
  %c = f32[2]{0} call(f32[2]{0} %d), to_apply=%f, is_composite=true,
      control-predecessors={%y}
  %cc = (f32[2]{0}, f32[2]{0}) custom-call(f32[2]{0} %x, f32[2,2]{1,0} %y),
      custom_call_target="kiln.test.pair", custom_call_has_side_effect=true,
      output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI,
      operand_layout_constraints={f32[2]{0}, f32[2,2]{0,1}}
  %fu = f32[2]{0} fusion(f32[2]{0} %x), kind=kLoop, calls=%g,
      output_to_operand_aliasing={{}: (0, {})}
  ROOT %t = (f32[2]{0}, f32[2]{0}, (f32[2]{0}, f32[2]{0}), f32[2]{0}) tuple(f32[2]{0} %d,
      f32[2]{0} %c, (f32[2]{0}, f32[2]{0}) %cc, f32[2]{0} %fu)
}
`,
  async: `
HloModule async

%wrapped (a: f32[2], b: f32[2]) -> f32[2] {
  %a = f32[2]{0} parameter(0)
  %b = f32[2]{0} parameter(1)
  ROOT %m = f32[2]{0} multiply(f32[2]{0} %a, f32[2]{0} %b)
}

ENTRY %main (x: f32[2], y: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  %y = f32[2]{0} parameter(1)
  %s = ((f32[2]{0}, f32[2]{0}), f32[2]{0}, s32[]) async-start(f32[2]{0} %x, f32[2]{0} %y),
      async_execution_thread="side", calls=%wrapped
  %u = ((f32[2]{0}, f32[2]{0}), f32[2]{0},
      s32[]) async-update(((f32[2]{0}, f32[2]{0}), f32[2]{0}, s32[]) %s),
      async_execution_thread="side", calls=%wrapped
  ROOT %d = f32[2]{0} async-done(((f32[2]{0}, f32[2]{0}), f32[2]{0}, s32[]) %u),
      async_execution_thread="side"
}
`,
  f8: `
HloModule f8

ENTRY %main (x: f32[4]) -> (f8e4m3fn[4], f8e5m2[4], f8e4m3fnuz[2], f8e5m2fnuz[2], f8e4m3b11fnuz[2],
      f8e4m3[3], f8e3m4[3]) {
  %x = f32[4]{0} parameter(0)
  %a = f8e4m3fn[4]{0} constant({0, -0, 448, nan})
  %c = f8e4m3fn[4]{0} convert(f32[4]{0} %x)
  %s = f8e4m3fn[4]{0} add(f8e4m3fn[4]{0} %a, f8e4m3fn[4]{0} %c)
  %b = f8e5m2[4]{0} constant({1.5, -inf, 57344, 0.00012})
  %d = f8e4m3fnuz[2]{0} constant({240, -0.13})
  %e = f8e5m2fnuz[2]{0} constant({57344, 1})
  %f = f8e4m3b11fnuz[2]{0} constant({30, -1})
  %g = f8e4m3[3]{0} constant({240, inf, -0.5})
  %h = f8e3m4[3]{0} constant({15.5, -inf, 0.25})
  ROOT %t = (f8e4m3fn[4]{0}, f8e5m2[4]{0}, f8e4m3fnuz[2]{0}, f8e5m2fnuz[2]{0}, f8e4m3b11fnuz[2]{0},
      f8e4m3[3]{0}, f8e3m4[3]{0}) tuple(f8e4m3fn[4]{0} %s, f8e5m2[4]{0} %b, f8e4m3fnuz[2]{0} %d,
      f8e5m2fnuz[2]{0} %e, f8e4m3b11fnuz[2]{0} %f, f8e4m3[3]{0} %g, f8e3m4[3]{0} %h)
}
`,
  collectives: `
HloModule collectives

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[8], f32[2], f32[4], f32[4], f32[4], f32[8], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %ar = f32[4]{0} all-reduce(f32[4]{0} %x), channel_id=1, replica_groups={{0,1}},
      use_global_device_ids=true, to_apply=%add
  %ag = f32[8]{0} all-gather(f32[4]{0} %x), replica_groups={{0,1}}, dimensions={0}
  %rs = f32[2]{0} reduce-scatter(f32[4]{0} %x), replica_groups={{0,1}}, dimensions={0},
      to_apply=%add
  %a2a = f32[4]{0} all-to-all(f32[4]{0} %x), replica_groups={{0,1}}, dimensions={0}
  %cp = f32[4]{0} collective-permute(f32[4]{0} %x), source_target_pairs={{0,1},{1,0}}
  %ars = f32[4]{0} all-reduce-start(f32[4]{0} %x), constrain_layout=true, to_apply=%add
  %ard = f32[4]{0} all-reduce-done(f32[4]{0} %ars)
  %ags = (f32[4]{0}, f32[8]{0}) all-gather-start(f32[4]{0} %x), dimensions={0}
  %agd = f32[8]{0} all-gather-done((f32[4]{0}, f32[8]{0}) %ags)
  %cps = (f32[4]{0}, f32[4]{0}, u32[], u32[]) collective-permute-start(f32[4]{0} %x),
      source_target_pairs={{1,0}}
  %cpd = f32[4]{0} collective-permute-done((f32[4]{0}, f32[4]{0}, u32[], u32[]) %cps)
  ROOT %t = (f32[4]{0}, f32[8]{0}, f32[2]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[8]{0},
      f32[4]{0}) tuple(f32[4]{0} %ar, f32[8]{0} %ag, f32[2]{0} %rs, f32[4]{0} %a2a, f32[4]{0} %cp,
      f32[4]{0} %ard, f32[8]{0} %agd, f32[4]{0} %cpd)
}
`,
  transfers: `
HloModule transfers

ENTRY %main (x: f32[4], s: u64[2]) -> (f32[4], token[], f32[4], (f32[2], token[]), token[], f32[4],
      f32[4], bf16[4], f32[3], (u64[2], u32[4])) {
  %x = f32[4]{0} parameter(0)
  %s = u64[2]{0} parameter(1)
  %tok = token[] after-all()
  %dep = f32[4]{0} add-dependency(f32[4]{0} %x, token[] %tok)
  %snd = (f32[4]{0}, u32[], token[]) send(f32[4]{0} %dep, token[] %tok), channel_id=1,
      is_host_transfer=true
  %sd = token[] send-done((f32[4]{0}, u32[], token[]) %snd), channel_id=1, is_host_transfer=true
  %rcv = (f32[4]{0}, u32[], token[]) recv(token[] %sd), channel_id=2
  %rd = (f32[4]{0}, token[]) recv-done((f32[4]{0}, u32[], token[]) %rcv), channel_id=2
  %rx = f32[4]{0} get-tuple-element((f32[4]{0}, token[]) %rd), index=0
  %feed = (f32[2]{0}, token[]) infeed(token[] %tok), infeed_config="cfg"
  %outf = token[] outfeed(f32[4]{0} %x, token[] %tok), outfeed_shape=f32[4]{0}, outfeed_config="out"
  %cs = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(f32[4]{0} %x), cross_program_prefetch_index=0
  %cd = f32[4]{0} copy-done((f32[4]{0}, f32[4]{0}, u32[]) %cs)
  %ob = (f32[4]{0}, token[]) opt-barrier((f32[4]{0}, token[]) %rd)
  %obx = f32[4]{0} get-tuple-element((f32[4]{0}, token[]) %ob), index=0
  %y = bf16[4]{0} convert(f32[4]{0} %x)
  %rp = bf16[4]{0} reduce-precision(bf16[4]{0} %y), exponent_bits=5, mantissa_bits=2
  %zero = f32[] constant(0)
  %one = f32[] constant(1)
  %r = f32[3]{0} rng(f32[] %zero, f32[] %one), distribution=rng_uniform
  %rbg = (u64[2]{0}, u32[4]{0}) rng-bit-generator(u64[2]{0} %s), algorithm=rng_three_fry
  ROOT %t = (f32[4]{0}, token[], f32[4]{0}, (f32[2]{0}, token[]), token[], f32[4]{0}, f32[4]{0},
      bf16[4]{0}, f32[3]{0}, (u64[2]{0}, u32[4]{0})) tuple(f32[4]{0} %dep, token[] %sd, f32[4]{0}
      %rx, (f32[2]{0}, token[]) %feed, token[] %outf, f32[4]{0} %cd, f32[4]{0} %obx, bf16[4]{0} %rp,
      f32[3]{0} %r, (u64[2]{0}, u32[4]{0}) %rbg)
}
`,
  grouped: `
HloModule grouped

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%step (x: f32[], c: f32[]) -> (f32[], f32[]) {
  %x = f32[] parameter(0)
  %c = f32[] parameter(1)
  %n = f32[] add(f32[] %x, f32[] %c)
  ROOT %t = (f32[], f32[]) tuple(f32[] %n, f32[] %n)
}

ENTRY %e (l: f32[11,5], r: f32[3,5,7], g: s32[3], v: f32[4], o: f32[6], off: s32[2]) -> (f32[11,7],
      f32[4], (f32[4], f32[]), (f32[4], f32[]), f32[6], f32[4]) {
  %l = f32[11,5] parameter(0)
  %r = f32[3,5,7] parameter(1)
  %g = s32[3] parameter(2)
  %rd = f32[11,7] ragged-dot(f32[11,5] %l, f32[3,5,7] %r, s32[3] %g), lhs_contracting_dims={1},
      rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
  %v = f32[4] parameter(3)
  %z = f32[] constant(0)
  %m = f32[4] map(f32[4] %v, f32[4] %v), dimensions={0}, to_apply=%add
  %sc = (f32[4], f32[]) scan(f32[4] %v, f32[] %z), dimensions={0}, num_carries=1,
      is_associative=true, to_apply=%step
  %sr = (f32[4], f32[]) scan(f32[4] %v, f32[] %z), dimensions={0}, num_carries=1, is_reverse=true,
      is_associative=false, to_apply=%step
  %o = f32[6] parameter(4)
  %off = s32[2] parameter(5)
  %ra = f32[6] ragged-all-to-all(f32[4] %v, f32[6] %o, s32[2] %off, s32[2] %off, s32[2] %off, s32[2]
      %off), replica_groups={{0,1}}
  %cb = f32[4] collective-broadcast(f32[4] %v), channel_id=2, replica_groups={{0,1}}
  ROOT %t.1 = (f32[11,7], f32[4], (f32[4], f32[]), (f32[4], f32[]), f32[6], f32[4]) tuple(f32[11,7]
      %rd, f32[4] %m, (f32[4], f32[]) %sc, (f32[4], f32[]) %sr, f32[6] %ra, f32[4] %cb)
}
`,
  custom_called: `
HloModule custom_called

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
      output_to_operand_aliasing={{}: (0, {})}, called_computations={%host, %gt}
  ROOT %t = ((f32[8,4], s32[8,4]), f32[2,2]) tuple((f32[8,4], s32[8,4]) %topk, f32[2,2] %h)
}
`,
};
