// Vercel AI SDK (ai, @ai-sdk/openai, @ai-sdk/anthropic) against memgate at
// GATEWAY_URL: for each provider flavour (openai = Responses API,
// openai.chat = Chat Completions, anthropic = Messages) one conversation of
// two requests (generateText, then streamText resending the history), a
// tool loop of two steps, and structured output (generateObject). Prints
// one JSON object of what the SDK returned; the stand-in upstream records
// what memgate forwarded.
import { generateText, streamText, generateObject, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { z } from 'zod';

const base = process.env.GATEWAY_URL;
if (!base) { console.error('GATEWAY_URL is not set'); process.exit(2); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function providers(conv) {
  const headers = { 'X-Memory-User': 'ana', 'X-Memory-Conversation': conv };
  const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-client', headers });
  const anthropic = createAnthropic({ baseURL: `${base}/v1`, apiKey: 'sk-ant-client', headers });
  return {
    responses: openai('gpt-4o-mini'),
    chat: openai.chat('gpt-4o-mini'),
    anthropic: anthropic('claude-sonnet-4-5'),
  };
}

const weather = tool({
  description: 'Current weather for a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `18C and sunny in ${city}`,
});

async function flavour(name) {
  const out = {};
  const conv = `ai-${name}-conv`;
  const model = providers(conv)[name];
  const messages = [{ role: 'user', content: 'I live in Lisbon and I love trains.' }];
  const first = await generateText({ model, messages });
  out.first = first.text;
  messages.push(...first.response.messages);
  await sleep(2500); // capture and fact extraction run after the reply
  messages.push({ role: 'user', content: 'Where do I live?' });
  const s = streamText({ model, messages });
  let streamed = '';
  for await (const d of s.textStream) streamed += d;
  out.second_streamed = streamed;
  out.second_text = await s.text;

  const toolModel = providers(`ai-${name}-tools`)[name];
  const t = await generateText({
    model: toolModel, tools: { get_weather: weather }, stopWhen: stepCountIs(3),
    prompt: 'What is the weather in Porto?',
  });
  out.tool_steps = t.steps.length;
  out.tool_text = t.text;
  out.tool_calls = t.steps.flatMap((s) => s.toolCalls.map((c) => c.toolName));

  const ts = streamText({
    model: providers(`ai-${name}-tools-stream`)[name], tools: { get_weather: weather }, stopWhen: stepCountIs(3),
    prompt: 'What is the weather in Porto?',
  });
  let tsText = '';
  for await (const d of ts.textStream) tsText += d;
  out.tool_stream_text = tsText;
  out.tool_stream_steps = (await ts.steps).length;

  const o = await generateObject({
    model: providers(`ai-${name}-object`)[name],
    schema: z.object({ city: z.string(), temp: z.number() }),
    prompt: 'Weather in Porto as JSON.',
  });
  out.object = o.object;
  return out;
}

const result = {};
let failed = false;
for (const name of ['responses', 'chat', 'anthropic']) {
  try {
    result[name] = await flavour(name);
  } catch (err) {
    failed = true;
    result[name] = { error: String(err?.stack || err), body: err?.responseBody, status: err?.statusCode };
  }
}
console.log(JSON.stringify(result, null, 1));
process.exit(failed ? 1 : 0);
