// The redis-rank side of `python -m bench.peers`: node redis_rank_bench.mjs PLAN.json
//
// PLAN.json (written by bench/peers/external.py): node_dir (where npm installed redis-rank and
// ioredis), redis_url, events (member TAB value TAB member-data-json lines), batch, now (ISO
// time the periodic boards are cut at), prefix, top, around, rounds, targets, check, week_weight,
// season_weight, same_work (also time the same work as Seasons: three boards + data + expiry).
// Prints one JSON object: what was done, the seconds it took, and the checked answers.
//
// The app this stands for keeps a daily PeriodicLeaderboard (update policy `aggregate`, so a
// score is added with ZINCRBY) and its member data in a hash next to it, since redis-rank keeps
// none: a batch is `updatePipe` + one HSET in one ioredis pipeline (one round trip); top and
// around read the member data with one HMGET after the library's own call.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const require = createRequire(path.join(plan.node_dir, 'package.json'));
const { Leaderboard, PeriodicLeaderboard } = require('redis-rank');
const Redis = require('ioredis');
const versions = {
  'redis-rank': require('redis-rank/package.json').version,
  ioredis: require('ioredis/package.json').version,
};

const WARMUP = 500;
const now = new Date(plan.now);
const options = { sortPolicy: 'high-to-low', updatePolicy: 'aggregate' };

function loadBatches() {
  const text = readFileSync(plan.events, 'utf8');
  const batches = [];
  let entries = [];
  let meta = [];
  let start = 0;
  let events = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    if (!line) continue;
    const [id, value, data] = line.split('\t');
    entries.push({ id, value: Number(value) });
    meta.push(id, data);
    events += 1;
    if (entries.length === plan.batch) {
      batches.push({ entries, meta });
      entries = [];
      meta = [];
    }
  }
  if (entries.length) batches.push({ entries, meta });
  return { batches, events };
}

async function redisInfo(client, section, keys) {
  let sum = 0;
  for (const line of (await client.info(section)).split('\r\n')) {
    const [key, value] = line.split(':');
    if (keys.includes(key)) sum += Number(value);
  }
  return sum;
}

const redisCpu = (client) => redisInfo(client, 'cpu', ['used_cpu_user', 'used_cpu_sys']);

function seconds(since) {
  return Number(process.hrtime.bigint() - since) / 1e9;
}

async function ingest(client, batches, daily, metaKey) {
  const began = process.hrtime.bigint();
  for (const { entries, meta } of batches) {
    const pipe = client.pipeline();
    daily.getLeaderboardNow().updatePipe(entries, pipe);
    pipe.hset(metaKey, ...meta);
    await Leaderboard.execPipeline(pipe);
  }
  return seconds(began);
}

// The same work as Seasons: day, week and season boards (weighted), member data, EXPIREAT.
async function ingestSameWork(client, batches) {
  const base = `${plan.prefix}-same:kills`;
  const boards = [
    [new PeriodicLeaderboard(client, `${base}:day`, { leaderboardOptions: options, cycle: 'daily', now: () => now }), 1],
    [new PeriodicLeaderboard(client, `${base}:week`, { leaderboardOptions: options, cycle: 'weekly', now: () => now }), plan.week_weight],
    [new PeriodicLeaderboard(client, `${base}:season`, { leaderboardOptions: options, cycle: () => 'S1', now: () => now }), plan.season_weight],
  ];
  const expireAt = Math.floor(now.getTime() / 1000) + 60 * 86400;
  const began = process.hrtime.bigint();
  for (const { entries, meta } of batches) {
    const pipe = client.pipeline();
    for (const [periodic, weight] of boards) {
      const lb = periodic.getLeaderboardNow();
      lb.updatePipe(weight === 1 ? entries : entries.map((e) => ({ id: e.id, value: e.value * weight })), pipe);
      pipe.expireat(lb.redisKey, expireAt);
    }
    pipe.hset(`${base}:meta`, ...meta);
    await Leaderboard.execPipeline(pipe);
  }
  return seconds(began);
}

async function withData(client, metaKey, rows) {
  const data = rows.length ? await client.hmget(metaKey, ...rows.map((e) => e.id)) : [];
  return rows.map((e, i) => ({ ...e, data: data[i] ? JSON.parse(data[i]) : {} }));
}

// Like bench.peers.inprocess.time_reads: interleaved rounds, the seconds of each, CPU.
async function timeReads(ops, client) {
  const size = Math.floor(plan.targets.length / plan.rounds);
  for (const fn of Object.values(ops)) {
    for (const member of plan.targets.slice(0, WARMUP)) await fn(member);
  }
  const out = { round_requests: size, cpu: {} };
  for (const name of Object.keys(ops)) {
    out[name] = [];
    out.cpu[name] = [0, 0];
  }
  for (let r = 0; r < plan.rounds; r += 1) {
    const chunk = plan.targets.slice(r * size, (r + 1) * size);
    for (const [name, fn] of Object.entries(ops)) {
      const server = await redisCpu(client);
      const mine = process.cpuUsage();
      const began = process.hrtime.bigint();
      for (const member of chunk) await fn(member);
      out[name].push(seconds(began));
      const used = process.cpuUsage(mine);
      out.cpu[name][0] += (used.user + used.system) / 1e6;
      out.cpu[name][1] += (await redisCpu(client)) - server;
    }
  }
  return out;
}

async function main() {
  const { batches, events } = loadBatches();
  const client = new Redis(plan.redis_url);
  const daily = new PeriodicLeaderboard(client, `${plan.prefix}:kills`, {
    leaderboardOptions: options,
    cycle: 'daily',
    now: () => now,
  });
  const metaKey = `${plan.prefix}:kills:meta`;
  const redisBefore = await redisCpu(client);
  const cpuBefore = process.cpuUsage();
  const ingestSeconds = await ingest(client, batches, daily, metaKey);
  const cpu = process.cpuUsage(cpuBefore);
  const redisUsed = (await redisCpu(client)) - redisBefore;
  const memory = await redisInfo(client, 'memory', ['used_memory']);

  const half = Math.floor(plan.around / 2);
  const ops = {
    top: async () => withData(client, metaKey, await daily.getLeaderboardNow().top(plan.top)),
    around: async (m) => withData(client, metaKey, await daily.getLeaderboardNow().around(m, half, true)),
    rank: async (m) => daily.getLeaderboardNow().rank(m),
  };
  const reads = await timeReads(ops, client);

  const answers = { top: [], ranks: {}, around: {} };
  for (const e of await ops.top()) answers.top.push([e.id, e.score, e.data]);
  for (const m of plan.check) {
    const r = await ops.rank(m);
    if (r !== null) answers.ranks[m] = r;
    answers.around[m] = (await ops.around(m)).map((e) => [e.id, e.rank]);
  }
  const info = {};
  if (plan.same_work) info.ingest_same_work_seconds = await ingestSameWork(client, batches);
  await client.quit();
  process.stdout.write(JSON.stringify({
    peer: 'redis-rank',
    version: `redis-rank ${versions['redis-rank']}, ioredis ${versions.ioredis}, node ${process.versions.node}`,
    ingest: { events, seconds: ingestSeconds, client_cpu: (cpu.user + cpu.system) / 1e6, redis_cpu: redisUsed, memory },
    reads,
    answers,
    info,
    problems: [],
  }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
