package sockets

// This file reads the same tables as parseNet through the kernel's
// sock_diag netlink interface: asked for listening TCP sockets only, the
// kernel walks its listening hash and not every connection of every
// namespace, as /proc/net/tcp does.

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	diagReqLen = 56 // struct inet_diag_req_v2
	diagMsgLen = 72 // struct inet_diag_msg
	tcpListen  = 10 // TCP_LISTEN
)

// diagAll is the four tables parseNet reads, in their order.
func diagAll() ([]netEntry, error) {
	var out []netEntry
	for _, f := range []struct{ family, proto uint8 }{
		{unix.AF_INET, unix.IPPROTO_TCP}, {unix.AF_INET6, unix.IPPROTO_TCP},
		{unix.AF_INET, unix.IPPROTO_UDP}, {unix.AF_INET6, unix.IPPROTO_UDP},
	} {
		e, err := diagNet(f.family, f.proto)
		if err != nil {
			return nil, err
		}
		out = append(out, e...)
	}
	return out, nil
}

// diagNet lists what parseNet keeps of one family and protocol (listening
// TCP; UDP with no remote port), in the calling thread's namespace.
func diagNet(family, proto uint8) ([]netEntry, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	states := uint32(0xffffffff)
	if proto == unix.IPPROTO_TCP {
		states = 1 << tcpListen
	}
	req := make([]byte, unix.NLMSG_HDRLEN+diagReqLen)
	le := binary.NativeEndian
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], 20) // SOCK_DIAG_BY_FAMILY
	le.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	le.PutUint32(req[8:], 1)
	r := req[unix.NLMSG_HDRLEN:]
	r[0], r[1] = family, proto
	le.PutUint32(r[4:], states)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	name := "tcp"
	if proto == unix.IPPROTO_UDP {
		name = "udp"
	}
	var out []netEntry
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(le.Uint32(m.Data)); code != 0 {
						return nil, fmt.Errorf("sock_diag: %w", syscall.Errno(-code))
					}
				}
				return nil, fmt.Errorf("sock_diag: error reply")
			}
			d := m.Data
			if len(d) < diagMsgLen {
				return nil, fmt.Errorf("sock_diag: short message (%d bytes)", len(d))
			}
			if proto == unix.IPPROTO_TCP && d[1] != tcpListen {
				continue
			}
			if proto == unix.IPPROTO_UDP && binary.BigEndian.Uint16(d[6:]) != 0 {
				continue // connected: a remote port
			}
			ip := net.IP(append([]byte(nil), d[8:12]...))
			if family == unix.AF_INET6 {
				ip = net.IP(append([]byte(nil), d[8:24]...))
			}
			out = append(out, netEntry{
				Listener: Listener{Proto: name, Addr: ip.String(), Port: binary.BigEndian.Uint16(d[4:])},
				inode:    strconv.FormatUint(uint64(le.Uint32(d[68:])), 10),
			})
		}
	}
}
