package transfer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"unicode/utf8"
)

// record is one item of an input file: its number (from 0, in file order),
// its JSON text and where it starts.
type record struct {
	n    int64
	item []byte
	// id is the item's id, once read.
	id string
	// line and col are where the record starts in the input, from 1; col
	// counts characters, not bytes.
	line, col int64
	// err is set when the record is not a JSON object; it names the line
	// and column at fault.
	err error
}

// countingReader counts the bytes read through it, for progress.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	atomic.AddInt64(&c.n, int64(n))
	return n, err
}

func (c *countingReader) bytesRead() int64 { return atomic.LoadInt64(&c.n) }

// InputError is an input that cannot be read on as JSON Lines or a JSON
// array: it says where and why.
type InputError struct {
	Line, Column int64
	Msg          string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// readRecords reads a JSON array of objects or JSON Lines (one object a line;
// blank lines skipped) and sends each record, stopping early when stop is
// closed. It tells the two forms apart by the first non-blank byte. A record
// that is not a JSON object is sent with its error; an input whose structure
// is broken past recovery (an array's brackets, an unterminated string) ends
// with an *InputError.
func readRecords(r io.Reader, out chan<- record, stop <-chan struct{}) error {
	br := bufio.NewReaderSize(r, 1<<20)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte{0xEF, 0xBB, 0xBF}) {
		_, _ = br.Discard(3)
	}
	first, err := peekNonSpace(br)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	send := func(rec record) bool {
		select {
		case out <- rec:
			return true
		case <-stop:
			return false
		}
	}
	if first == '[' {
		return (&arrayReader{br: br, line: 1, col: 1}).read(send)
	}
	return readLines(br, send)
}

// readLines reads JSON Lines: every line that is not blank is a record.
func readLines(br *bufio.Reader, send func(record) bool) error {
	var n int64
	for line := int64(1); ; line++ {
		text, err := br.ReadBytes('\n')
		if len(text) > 0 {
			lead := len(text) - len(bytes.TrimLeft(text, " \t\r\n"))
			item := bytes.TrimSpace(text)
			if len(item) > 0 {
				col := int64(lead) + 1
				rec := record{n: n, item: item, line: line, col: col}
				rec.err = checkItem(item, line, col, true)
				if !send(rec) {
					return nil
				}
				n++
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// checkItem returns nil when item is one JSON object, or an *InputError
// placing the fault, item starting at line and col.
func checkItem(item []byte, line, col int64, oneLine bool) error {
	if json.Valid(item) {
		if item[0] != '{' {
			return &InputError{line, col, fmt.Sprintf("an item must be a JSON object, not %s", jsonKind(item[0]))}
		}
		return nil
	}
	var v json.RawMessage
	err := json.Unmarshal(item, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return &InputError{line, col, "not valid JSON"}
	}
	off := int(se.Offset)
	msg := se.Error()
	if off >= len(item) && item[0] == '{' && oneLine && msg == "unexpected end of JSON input" {
		msg += " (JSON Lines hold each item whole on one line)"
	}
	if off > 0 && off <= len(item) && !(off == len(item) && se.Error() == "unexpected end of JSON input") {
		off-- // Offset counts the byte at fault
	}
	l, c := advance(line, col, item[:min(off, len(item))])
	return &InputError{l, c, msg}
}

// advance returns the position after b, starting at line and col.
func advance(line, col int64, b []byte) (int64, int64) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return line, col + int64(utf8.RuneCount(b))
		}
		line, col, b = line+1, 1, b[i+1:]
	}
	return line, col
}

func jsonKind(b byte) string {
	switch b {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// arrayReader splits a JSON array into its items, keeping count of lines
// and columns, and checks each item with the standard parser: an item that
// is malformed inside balanced brackets is a failed record, a break in the
// array's own structure ends the input.
type arrayReader struct {
	br        *bufio.Reader
	line, col int64 // of the next byte
	noCheck   bool  // only count the items
}

func (a *arrayReader) next() (byte, error) {
	c, err := a.br.ReadByte()
	if err != nil {
		return 0, err
	}
	if c == '\n' {
		a.line, a.col = a.line+1, 1
	} else if c < 0x80 || c >= 0xC0 {
		a.col++ // a continuation byte of UTF-8 is not a new character
	}
	return c, nil
}

func (a *arrayReader) fail(msg string, args ...any) error {
	return &InputError{a.line, a.col, fmt.Sprintf(msg, args...)}
}

// skipSpace consumes white space and returns the next byte, unread.
func (a *arrayReader) skipSpace() (byte, error) {
	for {
		b, err := a.br.Peek(1)
		if err != nil {
			return 0, err
		}
		if c := b[0]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
		_, _ = a.next()
	}
}

func (a *arrayReader) read(send func(record) bool) error {
	_, _ = a.skipSpace()
	startLine, startCol := a.line, a.col
	_, _ = a.next() // '['
	var n int64
	for {
		c, err := a.skipSpace()
		if err == io.EOF {
			return &InputError{a.line, a.col, fmt.Sprintf("unexpected end of input: the array opened at line %d, column %d is not closed", startLine, startCol)}
		}
		if err != nil {
			return err
		}
		if c == ']' && n == 0 {
			_, _ = a.next()
			return a.end()
		}
		rec, err := a.item(n)
		if err != nil {
			return err
		}
		if !send(rec) {
			return nil
		}
		n++
		c, err = a.skipSpace()
		if err == io.EOF {
			return &InputError{a.line, a.col, fmt.Sprintf("unexpected end of input: the array opened at line %d, column %d is not closed", startLine, startCol)}
		}
		if err != nil {
			return err
		}
		switch c {
		case ',':
			_, _ = a.next()
		case ']':
			_, _ = a.next()
			return a.end()
		default:
			return a.fail("expected , or ] after item %d of the array, found %q", n, c)
		}
	}
}

// end checks that nothing but white space follows the array.
func (a *arrayReader) end() error {
	c, err := a.skipSpace()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return a.fail("unexpected %q after the end of the array", c)
}

// item reads one value of the array: up to its matching bracket, or, for a
// value that is not an object or array, up to the next delimiter.
func (a *arrayReader) item(n int64) (record, error) {
	rec := record{n: n, line: a.line, col: a.col}
	var buf []byte
	var stack []byte
	inString, escaped := false, false
	strLine, strCol := int64(0), int64(0)
	for {
		if len(stack) == 0 && !inString && len(buf) > 0 {
			// A scalar ends at a delimiter; a container at its bracket.
			if buf[0] == '{' || buf[0] == '[' {
				break
			}
			b, err := a.br.Peek(1)
			if err == io.EOF || err == nil && bytes.IndexByte([]byte(", \t\r\n]"), b[0]) >= 0 {
				break
			}
		}
		line, col := a.line, a.col
		c, err := a.next()
		if err == io.EOF {
			if inString {
				return rec, &InputError{strLine, strCol, "unexpected end of input: the string starting here is not closed"}
			}
			return rec, &InputError{a.line, a.col, fmt.Sprintf("unexpected end of input in item %d of the array (it starts at line %d, column %d)", n+1, rec.line, rec.col)}
		}
		if err != nil {
			return rec, err
		}
		buf = append(buf, c)
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			case c == '\n':
				return rec, &InputError{strLine, strCol, "the string starting here is not closed on its line"}
			}
		case c == '"':
			inString, strLine, strCol = true, line, col
		case c == '{' || c == '[':
			stack = append(stack, c)
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return rec, &InputError{line, col, fmt.Sprintf("unexpected %q", c)}
			}
			open := stack[len(stack)-1]
			if (open == '{') != (c == '}') {
				if err := checkItem(buf, rec.line, rec.col, false); err != nil {
					return rec, err
				}
				return rec, &InputError{line, col, fmt.Sprintf("%q does not close %q", c, open)}
			}
			stack = stack[:len(stack)-1]
		}
	}
	rec.item = buf
	if !a.noCheck {
		rec.err = checkItem(buf, rec.line, rec.col, false)
	}
	return rec, nil
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for i := 1; ; i++ {
		b, err := br.Peek(i)
		if err != nil {
			return 0, err
		}
		if c := b[i-1]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
		if i >= 1<<16 {
			return 0, errors.New("the input starts with too much white space")
		}
	}
}

// CountRecords counts the records of an input as Import reads them (JSON
// Lines or a JSON array), without checking them: a progress bar's total.
func CountRecords(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	first, err := peekNonSpace(br)
	if err == io.EOF {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if first == '[' {
		var n int64
		a := &arrayReader{br: br, line: 1, col: 1, noCheck: true}
		err := a.read(func(record) bool { n++; return true })
		return n, err
	}
	var n int64
	blank := true
	buf := make([]byte, 1<<20)
	for {
		k, err := br.Read(buf)
		for _, c := range buf[:k] {
			switch c {
			case '\n':
				if !blank {
					n++
				}
				blank = true
			case ' ', '\t', '\r':
			default:
				blank = false
			}
		}
		if err == io.EOF {
			if !blank {
				n++
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
