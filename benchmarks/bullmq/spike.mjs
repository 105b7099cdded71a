// The BullMQ side of benchmarks/compare.py: N delayed jobs due at one whole second T, one Worker.
//
// node spike.mjs --port P --n N --out FILE [--lead-s S] [--timeout-s S]
// Creates N jobs with addBulk in batches of 1,000 (delay computed so that each fires at T), then
// runs one Worker (concurrency 100) that records each delivery's time; writes JSON to FILE:
// {due_ms, create_start_ms, create_end_ms, calibration_rate, deliveries: [[index, at_ms], ...],
//  timed_out}. compare.py counts lost, duplicated and early deliveries from it.
import { writeFileSync } from "node:fs";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";

const BATCH = 1000;

function args() {
  const out = { leadS: null, timeoutS: 300 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (key === "--port") out.port = Number(value);
    else if (key === "--n") out.n = Number(value);
    else if (key === "--out") out.out = value;
    else if (key === "--lead-s") out.leadS = Number(value);
    else if (key === "--timeout-s") out.timeoutS = Number(value);
    else throw new Error(`unknown argument ${key}`);
  }
  return out;
}

// The same rule as compare.py's due_at: after the estimated creation time, a lead of at least 10 s.
function dueAt(nowMs, n, rate, leadS) {
  const createS = (1.5 * n) / rate; // one batch's rate overestimates a long run's
  const lead = leadS ?? Math.max(10, 0.5 * createS);
  return Math.ceil((nowMs / 1000 + createS + lead)) * 1000;
}

// In native ESM, BullMQ wants constructed clients rather than connection options.
function client(port) {
  return new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: null });
}

async function calibrate(connection) {
  const queue = new Queue("calibrate", { connection });
  const jobs = Array.from({ length: BATCH }, (_, i) => ({
    name: "c", data: { i }, opts: { delay: 3_600_000, removeOnComplete: true },
  }));
  const start = Date.now();
  await queue.addBulk(jobs);
  const rate = BATCH / Math.max(0.001, (Date.now() - start) / 1000);
  await queue.obliterate({ force: true });
  await queue.close();
  return rate;
}

async function create(connection, n, dueMs) {
  const queue = new Queue("spike", { connection });
  for (let start = 0; start < n; start += BATCH) {
    const now = Date.now();
    const jobs = [];
    for (let i = start; i < Math.min(n, start + BATCH); i++) {
      jobs.push({
        name: "run",
        data: { i },
        opts: { jobId: `j${i}`, delay: Math.max(0, dueMs - now), removeOnComplete: true },
      });
    }
    await queue.addBulk(jobs);
  }
  await queue.close();
}

async function consume(connection, n, dueMs, timeoutS) {
  const deliveries = [];
  const seen = new Set();
  let resolveDone;
  const done = new Promise((resolve) => { resolveDone = resolve; });
  const worker = new Worker(
    "spike",
    async (job) => {
      deliveries.push([job.data.i, Date.now()]);
      seen.add(job.data.i);
      if (seen.size >= n) resolveDone(false);
    },
    { connection, concurrency: 100 },
  );
  const deadline = dueMs + timeoutS * 1000 - Date.now();
  const timer = setTimeout(() => resolveDone(true), Math.max(0, deadline));
  const timedOut = await done;
  clearTimeout(timer);
  await worker.close();
  return { deliveries, timedOut };
}

async function main() {
  const a = args();
  const rate = await calibrate(client(a.port));
  const dueMs = dueAt(Date.now(), a.n, rate, a.leadS);
  const createStart = Date.now();
  await create(client(a.port), a.n, dueMs);
  const createEnd = Date.now();
  console.log(`bullmq: ${a.n} jobs created in ${((createEnd - createStart) / 1000).toFixed(1)} s, ` +
    `due in ${((dueMs - createEnd) / 1000).toFixed(1)} s`);
  const { deliveries, timedOut } = await consume(client(a.port), a.n, dueMs, a.timeoutS);
  writeFileSync(a.out, JSON.stringify({
    due_ms: dueMs, create_start_ms: createStart, create_end_ms: createEnd,
    calibration_rate: rate, deliveries, timed_out: timedOut,
  }));
}

await main();
process.exit(0);
