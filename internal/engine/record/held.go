package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// HeldStore keeps the exchanges of background responses, prepared as
// they will be stored, until a GET returns the response done
// (storetest.RunHeld).
type HeldStore interface {
	// HoldResponse keeps h until ClaimResponse takes it, refused with
	// memory.ErrErased when its user was erased at or after h.At; it
	// returns how many held exchanges it gave up (lapsed, or past the
	// tenant's bounds).
	HoldResponse(ctx context.Context, h memory.HeldResponse) (int, error)
	// HeldOwner returns the owner (memory.UserTombstone) of tenant's
	// held response id not lapsed by now, or memory.ErrNotFound.
	HeldOwner(ctx context.Context, tenant, id string, now time.Time) ([]byte, error)
	// ClaimResponse takes tenant's held response id of owner, once, or
	// memory.ErrNotFound.
	ClaimResponse(ctx context.Context, tenant, id string, owner []byte) (memory.HeldResponse, error)
}

// ErrNoHeldStore: the Capturer has no HeldStore (Options.Held).
var ErrNoHeldStore = errors.New("no store of held responses")

// Hold keeps ex, the exchange of background response id whose reply is
// to come, in the store every process shares, until Claim takes it. ex
// is prepared there as Capture prepares an exchange — its cut history
// checked against its conversation as it is now, sanitized and redacted —
// so no secret is held in the clear; Capture, given it back with its
// reply, stores it. It returns how many held exchanges the store gave up
// to hold it (lapsed, or the tenant's oldest past its bounds);
// memory.ErrErased when its user was erased since its request arrived.
func (c *Capturer) Hold(ctx context.Context, ex memory.Exchange, id string) (int, error) {
	if c.opts.Held == nil {
		return 0, ErrNoHeldStore
	}
	if ex.RequestID == "" {
		ex.RequestID = ex.ID
	}
	if ex.At.IsZero() {
		ex.At = time.Now().UTC()
	}
	ex = c.checkResent(ctx, ex)
	ex.Resent = memory.Resent{}
	ex, err := c.prepare(ex)
	if err != nil {
		return 0, fmt.Errorf("hold background exchange: %w", err)
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return 0, fmt.Errorf("hold background exchange: encode: %w", err)
	}
	if len(b) > memory.HeldMaxBytes {
		return 0, memory.ErrHeldTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	return c.opts.Held.HoldResponse(ctx, memory.HeldResponse{Identity: ex.Identity, ID: id, Exchange: b,
		At: ex.At, Expires: time.Now().Add(memory.HeldTTL)})
}

// Held returns the owner of tenant's background response id held for
// user — or, with user "", for any user of the tenant —, to Claim it
// with; memory.ErrNotFound when none is held for them.
func (c *Capturer) Held(ctx context.Context, tenant, user, id string) ([]byte, error) {
	if c.opts.Held == nil {
		return nil, ErrNoHeldStore
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	owner, err := c.opts.Held.HeldOwner(ctx, tenant, id, time.Now())
	if err != nil {
		return nil, err
	}
	if user != "" && !bytes.Equal(owner, memory.UserTombstone(tenant, user)) {
		return nil, memory.ErrNotFound
	}
	return owner, nil
}

// Claim takes tenant's background response id held for owner, once: the
// exchange Hold prepared, its reply to be set before Capture stores it;
// memory.ErrNotFound when none is held (another process claimed it, or
// an erasure removed it), memory.ErrHeldLapsed when it lapsed.
func (c *Capturer) Claim(ctx context.Context, tenant, id string, owner []byte) (memory.Exchange, error) {
	if c.opts.Held == nil {
		return memory.Exchange{}, ErrNoHeldStore
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	h, err := c.opts.Held.ClaimResponse(ctx, tenant, id, owner)
	if err != nil {
		return memory.Exchange{}, err
	}
	if !time.Now().Before(h.Expires) {
		return memory.Exchange{}, memory.ErrHeldLapsed
	}
	var ex memory.Exchange
	if err := json.Unmarshal(h.Exchange, &ex); err != nil {
		return memory.Exchange{}, fmt.Errorf("claim background exchange: decode: %w", err)
	}
	return ex, nil
}
