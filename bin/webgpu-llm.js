#!/usr/bin/env node
// The `webgpu-llm` command. The CLI is part of the library build (dist/cli.js, from src/cli/main.ts),
// made by `npm run build` or, in a checkout, by `npm install` (the `prepare` script).
let cli;
try {
  cli = await import('../dist/cli.js');
} catch (e) {
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !String(e.message).includes('dist/cli.js')) throw e;
  console.error('webgpu-llm: dist/cli.js is missing; build it with `npm run build`.');
  process.exit(1);
}
const code = await cli.main(process.argv.slice(2));
// null: a server is running (it exits on SIGINT/SIGTERM). Otherwise Dawn can keep the event loop
// alive after the device is gone: flush, then exit.
if (code !== null) {
  await new Promise((done) => process.stdout.write('', done));
  process.exit(code);
}
