package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestResponsesKeepsRecallInPlace: a Responses API client that holds its
// history (each request resends its input and the provider's output
// items, as a stateless client does) in a conversation it names, through
// `gateway serve`. Each request's upstream input repeats the previous
// one's, item for item, each question's recalled block in place (its
// first question's too, asked when nothing was resent), so the provider's
// prompt cache serves the history. A request that continues a stored
// response (previous_response_id) gets what it recalled in the
// instructions and its input as sent: the provider keeps its input for
// good.
func TestResponsesKeepsRecallInPlace(t *testing.T) {
	fake, gw := serveRecallDialects(t)
	headers := func(conv string) map[string]string {
		return map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ana", "X-Memory-Conversation": conv}
	}
	if status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","input":"My dog is called Rex and he loves the beach."}`, headers("resp-earlier")); status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	searchable(t, gw, "the earlier conversation", "dog Rex beach", "Rex")

	type sent struct {
		Instructions string            `json:"instructions"`
		Input        []json.RawMessage `json:"input"`
	}
	var input []string // the client's items
	var ids []string   // the responses' ids
	ask := func(extra string, items ...string) sent {
		t.Helper()
		input = append(input, items...)
		in := input
		if extra != "" {
			in = items
		}
		status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","instructions":"Be brief.",`+extra+`"input":[`+strings.Join(in, ",")+`]}`, headers("resp-inplace"))
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, b)
		}
		var resp struct {
			ID     string            `json:"id"`
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(b, &resp); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.ID)
		for _, o := range resp.Output {
			input = append(input, string(o))
		}
		reqs := fake.Requests()
		var s sent
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	repeats := func(name string, prev, cur sent) {
		t.Helper()
		if len(cur.Input) < len(prev.Input) {
			t.Fatalf("%s: %d input items upstream, fewer than the previous request's %d", name, len(cur.Input), len(prev.Input))
		}
		for i := range prev.Input {
			if !jsonSame(cur.Input[i], string(prev.Input[i])) {
				t.Errorf("%s: input item %d changed, a cache miss from there on:\nbefore %s\nnow    %s", name, i, prev.Input[i], cur.Input[i])
			}
		}
	}
	first := ask("", `{"role":"user","content":"What is my dog called?"}`)
	if !strings.Contains(string(first.Input[0]), "Rex") {
		t.Fatalf("the first question recalled nothing: %s", first.Input)
	}
	second := ask("", `{"role":"user","content":"Right, thanks."}`)
	repeats("second request", first, second)
	third := ask("", `{"role":"user","content":"And what does Rex love?"}`)
	repeats("third request", second, third)
	fourth := ask("", `{"role":"user","content":"Good to know."}`)
	repeats("fourth request", third, fourth)

	// Continuing the stored response: recall in the instructions, the
	// input as the client sent it.
	cont := ask(`"previous_response_id":"`+ids[len(ids)-1]+`",`, `{"role":"user","content":"Where does Rex like to go?"}`)
	if len(cont.Input) != 1 || !jsonSame(cont.Input[0], `{"role":"user","content":"Where does Rex like to go?"}`) {
		t.Errorf("previous_response_id: input upstream %s, want the client's one item", cont.Input)
	}
	if !strings.HasPrefix(cont.Instructions, "Be brief.") || !strings.Contains(cont.Instructions, "beach") {
		t.Errorf("previous_response_id: instructions %q, want the client's, then what was recalled", cont.Instructions)
	}
}
