// Dynamic discovery through the official TypeScript MCP SDK: a client of a
// server started with its default toolsets is listed the lean default, and
// reaches every other tool with list_toolsets and enable_toolset, told by
// notifications/tools/list_changed; a client naming toolsets in the URL
// (/mcp/x/{toolset,…}/readonly) is served only those, read-only.
//
//   node discovery.mjs URL KEY
//
// URL is the /mcp endpoint, KEY an admin key. It checks each step, exits 1
// at the first failure, and prints one JSON line of findings on stdout for
// the Go test (integration/e2e_test.go).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { check } from "./common.mjs";

const [url, key] = process.argv.slice(2);
if (!url || !key) {
  console.error("usage: node discovery.mjs URL KEY");
  process.exit(2);
}

async function connect(endpoint, options) {
  const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name: "outreach-e2e-discovery", version: "1.0.0" }, options);
  await client.connect(transport);
  return client;
}

function result(res, tool) {
  check(!res.isError, `${tool}: not an error`, res.content?.[0]?.text);
  return JSON.parse(res.content[0].text);
}

const out = {};

// The default list, and the way to the rest.
let changed;
const listChanged = new Promise((resolve) => (changed = resolve));
const client = await connect(url, {
  listChanged: { tools: { autoRefresh: true, debounceMs: 0, onChanged: (error, tools) => changed({ error, tools }) } },
});
const first = await client.listTools();
out.default_tools = first.tools.map((t) => t.name).sort();
out.default_bytes = JSON.stringify(first).length;
for (const name of ["list_toolsets", "enable_toolset", "search", "create_note"]) {
  check(out.default_tools.includes(name), `default list has ${name}`, out.default_tools);
}
check(!out.default_tools.includes("create_outlet"), "default list lacks create_outlet", out.default_tools);

const toolsets = result(await client.callTool({ name: "list_toolsets", arguments: {} }), "list_toolsets");
const off = toolsets.toolsets.filter((t) => !t.enabled).map((t) => t.name);
check(off.length > 0, "list_toolsets names toolsets not enabled", toolsets);
const enabled = result(await client.callTool({ name: "enable_toolset", arguments: { toolsets: off } }), "enable_toolset");
check(enabled.added.includes("create_outlet"), "enable_toolset added create_outlet", enabled.added);

// The SDK refreshes its list on notifications/tools/list_changed; the test
// fails (does not wait forever) if none comes.
const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("no notifications/tools/list_changed within 30 s")), 30000).unref());
const refreshed = await Promise.race([listChanged, timeout]);
check(!refreshed.error, "list refreshed after list_changed", String(refreshed.error));
// The tools are added one by one and each addition re-arms the server's
// short debounce, so the first notification may come before the last tool:
// the list asked for now, after enable_toolset answered, is the whole one.
out.after_tools = (await client.listTools()).tools.map((t) => t.name).sort();
const outlets = result(await client.callTool({ name: "list_outlets", arguments: {} }), "list_outlets");
check(typeof outlets.total === "number", "list_outlets answers after enable_toolset", outlets);

// Resources, prompts and completions through the same client.
const contact = result(await client.callTool({ name: "create_contact", arguments: { first_name: "Grace", last_name: "Hopper" } }), "create_contact");
const { resourceTemplates } = await client.listResourceTemplates();
out.resource_templates = resourceTemplates.map((t) => t.uriTemplate).sort();
const read = await client.readResource({ uri: `outreach://contacts/${contact.id}` });
check(read.contents.length === 1 && read.contents[0].mimeType === "application/json", "resources/read of a contact", read);
out.resource_contact = JSON.parse(read.contents[0].text);
const { resources } = await client.listResources();
out.resources_listed = resources.map((r) => r.uri);
const { prompts } = await client.listPrompts();
out.prompts = prompts.map((p) => p.name).sort();
const pitch = await client.getPrompt({ name: "prepare_pitch", arguments: { contact: "Grace Hopper" } });
out.pitch_prompt = pitch.messages[0].content.text;
const completed = await client.complete({ ref: { type: "ref/prompt", name: "prepare_pitch" }, argument: { name: "contact", value: "gra" } });
out.completion = completed.completion.values;
await client.close();

// A client that names its toolsets, read-only, in the URL.
const ro = await connect(url.replace(/\/mcp$/, "/mcp/x/notes/readonly"));
const roList = await ro.listTools();
out.readonly_tools = roList.tools.map((t) => t.name).sort();
for (const t of roList.tools) {
  check(t.annotations?.readOnlyHint === true, `${t.name} on /mcp/x/notes/readonly only reads`, t.annotations);
}
await ro.close();

console.log(JSON.stringify(out));
