package chat

import (
	"encoding/json"
	"fmt"
	"strings"
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

// TestStreamDetailsBounded: a stream naming ever more details (a hostile
// upstream, each piece a new index: a 4 MiB capture holds some 300,000)
// makes the reassembly neither hold a detail per piece nor search every
// detail before for each: past maxStreamDetails the details are let go,
// the reply stored without them (nothing to replay, no digest), and the
// pieces after are not read. Details the stream continues past the
// bound go on being joined by index however many pieces come.
func TestStreamDetailsBounded(t *testing.T) {
	var d streamDetails
	var b strings.Builder
	for i := range 4 * maxStreamDetails {
		b.Reset()
		fmt.Fprintf(&b, `[{"type":"reasoning.text","text":"t","index":%d}]`, i)
		if err := d.add([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
		if len(d.list) > maxStreamDetails {
			t.Fatalf("piece %d: %d details held, want at most %d", i, len(d.list), maxStreamDetails)
		}
	}
	if got, err := d.result(); err != nil || got != nil {
		t.Errorf("details past the bound = %s, %v; want none", got, err)
	}

	// Few details, many pieces: each piece finds its detail by index.
	d = streamDetails{}
	for i := range 10 * maxStreamDetails {
		b.Reset()
		fmt.Fprintf(&b, `[{"type":"reasoning.text","text":"x","index":%d}]`, i%3)
		if err := d.add([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.result()
	if err != nil {
		t.Fatal(err)
	}
	var out []struct{ Text string }
	if err := json.Unmarshal(got, &out); err != nil || len(out) != 3 || len(out[0].Text) != 10*maxStreamDetails/3+1 {
		t.Errorf("3 details over %d pieces: %d details (%v)", 10*maxStreamDetails, len(out), err)
	}
}
