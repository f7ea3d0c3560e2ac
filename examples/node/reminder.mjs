// A destination service behind oncehook, in Node with oncehook's TypeScript
// client: it receives oncehook's deliveries of appointment events and sends
// a WhatsApp reminder once per appointment and step, however many times a
// delivery arrives (a provider's resend, a retry, a replay, the same event
// from two sources delivered to two replicas of this service at once).
//
// The business key is "reminder:<appointment>:<step>": ledger.once claims
// it in oncehook's effects ledger, so one replica sends, and another one
// waits for it and gets the stored result. A claim that is a reclaim (the
// previous owner died after claiming) asks the messaging API by the same key
// whether the message went out before sending it.
//
//   npm install   # links ../../clients/typescript (build it first: npm run build there)
//   ONCEHOOK_API=http://127.0.0.1:8081 ONCEHOOK_API_TOKEN=... WEBHOOK_SECRET=whsec_... \
//   MESSAGING_URL=http://127.0.0.1:9100 LISTEN=127.0.0.1:9000 node reminder.mjs

import { createServer } from "node:http";
import { Ledger, SignatureError, verifyDelivery } from "oncehook";

const ledger = new Ledger({ leaseMs: 10_000, waitMs: 30_000 }); // $ONCEHOOK_API, $ONCEHOOK_API_TOKEN
const messaging = process.env.MESSAGING_URL ?? "http://127.0.0.1:9100";

/** Sends the appointment's reminder for its step, once. */
export async function remind(appointment) {
  const key = `reminder:${appointment.appointment_id}:${appointment.step}`;
  return ledger.once(key, async (effect) => {
    if (effect.reclaimed) {
      // The owner before us died after claiming: did its message go out?
      const sent = await fetch(`${messaging}/messages?key=${encodeURIComponent(key)}`, { signal: effect.signal });
      if (sent.status === 200) return await sent.json();
    }
    const res = await fetch(`${messaging}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messaging_product: "whatsapp", to: appointment.phone, type: "text",
        text: { body: appointment.text }, biz_opaque_callback_data: key,
      }),
      signal: effect.signal,
    });
    if (!res.ok) throw new Error(`messaging: HTTP ${res.status}`); // released: oncehook's retry tries again
    return await res.json();
  });
}

const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const raw = Buffer.concat(chunks);
  try {
    verifyDelivery(raw, req.headers, process.env.WEBHOOK_SECRET); // over the raw bytes
  } catch (e) {
    res.writeHead(e instanceof SignatureError ? 401 : 400).end();
    return;
  }
  let appointment;
  try {
    appointment = JSON.parse(raw.toString("utf8"));
  } catch {
    appointment = {};
  }
  if (!appointment.appointment_id || !appointment.step) {
    res.writeHead(422).end("not an appointment event"); // permanent: oncehook dead-letters it
    return;
  }
  try {
    const sent = await remind(appointment);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(sent));
  } catch (e) {
    res.writeHead(503, { "retry-after": "1" }).end(String(e)); // oncehook retries
  }
});

const [host, port] = (process.env.LISTEN ?? "127.0.0.1:9000").split(":");
server.listen(Number(port), host, () => {
  const a = server.address();
  console.log(`reminder: listening on http://${a.address}:${a.port}`);
});
