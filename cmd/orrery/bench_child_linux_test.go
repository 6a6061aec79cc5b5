package main

import "syscall"

// benchChildAttr makes a server under measurement die with the benchmark,
// should the benchmark end without stopping it (a panic, a timeout).
func benchChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
