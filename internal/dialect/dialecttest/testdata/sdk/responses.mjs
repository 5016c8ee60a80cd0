// Runs openai responses.create against OPENAI_BASE_URL (ending in /v1): a
// function-call round trip without streaming, then streamed (raw events and
// the responses.stream helper). Prints one JSON object.
import OpenAI from 'openai';
import { headers, need, run } from './common.mjs';

const client = new OpenAI({
  baseURL: need('OPENAI_BASE_URL'),
  apiKey: process.env.OPENAI_API_KEY || 'sk-sdk-harness',
  defaultHeaders: headers,
  maxRetries: 0,
});
const model = process.env.OPENAI_MODEL || 'gpt-4.1';
const question = process.env.SDK_QUESTION || 'What is the weather in Porto?';
const tools = [{
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
}];

// roundTrip asks, answers the function call with its output, and returns
// both responses. The history is sent back as items (store: false).
async function roundTrip(create) {
  const input = [{ role: 'user', content: question }];
  const first = await create({ model, instructions: 'You are a travel assistant.', input, tools, store: false });
  const call = first.output.find((i) => i.type === 'function_call');
  if (!call) return { first, second: null };
  input.push(...first.output);
  const { city } = JSON.parse(call.arguments);
  input.push({ type: 'function_call_output', call_id: call.call_id, output: `18C and sunny in ${city}` });
  const second = await create({ model, instructions: 'You are a travel assistant.', input, tools, store: false });
  return { first, second };
}

function summary({ first, second }) {
  const call = first.output.find((i) => i.type === 'function_call');
  return {
    first: { status: first.status, text: first.output_text, function_call: call ? { call_id: call.call_id, name: call.name, arguments: call.arguments } : null, usage: first.usage },
    second: second && { status: second.status, text: second.output_text, usage: second.usage },
  };
}

run(async () => {
  const plain = await roundTrip((p) => client.responses.create(p));

  const events = {};
  const raw = await roundTrip(async (p) => {
    const stream = await client.responses.create({ ...p, stream: true });
    let done = null;
    let text = '';
    for await (const ev of stream) {
      events[ev.type] = (events[ev.type] || 0) + 1;
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') done = ev.response;
    }
    if (!done) throw new Error('stream ended without response.completed');
    return { ...done, output_text: text };
  });

  const helper = await roundTrip((p) => client.responses.stream(p).finalResponse());
  // previous_response_id: the provider holds the history.
  const chained = await client.responses.create({ model, input: 'And tomorrow?', previous_response_id: plain.second?.id ?? plain.first.id });
  return {
    non_stream: summary(plain), stream: summary(raw), stream_events: events, stream_helper: summary(helper),
    previous_response: { status: chained.status, text: chained.output_text },
  };
});
