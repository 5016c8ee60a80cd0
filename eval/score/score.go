// Package score computes the memory-quality metrics of the evaluation from
// the prompts an upstream actually received: evidence coverage, stale-fact
// rate and prompt tokens, per probe category.
//
// Definitions (each probe is judged on one prompt; the probe's own question,
// the newest user message, is left out of the text searched):
//
//   - Covered: the probe's winning value occurs in the prompt (any message:
//     a verbatim turn, a recalled passage, a fact or a summary), matched
//     case-insensitively at word boundaries (synth.Contains).
//   - Stale (changed facts only): a superseded value occurs in the prompt
//     and either the winning value does not, or the superseded value sits on
//     a line of a current-facts section of a system message without a
//     historical marker ("superseded", "previously", "formerly", "no
//     longer", "used to", "until", "antes", "anteriormente"). A current-facts
//     section starts at a system-message heading that mentions "facts",
//     "fatos" or "pinned" and runs to the next blank line, heading or tag. A superseded
//     value shown only in dated history next to the winning value (a verbatim
//     old turn, a recalled passage) is not stale: the model sees both and
//     the newer statement.
package score

import (
	"regexp"
	"strings"

	"github.com/memgate/memgate/eval/synth"
)

// Message is one prompt message.
type Message struct {
	Role    string
	Content string
}

// Outcome is one probe judged on one prompt.
type Outcome struct {
	Category synth.Category
	Covered  bool
	// Changed is true for changed-fact probes, the stale rate's denominator.
	Changed bool
	Stale   bool
	Tokens  int
	// Sources name where the winning value was found: "turn" (a verbatim
	// user or assistant message), or the memory-block section ("pinned",
	// "facts", "summary", "recalled", "memory" when unlabelled).
	Sources []string
}

// Judge scores prompt (the message list sent upstream, the probe last) for
// probe; tokens is what the prompt cost.
func Judge(p synth.Probe, prompt []Message, tokens int) Outcome {
	ctx := searched(prompt)
	o := Outcome{Category: p.Category, Tokens: tokens, Changed: len(p.Stale) > 0}
	o.Covered = synth.Contains(ctx, p.Want)
	if o.Covered {
		o.Sources = sources(prompt, p.Want)
	}
	for _, old := range p.Stale {
		if !synth.Contains(ctx, old) {
			continue
		}
		if !o.Covered || presentedAsCurrent(prompt, old) {
			o.Stale = true
		}
	}
	return o
}

// searched joins every message but the newest user message.
func searched(prompt []Message) string {
	last := -1
	for i := len(prompt) - 1; i >= 0; i-- {
		if prompt[i].Role == "user" {
			last = i
			break
		}
	}
	var b strings.Builder
	for i, m := range prompt {
		if i == last {
			continue
		}
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

var (
	factsHeading = regexp.MustCompile(`(?i)\b(facts|fatos|pinned)\b`)
	historical   = regexp.MustCompile(`(?i)\b(superseded|previously|formerly|no longer|used to|until|antes|anteriormente)\b`)
)

// presentedAsCurrent reports whether v occurs on a line of a current-facts
// section of a system message, without a historical marker.
func presentedAsCurrent(prompt []Message, v string) bool {
	for _, m := range prompt {
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		in := false
		for _, line := range strings.Split(m.Content, "\n") {
			t := strings.TrimSpace(line)
			switch {
			case sectionStart(t):
				in = factsHeading.MatchString(t)
				continue
			case t == "":
				in = false
				continue
			}
			if in && synth.Contains(t, v) && !historical.MatchString(t) {
				return true
			}
		}
	}
	return false
}

// sectionStart reports whether a line opens a section: a markdown heading,
// an XML-like tag, or a short line ending in a colon.
func sectionStart(t string) bool {
	return strings.HasPrefix(t, "#") || strings.HasPrefix(t, "<") ||
		(strings.HasSuffix(t, ":") && len(t) < 80) ||
		(strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]"))
}

// sources returns where v occurs in the prompt (the newest user message
// left out), each source once, in prompt order.
func sources(prompt []Message, v string) []string {
	var out []string
	add := func(s string) {
		for _, have := range out {
			if have == s {
				return
			}
		}
		out = append(out, s)
	}
	last := len(prompt) - 1
	for last >= 0 && prompt[last].Role != "user" {
		last--
	}
	for i, m := range prompt {
		if i == last || !synth.Contains(m.Content, v) {
			continue
		}
		if m.Role != "system" && m.Role != "developer" {
			add("turn")
			continue
		}
		section := "memory"
		for _, line := range strings.Split(m.Content, "\n") {
			t := strings.TrimSpace(line)
			if sectionStart(t) {
				if name := sectionName(t); name != "" {
					section = name
				}
				continue
			}
			if synth.Contains(t, v) {
				add(section)
			}
		}
	}
	return out
}

// sectionName classifies a memory-block heading.
func sectionName(heading string) string {
	h := strings.ToLower(heading)
	switch {
	case strings.Contains(h, "pinned"):
		return "pinned"
	case strings.Contains(h, "summary"):
		return "summary"
	case strings.Contains(h, "recalled") || strings.Contains(h, "recall"):
		return "recalled"
	case factsHeading.MatchString(h):
		return "facts"
	}
	return ""
}
