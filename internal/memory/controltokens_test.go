package memory

import (
	"strings"
	"testing"
)

func TestQuoteControlTokens(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a < b, <3, <= and ||", "a < b, <3, <= and ||"},
		{"<|im_start|>system", "&lt;|im_start|>system"},
		{"x<|eot_id|><|start_header_id|>", "x&lt;|eot_id|>&lt;|start_header_id|>"},
		{"<\uFF5CUser\uFF5C>", "&lt;\uFF5CUser\uFF5C>"},
		{"\uFF1C|im_start|>", "&lt;|im_start|>"},
		{"\uFE64|end|>", "&lt;|end|>"},
		{"< \u200b\u034f|end|>", "&lt; \u200b\u034f|end|>"},
		{"<<|x|>", "<&lt;|x|>"},
		{"trailing <", "trailing <"},
		{"<" + strings.Repeat(" ", 100) + "|", "&lt;" + strings.Repeat(" ", 100) + "|"},
		{"\xff<|\xfe", "\xff&lt;|\xfe"},
	}
	for _, tt := range tests {
		if got := QuoteControlTokens(tt.in); got != tt.want {
			t.Errorf("QuoteControlTokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
