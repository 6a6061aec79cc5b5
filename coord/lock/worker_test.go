package lock_test

import "os"

const workerEnv = "COORD_LOCK_WORKER"

func runWorker(kind string) int {
	_ = kind
	os.Stderr.WriteString("unknown worker\n")
	return 2
}
