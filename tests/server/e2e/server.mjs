// Starts `tangram serve` for an end-to-end test and stops it.
//
//   const server = await startServer(['--api-key', 'secret']);
//   ... server.url ...   // "http://127.0.0.1:PORT"
//   await server.stop();
//
// The binary is $TANGRAM_BIN and the model $TANGRAM_MODEL (both required). The server listens on a
// free port (--port 0) and announces it on stdout as "listening on http://127.0.0.1:PORT".
// Set TANGRAM_E2E_VERBOSE=1 to see the server's output.
import { spawn } from 'node:child_process';

const START_TIMEOUT_MS = 120_000;
// The binary runs under AddressSanitizer (scripts/test.sh sets this): memory figures mean nothing.
export const SANITIZED = Boolean(process.env.TANGRAM_E2E_SANITIZED);
const STOP_TIMEOUT_MS = 15_000;  // then SIGKILL, so that a hung server cannot hang the tests
const LISTENING = /listening on (http:\/\/127\.0\.0\.1:(\d+))/;

function requiredEnv(name) {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (the e2e tests need TANGRAM_BIN and TANGRAM_MODEL)`);
  return value;
}

export function startServer(extraArgs = []) {
  const bin = requiredEnv('TANGRAM_BIN');
  const model = requiredEnv('TANGRAM_MODEL');
  const args = ['serve', '-m', model, '--port', '0', ...extraArgs];
  const verbose = Boolean(process.env.TANGRAM_E2E_VERBOSE);
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let output = '';  // the last of stdout and stderr, for the error message of a failed start
  let log = '';     // stderr (the server's log), up to 4 MB, for tests that read it
  const keep = (text) => {
    output = (output + text).slice(-4000);
    if (verbose) process.stderr.write(text);
  };
  child.stderr.setEncoding('latin1').on('data', (text) => {
    if (log.length < (4 << 20)) log += text;
    keep(text);
  });

  return new Promise((resolve, reject) => {
    let stdoutLine = '';
    let started = false;
    const fail = (why) => {
      if (started) return;
      started = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${bin} ${args.join(' ')}: ${why}\n--- server output ---\n${output}`));
    };
    const timer = setTimeout(() => fail(`no "listening on" line within ${START_TIMEOUT_MS / 1000} s`),
                             START_TIMEOUT_MS);
    child.once('error', (e) => fail(`cannot start: ${e.message}`));
    exited.then(({ code, signal }) => fail(`exited (code ${code}, signal ${signal}) before listening`));
    // Stdout is read to the end (not only to the "listening" line) so that the pipe never fills.
    child.stdout.setEncoding('utf8').on('data', (text) => {
      keep(text);
      if (started) return;
      stdoutLine += text;
      const match = LISTENING.exec(stdoutLine);
      if (!match) return;
      started = true;
      clearTimeout(timer);
      const port = Number(match[2]);
      resolve({
        url: match[1],
        port,
        pid: child.pid,
        log: () => log,
        // kill -9: no chance to clean up (crash tests).
        async kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          return exited;
        },
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return exited;
          child.kill('SIGTERM');
          const killer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
          const result = await exited;
          clearTimeout(killer);
          return result;
        },
      });
    });
  });
}
