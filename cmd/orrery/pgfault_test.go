package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// isUnavailable reports whether err is a 503 in Cosmos's error format.
func isUnavailable(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == 503 && unavailableBody.MatchString(err.Error())
}

// A gateway killed with SIGKILL under load loses no acknowledged write:
// its clients retry on another gateway, and every write any gateway
// acknowledged is read back, with its value, through every survivor.
func TestSIGKILLOfAGatewayUnderLoadLosesNoAcknowledgedWrite(t *testing.T) {
	needPostgres(t)
	f := startFleet(t, pgtest.URL(t), 3)
	acks := &ackLog{acked: map[string]int{}}
	const writers = 6
	var killed atomic.Bool
	var afterKill [writers]atomic.Int64 // acks of each writer after the kill
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := w % len(f.conts) // this writer's gateway; writers 0 and 3 use the one killed
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("w%d-%d", w, n)
				body := fmt.Sprintf(`{"id":%q,"pk":%q,"v":%d}`, id, pkOf(id), n)
				for ctx.Err() == nil {
					_, err := f.conts[g].UpsertItem(ctx, azcosmos.NewPartitionKeyString(pkOf(id)), []byte(body), nil)
					if err == nil {
						acks.add(id, n)
						if killed.Load() {
							afterKill[w].Add(1)
						}
						break
					}
					// Not acknowledged: retry the same write on the next gateway.
					g = (g + 1) % len(f.conts)
				}
				if afterKill[w].Load() >= 20 {
					return
				}
			}
		}()
	}
	for acks.len() < 60 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	f.gateways[0].kill()
	killed.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("writers did not finish 20 acknowledged writes each after the kill within 45 s: %v", counts(afterKill[:]))
	}
	for w := range writers {
		if afterKill[w].Load() < 20 {
			t.Fatalf("writer %d acknowledged %d writes after the kill, want 20", w, afterKill[w].Load())
		}
	}
	for i := 1; i < len(f.gateways); i++ {
		if !f.alive(i) {
			t.Fatalf("gateway %d died", i)
		}
		acks.checkAll(t, fmt.Sprintf("gateway %d", i), f.conts[i])
	}
	t.Logf("%d acknowledged writes, all present on both survivors", acks.len())
}

// PostgreSQL restarted under load: while it is down every request is
// answered 503 in Cosmos's format (never a 200, never a dropped
// connection), the gateways reconnect on their own once it is back, and
// nothing acknowledged is lost.
func TestPostgresRestartUnderLoadAnswers503ThenRecoversLosingNothing(t *testing.T) {
	needPostgres(t)
	pg := pgtest.NewServer(t, pgtest.Options{})
	f := startFleet(t, pg.URL(t), 2)
	acks := &ackLog{acked: map[string]int{}}
	pk := azcosmos.NewPartitionKeyString("fixed")
	if _, err := f.conts[0].UpsertItem(context.Background(), pk, []byte(`{"id":"fixed","pk":"fixed","v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	// down is 1 from just before the stop to just after the start
	// completes: only then may a request fail.
	var down atomic.Int32
	var (
		mu         sync.Mutex
		bad        []string
		unavail    int
		afterStart [4]atomic.Int64
	)
	var restarted atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range afterStart {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := w % len(f.conts)
			for n := 0; ctx.Err() == nil && afterStart[w].Load() < 20; n++ {
				var err error
				if n%2 == 0 {
					id := fmt.Sprintf("w%d-%d", w, n)
					body := fmt.Sprintf(`{"id":%q,"pk":%q,"v":%d}`, id, pkOf(id), n)
					wasDown := down.Load()
					_, err = f.conts[g].UpsertItem(ctx, azcosmos.NewPartitionKeyString(pkOf(id)), []byte(body), nil)
					if err == nil {
						acks.add(id, n)
						if restarted.Load() && wasDown == 0 {
							afterStart[w].Add(1)
						}
					}
				} else {
					_, err = f.conts[g].ReadItem(ctx, pk, "fixed", nil)
				}
				if err == nil || ctx.Err() != nil {
					continue
				}
				mu.Lock()
				switch {
				case !isUnavailable(err):
					bad = append(bad, err.Error())
				case down.Load() == 0 && !restarted.Load():
					bad = append(bad, "503 before PostgreSQL stopped: "+err.Error())
				default:
					unavail++
				}
				mu.Unlock()
				g = (g + 1) % len(f.conts)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	for acks.len() < 40 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	down.Store(1)
	if err := pg.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	// While it is down, reads of an item and of the catalog answer 503.
	for i, cont := range f.conts {
		if _, err := cont.ReadItem(ctx, pk, "fixed", nil); !isUnavailable(err) {
			t.Errorf("gateway %d: item read with PostgreSQL down: %v, want 503 ServiceUnavailable", i, err)
		}
	}
	time.Sleep(500 * time.Millisecond) // let the writers meet the outage
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	restarted.Store(true)
	down.Store(0)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("writers did not make 20 acknowledged writes each after the restart within 50 s: %v", counts(afterStart[:]))
	}
	mu.Lock()
	if len(bad) > 0 {
		t.Errorf("%d requests failed otherwise than 503 ServiceUnavailable during the outage; first: %s", len(bad), bad[0])
	}
	mu.Unlock()
	for i := range f.gateways {
		if !f.alive(i) {
			t.Fatalf("gateway %d died", i)
		}
		acks.checkAll(t, fmt.Sprintf("gateway %d", i), f.conts[i])
	}
	t.Logf("%d acknowledged writes kept; %d requests answered 503 during the outage", acks.len(), unavail)
}

// A gateway whose PostgreSQL is gone answers reads 503, never from what it
// holds in memory: an item, a database, a container, the database and
// offer feeds. Once PostgreSQL is back the same reads succeed, without a
// restart of the gateway.
func TestGatewayWithoutPostgresAnswersReads503NeverFromCache(t *testing.T) {
	needPostgres(t)
	pg := pgtest.NewServer(t, pgtest.Options{})
	f := startFleet(t, pg.URL(t), 1)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	cont := f.conts[0]
	if _, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"1","pk":"p"}`), nil); err != nil {
		t.Fatal(err)
	}
	db, _ := f.clients[0].NewDatabase("db")
	reads := map[string]func() error{
		"item":                 func() error { _, err := cont.ReadItem(ctx, pk, "1", nil); return err },
		"database":             func() error { _, err := db.Read(ctx, nil); return err },
		"container":            func() error { _, err := cont.Read(ctx, nil); return err },
		"container throughput": func() error { _, err := cont.ReadThroughput(ctx, nil); return err },
		"database feed": func() error {
			_, err := f.clients[0].NewQueryDatabasesPager("SELECT * FROM c", nil).NextPage(ctx)
			return err
		},
		"container feed": func() error {
			_, err := db.NewQueryContainersPager("SELECT * FROM c", nil).NextPage(ctx)
			return err
		},
		"item query": func() error {
			_, err := cont.NewQueryItemsPager("SELECT * FROM c", pk, nil).NextPage(ctx)
			return err
		},
	}
	for name, read := range reads { // warm every cache
		if err := read(); err != nil {
			t.Fatalf("%s with PostgreSQL up: %v", name, err)
		}
	}
	if err := pg.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	for name, read := range reads {
		if err := read(); !isUnavailable(err) {
			t.Errorf("%s with PostgreSQL down: %v, want 503 ServiceUnavailable", name, err)
		}
	}
	if !f.alive(0) {
		t.Fatal("the gateway died when PostgreSQL stopped")
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	for name, read := range reads {
		// The first request on each pooled connection left from before
		// may meet it closed (503); the pool then connects again.
		var err error
		for range 20 {
			if err = read(); err == nil || !isUnavailable(err) {
				break
			}
		}
		if err != nil {
			t.Errorf("%s after PostgreSQL came back: %v", name, err)
		}
	}
}

func counts(cs []atomic.Int64) []int64 {
	out := make([]int64, len(cs))
	for i := range cs {
		out[i] = cs[i].Load()
	}
	return out
}

// A gateway started while its PostgreSQL is down waits for it, saying so,
// instead of exiting; once PostgreSQL starts it becomes ready and serves.
func TestGatewayStartedBeforePostgresWaitsForItThenServes(t *testing.T) {
	needPostgres(t)
	pg := pgtest.NewServer(t, pgtest.Options{})
	url := pg.URL(t)
	if err := pg.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--postgres", url)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(c.kill)
	waiting, ready := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, "waiting for PostgreSQL at ") {
				select {
				case waiting <- line:
				default:
				}
			}
			if m := readyLine.FindStringSubmatch(line); m != nil {
				ready <- m[1]
			}
		}
	}()
	select {
	case line := <-waiting:
		if !strings.Contains(line, postgres.Addr(url)) {
			t.Errorf("the waiting line does not name %s: %s", postgres.Addr(url), line)
		}
	case a := <-ready:
		t.Fatalf("the gateway reported ready at %s with PostgreSQL down", a)
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not say it was waiting for PostgreSQL within 20 s")
	}
	time.Sleep(2 * time.Second) // still waiting, not gone
	if cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatal("the gateway exited while PostgreSQL was down")
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	var addr string
	select {
	case addr = <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not become ready within 30 s of PostgreSQL starting")
	}
	cl := newClient(t, "http://"+addr+"/")
	ctx := context.Background()
	if _, err := cl.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := cl.NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	cont, _ := cl.NewContainer("db", "c")
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"1","pk":"p"}`), nil); err != nil {
		t.Fatal(err)
	}
	r, err := cont.ReadItem(ctx, pk, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Value), `"id":"1"`) {
		t.Fatalf("read back %s", r.Value)
	}
}

// A PostgreSQL that goes silent (a partition that drops packets and closes
// nothing) makes the gateway answer reads and writes 503 within its
// --postgres-timeout, not when TCP gives up; once the partition heals it
// serves again, with every acknowledged write.
func TestSilentPostgresAnswers503WithinTheTimeoutThenRecovers(t *testing.T) {
	needPostgres(t)
	raw := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, raw))
	const timeout = time.Second
	f := startGateways(t, 1, "--postgres", proxy.URL(t, raw), "--postgres-pool", "8",
		"--postgres-timeout", timeout.String())
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	cont := f.conts[0]
	if _, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"acked","pk":"p","v":1}`), nil); err != nil {
		t.Fatal(err)
	}
	proxy.SetBlocked(true)
	bound := 3*timeout + 5*time.Second // the timeout, a few round trips, a loaded machine
	ops := map[string]func() error{
		"read": func() error { _, err := cont.ReadItem(ctx, pk, "acked", nil); return err },
		"upsert": func() error {
			_, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"maybe","pk":"p"}`), nil)
			return err
		},
		"query": func() error {
			_, err := cont.NewQueryItemsPager("SELECT * FROM c", pk, nil).NextPage(ctx)
			return err
		},
	}
	for name, op := range ops {
		start := time.Now()
		err := op()
		took := time.Since(start)
		t.Logf("%s on a silent server: %v", name, took.Round(time.Millisecond))
		if !isUnavailable(err) {
			t.Errorf("%s with PostgreSQL silent: %v, want 503 ServiceUnavailable", name, err)
		}
		if took > bound {
			t.Errorf("%s with PostgreSQL silent took %v, more than %v", name, took, bound)
		}
	}
	if !f.alive(0) {
		t.Fatal("the gateway died while PostgreSQL was silent")
	}
	proxy.SetBlocked(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := cont.ReadItem(ctx, pk, "acked", nil)
		if err == nil {
			var doc struct{ V int }
			if err := json.Unmarshal(r.Value, &doc); err != nil || doc.V != 1 {
				t.Fatalf("the acknowledged item after the partition: %s (%v)", r.Value, err)
			}
			break
		}
		if !isUnavailable(err) || time.Now().After(deadline) {
			t.Fatalf("the gateway does not serve again after the partition healed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := cont.UpsertItem(ctx, pk, []byte(`{"id":"after","pk":"p"}`), nil); err != nil {
		t.Fatalf("upsert after the partition healed: %v", err)
	}
}
