package h1serve

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
)

// The header lines an SDK sends are parsed here instead of by
// http.ReadRequest, which makes a string per value and per key that is not
// one of net/textproto's common headers (no x-ms- header is): about half a
// point read's allocations. Here the values are substrings of one string
// and the keys are interned.
//
// It is done only where the result is provably http.ReadRequest's, and
// http.ReadRequest still reads the request: when the whole head is in the
// reader's buffer, its lines end in CRLF, no line is folded, every byte of
// its header lines is printable ASCII, space or tab, the target is in
// origin form (so the Host line names the host), the version is HTTP/1.1,
// there is at most one Host line and no Pragma line, splitHead takes out the
// lines whose key is one of sdkHeaderKeys (in any case, followed at once by
// the colon) and the Host line, and leaves in the buffer, for
// http.ReadRequest, the request line and every other line, in their order.
// Those keys are ones http.ReadRequest never reads nor changes (it reads
// Host, Content-Length, Transfer-Encoding, Connection, Trailer, Pragma and
// Cache-Control when Pragma is set), and textproto accepts such a line
// always, as the key its CanonicalMIMEHeaderKey makes and the value trimmed
// of spaces and tabs at both ends: so http.ReadRequest refuses the rest
// exactly when it would refuse the whole head, makes of it the same
// request, and the header it makes and the lines taken out here have no key
// in common. Anything else is left whole to http.ReadRequest.

// sdkHeaderNames are the header names the Cosmos DB SDKs (Go, .NET, Java,
// JavaScript, Python) send, lower case. None may be one http.ReadRequest
// reads (see above): TestSDKHeaderKeysAreNoneHTTPReadRequestReads.
var sdkHeaderNames = []string{
	"accept", "accept-encoding", "accept-language", "authorization", "cache-control", "content-type",
	"expect", "if-match", "if-modified-since", "if-none-match", "prefer", "a-im", "user-agent",
	"traceparent", "tracestate", "x-ms-activity-id", "x-ms-consistency-level", "x-ms-continuation",
	"x-ms-date", "x-ms-version", "x-ms-session-token", "x-ms-max-item-count", "x-ms-offer-throughput",
	"x-ms-offer-type", "x-ms-indexing-directive", "x-ms-start-epk", "x-ms-end-epk", "x-ms-useragent",
	"x-ms-client-request-id", "x-ms-read-key-type",
	"x-ms-cosmos-sdk-supportedcapabilities", "x-ms-cosmos-is-batch-request", "x-ms-cosmos-batch-atomic",
	"x-ms-cosmos-batch-continue-on-error", "x-ms-cosmos-is-query-plan-request", "x-ms-cosmos-supported-query-features",
	"x-ms-cosmos-query-version", "x-ms-cosmos-correlated-activityid", "x-ms-cosmos-priority-level",
	"x-ms-cosmos-populateindexmetrics", "x-ms-cosmos-populateindexmetrics-v2", "x-ms-cosmos-intended-collection-rid",
	"x-ms-cosmos-changefeed-wire-format-version", "x-ms-cosmos-allow-tentative-writes",
	"x-ms-cosmos-query-optimisticdirectexecute", "x-ms-cosmos-offer-autopilot-settings", "x-ms-cosmos-min-throughput",
	"x-ms-documentdb-partitionkey", "x-ms-documentdb-partitionkeyrangeid", "x-ms-documentdb-is-upsert",
	"x-ms-documentdb-isquery", "x-ms-documentdb-query", "x-ms-documentdb-query-enablecrosspartition",
	"x-ms-documentdb-query-enable-scan", "x-ms-documentdb-query-parallelizecrosspartitionquery",
	"x-ms-documentdb-query-iscontinuationexpected", "x-ms-documentdb-populatequerymetrics",
	"x-ms-documentdb-populatequotainfo", "x-ms-documentdb-responsecontinuationtokenlimitinkb",
	"x-ms-documentdb-pre-trigger-include", "x-ms-documentdb-post-trigger-include",
	"x-ms-documentdb-expiry-seconds", "x-ms-documentdb-script-enable-logging",
	"x-ms-documentdb-populatepartitionstatistics", "x-ms-documentdb-content-serialization-format",
}

// sdkHeaderKeys maps each of sdkHeaderNames to its canonical key, as
// textproto.CanonicalMIMEHeaderKey makes it.
var sdkHeaderKeys = func() map[string]string {
	m := make(map[string]string, len(sdkHeaderNames))
	for _, n := range sdkHeaderNames {
		m[n] = textproto.CanonicalMIMEHeaderKey(n)
	}
	return m
}()

// maxSplitKey is the longest key looked up in sdkHeaderKeys (longer ones are
// left to http.ReadRequest).
const maxSplitKey = 64

// maxSplitLines is the most header lines splitHead takes a head of.
const maxSplitLines = 128

// splitLine is a header line taken out of a head: its key and where its
// value is in the head (in the block of values, once splitHead returns).
type splitLine struct {
	key        string
	start, end int
}

// splitHead takes the SDK's header lines and the Host line out of the head
// at the start of buf, the bytes buffered in c.bufr (see above). When it
// does, it writes the rest of the head back into the buffer, just before
// the bytes that follow the head, and returns how many bytes of buf to
// discard to start there, the lines taken out (valid until the next call),
// the string their values are in and the Host line's value. skip < 0: the
// head is left whole to http.ReadRequest.
func (c *conn) splitHead(buf []byte) (skip int, split []splitLine, block, host string) {
	// The request line: "METHOD /target HTTP/1.1".
	eol := bytes.IndexByte(buf, '\n')
	if eol < 1 || buf[eol-1] != '\r' {
		return -1, nil, "", ""
	}
	line := buf[:eol-1]
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 || sp+1 >= len(line) || line[sp+1] != '/' || !bytes.HasSuffix(line, []byte(" HTTP/1.1")) {
		return -1, nil, "", ""
	}
	rest, lines := c.splitRest[:0], c.splitLines[:0]
	defer func() { c.splitRest, c.splitLines = rest[:0], lines[:0] }() // kept for the next head
	rest = append(rest, buf[:eol+1]...)
	hostAt := [2]int{-1, -1}
	var lower [maxSplitKey]byte
	pos, headEnd, n := eol+1, -1, 0
	for headEnd < 0 {
		i := bytes.IndexByte(buf[pos:], '\n')
		if i < 1 || buf[pos+i-1] != '\r' {
			return -1, nil, "", "" // the head goes on past the buffer, or a bare LF
		}
		line := buf[pos : pos+i-1]
		start := pos
		pos += i + 1
		if len(line) == 0 {
			headEnd = pos
			break
		}
		if n++; n > maxSplitLines || line[0] == ' ' || line[0] == '\t' {
			return -1, nil, "", "" // a folded line
		}
		for _, b := range line {
			if (b < 0x20 || b > 0x7e) && b != '\t' {
				return -1, nil, "", ""
			}
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 || colon > maxSplitKey {
			rest = append(rest, buf[start:pos]...)
			continue
		}
		for j, b := range line[:colon] {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			lower[j] = b
		}
		name := lower[:colon]
		vs, ve := start+colon+1, start+len(line)
		for vs < ve && (buf[vs] == ' ' || buf[vs] == '\t') {
			vs++
		}
		for ve > vs && (buf[ve-1] == ' ' || buf[ve-1] == '\t') {
			ve--
		}
		switch string(name) {
		case "host":
			if hostAt[0] >= 0 {
				return -1, nil, "", "" // http.ReadRequest refuses two
			}
			hostAt = [2]int{vs, ve}
			continue
		case "pragma":
			return -1, nil, "", "" // http.ReadRequest may set Cache-Control
		}
		key, ok := sdkHeaderKeys[string(name)]
		if !ok {
			rest = append(rest, buf[start:pos]...)
			continue
		}
		lines = append(lines, splitLine{key: key, start: vs, end: ve})
	}
	if len(lines) == 0 {
		return -1, nil, "", ""
	}
	rest = append(rest, '\r', '\n')

	// One string holds every value taken out.
	first := eol + 1
	block = string(buf[first:headEnd])
	for i := range lines {
		lines[i].start -= first
		lines[i].end -= first
	}
	if hostAt[0] >= 0 {
		host = block[hostAt[0]-first : hostAt[1]-first]
	}
	skip = headEnd - len(rest)
	copy(buf[skip:headEnd], rest)
	return skip, lines, block, host
}

// readHead reads a request from br as http.ReadRequest(br) does, taking
// the SDK's header lines out of its head first where splitHead can.
func (c *conn) readHead(br *bufio.Reader) (*http.Request, error) {
	// The head is looked at once buffered, as http.ReadRequest's first
	// read would buffer it; an error is the one that read would return.
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	var split []splitLine
	var block, host string
	if buf, _ := br.Peek(br.Buffered()); len(buf) > 0 {
		var skip int
		if skip, split, block, host = c.splitHead(buf); skip >= 0 {
			br.Discard(skip)
		}
	}
	req, err := http.ReadRequest(br)
	if err != nil || split == nil {
		return req, err
	}
	// The header and host http.ReadRequest would have made of the whole
	// head: its header has none of split's keys; the target is in origin
	// form, so the Host line names the host. Added to its map, which has
	// room for as many keys as lines were left to it, split's lines cost
	// fewer allocations than a map of their own.
	h := req.Header
	vals := make([]string, len(split))
	for i, l := range split {
		v := block[l.start:l.end]
		if vv := h[l.key]; vv != nil {
			h[l.key] = append(vv, v)
		} else {
			vals[i] = v
			h[l.key] = vals[i : i+1 : i+1]
		}
	}
	req.Host = host
	return req, nil
}
