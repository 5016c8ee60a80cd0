package prompt

// distinctCallIDs returns the stored messages with a new id for every
// tool call whose id a newer call of the prompt also has — a later stored
// message's or one of the client's own (rest) — and that id on the stored
// results that answer it. Providers and model servers that number calls
// per response ("call_0" on every turn) or use one fixed id leave stored
// turns whose calls share an id; replayed together they make the request
// ambiguous, and the APIs refuse it: Anthropic (tool_use ids must be
// unique), the Responses API (a call_id given twice); chat pairs a result
// with the wrong call. Every later request of the conversation would fail.
//
// The newest call keeps its id; the older copies are renamed. So the
// client's own messages are never changed — its calls, and its results
// answering the last stored message's calls, keep the pair it built — and
// a call renamed once keeps its new id on every later request (turns are
// only added after it, or summarised before it), so the prompt's prefix
// stays cacheable. The new id is syntheticCallID's: a hash of the
// message's key and the call's place, the same on every request. A call's
// results are the tool messages right after its message with its id,
// paired in order when the message holds the id more than once. Empty ids
// are withCallIDs' concern and are left as they are. The messages given
// are never changed; those rewritten are new, their tools read again.
func distinctCallIDs(l, rest toolList) toolList {
	taken := map[string]bool{} // ids of newer calls
	for i, m := range rest.msgs {
		if m.Role == "assistant" {
			for _, id := range rest.at(i).calls {
				taken[id] = true
			}
		}
	}
	clientAnswers := map[string]bool{} // what the client's leading results answer
	for i, m := range rest.msgs {
		if m.Role != "tool" {
			break
		}
		clientAnswers[rest.at(i).answers] = true
	}
	stored := l.msgs
	out := copyOnWrite{l: l}
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
		calls := l.at(i).calls
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
			id := l.at(j).answers
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
	return out.l
}

// nthCall returns the index in calls of the n-th (from 0) call with id,
// or -1.
func nthCall(calls []string, id string, n int) int {
	for k, c := range calls {
		if c == id {
			if n == 0 {
				return k
			}
			n--
		}
	}
	return -1
}
