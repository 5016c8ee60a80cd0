package memory

import (
	"encoding/json"
	"testing"
)

func TestPrefilled(t *testing.T) {
	msg := func(raw string) Message {
		m, err := ParseMessage(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	u1 := msg(`{"role":"user","content":"Tell me a story"}`)
	a1 := msg(`{"role":"assistant","content":"Once upon a time"}`)
	u2 := msg(`{"role":"user","content":"Go on"}`)
	reply := msg(`{"role":"assistant","content":" there was a fox.","reasoning_content":"thinking"}`)
	tests := []struct {
		name        string
		prior, turn []Message
		reply       Message
		ok          bool
	}{
		{"goes on with the last reply", []Message{u1, a1}, nil, reply, true},
		{"a turn to answer", []Message{u1, a1}, []Message{u2}, reply, false},
		{"no history", nil, []Message{u1}, reply, false},
		{"history ends with a user message", []Message{u1}, nil, reply, false},
		{"the last reply calls a tool", []Message{u1, msg(`{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`)}, nil, reply, false},
		{"the last reply in a text part", []Message{u1, msg(`{"role":"assistant","content":[{"type":"text","text":"Once"}]}`)}, nil, reply, true},
		{"the last reply in text parts", []Message{u1, msg(`{"role":"assistant","content":[{"type":"text","text":"Once"},{"type":"text","text":"upon a time"}]}`)}, nil, reply, true},
		{"the last reply with an image", []Message{u1, msg(`{"role":"assistant","content":[{"type":"text","text":"Once"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`)}, nil, reply, false},
		{"the last reply with a refusal part", []Message{u1, msg(`{"role":"assistant","content":[{"type":"text","text":"Once"},{"type":"refusal","refusal":"no"}]}`)}, nil, reply, false},
		{"the last reply with a refusal", []Message{u1, msg(`{"role":"assistant","content":"Once","refusal":"no"}`)}, nil, reply, false},
		{"the reply in text parts", []Message{u1, a1}, nil, msg(`{"role":"assistant","content":[{"type":"text","text":" there was a fox."}]}`), true},
		{"the reply with an image", []Message{u1, a1}, nil, msg(`{"role":"assistant","content":[{"type":"text","text":" there"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`), false},
		{"the reply calls a tool", []Message{u1, a1}, nil, msg(`{"role":"assistant","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`), false},
		{"an empty reply", []Message{u1, a1}, nil, msg(`{"role":"assistant","content":""}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rest, joined, ok := Prefilled(tt.prior, tt.turn, tt.reply)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				if len(rest) != len(tt.prior) || joined.Content != tt.reply.Content || string(joined.Raw) != string(tt.reply.Raw) {
					t.Fatalf("not prefilled, yet changed: %v %+v", rest, joined)
				}
				return
			}
			if len(rest) != len(tt.prior)-1 {
				t.Fatalf("rest holds %d messages, want %d", len(rest), len(tt.prior)-1)
			}
			want := tt.prior[len(tt.prior)-1].Content + tt.reply.Content
			if joined.Content != want || joined.Role != "assistant" {
				t.Fatalf("joined %q (%s), want %q", joined.Content, joined.Role, want)
			}
			p := joined.Decoded()
			if p.Text != want {
				t.Fatalf("joined Raw %s, want its content %q", joined.Raw, want)
			}
			var fields map[string]any
			if err := json.Unmarshal(joined.Raw, &fields); err != nil || tt.reply.Decoded().Parts == nil && fields["reasoning_content"] != "thinking" {
				t.Fatalf("joined Raw %s lost the reply's other fields (%v)", joined.Raw, err)
			}
		})
	}
}

func TestInstructed(t *testing.T) {
	sys := Message{Role: "system", Content: "You are helpful."}
	dev := Message{Role: "developer", Content: "Write the next reply as the user."}
	u := Message{Role: "user", Content: "Hi"}
	a := Message{Role: "assistant", Content: "Hello"}
	tool := Message{Role: "tool", Content: "sunny"}
	tests := []struct {
		name string
		msgs []Message
		want bool
	}{
		{"an instruction after the last reply", []Message{sys, u, a, {Role: "system", Content: "Write the next reply as the user."}}, true},
		{"a developer instruction", []Message{u, a, dev}, true},
		{"two instructions", []Message{u, a, sys, dev}, true},
		{"a turn", []Message{sys, u, a, u}, false},
		{"an instruction after the question", []Message{u, a, u, dev}, false},
		{"an instruction after a tool's result", []Message{u, a, tool, dev}, false},
		{"a first turn's instruction", []Message{sys, u, dev}, false},
		{"system messages only", []Message{sys, dev}, false},
		{"ends with the reply (continue)", []Message{u, a}, false},
		{"nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Instructed(tt.msgs); got != tt.want {
				t.Fatalf("Instructed = %v, want %v", got, tt.want)
			}
		})
	}
}
