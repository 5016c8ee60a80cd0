package postgres

import (
	"github.com/memgate/memgate/internal/memory"
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.RepliedStore = (*Store)(nil)

func TestRepliedContract(t *testing.T) {
	storetest.RunReplied(t, func(t *testing.T) storetest.RepliedStore { return mustOpen(t) })
}

// TestReplyTextIsGos: memgate_reply_text, the text whose digest the
// save-turn function stores as a reply's print, is the text Go digests
// (memory.Message.ComparedContent), for every shape of white space and
// reasoning block, with characters of several bytes before and after the
// tags.
func TestReplyTextIsGos(t *testing.T) {
	s := mustOpen(t)
	for _, text := range []string{
		"", "Hi", " \t\n\r\v\fHi \n", "\u00a0Hi\u00a0",
		"<think>r</think>Hi", "\n<think>\nr\n</think>\n\n Hi\n", "<think></think>", "<think></think>\n",
		"<think>ração 😀</think>\n\nolá 😀", "😀<think>r</think>Hi", "<think>r</think></think>Hi",
		"<think>a</think><think>b</think>Hi", "<think>never closed", "</think>Hi", "<think", "<THINK>r</THINK>Hi",
		"Sure. <think>r</think> Hi", "<think>r</think>\u00a0Hi",
	} {
		var got string
		if err := s.pool.QueryRow(testCtx(t), `SELECT memgate_reply_text($1)`, text).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := (memory.Message{Role: "assistant", Content: text}).ComparedContent(); got != want {
			t.Errorf("memgate_reply_text(%q) = %q, Go compares %q", text, got, want)
		}
	}
}
