// The part of the WebAssembly JS API the wasm backend uses. The project compiles against lib
// ES2022 without DOM, and @types/node does not declare these globals; Node 20 has them all.

declare namespace WebAssembly {
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  class Module {
    constructor(bytes: BufferSource);
    static exports(module: Module): { name: string; kind: string }[];
  }
  type ExportValue = Function | Memory;
  type Exports = Record<string, ExportValue>;
  type Imports = Record<string, Record<string, Memory | Function | number>>;
  class Instance {
    constructor(module: Module, imports?: Imports);
    readonly exports: Exports;
  }
  type BufferSource = ArrayBufferView | ArrayBuffer;
  function validate(bytes: BufferSource): boolean;
}
