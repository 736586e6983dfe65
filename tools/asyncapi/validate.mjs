#!/usr/bin/env node
// Validates an AsyncAPI document with the AsyncAPI project's own parser (@asyncapi/parser).
//
// Usage: node tools/asyncapi/validate.mjs FILE   (FILE may be "-" for standard input)
//
// Prints every diagnostic as "severity path: message" and exits
//   0  the document parsed and no diagnostic is an error or a warning,
//   1  it is invalid (an error) or has warnings (the AsyncAPI rulesets' advice),
//   2  bad usage or unreadable input.
// Warnings fail too: the generated document is meant to be clean, not merely parseable.

import { readFileSync } from "node:fs";
import { Parser, DiagnosticSeverity } from "@asyncapi/parser";

const SEVERITY = {
  [DiagnosticSeverity.Error]: "error",
  [DiagnosticSeverity.Warning]: "warning",
  [DiagnosticSeverity.Information]: "info",
  [DiagnosticSeverity.Hint]: "hint",
};

async function main(argv) {
  if (argv.length !== 1) {
    process.stderr.write("usage: node validate.mjs FILE|-\n");
    return 2;
  }
  const source = argv[0];
  let text;
  try {
    text = readFileSync(source === "-" ? 0 : source, "utf8");
  } catch (err) {
    process.stderr.write(`cannot read ${source}: ${err.message}\n`);
    return 2;
  }
  const parser = new Parser();
  const { document, diagnostics } = await parser.parse(text, {
    source: source === "-" ? undefined : source,
  });
  let failed = document === undefined;
  for (const d of diagnostics) {
    const severity = SEVERITY[d.severity] ?? String(d.severity);
    if (d.severity === DiagnosticSeverity.Error || d.severity === DiagnosticSeverity.Warning) {
      failed = true;
    }
    const path = d.path && d.path.length ? d.path.join(".") : "(root)";
    process.stdout.write(`${severity} ${d.code} ${path}: ${d.message}\n`);
  }
  if (failed) {
    process.stdout.write(`INVALID: ${source}\n`);
    return 1;
  }
  const version = document.version();
  process.stdout.write(`valid AsyncAPI ${version}: ${source}\n`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
