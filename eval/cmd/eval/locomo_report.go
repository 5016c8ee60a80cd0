package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/memgate/memgate/eval/locomo"
	"github.com/memgate/memgate/eval/standin"
)

// loCategories are the categories asked, in report order.
var loCategories = []int{1, 2, 3, 4}

// The goal of issue 26 at the question budget.
const (
	loTargetOverall  = 0.90
	loTargetCategory = 0.70
)

// methods lists the report's rows: memgate per client, then the baselines.
func (r *loResults) methods() []struct {
	name  string
	tally *locomo.Tally
} {
	var out []struct {
		name  string
		tally *locomo.Tally
	}
	add := func(n string, t *locomo.Tally) {
		out = append(out, struct {
			name  string
			tally *locomo.Tally
		}{n, t})
	}
	for _, c := range r.clients {
		add("memgate, "+c.name+" client", c.tally)
	}
	add(loBM25, r.baseline[loBM25])
	add(loTruncate, r.baseline[loTruncate])
	return out
}

// markdown renders the LoCoMo report.
func (r *loResults) markdown() string {
	var b strings.Builder
	o := r.o
	fmt.Fprintf(&b, "## Memory quality on LoCoMo (`make eval LOCOMO=…`)\n\n")
	fmt.Fprintf(&b, "- Machine: %s, %d CPUs, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&b, "- Date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Command: `%s` (%s in all", strings.TrimSpace(r.command), r.elapsed.Round(time.Second))
	for _, c := range r.clients {
		fmt.Fprintf(&b, "; %s client replay %s", c.name, c.replay.Round(time.Second))
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "- Side model: %s; pace: each exchange sent once the previous one was %s", o.sideModel, o.pace)
	if o.pace == paceEnriched && o.enrichInterval > 0 {
		fmt.Fprintf(&b, " (capture.enrich_interval %s unless the config sets it)", o.enrichInterval)
	}
	b.WriteString("\n")
	turns, sessions, questions, evidence := 0, 0, 0, 0
	byCat := map[int]int{}
	var ids []string
	for _, c := range r.convs {
		ids = append(ids, c.ID)
		turns += c.Turns()
		sessions += len(c.Sessions)
		for _, q := range c.Questions {
			if asked(q) {
				questions++
				evidence += len(q.Evidence)
				byCat[q.Category]++
			}
		}
	}
	exchanges := 0
	if len(r.clients) > 0 {
		exchanges = r.clients[0].exchanges
	}
	fmt.Fprintf(&b, "- Data: LoCoMo (`snap-research/LoCoMo`, `data/locomo10.json`, not in this repository), conversations %s: %d sessions dated over months, %d turns replayed as %d exchanges; %d questions of categories 1–4 (",
		strings.Join(ids, ", "), sessions, turns, exchanges, questions)
	for i, cat := range loCategories {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", byCat[cat], locomo.CategoryName(cat))
	}
	fmt.Fprintf(&b, ") naming %d evidence turns; adversarial questions (category 5) are not asked\n", evidence)
	cfg := "built-in default config except `memory.load_timeout: 5s` and `memory.embedding_timeout: 5s`"
	if o.config != "" {
		cfg = "config " + o.config
	}
	store := "SQLite store"
	if o.postgresURL != "" {
		store = "PostgreSQL + pgvector store behind Redis"
	}
	fmt.Fprintf(&b, "- memgate: real `gateway serve` binary, %s, %s, model `%s`. Speaker A is the user, speaker B the assistant: the stand-in upstream answers each exchange with B's scripted turns, so they are captured as the assistant's. One chat request per exchange (consecutive turns of a speaker merged; a session opened by B, or closed by A, gets `%s` for the missing side), each with `X-Memory-Timestamp` of its session's date (a minute apart within a session)\n",
		store, cfg, o.model, locomo.Placeholder)
	b.WriteString("- Clients: *newest* sends `X-Memory-Conversation` (one conversation per LoCoMo sample) and only its newest message; *full* resends the whole session so far and no conversation header (the gateway derives the conversation from the tenant, the user and the first user message — not the system prompt —, so a session the assistant opens starts with a user message naming the session's date, e.g. `(1:56 pm on 8 May, 2023)`, where the newest client sends `…`; recall crosses conversations by default)\n")
	fmt.Fprintf(&b, "- Questions: asked after the last session, in the same conversation (the *full* client resends the last session before the question), with `X-Memory-Mode: %s` and `X-Memory-Budget: %d`, `X-Memory-Timestamp` a minute after the last exchange\n", o.questionMode, o.locomoBudget)
	b.WriteString("- Covered: an evidence turn (`D1:3`) counts as covered when at least half of its word 5-grams are in what the upstream received before the question, or, under 6 words, when it appears whole\n")
	b.WriteString("- Baselines from the same turns and tokenizer, at the same budget, computed in the same run: BM25 over single turns (Okapi BM25, k1 1.2, b 0.75, no stop words; each turn with its session's date and speaker, best first until the budget is full); last-N truncation of the replayed history\n")
	for _, c := range r.clients {
		fmt.Fprintf(&b, "- Stand-in side calls, %s client: %d summaries, %d fact extractions\n", c.name, c.sideCalls[standin.KindSummary], c.sideCalls[standin.KindFacts])
	}

	fmt.Fprintf(&b, "\nCoverage at %d tokens by category (share of evidence turns that reached the prompt):\n\n| method |", o.locomoBudget)
	for _, cat := range loCategories {
		fmt.Fprintf(&b, " %s |", locomo.CategoryName(cat))
	}
	b.WriteString(" **overall** | mean prompt tokens | largest prompt | prompts over budget |\n|---|")
	for range loCategories {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|---:|\n")
	for _, m := range r.methods() {
		t := m.tally
		fmt.Fprintf(&b, "| %s |", m.name)
		for _, cat := range loCategories {
			b.WriteString(" " + ratioText(t.ByCategory[cat]) + " |")
		}
		all, _ := t.All.Value()
		fmt.Fprintf(&b, " **%.3f** | %.0f | %d | %d of %d |\n", all, t.MeanTokens(), t.MaxTokens, t.OverBudget, t.Prompts)
	}

	b.WriteString("\nCoverage by depth (sessions between the evidence and the questions; 0 is the last session):\n\n| method |")
	for _, k := range locomo.DepthBuckets {
		fmt.Fprintf(&b, " %s |", k)
	}
	b.WriteString("\n|---|")
	for range locomo.DepthBuckets {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, m := range r.methods() {
		fmt.Fprintf(&b, "| %s |", m.name)
		for _, k := range locomo.DepthBuckets {
			b.WriteString(" " + ratioText(m.tally.ByDepth[k]) + " |")
		}
		b.WriteString("\n")
	}
	if len(r.clients) > 0 {
		b.WriteString("\nEvidence turns per depth bucket:")
		for _, k := range locomo.DepthBuckets {
			n := 0
			if rt := r.clients[0].tally.ByDepth[k]; rt != nil {
				n = rt.Total
			}
			fmt.Fprintf(&b, " %s: %d;", k, n)
		}
		b.WriteString("\n")
	}

	b.WriteString("\nWhere a question's prompt tokens go (mean tokens per prompt, issue 27; parts read from the memory block's sections in the prompt the upstream received):\n\n| client |")
	for _, p := range locomo.Parts {
		fmt.Fprintf(&b, " %s |", p)
	}
	b.WriteString(" total |\n|---|")
	for range locomo.Parts {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	for _, c := range r.clients {
		n := max(1, c.tally.Prompts)
		fmt.Fprintf(&b, "| %s |", c.name)
		total := 0
		for _, p := range locomo.Parts {
			fmt.Fprintf(&b, " %.0f |", float64(c.partTokens[p])/float64(n))
			total += c.partTokens[p]
		}
		fmt.Fprintf(&b, " %.0f |\n", float64(total)/float64(n))
	}

	fmt.Fprintf(&b, "\nPrompt-cache prefix (issue 28): mean share of each replayed exchange's prompt (its messages' JSON as the upstream received them, %d characters or more) that repeats the previous request of the same conversation from the first byte; a conversation's first request has no previous one and is not counted:\n\n| client | mean prefix share | prompts counted | shorter prompts left out |\n|---|---:|---:|---:|\n", prefixMinChars)
	for _, c := range r.clients {
		share := 0.0
		if c.prefixN > 0 {
			share = c.prefix / float64(c.prefixN)
		}
		fmt.Fprintf(&b, "| %s | %.3f | %d | %d |\n", c.name, share, c.prefixN, c.prefixSkipped)
	}
	b.WriteString("\nWhere the counted prompts stop repeating the previous one (the part of the first differing message; in a memory block, the section of its first differing line), and the share those prompts do not repeat: on average over them, and as their part of what the mean prefix share misses (the parts' parts add up to 1 − the mean share):\n\n| client | part | prompts | mean unrepeated share | of the mean share missed |\n|---|---|---:|---:|---:|\n")
	for _, c := range r.clients {
		b.WriteString(c.breakRows())
	}
	for _, c := range r.clients {
		if c.enrichFailures > 0 {
			fmt.Fprintf(&b, "\n%s client: enrichment failed %d times before the questions (memgate_enrich_failures_total; see the gateway log): what those rounds should have indexed or summarised may be missing.\n", c.name, c.enrichFailures)
		}
		if c.degraded > 0 || c.overHeader > 0 {
			fmt.Fprintf(&b, "\n%s client: questions degraded (a memory part not loaded in time): %d; marked X-Memory-Over-Budget: %d.\n", c.name, c.degraded, c.overHeader)
		}
	}
	b.WriteString("\n" + r.goalCheck())
	return b.String()
}

// breakRows are c's rows of the prefix-break table: for each place a
// counted prompt stopped repeating the previous one, how many did, the
// share they did not repeat on average, and that summed over the counted
// prompts (what the place costs the mean prefix share).
func (c *loClient) breakRows() string {
	var b strings.Builder
	for _, p := range append([]string{locomo.BreakNone}, locomo.Parts...) {
		if n := c.breaks[p]; n > 0 {
			fmt.Fprintf(&b, "| %s | %s | %d | %.3f | %.3f |\n", c.name, p, n, c.lost[p]/float64(n), c.lost[p]/float64(max(c.prefixN, 1)))
		}
	}
	return b.String()
}

// ratioText renders a ratio as a share with 3 decimals ("–" when empty).
func ratioText(r *locomo.Ratio) string {
	if r == nil {
		return "–"
	}
	v, ok := r.Value()
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.3f", v)
}

// goalCheck prints issue 26's LoCoMo goal for each client as PASS/FAIL.
func (r *loResults) goalCheck() string {
	if len(r.clients) == 0 {
		return ""
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Goal of issue 26 at %d tokens:\n\n```\n", r.o.locomoBudget)
	for _, c := range r.clients {
		all, _ := c.tally.All.Value()
		fmt.Fprintf(&b, "%s %s client: coverage >= %.2f: %.3f\n", verdict(all >= loTargetOverall), c.name, loTargetOverall, all)
		worst, worstCat := 2.0, 0
		for _, cat := range loCategories {
			if rt := c.tally.ByCategory[cat]; rt != nil {
				if v, ok := rt.Value(); ok && v < worst {
					worst, worstCat = v, cat
				}
			}
		}
		if worstCat != 0 {
			fmt.Fprintf(&b, "%s %s client: every category >= %.2f: lowest %.3f (%s)\n", verdict(worst >= loTargetCategory), c.name, loTargetCategory, worst, locomo.CategoryName(worstCat))
		}
		fmt.Fprintf(&b, "%s %s client: every prompt within %d tokens: %d over, largest %d\n", verdict(c.tally.OverBudget == 0), c.name, r.o.locomoBudget, c.tally.OverBudget, c.tally.MaxTokens)
	}
	b.WriteString("```\n")
	return b.String()
}
