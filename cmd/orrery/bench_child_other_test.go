//go:build !linux

package main

import "syscall"

// benchChildAttr: only Linux can tie a child's life to its parent's.
func benchChildAttr() *syscall.SysProcAttr { return nil }
