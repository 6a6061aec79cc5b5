package h1serve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
)

// pieces is a reader that gives its first n bytes in its first Read (as a
// connection whose first segment held them) and the rest as asked.
type pieces struct {
	b     []byte
	first int
	n     int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	k := len(p.b)
	if p.n == 0 && p.first > 0 && p.first < k {
		k = p.first
	}
	p.n++
	k = copy(b, p.b[:min(k, len(b))])
	p.b = p.b[k:]
	return k, nil
}

// readOutcome is what a reader of requests made of a stream: per request
// everything a handler sees of it, then the error that ended the stream.
type readOutcome struct {
	reqs  []string
	err   string
	split int // requests whose head was not left whole to http.ReadRequest
	whole int // requests whose head parseWhole parsed
}

func describe(req *http.Request) string {
	// The body read in pieces of 7 bytes: each read's count and error
	// (an io.EOF with the last bytes or after them), then read after its
	// end, closed, and read after Close.
	var body []byte
	var reads strings.Builder
	for range 1 << 20 {
		var p [7]byte
		n, err := req.Body.Read(p[:])
		body = append(body, p[:n]...)
		fmt.Fprintf(&reads, "%d %v,", n, err)
		if err != nil {
			break
		}
	}
	n, err := req.Body.Read(make([]byte, 7))
	cerr := req.Body.Close()
	n2, err2 := req.Body.Read(make([]byte, 7))
	cerr2 := req.Body.Close()
	return fmt.Sprintf("%q %q %q %q %d.%d %#v\nheader %#v\nhost %q cl %d te %q close %v\nbody %q reads %s then %d %v close %v, %d %v close %v trailer %#v getbody %v",
		req.Method, req.RequestURI, req.URL.String(), req.Proto, req.ProtoMajor, req.ProtoMinor, *req.URL,
		req.Header, req.Host, req.ContentLength, req.TransferEncoding, req.Close, body, reads.String(), n, err, cerr, n2, err2, cerr2,
		req.Trailer, req.GetBody != nil)
}

// readAll reads the stream's requests (at most 8) with read.
func readAll(data []byte, first int, read func(*bufio.Reader) (*http.Request, error)) readOutcome {
	br := bufio.NewReader(&pieces{b: data, first: first})
	var out readOutcome
	for range 8 {
		req, err := read(br)
		if err != nil {
			out.err = err.Error()
			break
		}
		if req.Header == nil {
			out.err = "nil header"
			break
		}
		out.reqs = append(out.reqs, describe(req))
	}
	return out
}

// readBoth reads data with http.ReadRequest and with readHead.
func readBoth(data []byte, first int) (std, ours readOutcome) {
	std = readAll(data, first, http.ReadRequest)
	c := &conn{}
	split, whole := 0, 0
	ours = readAll(data, first, func(br *bufio.Reader) (*http.Request, error) {
		// A byte peeked first, as readRequest peeks it before readHead.
		if _, err := br.Peek(1); err != nil {
			return nil, err
		}
		if buf, _ := br.Peek(br.Buffered()); len(buf) > 0 {
			scratch := &conn{}
			if scratch.parseWhole(bytes.Clone(buf), nil, &response{}) > 0 {
				whole++
				split++
			} else if skip, _, _, _ := scratch.splitHead(bytes.Clone(buf)); skip >= 0 {
				split++
			}
		}
		return c.readHead(br, &response{c: c})
	})
	ours.split, ours.whole = split, whole
	return std, ours
}

// sdkHead is a head as the Go SDK writes it (instance's sdkRequest), with
// extra lines after its Host line.
func sdkHead(method, path string, extra string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: localhost:8081\r\nUser-Agent: azsdk-go-azcosmos/v1.5.0 (go1.26.8; linux)\r\n", method, path)
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Authorization: type%3Dmaster%26ver%3D1.0%26sig%3DabcdEFGH%2B%2F%3D\r\n")
	if body != "" {
		b.WriteString("Content-Type: application/json\r\nPrefer: return=minimal\r\n")
	}
	b.WriteString(extra)
	b.WriteString("X-Ms-Activity-Id: 79fd0bda-b0c0-484e-765d-0c0e095080a2\r\nX-Ms-Cosmos-Sdk-Supportedcapabilities: 1\r\n" +
		"X-Ms-Date: Mon, 07 Dec 2026 13:00:00 GMT\r\nX-Ms-Documentdb-Partitionkey: [\"p\"]\r\nX-Ms-Version: 2020-11-05\r\nAccept-Encoding: gzip\r\n\r\n")
	b.WriteString(body)
	return b.String()
}

// headCases are streams whose heads take each way through splitHead.
func headCases() []struct {
	name  string
	data  string
	split bool // splitHead takes lines out of its first head
} {
	read := sdkHead("GET", "/dbs/db/colls/c/docs/r", "", "")
	upsert := sdkHead("POST", "/dbs/db/colls/c/docs", "X-Ms-Documentdb-Is-Upsert: true\r\n", `{"id":"a","pk":"p"}`)
	js := "GET /dbs/db/colls/c/docs/r HTTP/1.1\r\naccept: application/json\r\nx-ms-version: 2020-07-15\r\nx-ms-date: mon, 07 dec 2026 13:00:00 gmt\r\n" +
		"authorization: type%3Dmaster\r\nx-ms-documentdb-partitionkey: [\"p\"]\r\ncache-control: no-cache\r\nx-ms-cosmos-sdk-supportedcapabilities: 1\r\n" +
		"user-agent: azsdk-js-cosmos/4.0\r\nHost: localhost:8081\r\nConnection: keep-alive\r\n\r\n"
	py := "PUT /dbs/db/colls/c/docs/x HTTP/1.1\r\nHost: localhost:8081\r\nUser-Agent: azsdk-python-cosmos/4.7\r\nAccept-Encoding: gzip, deflate\r\nAccept: application/json\r\n" +
		"Connection: keep-alive\r\nCache-Control: no-cache\r\nx-ms-version: 2020-07-15\r\nIf-Match: \"00000000-0000\"\r\nx-ms-consistency-level: Session\r\n" +
		"x-ms-session-token: 0:1#12\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	replace := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			panic(old)
		}
		return strings.Replace(s, old, new, 1)
	}
	bigValue := strings.Repeat("v", 3000)
	return []struct {
		name  string
		data  string
		split bool
	}{
		{"go read", read, true},
		{"go read pipelined", read + read + upsert + read, true},
		{"go upsert", upsert, true},
		{"js read", js, true},
		{"python replace", py, true},
		{"upsert chunked", replace(upsert, "Content-Length: 19\r\n", "Transfer-Encoding: chunked\r\n") + "\r\n0\r\nX-T: 1\r\n\r\n", true},
		{"declared trailer", replace(upsert, "Content-Length: 19\r\n", "Trailer: X-Ms-Date\r\nTransfer-Encoding: chunked\r\n")[:len(upsert)-19+13] + "13\r\n{\"id\":\"a\",\"pk\":\"p\"}\r\n0\r\nX-Ms-Date: later\r\n\r\n", true},
		{"odd case keys", replace(read, "X-Ms-Date:", "x-ms-DATE:"), true},
		{"upper case keys", replace(replace(read, "X-Ms-Version:", "X-MS-VERSION:"), "Host:", "HOST:"), true},
		{"duplicate sdk key", replace(read, "X-Ms-Version: 2020-11-05\r\n", "X-Ms-Version: 1\r\nx-ms-version: 2\r\nX-MS-Version:3\r\n"), true},
		{"duplicate sdk key apart", replace(read, "Accept-Encoding: gzip\r\n", "Accept-Encoding: gzip\r\nX-Other: 1\r\naccept-encoding: br\r\n"), true},
		{"duplicate unknown key", replace(read, "Accept-Encoding: gzip\r\n", "X-Other: 1\r\nX-Other: 2\r\n"), true},
		{"empty values", replace(replace(read, "X-Ms-Version: 2020-11-05\r\n", "X-Ms-Version:\r\nX-Ms-Session-Token: \r\nX-Empty:\r\n"), "Host: localhost:8081", "Host:"), true},
		{"spaces and tabs around values", replace(read, "X-Ms-Version: 2020-11-05\r\n", "X-Ms-Version: \t 2020 11\t \r\nX-Ms-Continuation:\t\t\r\n"), true},
		{"space before colon", replace(read, "X-Ms-Date:", "X-Ms-Date :"), true},
		{"space before host colon", replace(read, "Host:", "Host :"), true},
		{"no host", replace(read, "Host: localhost:8081\r\n", ""), true},
		{"empty host", replace(read, "Host: localhost:8081\r\n", "Host:  \r\n"), true},
		{"bad host", replace(read, "Host: localhost:8081\r\n", "Host: a b\r\n"), true},
		{"two hosts", replace(read, "Host: localhost:8081\r\n", "Host: a\r\nhost: a\r\n"), false},
		{"absolute form", replace(read, "GET /dbs", "GET http://b.example/dbs"), false},
		{"http/1.0", replace(read, "HTTP/1.1", "HTTP/1.0"), false},
		{"http/1.0 keep-alive", replace(replace(read, "HTTP/1.1", "HTTP/1.0"), "Accept-Encoding", "Connection: keep-alive\r\nAccept-Encoding"), false},
		{"pri", "PRI * HTTP/2.0\r\nX-Ms-Date: x\r\n\r\n", false},
		{"pri origin", "PRI /x HTTP/1.1\r\nX-Ms-Date: x\r\n\r\n", true},
		{"connect", replace(read, "GET /dbs/db/colls/c/docs/r", "CONNECT /x"), true},
		{"connection close", replace(read, "Accept-Encoding", "Connection: close\r\nAccept-Encoding") + read, true},
		{"pragma", replace(js, "cache-control: no-cache\r\n", "pragma: no-cache\r\n"), false},
		{"pragma and cache-control", replace(js, "cache-control: no-cache\r\n", "Pragma: no-cache\r\ncache-control: max-age=1\r\n"), false},
		{"sdk keys with framing values", replace(read, "Accept-Encoding: gzip\r\n", "Accept-Encoding: chunked\r\nExpect: 100-continue\r\nCache-Control: close\r\nPrefer: 5\r\n"), true},
		{"cl twice", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 19\r\ncontent-length: 19\r\n"), true},
		{"cl differing", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 19\r\nContent-Length: 20\r\n"), true},
		{"cl and te", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 19\r\nTransfer-Encoding: chunked\r\n"), true},
		{"te twice", replace(upsert, "Content-Length: 19\r\n", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), true},
		{"te gzip", replace(upsert, "Content-Length: 19\r\n", "Transfer-Encoding: gzip\r\n"), true},
		{"te folded", replace(upsert, "Content-Length: 19\r\n", "Transfer-Encoding:\r\n chunked\r\n"), false},
		{"sdk line folded", replace(read, "X-Ms-Version: 2020-11-05\r\n", "X-Ms-Version: 2020\r\n -11-05\r\n"), false},
		{"sdk line folded by tab", replace(read, "X-Ms-Version: 2020-11-05\r\n", "X-Ms-Version: 2020\r\n\t-11-05\r\n"), false},
		{"first line folded", replace(read, "Host: ", " Host: "), false},
		{"nul in sdk value", replace(read, "2020-11-05", "2020\x00-11-05"), false},
		{"del in sdk value", replace(read, "2020-11-05", "2020\x7f-11-05"), false},
		{"obs-text in sdk value", replace(read, "2020-11-05", "2020\xe9-11-05"), false},
		{"cr in sdk value", replace(read, "2020-11-05", "2020\r-11-05"), false},
		{"bare lf line", replace(read, "X-Ms-Version: 2020-11-05\r\n", "X-Ms-Version: 2020-11-05\n"), false},
		{"bare lf head end", strings.TrimSuffix(read, "\r\n") + "\n", false},
		{"invalid key byte", replace(read, "Accept-Encoding: gzip\r\n", "X(Bad): 1\r\n"), true},
		{"invalid byte in sdk-like key", replace(read, "X-Ms-Date:", "X-Ms_Date:"), true},
		{"key with space", replace(read, "X-Ms-Date:", "X Ms-Date:"), true},
		{"empty key", replace(read, "Accept-Encoding: gzip\r\n", ": gzip\r\n"), true},
		{"line without colon", replace(read, "Accept-Encoding: gzip\r\n", "Accept-Encoding gzip\r\n"), true},
		{"long key", replace(read, "Accept-Encoding: gzip\r\n", "X-"+strings.Repeat("k", 80)+": 1\r\n"), true},
		{"long value", replace(read, "2020-11-05", bigValue), true},
		{"value past the buffer", replace(read, "2020-11-05", bigValue+bigValue), false},
		{"many lines", replace(read, "Accept-Encoding: gzip\r\n", strings.Repeat("X-Ms-Date: d\r\n", 200)), false},
		{"request line without target slash", replace(read, "GET /dbs", "GET *dbs"), false},
		{"request line with two spaces", replace(read, "GET /dbs", "GET  /dbs"), false},
		{"request line extra field", replace(read, "/r HTTP/1.1", "/r x HTTP/1.1"), true},
		{"bad method", replace(read, "GET /dbs", "G(T /dbs"), true},
		{"bad url", replace(read, "/dbs/db", "/d%zz"), true},
		{"truncated head", read[:len(read)-2], false},
		{"truncated body", upsert[:len(upsert)-3], true},
		{"leading crlf", "\r\n" + read, false},
		{"expect", replace(upsert, "Accept-Encoding", "Expect: 100-continue\r\nAccept-Encoding"), true},

		// The forms parseWhole parses, and those next to them it leaves
		// to http.ReadRequest.
		{"plain head without sdk lines", "GET /x HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"plain head with an unknown key", "GET /x HTTP/1.1\r\nHost: h\r\nx-some-thing: 1\r\n\r\n", false},
		{"query", replace(read, "/docs/r", "/docs/r?a=1&b=%zz&c=d/e?f#g"), true},
		{"empty query", replace(read, "/docs/r", "/docs/r?"), true},
		{"two question marks at the end", replace(read, "/docs/r", "/docs/r??"), true},
		{"question mark then query", replace(read, "/docs/r", "/docs/r?x?"), true},
		{"query with non-ascii", replace(read, "/docs/r", "/docs/r?\xc3\xa9"), true},
		{"query with del", replace(read, "/docs/r", "/docs/r?\x7f"), true},
		{"percent-escaped path", replace(read, "/docs/r", "/docs/r%20s%2Fx"), true},
		{"bad percent escape", replace(read, "/docs/r", "/docs/r%2"), true},
		{"path bytes url escapes", replace(read, "/docs/r", "/docs/r!'()*[]{}\"^`|"), true},
		{"path bytes url keeps", replace(read, "/docs/r", "/docs/r-._~$&+,:;=@x"), true},
		{"double slash path", replace(read, "/dbs/db", "//dbs/db"), true},
		{"path with hash", replace(read, "/docs/r", "/docs/r#f"), true},
		{"path with non-ascii", replace(read, "/docs/r", "/docs/\xc3\xa9"), true},
		{"path with a control byte", replace(read, "/docs/r", "/docs/\x01r"), true},
		{"lower-case method", replace(read, "GET /dbs", "get /dbs"), true},
		{"extension method", replace(read, "GET /dbs", "M-SEARCH /dbs"), true},
		{"connect with a path", replace(read, "GET /dbs", "CONNECT /dbs"), true},
		{"options", replace(read, "GET /dbs/db/colls/c/docs/r", "OPTIONS /"), true},
		{"http/1.2", replace(read, "HTTP/1.1", "HTTP/1.2"), false},
		{"lower-case version", replace(read, "HTTP/1.1", "http/1.1"), false},
		{"cl zero", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 0\r\n"), true},
		{"cl leading zeros", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 0019\r\n"), true},
		{"cl spaces", replace(upsert, "Content-Length: 19\r\n", "Content-Length: \t 19 \t\r\n"), true},
		{"cl lower case", replace(upsert, "Content-Length: 19\r\n", "content-LENGTH: 19\r\n"), true},
		{"cl plus", replace(upsert, "Content-Length: 19\r\n", "Content-Length: +19\r\n"), true},
		{"cl minus", replace(upsert, "Content-Length: 19\r\n", "Content-Length: -19\r\n"), true},
		{"cl empty", replace(upsert, "Content-Length: 19\r\n", "Content-Length:\r\n"), true},
		{"cl hex", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 0x13\r\n"), true},
		{"cl 18 digits", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 000000000000000019\r\n"), true},
		{"cl 19 digits", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 0000000000000000019\r\n"), true},
		{"cl over int63", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 9223372036854775808\r\n"), true},
		{"cl shorter than the body", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 5\r\n"), true},
		{"cl longer than the body", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 30\r\n"), true},
		{"cl of a get", replace(read, "Accept-Encoding: gzip\r\n", "Content-Length: 3\r\nAccept-Encoding: gzip\r\n") + "abc" + read, true},
		{"cl space before colon", replace(upsert, "Content-Length:", "Content-Length :"), true},
		{"te lower case", replace(upsert, "Content-Length: 19\r\n", "transfer-encoding: chunked\r\n") + "0\r\n\r\n", true},
		{"te identity", replace(upsert, "Content-Length: 19\r\n", "Transfer-Encoding: identity\r\n"), true},
		{"trailer without te", replace(upsert, "Content-Length: 19\r\n", "Content-Length: 19\r\nTrailer: X-Ms-Date\r\n"), true},
		{"connection close and keep-alive", replace(read, "Accept-Encoding", "Connection: keep-alive, Close\r\nAccept-Encoding") + read, true},
		{"connection close in a second line", replace(read, "Accept-Encoding", "Connection: keep-alive\r\nconnection: foo,close\r\nAccept-Encoding") + read, true},
		{"connection closed", replace(read, "Accept-Encoding", "Connection: closed\r\nAccept-Encoding") + read, true},
		{"connection close of an upsert", replace(upsert, "Accept-Encoding", "Connection: close\r\nAccept-Encoding") + read, true},
		{"keys to canonicalize", replace(read, "Accept-Encoding: gzip\r\n", "x-some-thing: 1\r\nX-SOME-THING: 2\r\nx-1a-b2: 3\r\nUSER-AGENT: 4\r\nwww-authenticate: 5\r\n"), true},
		{"keys textproto keeps", replace(read, "Accept-Encoding: gzip\r\n", "X_Under: 1\r\nx!#$%&'*+.^_`|~y: 2\r\n"), true},
		{"canonical unknown key", replace(read, "Accept-Encoding: gzip\r\n", "X-Canonical-Key: 1\r\n"), true},
		{"long unknown key", replace(read, "Accept-Encoding: gzip\r\n", strings.Repeat("ab-", 40)+": 1\r\n"), true},
		{"long key like content-length", replace(upsert, "Accept-Encoding: gzip\r\n", "Content-Length"+strings.Repeat("-x", 30)+": 1\r\n"), true},
		{"value with colons and tabs", replace(read, "2020-11-05", "a:b\t:c  d"), true},
		{"value of spaces only", replace(read, "2020-11-05", "   \t "), true},
		{"host with tabs", replace(read, "Host: localhost:8081", "Host:\tlocalhost:8081\t"), true},
		{"host upper case", replace(read, "Host: localhost:8081", "HOST: LOCALHOST"), true},
		{"host with user info", replace(read, "Host: localhost:8081", "Host: u@h"), true},
		{"host not first", replace(replace(read, "Host: localhost:8081\r\n", ""), "Accept-Encoding", "Host: h\r\nAccept-Encoding"), true},
		{"nine keys", "GET /x HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\n\r\n", false},
		{"eight keys and repeats", "GET /x HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nA: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\n\r\n", false},
		{"128 lines", "GET /x HTTP/1.1\r\n" + strings.Repeat("X-Ms-Date: d\r\n", 127) + "Host: h\r\n\r\n", true},
		{"129 lines", "GET /x HTTP/1.1\r\n" + strings.Repeat("X-Ms-Date: d\r\n", 128) + "Host: h\r\n\r\n", false},
		{"colon first", replace(read, "Accept-Encoding: gzip\r\n", ":x: 1\r\n"), true},
		{"tab in key", replace(read, "Accept-Encoding: gzip\r\n", "X\tY: 1\r\n"), true},
		{"cr in host", replace(read, "Host: localhost:8081", "Host: local\rhost"), false},
		{"nul in request line", replace(read, "GET /dbs", "GET\x00/dbs"), false},
		{"tab in request line", replace(read, "GET /dbs", "GET\t/dbs"), false},
		{"space at the request line's end", replace(read, "HTTP/1.1\r\n", "HTTP/1.1 \r\n"), false},
		{"pipelined across forms", read + replace(read, "HTTP/1.1", "HTTP/1.0") + upsert + replace(upsert, "Content-Length: 19\r\n", "Transfer-Encoding: chunked\r\n")[:len(upsert)-19-1] + "\r\n13\r\n{\"id\":\"a\",\"pk\":\"p\"}\r\n0\r\n\r\n" + read, true},
	}
}

// wholeHeads are the headCases whose first head parseWhole parses (the
// rest it leaves to splitHead and http.ReadRequest).
var wholeHeads = map[string]bool{
	"go read": true, "go read pipelined": true, "go upsert": true, "js read": true, "python replace": true,
	"odd case keys": true, "upper case keys": true, "duplicate sdk key": true, "duplicate sdk key apart": true,
	"duplicate unknown key": true, "empty values": true, "spaces and tabs around values": true, "no host": true,
	"empty host": true, "bad host": true, "pri origin": true, "connect": true, "connection close": true,
	"sdk keys with framing values": true, "long key": true, "long value": true,
	"truncated body": true, "expect": true, "invalid byte in sdk-like key": true,
	"plain head without sdk lines": true, "plain head with an unknown key": true, "query": true, "empty query": true,
	"two question marks at the end": true, "question mark then query": true, "path bytes url keeps": true,
	"double slash path": true, "lower-case method": true, "extension method": true, "connect with a path": true,
	"options": true, "cl zero": true, "cl leading zeros": true, "cl spaces": true, "cl lower case": true,
	"cl 18 digits": true, "cl shorter than the body": true, "cl longer than the body": true, "cl of a get": true,
	"trailer without te": true, "connection close and keep-alive": true, "connection close in a second line": true,
	"connection closed": true, "connection close of an upsert": true, "keys to canonicalize": true,
	"keys textproto keeps": true, "canonical unknown key": true, "long unknown key": true,
	"long key like content-length": true, "value with colons and tabs": true, "value of spaces only": true,
	"host with tabs": true, "host upper case": true, "host with user info": true, "host not first": true,
	"nine keys": true, "eight keys and repeats": true, "128 lines": true, "pipelined across forms": true,
}

// TestReadHeadMakesTheRequestsHTTPReadRequestMakes: a stream read with
// splitHead's help gives the requests (their header, host, framing, body
// and trailers), in the same number, and the same error as read by
// http.ReadRequest alone; whether the first segment held all of a head or
// part of it.
func TestReadHeadMakesTheRequestsHTTPReadRequestMakes(t *testing.T) {
	for _, tc := range headCases() {
		for _, first := range []int{0, 1, len(tc.data) / 2, len(tc.data) - 1} {
			std, ours := readBoth([]byte(tc.data), first)
			if !reflect.DeepEqual(std.reqs, ours.reqs) || std.err != ours.err {
				t.Errorf("%s (first read %d bytes):\nhttp.ReadRequest: %d requests, %q\n%s\nreadHead: %d requests, %q\n%s",
					tc.name, first, len(std.reqs), std.err, strings.Join(std.reqs, "\n"), len(ours.reqs), ours.err, strings.Join(ours.reqs, "\n"))
			}
			if first == 0 && (ours.split > 0) != (tc.split || wholeHeads[tc.name]) {
				t.Errorf("%s: %d heads not left whole to http.ReadRequest; want the first not to be: %v", tc.name, ours.split, tc.split)
			}
			if first == 0 && (ours.whole > 0) != wholeHeads[tc.name] {
				t.Errorf("%s: parseWhole parsed %d heads; want it to parse the first: %v", tc.name, ours.whole, wholeHeads[tc.name])
			}
		}
	}
}

// FuzzReadHeadMakesTheRequestsHTTPReadRequestMakes: as
// TestReadHeadMakesTheRequestsHTTPReadRequestMakes for any stream.
func FuzzReadHeadMakesTheRequestsHTTPReadRequestMakes(f *testing.F) {
	for _, tc := range headCases() {
		f.Add([]byte(tc.data), uint16(0))
		f.Add([]byte(tc.data), uint16(len(tc.data)/2))
	}
	f.Fuzz(func(t *testing.T, data []byte, first uint16) {
		std, ours := readBoth(data, int(first))
		if !reflect.DeepEqual(std.reqs, ours.reqs) || std.err != ours.err {
			t.Errorf("http.ReadRequest: %d requests, %q\n%s\nreadHead: %d requests, %q\n%s",
				len(std.reqs), std.err, strings.Join(std.reqs, "\n"), len(ours.reqs), ours.err, strings.Join(ours.reqs, "\n"))
		}
	})
}

// TestSDKHeaderKeysAreNoneHTTPReadRequestReads: splitHead takes out of a
// head only lines http.ReadRequest neither reads nor changes: none of the
// keys it reads (Cache-Control only when Pragma is set, and a head with a
// Pragma line is left whole); and each key is textproto's canonical one.
func TestSDKHeaderKeysAreNoneHTTPReadRequestReads(t *testing.T) {
	read := map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
		"Trailer": true, "Pragma": true}
	for _, n := range sdkHeaderNames {
		k := sdkHeaderKeys[n]
		if read[k] {
			t.Errorf("%s is read by http.ReadRequest", k)
		}
		if n != strings.ToLower(n) || k != textproto.CanonicalMIMEHeaderKey(strings.ToUpper(n)) || len(n) > maxSplitKey {
			t.Errorf("%q: key %q", n, k)
		}
		for _, b := range []byte(n) {
			if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-') {
				t.Errorf("%q: byte %q", n, b)
			}
		}
	}
}

// TestBufioPeekGivesTheBufferItself: splitHead writes the head it leaves
// to http.ReadRequest into the bytes bufio.Reader.Peek gave, for the next
// read to read them.
func TestBufioPeekGivesTheBufferItself(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("abcdef"))
	b, _ := br.Peek(6)
	copy(b[2:], "XY")
	br.Discard(2)
	got, _ := io.ReadAll(br)
	if string(got) != "XYef" {
		t.Fatalf("read %q after writing into Peek's bytes", got)
	}
}
