// Orders and their outbox rows from Node, through pg on PostgreSQL: the same
// program as writer.py (read its docstring), for the same table.
//
//   WRITER_DSN=postgresql://... WRITER_PREFIX=node WRITER_N=1000 node writer.mjs
import pg from "pg";

const dsn = process.env.WRITER_DSN;
const prefix = process.env.WRITER_PREFIX ?? "node";
const n = Number(process.env.WRITER_N ?? 1000);
const delay = Number(process.env.WRITER_DELAY_MS ?? 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One order and its event in one transaction.
async function write(client, id, amount, commit) {
  const payload = Buffer.from(JSON.stringify({ order: id, amount, lang: "node" }));
  await client.query("BEGIN");
  try {
    await client.query("INSERT INTO orders (id, amount) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", [id, amount]);
    await client.query(
      "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) " +
        "VALUES ($1, 'order', $1, 'order.created', $2) ON CONFLICT (id) DO NOTHING",
      [id, payload],
    );
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  }
  await client.query(commit ? "COMMIT" : "ROLLBACK");
}

async function connect() {
  const client = new pg.Client({ connectionString: dsn, connectionTimeoutMillis: 5000 });
  // A server that goes away emits "error" on an idle client: without a
  // listener that would end the process; the next query fails instead.
  client.on("error", () => {});
  await client.connect();
  return client;
}

let client = null;
for (let i = 0; i < n; i++) {
  const id = `${prefix}-${String(i).padStart(5, "0")}`;
  const commit = i % 5 !== 0;
  const times = i % 10 === 1 ? 2 : 1; // the second: the commit's answer was "lost"
  const deadline = Date.now() + 60_000;
  for (let done = 0; done < times; ) {
    try {
      client ??= await connect();
      await write(client, id, 100 + i, commit);
      done++;
    } catch (e) {
      // The database went away: reconnect, retry the order whole.
      if (Date.now() > deadline) throw e;
      process.stderr.write(`writer ${prefix}: ${id}: ${e.message}\n`);
      client?.end().catch(() => {});
      client = null;
      await sleep(200);
    }
  }
  process.stdout.write(`${commit ? "committed" : "rolledback"} ${id}\n`);
  if (delay) await sleep(delay);
}
await client?.end();
process.stdout.write("done\n");
