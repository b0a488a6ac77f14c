// A host of MCP Apps for the browser test (integration/apps_host_test.go),
// bundled for the page by esbuild: it connects to the Outreach server with
// the official client, reads an app's ui:// resource, calls the tool that
// names it, and shows the app in a sandboxed frame through the ext-apps
// SDK's own host side (AppBridge over PostMessageTransport), which answers
// the app's handshake and forwards its tools/call to the server with the
// client it was given (no handler of the host's own). What
// happens is written to window.hostState for the test to read.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const state = (window.hostState = { steps: [], error: "" });

async function main() {
  const p = new URLSearchParams(location.hash.slice(1));
  const args = JSON.parse(p.get("args") || "{}");
  const client = new Client({ name: "outreach-apps-test-host", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/mcp", location.href), {
      requestInit: { headers: { Authorization: "Bearer " + p.get("key") } },
    }),
  );
  state.steps.push("connected");
  const tool = (await client.listTools()).tools.find((t) => t.name === p.get("tool"));
  const uri = tool?._meta?.ui?.resourceUri;
  if (!uri) throw new Error("the tool names no ui:// resource");
  const res = await client.readResource({ uri });
  const page = res.contents[0];
  state.mimeType = page.mimeType;
  state.steps.push("resource read");
  const result = await client.callTool({ name: tool.name, arguments: args });
  state.steps.push("tool called");

  const frame = document.getElementById("app");
  const bridge = new AppBridge(client, { name: "outreach-apps-test-host", version: "1.0.0" }, { openLinks: {}, serverTools: {}, logging: {} });
  bridge.onsizechange = (size) => {
    state.size = size;
  };
  bridge.oninitialized = async () => {
    state.steps.push("app initialized");
    state.appVersion = bridge.getAppVersion?.();
    await bridge.sendToolInput({ arguments: args });
    await bridge.sendToolResult(result);
    state.steps.push("tool result sent");
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = page.text;
}

main().catch((e) => {
  state.error = String(e && e.stack ? e.stack : e);
});
