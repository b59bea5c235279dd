// The Vercel AI SDK's and LangChain's tool and object helpers against a
// tokentriage gateway in front of the stub upstream, at their default
// settings: each case prints "ok NAME" (and the calls it made) or fails
// the script with what went wrong. TestNodeSDKTools runs it.
//
//   TT_GATEWAY=http://127.0.0.1:8790 TT_KEY=tt-vk_… node sdk_tools.mjs
import assert from 'node:assert/strict';
import { generateObject, generateText, streamObject, streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { z } from 'zod';
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { tool as lcTool } from '@langchain/core/tools';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';

const gateway = process.env.TT_GATEWAY;
const key = process.env.TT_KEY;
assert.ok(gateway && key, 'set TT_GATEWAY and TT_KEY');

const openai = createOpenAI({ baseURL: gateway + '/v1', apiKey: key });
const anthropic = createAnthropic({ baseURL: gateway + '/v1', apiKey: key });

const recipe = z.object({
  name: z.string(),
  servings: z.number().int().min(1),
  vegetarian: z.boolean(),
  cuisine: z.enum(['italian', 'french', 'thai']),
  ingredients: z.array(z.object({ name: z.string(), amount: z.string() })).min(1),
  steps: z.array(z.string()).min(2),
  note: z.string().nullable(),
});
const weatherArgs = z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']) });

let calls = 0; // requests the cases send, for the Go side to compare
async function check(name, n, fn) {
  try {
    await fn();
  } catch (e) {
    console.error(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  }
  calls += n;
  console.log(`ok ${name}`);
}

// A tool loop: the model calls the tool, the SDK runs it and sends the
// result back, the model answers in text. Two requests.
async function toolLoop(model) {
  const seen = [];
  const r = await generateText({
    model,
    prompt: 'What is the weather in Paris?',
    tools: {
      weather: tool({
        description: 'The weather in a city',
        inputSchema: weatherArgs,
        execute: async (args) => { seen.push(weatherArgs.parse(args)); return { temperature: 21 }; },
      }),
    },
    stopWhen: stepCountIs(3),
  });
  assert.equal(seen.length, 1, 'the tool ran once');
  assert.equal(r.steps.length, 2, 'two steps: the call and the answer');
  assert.ok(r.text.length > 0, 'a text answer after the tool result');
}

await check('vercel generateObject openai responses', 1, async () => {
  const { object } = await generateObject({ model: openai('gpt-4o-mini'), schema: recipe, prompt: 'A recipe' });
  recipe.parse(object);
});
await check('vercel generateObject openai chat', 1, async () => {
  const { object } = await generateObject({ model: openai.chat('gpt-4o-mini'), schema: recipe, prompt: 'A recipe' });
  recipe.parse(object);
});
await check('vercel generateObject anthropic', 1, async () => {
  const { object } = await generateObject({ model: anthropic('claude-3-5-haiku-latest'), schema: recipe, prompt: 'A recipe' });
  recipe.parse(object);
});
await check('vercel streamObject openai chat', 1, async () => {
  const r = streamObject({ model: openai.chat('gpt-4o-mini'), schema: recipe, prompt: 'A recipe' });
  let partials = 0;
  for await (const _ of r.partialObjectStream) partials++;
  recipe.parse(await r.object);
  assert.ok(partials > 1, 'the object streamed in parts');
});
await check('vercel streamObject anthropic', 1, async () => {
  const r = streamObject({ model: anthropic('claude-3-5-haiku-latest'), schema: recipe, prompt: 'A recipe' });
  for await (const _ of r.partialObjectStream) { /* drain */ }
  recipe.parse(await r.object);
});
await check('vercel tools openai responses', 2, () => toolLoop(openai('gpt-4o-mini')));
await check('vercel tools openai chat', 2, () => toolLoop(openai.chat('gpt-4o-mini')));
await check('vercel tools anthropic', 2, () => toolLoop(anthropic('claude-3-5-haiku-latest')));
await check('vercel streamText tools openai chat', 1, async () => {
  const r = streamText({ model: openai.chat('gpt-4o-mini'), prompt: 'Weather in Paris?', tools: { weather: tool({ inputSchema: weatherArgs }) } });
  const calls = await r.toolCalls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].toolName, 'weather');
  weatherArgs.parse(calls[0].input);
});

const lcOpenAI = new ChatOpenAI({ model: 'gpt-4o-mini', apiKey: key, configuration: { baseURL: gateway + '/v1' } });
const lcAnthropic = new ChatAnthropic({ model: 'claude-3-5-haiku-latest', apiKey: key, anthropicApiUrl: gateway });
const weather = lcTool(async ({ city }) => `21C in ${city}`, { name: 'get_weather', description: 'The weather in a city', schema: weatherArgs });

for (const [name, model] of [['openai', lcOpenAI], ['anthropic', lcAnthropic]]) {
  await check(`langchain withStructuredOutput ${name}`, 1, async () => {
    recipe.parse(await model.withStructuredOutput(recipe).invoke('A recipe'));
  });
  await check(`langchain bindTools ${name}`, 2, async () => {
    const bound = model.bindTools([weather]);
    const ask = new HumanMessage('What is the weather in Paris?');
    const ai = await bound.invoke([ask]);
    assert.equal(ai.tool_calls.length, 1);
    assert.equal(ai.tool_calls[0].name, 'get_weather');
    weatherArgs.parse(ai.tool_calls[0].args);
    const result = await weather.invoke(ai.tool_calls[0]);
    assert.ok(result instanceof ToolMessage);
    const answer = await bound.invoke([ask, ai, result]);
    assert.equal(answer.tool_calls.length, 0, 'an answer, not another call, after the tool result');
    assert.ok(String(answer.content).length > 0 || (Array.isArray(answer.content) && answer.content.length > 0));
  });
  await check(`langchain bindTools stream ${name}`, 1, async () => {
    let all;
    for await (const chunk of await model.bindTools([weather]).stream('What is the weather in Paris?')) all = all ? all.concat(chunk) : chunk;
    assert.equal(all.tool_calls.length, 1);
    weatherArgs.parse(all.tool_calls[0].args);
  });
}

console.log(`calls ${calls}`);
