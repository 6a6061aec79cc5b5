package postgres

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// A bytea[] parameter reaches PostgreSQL element for element, whatever the
// elements (empty, NULL, long, every byte value) and however many (none,
// one, a thousand), on the store's connections (the encoding of its own)
// and on a connection without it (the driver's array codec): both give the
// same array back, and the store's encodes it without an allocation per
// element.
func TestByteaArrayParameterArrivesElementForElement(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plain, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(context.Background())

	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	many := make([][]byte, 1000)
	for i := range many {
		many[i] = fmt.Appendf(nil, "key %d", i)
	}
	cases := map[string][][]byte{
		"empty array":      {},
		"one element":      {[]byte("k")},
		"empty element":    {[]byte{}, []byte("x")},
		"null element":     {[]byte("a"), nil, []byte("b")},
		"every byte value": {every, bytes.Repeat([]byte{0}, 70000)},
		"a thousand":       many,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			for _, q := range []interface {
				QueryRow(context.Context, string, ...any) pgx.Row
			}{s.pool, plain} {
				var n int
				var out [][]byte
				if err := q.QueryRow(ctx, `SELECT cardinality($1::bytea[]), $1::bytea[]`, byteaArray(in)).Scan(&n, &out); err != nil {
					t.Fatal(err)
				}
				if n != len(in) || len(out) != len(in) {
					t.Fatalf("%d elements arrived (%d read back), want %d", n, len(out), len(in))
				}
				for i := range in {
					if (in[i] == nil) != (out[i] == nil) || !bytes.Equal(in[i], out[i]) {
						t.Fatalf("element %d arrived as %q, want %q", i, out[i], in[i])
					}
				}
			}
		})
	}
	var null [][]byte
	if err := s.pool.QueryRow(ctx, `SELECT $1::bytea[]`, byteaArray(nil)).Scan(&null); err != nil || null != nil {
		t.Fatalf("a nil array arrived as %q (%v), want NULL", null, err)
	}

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan := conn.Conn().TypeMap().PlanEncode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, byteaArray{})
	conn.Release()
	if _, ok := plan.(encodeByteaArray); !ok {
		t.Errorf("the store's connections encode a byteaArray with %T, not its own encoding", plan)
	}
	buf := make([]byte, 0, 1<<16)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := (encodeByteaArray{}).Encode(byteaArray(many), buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("encoding %d elements allocates %v times", len(many), allocs)
	}
}
