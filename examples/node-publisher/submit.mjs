// Submit a job to Allot from Node.js: a CI pipeline's publisher, written from the contract
// alone (README "The contract", proto/schema/, proto/asyncapi.json), with no Allot code.
//
//   ALLOT_NATS_URL=nats://127.0.0.1:4222 ALLOT_IDENTITY=ci.json node submit.mjs request.json
//
// request.json is a submit request: {"spec": {...}, "idempotency_key": "..."}. It is checked
// against the JSON Schema before it is sent; the reply is printed as JSON. Exit status: 0
// when the job is in the log, 2 when the request was refused (by the schema or by Allot),
// 1 when Allot could not be reached.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import Ajv2020 from "ajv/dist/2020.js";
import { connect, nkeyAuthenticator, StringCodec } from "nats";

const here = dirname(fileURLToPath(import.meta.url));
const schemas = process.env.ALLOT_SCHEMA_DIR ?? join(here, "..", "..", "proto", "schema");
const MAX_REQUEST_BYTES = 256 * 1024; // what the services take on allot.cmd.*

function fail(status, message) {
  process.stderr.write(`submit.mjs: ${message}\n`);
  process.exit(status);
}

const [requestFile] = process.argv.slice(2);
if (!requestFile || !process.env.ALLOT_IDENTITY) {
  fail(2, "usage: ALLOT_IDENTITY=identity.json node submit.mjs request.json");
}
const identity = JSON.parse(readFileSync(process.env.ALLOT_IDENTITY, "utf8"));
const body = readFileSync(requestFile, "utf8");
const request = JSON.parse(body);

// Check before sending: the schema states every field, type and limit Allot holds to.
const ajv = new Ajv2020({ strict: false, allErrors: true });
const schema = JSON.parse(readFileSync(join(schemas, "submit-request.json"), "utf8"));
const valid = ajv.compile(schema);
if (!valid(request)) {
  const errors = valid.errors.map((e) => ({
    field: e.instancePath.replace(/^\/(spec\/)?/, "").replaceAll("/", ".") || "request",
    value: JSON.stringify(e.params),
    message: e.message,
  }));
  process.stdout.write(JSON.stringify({ errors }) + "\n");
  process.exit(2);
}
const payload = StringCodec().encode(JSON.stringify(request));
if (payload.length > MAX_REQUEST_BYTES) {
  fail(2, `the request is ${payload.length} bytes; at most ${MAX_REQUEST_BYTES} are accepted`);
}

const options = {
  servers: process.env.ALLOT_NATS_URL ?? "nats://127.0.0.1:4222",
  authenticator: nkeyAuthenticator(new TextEncoder().encode(identity.seed)),
  // Replies come to the identity's own inbox: the only one the server lets it read.
  inboxPrefix: `_INBOX_${identity.name}`,
  name: "allot-node-publisher",
};
if (process.env.ALLOT_TLS_CA) {
  options.tls = { caFile: process.env.ALLOT_TLS_CA };
  if (process.env.ALLOT_TLS_CERT) {
    options.tls.certFile = process.env.ALLOT_TLS_CERT;
    options.tls.keyFile = process.env.ALLOT_TLS_KEY;
  }
}

let nc;
try {
  nc = await connect(options);
} catch (error) {
  fail(1, `cannot connect to ${options.servers}: ${error.message}`);
}
try {
  // Commands are sent under the sender's own name: allot.cmd.<principal>.submit.
  const msg = await nc.request(`allot.cmd.${identity.name}.submit`, payload, { timeout: 10000 });
  const reply = JSON.parse(StringCodec().decode(msg.data));
  process.stdout.write(JSON.stringify(reply) + "\n");
  process.exitCode = reply.errors && reply.errors.length ? 2 : 0;
} catch (error) {
  fail(1, `no reply from Allot: ${error.message}`);
} finally {
  await nc.close();
}
