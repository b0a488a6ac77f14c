// Runs once, when the MongoDB container initialises an empty data volume
// (docker-entrypoint-initdb.d), as the root user of .env.
//
// - outreach: the service's user, readWrite on its database and nothing
//   else (no user administration, no other database, no cluster actions).
// - analystRead: a role for analysts, reading every collection but those
//   that hold secrets or their verifiers (agent_keys, settings,
//   idempotency_keys) and the write path's bookkeeping (write_intents,
//   plans, plan_steps), as the embedded store's analyst endpoint does.
//   Give it to a person with the "Analysts on MongoDB" command of docs/operations.md.
const dbName = process.env.OUTREACH_DB || "outreach";
const outreach = db.getSiblingDB(dbName);

outreach.createUser({
  user: "outreach",
  pwd: process.env.OUTREACH_DB_PASSWORD,
  roles: [{ role: "readWrite", db: dbName }],
});

// The collections an analyst may read (the data dictionary describes them).
const analystCollections = [
  "outlets", "contacts", "channels", "campaigns", "opportunities", "coverage", "media", "notes",
  "email_threads", "users", "key_usage", "change_log", "counters", "agent_sessions",
  "subscriptions", "notifications", "deliveries", "slack_messages", "fs.files", "fs.chunks",
  "capability_probes",
];

outreach.createRole({
  role: "analystRead",
  privileges: [
    { resource: { db: dbName, collection: "" }, actions: ["listCollections", "dbStats"] },
    ...analystCollections.map((c) => ({
      resource: { db: dbName, collection: c },
      actions: ["find", "listIndexes", "collStats"],
    })),
  ],
  roles: [],
});
