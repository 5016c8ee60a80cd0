// Package pathological is a corpus of hostile chat requests: inputs built to
// make a memory-on request cost more than its size — long runs of one
// character class, repeated token prefixes, digit runs, unclosed quotes,
// deeply nested JSON, many tool calls, many tiny messages. Tests assert
// their cost by counting work; benchmarks report their CPU per request.
package pathological

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Model is the model every request of the corpus names.
const Model = "gpt-4o-mini"

// Input is one hostile request.
type Input struct {
	// Name identifies the input (a benchmark or subtest name).
	Name string
	// Text is the text the input is made of: its one user message's
	// content, or what its messages carry in all.
	Text string
	// Body is the chat completion request, without a user (the caller
	// names one in X-Memory-User).
	Body []byte
}

// Size is the length of the long single-message inputs (240 KB, as in
// issue 24's reproduction).
const Size = 240 << 10

// Inputs returns the corpus at its full size.
func Inputs() []Input { return Sized(Size) }

// Sized returns the corpus with its long texts size bytes long and its
// counts (nesting, tool calls, messages) scaled in proportion: tests
// compare two sizes to tell linear work from worse.
func Sized(size int) []Input {
	scale := func(n int) int { return max(1, int(int64(n)*int64(size)/Size)) }
	var in []Input
	one := func(name, text string) {
		in = append(in, Input{Name: name, Text: text, Body: chat(message("user", text))})
	}
	one("letters", letters(size))
	one("one-letter", strings.Repeat("a", size))
	one("spaces", "start"+strings.Repeat(" ", size)+"end")
	one("newlines", "start"+strings.Repeat(" \n", size/2)+"end")
	one("digits", strings.Repeat("7", size))
	one("digit-groups", repeatTo("4111 ", size))
	one("punctuation", repeatTo("!?.,;:-_*", size))
	one("cjk", repeatTo("日本語中文한국어", size))
	one("emoji", repeatTo("🎉👩‍👩‍👧🇫🇷", size))
	one("marks", "a"+strings.Repeat("\u0301", size/2))
	one("jwt-prefix", strings.Repeat("eyJ-", scale(10000)))
	one("unclosed-quotes", `"`+repeatTo(`x \"`, size))
	one("credential-keys", repeatTo(`"password": "`, size))
	one("nested-json-text", strings.Repeat(`{"a":[`, size/12)+strings.Repeat(`]}`, size/12))

	// Deeply nested JSON in the request itself, in a field memgate does
	// not read (encoding/json stops at 10000 levels).
	depth := min(scale(9000), 9000)
	nested := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
	in = append(in, Input{
		Name: "nested-json-body",
		Text: "What did I say about nesting?",
		Body: []byte(`{"model":"` + Model + `","metadata_extra":` + nested +
			`,"messages":[{"role":"user","content":"What did I say about nesting?"}]}`),
	})

	// An assistant turn with many tool calls and their results.
	var msgs []json.RawMessage
	var calls []any
	tools := scale(2000)
	for i := range tools {
		calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
			"function": map[string]any{"name": "lookup", "arguments": fmt.Sprintf(`{"q":"item %d"}`, i)}})
	}
	msgs = append(msgs, message("user", "Look up every item."),
		mustJSON(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}))
	var text strings.Builder
	for i := range tools {
		r := fmt.Sprintf("item %d: in stock", i)
		text.WriteString(r + "\n")
		msgs = append(msgs, mustJSON(map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", i), "content": r}))
	}
	in = append(in, Input{Name: "tool-calls", Text: text.String(), Body: chat(msgs...)})

	// Many tiny messages: a client's whole history sent at once.
	msgs = msgs[:0]
	text.Reset()
	for i := range scale(20000) {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, message(role, "ok"))
		text.WriteString("ok\n")
	}
	msgs = append(msgs, message("user", "and now?"))
	in = append(in, Input{Name: "tiny-messages", Text: text.String(), Body: chat(msgs...)})
	return in
}

// Find returns the input named name.
func Find(name string) (Input, bool) {
	for _, in := range Inputs() {
		if in.Name == name {
			return in, true
		}
	}
	return Input{}, false
}

// letters returns n pseudo-random lowercase ASCII letters (a fixed
// sequence): a piece the byte-pair merge cannot shorten quickly.
func letters(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return string(b)
}

// repeatTo repeats unit to at least n bytes.
func repeatTo(unit string, n int) string {
	return strings.Repeat(unit, (n+len(unit)-1)/len(unit))
}

// message is one chat message with text content.
func message(role, content string) json.RawMessage {
	return mustJSON(map[string]string{"role": role, "content": content})
}

// chat is a chat completion request body with msgs.
func chat(msgs ...json.RawMessage) []byte {
	return mustJSON(map[string]any{"model": Model, "messages": msgs})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // unreachable: maps of strings and raw JSON
	}
	return b
}
