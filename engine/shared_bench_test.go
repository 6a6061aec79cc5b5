package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/pebble"
	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// BenchmarkBackends compares a point read and an upsert of a 1 KB item on
// Pebble (one process, in-process locks) and PostgreSQL (shared: locks,
// sequence and catalog check through the server), one writer.
func BenchmarkBackends(b *testing.B) {
	ctx := b.Context()
	open := map[string]func(b *testing.B) storage.Store{
		"pebble": func(b *testing.B) storage.Store {
			s, err := pebble.Open(b.TempDir(), pebble.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
		"postgres": func(b *testing.B) storage.Store {
			if err := pgtest.Available(); err != nil {
				b.Skip(err)
			}
			s, err := postgres.Open(context.Background(), pgtest.URL(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, backend := range []string{"pebble", "postgres"} {
		b.Run(backend+"/PointRead", func(b *testing.B) {
			e := openTestEngine(b, open[backend](b))
			if _, err := e.CreateItem(ctx, req("", "p", string(benchBody("1", "p")))); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := e.ReadItem(ctx, req("1", "p", "")); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(backend+"/Upsert", func(b *testing.B) {
			e := openTestEngine(b, open[backend](b))
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprint(i % 100)
				if _, err := e.UpsertItem(ctx, req("", "p", string(benchBody(id, "p")))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
