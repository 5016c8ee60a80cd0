// Package coarse runs callbacks after approximate delays from one goroutine
// per Clock, for the timeouts a server arms and disarms on every request
// (a read deadline, an idle stream, a watch that starts after a few
// milliseconds).
//
// Why not time.AfterFunc or a connection deadline: arming a runtime timer
// that becomes the earliest of its P wakes another OS thread to watch it
// (runtime.wakeNetPoller). At one request in flight that is one or two
// extra thread wake-ups per request, each a cross-CPU interrupt on a
// virtual machine whose idle vCPUs halt, and they sat on the request's
// critical path. A Clock instead keeps its timers in a list that a ticker
// scans every Resolution while any timer is armed, and stops ticking after
// a second with none; arming, moving and stopping a timer only touch
// memory.
//
// The price is precision: a timer fires between its delay and its delay
// plus one Resolution, so a Clock suits timeouts, not schedules.
package coarse

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Clock runs the callbacks of its Timers. Its zero value is not usable; use
// New. It is safe for concurrent use.
type Clock struct {
	res       time.Duration
	idleTicks int

	mu      sync.Mutex
	timers  []*Timer
	running bool
	fired   []due // scratch of the ticking goroutine
}

// due is a timer taken off the list to fire, with the callback it had then.
type due struct {
	t *Timer
	f func()
}

// New returns a Clock whose timers fire within res of their deadline (at
// least 1ms).
func New(res time.Duration) *Clock {
	res = max(res, time.Millisecond)
	return &Clock{res: res, idleTicks: max(int(time.Second/res), 1)}
}

// Timer states.
const (
	stateIdle int32 = iota
	stateArmed
	stateFiring
	stateFired
)

// Timer is one timeout. The zero value is an unarmed timer; a Timer must not
// be copied once armed. Arm, Stop and Reset may be called from any
// goroutine, but arming one Timer twice at once is a bug of the caller.
type Timer struct {
	when  atomic.Int64 // deadline, in nanoseconds on the Clock's base
	state atomic.Int32
	c     *Clock
	f     func()
	idx   int // position in c.timers while armed; under c.mu
}

// epoch anchors the monotonic nanoseconds timers compare against.
var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) }

// Arm makes t call f once, from the Clock's goroutine, when d has passed.
// f must return quickly and must not call t.Stop (it may arm t again). A
// Timer that is armed already is re-armed with the new delay and f.
func (c *Clock) Arm(t *Timer, d time.Duration, f func()) {
	c.mu.Lock()
	if t.state.Load() == stateArmed && t.c == c {
		t.f = f
		t.when.Store(now() + int64(d))
		c.mu.Unlock()
		return
	}
	t.c, t.f = c, f
	t.when.Store(now() + int64(d))
	t.state.Store(stateArmed)
	t.idx = len(c.timers)
	c.timers = append(c.timers, t)
	if !c.running {
		c.running = true
		go c.run()
	}
	c.mu.Unlock()
}

// Reset moves an armed timer's deadline to d from now without taking a
// lock. It reports false, and does nothing, when t is not armed (it fired,
// was stopped, or never was armed). A timer already due may fire even
// though Reset reported true: the two raced.
func (t *Timer) Reset(d time.Duration) bool {
	if t.state.Load() != stateArmed {
		return false
	}
	t.when.Store(now() + int64(d))
	return true
}

// Stop disarms t. It reports true when t was armed and its callback will
// not run. When it reports false the callback either never was due or has
// already run: Stop waits for a callback in progress to return, so after
// Stop the callback is never running.
func (t *Timer) Stop() bool {
	c := t.c
	if c == nil {
		return false
	}
	c.mu.Lock()
	if t.state.Load() == stateArmed {
		c.remove(t)
		t.state.Store(stateIdle)
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	for t.state.Load() == stateFiring {
		runtime.Gosched()
	}
	return false
}

// remove takes t out of c.timers; c.mu is held.
func (c *Clock) remove(t *Timer) {
	last := len(c.timers) - 1
	moved := c.timers[last]
	c.timers[t.idx] = moved
	moved.idx = t.idx
	c.timers[last] = nil
	c.timers = c.timers[:last]
	t.idx = -1
}

// run ticks while timers are armed and returns after a second without any.
func (c *Clock) run() {
	tick := time.NewTicker(c.res)
	defer tick.Stop()
	idle := 0
	for range tick.C {
		if !c.fire() {
			idle = 0
			continue
		}
		if idle++; idle < c.idleTicks {
			continue
		}
		c.mu.Lock()
		if len(c.timers) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		idle = 0
	}
}

// fire runs the callbacks of the timers that are due and reports whether
// no timer was armed.
func (c *Clock) fire() (empty bool) {
	n := now()
	c.mu.Lock()
	empty = len(c.timers) == 0
	fired := c.fired[:0]
	for i := 0; i < len(c.timers); {
		t := c.timers[i]
		if t.when.Load() > n {
			i++
			continue
		}
		c.remove(t) // moves the last timer to i
		t.state.Store(stateFiring)
		fired = append(fired, due{t, t.f})
	}
	c.mu.Unlock()
	for i, d := range fired {
		d.f()
		// An Arm from the callback left t armed again.
		d.t.state.CompareAndSwap(stateFiring, stateFired)
		fired[i] = due{}
	}
	c.fired = fired[:0]
	return empty
}
