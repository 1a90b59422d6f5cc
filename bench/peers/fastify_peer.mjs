// The Node.js peer of `python -m bench --only http-peers`: node fastify_peer.mjs CONFIG.json
//
// A plain Fastify 5 + ioredis 5 service, one process, that reads the keys Seasons wrote and
// answers Seasons' JSON for one board's day window. CONFIG.json (written by bench/http_peers.py):
// node_dir (where npm installed fastify and ioredis), redis_url, port, board, period, write_token,
// keys {day, week, season, meta, events, batches, batch_results}, day_prefix (the day board's key
// without its YYYY-MM-DD), zone (the IANA zone of the days), week_weight, season_weight,
// expire_at {day, week, season} (epoch seconds, as Seasons sets them).
//
// Reads: top = MULTI(ZRANGE REV WITHSCORES, ZCARD) + HMGET; around a member = MULTI(ZREVRANK,
// ZCARD) + ZRANGE REV WITHSCORES + HMGET; around a rank = MULTI(ZCARD, ZRANGE REV WITHSCORES)
// + HMGET (a second ZRANGE only where the slice meets the end); a member = MULTI(ZREVRANK,
// ZSCORE, HGET, ZCARD) + MULTI(ZCOUNT, ZRANGE BYSCORE LIMIT 1) for its percentile and gap;
// lookup = MULTI(ZREVRANK, ZSCORE per member) + HMGET of the ranked ones;
// history = one pipeline of ZREVRANK + ZSCORE per day. Ranks: ties = member.
// Writes (POST /v1/scores): one MULTI with ZINCRBY on the day, week and season boards per event
// (weighted), one HSET of the member data, EXPIREAT x3, and the event ids as Seasons keeps them
// (ZADD NX into the events set, drop entries older than 48 h, EXPIRE) plus the batch record.
// Lighter than Seasons: duplicates are counted but not skipped, and no day-closed check.
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const require = createRequire(path.join(cfg.node_dir, 'package.json'));
const Fastify = require('fastify');
const Redis = require('ioredis');

const redis = new Redis(cfg.redis_url);
const app = Fastify({ logger: false });
const K = cfg.keys;
const DEDUPE_SECONDS = 48 * 3600;

const notRanked = (reply, member) =>
  reply.code(404).send({ error: 'not_ranked', message: `${member} is not ranked`, details: null });

const limitExceeded = (reply, name, value) =>
  reply.code(422).send({
    error: 'limit_exceeded', message: `${name} is out of range`, details: { [name]: value },
  });

function checkBoard(req, reply) {
  if (req.params.board !== cfg.board || req.params.window !== 'day') {
    reply.code(404).send({ error: 'unknown_board', message: 'only the day board', details: null });
    return false;
  }
  return true;
}

async function page(start, rows, total) {
  const members = [];
  for (let i = 0; i < rows.length; i += 2) members.push(rows[i]);
  const metas = members.length ? await redis.hmget(K.meta, ...members) : [];
  const entries = members.map((member, i) => ({
    rank: start + i + 1,
    member,
    score: Number(rows[2 * i + 1]),
    metadata: metas[i] ? JSON.parse(metas[i]) : {},
  }));
  return { board: cfg.board, window: 'day', period: cfg.period, total, entries };
}

app.get('/healthz', async () => ({ status: 'ok' }));

app.get('/v1/boards/:board/:window', async (req, reply) => {
  if (!checkBoard(req, reply)) return reply;
  const limit = Number(req.query.limit ?? 10);
  const offset = Number(req.query.offset ?? 0);
  const [[, rows], [, total]] = await redis
    .multi()
    .zrange(K.day, offset, offset + limit - 1, 'REV', 'WITHSCORES')
    .zcard(K.day)
    .exec();
  return page(offset, rows, total);
});

app.get('/v1/boards/:board/:window/members/:member/around', async (req, reply) => {
  if (!checkBoard(req, reply)) return reply;
  const size = Number(req.query.size ?? 5);
  const { member } = req.params;
  const [[, rank], [, total]] = await redis.multi().zrevrank(K.day, member).zcard(K.day).exec();
  if (rank === null) return notRanked(reply, member);
  const start = Math.max(0, Math.min(rank - Math.floor(size / 2), total - size));
  const rows = await redis.zrange(K.day, start, start + size - 1, 'REV', 'WITHSCORES');
  return page(start, rows, total);
});

// Centred on the rank, shifted at either end so that it still holds `size` entries. The
// slice is asked for with the count, assuming no shift; only near the end is it asked again.
app.get('/v1/boards/:board/:window/ranks/:rank/around', async (req, reply) => {
  if (!checkBoard(req, reply)) return reply;
  const rank = Number(req.params.rank);
  const size = Number(req.query.size ?? 5);
  if (!Number.isInteger(rank) || rank < 1) return limitExceeded(reply, 'rank', rank);
  const wanted = Math.max(0, rank - 1 - Math.floor(size / 2));
  const [[, total], [, first]] = await redis
    .multi()
    .zcard(K.day)
    .zrange(K.day, wanted, wanted + size - 1, 'REV', 'WITHSCORES')
    .exec();
  const start = Math.max(0, Math.min(wanted, total - size));
  const rows = start === wanted
    ? first
    : await redis.zrange(K.day, start, start + size - 1, 'REV', 'WITHSCORES');
  return page(start, rows, total);
});

app.get('/v1/boards/:board/:window/members/:member', async (req, reply) => {
  if (!checkBoard(req, reply)) return reply;
  const { member } = req.params;
  const [[, rank], [, score], [, meta], [, total]] = await redis
    .multi()
    .zrevrank(K.day, member)
    .zscore(K.day, member)
    .hget(K.meta, member)
    .zcard(K.day)
    .exec();
  if (rank === null) return notRanked(reply, member);
  // The extras Seasons answers with an entry: the share strictly worse, the gap to the
  // nearest strictly better score (a second round trip: both need the score).
  const [[, worse], [, better]] = await redis
    .multi()
    .zcount(K.day, '-inf', `(${score}`)
    .zrange(K.day, `(${score}`, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    .exec();
  return {
    rank: rank + 1, member, score: Number(score), metadata: meta ? JSON.parse(meta) : {},
    percentile: (100 * worse) / total,
    gap_up: better.length ? Math.abs(Number(better[1]) - Number(score)) : null,
    total,
  };
});

const lookupSchema = {
  body: {
    type: 'object',
    required: ['members'],
    additionalProperties: false,
    properties: {
      members: {
        type: 'array',
        maxItems: 1000,
        items: { type: 'string', minLength: 1, maxLength: 128 },
      },
    },
  },
};

// A friends board: the ranked ones among the members asked, best first.
app.post('/v1/boards/:board/:window/lookup', { schema: lookupSchema }, async (req, reply) => {
  if (!checkBoard(req, reply)) return reply;
  const members = [...new Set(req.body.members)];
  if (!members.length) return [];
  const tx = redis.multi();
  for (const m of members) tx.zrevrank(K.day, m).zscore(K.day, m);
  const places = await tx.exec();
  const found = [];
  members.forEach((member, i) => {
    const rank = places[2 * i][1];
    if (rank !== null) found.push({ rank: rank + 1, member, score: Number(places[2 * i + 1][1]) });
  });
  if (!found.length) return [];
  found.sort((a, b) => a.rank - b.rank);
  const metas = await redis.hmget(K.meta, ...found.map((e) => e.member));
  return found.map((e, i) => ({ ...e, metadata: metas[i] ? JSON.parse(metas[i]) : {} }));
});

// The last `n` local days up to today, oldest first, as YYYY-MM-DD; remembered until the day
// (or `n`) changes. en-CA formats a date as YYYY-MM-DD.
const localDate = new Intl.DateTimeFormat('en-CA', {
  timeZone: cfg.zone, year: 'numeric', month: '2-digit', day: '2-digit',
});
let recent = { today: '', n: 0, days: [] };
function lastDays(n) {
  const today = localDate.format(new Date());
  if (recent.today !== today || recent.n !== n) {
    const [y, m, d] = today.split('-').map(Number);
    const days = [];
    for (let i = n - 1; i >= 0; i--) {
      days.push(new Date(Date.UTC(y, m - 1, d - i)).toISOString().slice(0, 10));
    }
    recent = { today, n, days };
  }
  return recent.days;
}

app.get('/v1/boards/:board/members/:member/history', async (req, reply) => {
  const window = req.query.window ?? 'day';
  if (req.params.board !== cfg.board || window !== 'day') {
    reply.code(404).send({ error: 'unknown_board', message: 'only the day board', details: null });
    return reply;
  }
  const last = Number(req.query.last ?? 14);
  if (!Number.isInteger(last) || last < 1 || last > 400) return limitExceeded(reply, 'last', last);
  const { member } = req.params;
  const days = lastDays(last);
  const pipe = redis.pipeline();
  for (const day of days) {
    const key = cfg.day_prefix + day;
    pipe.zrevrank(key, member).zscore(key, member);
  }
  const places = await pipe.exec();
  const history = days.map((period, i) => {
    const rank = places[2 * i][1];
    return rank === null
      ? { period, rank: null, score: null }
      : { period, rank: rank + 1, score: Number(places[2 * i + 1][1]) };
  });
  return { board: cfg.board, window: 'day', member, history };
});

const scoresSchema = {
  body: {
    type: 'object',
    required: ['events'],
    additionalProperties: false,
    properties: {
      events: {
        type: 'array',
        maxItems: 10000,
        items: {
          type: 'object',
          required: ['board', 'member', 'value'],
          properties: {
            board: { type: 'string', const: cfg.board },
            member: { type: 'string', minLength: 1, maxLength: 128 },
            value: { type: 'number' },
            event_id: { type: 'string', minLength: 1, maxLength: 128 },
            metadata: { type: 'object' },
          },
        },
      },
    },
  },
};

app.post('/v1/scores', { schema: scoresSchema }, async (req, reply) => {
  if (req.headers.authorization !== `Bearer ${cfg.write_token}`) {
    return reply.code(401).send({ error: 'unauthorized', message: 'write token', details: null });
  }
  const { events } = req.body;
  const now = Math.floor(Date.now() / 1000);
  const batchId = randomUUID();
  const tx = redis.multi();
  const ids = [];
  for (const e of events) if (e.event_id !== undefined) ids.push(now, e.event_id);
  if (ids.length) tx.zadd(K.events, 'NX', ...ids);
  const data = [];
  for (const e of events) {
    tx.zincrby(K.day, e.value, e.member);
    tx.zincrby(K.week, e.value * cfg.week_weight, e.member);
    tx.zincrby(K.season, e.value * cfg.season_weight, e.member);
    if (e.metadata !== undefined) data.push(e.member, JSON.stringify(e.metadata));
  }
  if (data.length) tx.hset(K.meta, ...data);
  tx.expireat(K.day, cfg.expire_at.day);
  tx.expireat(K.week, cfg.expire_at.week);
  tx.expireat(K.season, cfg.expire_at.season);
  tx.zremrangebyscore(K.events, '-inf', now - DEDUPE_SECONDS);
  tx.expire(K.events, DEDUPE_SECONDS);
  tx.zadd(K.batches, now, batchId);
  tx.hset(K.batch_results, batchId, `${events.length} 0`);
  tx.expire(K.batches, DEDUPE_SECONDS);
  tx.expire(K.batch_results, DEDUPE_SECONDS);
  const results = await tx.exec();
  const added = ids.length ? results[0][1] : 0;
  const duplicates = ids.length / 2 - added;
  return { applied: events.length - duplicates, duplicates, batch_id: batchId };
});

await app.listen({ host: '127.0.0.1', port: cfg.port });
console.error(`fastify peer on http://127.0.0.1:${cfg.port}/`);
