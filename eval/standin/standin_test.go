package standin

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func mustServer(tb testing.TB) (*Server, string) {
	tb.Helper()
	s := New(Options{})
	srv := httptest.NewServer(s)
	tb.Cleanup(srv.Close)
	return s, srv.URL + "/v1"
}

func post(tb testing.TB, url, body string) *http.Response {
	tb.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestServeRecordsAndAnswers(t *testing.T) {
	s, url := mustServer(t)
	tests := []struct {
		name string
		body string
		kind Kind
		want string // substring of the reply content
	}{
		{"chat", `{"model":"m","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"hello"}]}`, KindChat, ChatReply("hello")},
		{"summary", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"system","content":"You maintain the rolling summary."},{"role":"user","content":"New messages:\nuser: I moved to Porto last month.\nassistant: Nice!\n\nKeep the summary under 600 tokens."}]}`, KindSummary, `Porto`},
		{"facts", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"system","content":"You extract durable facts."},{"role":"user","content":"User messages:\nI live in Lisbon."}]}`, KindFacts, `"key":"city","value":"Lisbon"`},
		{"other json", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`, KindJSON, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, url, tt.body)
			var cc struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || len(cc.Choices) != 1 {
				t.Fatalf("reply: %v %+v", err, cc)
			}
			if got := cc.Choices[0].Message.Content; !strings.Contains(got, tt.want) {
				t.Fatalf("reply %q lacks %q", got, tt.want)
			}
			calls := s.Calls()
			if last := calls[len(calls)-1]; last.Kind != tt.kind {
				t.Fatalf("recorded kind %s, want %s", last.Kind, tt.kind)
			}
		})
	}
	if c, ok := s.LastChat(); !ok || c.Messages[1].Content != "hello" || c.Messages[0].Role != "system" {
		t.Fatalf("LastChat = %+v", c)
	}
	if s.Count(KindChat) != 1 || s.Count(KindSummary) != 1 || s.Busy() != 0 {
		t.Fatalf("counts chat=%d summary=%d busy=%d", s.Count(KindChat), s.Count(KindSummary), s.Busy())
	}
}

func TestStream(t *testing.T) {
	_, url := mustServer(t)
	resp := post(t, url, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		text.WriteString(ch.Choices[0].Delta.Content)
	}
	if !done || text.String() != ChatReply("hi") {
		t.Fatalf("streamed %q (done=%v), want %q", text.String(), done, ChatReply("hi"))
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name       string
		input      string
		keep, drop []string
	}{
		{"salient user sentences kept verbatim",
			"New messages:\nuser: Tell me about owls. I want to save R$ 5.000 by June.\nassistant: Sure, 5 tips.\nuser: My sister Ana is visiting on 12 March.\n\nKeep the summary under 600 tokens.",
			[]string{"I want to save R$ 5.000 by June.", "My sister Ana is visiting on 12 March."}, []string{"owls", "5 tips"}},
		{"previous summary carried over",
			"Previous summary:\nI live in Lisbon.\n\nNew messages:\nuser: Prefiro filmes de terror.\n\nKeep the summary under 600 tokens.",
			[]string{"I live in Lisbon.", "Prefiro filmes de terror."}, nil},
		{"questions and chatter dropped",
			"New messages:\nuser: Can you suggest a quick recipe for pasta?\nuser: Thanks, that helps a lot.\n\nKeep the summary under 600 tokens.",
			[]string{"Small talk only"}, []string{"pasta", "Thanks"}},
		{"title not split", "New messages:\nuser: O nome do meu médico é Dr. Rui.\n", []string{"O nome do meu médico é Dr. Rui."}, nil},
		{"oldest dropped past the limit",
			"Previous summary:\n" + strings.Repeat("I paid 1,111 for an old thing. ", 1) + "I moved to Porto.\n\nNew messages:\nuser: I want to visit Japan.\n\nKeep the summary under 9 tokens.",
			[]string{"I want to visit Japan."}, []string{"1,111"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r summaryReply
			if err := json.Unmarshal([]byte(Summary(tt.input)), &r); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keep {
				if !strings.Contains(r.Summary, k) {
					t.Errorf("summary %q lacks %q", r.Summary, k)
				}
			}
			for _, d := range tt.drop {
				if strings.Contains(r.Summary, d) {
					t.Errorf("summary %q keeps %q", r.Summary, d)
				}
			}
			if r.KeyEvents == nil || r.Preserved.Numbers == nil || r.Preserved.Dates == nil || r.Preserved.Decisions == nil {
				t.Errorf("null lists in %+v", r)
			}
		})
	}
}

func TestFacts(t *testing.T) {
	tests := []struct {
		line      string
		typ, key  string
		valueHas  string
		wantFacts int
	}{
		{"I moved to Porto last month and I'm still unpacking.", "profile", "city", "Porto", 1},
		{"Eu moro em Lisboa, num apartamento pequeno.", "profile", "city", "Lisboa", 1},
		{"Diet update: I'm vegan now.", "profile", "diet", "vegan", 1},
		{"I live in Lisbon and I'm vegetarian.", "profile", "city", "Lisbon", 2},
		{"I changed careers, I'm a data analyst now.", "profile", "job", "data analyst", 1},
		{"I prefer green tea over coffee, honestly.", "preference", "i_prefer_green_tea_over_coffee_honestly", "green tea", 1},
		{"Where do I live?", "", "", "", 0},
		{"On flights I always prefer aisle seats.", "preference", "on_flights_i_always_prefer_aisle_seats", "aisle", 1},
		{"My rent is €1,240 a month, which is a lot.", "profile", "my_rent_is_1_240_a_month_which", "1,240", 1},
		{"Gastei R$ 1.230 no conserto do carro.", "profile", "gastei_r_1_230_no_conserto_do_carro", "1.230", 1},
		{"Tell me something interesting about owls.", "", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			var r struct{ Facts []fact }
			if err := json.Unmarshal([]byte(Facts("User messages:\n"+tt.line)), &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Facts) != tt.wantFacts {
				t.Fatalf("facts %+v, want %d", r.Facts, tt.wantFacts)
			}
			if tt.wantFacts == 0 {
				return
			}
			f := r.Facts[0]
			if f.Type != tt.typ || f.Key != tt.key || !strings.Contains(f.Value, tt.valueHas) {
				t.Fatalf("fact %+v", f)
			}
		})
	}
}

func TestNoFacts(t *testing.T) {
	s := New(Options{NoFacts: true})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	resp := post(t, srv.URL+"/v1", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"system","content":"You extract durable facts."},{"role":"user","content":"User messages:\nI live in Lisbon."}]}`)
	var cc struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || len(cc.Choices) != 1 {
		t.Fatalf("reply: %v", err)
	}
	var r struct{ Facts []fact }
	if err := json.Unmarshal([]byte(cc.Choices[0].Message.Content), &r); err != nil || r.Facts == nil || len(r.Facts) != 0 {
		t.Fatalf("NoFacts reply %q", cc.Choices[0].Message.Content)
	}
}

func TestScriptedReplies(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.Script("Leo here: we named the puppy Biscuit.")
	chat := func(body string) string {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var cc struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || len(cc.Choices) == 0 {
			t.Fatalf("decode: %v", err)
		}
		return cc.Choices[0].Message.Content
	}
	// A side call does not take the scripted reply.
	side := chat(`{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"system","content":"Extract facts"},{"role":"user","content":"user: hi"}]}`)
	if strings.Contains(side, "Biscuit") {
		t.Fatalf("side call took the script: %s", side)
	}
	if got := chat(`{"model":"m","messages":[{"role":"user","content":"Hey Leo"}]}`); got != "Leo here: we named the puppy Biscuit." {
		t.Fatalf("first chat = %q, want the scripted reply", got)
	}
	if got := chat(`{"model":"m","messages":[{"role":"user","content":"Hey Leo"}]}`); got != ChatReply("Hey Leo") {
		t.Fatalf("second chat = %q, want the generic reply", got)
	}
}
