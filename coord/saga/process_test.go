package saga_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/lock"
	"github.com/orrery-db/orrery/coord/saga"
)

// workerEnv makes this test binary, re-executed, run one executor that
// stops at a crash point and waits there to be killed.
const workerEnv = "COORD_SAGA_WORKER"

func runWorker() int {
	s := &cosmostest.Server{Endpoint: os.Getenv("COORD_TEST_ENDPOINT"), Key: os.Getenv("COORD_TEST_KEY")}
	c, err := s.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, _ := c.NewDatabase(os.Getenv("COORD_SAGA_DB"))
	sagas, _ := d.NewContainer("sagas")
	locks, _ := d.NewContainer("locks")
	ledger, _ := d.NewContainer("ledger")
	fail, _ := strconv.Atoi(os.Getenv("COORD_SAGA_FAIL"))
	step, _ := strconv.Atoi(os.Getenv("COORD_SAGA_STEP"))
	phase := os.Getenv("COORD_SAGA_PHASE")
	ex, err := saga.New(sagas, "purchase", purchase(ledger, fail, func(p string, i int) {
		if p == phase && i == step {
			fmt.Println("AT CRASH POINT")
			select {} // until SIGKILL
		}
	}), lock.New(locks), &saga.Options{LeaseTTL: leaseTTL, Owner: "victim"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err = ex.Start(context.Background(), os.Getenv("COORD_SAGA_ID"), nil)
	fmt.Fprintln(os.Stderr, "the crash point was never reached:", err)
	return 3
}

// The executor is a real process killed with SIGKILL at the crash point;
// three recoverers in this process then race to resume the saga.
func TestKilledExecutorProcess(t *testing.T) {
	db := newDB(t)
	good := open(t, db)
	ctx := context.Background()
	for _, sc := range []scenario{{-1, "action-after", 1}, {2, "comp-after", 1}} {
		id := "proc." + sc.String()
		if err := newLedger(ctx, good.ledger, id); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), server.Env()...), workerEnv+"=1", "COORD_SAGA_DB="+db, "COORD_SAGA_ID="+id,
			fmt.Sprintf("COORD_SAGA_FAIL=%d", sc.fail), fmt.Sprintf("COORD_SAGA_STEP=%d", sc.step), "COORD_SAGA_PHASE="+sc.phase)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.Contains(line, "AT CRASH POINT") {
			cmd.Process.Kill()
			t.Fatalf("%v: worker said %q (%v)", sc, line, err)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		var wg sync.WaitGroup
		states := make([]saga.State, 3)
		errs := make([]error, 3)
		for r := range 3 {
			e := open(t, db)
			ex, err := saga.New(e.sagas, "purchase", purchase(good.ledger, sc.fail, func(string, int) {}), e.locks, &saga.Options{LeaseTTL: recoverTTL})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				states[r], errs[r] = ex.Resume(ctx, id)
			}()
		}
		wg.Wait()
		want := saga.Completed
		if sc.fail >= 0 {
			want = saga.Compensated
		}
		for r := range 3 {
			if errs[r] != nil || states[r].Status != want {
				t.Fatalf("%v: recoverer %d: %+v, %v", sc, r, states[r], errs[r])
			}
		}
		fx, err := readEffects(ctx, good.ledger, id)
		if err != nil {
			t.Fatal(err)
		}
		if sc.fail < 0 {
			if fx.Seats != 1 || fx.Payments != 1 || fx.Tickets != 1 || fx.Mail != 1 {
				t.Fatalf("%v: effects %+v", sc, fx)
			}
		} else if fx.Seats != 0 || fx.Payments != 0 || !slices.Equal(fx.Undo, []string{"payments", "seats"}) {
			t.Fatalf("%v: effects %+v", sc, fx)
		}
	}
}
