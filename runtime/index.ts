// The runtime's entry: importing it registers the built-in backends.

import "./interpreter.ts";

export {
  type Backend,
  type Executable,
  UnsupportedError,
  backendNames,
  getBackend,
  registerBackend,
  single,
} from "./backend.ts";
export { interpreterBackend } from "./interpreter.ts";
export {
  ProgramCache,
  defaultProgramCache,
  setDefaultProgramCache,
  type CacheStats,
} from "./cache.ts";
