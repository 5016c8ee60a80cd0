package rawconn

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// conn is a net.Conn whose Read and Write use raw system calls. Like
// net.Conn, one Read and one Write may run at once; the fields each uses
// are its own.
type conn struct {
	net.Conn
	rc syscall.RawConn

	rbuf  []byte
	rn    int
	rerr  syscall.Errno
	rfunc func(fd uintptr) bool

	wbuf  []byte
	wn    int
	werr  syscall.Errno
	wfunc func(fd uintptr) bool
}

func wrap(c net.Conn) net.Conn {
	if _, ok := c.(*conn); ok {
		return c
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	x := &conn{Conn: c, rc: rc}
	x.rfunc = x.read
	x.wfunc = x.write
	return x
}

// read is the syscall.RawConn callback of Read: false asks the poller to
// wait until the socket is readable.
func (c *conn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case 0:
			c.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.rerr = e
			return true
		}
	}
}

// write is the syscall.RawConn callback of Write: it writes until the
// buffer is sent, and returns false to wait for room when the socket's
// send buffer is full.
func (c *conn) write(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])), uintptr(len(c.wbuf)-c.wn))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// Read reads into p as net.Conn's Read does.
func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.rfunc)
	n, e := c.rn, c.rerr
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case e != 0:
		return 0, c.opError("read", os.NewSyscallError("read", e))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p as net.Conn's Write does.
func (c *conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wbuf, c.wn, c.werr = p, 0, 0
	err := c.rc.Write(c.wfunc)
	n, e := c.wn, c.werr
	c.wbuf = nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case e != 0:
		return n, c.opError("write", os.NewSyscallError("write", e))
	}
	return n, nil
}

// opError makes err what net.Conn would return: the poller's errors
// (closed, deadline) already are *net.OpError, with op "raw-read" or
// "raw-write", and keep their wrapped cause.
func (c *conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		e := *oe
		e.Op = op
		return &e
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
