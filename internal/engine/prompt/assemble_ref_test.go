package prompt

// refToolInfo is toolInfo as first written (every message decoded), the
// reference TestToolInfoMatchesReference compares toolInfo with.

import (
	"encoding/json"

	"github.com/memgate/memgate/internal/memory"
)

func refToolInfo(m memory.Message) (calls []string, answers string) {
	if len(m.Raw) == 0 {
		return nil, ""
	}
	var f toolFields
	if err := json.Unmarshal(m.Raw, &f); err != nil {
		return nil, ""
	}
	for _, c := range f.ToolCalls {
		calls = append(calls, c.ID)
	}
	return calls, f.ToolCallID
}
