package dialecttest

import (
	"encoding/json"
	"strings"
	"testing"
)

// roundTrip is what the scripts print for one round trip.
type roundTrip struct {
	First struct {
		StopReason string `json:"stop_reason"`
		Status     string `json:"status"`
		Text       string `json:"text"`
		ToolUse    *struct {
			ID    string         `json:"id"`
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"tool_use"`
		FunctionCall *struct {
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function_call"`
		Usage map[string]any `json:"usage"`
	} `json:"first"`
	Second *struct {
		StopReason string         `json:"stop_reason"`
		Status     string         `json:"status"`
		Text       string         `json:"text"`
		Usage      map[string]any `json:"usage"`
	} `json:"second"`
}

type scriptResult struct {
	NonStream    roundTrip      `json:"non_stream"`
	Stream       roundTrip      `json:"stream"`
	StreamHelper roundTrip      `json:"stream_helper"`
	StreamEvents map[string]int `json:"stream_events"`
	Previous     *struct {
		Status string `json:"status"`
		Text   string `json:"text"`
	} `json:"previous_response"`
}

func TestAnthropicSDK(t *testing.T) {
	up := NewUpstream(t)
	out := RunScript(t, "anthropic.mjs", "ANTHROPIC_BASE_URL="+up.URL)
	var res scriptResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, rt := range map[string]roundTrip{"non-stream": res.NonStream, "stream": res.Stream, "stream helper": res.StreamHelper} {
		if rt.First.StopReason != "tool_use" || rt.First.ToolUse == nil || rt.First.ToolUse.Name != "get_weather" || rt.First.ToolUse.Input["city"] != "Porto" {
			t.Errorf("%s: first reply %+v", name, rt.First)
		}
		if rt.First.Text != "Let me check the weather." {
			t.Errorf("%s: first text %q", name, rt.First.Text)
		}
		if rt.Second == nil || rt.Second.StopReason != "end_turn" || rt.Second.Text != "The tool says: 18C and sunny in Porto." {
			t.Errorf("%s: second reply %+v", name, rt.Second)
		}
		if rt.First.Usage["output_tokens"] == nil || rt.First.Usage["input_tokens"] == nil {
			t.Errorf("%s: usage %v", name, rt.First.Usage)
		}
	}
	for _, ev := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if res.StreamEvents[ev] == 0 {
			t.Errorf("the SDK saw no %s event: %v", ev, res.StreamEvents)
		}
	}
	reqs := up.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d upstream requests, want 6", len(reqs))
	}
	for _, r := range reqs {
		key := r.Header.Get("x-api-key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if r.Header.Get("anthropic-version") == "" || key != "sk-ant-sdk-harness" {
			t.Errorf("headers %v", r.Header)
		}
	}
	// The second request of a round trip sends the tool_use back with its result.
	if !strings.Contains(string(reqs[1].Body), `"tool_result"`) || !strings.Contains(string(reqs[1].Body), `"tool_use"`) {
		t.Errorf("second request %s", reqs[1].Body)
	}
}

func TestResponsesSDK(t *testing.T) {
	up := NewUpstream(t)
	out := RunScript(t, "responses.mjs", "OPENAI_BASE_URL="+up.URL+"/v1")
	var res scriptResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, rt := range map[string]roundTrip{"non-stream": res.NonStream, "stream": res.Stream, "stream helper": res.StreamHelper} {
		fc := rt.First.FunctionCall
		if rt.First.Status != "completed" || fc == nil || fc.Name != "get_weather" || fc.Arguments != `{"city":"Porto"}` {
			t.Errorf("%s: first response %+v", name, rt.First)
		}
		if rt.Second == nil || rt.Second.Status != "completed" || rt.Second.Text != "The tool says: 18C and sunny in Porto." {
			t.Errorf("%s: second response %+v", name, rt.Second)
		}
		if rt.First.Usage["total_tokens"] == nil {
			t.Errorf("%s: usage %v", name, rt.First.Usage)
		}
	}
	for _, ev := range []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.function_call_arguments.delta", "response.output_item.done", "response.completed"} {
		if res.StreamEvents[ev] == 0 {
			t.Errorf("the SDK saw no %s event: %v", ev, res.StreamEvents)
		}
	}
	if res.Previous == nil || res.Previous.Status != "completed" || res.Previous.Text != "You said: And tomorrow?" {
		t.Errorf("previous_response_id call: %+v", res.Previous)
	}
	reqs := up.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d upstream requests, want 7", len(reqs))
	}
	if !strings.Contains(string(reqs[1].Body), `"function_call_output"`) || reqs[1].Header.Get("Authorization") != "Bearer sk-sdk-harness" {
		t.Errorf("second request %s %v", reqs[1].Body, reqs[1].Header)
	}
}
