package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
)

// getAs sends GET url as c and returns the status and body.
func getAs(t *testing.T, url string, c caller) (int, []byte) {
	t.Helper()
	status, b := do(t, http.MethodGet, url, c.headers())
	return status, []byte(b)
}

// itemIDs are the ids of a reply's output items (a response) or data
// items (a list), or of a stream's response.completed output.
func itemIDs(t *testing.T, b []byte) []string {
	t.Helper()
	type items struct {
		Output []struct {
			ID string `json:"id"`
		} `json:"output"`
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	var ids []string
	add := func(it items) {
		for _, o := range append(it.Output, it.Data...) {
			ids = append(ids, o.ID)
		}
	}
	if !bytes.HasPrefix(b, []byte("event:")) {
		var it items
		if err := json.Unmarshal(b, &it); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		add(it)
		return ids
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			Response items  `json:"response"`
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.completed" {
			add(ev.Response)
		}
	}
	return ids
}

// wantItemsOwned checks that the stored items ids are ana's to name by
// reference, and refused to every other caller as unknown items.
func wantItemsOwned(t *testing.T, fake *dialecttest.Upstream, gw string, ana caller, others []caller, ids []string) {
	t.Helper()
	if len(ids) == 0 {
		t.Fatal("no items to name")
	}
	for _, item := range ids {
		ref := `{"model":"gpt-4.1","input":[{"type":"item_reference","id":"` + item + `"},{"role":"user","content":"And?"}]}`
		if status, b := postJSON(t, gw+"/v1/responses", ref, ana.headers()); status != http.StatusOK {
			t.Errorf("the owner's reference to %s: %d %s", item, status, b)
		}
		for _, c := range others {
			wantRefused(t, fake, gw, "/v1/responses", c, ref, http.StatusNotFound, "input", "", "Item with id '"+item+"' not found.")
		}
	}
}

// TestProviderStateItemsOfStoredStates: with gateway keys and one upstream
// key for every tenant, the items a user's stored state gains after the
// reply that created it — a background response's output, read by
// retrieving it whole or streamed; the items added to a conversation, or
// that a response in it put there, read by listing them — are the user's
// to name by reference and nobody else's. Retrieving or listing another's
// state is refused as unknown. Run end to end, as
// TestProviderStateStaysWithItsTenant.
func TestProviderStateItemsOfStoredStates(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	others := []caller{{"key-b", "ana"}, {"key-a", "bob"}, {"key-a", ""}}

	for _, query := range []string{"", "?stream=true"} {
		t.Run("background"+query, func(t *testing.T) {
			status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","input":"My pin is 1234.","background":true}`, ana.headers())
			var queued struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			}
			if status != http.StatusOK || json.Unmarshal(b, &queued) != nil || queued.Status != "queued" {
				t.Fatalf("background create: %d %s", status, b)
			}
			for _, c := range others {
				wantRefused(t, fake, gw, "/v1/responses/"+queued.ID+query, c, "", http.StatusNotFound, "", "",
					"Response with id '"+queued.ID+"' not found.")
			}
			status, b = getAs(t, gw+"/v1/responses/"+queued.ID+query, ana)
			if status != http.StatusOK {
				t.Fatalf("the owner's retrieve: %d %s", status, b)
			}
			wantItemsOwned(t, fake, gw, ana, others, itemIDs(t, b))
		})
	}

	t.Run("conversation items", func(t *testing.T) {
		var conv struct {
			ID string `json:"id"`
		}
		if status, b := postJSON(t, gw+"/v1/conversations", `{}`, ana.headers()); status != http.StatusOK || json.Unmarshal(b, &conv) != nil {
			t.Fatalf("create conversation: %d %s", status, b)
		}
		add := `{"items":[{"type":"message","role":"user","content":"My pin is 1234."}]}`
		for _, c := range others {
			wantRefused(t, fake, gw, "/v1/conversations/"+conv.ID+"/items", c, add, http.StatusNotFound, "", "",
				"Conversation with id '"+conv.ID+"' not found.")
		}
		status, b := postJSON(t, gw+"/v1/conversations/"+conv.ID+"/items", add, ana.headers())
		if status != http.StatusOK {
			t.Fatalf("the owner's items: %d %s", status, b)
		}
		added := itemIDs(t, b)
		wantItemsOwned(t, fake, gw, ana, others, added)

		// A response in the conversation puts its input there too, an
		// item no reply to its create names: listing names it.
		if status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","conversation":"`+conv.ID+`","input":"Hello."}`, ana.headers()); status != http.StatusOK {
			t.Fatalf("a response in the conversation: %d %s", status, b)
		}
		status, b = getAs(t, gw+"/v1/conversations/"+conv.ID+"/items", ana)
		if status != http.StatusOK {
			t.Fatalf("the owner's list: %d %s", status, b)
		}
		listed := itemIDs(t, b)
		if len(listed) <= len(added) {
			t.Fatalf("listed %v, want more than %v", listed, added)
		}
		wantItemsOwned(t, fake, gw, ana, others, listed)
	})
}

// TestProviderStateResponsesSubPaths: with gateway keys and one upstream
// key for every tenant, POST /v1/responses/input_tokens and
// /v1/responses/compact, when allowed, reach the provider (they name no
// response), their bodies' previous_response_id, conversation and items
// named by id checked as a create body's: the owner's go upstream,
// another's are refused as unknown without calling it. The compacted
// response and its items are the caller's.
func TestProviderStateResponsesSubPaths(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	others := []caller{{"key-b", "ana"}, {"key-a", "bob"}, {"key-a", ""}}
	id, item := createResponse(t, gw, ana, `{"model":"gpt-4.1","input":"My pin is 1234."}`, false)

	for _, path := range []string{"/v1/responses/input_tokens", "/v1/responses/compact"} {
		t.Run(path, func(t *testing.T) {
			cont := `{"model":"gpt-4.1","previous_response_id":"` + id + `"}`
			for _, c := range others {
				wantRefused(t, fake, gw, path, c, cont, http.StatusBadRequest, "previous_response_id", "previous_response_not_found",
					"Previous response with id '"+id+"' not found.")
				wantRefused(t, fake, gw, path, c, `{"model":"gpt-4.1","input":[{"type":"item_reference","id":"`+item+`"}]}`,
					http.StatusNotFound, "input", "", "Item with id '"+item+"' not found.")
			}
			status, b := postJSON(t, gw+path, cont, ana.headers())
			if status != http.StatusOK {
				t.Fatalf("the owner's %s: %d %s", path, status, b)
			}
			if path != "/v1/responses/compact" {
				return
			}
			var compacted struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(b, &compacted) != nil || compacted.ID == "" {
				t.Fatalf("compact names no response: %s", b)
			}
			next := `{"model":"gpt-4.1","previous_response_id":"` + compacted.ID + `","input":"And?"}`
			if status, b := postJSON(t, gw+"/v1/responses", next, ana.headers()); status != http.StatusOK {
				t.Errorf("the owner's continuation of the compacted response: %d %s", status, b)
			}
			for _, c := range others {
				wantRefused(t, fake, gw, "/v1/responses", c, next, http.StatusBadRequest, "previous_response_id", "previous_response_not_found",
					"Previous response with id '"+compacted.ID+"' not found.")
			}
			wantItemsOwned(t, fake, gw, ana, others, itemIDs(t, b))
		})
	}
}

// TestProviderStateCarriedItemIDs: with gateway keys and one upstream key
// for every tenant, an input item that gives its content and the id of
// a stored item another user's state holds goes upstream without that
// id — to a provider that reads stored items by id (the fake taught to),
// it would have brought that user's words — and its content as sent;
// the owner's own id goes upstream as sent. Run end to end, as
// TestProviderStateStaysWithItsTenant.
func TestProviderStateCarriedItemIDs(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	fake.ResolveItemIDs()
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	others := []caller{{"key-b", "ana"}, {"key-a", "bob"}, {"key-a", ""}}

	// Ana's words, stored as an item of her conversation.
	var conv struct {
		ID string `json:"id"`
	}
	if status, b := postJSON(t, gw+"/v1/conversations", `{}`, ana.headers()); status != http.StatusOK || json.Unmarshal(b, &conv) != nil {
		t.Fatalf("create conversation: %d %s", status, b)
	}
	if status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","conversation":"`+conv.ID+`","input":"My pin is 1234."}`, ana.headers()); status != http.StatusOK {
		t.Fatalf("a response in the conversation: %d %s", status, b)
	}
	status, b := getAs(t, gw+"/v1/conversations/"+conv.ID+"/items", ana)
	if status != http.StatusOK {
		t.Fatalf("the owner's list: %d %s", status, b)
	}
	ids := itemIDs(t, b)
	if len(ids) == 0 {
		t.Fatalf("no items listed: %s", b)
	}
	stored := ids[0] // her input: "My pin is 1234."

	item := `{"type":"message","id":"` + stored + `","role":"user","content":"Hello."}`
	body := `{"model":"gpt-4.1","input":[` + item + `]}`
	for _, c := range others {
		status, b := postJSON(t, gw+"/v1/responses", body, c.headers())
		if status != http.StatusOK || bytes.Contains(b, []byte("1234")) || !bytes.Contains(b, []byte("You said: Hello.")) {
			t.Errorf("as %v: %d %s, want the reply to the item's own content", c, status, b)
		}
		last := fake.Requests()[len(fake.Requests())-1]
		if bytes.Contains(last.Body, []byte(stored)) || !bytes.Contains(last.Body, []byte(`"content":"Hello."`)) {
			t.Errorf("as %v: upstream got %s, want the item without the id", c, last.Body)
		}
	}
	status, b = postJSON(t, gw+"/v1/responses", body, ana.headers())
	if status != http.StatusOK || !bytes.Contains(b, []byte("You said: My pin is 1234.")) {
		t.Errorf("the owner's item: %d %s, want the stored item read", status, b)
	}
	if last := fake.Requests()[len(fake.Requests())-1]; !bytes.Contains(last.Body, []byte(item)) {
		t.Errorf("the owner's item: upstream got %s, want the item as sent", last.Body)
	}
}

// TestProviderStateStatelessReplay: with gateway keys and one upstream
// key for every tenant, a stateless client (store: false) sends back the
// output items of a response the provider kept nowhere with their ids,
// a reasoning item before the function call it is paired with by that
// call's id: its own ids go upstream as sent, and the request is
// answered; another's request giving the same ids gets them dropped
// (here the provider then refuses the unpaired reasoning item). Run end
// to end, as TestProviderStateStaysWithItsTenant.
func TestProviderStateStatelessReplay(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{}}}]`
	status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","store":false,`+tools+`,"input":"Weather in Porto?"}`, ana.headers())
	var first struct {
		Output []struct {
			ID     string `json:"id"`
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"output"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &first) != nil {
		t.Fatalf("first turn: %d %s", status, b)
	}
	var call string
	for _, o := range first.Output {
		if o.Type == "function_call" {
			call = `{"type":"function_call","id":"` + o.ID + `","call_id":"` + o.CallID + `","name":"get_weather","arguments":"{}"},` +
				`{"type":"function_call_output","call_id":"` + o.CallID + `","output":"18C"}`
		}
	}
	if call == "" {
		t.Fatalf("no function call: %s", b)
	}
	replay := `{"model":"gpt-4.1","store":false,` + tools + `,"input":[{"role":"user","content":"Weather in Porto?"},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAA-ana"},` + call + `]}`
	if status, b := postJSON(t, gw+"/v1/responses", replay, ana.headers()); status != http.StatusOK || !bytes.Contains(b, []byte("18C")) {
		t.Errorf("the owner's stateless replay: %d %s", status, b)
	}
	if last := fake.Requests()[len(fake.Requests())-1]; !bytes.Contains(last.Body, []byte(call)) {
		t.Errorf("the owner's replay: upstream got %s, want the items as sent", last.Body)
	}
	bob := caller{"key-b", "bob"}
	if status, b := postJSON(t, gw+"/v1/responses", replay, bob.headers()); status != http.StatusBadRequest || !bytes.Contains(b, []byte("required following item")) {
		t.Errorf("another's replay of the same ids: %d %s, want them dropped", status, b)
	}
}

// TestProviderStateRequiredItemIDs: with gateway keys and one upstream
// key for every tenant, an input item whose id the API requires (a
// built-in tool call's: web_search_call, computer_call, mcp_call, …),
// which memgate cannot drop, goes upstream only when that id is the
// caller's: to a provider that reads stored items by id (the fake taught
// to), another's would bring that user's words. Another caller is
// refused with a 400 naming the member, without calling the upstream;
// the owner's item goes as sent. Run end to end, as
// TestProviderStateStaysWithItsTenant.
func TestProviderStateRequiredItemIDs(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	fake.ResolveItemIDs()
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	others := []caller{{"key-b", "ana"}, {"key-a", "bob"}, {"key-a", ""}}

	// Ana's words, stored as an item of her conversation.
	var conv struct {
		ID string `json:"id"`
	}
	if status, b := postJSON(t, gw+"/v1/conversations", `{}`, ana.headers()); status != http.StatusOK || json.Unmarshal(b, &conv) != nil {
		t.Fatalf("create conversation: %d %s", status, b)
	}
	if status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","conversation":"`+conv.ID+`","input":"My pin is 1234."}`, ana.headers()); status != http.StatusOK {
		t.Fatalf("a response in the conversation: %d %s", status, b)
	}
	status, b := getAs(t, gw+"/v1/conversations/"+conv.ID+"/items", ana)
	ids := itemIDs(t, b)
	if status != http.StatusOK || len(ids) == 0 {
		t.Fatalf("the owner's list: %d %s", status, b)
	}
	stored := ids[0] // her input: "My pin is 1234."

	for _, item := range []string{
		`{"type":"web_search_call","id":"` + stored + `","status":"completed","action":{"type":"search","query":"weather"}}`,
		`{"type":"mcp_call","id":"` + stored + `","name":"lookup","arguments":"{}","server_label":"kb"}`,
	} {
		body := `{"model":"gpt-4.1","input":[` + item + `]}`
		for _, c := range others {
			wantRefused(t, fake, gw, "/v1/responses", c, body, http.StatusBadRequest, "input[0].id", "", "Item with id '"+stored+"' not found.")
		}
		status, b := postJSON(t, gw+"/v1/responses", body, ana.headers())
		if status != http.StatusOK || !bytes.Contains(b, []byte("You said: My pin is 1234.")) {
			t.Errorf("the owner's item: %d %s, want the stored item read", status, b)
		}
		if last := fake.Requests()[len(fake.Requests())-1]; !bytes.Contains(last.Body, []byte(item)) {
			t.Errorf("the owner's item: upstream got %s, want the item as sent", last.Body)
		}
	}
}
