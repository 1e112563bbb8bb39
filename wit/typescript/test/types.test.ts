// The committed contract declarations (generated/) are what jco's
// guest-types generator makes of wit/controller.wit today: a WIT change
// without `npm run generate` fails here. Needs the pinned jco
// (toolchains/js, `make toolchains`); without it the check is skipped,
// except under CI, where a missing tool fails.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const jco = join(root, "../../toolchains/js/node_modules/@bytecodealliance/jco-transpile/package.json");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
  );
}

test("the committed contract types are jco guest-types' output for wit/controller.wit", (t) => {
  if (!existsSync(jco)) {
    assert.ok(!process.env.CI, `jco is not installed (${jco}): run make toolchains`);
    t.skip("jco is not installed (make toolchains)");
    return;
  }
  const out = mkdtempSync(join(tmpdir(), "wasmctrl-types-"));
  try {
    execFileSync(process.execPath, [join(root, "scripts/generate-types.mjs"), out], { stdio: "pipe" });
    const committed = join(root, "generated");
    const names = (dir: string) => files(dir).map((f) => relative(dir, f)).sort();
    assert.deepEqual(names(out), names(committed));
    for (const name of names(committed)) {
      assert.equal(
        readFileSync(join(out, name), "utf8"),
        readFileSync(join(committed, name), "utf8"),
        `generated/${name} is stale: run npm run generate in wit/typescript`,
      );
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
