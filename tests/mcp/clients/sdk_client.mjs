// @ts-check
// A small MCP client on the official TypeScript SDK (v1), driven by the Python tests.
//
// Reads a plan as JSON on stdin:
//   {"server": {"command", "args", "env", "cwd"} | {"url", "headers"},
//    "steps": [{"op": "listTools"} | {"op": "callTool", "name", "arguments"} | ...]}
// runs it over one connection and prints one JSON report on stdout:
//   {"serverVersion", "capabilities", "instructions", "results": [...], "notifications": [...],
//    "stderr"}
// A step that fails records {"error": {"code", "message"}} and the plan goes on, so error
// cases are compared like any other result. Every wait is bounded.

import { writeFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

/** @typedef {import("@modelcontextprotocol/sdk/types.js").Notification} Notification */
/** @typedef {{op: string, [key: string]: any}} Step */

const STEP_TIMEOUT_MS = 30_000;

/** @returns {Promise<string>} */
async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const plan = JSON.parse(await readStdin());
  const server = plan.server;
  /** @type {string[]} */
  const stderr = [];
  /** @type {StdioClientTransport | StreamableHTTPClientTransport} */
  let transport;
  if (server.url) {
    transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: server.headers ?? {} },
    });
  } else {
    const stdio = new StdioClientTransport({
      command: server.command,
      args: server.args ?? [],
      env: server.env,
      cwd: server.cwd,
      stderr: "pipe",
    });
    stdio.stderr?.on("data", (data) => stderr.push(data.toString("utf8")));
    transport = stdio;
  }

  /** @type {Notification[]} */
  const notifications = [];
  /** @type {Array<() => void>} */
  let waiters = [];
  const client = new Client({ name: "agent-memory-sdk-test", version: "1.0.0" }, { capabilities: {} });
  /** @param {Notification} notification */
  const record = async (notification) => {
    notifications.push(notification);
    const pending = waiters;
    waiters = [];
    for (const wake of pending) wake();
  };
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, record);
  client.setNotificationHandler(ToolListChangedNotificationSchema, record);

  await client.connect(transport);
  const results = [];
  for (const step of /** @type {Step[]} */ (plan.steps)) {
    try {
      results.push(await run(client, step, notifications, (wake) => waiters.push(wake)));
    } catch (error) {
      const e = /** @type {{code?: number, message?: string}} */ (error);
      results.push({ error: { code: e.code ?? null, message: String(e.message ?? error) } });
    }
  }
  const report = {
    serverVersion: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions() ?? null,
    results,
    notifications,
    stderr: "",
  };
  await client.close();
  report.stderr = stderr.join(""); // complete only once the server has exited
  process.stdout.write(JSON.stringify(report));
}

/**
 * The pagination parameters of a list step: its cursor, when the plan gives one.
 * @param {Step} step
 * @returns {{cursor: string} | undefined}
 */
function page(step) {
  return typeof step.cursor === "string" ? { cursor: step.cursor } : undefined;
}

/**
 * @param {Client} client
 * @param {Step} step
 * @param {Notification[]} notifications
 * @param {(wake: () => void) => void} onNotification
 */
async function run(client, step, notifications, onNotification) {
  switch (step.op) {
    case "listTools":
      return await client.listTools(page(step));
    case "listResources":
      return await client.listResources(page(step));
    case "listResourceTemplates":
      return await client.listResourceTemplates(page(step));
    case "listPrompts":
      return await client.listPrompts(page(step));
    case "getPrompt":
      return await client.getPrompt({ name: step.name });
    case "readResource":
      return await client.readResource({ uri: step.uri });
    case "callTool":
      return await client.callTool({ name: step.name, arguments: step.arguments });
    case "subscribe":
      return await client.subscribeResource({ uri: step.uri });
    case "unsubscribe":
      return await client.unsubscribeResource({ uri: step.uri });
    case "touch":
      // Tell the test driving this client that a point in the plan was reached.
      writeFileSync(step.path, "");
      return null;
    case "sleep":
      await sleep(step.ms);
      return null;
    case "waitFor": {
      // Wait for a notification with this method (and uri), seen before or arriving later.
      const deadline = Date.now() + (step.timeoutMs ?? STEP_TIMEOUT_MS);
      const matches = () =>
        notifications.find(
          (n) =>
            n.method === step.method &&
            (step.uri === undefined || (n.params && n.params.uri === step.uri)),
        );
      while (!matches()) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no ${step.method} notification within the timeout`);
        // A timer that is cleared once a notification arrives, so none outlives the plan.
        let timer;
        await new Promise((resolve) => {
          timer = setTimeout(resolve, left);
          onNotification(() => resolve(null));
        });
        clearTimeout(timer);
      }
      return matches();
    }
    default:
      throw new Error(`unknown step ${step.op}`);
  }
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
