package dialecttest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/anthropic"
	"github.com/memgate/memgate/internal/dialect/responses"
)

// post sends body to the fake and returns the status and response body.
func post(t *testing.T, url string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// strconvQuote returns s as a JSON string.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// memoryBlock is the memory block the adapter tests render.
const memoryBlock = "Facts about the user:\n- city: Porto"

var storedToolTurns = []json.RawMessage{
	json.RawMessage(`{"role":"user","content":"I moved to Porto."}`),
	json.RawMessage(`{"role":"assistant","content":"Noted.","tool_calls":[{"id":"call_s1","type":"function","function":{"name":"remember","arguments":"{\"city\":\"Porto\"}"}},{"id":"call_s2","type":"function","function":{"name":"remember","arguments":"{}"}}]}`),
	json.RawMessage(`{"role":"tool","tool_call_id":"call_s1","content":"saved"}`),
	json.RawMessage(`{"role":"user","content":"Thanks."}`),
	json.RawMessage(`{"role":"user","content":"Also, I like tea."}`),
}

// TestAnthropicRenderAcceptedAndReassembled renders a request with memory
// and stored turns (one tool call unanswered, two user turns in a row), has
// the fake provider — which enforces the Messages API rules — accept it,
// and reassembles its streamed reply equal to its whole reply.
func TestAnthropicRenderAcceptedAndReassembled(t *testing.T) {
	up := NewUpstream(t)
	r, err := anthropic.ParseRequest([]byte(`{"model":"claude-sonnet-4-6","max_tokens":64,"system":[{"type":"text","text":"Be brief."}],
		"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Weather where I live?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Render(Prepared(r.Conversation, memoryBlock, storedToolTurns, 0))
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	status, whole := post(t, up.URL+"/v1/messages", b, hdr)
	if status != http.StatusOK {
		t.Fatalf("upstream rejected the rendered body (%d): %s\n%s", status, whole, b)
	}
	if !strings.Contains(string(b), "city: Porto") {
		t.Errorf("memory missing from %s", b)
	}
	want, wantUsage, err := anthropic.ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	streamed := bytes.Replace(b, []byte(`"max_tokens":64`), []byte(`"max_tokens":64,"stream":true`), 1)
	status, events := post(t, up.URL+"/v1/messages", streamed, hdr)
	if status != http.StatusOK {
		t.Fatalf("stream: %d %s", status, events)
	}
	s := anthropic.NewStream(1 << 20)
	for _, chunk := range bytes.SplitAfter(events, []byte("\n")) {
		if _, err := s.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	got, u, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	// The fake numbers its tool ids per request; compare all but the id.
	norm := func(raw json.RawMessage) string { return strings.Split(string(raw), "toolu_fake")[0] }
	if norm(got.Raw) != norm(want.Raw) || u.CompletionTokens != wantUsage.CompletionTokens {
		t.Errorf("streamed %s %+v\nwhole %s %+v", got.Raw, u, want.Raw, wantUsage)
	}
}

// TestAnthropicRenderKeepsUnansweredUserTurns: a stored user turn with no
// assistant reply (its upstream call failed, or it was stored without an
// answer) before the client's user message is replayed, not dropped: the
// Messages API wants roles to alternate, so the stored turn's blocks open
// the client's message (the client's own blocks after them, unchanged;
// the recalled block right before them), tool results first, and a tool
// call it answers stays with it. The fake, which enforces the API's rules,
// accepts every body.
func TestAnthropicRenderKeepsUnansweredUserTurns(t *testing.T) {
	up := NewUpstream(t)
	hdr := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	user := func(s string) json.RawMessage {
		return json.RawMessage(`{"role":"user","content":` + strconvQuote(s) + `}`)
	}
	for _, tt := range []struct {
		name     string
		stored   []json.RawMessage
		messages string
		want     []string // texts, in this order, in the request
	}{
		{
			name:     "after an answered turn",
			stored:   []json.RawMessage{user("I moved to Porto."), json.RawMessage(`{"role":"assistant","content":"Noted."}`), user("My sister lives in Lisbon.")},
			messages: `[{"role":"user","content":"Where does my sister live?"}]`,
			want:     []string{"I moved to Porto.", "Noted.", "My sister lives in Lisbon.", "Recalled: Lisbon", "Where does my sister live?"},
		},
		{
			name:     "alone, two of them",
			stored:   []json.RawMessage{user("I moved to Porto."), user("My sister lives in Lisbon.")},
			messages: `[{"role":"user","content":[{"type":"text","text":"Where does my sister live?","cache_control":{"type":"ephemeral"}}]}]`,
			want:     []string{"I moved to Porto.", "My sister lives in Lisbon.", "Recalled: Lisbon", `{"type":"text","text":"Where does my sister live?","cache_control":{"type":"ephemeral"}}`},
		},
		{
			name: "with the tool result it holds",
			stored: []json.RawMessage{user("Weather in Porto?"),
				json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_w","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`),
				json.RawMessage(`{"role":"tool","tool_call_id":"call_w","content":"sunny"}`),
				user("Also, I fly there on Friday.")},
			messages: `[{"role":"user","content":"Should I pack a coat?"}]`,
			want:     []string{"Weather in Porto?", `"tool_use"`, "sunny", "Also, I fly there on Friday.", "Recalled: Lisbon", "Should I pack a coat?"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := anthropic.ParseRequest([]byte(`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":` + tt.messages + `}`))
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.Render(PreparedBlocks(r.Conversation, "", "Recalled: Lisbon", false, tt.stored, 0))
			if err != nil {
				t.Fatal(err)
			}
			if status, resp := post(t, up.URL+"/v1/messages", b, hdr); status != http.StatusOK {
				t.Fatalf("upstream rejected the rendered body (%d): %s\n%s", status, resp, b)
			}
			at := 0
			for _, w := range tt.want {
				i := strings.Index(string(b[at:]), w)
				if i < 0 {
					t.Fatalf("%q missing, or out of order, in %s", w, b)
				}
				at += i + len(w)
			}
		})
	}
}

// TestAnthropicFakeRejectsBrokenRules proves the fake's rule check bites.
func TestAnthropicFakeRejectsBrokenRules(t *testing.T) {
	up := NewUpstream(t)
	hdr := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	for _, msgs := range []string{
		`[{"role":"assistant","content":"hi"}]`,
		`[{"role":"user","content":"a"},{"role":"user","content":"b"}]`,
		`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"no result"}]`,
		`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"x"}]}]`,
		`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"","content":"x"}]}]`,
		`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"functions.f:0","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"functions.f:0","content":"x"}]}]`,
		// A tool_use id given twice in the request, on two turns.
		`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_0","content":"x"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_0","content":"y"}]}]`,
	} {
		status, b := post(t, up.URL+"/v1/messages", []byte(`{"model":"m","max_tokens":5,"messages":`+msgs+`}`), hdr)
		if status != http.StatusBadRequest || !strings.Contains(string(b), `"type":"error"`) {
			t.Errorf("%s: %d %s", msgs, status, b)
		}
	}
}

// TestResponsesFakeRejectsBrokenRules proves the Responses fake's rule
// check bites: a call or output without call_id, an output without its call.
func TestResponsesFakeRejectsBrokenRules(t *testing.T) {
	up := NewUpstream(t)
	hdr := map[string]string{"Authorization": "Bearer k"}
	for _, input := range []string{
		`[{"type":"function_call","name":"f","arguments":"{}"},{"type":"function_call_output","output":"x"}]`,
		`[{"type":"function_call","call_id":"","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"","output":"x"}]`,
		`[{"type":"function_call_output","call_id":"c9","output":"x"}]`,
		// A call_id given twice, on two turns.
		`[{"type":"function_call","call_id":"call_0","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_0","output":"x"},` +
			`{"type":"function_call","call_id":"call_0","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_0","output":"y"}]`,
		// A call answered twice.
		`[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"function_call_output","call_id":"c1","output":"y"}]`,
	} {
		status, b := post(t, up.URL+"/v1/responses", []byte(`{"model":"m","input":`+input+`}`), hdr)
		if status != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_request_error"`) {
			t.Errorf("%s: %d %s", input, status, b)
		}
	}
}

// TestAnthropicRenderForeignToolIDs: a stored tool call whose id another
// provider gave it in a shape the Messages API refuses
// ("functions.get_weather:0", as some OpenAI-compatible servers name
// calls) is replayed with an id the API accepts, the same on its
// tool_use and its tool_result, rather than failing the request.
func TestAnthropicRenderForeignToolIDs(t *testing.T) {
	up := NewUpstream(t)
	r, err := anthropic.ParseRequest([]byte(`{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"And tomorrow?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	stored := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"Weather in Porto?"}`),
		json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`),
		json.RawMessage(`{"role":"tool","tool_call_id":"functions.get_weather:0","content":"sunny"}`),
		json.RawMessage(`{"role":"assistant","content":"It is sunny."}`),
	}
	b, err := r.Render(Prepared(r.Conversation, "", stored, 0))
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	if status, resp := post(t, up.URL+"/v1/messages", b, hdr); status != http.StatusOK {
		t.Fatalf("upstream rejected the rendered body (%d): %s\n%s", status, resp, b)
	}
	if !strings.Contains(string(b), `"tool_use"`) || !strings.Contains(string(b), `"sunny"`) {
		t.Errorf("the stored tool call was not replayed: %s", b)
	}
}

// TestResponsesRenderAcceptedAndReassembled does the same for the
// Responses API, and checks previous_response_id requests get no stored
// turns.
func TestResponsesRenderAcceptedAndReassembled(t *testing.T) {
	up := NewUpstream(t)
	hdr := map[string]string{"Authorization": "Bearer k"}
	r, err := responses.ParseRequest([]byte(`{"model":"gpt-4.1","instructions":"Be brief.","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"input":"Weather where I live?"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Render(Prepared(r.Conversation, memoryBlock, storedToolTurns, 0))
	if err != nil {
		t.Fatal(err)
	}
	status, whole := post(t, up.URL+"/v1/responses", b, hdr)
	if status != http.StatusOK {
		t.Fatalf("upstream rejected the rendered body (%d): %s\n%s", status, whole, b)
	}
	if !strings.Contains(string(b), `"instructions":"Be brief.\n\nFacts about the user:\n- city: Porto"`) || !strings.Contains(string(b), `"call_s1"`) || strings.Contains(string(b), `"call_s2"`) {
		t.Errorf("rendered %s", b)
	}
	want, _, err := responses.ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	status, events := post(t, up.URL+"/v1/responses", bytes.Replace(b, []byte(`"model":"gpt-4.1"`), []byte(`"model":"gpt-4.1","stream":true`), 1), hdr)
	if status != http.StatusOK {
		t.Fatalf("stream: %d %s", status, events)
	}
	s := responses.NewStream(1 << 20)
	for _, chunk := range bytes.SplitAfter(events, []byte("\n")) {
		s.Write(chunk)
	}
	got, _, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	norm := func(raw json.RawMessage) string { return strings.Split(string(raw), "call_fake")[0] }
	if norm(got.Raw) != norm(want.Raw) {
		t.Errorf("streamed %s\nwhole %s", got.Raw, want.Raw)
	}

	var prev struct {
		ID string `json:"id"`
	}
	json.Unmarshal(whole, &prev)
	r2, err := responses.ParseRequest([]byte(`{"model":"gpt-4.1","previous_response_id":"` + prev.ID + `","input":[{"type":"function_call_output","call_id":"call_x","output":"18C"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := r2.Render(Prepared(r2.Conversation, memoryBlock, storedToolTurns, 0))
	if err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, up.URL+"/v1/responses", b2, hdr); status != http.StatusOK || strings.Contains(string(b2), "I moved to Porto") {
		t.Errorf("previous_response_id request %s: %d %s", b2, status, body)
	}
}
