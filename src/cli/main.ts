/**
 * The `webgpu-llm` command (bin/webgpu-llm.js runs the built dist/cli.js):
 *   webgpu-llm generate --model PATH_OR_URL (--prompt TEXT | --prompt-ids 1,2,3) ...
 *   webgpu-llm serve ...   (src/cli/serve.ts)
 */
import { generateCommand, GENERATE_USAGE } from './generate';
import { processIO, UsageError, type CliIO } from './io';
import { useSwiftShaderIfNoGPU } from './vulkan';

const USAGE = `usage: webgpu-llm <command> [options]
commands:
  generate   generate tokens from a prompt and print the ids and text
  serve      serve OpenAI's HTTP API for a model
  selfcheck  check that this GPU computes the model correctly (kernels and tiny models against references)
run \`webgpu-llm <command> --help\` for its options.

${GENERATE_USAGE}`;

/** `serve`: resolves once listening (a running server keeps the process alive; it stops itself on SIGINT/SIGTERM). */
async function serve(args: string[]): Promise<number | null> {
  const { serveCommand } = await import('./serve');
  const server = await serveCommand(args);
  return server === null ? 0 : null;
}

/**
 * Runs one command line; resolves to the exit status, or to null while a long-running command
 * (serve) goes on: the caller must then not exit.
 */
export async function main(argv: string[], io: CliIO = processIO): Promise<number | null> {
  const [command, ...rest] = argv;
  // Before anything loads Dawn: without a GPU, Vulkan must be pointed at SwiftShader.
  if (command === 'generate' || command === 'serve' || command === 'selfcheck') useSwiftShaderIfNoGPU();
  try {
    switch (command) {
      case 'generate':
        return await generateCommand(rest, io);
      case 'serve':
        return await serve(rest);
      case 'selfcheck':
        // Loaded on demand: it brings the fixture generator and the CPU reference.
        return await (await import('./selfcheck')).selfCheckCommand(rest, io);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.out(USAGE + '\n');
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      // serve has its own usage text (--help); the others print the whole usage.
      if (command === 'serve') io.err(`webgpu-llm ${command}: ${e.message}\nrun \`webgpu-llm ${command} --help\` for its options.\n`);
      else io.err(`webgpu-llm: ${e.message}\n\n${USAGE}\n`);
      return 2;
    }
    io.err(`webgpu-llm: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
