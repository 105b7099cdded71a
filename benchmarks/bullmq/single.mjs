// Both sides of `benchmarks/compare.py --single`: single creates from concurrent callers, from
// the same node process model, so neither system is measured through a slower client.
//
// node single.mjs --port P --callers C --seconds S --out FILE
//   C async callers, each awaiting BullMQ's queue.add (one delayed job, due in an hour) in a
//   loop for S seconds, through one Queue (one Redis connection, as an application would have).
// node single.mjs --url URL --token T --body JSON --callers C --seconds S --out FILE
//   C async callers, each awaiting POST URL/v1/jobs with the body, over a keep-alive agent of C
//   sockets (a connection per caller).
// Writes {count, errors, elapsed_s, latencies_ms: [...]} to FILE.
import { writeFileSync } from "node:fs";
import http from "node:http";
import { Queue } from "bullmq";
import { Redis } from "ioredis";

function args() {
  const out = { callers: 64, seconds: 10 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (key === "--port") out.port = Number(value);
    else if (key === "--callers") out.callers = Number(value);
    else if (key === "--seconds") out.seconds = Number(value);
    else if (key === "--out") out.out = value;
    else if (key === "--url") out.url = value;
    else if (key === "--token") out.token = value;
    else if (key === "--body") out.body = value;
    else throw new Error(`unknown argument ${key}`);
  }
  return out;
}

// Run `add` from C callers for S seconds; {count, errors, elapsed_s, latencies_ms}.
async function measure(a, add) {
  await add(); // warm: not counted
  const latencies = [];
  let errors = 0;
  const start = performance.now();
  const stopAt = start + a.seconds * 1000;
  async function caller() {
    while (performance.now() < stopAt) {
      const t0 = performance.now();
      if (!(await add())) errors++;
      latencies.push(performance.now() - t0);
    }
  }
  await Promise.all(Array.from({ length: a.callers }, caller));
  const elapsedS = (performance.now() - start) / 1000;
  return { count: latencies.length, errors, elapsed_s: elapsedS, latencies_ms: latencies };
}

async function bullmq(a) {
  const connection = new Redis({ host: "127.0.0.1", port: a.port, maxRetriesPerRequest: null });
  const queue = new Queue("single", { connection });
  let next = 0;
  const add = async () => {
    await queue.add("run", { i: next++ }, { delay: 3_600_000, removeOnComplete: true });
    return true;
  };
  const found = await measure(a, add);
  await queue.close();
  return found;
}

async function schedd(a) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: a.callers });
  const url = new URL("/v1/jobs", a.url);
  const body = Buffer.from(a.body);
  const headers = {
    authorization: `Bearer ${a.token}`,
    "content-type": "application/json",
    "content-length": body.length,
  };
  const add = () => new Promise((resolve) => {
    const request = http.request(url, { method: "POST", agent, headers }, (response) => {
      response.on("data", () => {});
      response.on("end", () => resolve(response.statusCode === 201));
    });
    request.on("error", () => resolve(false));
    request.end(body);
  });
  const found = await measure(a, add);
  agent.destroy();
  return found;
}

async function main() {
  const a = args();
  const found = a.url ? await schedd(a) : await bullmq(a);
  writeFileSync(a.out, JSON.stringify(found));
}

await main();
process.exit(0);
