package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/eval/standin"
	"github.com/memgate/memgate/eval/synth"
)

// Target of issue 6 at the 4k budget.
const (
	targetBudget   = 4000
	targetRatio    = 3.0
	targetCoverage = 0.70
	targetStale    = 0.05
)

// markdown renders the report: context, the table, the target check.
func (r *results) markdown() string {
	var b strings.Builder
	o := r.o
	fmt.Fprintf(&b, "## Memory quality (`make eval`)\n\n")
	fmt.Fprintf(&b, "- Machine: %s, %d CPUs, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "- Date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Command: `%s` (seed %d; %s)\n", strings.TrimSpace(r.command), o.seed, elapsed(r))
	fmt.Fprintf(&b, "- Data: %d synthetic users × %d sessions × %d user turns (%d turns replayed), %d planted items per category per user, %d probes; full history ≈ %.0f tokens per probe\n",
		o.users, o.synth.Sessions, o.synth.TurnsPerSession, r.turns, o.synth.ItemsPerCategory, r.probes, r.fullTokens)
	cfg := "built-in default config except `memory.load_timeout: 5s` (so machine load cannot drop memory from a probe)"
	if o.config != "" {
		cfg = "config " + o.config
	}
	fmt.Fprintf(&b, "- memgate: real `gateway serve` binary, SQLite store, %s; the application sends only its newest message, each session under its own conversation id; probes are asked %s with `X-Memory-Mode: read` and `X-Memory-Budget: <budget>`, model `%s`\n",
		cfg, probeWhere(o.probeIn), o.model)
	fmt.Fprintf(&b, "- Upstream: a **stand-in** (eval/standin), not a model: generic chat answers of about 130 tokens that never repeat the user's specifics; extractive summaries (%d calls) and pattern-based fact extraction (%d calls) in place of an LLM\n",
		r.sideCalls[standin.KindSummary], r.sideCalls[standin.KindFacts])
	fmt.Fprintf(&b, "- Baselines from the same history and tokenizer: last-N truncation keeps the newest whole turns that fit the budget; full history keeps everything\n\n")

	fmt.Fprintf(&b, "| budget | method |")
	for _, c := range synth.Categories {
		fmt.Fprintf(&b, " %s |", c)
	}
	fmt.Fprintf(&b, " overall | stale | mean prompt tokens |\n|---|---|")
	for range synth.Categories {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|\n")
	row := func(c cell, label string) {
		t, ok := r.tallies[c]
		if !ok {
			return
		}
		fmt.Fprintf(&b, "| %s | %s |", label, c.method)
		for _, cat := range synth.Categories {
			if v, ok := t.Coverage(cat); ok {
				fmt.Fprintf(&b, " %s |", pct(v))
			} else {
				b.WriteString(" – |")
			}
		}
		stale := "–"
		if v, ok := t.StaleRate(); ok {
			stale = pct(v)
		}
		fmt.Fprintf(&b, " **%s** | %s | %.0f |\n", pct(t.Overall()), stale, t.MeanTokens())
	}
	methods := r.methods
	if len(methods) == 0 {
		methods = []string{methodMemgate}
	}
	for _, bud := range o.budgets {
		for _, m := range methods {
			row(cell{bud, m, ""}, fmt.Sprint(bud))
		}
		row(cell{bud, methodTruncate, ""}, fmt.Sprint(bud))
	}
	row(cell{0, methodFull, ""}, "none")
	b.WriteString("\nCoverage: share of probes whose answer value reached the upstream prompt (verbatim turn, recalled passage, fact, pinned fact or summary). ")
	b.WriteString("Stale: share of changed-fact probes whose superseded value was in the prompt without the winning value, or listed as a current (pinned or user) fact — see eval/score.\n")
	if slices.Contains(methods, methodPatterns) {
		fmt.Fprintf(&b, "\n*%s*: the same gateway, but the stand-in's fact extraction finds nothing, so memgate has only its own pinned-fact patterns, summaries and recall — an upper bound on what the stand-in extractor contributes.\n", methodPatterns)
	}
	b.WriteString(r.styleTable(methods))
	b.WriteString(r.sourceTable(methods))
	if r.degraded > 0 || r.overBudget > 0 || r.headerDiff > 0 {
		fmt.Fprintf(&b, "\nmemgate probes degraded (memory not loaded in time): %d; over budget: %d; X-Memory-Tokens-Sent differing from the count of what arrived upstream: %d.\n", r.degraded, r.overBudget, r.headerDiff)
	}
	b.WriteString(caveats)
	b.WriteString("\n" + r.targetCheck())
	return b.String()
}

// caveats say what the numbers do not show.
const caveats = `
Caveats:
- The upstream is a stand-in. Its summaries keep the user's salient sentences verbatim and its fact extraction is a set of English and Portuguese patterns; a real model summarises and extracts differently (better at paraphrase, worse at keeping every figure verbatim). The "no model facts" row bounds what the stand-in extractor contributes.
- Coverage needs the planted value verbatim (word-bounded, case-insensitive): a summary that rewrote "R$ 5.000" as "5k reais" would count as a miss, and a prompt that carries the value without the model using it counts as a hit — coverage is evidence reaching the model, not a correct answer.
- The default embedder is memgate's local one, which matches words, not meaning; the indirect questions show what that costs.
- Messages are stored at replay time, minutes apart, so the sessions' narrative dates (weeks apart) play no part in recency weighting or in the dates shown with recalled passages.
`

// styleTable shows coverage for direct questions (reusing the statement's
// words) and indirect ones (not), for every method.
func (r *results) styleTable(methods []string) string {
	var b strings.Builder
	b.WriteString("\nCoverage by question style — direct questions reuse the words of the statement (\"How much do I pay in rent each month?\"), indirect ones do not (\"Is my housing cost reasonable for a two-bedroom place?\"):\n\n| budget | method | direct | indirect | stale (direct) | stale (indirect) |\n|---|---|---:|---:|---:|---:|\n")
	line := func(bud int, label, m string) {
		d, ok1 := r.tallies[cell{bud, m, synth.Direct}]
		in, ok2 := r.tallies[cell{bud, m, synth.Indirect}]
		if !ok1 || !ok2 {
			return
		}
		ds, _ := d.StaleRate()
		is, _ := in.StaleRate()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", label, m, pct(d.Overall()), pct(in.Overall()), pct(ds), pct(is))
	}
	for _, bud := range r.o.budgets {
		for _, m := range methods {
			line(bud, fmt.Sprint(bud), m)
		}
		line(bud, fmt.Sprint(bud), methodTruncate)
	}
	line(0, "none", methodFull)
	return b.String()
}

// sources are the places evidence is found, in report order.
var sources = []string{"turn", "pinned", "facts", "summary", "recalled", "memory"}

// sourceTable shows where memgate's evidence was found: the share of probes
// whose winning value appeared in each part of the prompt (a probe can count
// for several).
func (r *results) sourceTable(methods []string) string {
	var b strings.Builder
	b.WriteString("\nWhere the evidence was (share of probes whose answer value appeared in each part of the prompt; a probe can count for several):\n\n| budget | method |")
	for _, s := range sources {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|---|---|")
	for range sources {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, bud := range r.o.budgets {
		for _, m := range methods {
			t, ok := r.tallies[cell{bud, m, ""}]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s |", bud, m)
			for _, s := range sources {
				fmt.Fprintf(&b, " %s |", pct(t.Source(s)))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// targetCheck prints the target at the 4k budget as PASS/FAIL lines.
func (r *results) targetCheck() string {
	mem, ok1 := r.tallies[cell{targetBudget, methodMemgate, ""}]
	tr, ok2 := r.tallies[cell{targetBudget, methodTruncate, ""}]
	if !ok1 || !ok2 {
		return fmt.Sprintf("Target check skipped: the %d-token budget was not measured.\n", targetBudget)
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Target at %d tokens:\n\n```\n", targetBudget)
	m, t := mem.Overall(), tr.Overall()
	ratio := "∞"
	if t > 0 {
		ratio = fmt.Sprintf("%.1f×", m/t)
	}
	fmt.Fprintf(&b, "%s coverage >= %.0f× truncation: %s vs %s (%s)\n", verdict(m >= targetRatio*t && m > 0), targetRatio, pct(m), pct(t), ratio)
	fmt.Fprintf(&b, "%s coverage > %s: %s\n", verdict(m > targetCoverage), pct(targetCoverage), pct(m))
	s, _ := mem.StaleRate()
	fmt.Fprintf(&b, "%s stale-fact rate < %s: %s\n```\n", verdict(s < targetStale), pct(targetStale), pct(s))
	return b.String()
}

func pct(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

func probeWhere(in []string) string {
	var parts []string
	for i, w := range in {
		p := "in a new conversation"
		if w == probeLast {
			p = "in the user's last session (continuing it)"
		}
		if i == 0 && len(in) > 1 {
			p += " (rows \"memgate\")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " and ")
}

func elapsed(r *results) string {
	return fmt.Sprintf("%s in all, replay %s", r.elapsed.Round(time.Second), r.replay.Round(time.Second))
}

// cpuModel returns the CPU model name from /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
