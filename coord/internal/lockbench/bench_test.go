package lockbench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/lock"
)

// locker is one contender's view of a lock: Acquire waits until held.
type locker interface {
	Acquire(ctx context.Context) (release func(context.Context) error, err error)
}

const (
	minBackoff = time.Millisecond
	maxBackoff = 20 * time.Millisecond
)

// ---- coord/lock over Orrery ----

type coordLocker struct{ l *lock.Locker }

func (c coordLocker) Acquire(ctx context.Context) (func(context.Context) error, error) {
	h, err := c.l.Acquire(ctx, "bench", &lock.Options{TTL: 10 * time.Second, MinBackoff: minBackoff, MaxBackoff: maxBackoff})
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}

var (
	orreryOnce sync.Once
	orrery     *lock.Locker
	orreryErr  error
	stopOrrery = func() {}
)

func coordFactory(b *testing.B) func() locker {
	orreryOnce.Do(func() {
		s, stop, err := cosmostest.StartForMain()
		if err != nil {
			orreryErr = err
			return
		}
		stopOrrery = stop
		ctx := context.Background()
		c, err := s.NewClient(nil)
		if err != nil {
			orreryErr = err
			return
		}
		_, _ = c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "bench"}, nil)
		d, _ := c.NewDatabase("bench")
		lc, err := lock.CreateContainer(ctx, d, "locks")
		orrery, orreryErr = lock.New(lc), err
	})
	if orreryErr != nil {
		b.Skipf("no Orrery: %v", orreryErr)
	}
	return func() locker { return coordLocker{orrery} }
}

// ---- etcd's concurrency.Mutex ----

type etcdLocker struct{ s *concurrency.Session }

func (e etcdLocker) Acquire(ctx context.Context) (func(context.Context) error, error) {
	m := concurrency.NewMutex(e.s, "/bench-lock/")
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

var (
	etcdOnce sync.Once
	etcdCli  *clientv3.Client
	etcdErr  error
	stopEtcd = func() {}
)

func etcdFactory(b *testing.B) func() locker {
	etcdOnce.Do(func() {
		bin, err := exec.LookPath("etcd")
		if err != nil {
			etcdErr = err
			return
		}
		cport, pport := freePort(), freePort()
		dir, _ := os.MkdirTemp(tmpfs(), "etcd-")
		cu, pu := "http://127.0.0.1:"+cport, "http://127.0.0.1:"+pport
		cmd := exec.Command(bin, "--name", "bench", "--data-dir", dir,
			"--listen-client-urls", cu, "--advertise-client-urls", cu,
			"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
			"--initial-cluster", "bench="+pu, "--log-level", "error")
		if err := cmd.Start(); err != nil {
			etcdErr = err
			return
		}
		stopEtcd = func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
		etcdCli, etcdErr = clientv3.New(clientv3.Config{Endpoints: []string{cu}, DialTimeout: 10 * time.Second})
		if etcdErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				if _, etcdErr = etcdCli.Get(ctx, "probe"); etcdErr == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
	if etcdErr != nil {
		b.Skipf("no etcd: %v", etcdErr)
	}
	return func() locker {
		s, err := concurrency.NewSession(etcdCli, concurrency.WithTTL(10))
		if err != nil {
			panic(err)
		}
		b.Cleanup(func() { s.Close() })
		return etcdLocker{s}
	}
}

// ---- Redis SET NX PX, released by a compare-and-delete script ----

type redisLocker struct{ c *respConn }

const unlockScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

func (r redisLocker) Acquire(ctx context.Context) (func(context.Context) error, error) {
	var v [8]byte
	_, _ = rand.Read(v[:])
	val := hex.EncodeToString(v[:])
	ceiling := minBackoff
	for {
		reply, err := r.c.do("SET", "bench", val, "NX", "PX", "10000")
		if err != nil {
			return nil, err
		}
		if reply == "OK" {
			return func(context.Context) error {
				_, err := r.c.do("EVAL", unlockScript, "1", "bench", val)
				return err
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(mrand.Int64N(int64(ceiling) + 1))):
		}
		ceiling = min(2*ceiling, maxBackoff)
	}
}

var (
	redisOnce sync.Once
	redisAddr string
	redisErr  error
	stopRedis = func() {}
)

func redisFactory(b *testing.B) func() locker {
	redisOnce.Do(func() {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			redisErr = err
			return
		}
		port := freePort()
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			redisErr = err
			return
		}
		stopRedis = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
		redisAddr = "127.0.0.1:" + port
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := dialRESP(redisAddr)
			if err == nil {
				_, err = c.do("PING")
				c.conn.Close()
			}
			if err == nil || time.Now().After(deadline) {
				redisErr = err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	if redisErr != nil {
		b.Skipf("no redis-server: %v", redisErr)
	}
	return func() locker {
		c, err := dialRESP(redisAddr)
		if err != nil {
			panic(err)
		}
		b.Cleanup(func() { c.conn.Close() })
		return redisLocker{c}
	}
}

// respConn is a minimal Redis protocol client: commands out as arrays of
// bulk strings, replies in as simple strings, errors, integers and bulk
// strings.
type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialRESP(addr string) (*respConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &respConn{conn: c, r: bufio.NewReader(c)}, nil
}

// do sends a command and returns its reply: a string, an int64, or nil.
func (c *respConn) do(args ...string) (any, error) {
	buf := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		buf = fmt.Appendf(buf, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.conn.Write(buf); err != nil {
		return nil, err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-2]
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// ---- the benchmarks ----

var systems = []struct {
	name    string
	factory func(*testing.B) func() locker
}{
	{"coord-orrery", coordFactory},
	{"etcd-mutex", etcdFactory},
	{"redis-setnx", redisFactory},
}

// BenchmarkAcquireRelease is the latency of an uncontended acquire and
// release.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, s := range systems {
		b.Run(s.name, func(b *testing.B) {
			l := s.factory(b)()
			ctx := context.Background()
			for b.Loop() {
				release, err := l.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContended is the throughput of critical sections on one lock
// with 8 × GOMAXPROCS contenders, each with its own connection or session.
func BenchmarkContended(b *testing.B) {
	for _, s := range systems {
		b.Run(s.name, func(b *testing.B) {
			newLocker := s.factory(b)
			var mu sync.Mutex
			ctx := context.Background()
			b.SetParallelism(8)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				l := newLocker()
				mu.Unlock()
				for pb.Next() {
					release, err := l.Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					if err := release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sections/s")
		})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopOrrery()
	stopEtcd()
	stopRedis()
	os.Exit(code)
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// tmpfs is a memory-backed directory when there is one, so etcd's fsyncs
// cost what Orrery's in-memory store and Redis without persistence cost.
func tmpfs() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}
