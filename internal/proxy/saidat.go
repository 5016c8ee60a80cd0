package proxy

import (
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/apierr"
)

// TimestampHeader is the request header that dates a captured exchange:
// when its turn was said (RFC 3339), for clients that replay or relay
// conversations held elsewhere. Without it an exchange is dated when its
// request arrived.
const TimestampHeader = "X-Memory-Timestamp"

// maxFutureSkew is how far past the gateway's clock a timestamp may be
// (clients' clocks drift); later ones are refused.
const maxFutureSkew = 5 * time.Minute

// saidAt returns when the exchange of a request that arrived at now was
// said: the X-Memory-Timestamp header's time, or now without one. A time
// after now (within maxFutureSkew) is now: an exchange is never dated after
// its arrival, so an erasure of its user always covers it. A header that is
// not RFC 3339, or further in the future, is a 400 naming it.
func saidAt(h http.Header, now time.Time) (time.Time, *apierr.Error) {
	v := h.Get(TimestampHeader)
	if v == "" {
		return now, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, apierr.Invalid(TimestampHeader, TimestampHeader+" must be an RFC 3339 time such as 2024-05-07T18:30:00Z.")
	}
	if t.After(now.Add(maxFutureSkew)) {
		return time.Time{}, apierr.Invalid(TimestampHeader, TimestampHeader+" is in the future.")
	}
	if t.After(now) {
		return now, nil
	}
	return t.UTC(), nil
}
