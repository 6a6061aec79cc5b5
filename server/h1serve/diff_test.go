package h1serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The differential harness: the same handlers behind net/http's server and
// this one, fed the same bytes; their answers compared.

func diffHandler() http.Handler {
	mux := http.NewServeMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		h := w.Header()
		h.Set("X-Method", r.Method)
		h.Set("X-Host", r.Host)
		h.Set("X-URL", r.URL.String())
		h.Set("X-Proto", r.Proto)
		h.Set("X-CL", strconv.FormatInt(r.ContentLength, 10))
		h.Set("X-TE", strings.Join(r.TransferEncoding, ","))
		h.Set("X-Close", strconv.FormatBool(r.Close))
		h.Set("X-Err", fmt.Sprint(err))
		h.Set("X-Has-Host-Header", strconv.FormatBool(r.Header["Host"] != nil))
		h.Set("X-TLS", strconv.FormatBool(r.TLS != nil))
		h.Set("X-Remote-Set", strconv.FormatBool(r.RemoteAddr != ""))
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h.Set("X-Keys", strings.Join(keys, ","))
		var all strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&all, "%q:%q;", k, r.Header[k])
		}
		h.Set("X-Header", strconv.Quote(all.String()))
		w.Write(b)
	}
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/dbs/", echo) // headCases' paths
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello, world") })
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"a":1}`)) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("0123456789"), 500))
	})
	mux.HandleFunc("/strings", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("s", 1500))
		io.WriteString(w, strings.Repeat("t", 1500))
		io.WriteString(w, "")
		io.WriteString(w, "end")
	})
	mux.HandleFunc("/big-cl", func(w http.ResponseWriter, r *http.Request) {
		b := bytes.Repeat([]byte("abcdefghij"), 700)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
	mux.HandleFunc("/short-cl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("abc"))
	})
	mux.HandleFunc("/over-cl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		_, err := w.Write([]byte("abc"))
		w.Write([]byte(fmt.Sprint(err)))
	})
	mux.HandleFunc("/unread", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "no")
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	mux.HandleFunc("/keepalive-cl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "keep-alive")
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(204)
		_, err := io.WriteString(w, "body!")
		w.Header().Set("X-After", fmt.Sprint(err))
	})
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Etag", `"x"`)
		w.WriteHeader(304)
	})
	mux.HandleFunc("/late-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Before", "1")
		w.WriteHeader(201)
		w.Header().Set("X-After", "1")
		io.WriteString(w, "x")
	})
	mux.HandleFunc("/no-header-call", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(202)
	})
	mux.HandleFunc("/newline", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Split", "a\r\nSet-Cookie: evil=1")
		w.Header()["Bad Key"] = []string{"v"}
		io.WriteString(w, "x")
	})
	mux.HandleFunc("/1xx", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a>; rel=preload")
		w.WriteHeader(103)
		io.WriteString(w, "after early hints")
	})
	mux.HandleFunc("/status-999", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(599) })
	mux.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part one,")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part two")
	})
	mux.HandleFunc("/controller", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		io.WriteString(w, "a")
		err := rc.Flush()
		err2 := rc.SetWriteDeadline(time.Now().Add(time.Minute))
		fmt.Fprint(w, err, err2)
	})
	mux.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "data")
		w.Header().Set("X-Sum", "42")
	})
	mux.HandleFunc("/te-identity", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "identity")
		io.WriteString(w, "streamed")
	})
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	mux.HandleFunc("/abort", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		panic(http.ErrAbortHandler)
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		n := rw.Reader.Buffered()
		fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Buffered: %d\r\n\r\n%s", len("hijacked"), n, "hijacked")
		rw.Flush()
		c.Close()
	})
	mux.HandleFunc("/read-half", func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 3)
		io.ReadFull(r.Body, b)
		w.Write(b)
	})
	mux.HandleFunc("/close-body", func(w http.ResponseWriter, r *http.Request) {
		r.Body.Close()
		io.WriteString(w, "closed")
	})
	// /pad?h=H&b=B answers with a header line of H bytes and a body of B:
	// the numbers the framing writes (the status, Content-Length, a
	// chunk's size) then land at every place in the connection's write
	// buffer, its end included.
	mux.HandleFunc("/pad", func(w http.ResponseWriter, r *http.Request) {
		h, _ := strconv.Atoi(r.URL.Query().Get("h"))
		b, _ := strconv.Atoi(r.URL.Query().Get("b"))
		w.Header().Set("X-Pad", strings.Repeat("p", max(0, h-len("X-Pad: \r\n"))))
		w.Header().Set("Date", "Mon, 07 Dec 2026 10:00:00 GMT") // the same on both servers
		w.WriteHeader(201)
		w.Write(bytes.Repeat([]byte("b"), b))
	})
	// /trailers answers with the trailers the request's body ended with,
	// as the handler's request holds them once the body is read.
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		before := fmt.Sprint(r.Trailer)
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %v before=%s after=%v", b, err, before, r.Trailer)
	})
	mux.HandleFunc("/trailers-close", func(w http.ResponseWriter, r *http.Request) {
		err := r.Body.Close()
		fmt.Fprintf(w, "%v %v", err, r.Trailer)
	})
	mux.HandleFunc("/ctx", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Context().Value(http.LocalAddrContextKey) != nil, r.Context().Err())
	})
	return mux
}

var quiet = log.New(io.Discard, "", 0)

// servers starts the handler behind both servers; it returns their
// addresses: net/http's first.
func servers(t testing.TB, h http.Handler, tune func(*http.Server)) (string, string) {
	t.Helper()
	mk := func() *http.Server {
		hs := &http.Server{Handler: h, ErrorLog: quiet, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second}
		if tune != nil {
			tune(hs)
		}
		return hs
	}
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	std := mk()
	ours, err := New(mk())
	if err != nil {
		t.Fatal(err)
	}
	go std.Serve(ln1)
	go ours.Serve(ln2)
	t.Cleanup(func() { std.Close(); ours.Close() })
	return ln1.Addr().String(), ln2.Addr().String()
}

// exchange is what a client saw on one connection.
type exchange struct {
	answers []answer
	closed  bool   // the server closed the connection
	rest    string // bytes after the last answer that did not parse
}

type answer struct {
	Proto         string
	Status        string
	Header        http.Header
	HasDate       bool
	ContentLength int64
	TE            []string
	Close         bool
	Body          string
	Trailer       http.Header
	BodyErr       string
}

// send writes the chunks to addr (pausing between them), half-closes when
// asked, and reads until the server closes or is quiet for quiet.
func send(t testing.TB, addr string, chunks []string, halfClose bool, methods []string, quiet time.Duration) exchange {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, ch := range chunks {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := io.WriteString(c, ch); err != nil {
			break
		}
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	var raw bytes.Buffer
	buf := make([]byte, 64<<10)
	var ex exchange
	for {
		c.SetReadDeadline(time.Now().Add(quiet))
		n, err := c.Read(buf)
		raw.Write(buf[:n])
		if err != nil {
			var ne net.Error
			ex.closed = !(errors.As(err, &ne) && ne.Timeout())
			break
		}
	}
	br := bufio.NewReader(&raw)
	for i := 0; ; i++ {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				break
			}
		}
		method := "GET"
		if i < len(methods) {
			method = methods[i]
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			rest, _ := io.ReadAll(br)
			ex.rest = err.Error() + ": " + string(rest)
			break
		}
		body, berr := io.ReadAll(resp.Body)
		a := answer{Proto: resp.Proto, Status: resp.Status, Header: resp.Header, ContentLength: resp.ContentLength,
			TE: resp.TransferEncoding, Close: resp.Close, Body: string(body), Trailer: resp.Trailer}
		if berr != nil {
			a.BodyErr = berr.Error()
		}
		_, a.HasDate = a.Header["Date"]
		delete(a.Header, "Date")
		ex.answers = append(ex.answers, a)
		if resp.StatusCode >= 200 || resp.StatusCode < 100 {
			// a final answer; 1xx are followed by another
		}
	}
	return ex
}

type rawCase struct {
	name      string
	chunks    []string
	methods   []string
	keepOpen  bool // do not half-close: also compare whether the server closes
	tune      func(*http.Server)
	skipClose bool // whether the connection closed is not compared (timing)
}

const hostHdr = "Host: example.com\r\n"

func rawCases() []rawCase {
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\n" + hostHdr + "\r\n" }
	post := func(path, body string) string {
		return "POST " + path + " HTTP/1.1\r\n" + hostHdr + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	big := strings.Repeat("x", 300<<10)
	var pads strings.Builder
	for h := 3950; h <= 4100; h++ {
		pads.WriteString(get("/pad?h=" + strconv.Itoa(h) + "&b=1234"))
		pads.WriteString(get("/pad?h=" + strconv.Itoa(h) + "&b=3000"))
	}
	for b := 4000; b <= 4200; b++ {
		pads.WriteString(get("/pad?h=0&b=" + strconv.Itoa(b)))
	}
	var heads []rawCase
	for _, tc := range headCases() {
		heads = append(heads, rawCase{name: "sdk head: " + tc.name, chunks: []string{tc.data}, keepOpen: true})
	}
	return append(heads, []rawCase{
		{name: "undeclared trailer", chunks: []string{"POST /trailers HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\nX-U: 2\r\n\r\n" + get("/small")}},
		{name: "undeclared trailer, body closed unread", chunks: []string{"POST /trailers-close HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n" + get("/small")}},
		{name: "malformed trailer, body closed unread", chunks: []string{"POST /trailers-close HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX\xffT: 1\r\n\r\n" + get("/small")}},
		{name: "malformed chunk, body closed unread", chunks: []string{"POST /trailers-close HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n" + get("/small")}},
		{name: "declared trailer", chunks: []string{"POST /trailers HTTP/1.1\r\n" + hostHdr + "Trailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\nX-U: 2\r\n\r\n" + get("/small")}},
		{name: "numbers at the write buffer's edge", chunks: []string{pads.String()}},
		{name: "get", chunks: []string{get("/echo")}},
		{name: "get kept open", chunks: []string{get("/echo")}, keepOpen: true},
		{name: "post echo", chunks: []string{post("/echo", `{"id":"a"}`)}},
		{name: "pipelined", chunks: []string{get("/small") + post("/echo", "one") + "POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n" + get("/json")}},
		{name: "pipelined after close", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + "Connection: close\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "handler close", chunks: []string{get("/close") + get("/small")}, keepOpen: true},
		{name: "http/1.0", chunks: []string{"GET /small HTTP/1.0\r\n\r\n"}, keepOpen: true},
		{name: "http/1.0 keep-alive", chunks: []string{"GET /small HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + "GET /small HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"}, keepOpen: true},
		{name: "http/1.0 keep-alive with length", chunks: []string{"GET /keepalive-cl HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + "GET /keepalive-cl HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"}, keepOpen: true},
		{name: "http/1.0 big", chunks: []string{"GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"}, keepOpen: true},
		{name: "head", chunks: []string{"HEAD /small HTTP/1.1\r\n" + hostHdr + "\r\n" + "HEAD /big-cl HTTP/1.1\r\n" + hostHdr + "\r\n" + "HEAD /big HTTP/1.1\r\n" + hostHdr + "\r\n" + get("/small")}, methods: []string{"HEAD", "HEAD", "HEAD", "GET"}},
		{name: "big chunked", chunks: []string{get("/big") + get("/small")}},
		{name: "strings", chunks: []string{get("/strings") + "HEAD /strings HTTP/1.1\r\n" + hostHdr + "\r\n" + "GET /strings HTTP/1.0\r\n\r\n"}, methods: []string{"GET", "HEAD", "GET"}},
		{name: "big with length", chunks: []string{get("/big-cl")}},
		{name: "short content-length", chunks: []string{get("/short-cl") + get("/small")}, keepOpen: true, skipClose: true},
		{name: "over content-length", chunks: []string{get("/over-cl")}},
		{name: "204 and 304", chunks: []string{get("/204") + get("/304") + get("/no-header-call")}},
		{name: "late header", chunks: []string{get("/late-header")}},
		{name: "newline in value", chunks: []string{get("/newline")}},
		{name: "1xx", chunks: []string{get("/1xx")}},
		{name: "unknown status", chunks: []string{get("/status-999")}},
		{name: "flush", chunks: []string{get("/flush")}},
		{name: "controller", chunks: []string{get("/controller")}},
		{name: "trailer", chunks: []string{get("/trailer")}},
		{name: "te identity", chunks: []string{get("/te-identity")}, keepOpen: true},
		{name: "panic", chunks: []string{get("/panic") + get("/small")}, keepOpen: true},
		{name: "abort", chunks: []string{get("/abort")}, keepOpen: true},
		{name: "hijack", chunks: []string{get("/hijack") + get("/small")}, keepOpen: true},
		{name: "ctx", chunks: []string{get("/ctx")}},
		{name: "not found", chunks: []string{get("/nope")}},
		// Bodies left unread.
		{name: "unread small body", chunks: []string{post("/unread", "0123456789") + get("/small")}},
		{name: "unread big body", chunks: []string{post("/unread", big) + get("/small")}, keepOpen: true, skipClose: true},
		{name: "partly read body", chunks: []string{post("/read-half", "abcdefgh") + get("/small")}},
		{name: "closed body", chunks: []string{post("/close-body", "abcdefgh") + get("/small")}},
		{name: "unread chunked with request inside", chunks: []string{"POST /unread HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n" +
			"20\r\nGET /small HTTP/1.1\r\nHost: a\r\n\r\n\r\n0\r\n\r\n" + get("/json")}},
		{name: "post then crlf", chunks: []string{post("/echo", "x") + "\r\n" + get("/small")}},
		// Host.
		{name: "missing host", chunks: []string{"GET /echo HTTP/1.1\r\n\r\n"}, keepOpen: true},
		{name: "two hosts", chunks: []string{"GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"}, keepOpen: true},
		{name: "bad host", chunks: []string{"GET /echo HTTP/1.1\r\nHost: a b\r\n\r\n"}, keepOpen: true},
		{name: "host with at", chunks: []string{"GET /echo HTTP/1.1\r\nHost: a@b\r\n\r\n"}, keepOpen: true},
		{name: "absolute form", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nHost: b.example\r\n\r\n"}},
		{name: "absolute form without host", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\n\r\n"}, keepOpen: true},
		{name: "absolute form bad host header", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nhOsT: x y\r\n\r\n"}, keepOpen: true},
		{name: "http/1.0 without host", chunks: []string{"GET /echo HTTP/1.0\r\n\r\n"}},
		// Smuggling and malformed.
		{name: "cl and te", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /small HTTP/1.1\r\n" + hostHdr + "\r\n"}, keepOpen: true},
		{name: "two differing cl", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"}, keepOpen: true},
		{name: "two equal cl", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd"}},
		{name: "cl plus", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: +4\r\n\r\nabcd"}, keepOpen: true},
		{name: "cl list", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 4,4\r\n\r\nabcd"}, keepOpen: true},
		{name: "te unknown", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: gzip\r\n\r\n"}, keepOpen: true},
		{name: "te chunked identity", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"}, keepOpen: true},
		{name: "te twice", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, keepOpen: true},
		{name: "chunk size overflow", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nx\r\n0\r\n\r\n"}, keepOpen: true},
		{name: "chunk extension", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n" + get("/small")}},
		{name: "bare lf", chunks: []string{"GET /echo HTTP/1.1\n" + "Host: a\n\n"}},
		{name: "nul in header", chunks: []string{"GET /echo HTTP/1.1\r\n" + hostHdr + "X-A: a\x00b\r\n\r\n"}, keepOpen: true},
		{name: "obs fold", chunks: []string{"GET /echo HTTP/1.1\r\n" + hostHdr + "X-A: a\r\n b\r\n\r\n"}, keepOpen: true},
		{name: "space before colon", chunks: []string{"GET /echo HTTP/1.1\r\n" + hostHdr + "X-A : a\r\n\r\n"}, keepOpen: true},
		{name: "two spaces in request line", chunks: []string{"GET  /echo HTTP/1.1\r\n" + hostHdr + "\r\n"}, keepOpen: true},
		{name: "lowercase proto", chunks: []string{"GET /echo http/1.1\r\n" + hostHdr + "\r\n"}, keepOpen: true},
		{name: "http/2 line", chunks: []string{"GET /echo HTTP/2.0\r\n" + hostHdr + "\r\n"}, keepOpen: true},
		{name: "http/0.9", chunks: []string{"GET /echo\r\n\r\n"}, keepOpen: true},
		{name: "bad url", chunks: []string{"GET %zz HTTP/1.1\r\n" + hostHdr + "\r\n"}, keepOpen: true},
		{name: "garbage", chunks: []string{"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"}, keepOpen: true},
		{name: "empty", chunks: []string{""}},
		{name: "truncated headers", chunks: []string{"GET /echo HTTP/1.1\r\nHost: a\r\n"}},
		{name: "truncated body", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 10\r\n\r\nabc"}},
		// Header size.
		{name: "header at the limit", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + "X-Big: " + strings.Repeat("a", 2000) + "\r\n\r\n"},
			tune: func(hs *http.Server) { hs.MaxHeaderBytes = 1 }},
		{name: "header over the limit", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + "X-Big: " + strings.Repeat("a", 6000) + "\r\n\r\n"},
			tune: func(hs *http.Server) { hs.MaxHeaderBytes = 1 }, keepOpen: true},
		{name: "header over the default limit", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + strings.Repeat("X-Many: "+strings.Repeat("b", 100)+"\r\n", 11000) + "\r\n"}, keepOpen: true},
		// Expect.
		{name: "expect 100 then body", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n", "hello" + get("/small")}},
		// net/http then waits for the body it did not ask for (until
		// ReadTimeout) before closing; h1serve closes at once (doc.go).
		{name: "expect 100 unread", chunks: []string{"POST /unread HTTP/1.1\r\n" + hostHdr + "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n"}, keepOpen: true, skipClose: true},
		{name: "expect other", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Expect: teapot\r\nContent-Length: 5\r\n\r\nhello"}, keepOpen: true},
		{name: "expect on 1.0", chunks: []string{"POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"}},
		{name: "connection keep-alive, close", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + "Connection: keep-alive, close\r\n\r\n" + get("/small")}, keepOpen: true},
		// Smuggling and framing (each followed by a second request that
		// must be served only where net/http serves it).
		{name: "cl and te smuggle", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 35\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "te then cl smuggle", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\n" + get("/smuggled") + "\r\n0\r\n\r\n"}, keepOpen: true},
		{name: "te on http/1.0", chunks: []string{"POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "te on http/1.0 with cl", chunks: []string{"POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "te gzip chunked", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "te xchunked", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "te with tab", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "te upper case", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "te folded", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "chunk size with plus", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "chunk size 0x", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "chunk size trailing space", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "chunk bare lf", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n" + get("/small")}, keepOpen: true},
		{name: "chunk data longer than size", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "chunk extension with lf", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n3;a=\"x\ny\"\r\nabc\r\n0\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "tiny chunks with extensions", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1;"+strings.Repeat("e", 200)+"\r\na\r\n", 500) + "0\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "huge trailer", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n" + strings.Repeat("X-T: "+strings.Repeat("t", 100)+"\r\n", 200) + "\r\n" + get("/small")}, keepOpen: true},
		{name: "trailer with content-length", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nContent-Length: 40\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "cl leading zeros", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 003\r\n\r\nabc" + get("/small")}, keepOpen: true},
		{name: "cl negative", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: -1\r\n\r\n" + get("/smuggled")}, keepOpen: true},
		{name: "cl with space inside", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 3 3\r\n\r\nabc" + get("/smuggled")}, keepOpen: true},
		{name: "cl hex", chunks: []string{"POST /echo HTTP/1.1\r\n" + hostHdr + "Content-Length: 0x3\r\n\r\nabc" + get("/smuggled")}, keepOpen: true},
		{name: "get with body pipelined", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + "Content-Length: " + strconv.Itoa(len(get("/smuggled"))) + "\r\n\r\n" + get("/smuggled") + get("/small")}, keepOpen: true},
		{name: "head with body pipelined", chunks: []string{"HEAD /small HTTP/1.1\r\n" + hostHdr + "Content-Length: " + strconv.Itoa(len(get("/smuggled"))) + "\r\n\r\n" + get("/smuggled") + get("/small")}, methods: []string{"HEAD", "GET"}, keepOpen: true},
		{name: "lf only head", chunks: []string{"GET /small HTTP/1.1\n" + "Host: example.com\n\n" + get("/small")}, keepOpen: true},
		{name: "cr only in head", chunks: []string{"GET /small HTTP/1.1\r" + "Host: example.com\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "nul in request line", chunks: []string{"GET /sm\x00all HTTP/1.1\r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "tab in request line", chunks: []string{"GET\t/small HTTP/1.1\r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "trailing space in request line", chunks: []string{"GET /small HTTP/1.1 \r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "three spaces in request line", chunks: []string{"GET /small extra HTTP/1.1\r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "leading crlf", chunks: []string{"\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "absolute form host mismatch", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nHost: b.example\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "absolute form https and userinfo", chunks: []string{"GET https://u:p@a.example:8081/echo?x=1 HTTP/1.1\r\nHost: b.example\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "absolute form empty host header", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nHost:\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "absolute form two host headers", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "absolute form host in body only", chunks: []string{"POST http://a.example/echo HTTP/1.1\r\nContent-Length: 17\r\n\r\nHost: example.com" + get("/small")}, keepOpen: true},
		{name: "host folded", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nX-A: 1\r\n Host: b\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "host lowercase with tab", chunks: []string{"GET http://a.example/echo HTTP/1.1\r\nhost:\tb.example\t\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "host with space", chunks: []string{"GET /echo HTTP/1.1\r\nHost: a b\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "host with nul", chunks: []string{"GET /echo HTTP/1.1\r\nHost: a\x00b\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "connect", chunks: []string{"CONNECT a.example:443 HTTP/1.1\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "options star with a body", chunks: []string{"OPTIONS * HTTP/1.1\r\n" + hostHdr + "Content-Length: 3\r\n\r\nabc" + get("/small")}, keepOpen: true},
		{name: "options star with a body over 4 KiB", chunks: []string{"OPTIONS * HTTP/1.1\r\n" + hostHdr + "Content-Length: 5000\r\n\r\n" + strings.Repeat("b", 5000) + get("/small")}, keepOpen: true},
		{name: "options star chunked over 4 KiB", chunks: []string{"OPTIONS * HTTP/1.1\r\n" + hostHdr + "Transfer-Encoding: chunked\r\n\r\n1388\r\n" + strings.Repeat("b", 5000) + "\r\n0\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "options star", chunks: []string{"OPTIONS * HTTP/1.1\r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "pri preface", chunks: []string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "upgrade h2c", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n" + get("/small")}, keepOpen: true},
		{name: "http/1.2", chunks: []string{"GET /small HTTP/1.2\r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "http/1.10", chunks: []string{"GET /small HTTP/1.10\r\n" + hostHdr + "\r\n" + get("/small")}, keepOpen: true},
		{name: "many small headers near the limit", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + strings.Repeat("A: b\r\n", (68<<10)/6-10) + "\r\n" + get("/small")},
			tune: func(hs *http.Server) { hs.MaxHeaderBytes = 64 << 10 }, keepOpen: true},
		{name: "many small headers over the limit", chunks: []string{"GET /small HTTP/1.1\r\n" + hostHdr + strings.Repeat("A: b\r\n", (68<<10)/6+10) + "\r\n" + get("/small")},
			tune: func(hs *http.Server) { hs.MaxHeaderBytes = 64 << 10 }, keepOpen: true},
		{name: "sdk head over a tiny limit", chunks: []string{headCases()[0].data},
			tune: func(hs *http.Server) { hs.MaxHeaderBytes = 1 }, keepOpen: true},
		{name: "sdk heads in one write and in two", chunks: []string{headCases()[1].data[:700], headCases()[1].data[700:]}, keepOpen: true},
	}...)
}

// TestARequestBothServersAnswerIsAnsweredAlike feeds each raw case to
// net/http's server and to this one and compares what a client sees.
func TestARequestBothServersAnswerIsAnsweredAlike(t *testing.T) {
	h := diffHandler()
	for _, tc := range rawCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			std, ours := servers(t, h, tc.tune)
			a, b := sendToBoth(t, std, ours, tc.chunks, !tc.keepOpen, tc.methods, tc.skipClose)
			compareExchanges(t, a, b, tc.skipClose)
		})
	}
}

// sendToBoth sends the chunks to each server and returns what each client
// saw. A client takes a server to have said all it will once it is quiet
// for 400 ms; on a loaded machine a server can be quiet that long in the
// middle of answering (at load average 30, one server's answers were
// missing while the other's were there, net/http's in one case, h1serve's
// in another). So when the two differ both are asked again, quiet for 3 s:
// a difference in what they answer is there again, a stall of that length
// is not. 3 s stays below the servers' 5 s header timeout, the first thing
// either does of its own accord.
func sendToBoth(t testing.TB, std, ours string, chunks []string, halfClose bool, methods []string, skipClose bool) (a, b exchange) {
	for _, quiet := range []time.Duration{400 * time.Millisecond, 3 * time.Second} {
		a = send(t, std, chunks, halfClose, methods, quiet)
		b = send(t, ours, chunks, halfClose, methods, quiet)
		if exchangesAlike(a, b, skipClose) {
			break
		}
		t.Logf("the servers answered unlike with the client waiting %v for more: asking both again", quiet)
	}
	return a, b
}

// exchangesAlike is whether compareExchanges finds nothing to report.
func exchangesAlike(a, b exchange, skipClose bool) bool {
	return reflect.DeepEqual(a.answers, b.answers) && a.rest == b.rest && (skipClose || a.closed == b.closed)
}

func compareExchanges(t testing.TB, a, b exchange, skipClose bool) {
	t.Helper()
	if len(a.answers) != len(b.answers) {
		t.Fatalf("net/http gave %d answers, h1serve %d:\nnet/http: %+v\nh1serve: %+v", len(a.answers), len(b.answers), a, b)
	}
	for i := range a.answers {
		if !reflect.DeepEqual(a.answers[i], b.answers[i]) {
			t.Errorf("answer %d differs:\nnet/http: %+v\nh1serve:  %+v", i, a.answers[i], b.answers[i])
		}
	}
	if a.rest != b.rest {
		t.Errorf("unparsed rest differs:\nnet/http: %q\nh1serve:  %q", a.rest, b.rest)
	}
	if !skipClose && a.closed != b.closed {
		t.Errorf("connection closed: net/http %v, h1serve %v", a.closed, b.closed)
	}
}

// TestAnAnswersHeaderLinesAreWrittenAsNetHTTPWritesThem: the header a
// handler sets (keys in any case and order, invalid names, empty and
// several values, values with CR, LF and spaces around them, more keys
// than a map group holds) reaches the wire byte for byte as net/http
// writes it, its order included, the Date line aside.
func TestAnAnswersHeaderLinesAreWrittenAsNetHTTPWritesThem(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for i := range n {
			hd.Set("X-Ms-Key-"+strconv.Itoa(i*7919%n), strconv.Itoa(i))
		}
		hd["x-lower"] = []string{"lower"}
		hd["Bad Key"] = []string{"dropped"}
		hd["Bad:Key"] = []string{"dropped"}
		hd["A"] = []string{"first"}
		hd["Z"] = []string{" spaced\t", "\tsecond ", "   "}
		hd["_under"] = []string{"u"}
		hd["X-Empty"] = []string{}
		hd["X-Nil"] = nil
		hd["X-Blank"] = []string{""}
		hd["X-Split"] = []string{"a\r\nSet-Cookie: evil=1", "\nb\r", "c\rd"}
		hd["X-Unicode"] = []string{"é ü"}
		hd["Etag"] = []string{`"0000-1111"`}
		// No Content-Type: one a handler sets is written after the
		// other lines (with the framing's), where net/http sorts it in.
		w.WriteHeader(201)
		io.WriteString(w, `{"a":1}`)
	})
	std, ours := servers(t, h, nil)
	date := regexp.MustCompile(`\r\nDate: [^\r]*`)
	for _, n := range []int{0, 3, 20, 70} {
		var got [2]string
		for i, addr := range []string{std, ours} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET /?n=%d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", n)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, err := io.ReadAll(c)
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			got[i] = date.ReplaceAllString(string(b), "\r\nDate: -")
		}
		if got[0] != got[1] {
			t.Errorf("%d keys: net/http wrote\n%q\nh1serve wrote\n%q", n, got[0], got[1])
		}
	}
}
