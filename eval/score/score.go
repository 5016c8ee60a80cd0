// Package score computes the memory-quality metrics of the evaluation from
// the prompts an upstream actually received.
//
// Definitions (each question is judged on one prompt; the question itself,
// the newest user message, is left out of the text searched):
//
//   - An evidence turn is covered when its key clause (synth.Evidence.Key,
//     the part of the turn that carries the answer) occurs in the prompt,
//     both normalised (synth.Contains): as a verbatim turn, a recalled
//     passage, a fact or a summary line. Coverage is the share of evidence
//     turns covered; a multi-hop question counts each of its two turns.
//   - A temporal evidence turn is dated when it is covered and the date of
//     its session is in the prompt too, in one of the common spellings
//     ("2023-03-04", "4 March 2023", "March 4, 2023", "Mar 4 2023"): the
//     turn says "yesterday", so only the date answers the question.
//   - Depth is how many turns back from the end of the conversation the
//     evidence was said (1: the last turn), bucketed 0–100, 100–300, 300+.
package score

import (
	"strings"

	"github.com/memgate/memgate/eval/synth"
)

// Message is one prompt message.
type Message struct {
	Role    string
	Content string
}

// Outcome is one evidence turn judged on one prompt.
type Outcome struct {
	Type    synth.QType
	Depth   int
	Covered bool
	// Dated is set for temporal evidence that is covered with its date.
	Dated bool
}

// Judge scores prompt (the message list sent upstream, the question last)
// for each evidence turn of q in c.
func Judge(c synth.Conversation, q synth.Question, prompt []Message) []Outcome {
	text := " " + synth.Normalize(searched(prompt)) + " "
	out := make([]Outcome, len(q.Evidence))
	for i, e := range q.Evidence {
		o := Outcome{Type: q.Type, Depth: c.Depth(e.Ref)}
		o.Covered = strings.Contains(text, " "+synth.Normalize(e.Key)+" ")
		if o.Covered && q.Type == synth.Temporal {
			for _, d := range DateForms(c.Sessions[e.Ref.Session].Date) {
				if strings.Contains(text, " "+d+" ") {
					o.Dated = true
					break
				}
			}
		}
		out[i] = o
	}
	return out
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

// Depth buckets, in report order.
const (
	Recent = "0–100"
	Middle = "100–300"
	Deep   = "300+"
)

// Buckets lists the depth buckets in report order.
var Buckets = []string{Recent, Middle, Deep}

// Bucket returns the depth bucket of a depth in turns.
func Bucket(depth int) string {
	switch {
	case depth <= 100:
		return Recent
	case depth <= 300:
		return Middle
	}
	return Deep
}
