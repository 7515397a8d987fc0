// The browser build's passes/dump_fs.ts: there is no file system to dump into.

export function writeDumpFile(dir: string, file: string): void {
  throw new Error(
    `pipeline dumpDir ${dir} (${file}): the browser build writes no files; the IR text is ` +
      `printHlo(module), and explain() shows the program`,
  );
}
