// Drives a shellagent binary with the official ACP TypeScript SDK's v1
// client (the default entry of @agentclientprotocol/sdk), advertising
// clientCapabilities._meta.terminal_output as Zed does, and checks the
// _meta terminal flow: terminal_info on the tool_call, terminal_output
// strings that reassemble byte for byte into what the command wrote,
// terminal_exit; then session/load on the same connection, as an editor
// that restores the thread, which gets every terminal back from nothing.
// usage: node v1.mjs /path/to/shellagent /absolute/cwd
//
// Prints one JSON summary line; exits non-zero on the first failed check.
import * as acp from "@agentclientprotocol/sdk";
import { check, cwd, problems, startAgent } from "./common.mjs";

const { child, input: agentIn, output: agentOut } = startAgent();
const stream = acp.ndJsonStream(agentIn, agentOut);
const app = acp.client({ name: "shellagent-interop-v1" });

// The terminals as a client that renders them keeps them, with the rules
// Zed relies on checked as updates arrive.
const terminals = new Map(); // terminal_id → { call, cwd, data, chunks, exit }
const calls = new Map(); // toolCallId → last status
function apply(u) {
  if (u.sessionUpdate !== "tool_call" && u.sessionUpdate !== "tool_call_update") return;
  if (u.sessionUpdate === "tool_call_update") check(calls.has(u.toolCallId), `update of unknown ${u.toolCallId}`);
  if (u.status) calls.set(u.toolCallId, u.status);
  else if (!calls.has(u.toolCallId)) calls.set(u.toolCallId, "pending");
  const meta = u._meta ?? {};
  if (meta.terminal_info) {
    // A terminal_info starts the terminal (over), as Zed does.
    check(u.sessionUpdate === "tool_call", "terminal_info only on a tool_call");
    terminals.set(meta.terminal_info.terminal_id, { call: u.toolCallId, cwd: meta.terminal_info.cwd, data: "", chunks: 0, exit: null });
  }
  for (const c of u.content ?? []) {
    if (c.type === "terminal") check(terminals.has(c.terminalId), `content references unknown ${c.terminalId}`);
  }
  if (meta.terminal_output) {
    const t = terminals.get(meta.terminal_output.terminal_id);
    check(t && !t.exit && t.call === u.toolCallId, `terminal_output for ${meta.terminal_output.terminal_id}`);
    check(typeof meta.terminal_output.data === "string", "terminal_output data is a string");
    check(!meta.terminal_output.data.includes("\uFFFD"), `U+FFFD in ${JSON.stringify(meta.terminal_output.data)}`);
    t.data += meta.terminal_output.data;
    t.chunks++;
  }
  if (meta.terminal_exit) {
    const t = terminals.get(meta.terminal_exit.terminal_id);
    check(t && !t.exit && t.call === u.toolCallId, `terminal_exit for ${meta.terminal_exit.terminal_id}`);
    t.exit = meta.terminal_exit;
  }
}

// next reads updates until pred matches one (or the turn's stop), applying
// each.
async function next(session, what, pred) {
  const deadline = Date.now() + 20000;
  for (;;) {
    check(Date.now() < deadline, `timed out waiting for ${what}`);
    let timer;
    const msg = await Promise.race([
      session.nextUpdate(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 20000);
      }),
    ]).finally(() => clearTimeout(timer));
    if (msg.kind === "session_update") apply(msg.update);
    if (pred(msg)) return msg;
  }
}
const stop = (msg) => msg.kind === "stop";

// until reads updates until cond() holds, which may already be the case.
async function until(session, what, cond) {
  if (!cond()) await next(session, what, cond);
}

// turn prompts and reads to the end of the turn; it returns the stop reason
// and the tool call of the turn's command, if any.
async function turn(session, text) {
  const answered = session.prompt(text);
  let call;
  const end = await next(session, `the end of ${text}`, (msg) => {
    if (msg.kind === "session_update" && msg.update.sessionUpdate === "tool_call") call ??= msg.update.toolCallId;
    return stop(msg);
  });
  check((await answered).stopReason === end.stopReason, "prompt answer and stop message agree");
  return { stopReason: end.stopReason, call };
}

const termOf = (call) => [...terminals].find(([, t]) => t.call === call)?.[0];

// snapshot is each terminal's output, a long one as its length.
const snapshot = () => Object.fromEntries([...terminals].map(([id, t]) => [id, t.data.length > 100 ? `${t.data.length} UTF-16 units` : t.data]));

const summary = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, _meta: { terminal_output: true } },
    clientInfo: { name: "shellagent-interop-v1", version: "1" },
  });
  check(init.protocolVersion === 1 && init.agentInfo?.name === "shellagent", "initialize answer");
  check(Array.isArray(init.authMethods) && init.authMethods.length === 0, "no auth methods");
  check(init.agentCapabilities.sessionCapabilities?.close, "session/close advertised");
  check(init.agentCapabilities.loadSession === true, "session/load advertised");
  const session = await ctx.buildSession(cwd).start();
  check(session.newSessionResponse.configOptions?.length === 5, "five config options");

  // Characters split across chunks, and many chunk boundaries.
  const split = await turn(session, String.raw`printf 'a\303'; sleep 0.2; printf '\251b\346'; sleep 0.2; printf '\274'; sleep 0.2; printf '\242c\360\237'; sleep 0.2; printf '\230'; sleep 0.2; printf '\200z\n'`);
  check(split.stopReason === "end_turn", `split: ${split.stopReason}`);
  const splitTerm = terminals.get(termOf(split.call));
  check(Buffer.from(splitTerm.data, "utf8").equals(Buffer.from("aéb漢c😀z\r\n", "utf8")), `split output ${JSON.stringify(splitTerm.data)}`);
  check(splitTerm.exit?.exit_code === 0 && splitTerm.exit.signal === null, `split exit ${JSON.stringify(splitTerm.exit)}`);
  check(calls.get(split.call) === "completed", "split completed");

  const many = await turn(session, "i=0; while [ $i -lt 4000 ]; do printf 'é漢😀'; i=$((i+1)); done; exit 3");
  const manyTerm = terminals.get(termOf(many.call));
  check(manyTerm.data === "é漢😀".repeat(4000), `many: ${manyTerm.data.length} UTF-16 units`);
  check(manyTerm.exit?.exit_code === 3 && manyTerm.exit.signal === null, `many exit ${JSON.stringify(manyTerm.exit)}`);
  check(calls.get(many.call) === "failed", "exit 3 failed");

  // A command that leaves the foreground keeps streaming to its tool call.
  await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId: session.sessionId, configId: "foreground_timeout", value: "1s" });
  const bg = await turn(session, "echo before; sleep 2; echo after; exec sleep 30");
  const bgTerm = termOf(bg.call);
  check(bg.stopReason === "end_turn" && calls.get(bg.call) === "completed", "detached");
  await until(session, "output after the detach", () => terminals.get(bgTerm).data === "before\r\nafter\r\n");
  const live = snapshot();

  // session/load: a client that restores the thread knows nothing of it.
  // The history comes before the answer (the prompts, each tool call
  // announced with its terminal, redrawn), the commands after it.
  terminals.clear();
  calls.clear();
  const prompts = [];
  // (Whether the history came before the answer, the SDK's queue does
  // not tell; the Go tests check it.)
  const loaded = ctx.request(acp.methods.agent.session.load, { sessionId: session.sessionId, cwd, mcpServers: [] });
  await next(session, "the commands after the load", (msg) => {
    if (msg.kind !== "session_update") return false;
    const u = msg.update;
    if (u.sessionUpdate === "user_message_chunk") prompts.push(u.content.text);
    return u.sessionUpdate === "available_commands_update";
  });
  await loaded;
  check(prompts.length === 3 && prompts[2] === "echo before; sleep 2; echo after; exec sleep 30", `replayed prompts ${JSON.stringify(prompts)}`);
  check(calls.get(split.call) === "completed" && calls.get(many.call) === "failed" && calls.get(bg.call) === "completed", `replayed statuses ${JSON.stringify([...calls])}`);
  check(terminals.get(termOf(split.call)).data === splitTerm.data && terminals.get(termOf(many.call)).data === manyTerm.data, "redrawn");
  check(terminals.get(termOf(split.call)).exit?.exit_code === 0 && terminals.get(termOf(many.call)).exit?.exit_code === 3, "replayed exits");
  check(terminals.get(bgTerm).exit === null, "the detached command still runs");
  const reloaded = snapshot();
  const stopped = await turn(session, `/stop ${bgTerm}`);
  check(stopped.stopReason === "end_turn", "/stop answered");
  await until(session, "terminal_exit after /stop", () => terminals.get(bgTerm).exit !== null);
  check(terminals.get(bgTerm).exit.signal === "SIGTERM", `stopped: ${JSON.stringify(terminals.get(bgTerm).exit)}`);

  // session/cancel ends the turn cancelled.
  await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId: session.sessionId, configId: "foreground_timeout", value: "0" });
  const cancelled = session.prompt("sleep 30");
  const started = await next(session, "the command", (msg) => msg.kind === "session_update" && msg.update.sessionUpdate === "tool_call");
  await ctx.notify(acp.methods.agent.session.cancel, { sessionId: session.sessionId });
  check((await cancelled).stopReason === "cancelled", "cancelled");
  await next(session, "stop", stop);
  const cancelTerm = termOf(started.update.toolCallId);
  check(terminals.get(cancelTerm).exit?.signal === "SIGTERM", "terminal_exit before the cancelled turn's end");
  check(calls.get(started.update.toolCallId) === "failed", "cancelled tool call failed");

  await ctx.request(acp.methods.agent.session.close, { sessionId: session.sessionId });
  session.dispose();
  return {
    ok: problems.length === 0,
    problems,
    splitChunks: splitTerm.chunks,
    manyChunks: manyTerm.chunks,
    terminals: live,
    loaded: reloaded,
  };
});

child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify(summary) + "\n");
