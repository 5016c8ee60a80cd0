// Runs openai chat.completions.create against OPENAI_BASE_URL (ending in /v1)
// the way apps use memory without memgate's headers (SCENARIO):
//   full-history: five turns, each resending the whole history, the user
//     named only by the body's "user" field;
//   tool-loop: a client that sends only what is new ("I'm in Kyoto", then
//     "what's the weather there?", answered with a tool call whose result it
//     sends as [user, assistant(tool_calls), tool]).
// Prints one JSON object: the X-Memory-Conversation of every response and
// the assistant texts.
import OpenAI from 'openai';
import { headers, need, run } from './common.mjs';

const client = new OpenAI({
  baseURL: need('OPENAI_BASE_URL'),
  apiKey: process.env.OPENAI_API_KEY || 'sk-sdk-harness',
  defaultHeaders: headers,
  maxRetries: 0,
});
const model = process.env.OPENAI_MODEL || 'gpt-4o-mini';
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];

async function create(params) {
  const { data, response } = await client.chat.completions.create({ model, ...params }).withResponse();
  return { message: data.choices[0].message, conversation: response.headers.get('x-memory-conversation') };
}

async function fullHistory() {
  const messages = [{ role: 'system', content: 'You are a travel assistant.' }];
  const out = { conversations: [], replies: [] };
  for (const text of ['I am Ana.', 'I live in Lisbon.', 'I like trains.', 'I save for Japan.', 'Where do I live?']) {
    messages.push({ role: 'user', content: text });
    const r = await create({ messages, user: 'ana-body-user' });
    out.conversations.push(r.conversation);
    out.replies.push(r.message.content);
    messages.push({ role: 'assistant', content: r.message.content });
  }
  return out;
}

async function toolLoop() {
  const out = { conversations: [], replies: [] };
  let r = await create({ messages: [{ role: 'user', content: "I'm in Kyoto." }] });
  out.conversations.push(r.conversation);
  out.replies.push(r.message.content);
  const ask = { role: 'user', content: "What's the weather there?" };
  r = await create({ messages: [ask], tools });
  out.conversations.push(r.conversation);
  const call = r.message.tool_calls?.[0];
  if (!call) throw new Error('expected a tool call');
  const result = { role: 'tool', tool_call_id: call.id, content: '{"sky":"sunny","c":24}' };
  r = await create({ messages: [ask, r.message, result], tools });
  out.conversations.push(r.conversation);
  out.replies.push(r.message.content);
  return out;
}

run(() => (need('SCENARIO') === 'tool-loop' ? toolLoop() : fullHistory()));
