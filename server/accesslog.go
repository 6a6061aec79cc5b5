package server

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// NewTextLogHandler returns a handler that writes what
// slog.NewTextHandler(w, opts) writes. A request's access log line
// (ObserveOptions.AccessLog on a logger of this handler, not one derived
// from it with attributes or groups) is formatted by Observe itself into a
// reused buffer, byte for byte as the text handler formats it, without
// slog's record and per-attribute dispatch, which cost more than the rest
// of the line's work. With opts.ReplaceAttr or opts.AddSource every line
// goes through the text handler.
//
// Its writes, the text handler's and the access log's, reach w one whole
// line at a time, never two at once.
func NewTextLogHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	lw := &lockedWriter{w: w}
	h := &textLogHandler{TextHandler: slog.NewTextHandler(lw, opts), w: lw, direct: true}
	if opts != nil && (opts.ReplaceAttr != nil || opts.AddSource) {
		h.direct = false
	}
	return h
}

// textLogHandler is a slog.TextHandler whose access log lines Observe
// writes itself when direct. Derived handlers (WithAttrs, WithGroup) are
// the text handler's own.
type textLogHandler struct {
	*slog.TextHandler
	w      *lockedWriter
	direct bool
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// accessLine is what the access log says of one request, in its order.
type accessLine struct {
	method, path, op string
	status           int
	substatus        string
	duration         time.Duration
	charge           float64
	activity         string
	fault            string // "" when no fault was injected
}

// appendAttrs appends the line's attributes, as a handler gets them.
func (a *accessLine) appendAttrs(attrs []slog.Attr) []slog.Attr {
	attrs = append(attrs, slog.String("method", a.method), slog.String("path", a.path), slog.String("op", a.op),
		slog.Int("status", a.status), slog.String("substatus", a.substatus), slog.Duration("duration", a.duration),
		slog.Float64("charge", a.charge), slog.String("activity", a.activity))
	if a.fault != "" {
		attrs = append(attrs, slog.String("fault", a.fault))
	}
	return attrs
}

var accessLineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// write writes the line of a record of level info and message "request"
// at t, as the text handler would.
func (h *textLogHandler) write(t time.Time, a *accessLine) error {
	bp := accessLineBuffers.Get().(*[]byte)
	b := appendAccessLine((*bp)[:0], t, a)
	_, err := h.w.Write(b)
	if cap(b) <= 16<<10 {
		*bp = b
		accessLineBuffers.Put(bp)
	}
	return err
}

// appendAccessLine appends the line slog.TextHandler writes for a record
// of level info, message "request", time t and a's attributes.
func appendAccessLine(b []byte, t time.Time, a *accessLine) []byte {
	if !t.IsZero() {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t.Round(0))
		b = append(b, ' ')
	}
	b = append(b, "level=INFO msg=request method="...)
	b = appendTextString(b, a.method)
	b = append(b, " path="...)
	b = appendTextString(b, a.path)
	b = append(b, " op="...)
	b = appendTextString(b, a.op)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(a.status), 10)
	b = append(b, " substatus="...)
	b = appendTextString(b, a.substatus)
	b = append(b, " duration="...)
	b = append(b, a.duration.String()...)
	b = append(b, " charge="...)
	b = strconv.AppendFloat(b, a.charge, 'g', -1, 64)
	b = append(b, " activity="...)
	b = appendTextString(b, a.activity)
	if a.fault != "" {
		b = append(b, " fault="...)
		b = appendTextString(b, a.fault)
	}
	return append(b, '\n')
}

// appendRFC3339Millis formats t as slog's text handler does: RFC 3339 with
// exactly three digits of milliseconds. The date, time and zone of a second
// are formatted once and shared by the lines of that second (see
// accessSecond); only the milliseconds are written per line.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	sec := t.Unix()
	s := lastAccessSecond.Load()
	if s == nil || s.unix != sec || s.loc != t.Location() {
		s = newAccessSecond(t)
		lastAccessSecond.Store(s)
	}
	if s.date == "" {
		return appendRFC3339MillisAsSlog(b, t)
	}
	ms := t.Nanosecond() / int(time.Millisecond) // t.Truncate(time.Millisecond)'s
	b = append(b, s.date...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

// accessSecond is one second of the access log's time in one location:
// "2006-01-02T15:04:05" (date) and "Z" or "-07:00" (zone), as RFC 3339
// writes them. date is empty for a year of other than four digits, which
// slog's handler writes in its own way (appendRFC3339MillisAsSlog).
type accessSecond struct {
	unix       int64
	loc        *time.Location
	date, zone string
}

var lastAccessSecond atomic.Pointer[accessSecond]

func newAccessSecond(t time.Time) *accessSecond {
	s := &accessSecond{unix: t.Unix(), loc: t.Location()}
	if y := t.Year(); y < 0 || y > 9999 {
		return s
	}
	full := t.Truncate(time.Second).Format(time.RFC3339)
	zone := len(full) - len("Z07:00")
	if strings.HasSuffix(full, "Z") {
		zone = len(full) - 1
	}
	s.date, s.zone = full[:zone], full[zone:]
	return s
}

// appendRFC3339MillisAsSlog is what slog's text handler does: RFC 3339
// with exactly three digits of milliseconds, the fourth dropped.
func appendRFC3339MillisAsSlog(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the fourth digit
}

// appendTextString appends s as the text handler writes a string value:
// as is, or quoted (strconv.Quote) when it is empty or holds a space, '=',
// '"', a control character, or a rune that is invalid, a space or not
// printable.
func appendTextString(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func textNeedsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	// Eight bytes at a time while all of them are plain ASCII (0x21 to
	// 0x7f but '"' and '='): an activity id and a path are. A word with
	// any other byte is checked a byte at a time from its first.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !plainWord(s[i : i+8]) {
			break
		}
	}
	// The last bytes, as the word ending the string (it overlaps the
	// words checked).
	if i < len(s) && i >= 8 && i+8 > len(s) && plainWord(s[len(s)-8:]) {
		return false
	}
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if !textPlain[c] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// plainWord tells whether the eight bytes of s are all plain ASCII
// (textPlain): from 0x21 to 0x7f, '"' and '=' excepted.
func plainWord(s string) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	_ = s[7]
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	q, e := w^('"'*lsb), w^('='*lsb)
	// A byte of 0x80 or more sets its top bit in w; one below 0x21 (all
	// below it being 0x21 to 0x7f) in w-0x21*lsb; '"' and '=' are the
	// zero bytes of q and e, which v-lsb & ^v finds.
	return (w|(w-0x21*lsb)|((q-lsb)&^q)|((e-lsb)&^e))&msb == 0
}

// textPlain holds the ASCII bytes a string value may hold unquoted: all but
// what a JSON string escapes (the backslash excepted), space and '='.
var textPlain = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != ' ' && c != '='
	}
	return t
}()
