// Package lockbench compares coord/lock with etcd's concurrency.Mutex and
// Redis's SET NX PX in benchmarks. It is a module of its own so that the
// etcd client it needs is not a requirement of coord; run it from this
// directory with GOWORK=off go test -bench . (each comparison is skipped
// when its server binary, etcd or redis-server, is not installed).
package lockbench
