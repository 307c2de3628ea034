// Plays every /scenario of a shellagent binary through the official ACP
// TypeScript SDK's v2 client (@agentclientprotocol/sdk/experimental/v2),
// one session per scenario, all at once, and checks that the SDK's own
// session state agrees with each scenario's rule:
// usage: node scenarios.mjs /path/to/shellagent /absolute/cwd NAME...
//
// The agent runs with --scenarios-invalid (the malformed list plays) and
// --client-checks: a conforming client, as the SDK is, gets no notice.
// The SDK applies each update to its session state (background,
// canCancelTerminal, canCancelToolCall) when it arrives, before it is
// read; each update is recorded here with that state as the SDK had it
// right then. Prints one JSON summary line; exits non-zero on the first
// failed check.
import { setMaxListeners } from "node:events";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { check, cwd, problems, startAgent } from "./common.mjs";

// Eighteen sessions at once on one connection add as many abort listeners
// to the connection's signal: not a leak.
setMaxListeners(64);

const names = process.argv.slice(4);
const { child, input, output } = startAgent(["--shell", "/bin/sh", "--kill-grace", "1s", "--scenarios-invalid", "--client-checks"]);

// Permission requests go to the scenario whose session they name.
const askers = new Map();
const app = acp.client({ name: "shellagent-scenarios" }).onRequest(
  acp.methods.client.session.requestPermission,
  async ({ params, signal }) => {
    const asker = askers.get(params.sessionId);
    check(asker !== undefined, `a permission request for ${params.sessionId}, which asks for none`);
    return asker(params, signal);
  },
);

// withdrawn resolves when the agent withdraws the request ($/cancel_request).
const withdrawn = (signal) =>
  new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
const cancelled = { outcome: { outcome: "cancelled" } };

// record makes the session keep, with each update, the SDK's state as it
// was when the update arrived.
function record(session) {
  const log = [];
  const ids = { terminals: new Set(), calls: new Set() };
  const enqueue = session.updates.enqueue.bind(session.updates);
  session.updates.enqueue = (msg) => {
    const u = msg.update;
    if (u.terminalId) ids.terminals.add(u.terminalId);
    if (u.toolCallId) ids.calls.add(u.toolCallId);
    log.push({
      msg,
      u,
      at: Date.now(),
      background: session.background === undefined ? undefined : structuredClone(session.background),
      cancelTerminal: new Set([...ids.terminals].filter((id) => session.canCancelTerminal(id))),
      cancelCall: new Set([...ids.calls].filter((id) => session.canCancelToolCall(id))),
    });
    enqueue(msg);
  };
  return log;
}

// next reads the session's updates until pred matches one.
async function next(session, what, pred) {
  for (;;) {
    const msg = await session.nextUpdate(AbortSignal.timeout(20000)).catch((e) => {
      throw new Error(`waiting for ${what}: ${e.message}`);
    });
    if (pred(msg)) return msg;
  }
}

const isState = (m) => m.update.sessionUpdate === "state_update";
const isIdle = (m) => m.kind === "stop";
const saidOver = (name) => (m) =>
  m.update.sessionUpdate === "agent_message" && m.update.content?.some((b) => b.text?.includes(`Scenario ${name} is over`));

// The SDK's view of a recorded update.
const quiet = (r) => acp.StateUpdate.isIdle(r.u) && Array.isArray(r.background) && r.background.length === 0;
const listed = (r, id) => r.background?.some((w) => w.terminalId === id || w.toolCallId === id) ?? false;
const states = (log) => log.filter((r) => isState(r.msg));
const first = (log, what, pred) => {
  const r = log.find(pred);
  check(r !== undefined, what);
  return r;
};
const status = (log, id, before = log.length) => {
  let s;
  for (const r of log.slice(0, before)) if (r.u.toolCallId === id && r.u.status !== undefined) s = r.u.status;
  return s;
};
const exited = (log, id, before = log.length) => log.slice(0, before).some((r) => r.u.terminalId === id && r.u.exitStatus);
const index = (log, r) => log.indexOf(r);

// screen rebuilds a terminal's output as a client that renders it must:
// chunks append, a replacement snapshot replaces.
function screen(log, id) {
  let out = Buffer.alloc(0);
  for (const r of log) {
    if (r.u.terminalId !== id) continue;
    if (r.u.sessionUpdate === "terminal_output_chunk") out = Buffer.concat([out, Buffer.from(r.u.data, "base64")]);
    if (r.u.sessionUpdate === "terminal_update" && r.u.output) out = Buffer.from(r.u.output.data, "base64");
  }
  return out.toString();
}

// Each scenario: what the client does while it plays (play), and what
// the SDK's state must show (verify).
const scenarios = {
  "unknown-item": {
    verify(log) {
      const end = first(log, "the idle end_turn", (r) => isIdle(r.msg) && r.u.stopReason === "end_turn");
      check(end.background?.length === 1 && acp.BackgroundWork.isCustom(end.background[0]), `SDK background at the turn's end: ${JSON.stringify(end.background)}`);
      check(!quiet(end), "the SDK's list of only an unknown item is not empty: the session is not quiet");
      const gone = first(log.slice(index(log, end) + 1), "the removal", (r) => isState(r.msg));
      check(quiet(gone), "quiet once the probe is removed");
    },
  },
  "omitted-background": {
    verify(log) {
      const omitted = first(log, "the snapshot without a list", (r) => isState(r.msg) && r.u.background === undefined);
      const before = states(log)[states(log).indexOf(omitted) - 1];
      const term = before.background?.[0]?.terminalId;
      check(term !== undefined, "the terminal was listed before");
      check(omitted.background === undefined, `SDK background after an omitted list: ${JSON.stringify(omitted.background)}, want undefined (unknown)`);
      check(!quiet(omitted) && !exited(log, term, index(log, omitted) + 1), "not quiet, and the terminal has not exited");
      const again = first(log.slice(index(log, omitted) + 1), "the list again", (r) => isState(r.msg));
      check(listed(again, term), "the terminal is listed again");
      check(quiet(states(log).at(-1)), "quiet at the end");
    },
  },
  paused: {
    verify(log) {
      const end = first(log, "the idle end_turn", (r) => isIdle(r.msg) && r.u.stopReason === "end_turn");
      check(end.background?.length === 2, `two items listed at the idle: ${JSON.stringify(end.background)}`);
      const [job, watcher] = end.background.map((w) => w.toolCallId);
      check(status(log, job, index(log, end) + 1) === "pending" && status(log, watcher, index(log, end) + 1) === "paused", "a pending and a paused tool call listed while idle");
      check(!quiet(end), "idle with work scheduled or suspended is not quiet");
      const seq = log.filter((r) => r.u.toolCallId === watcher && r.u.status).map((r) => r.u.status);
      check(seq.join() === "in_progress,paused,in_progress,paused,cancelled", `the watch's statuses as the SDK parsed them: ${seq}`);
      const from = index(log, first(log, "the watch listed", (r) => listed(r, watcher)));
      const to = index(log, first(log, "the watch's end", (r) => r.u.toolCallId === watcher && r.u.status === "cancelled"));
      check(log.slice(from, to).filter((r) => isState(r.msg)).every((r) => listed(r, watcher)), "the watch stays listed, paused or not, until it is cancelled");
    },
  },
  "unknown-status": {
    verify(log) {
      const odd = first(log, "the unknown status", (r) => r.u.status === "_shellagent_waiting");
      const end = first(log.slice(index(log, odd)), "the idle end_turn", (r) => isIdle(r.msg));
      check(listed(end, odd.u.toolCallId), "the tool call with the unknown status is still listed: live, in progress");
      check(!quiet(end), "not quiet while it is listed");
    },
  },
  capabilities: {
    verify(log) {
      const term = first(log, "the terminal", (r) => r.u.sessionUpdate === "terminal_update").u.terminalId;
      const job = first(log, "the wakeup", (r) => r.u.sessionUpdate === "tool_call_update" && r.u.kind === "other").u.toolCallId;
      const seen = (id, set) => log.filter((r) => r.u.capabilities !== undefined && (r.u.terminalId === id || r.u.toolCallId === id)).map((r) => r[set].has(id));
      check(seen(term, "cancelTerminal").join() === "true,false,true,false,true,false", `canCancelTerminal after each patch: ${seen(term, "cancelTerminal")}`);
      check(seen(job, "cancelCall").join() === "true,false,true,false,true,false", `canCancelToolCall after each patch: ${seen(job, "cancelCall")}`);
    },
  },
  "codex-style": {
    verify(log) {
      const end = first(log, "the idle end_turn", (r) => isIdle(r.msg) && r.u.stopReason === "end_turn");
      check(end.background?.length === 1 && end.background[0].type === "terminal", `one item, the terminal: ${JSON.stringify(end.background)}`);
      const term = end.background[0].terminalId;
      const call = first(log, "its tool call", (r) => r.u.content?.some((c) => c.terminalId === term)).u.toolCallId;
      check(status(log, call, index(log, end) + 1) === "in_progress" && !listed(end, call), "its tool call is in progress and not listed: live through its terminal");
      const done = first(log, "the tool call's end", (r) => r.u.toolCallId === call && r.u.status === "completed");
      check(exited(log, term, index(log, done)), "the exit comes before the tool call completes");
      check(quiet(states(log).at(-1)), "quiet at the end");
    },
  },
  "stale-tool-call": {
    verify(log) {
      const call = first(log, "the made-up tool call", (r) => r.u.status === "in_progress").u.toolCallId;
      const term = first(log, "the made-up terminal", (r) => r.u.sessionUpdate === "terminal_update").u.terminalId;
      const end = first(log, "the idle end_turn", (r) => isIdle(r.msg) && r.u.stopReason === "end_turn");
      check(quiet(end) && !listed(end, call) && !listed(end, term), "idle with [] while neither is listed: a client MAY take both as abandoned");
      check(status(log, call, index(log, end)) === "in_progress" && !exited(log, term, index(log, end)), "unfinished at that point");
      const exit = first(log, "the terminal's exitStatus", (r) => r.u.terminalId === term && r.u.exitStatus);
      check(Object.keys(exit.u.exitStatus).length === 0, "exitStatus {}: exited, code unknown");
    },
  },
  "error-stop-reason": {
    verify(log) {
      const fail = first(log, "the idle error", (r) => isIdle(r.msg) && r.u.stopReason === "error");
      check(acp.IdleStateUpdate.isError(fail.u) && typeof fail.u.error?.message === "string", `the SDK parses the error stop reason and its error: ${JSON.stringify(fail.u)}`);
      check(fail.background?.length === 1, "the background terminal is still listed when the turn fails");
      const bg = fail.background[0].terminalId;
      check(fail.cancelTerminal.has(bg) && !exited(log, bg, index(log, fail)), "and still running, still cancellable");
      const fg = first(log, "the failed command", (r) => r.u.status === "failed").u.toolCallId;
      check(index(log, first(log, "", (r) => r.u.toolCallId === fg && r.u.status === "failed")) < index(log, fail), "the failed work's tool call is final before the idle");
    },
  },
  "replacement-snapshot": {
    verify(log) {
      const snap = first(log, "the replacement", (r) => r.u.sessionUpdate === "terminal_update" && r.u.output);
      const term = snap.u.terminalId;
      check(Buffer.from(snap.u.output.data, "base64").toString() === "before the snapshot\r\n", "the snapshot holds what was printed");
      check(screen(log, term) === "before the snapshot\r\nafter the snapshot\r\n", `the terminal as a client rebuilds it: ${JSON.stringify(screen(log, term))}`);
    },
  },
  "follow-up": {
    verify(log) {
      const job = first(log, "the wakeup", (r) => r.u.kind === "other").u.toolCallId;
      const done = first(log, "the wakeup's end", (r) => r.u.toolCallId === job && r.u.status === "completed");
      const removal = first(log.slice(index(log, done)), "the removal", (r) => isState(r.msg));
      check(acp.StateUpdate.isRunning(removal.u) && !listed(removal, job), "the snapshot that removes the wakeup says running");
      check(!log.slice(index(log, done), index(log, removal)).some(quiet), "never quiet between the wakeup's end and its follow-up");
    },
  },
  "quiet-grace": {
    verify(log) {
      const q = first(log, "the quiet snapshot", (r) => isState(r.msg) && quiet(r) && !r.u.stopReason);
      // (How long after: the agent waits 0.5s, but when this process reads
      // each line depends on the machine's load; the order is what counts.)
      const run = first(log.slice(index(log, q)), "the follow-up", (r) => isState(r.msg) && acp.StateUpdate.isRunning(r.u));
      check(quiet(q) && Array.isArray(run.background) && run.u._meta?.shellagent?.scenario === "quiet-grace", "quiet, then new foreground work in the same session, marked as the scenario's");
    },
  },
  "unknown-state": {
    verify(log) {
      const odd = first(log, "the unknown state", (r) => isState(r.msg) && r.u.state === "_shellagent_probe");
      check(acp.StateUpdate.isCustom(odd.u) && !acp.StateUpdate.isIdle(odd.u) && odd.msg.kind !== "stop", "the SDK takes it as a custom state, not as idle");
      check(odd.background === undefined, "and stops reporting background work until a known state comes");
      const end = first(log.slice(index(log, odd)), "the idle", (r) => isIdle(r.msg));
      check(Array.isArray(end.background), "a known state reports the list again");
    },
  },
  "repeated-idle": {
    verify(log) {
      const stops = log.filter((r) => isIdle(r.msg) && r.u.stopReason === "end_turn");
      check(stops.length >= 2 && JSON.stringify(stops[0].background) === JSON.stringify(stops[1].background), "the repeated idle end_turn is the same snapshot");
    },
  },
  "silent-terminal": {
    verify(log) {
      const end = first(log, "the idle end_turn", (r) => isIdle(r.msg) && r.u.stopReason === "end_turn");
      const term = end.background?.[0]?.terminalId;
      check(term !== undefined && end.cancelTerminal.has(term), "the silent terminal is listed and cancellable");
      check(!log.some((r) => r.u.sessionUpdate === "terminal_output_chunk" && r.u.terminalId === term), "it printed nothing");
      const exit = first(log, "its exit", (r) => r.u.terminalId === term && r.u.exitStatus);
      check(!exit.cancelTerminal.has(term), "it stops advertising cancel at its exit");
    },
  },
  "permission-cancel": {
    asks: [],
    ask(params, signal) {
      const background = this.session.isForBackgroundWork(params);
      this.asks.push({ params, background });
      if (this.asks.length === 2) acp_notify(this.ctx, this.session.sessionId);
      // A conforming client cancels neither on its own: the foreground
      // one is withdrawn by the agent, the one for listed work stays open.
      return withdrawn(signal).then(() => {
        this.asks.find((a) => a.params === params).answered = Date.now();
        return cancelled;
      });
    },
    verify(log) {
      check(this.asks.length === 2, `${this.asks.length} permission requests`);
      const [bg, fg] = this.asks;
      check(bg.background === true && fg.background === false, "isForBackgroundWork: the listed work's request is, the foreground one is not");
      check(bg.answered > fg.answered, "the request for listed work stayed open after session/cancel, until it was withdrawn");
      first(log, "the idle cancelled", (r) => isIdle(r.msg) && r.u.stopReason === "cancelled");
    },
  },
  close: {
    ask(params, signal) {
      this.pending = params.subject?.toolCallId;
      return this.closed.then(() => cancelled); // the RFD's MUST, once the close is done
    },
    async play(session, ctx) {
      let done;
      this.closed = new Promise((r) => (done = r));
      const end = await next(session, "the idle end_turn", (m) => isIdle(m) && m.stopReason === "end_turn");
      this.listed = session.background?.length;
      await ctx.request(acp.methods.agent.session.close, { sessionId: session.sessionId });
      this.after = session.background;
      done();
      return end;
    },
    verify(log) {
      check(this.listed === 3, `closing will stop ${this.listed} pieces of background work, want 3`);
      const left = this.after?.map((w) => w.toolCallId ?? w.terminalId);
      check(left?.length === 1 && left[0] === this.pending, `after the close the SDK still lists ${left}: the made-up tool call, never finalized`);
      check(!["completed", "failed", "cancelled"].includes(status(log, this.pending)), "no final status came for it: a client treats it as cancelled");
    },
  },
  "cancel-race": {
    async play(session) {
      const end = await next(session, "the idle end_turn", (m) => isIdle(m) && m.stopReason === "end_turn");
      const [term, call] = session.background.map((w) => w.terminalId ?? w.toolCallId);
      await session.cancelTerminal(term);
      const exit = await next(session, "the terminal's exit", (m) => m.update.terminalId === term && m.update.exitStatus);
      this.exit = exit.update.exitStatus;
      await session.cancelToolCall(call);
      const final = await next(session, "the tool call's end", (m) => m.update.toolCallId === call && m.update.status);
      this.final = final.update.status;
      this.again = await session.cancelToolCall(call).then(() => "accepted", (e) => e.constructor.name);
      return end;
    },
    verify() {
      check(this.exit.exitCode === 0 && this.exit.signal == null, `the terminal ended on its own: ${JSON.stringify(this.exit)}`);
      check(this.final === "completed", `the tool call finished first: ${this.final}`);
      check(this.again === "TypeError", `a second cancel is not sent: it no longer advertises cancel (${this.again})`);
    },
  },
  "malformed-background": {
    verify(log) {
      const bad = first(log, "the malformed snapshot", (r) => isState(r.msg) && r.u.background === undefined && r.u._meta);
      check(bad.background === undefined, `SDK background after a malformed list: ${JSON.stringify(bad.background)}, want undefined`);
      check(!quiet(bad), "not quiet");
      const again = first(log.slice(index(log, bad) + 1), "the list again", (r) => isState(r.msg));
      check(again.background?.length === 1, "the terminal is listed again");
    },
  },
};

function acp_notify(ctx, sessionId) {
  ctx.notify(acp.methods.agent.session.cancel, { sessionId });
}

async function play(ctx, name) {
  const sc = scenarios[name];
  check(sc !== undefined, `no client for scenario ${name}`);
  const session = await ctx.buildSession(cwd).start();
  sc.session = session;
  sc.ctx = ctx;
  if (sc.ask) askers.set(session.sessionId, sc.ask.bind(sc));
  const log = record(session);
  await session.prompt(`/scenario ${name} 0s`);
  if (sc.play) await sc.play(session, ctx);
  if (name !== "close") {
    await next(session, `the end of ${name}`, saidOver(name));
    await next(session, "the last state_update", isState);
  }
  session.dispose();
  const notices = log.filter((r) => r.u.sessionUpdate === "notice" && r.u._meta?.shellagent?.clientCheck);
  check(notices.length === 0, `${name}: client checks reported ${JSON.stringify(notices.map((r) => r.u.title))}`);
  try {
    sc.verify(log);
  } catch (e) {
    throw new Error(`${name}: ${e.message}`);
  }
  return { name, updates: log.length };
}

const results = await app.connectWith(acp.ndJsonStream(input, output), async (ctx) => {
  await ctx.request(acp.methods.agent.initialize, { protocolVersion: 2, info: { name: "shellagent-scenarios", version: "1" } });
  return Promise.all(names.map((n) => play(ctx, n)));
});
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
check(problems.length === 0, `SDK complaints: ${problems.join("; ")}`);
console.log(JSON.stringify({ ok: true, results }));
