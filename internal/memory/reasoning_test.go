package memory

import "testing"

func TestLossless(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`["plain"]`, true},
		{`["provider's own \ufffd and ` + "\uFFFD" + `"]`, true},
		{`["a pair \ud83d\ude00"]`, true},
		{`["a lone high \ud83d here"]`, false},
		{`["a lone low \ude00"]`, false},
		{`["high then not low \ud83d\u0041"]`, false},
		{`["high at the end \ud83d"]`, false},
		{"[\"invalid \xff\"]", false},
		{`["escaped backslash \\ud83d"]`, false}, // the safe side
	} {
		if got := Lossless([]byte(tc.raw)); got != tc.want {
			t.Errorf("Lossless(%s) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

// TestReasoningIntact: a digest taken as received tells storing's changes
// from the provider's own text, however the blocks are re-encoded.
func TestReasoningIntact(t *testing.T) {
	const blocks = `[{"type":"thinking","thinking":"Porto \ufffd [redacted:x] <b>","signature":"sig"}]`
	d := ReasoningDigest([]byte(blocks))
	if d == "" {
		t.Fatal("no digest")
	}
	for _, tc := range []struct {
		name, raw, digest string
		want              bool
	}{
		{"as received", blocks, d, true},
		{"re-encoded", "[ {\"signature\":\"sig\", \"thinking\":\"Porto \uFFFD [redacted:x] \\u003cb\\u003e\",\"type\":\"thinking\"} ]", d, true},
		{"redacted since", `[{"type":"thinking","thinking":"Porto \ufffd [redacted:x] [redacted:api_key]","signature":"sig"}]`, d, false},
		{"signature changed", `[{"type":"thinking","thinking":"Porto \ufffd [redacted:x] <b>","signature":"sig2"}]`, d, false},
		{"no digest, replacement char", blocks, "", false},
		{"no digest, clean", `[{"type":"thinking","thinking":"Porto","signature":"sig"}]`, "", true},
		{"no digest, mark", `[{"type":"redacted_thinking","data":"Em[redacted:b64]"}]`, "", false},
		{"not JSON", `[{`, d, false},
	} {
		if got := ReasoningIntact([]byte(tc.raw), tc.digest); got != tc.want {
			t.Errorf("%s: ReasoningIntact = %v, want %v", tc.name, got, tc.want)
		}
	}
	if ReasoningDigest([]byte(`["lone \udc00"]`)) != "" {
		t.Error("a lossy read got a digest")
	}
}
