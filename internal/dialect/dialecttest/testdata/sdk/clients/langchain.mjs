// LangChain JS (@langchain/openai ChatOpenAI, @langchain/anthropic
// ChatAnthropic) against memgate at GATEWAY_URL: invoke, then stream
// resending the history (one conversation of two requests), a bindTools
// loop, and withStructuredOutput. Prints one JSON object of what the
// clients returned; the stand-in upstream records what memgate forwarded.
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { z } from 'zod';

const base = process.env.GATEWAY_URL;
if (!base) { console.error('GATEWAY_URL is not set'); process.exit(2); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const headers = (conv) => ({ 'X-Memory-User': 'lc-user', 'X-Memory-Conversation': conv });

const models = {
  openai: (conv, extra = {}) => new ChatOpenAI({ model: 'gpt-4o-mini', apiKey: 'sk-client', maxRetries: 0,
    configuration: { baseURL: `${base}/v1`, defaultHeaders: headers(conv) }, ...extra }),
  openai_responses: (conv) => models.openai(conv, { useResponsesApi: true }),
  anthropic: (conv) => new ChatAnthropic({ model: 'claude-sonnet-4-5', apiKey: 'sk-ant-client', maxRetries: 0,
    anthropicApiUrl: base, clientOptions: { defaultHeaders: headers(conv) } }),
};

const weatherTool = {
  name: 'get_weather', description: 'Current weather for a city',
  schema: z.object({ city: z.string() }),
};

async function flavour(name) {
  const make = models[name];
  const out = {};
  const history = [new HumanMessage('I live in Lisbon and I love trains.')];
  const first = await make(`lc-${name}-conv`).invoke(history);
  out.first = first.content;
  history.push(first);
  await sleep(2500);
  history.push(new HumanMessage('Where do I live?'));
  let streamed = '';
  for await (const chunk of await make(`lc-${name}-conv`).stream(history)) {
    streamed += typeof chunk.content === 'string' ? chunk.content : chunk.content.map((p) => p.text ?? '').join('');
  }
  out.second_streamed = streamed;

  const withTools = make(`lc-${name}-tools`).bindTools([weatherTool]);
  const msgs = [new HumanMessage('What is the weather in Porto?')];
  const call = await withTools.invoke(msgs);
  out.tool_calls = call.tool_calls.map((c) => `${c.name}(${JSON.stringify(c.args)})`);
  msgs.push(call);
  for (const c of call.tool_calls) msgs.push(new ToolMessage({ content: '18C and sunny in Porto', tool_call_id: c.id }));
  out.tool_answer = (await withTools.invoke(msgs)).content;

  const structured = make(`lc-${name}-object`).withStructuredOutput(z.object({ city: z.string(), temp: z.number() }), { name: 'weather' });
  out.object = await structured.invoke('Weather in Porto as JSON.');
  return out;
}

const result = {};
let failed = false;
for (const name of ['openai', 'openai_responses', 'anthropic']) {
  try {
    result[name] = await flavour(name);
  } catch (err) {
    failed = true;
    result[name] = { error: String(err?.stack || err) };
  }
}
console.log(JSON.stringify(result, null, 1));
process.exit(failed ? 1 : 0);
