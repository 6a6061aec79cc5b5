package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// unavailableBody is the Cosmos error body of a 503, as the SDK prints it.
var unavailableBody = regexp.MustCompile(`"code":\s*"ServiceUnavailable"`)

// lockedLog collects a child's stderr.
type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestStorageFailureStopsTheServer removes the data directory under a
// server that four clients keep writing to. It once died of "fatal error:
// sync: unlock of unlocked mutex"; now writes that reach the failed store
// are answered 503 in Cosmos's format, and the process logs why and exits
// with status 1.
func TestStorageFailureStopsTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server as a child process")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log lockedLog
	addr := make(chan string, 1)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			log.add(sc.Text())
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	exited := make(chan error, 1)
	var endpoint string
	select {
	case a := <-addr:
		endpoint = "http://" + a + "/"
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("orrery did not report ready:\n%s", log.String())
	}
	go func() { <-logged; exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	ctx := context.Background()
	client := newClient(t, endpoint)
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	container, _ := db.NewContainer("c")

	var acked, unavailable atomic.Int64
	var mu sync.Mutex
	other := map[string]int{} // answers that are neither 201 nor a Cosmos 503
	started := make(chan struct{})
	var startOnce sync.Once
	var wg sync.WaitGroup
	pad := strings.Repeat("p", 32<<10)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				item := fmt.Appendf(nil, `{"id":"w%d-%d","pk":"p%d","pad":%q}`, w, i, w, pad)
				_, err := container.CreateItem(ctx, azcosmos.NewPartitionKeyString(fmt.Sprintf("p%d", w)), item, nil)
				var re *azcore.ResponseError
				switch {
				case err == nil:
					if acked.Add(1) == 20 {
						startOnce.Do(func() { close(started) })
					}
				case errors.As(err, &re) && re.StatusCode == 503 && unavailableBody.MatchString(err.Error()):
					unavailable.Add(1) // and its body is Cosmos's error
				case errors.As(err, &re):
					mu.Lock()
					other[err.Error()]++
					mu.Unlock()
				default:
					return // the server is gone (or the request stuck in the store was dropped)
				}
			}
		}()
	}
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the writers did not get going")
	}
	// Pebble may create a file while the directory is being emptied: retry.
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := os.RemoveAll(data)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("orrery still runs 2 min after its data directory was removed:\n%s", log.String())
	}
	wg.Wait()
	out := log.String()
	t.Logf("%d writes acknowledged, %d answered 503; exit: %v", acked.Load(), unavailable.Load(), exitErr)
	var ee *exec.ExitError
	if !errors.As(exitErr, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit %v, want status 1", exitErr)
	}
	if strings.Contains(out, "panic") || strings.Contains(out, "fatal error") || strings.Contains(out, "goroutine ") {
		t.Errorf("the server died of a panic:\n%s", out)
	}
	if !strings.Contains(out, `level=ERROR msg="storage failed`) || !strings.Contains(out, "orrery: storage failed: storage: unavailable") {
		t.Errorf("no clear log line of the storage failure:\n%s", out)
	}
	if len(other) > 0 {
		t.Errorf("answers other than 201 and 503 ServiceUnavailable: %v", other)
	}
}
