//go:build !linux

package service

import "syscall"

// devRedisProcAttr: outside Linux there is no parent-death signal; the dev
// Redis is stopped when mvq dev exits normally.
func devRedisProcAttr() *syscall.SysProcAttr { return nil }
