package coarse

import "time"

// ReadTimeout bounds a connection's reads without a runtime timer or a
// connection deadline armed per wait: when it expires it sets a read
// deadline in the past, which fails the read in progress and every later
// one. A connection whose ReadTimeout expired must therefore not be read
// again (close it). One ReadTimeout serves one connection; its zero value is
// ready to use.
type ReadTimeout struct {
	t      Timer
	expire func()
}

// deadliner is what a ReadTimeout needs of a connection.
type deadliner interface{ SetReadDeadline(time.Time) error }

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// ArmRead starts r: conn's reads fail once d has passed (up to the clock's
// resolution later). conn must be the same on every call for one r.
func (c *Clock) ArmRead(r *ReadTimeout, conn deadliner, d time.Duration) {
	if r.expire == nil {
		r.expire = func() { conn.SetReadDeadline(aLongTimeAgo) }
	}
	c.Arm(&r.t, d, r.expire)
}

// Reset moves an armed r's expiry to d from now; see Timer.Reset.
func (r *ReadTimeout) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Stop disarms r and reports whether it had expired, in which case the
// connection's read deadline has passed, whether or not the read it bounded
// finished in time. Stopping an r that was never armed, or was stopped
// already, reports false.
func (r *ReadTimeout) Stop() (expired bool) {
	return !r.t.Stop() && r.t.state.Load() == stateFired
}
