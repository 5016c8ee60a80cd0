package prompt

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// reasoningFields are the reply fields that carry a model's reasoning, or
// memgate's digests of it; signedThinking and signedDetails are those that
// hold it as the provider signed or encrypted it, with their digests
// (chat.Message.ThinkingBlocks, chat.ReasoningDetails).
var reasoningFields = []string{"reasoning_content", "reasoning", signedThinking, thinkingDigest, signedDetails, detailsDigest}

const (
	signedThinking = "thinking_blocks"
	thinkingDigest = "thinking_blocks_sha256"
	signedDetails  = "reasoning_details"
	detailsDigest  = "reasoning_details_sha256"
)

// withoutReasoning returns m with the reasoning fields removed from its Raw:
// the store keeps a reply's reasoning, but it does not go back upstream as
// history (providers such as DeepSeek reject reasoning_content in input;
// it costs input tokens; it is the model's, not the conversation's) —
// except, in the tool loop the request continues (loop), what the
// provider signed or encrypted and requires back to continue it, as it
// gave it: when thinking (memory.Request.ReplaysThinking), the signed
// blocks (thinking_blocks, with their digest, which the Anthropic render
// checks), and OpenRouter's signed and encrypted reasoning_details
// (signedOnly) while they still have their digest as received
// (memory.ReasoningIntact). A member is reasoning however its name is
// spelled: with JSON escapes, or in any case (encoding/json, as memgate's
// dialects read a message, matches names case-insensitively;
// isReasoning); only the kept members spelled so are kept. The decoding
// keeps one of a name given twice and the encoding writes each once, so
// no provider reads a second copy; outside the loop, every member that
// isReasoning is cut out of the bytes instead (cutReasoning), every copy.
// Raws that cannot name a reasoning member (mayNameReasoning) are not
// read.
func withoutReasoning(m memory.Message, loop, thinking bool) memory.Message {
	if m.Role != "assistant" || !mayNameReasoning(m.Raw) {
		return m
	}
	if !loop {
		// Nothing is kept: cut the members out of the bytes, which is
		// many times cheaper than decoding and encoding the reply
		// (BenchmarkContinuationReasoning).
		if raw, ok := cutReasoning(m.Raw); ok {
			m.Raw = raw
			return m
		}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(m.Raw, &fields) != nil {
		return m
	}
	var details json.RawMessage
	if d, ok := fields[signedDetails]; ok && loop {
		var digest string // none: stored before digests, or by a client
		if sum, ok := fields[detailsDigest]; ok && json.Unmarshal(sum, &digest) != nil {
			digest = "-" // matches nothing
		}
		if memory.ReasoningIntact(d, digest) {
			details = signedOnly(d)
		}
	}
	removed := false
	for k := range fields {
		keep := loop && thinking && (k == signedThinking || k == thinkingDigest)
		if isReasoning(k) && !keep {
			delete(fields, k)
			removed = true
		}
	}
	if details != nil {
		fields[signedDetails] = details
	}
	if !removed {
		return m
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return m
	}
	m.Raw = raw
	return m
}

// signedOnly returns the details of an OpenRouter reasoning_details array
// that are the provider's own signed or encrypted reasoning — a
// reasoning.text with a signature, a reasoning.encrypted with its data —
// each as stored, in order; nil when there are none or raw is not an
// array. Summaries and unsigned text are the model's plain reasoning.
func signedOnly(raw json.RawMessage) json.RawMessage {
	var all []json.RawMessage
	if json.Unmarshal(raw, &all) != nil {
		return nil
	}
	kept := all[:0]
	for _, d := range all {
		var v struct {
			Type      string `json:"type"`
			Signature string `json:"signature"`
			Data      string `json:"data"`
		}
		if json.Unmarshal(d, &v) != nil {
			continue
		}
		if v.Type == "reasoning.text" && v.Signature != "" || v.Type == "reasoning.encrypted" && v.Data != "" {
			kept = append(kept, d)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return nil
	}
	return out
}

// isReasoning reports whether a member name is one of reasoningFields as
// encoding/json matches names (Unicode case folding: strings.EqualFold).
func isReasoning(name string) bool {
	for _, f := range reasoningFields {
		if strings.EqualFold(name, f) {
			return true
		}
	}
	return false
}

// mayNameReasoning reports whether the JSON raw may have a member that
// isReasoning, without decoding it: whether a string in it starts with
// "reasoning" or "thinking_blocks" in any ASCII case (every one of
// reasoningFields does), or it holds what
// would let a name spell them otherwise — an escape of an ASCII letter or
// '_' (or one it cannot read), or a letter that folds to an ASCII one
// (U+017F ſ, U+212A Kelvin sign; no other does).
func mayNameReasoning(raw []byte) bool {
	for rest := raw; ; {
		i := bytes.Index(rest, []byte(`\u`))
		if i < 0 {
			break
		}
		rest = rest[i+2:]
		if len(rest) < 4 {
			return true
		}
		r, ok := hex4(rest)
		if !ok || r == '_' || r < utf8.RuneSelf && unicode.IsLetter(r) || r == 0x17F || r == 0x212A {
			return true
		}
	}
	if bytes.Contains(raw, []byte("\u017f")) || bytes.Contains(raw, []byte("\u212a")) {
		return true
	}
	for rest := raw; ; {
		i := bytes.IndexByte(rest, '"')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
		if hasFoldPrefix(rest, "reasoning") || hasFoldPrefix(rest, signedThinking) {
			return true
		}
	}
}

// hex4 reads the four hexadecimal digits b starts with (of a \u escape).
func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// hasFoldPrefix reports whether b starts with the lower-case ASCII prefix
// in any ASCII case.
func hasFoldPrefix(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// cutReasoning returns the JSON object raw without its members that
// isReasoning, each other member byte for byte, in order (whitespace
// between members is not kept); raw itself when it has none. It reads
// raw in one pass, without decoding values: a member's name is decoded
// (json.Unmarshal) only when it has an escape or a non-ASCII byte. ok is
// false when raw is not a JSON object as far as it reads it.
func cutReasoning(raw []byte) (_ []byte, ok bool) {
	i := skipBlank(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipBlank(raw, i+1)
	var kept [][2]int
	cut := false
	for n := 0; ; n++ {
		if i >= len(raw) {
			return nil, false
		}
		if raw[i] == '}' {
			break
		}
		if n > 0 {
			if raw[i] != ',' {
				return nil, false
			}
			i = skipBlank(raw, i+1)
		}
		if i >= len(raw) || raw[i] != '"' {
			return nil, false
		}
		start := i
		nameEnd := stringEnd(raw, i)
		if nameEnd < 0 {
			return nil, false
		}
		i = skipBlank(raw, nameEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		end := valueEnd(raw, skipBlank(raw, i+1))
		if end < 0 {
			return nil, false
		}
		name, ok := memberName(raw[start:nameEnd])
		if !ok {
			return nil, false
		}
		if isReasoning(name) {
			cut = true
		} else {
			kept = append(kept, [2]int{start, end})
		}
		i = skipBlank(raw, end)
	}
	if !cut {
		return raw, true
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	for k, span := range kept {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, raw[span[0]:span[1]]...)
	}
	return append(out, '}'), true
}

// memberName returns the name the quoted JSON string q spells.
func memberName(q []byte) (string, bool) {
	plain := true
	for _, c := range q[1 : len(q)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(q[1 : len(q)-1]), true
	}
	var name string
	if json.Unmarshal(q, &name) != nil {
		return "", false
	}
	return name, true
}

// skipBlank returns the index of the first byte of raw from i on that is
// not JSON whitespace.
func skipBlank(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// raw[i] (a '"'), or -1 when it does not end.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); {
		k := bytes.IndexAny(raw[j:], `"\`)
		if k < 0 {
			return -1
		}
		j += k
		if raw[j] == '"' {
			return j + 1
		}
		j += 2 // an escape: the backslash and the byte it escapes
	}
	return -1
}

// valueEnd returns the index just past the JSON value that starts at
// raw[i], or -1 when it does not end there.
func valueEnd(raw []byte, i int) int {
	if i >= len(raw) {
		return -1
	}
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); {
			switch raw[j] {
			case '"':
				if j = stringEnd(raw, j); j < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return -1
	}
	j := i
	for j < len(raw) && raw[j] != ',' && raw[j] != '}' && raw[j] != ']' && raw[j] != ' ' && raw[j] != '\t' && raw[j] != '\n' && raw[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// withoutThinking returns the assistant message m with the reasoning block
// its text opens with, if any (memory.Message.Answer: "<think>…</think>",
// as an OpenAI-compatible server relays a reasoning model's reasoning in
// the content), left out of its content — a string content, or its first
// part when that is a text part, which is dropped when nothing else is
// left of it — and its text and token count with it: the store keeps the
// reply as captured, but the model's past reasoning does not go back
// upstream as history, as it does not in reasoning_content
// (withoutReasoning). Any other message, one without such a block, and
// one whose JSON cannot be read or names its content more than once (in
// any case: encoding/json, as ParseMessage reads it, matches names
// case-insensitively) is returned as it is.
func withoutThinking(m memory.Message) memory.Message {
	if m.Role != "assistant" || !strings.Contains(m.Content, thinkClose) || m.Answer() == m.Content {
		return m
	}
	if len(m.Raw) == 0 { // encoded from its fields (rawOf)
		m.Content, m.Tokens = m.Answer(), 0
		return m
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(m.Raw, &fields) != nil {
		return m
	}
	key := ""
	for k := range fields {
		if strings.EqualFold(k, "content") {
			if key != "" {
				return m
			}
			key = k
		}
	}
	content, ok := answerContent(fields[key])
	if key == "" || !ok {
		return m
	}
	fields[key] = content
	if out, err := withFields(m, fields); err == nil {
		return out
	}
	return m
}

// thinkClose is how a reasoning block closes (see memory.Message.Answer).
const thinkClose = "</think>"

// answerContent returns a reply's content (a JSON string or array of
// parts) with the reasoning block its text opens with left out (see
// withoutThinking); false when it opens with none.
func answerContent(raw json.RawMessage) (json.RawMessage, bool) {
	answer := func(s string) (string, bool) {
		a := memory.Message{Role: "assistant", Content: s}.Answer()
		return a, a != s
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		a, ok := answer(s)
		if !ok {
			return nil, false
		}
		b, err := json.Marshal(a)
		return b, err == nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return nil, false
	}
	var first map[string]json.RawMessage
	var typ string
	if json.Unmarshal(parts[0], &first) != nil || json.Unmarshal(first["type"], &typ) != nil ||
		typ != "text" && typ != "output_text" || json.Unmarshal(first["text"], &s) != nil {
		return nil, false
	}
	a, ok := answer(s)
	if !ok {
		return nil, false
	}
	if a == "" {
		parts = parts[1:]
	} else {
		text, err := json.Marshal(a)
		if err != nil {
			return nil, false
		}
		first["text"] = text
		if parts[0], err = json.Marshal(first); err != nil {
			return nil, false
		}
	}
	b, err := json.Marshal(parts)
	return b, err == nil
}
