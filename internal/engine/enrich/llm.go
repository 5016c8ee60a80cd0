package enrich

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/memory"
)

// ErrBadReply reports a summariser reply that is not the JSON asked for.
var ErrBadReply = errors.New("summariser reply invalid")

// Chatter is the one call the model summariser makes (go-openai's client).
type Chatter interface {
	CreateChatCompletion(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error)
}

// LLM summarises with an OpenAI-compatible chat model, asking for JSON
// {summary, key_events[], preserved:{numbers[], dates[], decisions[]}}. An
// invalid reply (not that JSON, or a summary CheckSummary rejects) is retried
// once with the reason.
type LLM struct {
	client Chatter
	model  string
	count  func(string) int
}

// NewLLM returns a model summariser using client and model; count measures
// the summary so an over-long one counts as invalid.
func NewLLM(client Chatter, model string, count func(string) int) *LLM {
	return &LLM{client: client, model: model, count: count}
}

const systemPrompt = `You maintain the rolling summary of a conversation between a user and an assistant.
Fold the previous summary and the new messages into one updated summary written in the third person.
Keep every specific the user may need later verbatim: amounts and numbers, dates, names, places, goals, limits, preferences and decisions. Drop small talk.
Reply with JSON only, exactly: {"summary": string, "key_events": [string], "preserved": {"numbers": [string], "dates": [string], "decisions": [string]}}.`

// Summarize asks the model for the next summary version.
func (l *LLM) Summarize(ctx context.Context, in Input) (Output, error) {
	var b strings.Builder
	if in.Previous != nil && in.Previous.Text != "" {
		// Its line breaks are indented as a message's are: a summary a
		// stored message steered cannot start a line that reads as this
		// prompt's heading or as a message; nor can it write a control
		// token ("<|im_start|>") that opens a turn.
		fmt.Fprintf(&b, "Previous summary:\n%s\n\n", memory.IndentBreaks(memory.QuoteControlTokens(in.Previous.Text), "  "))
	}
	b.WriteString("New messages:\n")
	for _, m := range in.Messages {
		// Only the user's and the assistant's words are summarised: a
		// tool's result (a fetched page, an API's answer) is a third
		// party's text, never read as instructions by the summariser nor
		// carried into memory (the extractive summariser skips it too);
		// the assistant's reply after it says what the conversation took
		// from it.
		if m.Role != "user" && m.Role != "assistant" {
			continue
		}
		// A message's own line breaks are indented, so its text cannot
		// start a line that reads as another role's words, and its control
		// tokens quoted, so it cannot open a turn.
		fmt.Fprintf(&b, "%s: %s\n", m.Role, memory.IndentBreaks(memory.QuoteControlTokens(m.Answer()), "  "))
	}
	fmt.Fprintf(&b, "\nKeep the summary under %d tokens.", in.MaxTokens)
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: systemPrompt},
		{Role: openai.ChatMessageRoleUser, Content: b.String()},
	}
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := l.client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
			Model:          l.model,
			Messages:       msgs,
			Temperature:    0,
			MaxTokens:      in.MaxTokens * 2,
			ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
		})
		if err != nil {
			return Output{}, fmt.Errorf("summarise: %w", err)
		}
		if len(resp.Choices) == 0 {
			lastErr = fmt.Errorf("%w: no choices", ErrBadReply)
			continue
		}
		reply := resp.Choices[0].Message.Content
		out, err := l.validate(reply, in)
		if err == nil {
			return out, nil
		}
		lastErr = err
		// The reply goes back quoted: a model that decoded "&lt;|" in its
		// prompt may write the control token itself.
		msgs = append(msgs,
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: memory.QuoteControlTokens(reply)},
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: "That reply was invalid: " + err.Error() + ". Reply again with the JSON object only."},
		)
	}
	return Output{}, lastErr
}

// validate parses a reply and checks it with CheckSummary: a reply that is
// not the JSON asked for is ErrBadReply, one whose summary CheckSummary
// refuses is ErrSummaryRejected.
func (l *LLM) validate(reply string, in Input) (Output, error) {
	reply = strings.TrimSpace(reply)
	reply = strings.TrimPrefix(reply, "```json")
	reply = strings.TrimPrefix(reply, "```")
	reply = strings.TrimSuffix(reply, "```")
	dec := json.NewDecoder(strings.NewReader(reply))
	var out Output
	if err := dec.Decode(&out); err != nil {
		return Output{}, fmt.Errorf("%w: not the JSON object asked for: %v", ErrBadReply, err)
	}
	if strings.TrimSpace(out.Summary) == "" {
		return Output{}, fmt.Errorf("%w: empty summary", ErrBadReply)
	}
	if err := CheckSummary(in, out, l.count); err != nil {
		return Output{}, err
	}
	return out, nil
}
