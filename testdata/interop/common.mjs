// What both interop clients share: the command line (the agent binary and
// the session's directory), console warnings and errors collected as
// problems, check, and the agent started on pipes.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

export const [binary, cwd] = process.argv.slice(2);

// problems collects what the SDK logs: a message it parses differently
// from shellagent's intent usually shows here first.
export const problems = [];
for (const level of ["error", "warn"]) {
  const orig = console[level];
  console[level] = (...args) => {
    problems.push(`console.${level}: ${args.map(String).join(" ")}`);
    orig(...args);
  };
}

export function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

// startAgent starts the agent (with /bin/sh as its shell, unless args say
// otherwise) and returns the process and its stdin and stdout as the web
// streams ndJsonStream takes. Its stderr is the script's, or child.stderr
// with stderr "pipe".
export function startAgent(args = ["--shell", "/bin/sh"], stderr = "inherit") {
  const child = spawn(binary, args, { stdio: ["pipe", "pipe", stderr] });
  return { child, input: Writable.toWeb(child.stdin), output: Readable.toWeb(child.stdout) };
}
