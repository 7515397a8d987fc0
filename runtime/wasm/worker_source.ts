// The wasm backend's worker thread, as JavaScript source (a string, so the same text runs from
// the TypeScript sources under tsx/vitest, where Node 20 gives a worker no .ts loader, from
// dist/, and in a browser's Web Worker made from a Blob). Platform-neutral: the host
// (pool_node.ts in Node, a browser build's WebWorkerHost) wraps it with a prelude that calls
//
//   kilnWasmWorker(init, onMessage, onExit)
//
// with `init` = { ctl: SharedArrayBuffer, text: SharedArrayBuffer, index, spinUs, seq },
// `onMessage(handler)` registering the handler of messages the main thread posts to this
// worker, and `onExit(handler)` (optional) registering a function run as the worker exits.
//
// The protocol (threads.ts is the main thread's half; the offsets are CTL there): the worker
// waits on ctl[SEQ] (spinning spinUs microseconds, then Atomics.wait in one-second slices);
// each new step it reads CMD, and when its thread index (index + 1; the main thread is 0) is
// below ctl[NT] it runs its row of calls — ncalls, then (function index, arg count, args...)
// per call, into the functions of the instance of executable ctl[EXE] — then decrements
// ctl[PENDING] and notifies the main thread when it reached 0. A MAIL step makes it return to
// its event loop until it has received executable ctl[EXE] (a message { exe, module, memory }
// it instantiates once against the shared memory; { drop } forgets one). A STOP step ends it.
// Any exception in a call (a wasm trap, a missing executable) is written into `text` (UTF-8,
// the first error wins by compareExchange on ctl[ERR]) before the decrement, so the main thread
// throws it instead of waiting; an exit marks the worker dead (ctl[STATE + index] = 3). A
// message { exe, fault: "throw" | "exit" } (a test seam) makes every step of that executable
// throw or exit in this worker.

/** The worker's code: defines `kilnWasmWorker` (see the file comment). */
export const WASM_WORKER_CORE = String.raw`
function kilnWasmWorker(init, onMessage, onExit) {
  "use strict";
  const SEQ = 0, CMD = 1, PENDING = 2, ERR = 3, NT = 4, EXE = 5, NEXT = 6, NPARTS = 7;
  const SLEEPERS = 8, MAIN_SLEEPING = 9;
  const STATE = 64, SEEN = 640, ROWS = 1216, ROW_INTS = 128;
  const CMD_CALL = 1, CMD_MAIL = 2, CMD_STOP = 3;
  const ctl = new Int32Array(init.ctl);
  const text = new Uint8Array(init.text);
  const me = init.index;
  const tid = me + 1;
  const spinMs = Math.max(0, init.spinUs) / 1000;
  const exes = new Map();
  let seen = init.seq;
  let awaiting = -1;
  const now = typeof performance === "object" ? () => performance.now() : () => Date.now();

  function fail(e) {
    const msg = String(e && e.stack ? e.stack : e).slice(0, 3000);
    if (Atomics.compareExchange(ctl, ERR, 0, tid) === 0) {
      const bytes = new TextEncoder().encode(msg);
      const n = Math.min(bytes.length, text.length - 4);
      new DataView(text.buffer).setInt32(0, n, true);
      for (let i = 0; i < n; i++) text[4 + i] = bytes[i];
    }
  }
  function done() {
    // The main thread is woken only when it sleeps (it says so before it waits).
    if (Atomics.sub(ctl, PENDING, 1) === 1 && Atomics.load(ctl, MAIN_SLEEPING) !== 0) {
      Atomics.notify(ctl, PENDING);
    }
  }
  const argBufs = [];
  function runParts() {
    const exe = exes.get(Atomics.load(ctl, EXE));
    if (exe === undefined) throw new Error("wasm worker " + tid + ": executable " + ctl[EXE] + " was never sent");
    if (exe.fault === "throw") throw new Error("injected worker fault");
    if (exe.fault === "exit") { if (typeof process === "object") process.exit(1); else self.close(); }
    const parts = Atomics.load(ctl, NPARTS);
    for (;;) {
      const p = Atomics.add(ctl, NEXT, 1);
      if (p >= parts) return;
      runPart(exe, ROWS + p * ROW_INTS);
    }
  }
  function runPart(exe, row) {
    let at = row;
    const n = ctl[at++];
    for (let c = 0; c < n; c++) {
      const fn = exe[ctl[at++]];
      const nargs = ctl[at++];
      if (typeof fn !== "function") throw new Error("wasm worker " + tid + ": no function " + ctl[at - 2]);
      const args = argBufs[nargs] || (argBufs[nargs] = new Array(nargs));
      for (let j = 0; j < nargs; j++) args[j] = ctl[at++];
      fn.apply(null, args);
    }
  }
  function waitStep() {
    let spun = 0;
    const until = now() + spinMs;
    for (;;) {
      if (Atomics.load(ctl, SEQ) !== seen) return;
      if (spun < 1e9 && (++spun & 63) === 0 && now() > until) spun = 1e9;
      if (spun >= 1e9) {
        // Counted as a sleeper so the main thread notifies only when someone sleeps.
        Atomics.add(ctl, SLEEPERS, 1);
        if (Atomics.load(ctl, SEQ) === seen) Atomics.wait(ctl, SEQ, seen, 1000);
        Atomics.sub(ctl, SLEEPERS, 1);
      }
    }
  }
  function loop() {
    for (;;) {
      Atomics.store(ctl, STATE + me, 1);
      waitStep();
      seen = Atomics.load(ctl, SEQ);
      const cmd = Atomics.load(ctl, CMD);
      if (cmd === CMD_STOP) return;
      if (tid >= Atomics.load(ctl, NT)) continue;
      Atomics.store(ctl, SEEN + me, seen);
      Atomics.store(ctl, STATE + me, 2);
      if (cmd === CMD_MAIL) {
        const id = Atomics.load(ctl, EXE);
        if (exes.has(id)) { done(); continue; }
        awaiting = id;
        Atomics.store(ctl, STATE + me, 4);
        return; // to the event loop: the message is there
      }
      try {
        if (cmd !== CMD_CALL) throw new Error("wasm worker " + tid + ": unknown command " + cmd);
        runParts();
      } catch (e) {
        fail(e);
      }
      done();
    }
  }
  onMessage((m) => {
    try {
      if (m && m.drop !== undefined) { exes.delete(m.drop); return; }
      if (m && m.fault !== undefined) exes.set(m.exe, { fault: m.fault });
      else {
        const inst = new WebAssembly.Instance(m.module, { env: { memory: m.memory } });
        const fns = WebAssembly.Module.exports(m.module)
          .filter((e) => e.kind === "function").map((e) => inst.exports[e.name]);
        exes.set(m.exe, fns);
      }
    } catch (e) {
      fail(e);
      exes.set(m.exe, []);
    }
    if (m.exe === awaiting) {
      awaiting = -1;
      done();
      loop();
    }
  });
  if (onExit) onExit(() => {
    Atomics.store(ctl, STATE + me, 3);
    Atomics.notify(ctl, PENDING);
  });
  loop();
}
`;
