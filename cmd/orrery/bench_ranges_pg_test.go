package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// BenchmarkDatabases measures upserts and point reads spread over many
// logical partitions through three gateways on one PostgreSQL database and
// on two (each its own server, durable: fsync on), a container of four
// partition key ranges either way. Besides the time per operation it
// reports the CPU per operation of the gateways and of the PostgreSQL
// servers (their processes' user and system time from /proc), and the
// operations per second of one database's CPU ("pg-ops/core-s"): the
// figure that says how many databases a write rate needs. Run it with a
// fixed count, e.g. -benchtime=3000x.
func BenchmarkDatabases(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("databases-%d", n), func(b *testing.B) {
			if err := pgtest.Available(); err != nil {
				b.Skipf("PostgreSQL cannot be used: %v", err)
			}
			var pgs []*pgtest.Server
			args := []string{"--postgres-pool", "16", "--partition-key-ranges", "4", "--access-log=false"}
			for range n {
				pg := pgtest.NewServer(b, pgtest.Options{Durable: true})
				pgs = append(pgs, pg)
				args = append(args, "--postgres", pg.URL(b))
			}
			f := startGateways(b, 3, args...)
			ctx := context.Background()
			db, _ := f.clients[0].NewDatabase("db")
			if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "r",
				PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}, Version: 2}}, nil); err != nil {
				b.Fatal(err)
			}
			conts := make([]*azcosmos.ContainerClient, len(f.clients))
			for i, c := range f.clients {
				conts[i], _ = c.NewContainer("db", "r")
			}
			const items = 1000
			payload := strings.Repeat("x", 200)
			for i := range items {
				pk := "p" + strconv.Itoa(i%200)
				if _, err := conts[i%3].UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":"r%d","pk":%q,"payload":%q}`, i, pk, payload), nil); err != nil {
					b.Fatal(err)
				}
			}
			ops := []struct {
				name string
				do   func(c *azcosmos.ContainerClient, r *rand.Rand) error
			}{
				{"upsert", func(c *azcosmos.ContainerClient, r *rand.Rand) error {
					i := r.IntN(100 * items)
					pk := "p" + strconv.Itoa(i%200)
					_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), fmt.Appendf(nil, `{"id":"u%d","pk":%q,"n":%d,"payload":%q}`, i, pk, r.IntN(1000), payload), nil)
					return err
				}},
				{"point-read", func(c *azcosmos.ContainerClient, r *rand.Rand) error {
					i := r.IntN(items)
					_, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString("p"+strconv.Itoa(i%200)), "r"+strconv.Itoa(i), nil)
					return err
				}},
			}
			for _, op := range ops {
				b.Run(op.name, func(b *testing.B) {
					pgCPUs := func() (sum float64, each []float64) {
						for _, pg := range pgs {
							c := pgCPU(b, pg)
							sum += c
							each = append(each, c)
						}
						return sum, each
					}
					gwCPU := func() float64 {
						sum := 0.0
						for _, g := range f.gateways {
							sum += procCPU(g.cmd.Process.Pid)
						}
						return sum
					}
					pg0, each0 := pgCPUs()
					gw0 := gwCPU()
					began := time.Now()
					var next atomic.Int64
					b.SetParallelism(8)
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						k := next.Add(1)
						c := conts[int(k)%len(conts)]
						r := rand.New(rand.NewPCG(uint64(k), 2))
						for pb.Next() {
							if err := op.do(c, r); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.StopTimer()
					wall := time.Since(began).Seconds()
					pg1, each1 := pgCPUs()
					pgUsed := pg1 - pg0
					b.ReportMetric(float64(b.N)/wall, "ops/s")
					b.ReportMetric(pgUsed*1e6/float64(b.N), "pg-cpu-µs/op")
					b.ReportMetric((gwCPU()-gw0)*1e6/float64(b.N), "gw-cpu-µs/op")
					if pgUsed > 0 {
						b.ReportMetric(float64(b.N)/pgUsed, "pg-ops/core-s")
					}
					for i := range each1 {
						b.ReportMetric((each1[i]-each0[i])*1e6/float64(b.N), fmt.Sprintf("pg%d-cpu-µs/op", i))
					}
				})
			}
		})
	}
}

// procCPU is the CPU seconds (user and system) process pid has used.
func procCPU(pid int) float64 {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(st), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // clock ticks
}
