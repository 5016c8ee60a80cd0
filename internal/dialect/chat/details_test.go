package chat

import (
	"testing"
)

// TestStreamDetailsMerge: streamed reasoning_details pieces are joined
// into the details a whole reply holds.
func TestStreamDetailsMerge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
		want   string
	}{
		{"text then signature", []string{
			`[{"type":"reasoning.text","text":"a","signature":null,"index":0}]`,
			`[{"type":"reasoning.text","text":"b","signature":null,"index":0}]`,
			`[{"type":"reasoning.text","signature":"sig","index":0}]`,
		}, `[{"type":"reasoning.text","text":"ab","signature":"sig","index":0}]`},
		{"two types at one index", []string{
			`[{"type":"reasoning.summary","summary":"s1","index":0,"format":"openai-responses-v1"}]`,
			`[{"type":"reasoning.encrypted","data":"gAAA","index":0,"format":"openai-responses-v1"},{"type":"reasoning.summary","summary":"s2","index":0}]`,
		}, `[{"type":"reasoning.summary","summary":"s1s2","index":0,"format":"openai-responses-v1"},{"type":"reasoning.encrypted","data":"gAAA","index":0,"format":"openai-responses-v1"}]`},
		{"no index continues", []string{
			`[{"type":"reasoning.text","text":"x"}]`,
			`[{"type":"reasoning.text","text":"y"}]`,
			`[{"type":"reasoning.text","text":"z","index":1}]`,
		}, `[{"type":"reasoning.text","text":"xy"},{"type":"reasoning.text","text":"z","index":1}]`},
		{"none", []string{`[]`, `null`}, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d streamDetails
			for _, p := range tc.pieces {
				if err := d.add([]byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := d.result()
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if got != nil {
					t.Errorf("got %s, want none", got)
				}
				return
			}
			if !jsonEqual(t, got, []byte(tc.want)) || !d.lossless {
				t.Errorf("got %s (lossless %v)\nwant %s", got, d.lossless, tc.want)
			}
		})
	}
	var d streamDetails
	if err := d.add([]byte(`{"type":"reasoning.text"}`)); err == nil {
		t.Error("details that are not an array were read")
	}
	d = streamDetails{}
	d.add([]byte(`[{"type":"reasoning.text","text":"lone \udc00"}]`))
	if d.lossless {
		t.Error("a lone surrogate read as lossless")
	}
}
