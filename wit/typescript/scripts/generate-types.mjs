// Generates the contract's TypeScript declarations from wit/controller.wit
// with jco's guest-types generator (the pinned jco of toolchains/js), into
// the directory given as the first argument.
//
// jco 1.35.0's `jco guest-types` command runs its WIT reader with no
// filesystem preopens, so every path is "No such file or directory"; this
// script calls the same generator (`generateGuestTypes`, what the command
// calls) after giving it the root directory. The output is what
// `jco guest-types wit/controller.wit -n controller` would write.
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const jcoTranspile = process.env.WASMCTRL_JCO_TRANSPILE
  ?? resolve(repo, "toolchains/js/node_modules/@bytecodealliance/jco-transpile");
const out = process.argv[2];
if (!out) {
  console.error("usage: generate-types.mjs OUT_DIR");
  process.exit(2);
}
const require = createRequire(resolve(jcoTranspile, "package.json"));
let shim;
try {
  shim = await import(pathToFileURL(require.resolve("@bytecodealliance/preview2-shim/filesystem")).href);
} catch (e) {
  console.error(`jco is not installed at ${jcoTranspile} (make toolchains): ${e.message}`);
  process.exit(3);
}
shim._setPreopens({ "/": "/" });
const { generateGuestTypes, writeFiles } = await import(pathToFileURL(resolve(jcoTranspile, "dist/index.js")).href);
const files = await generateGuestTypes(resolve(repo, "wit/controller.wit"), {
  worldName: "controller",
  outDir: resolve(out) + "/",
});
await writeFiles(files, false);
