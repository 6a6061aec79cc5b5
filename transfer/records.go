package transfer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// record is one item of an input file: its number (from 0, in file order)
// and its JSON text.
type record struct {
	n    int64
	item []byte
	// err is set when the record could not be read as JSON.
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

// readRecords reads a JSON array of objects or JSON Lines (one object a line;
// blank lines skipped) and sends each record, stopping early when stop is
// closed. It tells the two forms apart by the first non-blank byte.
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
		dec := json.NewDecoder(br)
		if _, err := dec.Token(); err != nil {
			return err
		}
		for n := int64(0); dec.More(); n++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fmt.Errorf("item %d of the array: %w", n+1, err)
			}
			if !send(record{n: n, item: raw}) {
				return nil
			}
		}
		return nil
	}
	for n := int64(0); ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				n--
			} else {
				rec := record{n: n, item: line}
				if !json.Valid(line) {
					rec.err = errors.New("not valid JSON")
				}
				if !send(rec) {
					return nil
				}
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
