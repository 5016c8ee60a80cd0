package main

import (
	"cmp"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/eval/locomo"
	"gopkg.in/yaml.v3"
)

func TestParseLoCoMoFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantErr  bool
		pick     []int
		clients  []string
		deadline time.Duration
		side     string // "" is sideNone
		pace     string // "" is paceEnriched
	}{
		{name: "defaults", args: []string{"-locomo", "x.json"}, clients: []string{clientNewest}, deadline: loDeadline},
		{name: "subset and both clients", args: []string{"-locomo", "x.json", "-conversations", "1, 3", "-client", "newest,full"}, pick: []int{1, 3}, clients: []string{clientNewest, clientFull}, deadline: loDeadline},
		{name: "explicit timeout kept", args: []string{"-locomo", "x.json", "-timeout", "5m"}, clients: []string{clientNewest}, deadline: 5 * time.Minute},
		{name: "conversation zero", args: []string{"-locomo", "x.json", "-conversations", "0"}, wantErr: true},
		{name: "conversation not a number", args: []string{"-locomo", "x.json", "-conversations", "conv-26"}, wantErr: true},
		{name: "unknown client", args: []string{"-locomo", "x.json", "-client", "stream"}, wantErr: true},
		{name: "budget", args: []string{"-locomo", "x.json", "-locomo-budget", "0"}, wantErr: true},
		{name: "stand-in side model, paced by saves", args: []string{"-locomo", "x.json", "-side-model", "stand-in", "-pace", "saved"}, clients: []string{clientNewest}, deadline: loDeadline, side: sideStandIn, pace: paceSaved},
		{name: "unknown side model", args: []string{"-locomo", "x.json", "-side-model", "gpt"}, wantErr: true},
		{name: "unknown pace", args: []string{"-locomo", "x.json", "-pace", "fast"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"eval"}, tt.args...), io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if o.deadline != tt.deadline || strings.Join(o.locomoClients, ",") != strings.Join(tt.clients, ",") || len(o.locomoPick) != len(tt.pick) {
				t.Fatalf("deadline %v clients %v pick %v, want %v %v %v", o.deadline, o.locomoClients, o.locomoPick, tt.deadline, tt.clients, tt.pick)
			}
			if side, pace := cmp.Or(tt.side, sideNone), cmp.Or(tt.pace, paceEnriched); o.sideModel != side || o.pace != pace {
				t.Fatalf("side model %q pace %q, want %q %q", o.sideModel, o.pace, side, pace)
			}
			for i := range tt.pick {
				if o.locomoPick[i] != tt.pick[i] {
					t.Fatalf("pick %v, want %v", o.locomoPick, tt.pick)
				}
			}
		})
	}
	// Without -locomo the synthetic set keeps its own deadline and its
	// stand-in side model.
	o, err := parseFlags([]string{"eval"}, io.Discard)
	if err != nil || o.deadline != 14*time.Minute || o.sideModel != sideStandIn {
		t.Fatalf("synthetic deadline %v, side model %q (%v), want 14m and %q", o.deadline, o.sideModel, err, sideStandIn)
	}
}

// TestClientExchanges: a full-history client's assistant-opened sessions
// start with distinct user messages (the gateway derives a header-less
// chat's conversation from its first user message); the newest client
// keeps the placeholder, and the texts are otherwise the same.
func TestClientExchanges(t *testing.T) {
	c := locomo.Conversation{Speakers: [2]string{"Ana", "Ben"}}
	for i, d := range []time.Time{time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), time.Date(2023, 6, 1, 21, 0, 0, 0, time.UTC)} {
		c.Sessions = append(c.Sessions, locomo.Session{N: i + 1, Date: d, Turns: []locomo.Turn{
			{ID: "a", Speaker: 1, Text: "Hi Ana, how are you?"},
			{ID: "b", Speaker: 0, Text: "Great!"},
		}})
	}
	seen := map[string]bool{}
	for si := range c.Sessions {
		newest := clientExchanges(c, si, clientNewest)
		full := clientExchanges(c, si, clientFull)
		if newest[0].User != locomo.Placeholder {
			t.Fatalf("newest client's first message %q, want the placeholder", newest[0].User)
		}
		if full[0].User == locomo.Placeholder || seen[full[0].User] {
			t.Fatalf("full client's first message %q is the placeholder or another session's", full[0].User)
		}
		seen[full[0].User] = true
		if len(newest) != len(full) || newest[0].Reply != full[0].Reply || newest[1] != full[1] {
			t.Fatalf("clients differ beyond the first message: %+v vs %+v", newest, full)
		}
		all, last := loHistory(c, clientFull)
		var first struct{ Content string }
		if err := json.Unmarshal(last[0], &first); err != nil || first.Content != clientExchanges(c, len(c.Sessions)-1, clientFull)[0].User {
			t.Fatalf("last session's history starts with %q (%v)", first.Content, err)
		}
		if len(all) != 8 || len(last) != 4 {
			t.Fatalf("history %d messages, last session %d, want 8 and 4", len(all), len(last))
		}
	}
}

// TestBreakRows: each place a prompt stopped repeating gets its count, the
// share its prompts did not repeat on average, and its part of what the
// mean share misses; the parts add up to 1 − the mean share.
func TestBreakRows(t *testing.T) {
	c := &loClient{name: "newest", prefixN: 4, prefix: 0.9 + 0.5 + 0.5 + 1,
		breaks: map[string]int{locomo.BreakNone: 1, locomo.PartSummary: 2, locomo.PartRecall: 1},
		lost:   map[string]float64{locomo.BreakNone: 0, locomo.PartSummary: 0.5 + 0.5, locomo.PartRecall: 0.1}}
	got := c.breakRows()
	want := "| newest | " + locomo.BreakNone + " | 1 | 0.000 | 0.000 |\n" +
		"| newest | " + locomo.PartSummary + " | 2 | 0.500 | 0.250 |\n" +
		"| newest | " + locomo.PartRecall + " | 1 | 0.100 | 0.025 |\n"
	if got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
}

// TestWithDefault: the setting is added where the config lacks it, under
// existing or new mappings, and a config that sets it keeps its own.
func TestWithDefault(t *testing.T) {
	path := []string{"capture", "enrich_interval"}
	tests := []struct {
		name, cfg string
		want      string // capture.enrich_interval after
		wantErr   bool
	}{
		{name: "empty config", cfg: "", want: "10ms"},
		{name: "other sections kept", cfg: "memory:\n  load_timeout: 60s\n", want: "10ms"},
		{name: "section without the key", cfg: "capture:\n  redact: false\n", want: "10ms"},
		{name: "key set", cfg: "capture:\n  enrich_interval: 1s\n", want: "1s"},
		{name: "section not a mapping", cfg: "capture: 3\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withDefault(tt.cfg, path, "10ms")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			var c struct {
				Capture struct {
					EnrichInterval string `yaml:"enrich_interval"`
					Redact         *bool  `yaml:"redact"`
				} `yaml:"capture"`
				Memory struct {
					LoadTimeout string `yaml:"load_timeout"`
				} `yaml:"memory"`
			}
			if err := yaml.Unmarshal([]byte(got), &c); err != nil {
				t.Fatal(err)
			}
			if c.Capture.EnrichInterval != tt.want {
				t.Fatalf("enrich_interval %q, want %q in:\n%s", c.Capture.EnrichInterval, tt.want, got)
			}
			if strings.Contains(tt.cfg, "load_timeout") && c.Memory.LoadTimeout != "60s" {
				t.Fatalf("memory.load_timeout lost:\n%s", got)
			}
			if strings.Contains(tt.cfg, "redact") && (c.Capture.Redact == nil || *c.Capture.Redact) {
				t.Fatalf("capture.redact lost:\n%s", got)
			}
		})
	}
}

// TestLoCoMoReportNamesSetupAndFailures: the report says which side model
// and pace the run had, and warns when enrichment failed before the
// questions (what those rounds should have written may be missing).
func TestLoCoMoReportNamesSetupAndFailures(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		failures int
		want     []string
		notWant  []string
	}{
		{"defaults, no failure", nil, 0, []string{"Side model: none; pace: each exchange sent once the previous one was enriched (capture.enrich_interval 10ms"}, []string{"enrichment failed"}},
		{"stand-in, saved, failures", []string{"-side-model", "stand-in", "-pace", "saved"}, 3, []string{"Side model: stand-in; pace: each exchange sent once the previous one was saved\n", "enrichment failed 3 times"}, []string{"enrich_interval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"eval", "-locomo", "x.json"}, tt.args...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			r := &loResults{o: o, baseline: map[string]*locomo.Tally{loBM25: locomo.NewTally(), loTruncate: locomo.NewTally()},
				clients: []*loClient{{name: clientNewest, tally: locomo.NewTally(), partTokens: map[string]int{}, enrichFailures: tt.failures}}}
			md := r.markdown()
			for _, s := range tt.want {
				if !strings.Contains(md, s) {
					t.Errorf("report lacks %q:\n%s", s, md)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(md, s) {
					t.Errorf("report has %q:\n%s", s, md)
				}
			}
		})
	}
}
