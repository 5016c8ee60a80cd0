// Runs @anthropic-ai/sdk messages.create against ANTHROPIC_BASE_URL (the
// server root: the SDK adds /v1/messages): a tool-use round trip without
// streaming, then the same round trip streamed (raw events and the
// MessageStream helper). Prints one JSON object.
import Anthropic from '@anthropic-ai/sdk';
import { headers, need, run } from './common.mjs';

const client = new Anthropic({
  baseURL: need('ANTHROPIC_BASE_URL'),
  apiKey: process.env.ANTHROPIC_API_KEY || 'sk-ant-sdk-harness',
  defaultHeaders: headers,
  maxRetries: 0,
});
const model = process.env.ANTHROPIC_MODEL || 'claude-sonnet-4-6';
const question = process.env.SDK_QUESTION || 'What is the weather in Porto?';
const tools = [{
  name: 'get_weather',
  description: 'Current weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

// roundTrip asks, answers the tool call, and returns both replies.
async function roundTrip(create) {
  const messages = [{ role: 'user', content: question }];
  const first = await create({ model, max_tokens: 512, system: 'You are a travel assistant.', tools, messages });
  const use = first.content.find((b) => b.type === 'tool_use');
  if (!use) return { first, second: null };
  messages.push({ role: 'assistant', content: first.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: `18C and sunny in ${use.input.city}` }] });
  const second = await create({ model, max_tokens: 512, system: 'You are a travel assistant.', tools, messages });
  return { first, second };
}

function summary({ first, second }) {
  const text = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  const use = first.content.find((b) => b.type === 'tool_use');
  return {
    first: { stop_reason: first.stop_reason, text: text(first), tool_use: use ? { id: use.id, name: use.name, input: use.input } : null, usage: first.usage },
    second: second && { stop_reason: second.stop_reason, text: text(second), usage: second.usage },
  };
}

run(async () => {
  const plain = await roundTrip((p) => client.messages.create(p));

  const events = {};
  const raw = await roundTrip(async (p) => {
    const stream = await client.messages.create({ ...p, stream: true });
    const content = [];
    let stop_reason = null;
    const usage = {};
    for await (const ev of stream) {
      events[ev.type] = (events[ev.type] || 0) + 1;
      if (ev.type === 'message_start') Object.assign(usage, ev.message.usage);
      if (ev.type === 'content_block_start') content[ev.index] = { ...ev.content_block, _json: '' };
      if (ev.type === 'content_block_delta') {
        const b = content[ev.index];
        if (ev.delta.type === 'text_delta') b.text += ev.delta.text;
        if (ev.delta.type === 'input_json_delta') b._json += ev.delta.partial_json;
      }
      if (ev.type === 'content_block_stop') {
        const b = content[ev.index];
        if (b.type === 'tool_use' && b._json) b.input = JSON.parse(b._json);
        delete b._json;
      }
      if (ev.type === 'message_delta') {
        stop_reason = ev.delta.stop_reason;
        Object.assign(usage, ev.usage);
      }
    }
    return { content, stop_reason, usage };
  });

  const helper = await roundTrip((p) => client.messages.stream(p).finalMessage());
  return { non_stream: summary(plain), stream: summary(raw), stream_events: events, stream_helper: summary(helper) };
});
