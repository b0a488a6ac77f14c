// The TypeScript SDK's OAuth client provider against the service: the SDK
// discovers the metadata from the 401, registers (DCR), builds the PKCE
// authorization URL and exchanges the code; the member's browser is the
// test's (the URL goes out on stdout, the code comes back on stdin).
// Usage: node oauth.mjs MCP_URL REDIRECT_URI
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import readline from 'node:readline';

const [url, redirect] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
let info, tokens, verifier;
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return { client_name: 'TypeScript Assistant', redirect_uris: [redirect], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  },
  clientInformation() { return info; },
  saveClientInformation(i) { info = i; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; },
  redirectToAuthorization(u) { console.log(JSON.stringify({ authorize: u.toString() })); },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
};

const client = new Client({ name: 'ts-assistant', version: '1' });
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await client.connect(transport);
  throw new Error('connected without signing in');
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
const { value } = await lines.next();
await transport.finishAuth(JSON.parse(value).code);
transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
await client.connect(transport);
const text = (r) => JSON.parse(r.content[0].text);
const whoami = text(await client.callTool({ name: 'whoami', arguments: {} }));
const outlet = text(await client.callTool({ name: 'create_outlet', arguments: { name: 'From TypeScript' } }));
console.log(JSON.stringify({ whoami, outlet, client_id: info.client_id, refresh: Boolean(tokens.refresh_token) }));
await client.close();
process.exit(0);
