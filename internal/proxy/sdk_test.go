package proxy

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// sdkClient returns a go-openai client pointed at the gateway.
func sdkClient(g *gateway) *openai.Client {
	cfg := openai.DefaultConfig("sk-client")
	cfg.BaseURL = g.URL + "/v1"
	return openai.NewClientWithConfig(cfg)
}

var weatherTool = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
	Name:       "get_weather",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
}}

func TestSDKChat(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "The answer is 42."}))
	client := sdkClient(mustGateway(t, up, nil, Deps{}))
	resp, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "What is the answer?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "The answer is 42." {
		t.Errorf("content %q", got)
	}
	if resp.Usage.TotalTokens != 21 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestSDKStream(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "Streaming works across many small deltas."}))
	client := sdkClient(mustGateway(t, up, nil, Deps{}))
	stream, err := client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model:         "gpt-4o-mini",
		Messages:      []openai.ChatCompletionMessage{{Role: "user", Content: "Say something"}},
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var text strings.Builder
	var usage *openai.Usage
	chunks := 0
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if text.String() != "Streaming works across many small deltas." {
		t.Errorf("reassembled %q", text.String())
	}
	if chunks < 6 {
		t.Errorf("%d chunks: the stream was not relayed as deltas", chunks)
	}
	if usage == nil || usage.TotalTokens != 21 {
		t.Errorf("usage %+v", usage)
	}
}

func TestSDKToolCall(t *testing.T) {
	reply := upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Lisbon"}`}}}
	up := upstreamtest.New(t, upstreamtest.Chat(reply))
	client := sdkClient(mustGateway(t, up, nil, Deps{}))
	req := openai.ChatCompletionRequest{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Weather in Lisbon?"}},
		Tools:    []openai.Tool{weatherTool},
	}
	t.Run("non-streaming", func(t *testing.T) {
		resp, err := client.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if c.FinishReason != openai.FinishReasonToolCalls || len(c.Message.ToolCalls) != 1 {
			t.Fatalf("choice %+v", c)
		}
		tc := c.Message.ToolCalls[0]
		if tc.ID != "call_abc" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Lisbon"}` {
			t.Errorf("tool call %+v", tc)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		sreq := req
		sreq.Stream = true
		stream, err := client.CreateChatCompletionStream(context.Background(), sreq)
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		var id, name, args string
		var finish openai.FinishReason
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range c.Choices[0].Delta.ToolCalls {
				id += tc.ID
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if c.Choices[0].FinishReason != "" {
				finish = c.Choices[0].FinishReason
			}
		}
		if id != "call_abc" || name != "get_weather" || args != `{"city":"Lisbon"}` || finish != openai.FinishReasonToolCalls {
			t.Errorf("tool call id=%q name=%q args=%q finish=%q", id, name, args, finish)
		}
	})
}

func TestSDKSeesUpstreamError(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."))
	client := sdkClient(mustGateway(t, up, nil, Deps{}))
	_, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("error %v, want the upstream's 401 invalid_api_key", err)
	}
}
