// Package rawconn wraps a TCP connection so that its reads and writes are
// raw system calls on the non-blocking socket, waiting in the runtime's
// network poller only when the socket has nothing to read or no room to
// write.
//
// Why: net.Conn's Read and Write go through syscall.Syscall, whose
// entersyscall wakes the runtime's sysmon thread whenever the process was
// idle before the call. A gateway at one request in flight is idle between
// every request, so each request paid for two or more extra thread wake-ups
// (cross-CPU interrupts on a virtual machine whose idle vCPUs halt) on its
// critical path. A read or write of a non-blocking socket never blocks, so
// it needs none of that bookkeeping: syscall.RawConn lets the poller do the
// waiting, and the call itself is made with syscall.RawSyscall.
//
// Deadlines, Close and the other net.Conn methods are the wrapped
// connection's own; errors are *net.OpError values as net returns them.
package rawconn

import "net"

// Wrap returns c with raw reads and writes where the platform supports it
// (Linux, a connection implementing syscall.Conn); otherwise c itself.
func Wrap(c net.Conn) net.Conn { return wrap(c) }
