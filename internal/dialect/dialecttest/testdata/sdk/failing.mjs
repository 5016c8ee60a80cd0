// Calls, with the SDKs' default retries, chat.completions.create of the
// openai SDK against OPENAI_BASE_URL (ending in /v1) and messages.create
// of @anthropic-ai/sdk against ANTHROPIC_BASE_URL (the server root), each
// once, expecting each to fail. Prints one JSON object: per SDK the
// error's class, status, message and X-Should-Retry header.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { headers, need, run } from './common.mjs';

const openai = new OpenAI({ baseURL: need('OPENAI_BASE_URL'), apiKey: 'sk-sdk-harness', defaultHeaders: headers });
const anthropic = new Anthropic({ baseURL: need('ANTHROPIC_BASE_URL'), apiKey: 'sk-ant-sdk-harness', defaultHeaders: headers });

// failure returns what the SDK threw for call, or fails when it succeeded.
async function failure(call) {
  try {
    await call();
  } catch (err) {
    return { class: err.constructor.name, status: err.status ?? null, message: err.message, should_retry: err.headers?.get?.('x-should-retry') ?? null };
  }
  throw new Error('the call succeeded');
}

run(async () => ({
  openai: await failure(() => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })),
  anthropic: await failure(() => anthropic.messages.create({ model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })),
}));
