package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
)

// headLimit bounds what holdAtHead reads of a background stream before
// any of it is relayed.
const headLimit = 64 << 10

// holdAtHead holds the exchange of a background stream (resp, a
// Responses event stream) before the client gets its first event, which
// names the response: a client whose stream breaks then finds it held
// whenever it resumes (a GET, on any process), however soon. The hold
// takes what holdBackground takes (the store's timeout, bounded; this
// process when the store does not answer, said by X-Memory-Degraded:
// background). A stream the POST relays whole is captured as any, and
// its hold deleted then (unhold). A first event naming no response, or
// an exchange too large to hold, holds nothing here (a stream cut off
// then is held, or counted, by heldOn).
func (c *exchangeCapture) holdAtHead(ctx context.Context, resp *http.Response) {
	head, id, err := responses.StreamHead(resp.Body, headLimit)
	resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(head), resp.Body), Closer: resp.Body}
	if err != nil || id == "" {
		return
	}
	where, lost := c.holdBackground(ctx, id)
	if lost != nil {
		return
	}
	c.headID, c.headHeld = id, where
	if c.degradedHold(where) {
		c.p.addDegraded(resp.Header, c.x, memory.DegradedBackground)
	}
}

// unhold deletes the hold of a background stream's head once the POST's
// own stream ended it: its capture settled, or it was never to be stored
// (settled true). A capture that did not settle leaves the store's copy
// for a GET's claim, which stores it under the same exchange id.
func (c *exchangeCapture) unhold(ctx context.Context, settled bool) {
	if c.headID == "" {
		return
	}
	switch c.headHeld {
	case heldHere:
		if !c.p.pending.unheld(pendingKey{tenant: c.id.Tenant, id: c.headID}, c, settled) {
			return
		}
		// forgetHeld handed it to the store since: as held there.
		fallthrough
	case heldShared:
		if settled {
			c.settleHeld(context.WithoutCancel(ctx), c.headID)
		}
	}
}

// settleHeld deletes the store's copy of c's exchange, held as background
// response id's: its capture settled, or it is never to be stored.
func (c *exchangeCapture) settleHeld(ctx context.Context, id string) {
	owner := memory.UserTombstone(c.id.Tenant, c.id.User)
	if err := c.p.deps.Held.SettleResponse(ctx, c.id.Tenant, id, owner); err != nil {
		c.p.log.LogAttrs(ctx, slog.LevelDebug, "background stream: its held exchange not deleted; a GET claims it, and finds it stored",
			slog.String("request_id", c.x.ID()), slog.String("error", err.Error()))
	}
}
