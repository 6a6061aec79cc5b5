package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StandbyName is the name the standby of an HA pair gives the primary
// (its cluster_name, which its WAL receiver sends as application_name), and
// so the name the primary's synchronous_standby_names lists.
const StandbyName = "standby1"

// HA is a primary with a synchronous streaming standby, the way the
// README's "Run highly available" sets one up: initdb and start the
// primary, pg_basebackup -R the standby from it, start the standby, then
// name it in the primary's synchronous_standby_names with
// synchronous_commit on, so that a COMMIT is acknowledged only once the
// standby has the commit record on disk. The test kills the primary
// (KillPrimary) and promotes the standby (Promote), as an operator would.
//
// The standby streams from the primary through a Proxy, the network
// between them, which CutStandbyOff blocks: what the primary sends from
// then on waits in the network, and is lost with the primary when it is
// killed. A synchronous primary acknowledges no commit meanwhile; an
// asynchronous one would, and would lose it.
type HA struct {
	Primary, Standby *Server
	db               string
	link             *Proxy
}

// NewHA starts the pair for t (skipping t when PostgreSQL is not
// installed) with a database of t's own created on the primary before the
// standby was copied from it; both servers are stopped and removed when t
// ends.
func NewHA(t testing.TB) *HA {
	t.Helper()
	if err := Available(); err != nil {
		Skip(t, err)
	}
	primary, err := start(restartable, "")
	if err != nil {
		t.Fatalf("starting the primary: %v", err)
	}
	t.Cleanup(func() {
		primary.run("pg_ctl", "stop", "-m", "immediate", "-D", primary.data())
		os.RemoveAll(primary.dir)
	})
	h := &HA{Primary: &Server{s: primary}, db: fmt.Sprintf("ha%d_%d", os.Getpid(), dbSeq.Add(1))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := exec1(ctx, primary.baseURL+"postgres", "CREATE DATABASE "+h.db); err != nil {
		t.Fatalf("creating database %s: %v", h.db, err)
	}

	standby, err := newServer()
	if err != nil {
		t.Fatalf("starting the standby: %v", err)
	}
	t.Cleanup(func() {
		standby.run("pg_ctl", "stop", "-m", "immediate", "-D", standby.data())
		os.RemoveAll(standby.dir)
	})
	// The copy of the primary, with standby.signal and primary_conninfo
	// written (-R), and the WAL of the copy's duration streamed along (-X).
	h.link = NewProxy(t, fmt.Sprintf("127.0.0.1:%d", primary.port))
	_, linkPort, _ := net.SplitHostPort(h.link.Addr())
	if out, err := standby.run("pg_basebackup", "-h", "127.0.0.1", "-p", linkPort, "-U", "postgres",
		"-D", standby.data(), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	if err := standby.launch(restartable, "-c cluster_name="+StandbyName); err != nil {
		t.Fatalf("starting the standby: %v", err)
	}
	h.Standby = &Server{s: standby}

	// Only now that the standby streams may the primary wait for it.
	for _, q := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = '" + StandbyName + "'",
		"ALTER SYSTEM SET synchronous_commit = 'on'",
		"SELECT pg_reload_conf()",
	} {
		if err := exec1(ctx, primary.baseURL+"postgres", q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for {
		var state string
		err := queryRow(ctx, primary.baseURL+"postgres",
			"SELECT coalesce(max(sync_state), '') FROM pg_stat_replication WHERE application_name = $1", []any{StandbyName}, &state)
		if err == nil && state == "sync" {
			break
		}
		if ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(standby.dir, "log"))
			t.Fatalf("the standby did not become synchronous within a minute (state %q, %v)\n%s", state, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h
}

// URL is the multi-host URL of t's database that gateways are given: both
// servers, of which a connection takes the first that accepts writes
// (target_session_attrs=read-write).
func (h *HA) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?target_session_attrs=read-write",
		h.Primary.s.port, h.Standby.s.port, h.db)
}

// PrimaryURL and StandbyURL are the URLs of t's database on each server
// alone.
func (h *HA) PrimaryURL() string { return h.Primary.s.baseURL + h.db }
func (h *HA) StandbyURL() string { return h.Standby.s.baseURL + h.db }

// CutStandbyOff blocks the network between the primary and the standby:
// nothing the primary sends reaches the standby until the primary is
// killed, and then never.
func (h *HA) CutStandbyOff() { h.link.SetBlocked(true) }

// KillPrimary kills every process of the primary with SIGKILL, as the
// loss of its machine would: the postmaster, its backends, its WAL sender.
// What was on its way to the standby is lost with it.
func (h *HA) KillPrimary() error {
	err := h.Primary.Kill()
	h.link.close()
	return err
}

// Kill kills every process of the server with SIGKILL and waits until its
// postmaster is gone. The postmaster is stopped first, so that it starts
// no process while its children are found (each leads a process group of
// its own, so one signal to a group would not reach them).
func (p *Server) Kill() error {
	pidFile, err := os.ReadFile(filepath.Join(p.s.data(), "postmaster.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	procs := append(children(pid), pid)
	for _, c := range procs {
		syscall.Kill(c, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		alive := false
		for _, c := range procs {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
			alive = alive || err == nil && !strings.Contains(string(stat), ") Z ")
		}
		if !alive {
			return nil
		}
	}
	return fmt.Errorf("the server's processes %v outlived SIGKILL", procs)
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		c, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		rest := string(stat)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// Promote makes the standby a primary (pg_ctl promote, waiting until it
// accepts writes).
func (h *HA) Promote() error {
	if out, err := h.Standby.s.run("pg_ctl", "promote", "-w", "-t", "60", "-D", h.Standby.s.data()); err != nil {
		return fmt.Errorf("pg_ctl promote: %v\n%s", err, out)
	}
	return nil
}

func exec1(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func queryRow(ctx context.Context, url, sql string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}
