package h1serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// heapAfterGC is the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// idleConns opens n connections to addr, sends each one GET of path with a
// head of about headBytes, reads its answer and leaves it open (idle).
func idleConns(t *testing.T, addr, path string, n, headBytes int) []net.Conn {
	t.Helper()
	head := "GET " + path + " HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", headBytes/1010) + "\r\n"
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", path, resp.Status)
		}
	}
	return conns
}

// TestAnIdleConnectionKeepsNoLargeBufferOfItsLastRequest: a connection
// whose last request had a large head, or whose last answer a large
// header, holds no more memory once idle than net/http's does (give or
// take a buffer of 8 KiB): many idle connections cannot be made to hold
// 64 KiB each.
func TestAnIdleConnectionKeepsNoLargeBufferOfItsLastRequest(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/", diffHandler())
	mux.HandleFunc("/big-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 50<<10))
		io.WriteString(w, "ok")
	})
	std, ours := servers(t, mux, nil)
	const n = 200
	for _, tc := range []struct {
		path      string
		headBytes int
	}{{"/small", 50 << 10}, {"/big-header", 100}} {
		per := map[string]int64{}
		for _, addr := range []string{std, ours} {
			before := heapAfterGC()
			conns := idleConns(t, addr, tc.path, n, tc.headBytes)
			per[addr] = (int64(heapAfterGC()) - int64(before)) / n
			for _, c := range conns {
				c.Close()
			}
		}
		t.Logf("%s, head of %d bytes: bytes per idle connection: net/http %d, h1serve %d", tc.path, tc.headBytes, per[std], per[ours])
		if per[ours] > per[std]+12<<10 {
			t.Errorf("%s, head of %d bytes: an idle connection holds %d bytes, net/http's %d", tc.path, tc.headBytes, per[ours], per[std])
		}
	}
}
