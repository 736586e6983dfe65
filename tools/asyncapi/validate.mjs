#!/usr/bin/env node
// Validates an AsyncAPI document with the AsyncAPI project's own parser (@asyncapi/parser).
//
// Usage: node tools/asyncapi/validate.mjs FILE   (FILE may be "-" for standard input)
//
// Prints every diagnostic as "severity code path: message" and exits
//   0  the document parsed and no diagnostic is an error or a warning,
//   1  it is invalid (an error), has warnings (the AsyncAPI rulesets' advice), or a message
//      example does not match its message's payload or headers schema,
//   2  bad usage or unreadable input.
// Warnings fail too: the generated document is meant to be clean, not merely parseable. The
// parser does not check examples against their schemas, so this script does, with ajv (the
// JSON Schema validator the parser itself uses).

import { readFileSync } from "node:fs";
import { Parser, DiagnosticSeverity } from "@asyncapi/parser";
import Ajv from "ajv";
import addFormats from "ajv-formats";

const SEVERITY = {
  [DiagnosticSeverity.Error]: "error",
  [DiagnosticSeverity.Warning]: "warning",
  [DiagnosticSeverity.Information]: "info",
  [DiagnosticSeverity.Hint]: "hint",
};

// Problems of each message example against the message's (dereferenced) schemas.
function checkExamples(document) {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  const problems = [];
  let checked = 0;
  for (const message of document.allMessages()) {
    for (const [i, example] of message.examples().all().entries()) {
      const parts = [
        ["payload", message.payload(), example.payload()],
        ["headers", message.headers(), example.headers()],
      ];
      for (const [part, schema, value] of parts) {
        if (schema === undefined || value === undefined) continue;
        checked += 1;
        const check = ajv.compile(schema.json());
        if (!check(value)) {
          for (const e of check.errors) {
            const where = `messages.${message.id()}.examples.${i}.${part}${e.instancePath}`;
            problems.push(`${where}: ${e.message}`);
          }
        }
      }
    }
  }
  return { checked, problems };
}

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
  let checked = 0;
  if (document !== undefined) {
    const examples = checkExamples(document);
    checked = examples.checked;
    for (const problem of examples.problems) {
      failed = true;
      process.stdout.write(`error example-mismatch ${problem}\n`);
    }
  }
  if (failed) {
    process.stdout.write(`INVALID: ${source}\n`);
    return 1;
  }
  const version = document.version();
  process.stdout.write(
    `valid AsyncAPI ${version} (${checked} example parts match their schemas): ${source}\n`,
  );
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
