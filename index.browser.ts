// Kiln's browser entry (`npm run build:browser` bundles it into dist/browser/kiln.js): what
// index.ts exports, plus the model zoo, safetensors from bytes and the runtime's controls a page
// needs, in one ES module with no Node import. scripts/build_browser.ts swaps each module that
// has a `.browser.ts` sibling for it (no disk cache, no native backend, a JavaScript SHA-256, the
// source analysis in this thread); docs/runtime.md ("The browser build") says what differs.

// index.ts first: the model files import Kiln through it (models/README.md), so it must be
// evaluated before them.
export * from "./index.ts";
import { nn } from "./index.ts";
import { markLibraryCode } from "./compiler/library_code.ts";
import * as models from "./models/index.ts";

export { models };
export {
  backendNames,
  defaultProgramCache,
  getBackend,
  ProgramCache,
  setDefaultProgramCache,
} from "./runtime/index.ts";
export { analysisHost } from "./compiler/analyze.ts";
export { kilnEnv } from "./util/process.browser.ts";

// Kiln's own classes are analysed from their bundled text here (there is no file to find):
// their free variables are the library's imports and constants, so compile() need not read them
// (it cannot here: there is no node:inspector). test/browser/library.test.ts checks that claim
// against the Node analysis of the original files, class by class.
markLibraryCode(nn.Module, [nn, ...Object.values(models).filter((m) => typeof m === "object")]);
