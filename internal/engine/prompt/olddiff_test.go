package prompt

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func oldWithCallIDs(stored []memory.Message) []memory.Message {
	out := oldCopyOnWrite{msgs: stored}
	for i := 0; i < len(stored); i++ {
		m := stored[i]
		if m.Role != "assistant" {
			continue
		}
		calls, _ := toolInfo(m)
		var empty []int
		for k, id := range calls {
			if id == "" {
				empty = append(empty, k)
			}
		}
		if len(empty) == 0 {
			continue
		}
		end := i + 1
		var results []int
		for ; end < len(stored) && stored[end].Role == "tool"; end++ {
			if _, id := toolInfo(stored[end]); id == "" {
				results = append(results, end)
			}
		}
		if end == len(stored) && len(results) < len(empty) {
			empty = empty[:len(results)]
		}
		if len(empty) == 0 {
			continue
		}
		ids := make(map[int]string, len(empty))
		for _, k := range empty {
			ids[k] = syntheticCallID(m, k)
		}
		if rm, ok := withToolIDs(m, ids); ok {
			out.set(i, rm)
		} else {
			continue // not rewritable: left as it is, dropped as unanswered
		}
		for n, at := range results[:min(len(results), len(empty))] {
			if rm, ok := withAnswerID(stored[at], ids[empty[n]]); ok {
				out.set(at, rm)
			}
		}
	}
	return out.msgs
}

type oldCopyOnWrite struct {
	msgs   []memory.Message
	copied bool
}

func (c *oldCopyOnWrite) set(i int, m memory.Message) {
	if !c.copied {
		c.msgs, c.copied = append([]memory.Message(nil), c.msgs...), true
	}
	c.msgs[i] = m
}

func oldDistinctCallIDs(stored, rest []memory.Message) []memory.Message {
	taken := map[string]bool{} // ids of newer calls
	for _, m := range rest {
		if m.Role == "assistant" {
			calls, _ := toolInfo(m)
			for _, id := range calls {
				taken[id] = true
			}
		}
	}
	clientAnswers := map[string]bool{} // what the client's leading results answer
	for _, m := range rest {
		if m.Role != "tool" {
			break
		}
		_, id := toolInfo(m)
		clientAnswers[id] = true
	}
	out := oldCopyOnWrite{msgs: stored}
	toEnd := true // the messages after i are all tool results
	for i := len(stored) - 1; i >= 0; i-- {
		m := stored[i]
		if m.Role == "tool" {
			continue
		}
		last := toEnd // the client's leading results may answer m's calls
		toEnd = false
		if m.Role != "assistant" {
			continue
		}
		calls, _ := toolInfo(m)
		renamed := map[int]string{}
		for k := len(calls) - 1; k >= 0; k-- {
			id := calls[k]
			switch {
			case id == "":
			case last && clientAnswers[id]:
				// The client's pair: kept, even beside a call of its own
				// with the same id (which it built).
				taken[id] = true
			case taken[id]:
				renamed[k] = syntheticCallID(m, k)
			default:
				taken[id] = true
			}
		}
		if len(renamed) == 0 {
			continue
		}
		rm, ok := withToolIDs(m, renamed)
		if !ok {
			continue // not rewritable: left as it is
		}
		out.set(i, rm)
		// The n-th result answering id answers the n-th call with id.
		seen := map[string]int{}
		for j := i + 1; j < len(stored) && stored[j].Role == "tool"; j++ {
			_, id := toolInfo(stored[j])
			n := seen[id]
			seen[id]++
			k := nthCall(calls, id, n)
			if k < 0 || renamed[k] == "" {
				continue
			}
			if rm, ok := withAnswerID(stored[j], renamed[k]); ok {
				out.set(j, rm)
			}
		}
	}
	return out.msgs
}

func oldUsableHistory(stored, next []memory.Message) []memory.Message {
	out := make([]memory.Message, 0, len(stored))
	open := map[string]bool{} // call ids of the kept assistant message being oldAnswered
	for i := 0; i < len(stored); i++ {
		m := stored[i]
		switch {
		case memory.IsSystem(m.Role):
			continue
		case m.Role == "tool":
			_, id := toolInfo(m)
			if !open[id] {
				continue // orphan
			}
			out = append(out, withRaw(m))
			continue
		}
		clear(open)
		var calls []string
		if m.Role == "assistant" { // only an assistant message's calls count
			calls, _ = toolInfo(m)
		}
		if len(calls) > 0 {
			if !oldAnswered(calls, stored[i+1:], next) {
				// Skip the call and its partial results.
				for i+1 < len(stored) && stored[i+1].Role == "tool" {
					i++
				}
				continue
			}
			for _, id := range calls {
				open[id] = true
			}
		}
		out = append(out, withRaw(m))
	}
	return out
}

func oldAnswered(calls []string, after, next []memory.Message) bool {
	got := map[string]bool{}
	lead := func(msgs []memory.Message) bool { // reports whether msgs are all tool results
		for _, m := range msgs {
			if m.Role != "tool" {
				return false
			}
			_, id := toolInfo(m)
			got[id] = true
		}
		return true
	}
	if lead(after) {
		lead(next)
	}
	for _, id := range calls {
		if !got[id] {
			return false
		}
	}
	return true
}

func TestDiffOld(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	pool := []string{u1, a1, u2, a2, uNew, sys, aCall, tool1, tool2, toolStray, rCall0, rRes0, rTwice, rResX, rResX2, rNoID, rNoIDRes, rNoIDRes2,
		rString, rNumber, rNull, rUpper, rMixed, rRes9, rUser,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function"},{"type":"function"}]}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1"},{"id":"call_0"},{"id":""}]}`,
		`{"role":"tool","tool_call_id":"call_1","content":"x"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_0"}],"Tool_Calls":[{"id":""}]}`,
		`{"role":"assistant","content":null,"tool_calls":[{"ID":"call_0","id":""}]}`,
		`{"role":"tool","TOOL_CALL_ID":"call_0","tool_call_id":""}`,
		`{"role":"user","content":"tool_calls","tool_calls":[{"id":"call_0"}]}`,
	}
	n := 0
	for iter := range 60000 {
		ns, nr := r.IntN(14), r.IntN(5)
		var sr, rr []string
		units := [][]string{{u2, rCall0, rRes0, a2}, {rNoID, rNoIDRes, rNoIDRes2}, {rTwice, rResX, rResX2}, {aCall, tool1, tool2}, {rMixed, rRes0, rRes9},
			{`{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function"},{"type":"function"}]}`, rRes0, rNoIDRes},
			{`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1"},{"id":"call_0"},{"id":""}]}`, `{"role":"tool","tool_call_id":"call_1","content":"x"}`, rRes0, rNoIDRes}}
		for range ns {
			if r.IntN(2) == 0 {
				sr = append(sr, units[r.IntN(len(units))]...)
			} else {
				sr = append(sr, pool[r.IntN(len(pool))])
			}
		}
		if r.IntN(2) == 0 {
			rr = append(rr, units[r.IntN(len(units))][1:]...)
		}
		for range nr {
			rr = append(rr, pool[r.IntN(len(pool))])
		}
		stored, rest := storedMsgs(t, sr...), storedMsgs(t, rr...)
		if iter%3 == 0 {
			for i := range stored {
				stored[i].Key = ""
			}
		}
		if iter%7 == 0 && len(stored) > 0 {
			stored[r.IntN(len(stored))].Raw = nil
		}
		want := oldUsableHistory(oldDistinctCallIDs(oldWithCallIDs(stored), rest), rest)
		got := replayable(stored, rest)
		if len(want) != len(got) {
			t.Fatalf("len %d vs %d\n%q\n%q", len(want), len(got), sr, rr)
		}
		for i := range want {
			if string(want[i].Raw) != string(got[i].Raw) || want[i].Role != got[i].Role || want[i].Key != got[i].Key {
				t.Fatalf("differ at %d\n%q\n%q", i, sr, rr)
			}
		}
		for _, m := range got {
			if bytes.Contains(m.Raw, []byte(`"call_`)) && len(m.Raw) > 0 && bytes.Contains(m.Raw, []byte(syntheticCallID(m, 0)[:0]+`","type`)) {
			}
			if _, id := toolInfo(m); len(id) == 29 {
				n++
			}
		}
	}
	t.Logf("%d results answering a synthetic id", n)
}
