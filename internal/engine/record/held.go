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
	// HoldResponse keeps h until SettleResponse deletes it, refused with
	// memory.ErrErased when its user was erased at or after h.At (and
	// memory.ErrHeldDeleted when its conversation was deleted at or
	// after h.Received); it
	// returns how many held exchanges it gave up (lapsed, or past the
	// tenant's bounds).
	HoldResponse(ctx context.Context, h memory.HeldResponse) (int, error)
	// HeldOwner returns the owner (memory.UserTombstone) of tenant's
	// held response id not lapsed by now, or memory.ErrNotFound.
	HeldOwner(ctx context.Context, tenant, id string, now time.Time) ([]byte, error)
	// ClaimResponse takes tenant's held response id of owner under a
	// lease until until: no other claim takes it before then (made at
	// now); memory.ErrNotFound when none is held, or it is under another
	// claim's lease. The row stays until SettleResponse deletes it.
	ClaimResponse(ctx context.Context, tenant, id string, owner []byte, now, until time.Time) (memory.HeldResponse, error)
	// SettleResponse deletes tenant's held response id of owner (its
	// turn durable, or never to be stored); none held is no error.
	SettleResponse(ctx context.Context, tenant, id string, owner []byte) error
}

// ErrNoHeldStore: the Capturer has no HeldStore (Options.Held).
var ErrNoHeldStore = errors.New("no store of held responses")

// Hold keeps ex, the exchange of background response id whose reply is
// to come, in the store every process shares, until Settle deletes it.
// Its exchange id is minted here unless the caller minted it (ID, with
// the request's id in RequestID: withExchangeID), and kept by Capture, so
// that every copy of it is stored once. ex
// is prepared there as Capture prepares an exchange — its cut history
// checked against its conversation as it is now, sanitized and redacted —
// so no secret is held in the clear; Capture, given it back with its
// reply, stores it. It returns how many held exchanges the store gave up
// to hold it (lapsed, or the tenant's oldest past its bounds);
// memory.ErrErased when its user was erased since its request arrived,
// memory.ErrHeldDeleted when its conversation was deleted since.
func (c *Capturer) Hold(ctx context.Context, ex memory.Exchange, id string) (int, error) {
	if c.opts.Held == nil {
		return 0, ErrNoHeldStore
	}
	ex = withExchangeID(ex)
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
	if len(b) > memory.HeldExchangeMaxBytes {
		return 0, memory.ErrHeldTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	now := time.Now()
	return c.opts.Held.HoldResponse(ctx, memory.HeldResponse{Identity: ex.Identity, ID: id, Exchange: b,
		At: ex.At, Received: ex.Received, Expires: now.Add(memory.HeldTTL), Now: now})
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

// Claim takes tenant's background response id held for owner under a
// lease of memory.HeldLease: the exchange Hold prepared, its reply to be
// set before Capture stores it, then Settle deletes it; a claimer that
// does not (crashed, or its capture did not settle) leaves it to the
// next claim after the lease, which stores it under the same exchange id.
// memory.ErrNotFound when none is held (an erasure removed it, or it is
// settled) or another claim's lease holds it; memory.ErrHeldLapsed when
// it lapsed (it is deleted).
func (c *Capturer) Claim(ctx context.Context, tenant, id string, owner []byte) (memory.Exchange, error) {
	if c.opts.Held == nil {
		return memory.Exchange{}, ErrNoHeldStore
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	now := time.Now()
	h, err := c.opts.Held.ClaimResponse(ctx, tenant, id, owner, now, now.Add(memory.HeldLease))
	if err != nil {
		return memory.Exchange{}, err
	}
	var ex memory.Exchange
	if !now.Before(h.Expires) {
		err = memory.ErrHeldLapsed
	} else if derr := json.Unmarshal(h.Exchange, &ex); derr != nil {
		err = fmt.Errorf("claim background exchange: decode: %w", derr)
	}
	if err != nil {
		if serr := c.opts.Held.SettleResponse(ctx, tenant, id, owner); serr != nil {
			c.logger.WarnContext(ctx, "held background exchange not deleted; it lapses", "err", serr)
		}
		return memory.Exchange{}, err
	}
	return ex, nil
}

// Settle deletes tenant's background response id held for owner, once
// its claimer's Capture reported it settled (or it is never to be
// stored: the response failed or was cancelled).
func (c *Capturer) Settle(ctx context.Context, tenant, id string, owner []byte) error {
	if c.opts.Held == nil {
		return ErrNoHeldStore
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	return c.opts.Held.SettleResponse(ctx, tenant, id, owner)
}
