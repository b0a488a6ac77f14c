// Agent sessions end to end with the official TypeScript MCP SDK (v2, the
// @modelcontextprotocol/client package, which speaks 2026-07-28):
//
//   node sessions.mjs URL KEY REVISION
//
// REVISION is 2026-07-28 (stateless: server/discover, no MCP session) or
// 2025-03-26 (initialize, an MCP session). The client starts a session,
// makes changes under its handle (in _meta, and in the X-Agent-Session-Id
// header), one change without a handle, and rolls the handle's session back.
// It checks each step itself, exits 1 at the first failure, and prints one
// JSON line of findings for the Go test (integration/e2e_test.go) to check
// against the server's change log.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { check, pinVersion } from "./common.mjs";

const [url, key, revision] = process.argv.slice(2);
if (!url || !key || !revision) {
  console.error("usage: node sessions.mjs URL KEY REVISION");
  process.exit(2);
}

async function connect(extraHeaders = {}) {
  const modern = revision >= "2026-07-28";
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}`, ...extraHeaders } },
    fetch: modern ? undefined : pinVersion(revision),
  });
  const client = new Client(
    { name: "outreach-e2e-sessions", version: "1.0.0" },
    { versionNegotiation: { mode: modern ? { pin: revision } : "legacy" } },
  );
  await client.connect(transport);
  return { client, transport };
}

function result(res, tool) {
  check(Array.isArray(res.content) && res.content.length >= 1, `${tool}: content`, res);
  check(res.content[0].type === "text", `${tool}: text content`, res.content[0].type);
  check(!res.isError, `${tool}: not an error`, res.content[0].text);
  return JSON.parse(res.content[0].text);
}

const out = { revision };
const { client, transport } = await connect();
out.negotiated = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
check(out.negotiated === revision, `negotiated ${revision}`, out.negotiated);
out.mcp_session = transport.sessionId ?? "";
check(revision >= "2026-07-28" ? out.mcp_session === "" : out.mcp_session !== "", "MCP session only on the stateful revision", out.mcp_session);

const started = result(await client.callTool({ name: "start_session", arguments: { label: `ts ${revision}` } }), "start_session");
check(typeof started.session_id === "string" && started.session_id.startsWith("s-"), "start_session handle", started);
out.session = started.session_id;

const meta = { "outreach/session_id": out.session };
out.in_session = [];
for (const name of ["TS meta A", "TS meta B"]) {
  const o = result(await client.callTool({ name: "create_outlet", arguments: { name: `${name} ${revision}` }, _meta: meta }), "create_outlet");
  out.in_session.push(o.id);
}
// The same handle in the header, from a second connection.
{
  const h = await connect({ "X-Agent-Session-Id": out.session });
  const o = result(await h.client.callTool({ name: "create_outlet", arguments: { name: `TS header ${revision}` } }), "create_outlet");
  out.in_session.push(o.id);
  const who = result(await h.client.callTool({ name: "whoami", arguments: {} }), "whoami");
  check(who.session_id === out.session, "whoami names the header's session", who);
  await h.client.close();
}
// No handle: the MCP session (2025-03-26) or the key's implicit session (2026-07-28).
const other = result(await client.callTool({ name: "create_outlet", arguments: { name: `TS unnamed ${revision}` } }), "create_outlet");
out.outside = other.id;
out.unnamed_session = result(await client.callTool({ name: "whoami", arguments: {} }), "whoami").session_id;
check(out.unnamed_session !== out.session, "a call without a handle is not in the handle's session", out.unnamed_session);

const listed = result(await client.callTool({ name: "list_sessions", arguments: {} }), "list_sessions");
const mine = listed.sessions.find((s) => s.session_id === out.session);
check(mine && mine.changes === 3 && mine.label === `ts ${revision}` && mine.rolled_back === false, "list_sessions shows the run", mine);

const rb = result(await client.callTool({ name: "rollback_session", arguments: { session_id: out.session } }), "rollback_session");
check(rb.applied === true, "rollback applied", rb);
out.rolled_back = rb.steps.map((s) => s.record_id).sort();
check(JSON.stringify(out.rolled_back) === JSON.stringify([...out.in_session].sort()), "the rollback undid exactly the session's changes", out.rolled_back);
const still = result(await client.callTool({ name: "get_outlet", arguments: { id: out.outside } }), "get_outlet");
check(still.id === out.outside && still.archived_at === null, "the unnamed change stands", still);
await client.close();
console.log(JSON.stringify(out));
