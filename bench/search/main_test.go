package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "" }
	tests := []struct {
		name    string
		args    []string
		sizes   []int
		wantErr bool
	}{
		{"defaults", nil, []int{10000, 100000, 1000000}, false},
		{"sizes", []string{"-sizes", "10, 20"}, []int{10, 20}, false},
		{"bad size", []string{"-sizes", "10,x"}, nil, true},
		{"zero size", []string{"-sizes", "0"}, nil, true},
		{"zero queries", []string{"-queries", "0"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, env, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if err == nil && !slices.Equal(o.sizes, tt.sizes) {
				t.Fatalf("sizes = %v, want %v", o.sizes, tt.sizes)
			}
		})
	}
}

// TestChanSourceChunks covers the chunked COPY source: each chunk yields at
// most left rows, batches split across chunks lose and repeat nothing, and
// the end of the channel is reported once every row was read.
func TestChanSourceChunks(t *testing.T) {
	rows := make(chan [][]any, 4)
	var want []int
	n := 0
	for _, size := range []int{3, 0, 4, 2} {
		b := make([][]any, size)
		for i := range b {
			b[i] = []any{n}
			want = append(want, n)
			n++
		}
		rows <- b
	}
	close(rows)
	src := &chanSource{rows: rows}
	var got []int
	var chunks []int
	for !src.done {
		src.left = 4
		c := 0
		for src.Next() {
			v, err := src.Values()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v[0].(int))
			c++
		}
		chunks = append(chunks, c)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
	if !slices.Equal(chunks, []int{4, 4, 1}) {
		t.Fatalf("chunk sizes = %v, want [4 4 1]", chunks)
	}
}

func TestCorpusIsDeterministic(t *testing.T) {
	a, b := newCorpus(7, 1000), newCorpus(7, 1000)
	for _, i := range []int{0, 1, 999, 123456} {
		if a.item(i) != b.item(i) {
			t.Fatalf("item %d differs between two corpora of one seed", i)
		}
	}
	if a.item(1).text == a.item(2).text {
		t.Fatalf("two items have the same text %q", a.item(1).text)
	}
	if u := a.item(1001).user; u != userID(1) {
		t.Fatalf("item 1001 belongs to %s, want %s", u, userID(1))
	}
	if n := len(strings.Fields(a.item(5).text)); n < 8 || n > 39 {
		t.Fatalf("item has %d words, want 8..39", n)
	}
}

func TestRenderReportsUnmeasuredSizes(t *testing.T) {
	o := options{sizes: []int{10, 20}, users: 2, queries: 3, hnswQueries: 3, limit: 1}
	out := render(o, "env", "1.0", []result{
		{items: 10, users: 2, note: "not measured: the time budget ran out"},
	})
	for _, want := range []string{"| 10 | – | – | – | – |", "- 10 items: not measured: the time budget ran out."} {
		if !strings.Contains(out, want) {
			t.Fatalf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestRenderTitleDurationAndPlans(t *testing.T) {
	o := options{sizes: []int{10}, users: 2, queries: 3, hnswQueries: 3, limit: 1, title: "Search at 1M"}
	out := render(o, "env", "1.0", []result{{
		items: 10, users: 2, load: loadStats{elapsed: time.Second, embedBusy: time.Second, loaded: 10},
		build: time.Second, built: true, took: 95 * time.Second,
		explainPlanner: "Limit\n  ->  Sort", explainHNSW: "Limit\n  ->  Index Scan using memory_items_embedding_384",
	}})
	for _, want := range []string{"## Search at 1M\n", "| 10 | 10 | 10 | 1s | 10 | 1m35s |",
		"-- planner's choice\nLimit\n  ->  Sort\n", "Index Scan using memory_items_embedding_384"} {
		if !strings.Contains(out, want) {
			t.Fatalf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestVectorLiteralHidden(t *testing.T) {
	got := vectorLiteral.ReplaceAllString(`Order By: ((embedding)::vector(384) <=> '[0,0.5,-1e-05]'::vector)`, "$$3")
	if want := `Order By: ((embedding)::vector(384) <=> $3)`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
