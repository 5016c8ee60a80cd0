package chat

import (
	"encoding/json"
	"fmt"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

// streamDetails reassembles a streamed reply's reasoning_details
// (ReasoningDetails) into the array a non-streamed reply holds, as
// OpenRouter's own clients do: the pieces of one detail share its type
// and index (a piece without an index continues the detail before it,
// and details of two types at one index stay two); their text and
// summary strings are joined, any other member takes the last value that
// is not null (a reasoning.text detail's signature comes in its last
// piece), and the details keep the order they started in. A detail is
// found by its index (byIndex), and no more than maxStreamDetails are
// held: a stream naming more (no provider's does) is let go of them
// (dropped), its pieces from there on not read, so a hostile upstream's
// 4 MiB of one-index pieces costs neither a detail each nor a search of
// every detail before each.
type streamDetails struct {
	list    []*streamDetail
	byIndex map[string][]*streamDetail // the details of an index, in list order
	// lossless stays true while every piece read without loss
	// (memory.Lossless): only then is the joined text the provider's.
	lossless bool
	seen     bool
	dropped  bool
}

// streamDetail is one detail being streamed.
type streamDetail struct {
	index   json.RawMessage // as the upstream wrote it; nil when none
	typ     string
	members map[string]json.RawMessage
	order   []string
	joined  map[string][]byte // text and summary, decoded and joined
}

// joinedMembers are the members whose pieces are joined.
var joinedMembers = map[string]bool{"text": true, "summary": true}

// add folds in one delta's reasoning_details (nil or null: none). It fails
// with memory.ErrInvalid when they are not an array of objects.
func (d *streamDetails) add(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" || d.dropped {
		return nil
	}
	if !d.seen {
		d.seen, d.lossless = true, true
	}
	d.lossless = d.lossless && memory.Lossless(raw)
	var pieces []json.RawMessage // each decoded only while details are held
	if err := json.Unmarshal(raw, &pieces); err != nil {
		return fmt.Errorf("%w: stream chunk: reasoning_details: %v", memory.ErrInvalid, err)
	}
	for _, piece := range pieces {
		var p map[string]json.RawMessage
		if err := json.Unmarshal(piece, &p); err != nil {
			return fmt.Errorf("%w: stream chunk: reasoning_details: %v", memory.ErrInvalid, err)
		}
		var typ string
		json.Unmarshal(p["type"], &typ) // a type that is not a string is none
		cur := d.at(p["index"], typ)
		if cur == nil { // past maxStreamDetails
			d.list, d.byIndex, d.dropped = nil, nil, true
			return nil
		}
		for k, v := range p {
			if joinedMembers[k] {
				var str string
				if json.Unmarshal(v, &str) == nil {
					if _, ok := cur.joined[k]; !ok {
						cur.order = append(cur.order, k)
					}
					cur.joined[k] = append(cur.joined[k], str...)
					continue
				}
			}
			old, ok := cur.members[k]
			switch {
			case !ok:
				cur.order = append(cur.order, k)
				cur.members[k] = v
			case string(v) != "null" || string(old) == "null":
				cur.members[k] = v
			}
		}
	}
	return nil
}

// at returns the detail a piece of type typ with index belongs to,
// starting one when none does; nil when that would be one more than
// maxStreamDetails.
func (d *streamDetails) at(index json.RawMessage, typ string) *streamDetail {
	if n := len(d.list); n > 0 && (index == nil || string(index) == "null") {
		return d.list[n-1]
	}
	for _, c := range d.byIndex[string(index)] {
		if c.typ == typ || typ == "" || c.typ == "" {
			return c
		}
	}
	if len(d.list) == maxStreamDetails {
		return nil
	}
	c := &streamDetail{typ: typ, members: map[string]json.RawMessage{}, joined: map[string][]byte{}}
	if index != nil && string(index) != "null" {
		c.index = index
		if d.byIndex == nil {
			d.byIndex = map[string][]*streamDetail{}
		}
		d.byIndex[string(index)] = append(d.byIndex[string(index)], c)
	}
	d.list = append(d.list, c)
	return c
}

// result returns the details as one JSON array, nil when none came.
func (d *streamDetails) result() (json.RawMessage, error) {
	if len(d.list) == 0 {
		return nil, nil
	}
	out := make([]json.RawMessage, 0, len(d.list))
	for _, c := range d.list {
		obj := make(map[string]json.RawMessage, len(c.order))
		for _, k := range c.order {
			if j, ok := c.joined[k]; ok {
				v, err := body.Marshal(string(j))
				if err != nil {
					return nil, fmt.Errorf("%w: encode reasoning_details: %v", memory.ErrInvalid, err)
				}
				obj[k] = v
				continue
			}
			obj[k] = c.members[k]
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%w: encode reasoning_details: %v", memory.ErrInvalid, err)
		}
		out = append(out, b)
	}
	return body.Array(out), nil
}

// maxStreamDetails bounds the details a stream's reassembly holds
// (streamDetails): a reply has a few (OpenRouter's: one a thinking block
// or summary, one encrypted), and a stream naming more is let go of them.
const maxStreamDetails = 128
