// End-to-end client: drives a running Outreach server with the official
// TypeScript MCP SDK, the way an agent's MCP client does.
//
//   node client.mjs URL KEY
//
// URL is the /mcp endpoint, KEY an admin key. It checks each step itself,
// exits 1 at the first failure, and prints one JSON line of findings on
// stdout for the Go test (integration/e2e_test.go) to check against the
// server's own records.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { check, pinVersion } from "./common.mjs";

const [url, key] = process.argv.slice(2);
if (!url || !key) {
  console.error("usage: node client.mjs URL KEY");
  process.exit(2);
}

async function connect(version) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
    fetch: version ? pinVersion(version) : undefined,
  });
  const client = new Client({ name: "outreach-e2e", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

// result decodes a tool result: one text content holding JSON.
function result(res, tool) {
  check(Array.isArray(res.content) && res.content.length === 1, `${tool}: one content item`, res.content);
  check(res.content[0].type === "text", `${tool}: text content`, res.content[0].type);
  check(!res.isError, `${tool}: not an error`, res.content[0].text);
  return JSON.parse(res.content[0].text);
}

const out = {};

// 1. The SDK on protocol revision 2025-03-26.
{
  const { client, transport } = await connect("2025-03-26");
  out.protocol_pinned = transport.protocolVersion;
  check(transport.protocolVersion === "2025-03-26", "session on 2025-03-26", transport.protocolVersion);
  check(client.getServerVersion()?.name === "outreach", "server name", client.getServerVersion());

  const { tools } = await client.listTools();
  out.tools = tools.map((t) => t.name).sort();
  for (const t of tools) {
    check(typeof t.description === "string" && t.description.length > 0, `${t.name}: description`);
    check(t.inputSchema?.type === "object", `${t.name}: input schema`, t.inputSchema);
    check(t.annotations && typeof t.annotations.readOnlyHint === "boolean", `${t.name}: annotations`, t.annotations);
  }
  for (const name of ["whoami", "create_user", "get_change_log"]) {
    check(out.tools.includes(name), `tools/list has ${name}`, out.tools);
  }

  out.whoami = result(await client.callTool({ name: "whoami", arguments: {} }), "whoami");
  check(out.whoami.user_id && out.whoami.agent_id && out.whoami.session_id, "whoami names user, agent and session", out.whoami);

  const email = `e2e-${Date.now()}@example.com`;
  out.user = result(await client.callTool({ name: "create_user", arguments: { name: "E2E Person", email } }), "create_user");
  check(out.user.email === email && out.user.id, "create_user returns the user", out.user);

  const log = result(await client.callTool({ name: "get_change_log", arguments: { record_id: out.user.id } }), "get_change_log");
  check(log.total === 1 && log.changes[0].action === "create" && log.changes[0].tool === "create_user", "one create entry", log);
  check(log.changes[0].session_id === out.whoami.session_id, "the entry names this session", log.changes[0]);

  // An unknown argument is refused as a tool error, not a protocol fault.
  const bad = await client.callTool({ name: "whoami", arguments: { nope: 1 } });
  check(bad.isError === true, "unknown argument refused", bad);
  out.unknown_argument_error = JSON.parse(bad.content[0].text).error.code;
  await client.close();
}

// 2. The SDK on its own latest revision.
{
  const { client, transport } = await connect();
  out.protocol_latest = transport.protocolVersion;
  check(transport.protocolVersion === LATEST_PROTOCOL_VERSION, `session on ${LATEST_PROTOCOL_VERSION}`, transport.protocolVersion);
  const who = result(await client.callTool({ name: "whoami", arguments: {} }), "whoami");
  check(who.user_id === out.whoami.user_id && who.session_id !== out.whoami.session_id, "same user, new session", who);
  await client.close();
}

// 3. The wire format of 2025-03-26 as a plain HTTP client sees it.
{
  const headers = {
    Authorization: `Bearer ${key}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
  };
  const post = async (body, session) => {
    const res = await fetch(url, { method: "POST", headers: session ? { ...headers, "Mcp-Session-Id": session } : headers, body: JSON.stringify(body) });
    const text = await res.text();
    const data = res.headers.get("content-type")?.startsWith("text/event-stream")
      ? text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6))).find((m) => m.id === body.id)
      : text ? JSON.parse(text) : undefined;
    return { res, data };
  };
  const init = await post({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
  check(init.res.status === 200, "raw initialize: 200", init.res.status);
  check(init.data?.result?.protocolVersion === "2025-03-26", "raw initialize: 2025-03-26", init.data);
  const session = init.res.headers.get("mcp-session-id");
  check(session, "raw initialize: Mcp-Session-Id");
  const ack = await post({ jsonrpc: "2.0", method: "notifications/initialized" }, session);
  check(ack.res.status === 202, "initialized notification: 202", ack.res.status);
  const call = await post({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "whoami", arguments: {} } }, session);
  const content = call.data?.result?.content;
  check(Array.isArray(content) && content[0]?.type === "text", "raw tools/call: result.content[0] is text", call.data);
  out.raw_whoami = JSON.parse(content[0].text);
  check(out.raw_whoami.user_id === out.whoami.user_id, "raw whoami: same user", out.raw_whoami);
}

// 4. A bad key is refused before anything runs.
{
  const bad = "outreach_" + "x".repeat(38);
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${bad}` } } });
  const client = new Client({ name: "outreach-e2e-bad", version: "1.0.0" });
  let err;
  try {
    await client.connect(transport);
  } catch (e) {
    err = e;
  }
  check(err, "connect with a bad key fails");
  out.bad_key_error = String(err?.message ?? err);
  out.bad_key_sdk_code = err instanceof StreamableHTTPError ? err.code : null;
  const res = await fetch(url, {
    method: "POST",
    headers: { Authorization: `Bearer ${bad}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  out.bad_key_status = res.status;
  out.bad_key_challenge = res.headers.get("www-authenticate");
  check(res.status === 401, "bad key: 401", res.status);
  check(out.bad_key_challenge?.startsWith("Bearer"), "bad key: WWW-Authenticate Bearer", out.bad_key_challenge);
}

console.log(JSON.stringify(out));
