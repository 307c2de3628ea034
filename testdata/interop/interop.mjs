// Drives a shellagent binary with the official ACP TypeScript SDK's v2
// client (@agentclientprotocol/sdk/experimental/v2), as an editor would:
// usage: node interop.mjs /path/to/shellagent /absolute/cwd
//
// Every step checks what the SDK's own session helpers report (background
// list, cancel capabilities, isForBackgroundWork), so a message the SDK
// parses differently from shellagent's intent fails here. Prints one JSON
// summary line; exits non-zero on the first failed check.
import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { check, cwd, problems, startAgent } from "./common.mjs";

const { child, input: agentIn, output: agentOut } = startAgent();
const stream = acp.ndJsonStream(agentIn, agentOut);

// Permission answers: "allow" unless a test wants to look first.
const permissionRequests = [];
let activeSession;
const app = acp.client({ name: "shellagent-interop" }).onRequest(
  acp.methods.client.session.requestPermission,
  async ({ params }) => {
    permissionRequests.push({ params, background: activeSession?.isForBackgroundWork(params) });
    return { outcome: { outcome: "selected", optionId: "allow" } };
  },
);

// next reads updates until pred matches one, returning it; it collects
// terminal bytes on the way.
const output = new Map();
async function next(session, what, pred) {
  const deadline = Date.now() + 20000;
  for (;;) {
    check(Date.now() < deadline, `timed out waiting for ${what}`);
    const msg = await session.nextUpdate(AbortSignal.timeout(20000));
    const u = msg.update;
    if (u.sessionUpdate === "terminal_output_chunk") {
      const prev = output.get(u.terminalId) ?? Buffer.alloc(0);
      output.set(u.terminalId, Buffer.concat([prev, Buffer.from(u.data, "base64")]));
    }
    if (pred(msg)) return msg;
  }
}
const idle = (msg) => msg.kind === "stop";

const summary = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: 2,
    info: { name: "shellagent-interop", version: "1" },
  });
  check(init.protocolVersion === 2 && init.info.name === "shellagent", "initialize answer");
  const session = await ctx.buildSession(cwd).start();
  activeSession = session;
  check(session.configOptions?.length === 5, "five config options");
  check(init._meta?.shellagent?.methods?.includes("_shellagent/terminal/write"), "the input methods advertised");

  // A foreground command: inserted, output, idle end_turn.
  const inserted = await session.prompt("echo interop");
  check(typeof inserted.messageId === "string", "prompt answered with a messageId");
  const stop1 = await next(session, "idle after echo", idle);
  check(stop1.stopReason === "end_turn", `stop reason ${stop1.stopReason}`);
  check(output.get("term_1")?.toString() === "interop\r\n", `term_1 output ${output.get("term_1")}`);

  // A background terminal, cancelled through the SDK's own capability check.
  await session.prompt("/bg sleep 30");
  await next(session, "idle after /bg", idle);
  check(session.background?.length === 1 && session.background[0].terminalId === "term_2", "term_2 listed");
  check(session.canCancelTerminal("term_2"), "term_2 advertises cancel");
  await session.cancelTerminal("term_2");
  const exit = await next(session, "term_2 exit", (m) => m.update.terminalId === "term_2" && m.update.exitStatus);
  check(exit.update.exitStatus.signal === "SIGTERM", `exit ${JSON.stringify(exit.update.exitStatus)}`);
  check(!session.canCancelTerminal("term_2"), "cancel cleared on exit");
  await next(session, "removal", (m) => m.update.sessionUpdate === "state_update");
  check(session.background?.length === 0, "term_2 removed");

  // A recurring job, cancelled as a tool call.
  await session.prompt("/every 1h true");
  await next(session, "idle after /every", idle);
  const job = session.background?.[0];
  check(job?.type === "tool_call" && session.canCancelToolCall(job.toolCallId), "job listed and cancellable");
  await session.cancelToolCall(job.toolCallId);
  const cancelled = await next(session, "job cancelled", (m) => m.update.toolCallId === job.toolCallId && m.update.status === "cancelled");
  check(cancelled.update.capabilities === null, "job cancel capability cleared");
  await next(session, "job removal", (m) => m.update.sessionUpdate === "state_update");
  check(session.background?.length === 0, "job removed");

  // Permission mode ask: a foreground and a background command.
  await session.setConfigOption({ configId: "permission", type: "id", value: "ask" });
  await session.prompt("echo allowed");
  await next(session, "requires_action", (m) => m.update.state === "requires_action");
  await next(session, "idle after allowed", idle);
  await session.prompt("/bg echo bg-allowed");
  await next(session, "bg terminal exit", (m) => m.update.terminalId === "term_4" && m.update.exitStatus);
  check(permissionRequests.length === 2, `${permissionRequests.length} permission requests`);
  check(permissionRequests[0].background === false, "foreground request is not for background work");
  check(permissionRequests[1].background === true, "background request references listed work");

  // Typing into a terminal: the waiting-for-input notice, then a write
  // through the extension method (still in permission mode ask).
  await session.prompt("read x; echo got $x");
  const waiting = await next(session, "waiting-for-input notice", (m) => m.update.sessionUpdate === "notice");
  check(waiting.update.severity === "info" && waiting.update.title.startsWith("term_5 is waiting for input"), `notice ${JSON.stringify(waiting.update)}`);
  const written = await ctx.request("_shellagent/terminal/write", {
    sessionId: session.sessionId, terminalId: "term_5", data: Buffer.from("hello\r").toString("base64"),
  });
  check(JSON.stringify(written) === "{}", `write answered ${JSON.stringify(written)}`);
  await next(session, "idle after read", idle);
  check(output.get("term_5")?.toString().endsWith("got hello\r\n"), `term_5 output ${output.get("term_5")}`);

  await ctx.request(acp.methods.agent.session.close, { sessionId: session.sessionId });
  session.dispose();
  return {
    terminals: Object.fromEntries([...output].map(([k, v]) => [k, v.toString()])),
    permissionRequests: permissionRequests.length,
  };
});

child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
check(problems.length === 0, `SDK complaints: ${problems.join("; ")}`);
console.log(JSON.stringify({ ok: true, ...summary }));
