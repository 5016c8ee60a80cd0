package memory

import "encoding/json"

// Prefilled returns what an exchange stores of a request that asked the
// model to go on with the assistant message its history ends with: a
// "continue" of a reply cut off (SillyTavern, LibreChat), or a reply the
// client started itself (an Anthropic prefill). prior and turn are the
// exchange's (Cut.Prior, Cut.Turn), reply the model's answer. When turn
// is empty, prior ends with an assistant message of text alone (a string
// or text parts: textOnly) and reply is text alone, the client shows, and
// resends from then on, that message's text followed by the reply's:
// joined is the reply so, its content a string (its other fields the
// reply's), and rest is prior without that message. The
// save stores joined in that message's place — a partial reply memgate
// stored is superseded by it, as a regenerated one is — so the chat's
// next request, which resends the joined reply, goes on from it instead
// of parting from a conversation holding the two halves as two replies.
// Otherwise ok is false, and the exchange stores prior, turn and reply as
// they are.
func Prefilled(prior, turn []Message, reply Message) (rest []Message, joined Message, ok bool) {
	if len(turn) > 0 || len(prior) == 0 || reply.Role != "assistant" || reply.Content == "" {
		return prior, reply, false
	}
	last := prior[len(prior)-1]
	if last.Role != "assistant" || !textOnly(last) || !textOnly(reply) {
		return prior, reply, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(reply.Raw, &fields); err != nil {
		return prior, reply, false
	}
	text := last.Content + reply.Content
	content, err := json.Marshal(text)
	if err != nil {
		return prior, reply, false
	}
	fields["content"] = content
	raw, err := json.Marshal(fields)
	if err != nil {
		return prior, reply, false
	}
	joined = reply.Bare()
	joined.Content, joined.Raw = text, raw
	return prior[:len(prior)-1], joined, true
}

// textOnly reports whether m holds text alone: its content a string, or
// text parts only (as a client may send the reply it goes on with, and
// as Content reads them: joined with "\n"), and no calls or refusal.
func textOnly(m Message) bool {
	p := m.Decoded()
	if p.Malformed || p.Calls != nil || p.Refusal != "" {
		return false
	}
	if p.Parts == nil {
		return p.Text == m.Content
	}
	for _, part := range p.Parts {
		if part.Type != "text" {
			return false
		}
	}
	return true
}

// Instructed reports whether msgs (a request's messages, system ones
// included) end with a system or developer message after their last
// assistant one, with no user or tool message after that reply: the
// app's own instruction about the chat (SillyTavern's impersonation,
// "write the next reply as the user", or a quiet prompt asking for a
// summary), not a turn of it. Its reply is not the chat's: it is not
// stored, and the chat's history, which it leaves as it was, goes on.
// SillyTavern's continue with its prefill off (the reply, then its nudge,
// "[Continue your last message …]") has this shape too; only the
// instruction's words, which the user edits and SillyTavern's versions
// changed, tell it apart, and taking an impersonation for it would join
// the user's words to the chat's reply. So it is not stored either, and
// the chat's next turn, resending the reply joined with its
// continuation, stores it as an edit of that reply.
func Instructed(msgs []Message) bool {
	if len(msgs) == 0 || !IsSystem(msgs[len(msgs)-1].Role) {
		return false
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		switch {
		case msgs[i].Role == "assistant":
			return true
		case !IsSystem(msgs[i].Role):
			return false
		}
	}
	return false
}
