// sdkload: drive a tokentriage gateway (or a fleet of them) with the
// official Node SDKs at their default settings (2 retries, their own
// backoff and Retry-After handling), many calls in flight at once, and
// report what happened to every HTTP attempt: how many were admitted, how
// many were refused and by which limit, how many were the SDKs' retries,
// what the first refusal said (headers and body), and the usage the
// clients were told, to set beside `tokentriage spend` and /tt/v1/me.
//
//   mkdir /tmp/sdkload && cd /tmp/sdkload && npm install openai @anthropic-ai/sdk
//   NODE_PATH=/tmp/sdkload/node_modules node scripts/sdkload.mjs \
//     --gateways http://127.0.0.1:8790,http://127.0.0.1:8792,http://127.0.0.1:8794 \
//     --key "$TT_KEY" --calls 300 [--rounds 1] [--max-tokens 16] [--delay-ms 0] [--pause-ms 3000]
//
// Calls rotate over the gateways and over six kinds: chat completions,
// chat streamed (with include_usage), responses, responses streamed,
// Anthropic messages and messages streamed. --delay-ms holds each answer
// at the stub upstream (X-Stub-Delay-Ms), to see a concurrency cap; the
// peak of admitted calls in flight is measured from the client's side (an
// upper bound). Rounds are --pause-ms apart. Nothing here is part of
// `make test`.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), 'x.js'));
const OpenAI = require('openai').default ?? require('openai');
const Anthropic = require('@anthropic-ai/sdk').default ?? require('@anthropic-ai/sdk');

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => {
  if (v.startsWith('--')) a.push([v.slice(2), all[i + 1]]);
  return a;
}, []));
const gateways = (args.gateways || 'http://127.0.0.1:8790').split(',');
const key = args.key || process.env.TT_KEY;
const calls = +(args.calls || 300), rounds = +(args.rounds || 1);
const maxTokens = +(args['max-tokens'] || 16), delayMs = +(args['delay-ms'] || 0), pauseMs = +(args['pause-ms'] || 3000);
if (!key) {
  console.error('sdkload: no key: pass --key or set TT_KEY');
  process.exit(2);
}

const attempts = [];
const keep = ['retry-after', 'retry-after-ms', 'x-should-retry', 'ratelimit', 'x-tt-refusal-type', 'x-tt-refused-by',
  'x-tt-request-id', 'x-request-id', 'request-id', 'x-tt-suspended'];
// recording wraps fetch: every attempt, the SDKs' retries included.
function recording(gw) {
  return async (url, init) => {
    const t0 = Date.now();
    const r = await fetch(url, init);
    const a = { gw, url: String(url), status: r.status, t0, t1: Date.now(), headers: {} };
    for (const h of keep) if (r.headers.get(h) !== null) a.headers[h] = r.headers.get(h);
    if (r.status !== 200) a.body = await r.clone().text();
    attempts.push(a);
    return r;
  };
}
const usage = { input: 0, output: 0, calls: 0 };
const add = (i, o) => { usage.input += i; usage.output += o; usage.calls++; };
const opts = delayMs ? { headers: { 'X-Stub-Delay-Ms': String(delayMs) } } : undefined;
const msg = [{ role: 'user', content: 'hello there' }];

function call(i) {
  const gw = gateways[i % gateways.length];
  const oa = new OpenAI({ apiKey: key, baseURL: gw + '/v1', fetch: recording(gw) });
  const an = new Anthropic({ apiKey: key, baseURL: gw, fetch: recording(gw) });
  switch (i % 6) {
    case 0:
      return oa.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: maxTokens, messages: msg }, opts)
        .then(r => add(r.usage.prompt_tokens, r.usage.completion_tokens));
    case 1:
      return oa.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: maxTokens, messages: msg, stream: true, stream_options: { include_usage: true } }, opts)
        .then(async s => { let u; for await (const c of s) if (c.usage) u = c.usage; add(u.prompt_tokens, u.completion_tokens); });
    case 2:
      return oa.responses.create({ model: 'gpt-4o-mini', max_output_tokens: maxTokens, input: 'hello there' }, opts)
        .then(r => add(r.usage.input_tokens, r.usage.output_tokens));
    case 3:
      return oa.responses.create({ model: 'gpt-4o-mini', max_output_tokens: maxTokens, input: 'hello there', stream: true }, opts)
        .then(async s => {
          let u;
          for await (const e of s) if (e.type === 'response.completed' || e.type === 'response.incomplete') u = e.response.usage;
          add(u.input_tokens, u.output_tokens);
        });
    case 4:
      return an.messages.create({ model: 'claude-3-5-haiku-latest', max_tokens: maxTokens, messages: msg }, opts)
        .then(r => add(r.usage.input_tokens, r.usage.output_tokens));
    default:
      return an.messages.stream({ model: 'claude-3-5-haiku-latest', max_tokens: maxTokens, messages: msg }, opts)
        .finalMessage().then(r => add(r.usage.input_tokens, r.usage.output_tokens));
  }
}

// peak returns the most admitted attempts in flight at once.
function peak(as) {
  const ev = [];
  for (const a of as) ev.push([a.t0, 1], [a.t1, -1]);
  ev.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let c = 0, m = 0;
  for (const [, d] of ev) m = Math.max(m, c += d);
  return m;
}

const start = Date.now();
for (let round = 0; round < rounds; round++) {
  const from = attempts.length;
  const res = await Promise.allSettled(Array.from({ length: calls }, (_, i) => call(i)));
  const mine = attempts.slice(from);
  const by = {};
  for (const a of mine) {
    const k = a.status + (a.headers['x-tt-refused-by'] ? ' ' + a.headers['x-tt-refused-by'] : '') +
      (a.headers['x-tt-suspended'] ? ' suspended' : '') + (a.status !== 200 ? ' should-retry=' + a.headers['x-should-retry'] : '');
    by[k] = (by[k] || 0) + 1;
  }
  const errors = {};
  for (const r of res) if (r.status === 'rejected') {
    const k = `${r.reason?.constructor?.name} ${r.reason?.status ?? String(r.reason).slice(0, 80)}`;
    errors[k] = (errors[k] || 0) + 1;
  }
  const ok = mine.filter(a => a.status === 200);
  console.log(JSON.stringify({
    round, at_s: (mine[0]?.t0 - start) / 1000, calls, served: res.filter(r => r.status === 'fulfilled').length,
    attempts: mine.length, retries: mine.length - calls, by, errors,
    peak_in_flight: { fleet: peak(ok), per_gateway: gateways.map(g => peak(ok.filter(a => a.gw === g))) },
  }));
  if (round + 1 < rounds) await new Promise(r => setTimeout(r, pauseMs));
}
console.log(JSON.stringify({ usage_told_to_clients: usage }));
const first = attempts.find(a => a.status !== 200);
if (first) console.log('first refusal:', JSON.stringify(first.headers), '\n' + first.body);
