package main

import (
	"net"
	"os"
	"regexp"
	"strconv"
)

var recordedPort = regexp.MustCompile(`_PORT=(\d+)`)

// freePorts returns n distinct loopback ports that are free now and not recorded as
// *_PORT=NNN in any of files (a recorded port may be free for a moment while its process
// restarts). Missing files are skipped. The listeners are held until all are chosen, so the
// ports are distinct.
func freePorts(n int, files []string) ([]int, error) {
	taken := map[int]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range recordedPort.FindAllSubmatch(raw, -1) {
			p, _ := strconv.Atoi(string(m[1]))
			taken[p] = true
		}
	}
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		if p := l.Addr().(*net.TCPAddr).Port; !taken[p] {
			ports = append(ports, p)
		}
	}
	return ports, nil
}
