// Replays the client side of golden transcripts through the official ACP
// TypeScript SDK's v2 client (@agentclientprotocol/sdk/experimental/v2)
// to `shellagent replay`:
// usage: node replay.mjs /path/to/shellagent /absolute/cwd TRANSCRIPT...
//
// For each transcript (all at once), it starts `shellagent replay
// TRANSCRIPT` and sends the transcript's client lines through the SDK,
// each once the agent lines before it have arrived: requests with
// ctx.request (the SDK picks the ids), notifications with ctx.notify, and
// the answers to the agent's requests from the SDK's own request handler,
// with the transcript's result. The client's directory is cwd where the
// transcript says /cwd. Prints one JSON summary line: per transcript, the
// replay's exit status and stderr, and how many agent lines the SDK
// delivered of how many the transcript has.
import { readFileSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { cwd, problems, startAgent } from "./common.mjs";

const files = process.argv.slice(4);

// deferred returns a promise with its resolve function.
function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

async function replay(file) {
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
  const { child, input, output } = startAgent(["replay", file], "pipe");
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));

  // received counts the agent lines the SDK delivered: notifications,
  // requests, responses (results and errors), and withdrawals of requests.
  let received = 0;
  let waiters = [];
  const arrived = () => {
    received++;
    waiters = waiters.filter((w) => (received >= w.n ? (w.resolve(), false) : true));
  };
  const until = (n) => {
    if (received >= n) return Promise.resolve();
    const w = { n, ...deferred() };
    waiters.push(w);
    return Promise.race([
      w.promise,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`${file}: ${received} agent lines, waited for ${n}`)), 20000).unref()),
    ]);
  };
  // The transcript's answers to the agent's requests, by request id.
  const answers = new Map();
  const answer = (id) => {
    if (!answers.has(id)) answers.set(id, deferred());
    return answers.get(id);
  };

  const app = acp
    .client({ name: "shellagent-replay" })
    .onRequest(acp.methods.client.session.requestPermission, async ({ requestId, signal }) => {
      arrived();
      // The SDK applies the agent's $/cancel_request for the request to
      // its signal: that is an agent line delivered too.
      // (A signal aborted as the connection closes is not.)
      signal?.addEventListener("abort", () => signal.reason?.code === -32800 && arrived(), { once: true });
      return answer(String(requestId)).promise;
    })
    .onNotification(acp.methods.client.session.update, () => arrived());
  let expected = 0;
  await app.connectWith(acp.ndJsonStream(input, output), async (ctx) => {
    for (const l of lines) {
      if ("agent" in l) {
        expected++;
        continue;
      }
      await until(expected);
      const msg = JSON.parse(JSON.stringify(l.client).replaceAll('"/cwd', JSON.stringify(cwd).slice(0, -1)));
      if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
        throw new Error(`${file}: the SDK cannot send ${JSON.stringify(msg)}`);
      }
      if (msg.method !== undefined && msg.id !== undefined) {
        ctx.request(msg.method, msg.params).then(arrived, arrived);
      } else if (msg.method !== undefined) {
        await ctx.notify(msg.method, msg.params);
      } else {
        answer(String(msg.id)).resolve(msg.result);
      }
    }
    await until(expected);
  });
  child.stdin.end();
  return { file, status: await exited, stderr, received, expected };
}

const results = await Promise.all(files.map(replay));
console.log(JSON.stringify({ ok: true, results, problems }));
