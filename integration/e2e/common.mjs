// Helpers shared by the end-to-end clients (client.mjs, sessions.mjs).

// check exits 1 with a message at the first failed step.
export function check(ok, what, got) {
  if (!ok) {
    console.error(`FAIL: ${what}` + (got === undefined ? "" : `: got ${JSON.stringify(got)}`));
    process.exit(1);
  }
}

// pinVersion makes the SDK's handshake ask for an older protocol revision:
// the SDK always offers its latest one, and a server answers with the
// revision the client asked for when it supports it. It is a fetch.
export function pinVersion(version) {
  return async (input, init) => {
    if (init?.body && typeof init.body === "string") {
      const msg = JSON.parse(init.body);
      if (msg.method === "initialize") {
        msg.params.protocolVersion = version;
        init = { ...init, body: JSON.stringify(msg) };
      }
    }
    return fetch(input, init);
  };
}
