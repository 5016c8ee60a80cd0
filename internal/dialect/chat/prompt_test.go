package chat

import (
	"encoding/json"
	"github.com/memgate/memgate/internal/memory"
	"testing"
)

func TestAppendText(t *testing.T) {
	elem := map[string]string{"type": "text", "text": "mem"}
	tests := []struct {
		name, member, want string
	}{
		{"absent", "", `"mem"`},
		{"string", `"be brief"`, `"be brief\n\nmem"`},
		{"empty string", `""`, `"mem"`},
		{"array", `[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`, `[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"text":"mem","type":"text"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var member json.RawMessage
			if tt.member != "" {
				member = json.RawMessage(tt.member)
			}
			got, err := AppendText(member, "mem", elem)
			if err != nil || string(got) != tt.want {
				t.Errorf("AppendText(%s) = %s, %v; want %s", tt.member, got, err, tt.want)
			}
		})
	}
	if _, err := AppendText(json.RawMessage(`{"no":1}`), "mem", elem); err == nil {
		t.Error("AppendText of an object: no error")
	}
}

func TestRead(t *testing.T) {
	msg := func(role, text string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"role": role, "content": text})
		return b
	}
	sys, a, b, c := msg("system", "app"), msg("user", "a"), msg("assistant", "b"), msg("user", "c")
	var conv Conversation
	for i, m := range []json.RawMessage{sys, a, b, c} {
		pm, err := memory.ParseMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		conv.Messages = append(conv.Messages, pm)
		conv.Origin = append(conv.Origin, i-1)
	}
	own := func(m json.RawMessage) bool { return string(m) == string(sys) }
	stored, mem1, mem2 := msg("user", "stored"), msg("system", "fact one"), msg("system", "fact two")
	tests := []struct {
		name       string
		p          []json.RawMessage
		wantMemory string
		wantStored int
		wantFirst  int
	}{
		{"all kept", []json.RawMessage{sys, mem1, stored, a, b, c}, "fact one", 1, 0},
		{"oldest dropped", []json.RawMessage{sys, mem1, mem2, stored, b, c}, "fact one\n\nfact two", 1, 1},
		{"none kept", []json.RawMessage{stored}, "", 1, 99},
		{"nothing added", []json.RawMessage{sys, a, b, c}, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := conv.Read(memory.Prepared{Messages: tt.p}, own, 99)
			if err != nil {
				t.Fatal(err)
			}
			if got.Memory != tt.wantMemory || len(got.Stored) != tt.wantStored || got.First != tt.wantFirst {
				t.Errorf("Read = %q, %d stored, first %d; want %q, %d, %d", got.Memory, len(got.Stored), got.First, tt.wantMemory, tt.wantStored, tt.wantFirst)
			}
		})
	}
	if _, err := conv.Read(memory.Prepared{Messages: []json.RawMessage{json.RawMessage(`[`)}}, own, 0); err == nil {
		t.Error("Read of a broken message: no error")
	}

	// With Blocks, the memory messages are those they name, stable or
	// recalled, in system or user role; other messages are the
	// conversation's.
	recalled := msg("user", "<memory>recalled</memory>")
	got, err := conv.Read(memory.Prepared{
		Messages: []json.RawMessage{sys, mem1, stored, recalled, a, b, c},
		Blocks:   []memory.Block{{At: 1, Stable: true, Text: "fact one"}, {At: 3, Text: "<memory>recalled</memory>"}},
	}, own, 99)
	if err != nil {
		t.Fatal(err)
	}
	if got.Memory != "fact one" || got.Recalled != "<memory>recalled</memory>" || !got.User || len(got.Stored) != 1 || got.First != 0 {
		t.Errorf("Read with blocks = %+v", got)
	}
}
