package coarse

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTimerFiresAfterItsDelay(t *testing.T) {
	c := New(2 * time.Millisecond)
	for _, d := range []time.Duration{0, time.Millisecond, 15 * time.Millisecond} {
		var tm Timer
		fired := make(chan time.Time, 1)
		start := time.Now()
		c.Arm(&tm, d, func() { fired <- time.Now() })
		select {
		case at := <-fired:
			if got := at.Sub(start); got < d {
				t.Errorf("delay %v: fired after %v", d, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("delay %v: never fired", d)
		}
		if tm.Stop() {
			t.Errorf("delay %v: Stop after firing reported true", d)
		}
	}
}

func TestStopBeforeDeadline(t *testing.T) {
	c := New(time.Millisecond)
	var ran atomic.Bool
	var tm Timer
	c.Arm(&tm, 20*time.Millisecond, func() { ran.Store(true) })
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	if tm.Reset(time.Millisecond) {
		t.Fatal("Reset of a stopped timer reported true")
	}
	// A timer armed after it with a later deadline firing proves the
	// clock ticked past the stopped one's deadline.
	done := make(chan struct{})
	var later Timer
	c.Arm(&later, 40*time.Millisecond, func() { close(done) })
	<-done
	if ran.Load() {
		t.Fatal("stopped timer fired")
	}
}

func TestResetPostpones(t *testing.T) {
	c := New(time.Millisecond)
	var fired atomic.Bool
	done := make(chan struct{})
	var tm Timer
	c.Arm(&tm, 30*time.Millisecond, func() { fired.Store(true); close(done) })
	// Keep pushing the deadline out for longer than the delay.
	end := time.Now().Add(120 * time.Millisecond)
	for time.Now().Before(end) {
		if !tm.Reset(30 * time.Millisecond) {
			t.Fatal("Reset of an armed timer reported false")
		}
		if fired.Load() {
			t.Fatal("timer fired while its deadline kept moving")
		}
		time.Sleep(2 * time.Millisecond)
	}
	<-done
	if tm.Reset(time.Millisecond) {
		t.Fatal("Reset after firing reported true")
	}
}

func TestStopWaitsForARunningCallback(t *testing.T) {
	c := New(time.Millisecond)
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	var tm Timer
	c.Arm(&tm, 0, func() {
		close(entered)
		<-release
		finished.Store(true)
	})
	<-entered
	stopped := make(chan bool)
	go func() { stopped <- tm.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while the callback ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if <-stopped {
		t.Fatal("Stop of a fired timer reported true")
	}
	if !finished.Load() {
		t.Fatal("Stop returned before the callback did")
	}
}

func TestRearmFromCallback(t *testing.T) {
	c := New(time.Millisecond)
	var n atomic.Int32
	done := make(chan struct{})
	var tm Timer
	var f func()
	f = func() {
		if n.Add(1) == 3 {
			close(done)
			return
		}
		c.Arm(&tm, time.Millisecond, f)
	}
	c.Arm(&tm, time.Millisecond, f)
	<-done
	if got := n.Load(); got != 3 {
		t.Fatalf("callback ran %d times, want 3", got)
	}
}

func TestClockStopsWhenIdleAndRestarts(t *testing.T) {
	c := New(50 * time.Millisecond)
	fire := func() {
		done := make(chan struct{})
		var tm Timer
		c.Arm(&tm, time.Millisecond, func() { close(done) })
		<-done
	}
	fire()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("clock kept ticking with no timer armed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fire() // a stopped clock starts again
}

func TestManyTimersConcurrently(t *testing.T) {
	c := New(time.Millisecond)
	const n = 200
	var fired atomic.Int32
	var wg sync.WaitGroup
	timers := make([]Timer, n)
	for i := range timers {
		wg.Go(func() {
			tm := &timers[i]
			if i%2 == 0 {
				c.Arm(tm, time.Hour, func() { t.Error("stopped timer fired") })
				tm.Reset(time.Hour)
				if !tm.Stop() {
					t.Error("Stop of an armed timer reported false")
				}
				return
			}
			done := make(chan struct{})
			c.Arm(tm, time.Duration(i%7)*time.Millisecond, func() { fired.Add(1); close(done) })
			<-done
		})
	}
	wg.Wait()
	if got := fired.Load(); got != n/2 {
		t.Fatalf("%d timers fired, want %d", got, n/2)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) != 0 {
		t.Fatalf("%d timers still listed", len(c.timers))
	}
}

// BenchmarkArmStop is the cost a request pays for one timeout.
func BenchmarkArmStop(b *testing.B) {
	c := New(5 * time.Millisecond)
	f := func() {}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var tm Timer
		for pb.Next() {
			c.Arm(&tm, time.Second, f)
			tm.Reset(time.Second)
			tm.Stop()
		}
	})
}

// BenchmarkTimeAfterFunc is the runtime timer it replaces, for comparison.
func BenchmarkTimeAfterFunc(b *testing.B) {
	f := func() {}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tm := time.AfterFunc(time.Second, f)
			tm.Reset(time.Second)
			tm.Stop()
		}
	})
}

// fakeConn records read deadlines.
type fakeConn struct {
	mu sync.Mutex
	rd []time.Time
}

func (f *fakeConn) SetReadDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rd = append(f.rd, t)
	return nil
}

func (f *fakeConn) deadlines() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.rd...)
}

func TestReadTimeout(t *testing.T) {
	c := New(time.Millisecond)
	t.Run("stopped in time", func(t *testing.T) {
		var conn fakeConn
		var r ReadTimeout
		if r.Stop() {
			t.Fatal("an unarmed ReadTimeout reported expired")
		}
		c.ArmRead(&r, &conn, time.Hour)
		if !r.Reset(time.Hour) {
			t.Fatal("Reset of an armed ReadTimeout reported false")
		}
		if r.Stop() {
			t.Fatal("a ReadTimeout stopped before its deadline reported expired")
		}
		if r.Stop() {
			t.Fatal("a second Stop reported expired")
		}
		if got := conn.deadlines(); len(got) != 0 {
			t.Fatalf("read deadlines set: %v", got)
		}
	})
	t.Run("expired", func(t *testing.T) {
		var conn fakeConn
		var r ReadTimeout
		c.ArmRead(&r, &conn, time.Millisecond)
		for len(conn.deadlines()) == 0 {
			time.Sleep(time.Millisecond)
		}
		if got := conn.deadlines(); len(got) != 1 || !got[0].Before(time.Now()) {
			t.Fatalf("read deadlines %v, want one in the past", got)
		}
		if !r.Stop() {
			t.Fatal("Stop after expiry did not report it")
		}
		// Armed again (the next wait on the connection), it is fresh.
		c.ArmRead(&r, &conn, time.Hour)
		if r.Stop() {
			t.Fatal("a re-armed ReadTimeout reported the old expiry")
		}
	})
}
